//! What the product asks of the Kubernetes API server; the client itself (configuration,
//! retries, deadlines, credential plugins) is `edpm_io::k8s`, shared with the node agent.
//!
//! - [`read`] fills a snapshot: it lists the data-plane kinds and gets, by name, only the
//!   ConfigMaps and Secrets they reference.
//! - [`watch`] keeps that snapshot current for the controller.
//! - [`status`] writes our own readiness objects; [`apply`] server-side applies
//!   NovaExternalComputes; [`events`] records Events; [`leader`] holds the controller's Lease;
//!   [`review`] asks who a bearer token is and what it may do (the secure `/metrics`).

pub(crate) mod events;
pub(crate) mod leader;
pub(crate) mod review;
pub(crate) mod watch;

pub(crate) use edpm_io::k8s::{apply, read, status};

pub(crate) use edpm_io::k8s::{Client, Cluster, Error, Settings, jitter};
