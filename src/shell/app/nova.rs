//! Asking Nova about the computes, for the `status` commands (once per evaluation) and the
//! controller (a poller): which logins, and the bookkeeping of failures (since when Nova could
//! not be asked, when it last answered). The HTTP is `shell::openstack::nova`; the verdict is
//! the pure `nova`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::AppError;
use crate::condition::Time;
use crate::model::Model;
use crate::nova::{Login, NovaEvidence};
use crate::shell::openstack::nova::NovaClient;
use crate::snapshot::Snapshot;

/// The logins that can ask Nova about the model's nova computes; `None` when no node runs a
/// service of type `nova` (then Nova is not asked at all). When no login can be made, the
/// first reason why, for an Unavailable.
pub(super) fn logins(snap: &Snapshot, model: &Model) -> Option<Result<Vec<Login>, String>> {
    if !model
        .groups
        .iter()
        .any(|g| !g.members.is_empty() && crate::nova_cell::nova_service(snap, g).is_some())
    {
        return None;
    }
    let (logins, problems) = crate::nova_cell::logins(snap, model);
    if logins.is_empty() {
        let why =
            problems.first().map_or_else(|| "no cell could be resolved".to_string(), ToString::to_string);
        return Some(Err(format!("no Keystone credentials for Nova: {why}")));
    }
    Some(Ok(logins))
}

/// A Nova client and what its last answers were.
pub(crate) struct Asker {
    client: NovaClient,
    track: Mutex<Track>,
}

#[derive(Default)]
struct Track {
    /// When Nova last answered.
    last_answer: Option<Time>,
    /// Since when it has not (the first failure in a row).
    since: Option<Time>,
}

impl Asker {
    pub(crate) fn new(timeout: Duration) -> Result<Asker, AppError> {
        let client = NovaClient::new(timeout).map_err(|e| AppError::failure(e.to_string()))?;
        Ok(Asker { client, track: Mutex::default() })
    }

    /// One answer for these logins (or the reason none could be made), with the failure
    /// bookkeeping filled in.
    pub(crate) async fn ask(&self, logins: &Result<Vec<Login>, String>, now: Time) -> NovaEvidence {
        let ev = match logins {
            Ok(logins) => self.client.ask(logins, now).await,
            Err(why) => NovaEvidence::Unavailable { message: why.clone(), since: None, last_answer: None },
        };
        let mut t = self.track.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match ev {
            NovaEvidence::Answer(a) => {
                t.last_answer = Some(now);
                t.since = None;
                NovaEvidence::Answer(a)
            }
            NovaEvidence::Unavailable { message, .. } => {
                let since = *t.since.get_or_insert(now);
                tracing::warn!(error = %message, "Nova could not be asked");
                NovaEvidence::Unavailable { message, since: Some(since), last_answer: t.last_answer }
            }
        }
    }

    /// Requests made so far: (Keystone, compute).
    pub(crate) fn counts(&self) -> (u64, u64) {
        self.client.counts()
    }
}

/// For the one-shot `status` commands: asks Nova when the snapshot came from the cluster and
/// some node runs nova, and files the answer as evidence.
pub(super) fn ask_into(
    cx: &super::Context,
    asker: &std::cell::OnceCell<Asker>,
    timeout: Duration,
    snap: &mut Snapshot,
    model: &Model,
    now: Time,
) -> Result<(), AppError> {
    let Some(logins) = logins(snap, model) else { return Ok(()) };
    let asker = match asker.get() {
        Some(a) => a,
        None => {
            let made = Asker::new(timeout)?;
            asker.get_or_init(|| made)
        }
    };
    let cluster = cx.cluster()?;
    let ev = cluster.block_on(asker.ask(&logins, now));
    snap.evidence.nova = Some(Arc::new(ev));
    Ok(())
}

