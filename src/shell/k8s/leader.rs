//! Leader election over a `coordination.k8s.io` Lease, so that of several replicas of the
//! controller only one writes. kube-lease-manager does the protocol (it holds the Lease by
//! server-side apply, renews it `grace` before it expires, takes over an expired one, and
//! releases it when the last receiver is dropped): it is maintained and built on the same kube
//! version as this crate, where kube-leader-election still requires kube 4.

use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Client, Error};

/// How long a Lease lasts and how long before its end the holder renews it: a replica that
/// stops renewing is replaced within `DURATION` seconds.
pub(crate) const DURATION: u64 = 15;
pub(crate) const GRACE: u64 = 5;

/// Leadership of `name` in the client's namespace as `identity`: the receiver says whether
/// this replica leads now; dropping it releases the Lease (the task ends once released).
pub(crate) async fn elect(
    client: &Client,
    name: &str,
    identity: &str,
) -> Result<(watch::Receiver<bool>, JoinHandle<()>), Error> {
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
    Ok((rx, done))
}
