//! edpm-agent: Ansible inventories, oslo.config rendering and file staging for OpenStack
//! External DataPlane Management (EDPM) nodes.
//!
//! Two layers (ARCHITECTURE.md), visible in the tree:
//! - the pure core: every module whose path has no `shell` folder in it. Plain data in,
//!   plain data out; no I/O, no clock, no client.
//! - the shell: `src/shell/` (the command line, the sources, the Kubernetes module, files)
//!   and the `shell/` folders of the two features that have a long-running side, `runner`
//!   and `node`. It reads files and talks to servers, then hands plain data to the core.
//!
//! The core never imports the shell (checked by `tests/layout.rs`), and only `shell::k8s`
//! talks to the Kubernetes API server.

// The pure core, in reading order: reading manifests, the model, what lands on a host.
pub(crate) mod condition;
pub(crate) mod derive;
pub(crate) mod environment;
pub mod excerpt;
pub(crate) mod inventory;
pub(crate) mod model;
pub(crate) mod mounts;
pub(crate) mod nova;
pub(crate) mod nova_cell;
pub mod oslo;
pub(crate) mod readiness;
pub mod redact;
pub mod render;
pub(crate) mod services;
pub(crate) mod settings;
pub(crate) mod snapshot;
pub(crate) mod staging;
pub(crate) mod suggest;
pub(crate) mod validate;
pub mod yaml;

// The two features with a long-running side: each one folder, its shell half in `shell/`.
pub(crate) mod node;
pub mod runner;

// The shell shared by every command.
pub mod shell;
