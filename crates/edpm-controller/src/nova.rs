//! The controller's Nova poller: `NovaComputeReady` kept current between the evaluations that
//! the cluster's changes bring. Which logins ask is the pure `nova_cell`'s, and the asking is
//! `edpm_io::openstack::asker`'s, both shared with the one-shot `status` commands.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Error;
use edpm_core::model::Model;
use edpm_core::nova::{Login, NovaEvidence};
use edpm_core::nova_cell::{group_logins_with as group_logins, merge_logins as union};
use edpm_core::snapshot::Snapshot;
use edpm_io::openstack::asker::{Asker, explicit};

/// The controller's Nova poller: asks every `interval` (jittered by up to 10 %) while some
/// node runs nova, backs off (doubling, up to 5 minutes) while Nova cannot be asked, and says
/// so on `changed` when an answer could move a verdict (times aside: a steady cloud makes no
/// writes), and after each failed ask (so that the NodeSets are evaluated again and their
/// Secrets read again: a fixed password is picked up at the next ask). Logins are kept per
/// NodeSet, replaced at each evaluation of it, and dropped with it; a change of them is asked
/// about at once. One ask at a time: the poll task and an evaluation that needs an answer
/// take turns, and the second reuses the first's answer when it was asked with the same logins.
pub(crate) struct Poller {
    inner: Arc<Inner>,
    /// `--nova-credentials`.
    credentials: Option<String>,
}

struct Inner {
    asker: Asker,
    shared: Mutex<Shared>,
    /// Held while asking (across the network wait): one ask at a time.
    asking: tokio::sync::Mutex<()>,
    /// Wakes the poll task when the logins changed.
    wake: tokio::sync::Notify,
    changed: tokio::sync::mpsc::UnboundedSender<()>,
}

/// What an evaluation or the poller asks with: the logins, or why there are none.
type Logins = Result<Vec<Login>, String>;

#[derive(Default)]
struct Shared {
    /// NodeSet → its logins (or why it has none); only NodeSets that run nova.
    by_set: std::collections::BTreeMap<String, Logins>,
    /// The last evidence and the logins it was asked with.
    latest: Option<(Arc<NovaEvidence>, Logins)>,
}

/// The longest wait between asks while Nova cannot be asked.
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// The longest interval the poller uses (the command line refuses more): its arithmetic never
/// overflows, whatever it is given.
const INTERVAL_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long after a panic the poll task is started again.
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// The wait before the next ask: the interval after an answer; after a failure, twice the
/// last wait, at least the interval and at most [`BACKOFF_MAX`].
fn next_wait(last: Duration, interval: Duration, answered: bool) -> Duration {
    if answered { interval } else { last.saturating_mul(2).clamp(interval, BACKOFF_MAX.max(interval)) }
}

/// Runs `make()`'s task until it ends; one that panics is started again after `restart`, so
/// that a bug in an ask cannot silently stop the asking. Ends when a run ends by itself.
async fn supervise<F, Fut>(what: &'static str, restart: Duration, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        match tokio::spawn(make()).await {
            Ok(()) => return,
            Err(e) if e.is_panic() => {
                let p = e.into_panic();
                let message = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(
                    panic = %edpm_core::excerpt::printable(&message),
                    restart_in = ?restart,
                    "{what} failed (a bug: please report it); starting it again"
                );
                tokio::time::sleep(restart).await;
            }
            Err(_) => return, // cancelled: the runtime is shutting down
        }
    }
}

/// Why the poll task asks.
#[derive(Clone, Copy, PartialEq)]
enum Why {
    /// Its interval passed: asked even when the last answer is current, to refresh it.
    Due,
    /// The logins changed (or an evaluation needs an answer): not when the last answer was
    /// already asked with the current logins.
    LoginsChanged,
}

impl Poller {
    /// With `--no-nova` (`polling` None) no poller; else one started, and the channel that
    /// says when its answer changed (silent without a poller).
    pub(crate) fn start_polling(
        polling: Option<&super::NovaPolling>,
    ) -> (Option<Poller>, tokio::sync::mpsc::UnboundedReceiver<()>) {
        let (tx, changed) = tokio::sync::mpsc::unbounded_channel();
        let poller = polling.map(|p| Poller::start(p.interval, p.timeout, p.credentials.clone(), tx));
        (poller, changed)
    }

