//! The node agent (`edpm-agent node`): a long-running service on the EDPM node that checks
//! what was deployed there (the pure `node` checks, over facts `collect` gathers) and reports
//! its node's conditions and heartbeat through the API (`k8s::node_agent`), as the kubelet does
//! with its node status and Lease.
//!
//! Shell: it reads files under a root, runs `systemctl show` and `podman ps`, talks to
//! systemd's notify socket, and runs the loop.

pub(crate) mod agent_loop;
pub(crate) mod collect;
pub(crate) mod notify;
