//! What the controller alone asks of the API server (what it shares with the other programs,
//! reads and status writes, is `edpm_io::k8s`'s):
//!
//! - [`watch`] keeps the snapshot current: one watch and store per kind read;
//! - [`crds`] watches the CRDs' metadata, starting a kind's watch when its CRD is installed;
//! - [`inputs`] watches the versions of Secrets and ConfigMaps, metadata-only;
//! - [`leader`] holds the leader Lease; [`events`] records Events; [`review`] asks who a
//!   bearer token is and what it may do (the secure `/metrics`).

pub mod crds;
pub mod events;
pub mod inputs;
pub mod leader;
pub mod review;
pub mod watch;

pub use edpm_io::k8s::{Client, Error, jitter, read, status};

use edpm_core::controller::touch::Reach;
use kube::runtime::watcher;

/// What the watches report.
#[derive(Debug)]
pub enum WatchEvent {
    /// An object of `kind` was added, changed or deleted: which NodeSets it reaches, not the
    /// whole object.
    Changed { kind: &'static str, reach: Reach },
    /// The kind's store holds a complete listing (again, after a relist).
    Synced { kind: &'static str },
    /// The watch failed and backs off before it retries (then resumes or relists); `code` is
    /// the API server's answer, when it gave one.
    Failed { kind: &'static str, code: Option<u16>, error: String },
}

/// The API server's status code in a watcher's error, when there is one (410 for an expired
/// resourceVersion, 403 for missing RBAC, …).
pub(crate) fn code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::WatchError(s) => Some(s.code),
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    }
}
