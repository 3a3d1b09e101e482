//! Where the snapshot comes from: each configured source is a directory of manifests
//! ([`dir`]) or the cluster (`k8s::read`); their snapshots are merged in order. Nothing
//! after this point knows which one it got.

pub(crate) mod dir;

use crate::k8s;
use crate::settings::{Settings, SourceSpec};
use crate::snapshot::{Snapshot, SnapshotError};

#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error("cannot read {path}: {source}; check that the path exists and is readable")]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no manifests (*.yaml, *.yml, *.json) found under {path}; point --source at the directory holding the data-plane CRs"
    )]
    NoManifests { path: String },
    #[error(
        "{path}: the manifests read so far total {read} bytes, past the {limit}-byte cap edpm-agent puts on one run against runaway input; point --source at the data-plane manifests only"
    )]
    TooLarge { path: String, read: u64, limit: u64 },
    #[error("{0}")]
    Snapshot(#[from] SnapshotError),
    #[error("{0}")]
    Cluster(#[from] k8s::Error),
}

impl From<k8s::read::ReadError> for SourceError {
    fn from(e: k8s::read::ReadError) -> Self {
        match e {
            k8s::read::ReadError::Api(e) => SourceError::Cluster(e),
            k8s::read::ReadError::Snapshot(e) => SourceError::Snapshot(e),
        }
    }
}

/// Loads every configured source in order and merges the snapshots; an object defined by two
/// sources is an error, as it would be within one. `cluster` connects (once) when a source
/// is the cluster. `with_evidence` also reads what readiness needs from the cluster
/// (Deployments, Jobs, BaremetalSets, Leases, edpm-agent's status objects); a directory
/// source always holds whatever its files hold.
/// `lines` keeps the line of every field read from a file (for `explain`).
pub(crate) fn load<'c>(
    settings: &Settings,
    with_evidence: bool,
    cluster: &dyn Fn() -> Result<&'c k8s::Cluster, k8s::Error>,
    lines: bool,
) -> Result<Snapshot, SourceError> {
    let mut snap = Snapshot::default();
    let mut budget = dir::Budget::default();
    for spec in &settings.sources {
        let part = match spec {
            SourceSpec::Dir(path) => dir::load(path, settings.namespace.as_deref(), lines, &mut budget)?,
            SourceSpec::Kube => {
                let c = cluster()?;
                c.block_on(k8s::read::snapshot(c.client(), settings.selector.as_deref(), with_evidence))?
            }
        };
        snap.merge(part)?;
    }
    for path in &snap.not_manifests {
        tracing::debug!(path, "skipped: holds no Kubernetes object");
    }
    Ok(snap)
}
