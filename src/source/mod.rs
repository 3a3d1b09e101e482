//! Where the snapshot comes from: each configured source is a directory of manifests
//! ([`dir`]) or the cluster (`k8s::read`); their snapshots are merged in order. Nothing
//! after this point knows which one it got.

pub(crate) mod dir;

use edpm_core::settings::{Settings, SourceSpec};
use edpm_core::snapshot::{Snapshot, SnapshotError};
use edpm_io::k8s;

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
        "cannot read {path}: it is {what}, not a regular file; edpm-agent reads only regular files (after following links) so that it never blocks on a pipe or reads a device without end: save the manifests to a file, or move this out of the source directory"
    )]
    NotRegular { path: String, what: &'static str },
    #[error(
        "cannot read {path}: it is larger than the {} MiB cap on one manifest file (a guard against runaway input such as a link to /dev/zero); point --source at the data-plane manifests, or split the file", .limit >> 20
    )]
    FileTooLarge { path: String, limit: u64 },
    #[error("cannot read {path}: {detail}")]
    NotUtf8 { path: String, detail: String },
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
            SourceSpec::Dir(path) => {
                let mut snap = dir::load(path, settings.namespace.as_deref(), lines, &mut budget)?;
                // The API server filters a list by labels; a directory is filtered here alike.
                if let Some(sel) = &settings.selector {
                    snap.select(sel);
                }
                snap
            }
            SourceSpec::Kube => {
                let c = cluster()?;
                let selector = settings.selector.as_ref().map(|s| s.as_str());
                c.block_on(k8s::read::snapshot(c.client(), selector, with_evidence))?
            }
        };
        snap.merge(part)?;
    }
    for path in &snap.not_manifests {
        tracing::debug!(path, "skipped: holds no Kubernetes object");
    }
    Ok(snap)
}
