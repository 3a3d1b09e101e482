//! Asking Nova about the computes, for the `status` commands (once per evaluation) and the
//! controller's Nova poller: the login named by `--nova-credentials` ([`explicit`]), and the
//! bookkeeping of failures (since when Nova could not be asked, when it last answered). The
//! HTTP is [`super::nova`]; which logins ask is the pure `nova_cell::model_logins`; the
//! verdict is the pure `nova`.

use std::sync::Mutex;
use std::time::Duration;

use super::nova::NovaClient;
use crate::k8s::read::ReadError;
use edpm_core::condition::Time;
use edpm_core::nova::{Login, NovaEvidence};

/// The Secret `--nova-credentials` names could not be read (other than its absence).
#[derive(Debug, thiserror::Error)]
#[error("Secret {name} (--nova-credentials) cannot be read: {source}")]
pub struct CredentialsUnreadable {
    name: String,
    source: ReadError,
}

/// The login of a Secret named by `--nova-credentials`, read by name (never listed): its
/// absence or a missing key is the nodes' Unknown (`Err` inside); a failure to read it is the
/// command's (or the evaluation's) error.
pub async fn explicit(
    client: &crate::k8s::Client,
    name: &str,
) -> Result<Result<Login, String>, CredentialsUnreadable> {
    let snap = crate::k8s::read::secret_by_name(client, name)
        .await
        .map_err(|source| CredentialsUnreadable { name: name.to_string(), source })?;
    Ok(edpm_core::nova_cell::explicit_login(&snap, name))
}

/// A Nova client and what its last answers were.
pub struct Asker {
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
    pub fn new(timeout: Duration) -> Asker {
        Asker { client: NovaClient::new(timeout), track: Mutex::default() }
    }

    /// One answer for these logins (or the reason none could be made), with the failure
    /// bookkeeping filled in.
    pub async fn ask(&self, logins: &Result<Vec<Login>, String>, now: Time) -> NovaEvidence {
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
    pub fn counts(&self) -> (u64, u64) {
        self.client.counts()
    }
}
