//! The node agent (`edpm-agent-node`, and `edpm-agent node`): a long-running service on the
//! EDPM node that checks what was deployed there (the pure `edpm_core::node` checks, over the
//! facts `collect` gathers) and reports its node's conditions and heartbeat through the API
//! (`api`), as the kubelet does with its node status and Lease.
//!
//! Shell: it reads files under a root, runs `systemctl show` and `podman ps` (bounded, through
//! `edpm_io::process`), talks to systemd's notify socket, and runs the loop (`agent_loop`).
//! `run` is its command (`edpm-agent node` hands its process over to `edpm-agent-node`). This
//! crate links only what a node needs: the core and the shared I/O; not the controller's or
//! the runner's crate, nor the CLI's.

pub mod agent_loop;
pub mod api;
pub mod collect;
pub mod notify;
pub mod run;

pub use run::{NodeArgs, NodeError, run};
