//! Asking Nova for the one-shot `status` commands: which logins (the pure
//! `nova_cell::model_logins`), asked through the shared `edpm_io::openstack::asker` within what
//! the command's deadline leaves.

use std::sync::Arc;
use std::time::Duration;

use super::AppError;
use edpm_core::condition::Time;
use edpm_core::model::Model;
use edpm_core::nova::NovaEvidence;
use edpm_core::snapshot::Snapshot;
use edpm_io::openstack::asker::{Asker, explicit};

/// For the one-shot `status` commands: asks Nova when the snapshot came from the cluster and
/// some node runs nova, and files the answer as evidence.
#[allow(clippy::too_many_arguments, reason = "the run's Nova settings, one by one")]
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
        Some(name) => {
            Some(cx.cluster()?.block_on(explicit(cx.cluster()?.client(), name)).map_err(AppError::failure)?)
        }
        None => None,
    };
    let Some(logins) = edpm_core::nova_cell::model_logins(snap, model, explicit.as_ref()) else {
        return Ok(());
    };
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
    // Nova out of reach since this very ask is no time: a one-shot command asks once, and
    // "(since <its own moment>)" would be the clock, not the evidence. `status wait` says
    // since its first poll that failed.
    let ev = match ev {
        NovaEvidence::Unavailable { message, since: Some(t), last_answer } if t == now => {
            NovaEvidence::Unavailable { message, since: None, last_answer }
        }
        other => other,
    };
    snap.evidence.nova = Some(Arc::new(ev));
    Ok(())
}
