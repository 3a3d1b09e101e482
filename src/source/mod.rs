//! Sources produce one [`Snapshot`] of typed objects; nothing downstream knows which one.
//!
//! Two implementations share the [`Source`] trait: [`dir::DirSource`] (a directory of
//! manifests, no cluster) and [`kube::KubeSource`] (the Kubernetes API).
//! This is shell code: it reads files and talks to the API server, then hands documents to the
//! pure [`manifest`] parser and [`snapshot`] classifier.

pub mod dir;
pub mod kube;
pub mod manifest;
pub mod snapshot;

pub use snapshot::Snapshot;

/// Something that can produce a snapshot of the data-plane objects.
pub trait Source {
    /// A short description for error messages, e.g. `directory examples/dataplane`.
    fn describe(&self) -> String;
    fn load(&self) -> Result<Snapshot, SourceError>;
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
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
    #[error("{0}; fix the YAML/JSON syntax")]
    Parse(#[from] manifest::ParseError),
    #[error("{0}")]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error(
        "cannot load Kubernetes client configuration: {message}; set KUBECONFIG, pass --kubeconfig, or run in a pod with a service account"
    )]
    ClusterConfig { message: String },
    #[error("{action}: {message}{hint}")]
    Cluster { action: String, message: String, hint: String },
}

/// Loads every source in order and merges the snapshots; an object defined by two sources is
/// an error, as it would be within one.
pub fn load_all(sources: &[Box<dyn Source>]) -> Result<Snapshot, SourceError> {
    let mut snap = Snapshot::default();
    for s in sources {
        snap.merge(s.load()?)?;
    }
    Ok(snap)
}
