//! Asking Nova about the computes, for the `status` commands (once per evaluation) and the
//! controller's poller (`controller::nova`): which logins, and the bookkeeping of failures
//! (since when Nova could not be asked, when it last answered). The HTTP is `shell::openstack::nova`; the verdict is
//! the pure `nova`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::AppError;
use crate::shell::openstack::nova::NovaClient;
use edpm_core::condition::Time;
use edpm_core::model::Model;
use edpm_core::nova::{Login, NovaEvidence};
use edpm_core::snapshot::Snapshot;

/// The logins that can ask Nova about the model's nova computes (every group's, merged);
/// `None` when no node runs a service of type `nova` (then Nova is not asked at all).
pub(super) fn logins(
    snap: &Snapshot,
    model: &Model,
    explicit: Option<&Result<Login, String>>,
) -> Option<Result<Vec<Login>, String>> {
    union(model.groups.iter().filter_map(|g| group_logins(snap, g, explicit)))
}

/// One group's logins: the explicitly named Secret's for every group that runs nova, else
/// its cells' (`nova_cell::group_logins`).
pub(crate) fn group_logins(
    snap: &Snapshot,
    g: &edpm_core::model::HostGroup,
    explicit: Option<&Result<Login, String>>,
) -> Option<Result<Vec<Login>, String>> {
    match explicit {
        Some(e) => edpm_core::nova_cell::runs_nova(snap, g).map(|_| e.clone().map(|l| vec![l])),
        None => edpm_core::nova_cell::group_logins(snap, g),
    }
}

/// The login of a Secret named by `--nova-credentials`, read by name (never listed): its
/// absence or a missing key is the nodes' Unknown (`Err` inside); a failure to read it is the
/// command's (or the evaluation's) error.
pub(crate) async fn explicit(
    client: &edpm_io::k8s::Client,
    name: &str,
) -> Result<Result<Login, String>, AppError> {
    let snap = crate::shell::k8s::read::secret_by_name(client, name)
        .await
        .map_err(|e| AppError::failure(format!("Secret {name} (--nova-credentials) cannot be read: {e}")))?;
    Ok(edpm_core::nova_cell::explicit_login(&snap, name))
}

/// Logins merged (each once), or the first reason when none could be made.
pub(crate) fn union(
    found: impl IntoIterator<Item = impl std::borrow::Borrow<Result<Vec<Login>, String>>>,
) -> Option<Result<Vec<Login>, String>> {
    let mut any = false;
    let mut logins: Vec<Login> = Vec::new();
    let mut problem = None;
    for f in found {
        any = true;
        match f.borrow() {
            Ok(v) => {
                for l in v {
                    match logins.iter_mut().find(|x| x.key() == l.key() && x.password == l.password) {
                        Some(x) => {
                            for c in &l.cells {
                                if !x.cells.contains(c) {
                                    x.cells.push(c.clone());
                                }
                            }
                        }
                        None => logins.push(l.clone()),
                    }
                }
            }
            Err(why) => {
                problem.get_or_insert_with(|| why.clone());
            }
        }
    }
    if !any {
        return None;
    }
    logins.sort();
    match (logins.is_empty(), problem) {
        (true, Some(why)) => Some(Err(why)),
        _ => Some(Ok(logins)),
    }
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
    pub(crate) fn new(timeout: Duration) -> Asker {
        Asker { client: NovaClient::new(timeout), track: Mutex::default() }
    }

    /// One answer for these logins (or the reason none could be made), with the failure
    /// bookkeeping filled in.
    pub(crate) async fn ask(&self, logins: &Result<Vec<Login>, String>, now: Time) -> NovaEvidence {
        let ev = match logins {
            Ok(logins) => self.client.ask(logins, now).await,
            Err(why) => NovaEvidence::Unavailable {
                message: edpm_core::redact::scrub(why).into_owned(),
                since: None,
                last_answer: None,
            },
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
#[allow(clippy::too_many_arguments)] // the run's Nova settings, one by one
pub(super) fn ask_into(
    cx: &super::Context,
    asker: &std::cell::OnceCell<Asker>,
    timeout: Duration,
    credentials: Option<&str>,
    snap: &mut Snapshot,
    model: &Model,
    now: Time,
) -> Result<(), AppError> {
    let explicit = match credentials {
        Some(name) => Some(cx.cluster()?.block_on(explicit(cx.cluster()?.client(), name))?),
        None => None,
    };
    let Some(logins) = logins(snap, model, explicit.as_ref()) else { return Ok(()) };
    let asker = asker.get_or_init(|| Asker::new(timeout));
    let cluster = cx.cluster()?;
    // Under a command deadline (`status report --timeout`) Nova gets at most half of what is
    // left, so the writes keep theirs; a Nova that does not answer by then is Unknown on the
    // nodes it would judge, and says why.
    let ev = match cluster.client().left() {
        Some(left) => {
            let share = left / 2;
            match cluster.block_on(async { tokio::time::timeout(share, asker.ask(&logins, now)).await }) {
                Ok(ev) => ev,
                Err(_) => NovaEvidence::Unavailable {
                    message: format!(
                        "Nova did not answer within {:.1} s, the half of what was left of the command's --timeout it may use; give a longer --timeout, or check that Keystone and Nova answer (--nova-timeout bounds each request)",
                        share.as_secs_f64()
                    ),
                    since: None,
                    last_answer: None,
                },
            }
        }
        None => cluster.block_on(asker.ask(&logins, now)),
    };
    snap.evidence.nova = Some(Arc::new(ev));
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A cell's login, for tests (here and the controller's poller).
    pub(crate) fn login(user: &str, password: &str, cell: &str) -> Login {
        Login {
            auth_url: "http://ks".into(),
            region: "regionOne".into(),
            user: user.into(),
            domain: "Default".into(),
            project: "service".into(),
            password: Some(password.into()),
            application_credential: None,
            ca_bundle: None,
            ca_secret: None,
            secret: format!("{cell}-secret"),
            cells: vec![cell.into()],
            from: edpm_core::nova::LoginFrom::Cell,
        }
    }

    #[test]
    fn logins_merge_per_session_and_a_set_without_any_gives_its_reason() {
        let a = Ok(vec![login("nova", "p", "nova-cell1")]);
        let b = Ok(vec![login("nova", "p", "nova-cell2")]);
        let merged = union([&a, &b]).unwrap().unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].cells, ["nova-cell1", "nova-cell2"]);
        // A rotated password is another login: asked with, not merged away.
        let c = Ok(vec![login("nova", "q", "nova-cell3")]);
        assert_eq!(union([&a, &c]).unwrap().unwrap().len(), 2);
        let bad: Result<Vec<Login>, String> = Err("no NovaCell".into());
        assert_eq!(union([&bad]), Some(Err("no NovaCell".into())));
        assert_eq!(
            union([&bad, &a]).unwrap().unwrap().len(),
            1,
            "one set's problem does not hide another's login"
        );
        assert_eq!(union(Vec::<&Result<Vec<Login>, String>>::new()), None);
    }
}
