//! edpm-agent: Ansible inventories, oslo.config rendering and file staging for OpenStack
//! External DataPlane Management (EDPM) nodes.
//!
//! Modules in reading order. The pure core (`resource`, `source::manifest`,
//! `source::snapshot`, `model`, `inventory`, `validate`, `settings`) does no I/O and reads no
//! clock; the shell (`source::dir`, `source::kube`, `fsutil`, `app`, `main`) does. See
//! ARCHITECTURE.md.

pub mod app;
pub mod cell;
pub mod cli;
pub mod derive;
pub mod exit;
pub mod fsutil;
pub mod inventory;
pub mod model;
pub mod mounts;
pub mod openstack;
pub mod oslo;
pub mod par;
pub mod render;
pub mod resource;
pub mod settings;
pub mod source;
pub mod staging;
pub mod validate;
