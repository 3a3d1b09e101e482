//! Leader election over a `coordination.k8s.io` Lease, so that of several replicas of the
//! controller only one writes. kube-lease-manager does the protocol (it holds the Lease by
//! server-side apply, renews it `grace` before it expires, takes over an expired one, and
//! releases it when the last receiver is dropped): it is maintained and built on the same kube
//! version as this crate, where kube-leader-election still requires kube 4.
//!
//! One thing it does not do: when its renewals fail, it keeps saying "leader" (it reports
//! only changes it has seen), so a replica cut off from the Lease would go on writing after
//! another took the expired Lease over. [`Leadership`] adds a guard: it reads the Lease every
//! [`CHECK`] and this replica leads only while the Lease, as last read, names it and was
//! renewed recently enough that it cannot have expired yet ([`SAFETY`] before its end). When
//! the reads fail too, the last good read ages out, and the replica stops writing before the
//! Lease could be taken.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::Api;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Client, Error};
use crate::condition::Time;

/// How long a Lease lasts and how long before its end the holder renews it: a replica that
/// stops renewing is replaced within `DURATION` seconds.
pub(crate) const DURATION: u64 = 15;
pub(crate) const GRACE: u64 = 5;
/// How often the guard reads the Lease.
pub(crate) const CHECK: Duration = Duration::from_secs(2);
/// How long before the Lease's end, as last read, this replica stops writing: a write takes
/// time, and the Lease's times have a second's precision.
pub(crate) const SAFETY: i64 = 3;

/// Whether this replica may write.
pub(crate) struct Leadership {
    /// The lease manager's view (always true without election).
    manager: watch::Receiver<bool>,
    /// Until when the Lease, as last read, is this replica's (unix seconds); `None` without
    /// election (no guard).
    confirmed_until: Option<Arc<Mutex<i64>>>,
    tasks: Vec<JoinHandle<()>>,
    /// Keeps the channel of a replica without election open.
    _always: Option<watch::Sender<bool>>,
}

impl Leadership {
    /// A replica without election: it always leads.
    pub(crate) fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        Leadership { manager: rx, confirmed_until: None, tasks: Vec::new(), _always: Some(tx) }
    }

    /// Whether this replica leads now: the manager says so and the Lease, as last read,
    /// cannot have expired.
    pub(crate) fn leads(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        *self.manager.borrow() && self.confirmed(now)
    }

    fn confirmed(&self, now: i64) -> bool {
        self.confirmed_until.as_ref().is_none_or(|c| now < *c.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits for the manager's view to change; an error when election ended.
    pub(crate) async fn changed(&mut self) -> Result<(), watch::error::RecvError> {
        self.manager.changed().await
    }

    /// Releases the Lease (if held) and waits up to `grace` for it; false when it was not
    /// released in time.
    pub(crate) async fn release(self, grace: Duration) -> bool {
        let Leadership { manager, tasks, confirmed_until, .. } = self;
        // Dropping the receiver makes the lease manager release the Lease; the guard ends.
        drop(manager);
        drop(confirmed_until);
        let mut ok = true;
        for t in tasks {
            if !t.is_finished() && tokio::time::timeout(grace, t).await.is_err() {
                ok = false;
            }
        }
        ok
    }
}

/// Leadership of `name` in the client's namespace as `identity`.
pub(crate) async fn elect(client: &Client, name: &str, identity: &str) -> Result<Leadership, Error> {
    let params = LeaseParams::new(identity, DURATION, GRACE).with_field_manager("edpm-agent-leader");
    let manager = LeaseManagerBuilder::new(client.kube(), name)
        .with_namespace(client.namespace())
        .with_parameters(params)
        .build()
        .await
        .map_err(|e| Error::Request {
            action: format!(
                "taking part in leader election on Lease {name} in namespace {}",
                client.namespace()
            ),
            message: e.to_string(),
            hint: "; grant get, create and patch on leases (resourceNames for the patch)".into(),
            code: None,
        })?;
    let (rx, task) = manager.watch().await;
    let done = tokio::spawn(async move {
        if let Ok(Err(e)) = task.await {
            tracing::warn!(error = %e, "leader election ended with an error");
        }
    });
    let confirmed_until = Arc::new(Mutex::new(0));
    // The guard ends on its own once the manager has released the Lease: not waited for.
    tokio::spawn(guard(
        client.clone(),
        name.to_string(),
        identity.to_string(),
        Arc::downgrade(&confirmed_until),
    ));
    Ok(Leadership { manager: rx, confirmed_until: Some(confirmed_until), tasks: vec![done], _always: None })
}

/// Reads the Lease every [`CHECK`] until the [`Leadership`] is gone, and records until when
/// it is this replica's. It holds no receiver of the manager's: the manager releases the
/// Lease when the last one is dropped.
async fn guard(client: Client, name: String, identity: String, until: std::sync::Weak<Mutex<i64>>) {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.kube(), client.namespace());
    let mut warned = false;
    loop {
        tokio::time::sleep(CHECK).await;
        if until.strong_count() == 0 {
            return; // released
        }
        match client.within_time(api.get(&name)).await {
            Ok(lease) => {
                warned = false;
                let end = held_until(&lease, &identity).unwrap_or(0);
                if let Some(until) = until.upgrade() {
                    *until.lock().unwrap_or_else(|e| e.into_inner()) = end - SAFETY;
                }
            }
            Err(e) if !warned => {
                warned = true;
                tracing::warn!(lease = %name, error = %e, "cannot read the leader Lease; this replica stops writing when the last reading ages out");
            }
            Err(_) => {}
        }
    }
}

/// When the Lease's current claim ends (unix seconds), if `identity` holds it.
fn held_until(lease: &k8s_openapi::api::coordination::v1::Lease, identity: &str) -> Option<i64> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = serde_json::to_value(spec.renew_time.as_ref()?).ok()?;
    let renewed = Time::parse(renewed.as_str()?)?;
    Some(renewed.0 + i64::from(spec.lease_duration_seconds?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: &str, seconds: i32) -> k8s_openapi::api::coordination::v1::Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l"},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": seconds},
        }))
        .unwrap()
    }

    #[test]
    fn a_lease_is_ours_until_its_claim_ends() {
        let at = |s: &str| Time::parse(s).unwrap().0;
        let l = lease("me", "2026-11-26T10:00:00.123456Z", 15);
        assert_eq!(held_until(&l, "me"), Some(at("2026-11-26T10:00:15Z")));
        assert_eq!(held_until(&l, "other"), None, "another's claim is not ours");
    }

    #[test]
    fn without_a_recent_reading_the_replica_does_not_lead() {
        let (tx, rx) = watch::channel(true);
        let until = Arc::new(Mutex::new(100));
        let l = Leadership {
            manager: rx,
            confirmed_until: Some(until.clone()),
            tasks: Vec::new(),
            _always: Some(tx),
        };
        assert!(l.confirmed(99));
        assert!(!l.confirmed(100), "the claim as last read has ended (less the safety margin)");
        assert!(Leadership::always().leads());
    }
}
