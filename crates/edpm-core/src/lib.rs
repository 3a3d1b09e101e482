//! edpm-agent's pure core: plain data in, plain data out. No file, socket, process,
//! environment or clock; time, when a stage needs it, is passed in, and so is the way work is
//! spread over cores. The crate has no I/O dependency at all (`tests/layout.rs` checks its
//! dependency closure), so purity is a compile error, not a convention.
//!
//! In reading order: reading manifests (`yaml`, `snapshot`), the model and what lands on a
//! host (`model`, `inventory`, `oslo`, `render`, `mounts`, `staging`, `derive`), readiness
//! (`condition`, `readiness`, `nova`, `nova_cell`), and the decisions of the two long-running
//! features (`runner`, the AnsibleEE job's; `node`, the node agent's). The shells are the
//! `edpm-agent` and `edpm-node` crates; `edpm-io` holds the I/O they share.

pub mod condition;
pub mod controller;
pub mod derive;
pub mod environment;
pub mod excerpt;
pub mod identity;
pub mod inventory;
pub mod kinds;
pub mod model;
pub mod mounts;
pub mod node;
pub mod nova;
pub mod nova_cell;
/// The hashes openstack-operator records of delivered Secrets and ConfigMaps, as lib-common computes them.
pub mod objecthash;
pub mod oslo;
pub mod readiness;
pub mod redact;
pub mod render;
pub mod rfc1123;
pub mod runner;
pub mod services;
pub mod settings;
pub mod snapshot;
pub mod staging;
pub mod suggest;
pub mod validate;
pub mod yaml;
