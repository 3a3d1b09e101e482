//! Which of the watched kinds' CRDs are installed, from one watch of the cluster's
//! `customresourcedefinitions`, metadata-only (kube's `PartialObjectMeta`: names and versions,
//! never a schema): a CRD named `<plural>.<group>` of a watched kind appearing starts that
//! kind's watch at once (`super::watch`), and one deleted empties its store. Nothing is asked
//! while nothing changes: the watch's bookmarks keep it current.
//!
//! A field selector cannot name a set of CRDs, so every CRD's metadata is watched (names are
//! not secret) and only the names of the watched kinds are kept. Established is a condition in
//! `status`, which metadata does not carry: a kind whose CRD appeared is asked for (a one-item
//! list) until it answers, a few times over a few seconds, and then watched, its watcher's
//! backoff taking over should it still not be served.
//!
//! Where the watch is refused (an older RBAC without the ClusterRole: 403, or no such API:
//! 404), the controller says so once, and each kind whose CRD is not installed is asked for
//! again every `--crd-recheck`, as before the watch.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch::Sender;

use super::Client;
use super::WatchEvent;

/// The resource watched, as `WatchEvent::Failed` and the watch-restart metric name it.
pub const KIND: &str = "CustomResourceDefinition";

/// What a kind's watch knows of its CRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Installed,
    Absent,
    /// Not known from the CRD watch (refused, or a kind no CRD defines): an absent kind is
    /// asked for again every `--crd-recheck`.
    Unknown,
}

/// Whether a kind of `group` is defined by a CRD: Kubernetes' own groups (the core group, a
/// group without a dot such as `batch`, and `*.k8s.io`, which CRDs may not take without the
/// API reviewers' approval) are not.
pub fn defined_by_crd(group: &str) -> bool {
    group.contains('.') && !group.ends_with(".k8s.io") && !group.ends_with(".kubernetes.io")
}

/// The grant an older RBAC lacks, as the warning names it.
const GRANT: &str = "grant list and watch on customresourcedefinitions.apiextensions.k8s.io (the ClusterRole edpm-agent-controller-crds of packaging/kubernetes/rbac-controller.yaml) for an operator installed later to be watched at once, and no request to be made while nothing changes";

/// Follows the CRDs of `kinds` (`<plural>.<group>` → the presence of each kind's watch of that
/// name) until nobody listens on `events`. Refused (403, 404): said once, every kind's
/// presence turns `Unknown` (its watch falls back to the recheck), and the watch ends.
pub async fn follow(
    client: Client,
    kinds: BTreeMap<String, Vec<Sender<Presence>>>,
    recheck: std::time::Duration,
    events: UnboundedSender<WatchEvent>,
) {
    let api: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client.kube());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    tracing::info!(kinds = kinds.len(), "watching the CRDs of the watched kinds (metadata only)");
    // The names of a listing in progress.
    let mut listing: Option<BTreeSet<String>> = None;
    let set = |name: &str, p: Presence| {
        for tx in kinds.get(name).into_iter().flatten() {
            tx.send_if_modified(|now| std::mem::replace(now, p) != p);
        }
    };
    let name = |o: &PartialObjectMeta<CustomResourceDefinition>| o.metadata.name.clone().unwrap_or_default();
    while let Some(item) = stream.next().await {
        if events.is_closed() {
            return; // the controller is gone
        }
        match item {
            Ok(watcher::Event::Init) => listing = Some(BTreeSet::new()),
            Ok(watcher::Event::InitApply(o)) => {
                let n = name(&o);
                if kinds.contains_key(&n) {
                    listing.get_or_insert_with(BTreeSet::new).insert(n);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let found = listing.take().unwrap_or_default();
                for n in kinds.keys() {
                    set(n, if found.contains(n) { Presence::Installed } else { Presence::Absent });
                }
            }
            Ok(watcher::Event::Apply(o)) => set(&name(&o), Presence::Installed),
            Ok(watcher::Event::Delete(o)) => set(&name(&o), Presence::Absent),
            Err(e) => match super::code(&e) {
                Some(code @ (403 | 404)) => {
                    tracing::warn!(
                        reason = %e,
                        "cannot watch CustomResourceDefinitions ({code}): falling back to asking for each kind whose CRD is not installed every {}s (--crd-recheck); {GRANT}",
                        recheck.as_secs()
                    );
                    for txs in kinds.values() {
                        for tx in txs {
                            tx.send_replace(Presence::Unknown);
                        }
                    }
                    // The senders stay until the controller goes: a watch that sees them
                    // dropped takes the controller for gone.
                    events.closed().await;
                    return;
                }
                code => {
                    if events.send(WatchEvent::Failed { kind: KIND, code, error: e.to_string() }).is_err() {
                        return;
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubernetes_own_groups_are_not_defined_by_crds() {
        for g in ["", "batch", "coordination.k8s.io", "events.k8s.io", "apps"] {
            assert!(!super::defined_by_crd(g), "{g}");
        }
        for g in ["dataplane.openstack.org", "agent.edpm.openstack.org", "nova.openstack.org"] {
            assert!(super::defined_by_crd(g), "{g}");
        }
    }
}
