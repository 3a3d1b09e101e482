//! edpm-agent: Ansible inventories, oslo.config rendering and file staging for OpenStack
//! External DataPlane Management (EDPM) nodes.
//!
//! Two layers (ARCHITECTURE.md):
//! - the pure core: plain data in, plain data out; no I/O, no clock, no client;
//! - the shell: reads files and talks to servers, then hands plain data to the core.
//!
//! The core never imports the shell (checked by `tests/layout.rs`), and only `k8s` talks to
//! the Kubernetes API server.

// The pure core, in reading order.
pub(crate) mod aee;
pub(crate) mod agent;
pub(crate) mod cell;
pub(crate) mod condition;
pub(crate) mod derive;
pub mod echo;
pub(crate) mod inventory;
pub(crate) mod model;
pub(crate) mod mounts;
pub mod oslo;
pub(crate) mod readiness;
pub mod redact;
pub mod render;
pub(crate) mod services;
pub(crate) mod settings;
pub(crate) mod snapshot;
pub(crate) mod staging;
pub mod summary;
pub(crate) mod validate;
pub mod yaml;

// The shell.
pub mod app;
#[doc(hidden)]
pub mod bench;
pub mod cli;
pub mod exit;
pub mod fsutil;
pub(crate) mod hostfs;
pub(crate) mod k8s;
pub(crate) mod nodeagent;
pub(crate) mod openstack;
pub(crate) mod par;
pub(crate) mod process;
pub(crate) mod source;
