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
//! renewed recently enough that it cannot have expired yet ([`SAFETY_MS`] before its end). When
//! the reads fail too, the last good read ages out, and the replica stops writing before the
//! Lease could be taken.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::Api;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Client, Error};

/// How long a Lease lasts and how long before its end the holder renews it: a replica that
/// stops renewing is replaced within `DURATION` seconds.
pub(crate) const DURATION: u64 = 15;
pub(crate) const GRACE: u64 = 5;
/// How often the guard reads the Lease while the manager says this replica leads. The manager
/// renews `GRACE` before the end; the guard must see the renewal before `SAFETY_MS` before the
/// end, so `CHECK` stays well below `GRACE - SAFETY_MS` (else leadership would flicker off at
/// renewals).
pub(crate) const CHECK: Duration = Duration::from_secs(1);
/// How long before the Lease's end, as last read, this replica stops writing (milliseconds):
/// a write takes time.
pub(crate) const SAFETY_MS: i64 = 2_000;

/// Whether this replica may write.
pub(crate) struct Leadership {
    /// The lease manager's view (always true without election).
    manager: watch::Receiver<bool>,
    /// Until when the Lease, as last read, is this replica's (unix milliseconds); `None`
    /// without election (no guard).
    confirmed_until: Option<Arc<Mutex<i64>>>,
    /// The manager's task, which ends once the Lease is released.
    task: Option<JoinHandle<()>>,
    /// The guard's task: it holds a receiver of the manager's, so it is stopped before the
    /// Lease is released (the manager releases when the last receiver is gone).
    guard: Option<JoinHandle<()>>,
    /// Keeps the channel of a replica without election open.
    _always: Option<watch::Sender<bool>>,
}

impl Leadership {
    /// A replica without election: it always leads.
    pub(crate) fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        Leadership { manager: rx, confirmed_until: None, task: None, guard: None, _always: Some(tx) }
    }

    /// Whether this replica leads now: the manager says so and the Lease, as last read,
    /// cannot have expired.
    pub(crate) fn leads(&self) -> bool {
        *self.manager.borrow() && self.confirmed(now_ms())
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
        let Leadership { manager, task, guard, .. } = self;
        if let Some(g) = guard {
            g.abort();
            let _ = g.await; // cancelled: its receiver is dropped
        }
        // Dropping the last receiver makes the lease manager release the Lease.
        drop(manager);
        match task {
            Some(t) => t.is_finished() || tokio::time::timeout(grace, t).await.is_ok(),
            None => true,
        }
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
    let g = tokio::spawn(guard(
        client.clone(),
        name.to_string(),
        identity.to_string(),
        confirmed_until.clone(),
        rx.clone(),
    ));
    Ok(Leadership {
        manager: rx,
        confirmed_until: Some(confirmed_until),
        task: Some(done),
        guard: Some(g),
        _always: None,
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// While the manager says this replica leads, reads the Lease every [`CHECK`] (and at once
/// when the manager's view changes), and records until when it is this replica's.
async fn guard(
    client: Client,
    name: String,
    identity: String,
    until: Arc<Mutex<i64>>,
    mut manager: watch::Receiver<bool>,
) {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.kube(), client.namespace());
    let mut warned = false;
    loop {
        tokio::select! {
            changed = manager.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(CHECK) => {}
        }
        if !*manager.borrow() {
            continue; // not leading: nothing to confirm
        }
        match client.within_time(api.get(&name)).await {
            Ok(lease) => {
                warned = false;
                let end = held_until(&lease, &identity).unwrap_or(0);
                *until.lock().unwrap_or_else(|e| e.into_inner()) = end - SAFETY_MS;
            }
            Err(e) if !warned => {
                warned = true;
                tracing::warn!(lease = %name, error = %e, "cannot read the leader Lease; this replica stops writing when the last reading ages out");
            }
            Err(_) => {}
        }
    }
}

/// When the Lease's current claim ends (unix milliseconds), if `identity` holds it.
fn held_until(lease: &k8s_openapi::api::coordination::v1::Lease, identity: &str) -> Option<i64> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = serde_json::to_value(spec.renew_time.as_ref()?).ok()?;
    let renewed: jiff::Timestamp = renewed.as_str()?.parse().ok()?;
    Some(renewed.as_millisecond() + i64::from(spec.lease_duration_seconds?) * 1000)
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
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let l = lease("me", "2026-11-26T10:00:00.123456Z", 15);
        assert_eq!(held_until(&l, "me"), Some(at("2026-11-26T10:00:15.123Z")), "to the millisecond");
        assert_eq!(held_until(&l, "other"), None, "another's claim is not ours");
    }

    #[test]
    fn without_a_recent_reading_the_replica_does_not_lead() {
        let (tx, rx) = watch::channel(true);
        let until = Arc::new(Mutex::new(100));
        let l = Leadership {
            manager: rx,
            confirmed_until: Some(until.clone()),
            task: None,
            guard: None,
            _always: Some(tx),
        };
        assert!(l.confirmed(99));
        assert!(!l.confirmed(100), "the claim as last read has ended (less the safety margin)");
        assert!(Leadership::always().leads());
    }
}