    pub(crate) fn start(
        interval: Duration,
        timeout: Duration,
        credentials: Option<String>,
        changed: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Poller {
        let inner = Arc::new(Inner {
            asker: Asker::new(timeout),
            shared: Mutex::default(),
            asking: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
            changed,
        });
        let task = inner.clone();
        let interval = interval.min(INTERVAL_MAX);
        tokio::spawn(supervise("the Nova poller", RESTART_AFTER, move || poll(task.clone(), interval)));
        Poller { inner, credentials }
    }

    /// The NodeSets that run nova, as last evaluated: those an answer that changed reaches.
    pub(crate) fn nodesets(&self) -> std::collections::BTreeSet<String> {
        lock(&self.inner.shared).by_set.keys().cloned().collect()
    }

    /// An evaluation's part: each touched NodeSet's logins replace what the poller had of it (a
    /// NodeSet gone or no longer running nova drops out, and with the last the polling stops);
    /// then the evidence, when a touched NodeSet runs nova. The `--nova-credentials` Secret is
    /// read only then; a failure to read it (other than its absence) fails the evaluation,
    /// retried, rather than turning every compute Unknown for an API server's hiccup.
    pub(crate) async fn for_evaluation(
        &self,
        client: &edpm_io::k8s::Client,
        snap: &Snapshot,
        model: &Model,
        touched: &edpm_core::controller::touch::Touch,
    ) -> Result<Option<Arc<NovaEvidence>>, Error> {
        use edpm_core::controller::touch::Touch;
        let evaluated: Vec<String> = match touched {
            Touch::NodeSets(sets) => sets.iter().cloned().collect(),
            Touch::All => model.groups.iter().map(|g| g.name.clone()).collect(),
        };
        let runs_nova = model.groups.iter().any(|g| edpm_core::nova_cell::runs_nova(snap, g).is_some());
        let explicit = match self.credentials.as_deref() {
            Some(name) if runs_nova => Some(explicit(client, name).await.map_err(Error::failure)?),
            _ => None,
        };
        let found: Vec<(String, Logins)> = model
            .groups
            .iter()
            .filter_map(|g| group_logins(snap, g, explicit.as_ref()).map(|l| (g.name.clone(), l)))
            .collect();
        self.offer(&evaluated, found);
        Ok(if runs_nova { self.evidence().await } else { None })
    }

    /// Notes what an evaluation of `evaluated` found: each NodeSet's logins (none: it runs no
    /// nova, or is gone). A change of the logins wakes the poller.
    fn offer(&self, evaluated: &[String], found: Vec<(String, Logins)>) {
        let mut s = lock(&self.inner.shared);
        let before = s.logins();
        for name in evaluated {
            s.by_set.remove(name);
        }
        s.by_set.extend(found);
        if s.logins() != before {
            self.inner.wake.notify_one();
        }
    }

    /// Forgets the NodeSets not in `existing` (an evaluation of everything: a NodeSet deleted
    /// while the watch was down has no event of its own).
    pub(crate) fn retain(&self, existing: &[String]) {
        let mut s = lock(&self.inner.shared);
        let before = s.logins();
        s.by_set.retain(|name, _| existing.contains(name));
        if s.logins() != before {
            self.inner.wake.notify_one();
        }
    }

    /// The evidence for an evaluation whose NodeSets run nova: the last answer when it was
    /// asked with the current logins, else one asked now (so that no status is written without
    /// Nova's answer, or with one asked as somebody else).
    async fn evidence(&self) -> Option<Arc<NovaEvidence>> {
        self.inner.ask(Why::LoginsChanged).await.map(|(_, ev)| ev)
    }
}

impl Inner {
    /// Asks Nova with the current logins (one ask at a time), unless `why` allows reusing an
    /// answer already asked with them; publishes it and says on `changed` when it could move a
    /// verdict or could not be had. `None`: no NodeSet runs nova. Else whether Nova answered,
    /// and the evidence now current.
    async fn ask(&self, why: Why) -> Option<(bool, Arc<NovaEvidence>)> {
        let _turn = self.asking.lock().await;
        let logins = {
            let s = lock(&self.shared);
            let logins = s.logins()?;
            if why == Why::LoginsChanged
                && let Some((ev, asked)) = &s.latest
                && *asked == logins
            {
                return Some((matches!(**ev, NovaEvidence::Answer(_)), ev.clone()));
            }
            logins
        };
        let ev = self.asker.ask(&logins, edpm_io::clock::now()).await;
        let answered = matches!(ev, NovaEvidence::Answer(_));
        let (keystone, compute) = self.asker.counts();
        tracing::debug!(keystone, compute, answered, "asked Nova");
        let ev = Arc::new(ev);
        let changed = {
            let mut s = lock(&self.shared);
            let changed = s.latest.as_ref().is_none_or(|(old, _)| old.steady() != ev.steady());
            s.latest = Some((ev.clone(), logins));
            changed
        };
        if changed || !answered {
            let _ = self.changed.send(());
        }
        Some((answered, ev))
    }
}

impl Shared {
    fn logins(&self) -> Option<Logins> {
        union(self.by_set.values())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Asks every `interval` (see [`Poller`]) until the controller is gone.
async fn poll(task: Arc<Inner>, interval: Duration) {
    let mut wait = interval;
    loop {
        let why = tokio::select! {
            () = tokio::time::sleep(spread(wait)) => Why::Due,
            () = task.wake.notified() => Why::LoginsChanged,
        };
        match task.ask(why).await {
            None => wait = interval,
            Some((answered, _)) => wait = next_wait(wait, interval, answered),
        }
        if task.changed.is_closed() {
            break;
        }
    }
}

/// 90 % to 110 % of `d` (at most [`INTERVAL_MAX`]), so that replicas and restarts do not ask
/// in step.
fn spread(d: Duration) -> Duration {
    let d = d.min(INTERVAL_MAX);
    let half = edpm_io::k8s::jitter(d / 5); // between d/10 and d/5
    d - d / 10 + (half.saturating_sub(d / 10)) * 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use edpm_core::nova::testing::login;

    #[test]
    fn the_wait_doubles_while_nova_fails_up_to_five_minutes_and_resets_on_an_answer() {
        let i = Duration::from_secs(30);
        let mut w = i;
        let mut seen = Vec::new();
        for _ in 0..6 {
            w = next_wait(w, i, false);
            seen.push(w.as_secs());
        }
        assert_eq!(seen, [60, 120, 240, 300, 300, 300]);
        assert_eq!(next_wait(w, i, true), i);
        // An interval above the cap is kept.
        assert_eq!(next_wait(Duration::from_secs(600), Duration::from_secs(600), false).as_secs(), 600);
    }

    #[test]
    fn no_interval_overflows_the_poller() {
        // The largest a user could have typed, and what the loop makes of it.
        let huge = Duration::from_secs(u64::MAX);
        assert_eq!(next_wait(huge, huge, false), huge);
        assert_eq!(next_wait(Duration::MAX, Duration::from_secs(30), false), BACKOFF_MAX);
        let s = spread(huge);
        assert!(s <= INTERVAL_MAX + INTERVAL_MAX / 10 && s >= INTERVAL_MAX - INTERVAL_MAX / 10, "{s:?}");
        assert!(spread(Duration::MAX) <= INTERVAL_MAX * 2);
        assert!(spread(Duration::ZERO).is_zero());
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_poller_is_started_again() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let started = tokio::time::Instant::now();
        supervise("a test poller", Duration::from_secs(5), move || {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                assert!(n >= 2, "a bug in run {n}");
            }
        })
        .await;
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 3, "two panics, then a run that ends");
        assert_eq!(started.elapsed(), Duration::from_secs(10), "each restart after the pause");
    }

