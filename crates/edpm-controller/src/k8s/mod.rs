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