/// The controller's Nova poller: asks every `interval` (jittered by up to 10 %) while some
/// node runs nova, backs off (doubling, up to 5 minutes) while Nova cannot be asked, and says
/// so on `changed` only when the answer could move a verdict (times aside), so a steady cloud
/// makes no writes.
pub(crate) struct Poller {
    asker: Arc<Asker>,
    shared: Arc<Mutex<Shared>>,
}

#[derive(Default)]
struct Shared {
    /// The logins the last evaluations found, by session (`None`: no node runs nova).
    logins: std::collections::BTreeMap<(String, String, String, String, String), Login>,
    /// Why no login could be made, when none could.
    problem: Option<String>,
    latest: Option<Arc<NovaEvidence>>,
}

/// The longest wait between asks while Nova cannot be asked.
const BACKOFF_MAX: Duration = Duration::from_secs(300);

impl Poller {
    pub(crate) fn start(
        interval: Duration,
        timeout: Duration,
        changed: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Result<Poller, AppError> {
        let poller = Poller { asker: Arc::new(Asker::new(timeout)?), shared: Arc::default() };
        let (asker, shared) = (poller.asker.clone(), poller.shared.clone());
        tokio::spawn(async move {
            let mut wait = interval;
            loop {
                tokio::time::sleep(spread(wait)).await;
                let Some(logins) = lock(&shared).logins() else {
                    wait = interval;
                    continue;
                };
                let ev = asker.ask(&logins, clock()).await;
                let (keystone, compute) = asker.counts();
                tracing::debug!(
                    keystone,
                    compute,
                    answered = matches!(ev, NovaEvidence::Answer(_)),
                    "asked Nova"
                );
                wait = match ev {
                    NovaEvidence::Answer(_) => interval,
                    NovaEvidence::Unavailable { .. } => (wait * 2).clamp(interval, BACKOFF_MAX.max(interval)),
                };
                if lock(&shared).publish(ev) && changed.send(()).is_err() {
                    break;
                }
            }
        });
        Ok(poller)
    }

    /// Notes the logins an evaluation found (`None`: its NodeSets run no nova).
    pub(crate) fn offer(&self, logins: Option<&Result<Vec<Login>, String>>) {
        let mut s = lock(&self.shared);
        match logins {
            None => {}
            Some(Ok(v)) => {
                for l in v {
                    let k = l.key();
                    let key =
                        (k.0.to_string(), k.1.to_string(), k.2.to_string(), k.3.to_string(), k.4.to_string());
                    s.logins.insert(key, l.clone());
                }
                s.problem = None;
            }
            Some(Err(why)) => s.problem = Some(why.clone()),
        }
    }

    /// The evidence for an evaluation whose NodeSets run nova: the last answer, or, before
    /// the first, one asked now (so that no status is written without it).
    pub(crate) async fn evidence(&self) -> Option<Arc<NovaEvidence>> {
        let logins = {
            let s = lock(&self.shared);
            if let Some(latest) = &s.latest {
                return Some(latest.clone());
            }
            s.logins()?
        };
        let ev = self.asker.ask(&logins, clock()).await;
        let mut s = lock(&self.shared);
        s.publish(ev);
        s.latest.clone()
    }
}

impl Shared {
    fn logins(&self) -> Option<Result<Vec<Login>, String>> {
        if !self.logins.is_empty() {
            return Some(Ok(self.logins.values().cloned().collect()));
        }
        self.problem.clone().map(Err)
    }

    /// Keeps the new evidence; true when it could move a verdict.
    fn publish(&mut self, ev: NovaEvidence) -> bool {
        let changed = self.latest.as_ref().is_none_or(|old| old.steady() != ev.steady());
        self.latest = Some(Arc::new(ev));
        changed
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// 90 % to 110 % of `d`, so that replicas and restarts do not ask in step.
fn spread(d: Duration) -> Duration {
    let half = crate::shell::k8s::jitter(d / 5); // between d/10 and d/5
    d - d / 10 + (half - d / 10) * 2
}

fn clock() -> Time {
    use crate::node::shell::agent_loop::Clock;
    crate::node::shell::agent_loop::SystemClock.now()
}