    #[test]
    fn the_spread_stays_within_ten_percent() {
        for _ in 0..200 {
            let d = spread(Duration::from_secs(30)).as_millis();
            assert!((27_000..=33_000).contains(&d), "{d}");
        }
    }

    #[tokio::test]
    async fn one_ask_serves_the_woken_poller_and_the_evaluation_and_its_answer_is_told() {
        use edpm_testkit::fake_nova::{self as fake, FakeNova};
        let f = FakeNova::start();
        f.set_services(vec![fake::service("s0", "c0", "up", "enabled")]);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let p = Poller::start(Duration::from_secs(3600), Duration::from_secs(2), None, tx);
        let l = Login {
            auth_url: f.auth_url(),
            user: fake::USER.into(),
            password: Some(fake::PASSWORD.into()),
            ..login(fake::USER, fake::PASSWORD, "nova-cell1")
        };
        // The new logins wake the poll task, and the evaluation wants an answer at once.
        p.offer(&["a".into()], vec![("a".into(), Ok(vec![l]))]);
        let ev = p.evidence().await.unwrap();
        assert!(matches!(*ev, NovaEvidence::Answer(_)), "{ev:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!((f.keystone_requests(), f.compute_requests()), (1, 2), "one ask: {:?}", f.requests());
        // The first answer is told, so that the other NodeSets running nova get it too.
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "told once");
        // Asked again with the same logins: the answer is reused.
        p.evidence().await.unwrap();
        assert_eq!(f.compute_requests(), 2);
        // Everything evaluated, and the NodeSet is gone: nothing to ask with any more.
        p.retain(&[]);
        assert!(p.evidence().await.is_none());
    }

    #[tokio::test]
    async fn the_poller_keeps_logins_per_nodeset_and_forgets_a_nodeset_gone() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let p = Poller::start(Duration::from_secs(3600), Duration::from_secs(1), None, tx);
        p.offer(
            &["a".into(), "b".into()],
            vec![
                ("a".into(), Ok(vec![login("nova", "p", "c1")])),
                ("b".into(), Ok(vec![login("nova2", "p", "c2")])),
            ],
        );
        assert_eq!(lock(&p.inner.shared).logins().unwrap().unwrap().len(), 2);
        // b evaluated again, without nova (or deleted): its login goes.
        p.offer(&["b".into()], vec![]);
        let left = lock(&p.inner.shared).logins().unwrap().unwrap();
        assert_eq!((left.len(), left[0].user.as_str()), (1, "nova"));
        p.offer(&["a".into()], vec![]);
        assert_eq!(lock(&p.inner.shared).logins(), None, "no node runs nova: nothing to ask");
    }
}
