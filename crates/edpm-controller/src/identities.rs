//! `status controller --node-identities`: the node agents' identities of each NodeSet kept as
//! `status identities` makes them (`edpm_io::k8s::identity::reconcile`), by the leader, after an
//! evaluation of the NodeSet: when its nodes changed (a node added gets its identity, one
//! removed loses it), and at least every `every` (tokens past half their lifetime replaced,
//! an identity deleted by hand made again). Nothing is sent for a NodeSet whose nodes are as
//! they were and whose last pass is recent.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use edpm_core::identity::{self, Access};
use edpm_core::model::Model;
use edpm_core::snapshot::Snapshot;
use edpm_io::k8s::Client;

/// What the flags say.
#[derive(Debug, Clone)]
pub struct IdentityOptions {
    /// The API server's URL as the nodes reach it (default: the controller's own).
    pub server: Option<String>,
    /// The CA bundle (PEM) the nodes verify it with (default: the controller's own).
    pub ca_pem: Option<String>,
    /// Each new token's lifetime, in seconds.
    pub lifetime: i64,
    /// The longest time between two passes over a NodeSet.
    pub every: Duration,
}

/// The identities kept, and each NodeSet's nodes at its last pass.
pub(crate) struct Identities {
    opts: IdentityOptions,
    last: Mutex<BTreeMap<String, (Vec<String>, Instant)>>,
}

impl Identities {
    pub(crate) fn new(opts: IdentityOptions) -> Identities {
        Identities { opts, last: Mutex::new(BTreeMap::new()) }
    }

    /// One pass over the evaluated NodeSets (the leader's, after its status writes). A
    /// failure is logged and retried at the next evaluation: the status writes stand.
    pub(crate) async fn keep(&self, client: &Client, snap: &Snapshot, model: &Model) {
        let access = Access {
            server: self.opts.server.clone().unwrap_or_else(|| client.server().to_string()),
            ca_pem: self.opts.ca_pem.clone().or_else(|| client.ca().map(identity::pem)),
            namespace: client.namespace().to_string(),
        };
        for g in &model.groups {
            let nodes: Vec<String> = g.members.iter().map(|m| m.key.clone()).collect();
            let due = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&g.name)
                .is_none_or(|(was, at)| *was != nodes || at.elapsed() >= self.opts.every);
            let set =
                identity::nodeset_of(snap, model, &g.name, client.namespace(), client.lease_namespace());
            let Some(set) = set.filter(|_| due) else { continue };
            let now = edpm_io::clock::now().0;
            match edpm_io::k8s::identity::reconcile(client, &set, &access, self.opts.lifetime, now).await {
                Ok(o) => {
                    if !o.applied.is_empty() || !o.deleted.is_empty() || o.secret_written {
                        tracing::info!(
                            nodeset = %g.name,
                            applied = o.applied.len(),
                            deleted = o.deleted.len(),
                            minted = o.minted.len(),
                            dropped = o.dropped.len(),
                            "node agent identities kept"
                        );
                    }
                    self.last
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(g.name.clone(), (nodes, Instant::now()));
                }
                Err(e) => {
                    tracing::warn!(nodeset = %g.name, error = %e, "cannot keep the node agents' identities")
                }
            }
        }
    }
}
