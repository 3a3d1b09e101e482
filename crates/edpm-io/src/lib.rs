//! The I/O edpm-agent's programs share (the CLI, the controller, the runner, the node agent):
//! files replaced atomically and read bounded (`files`, `node_root`), child processes
//! (`process`: bounded runs, the play's supervision, the hand-over to another program), work
//! spread over cores (`parallel`), CA bundles checked before a client trusts them (`tls`), the
//! Kubernetes client and what more than one program asks of the API server (`k8s`), the
//! OpenStack clients (`openstack`), output, logging, the wall clock, and the one `main`
//! (`program`). What one program alone asks of the API server is its own (the controller's
//! `k8s`, the node agent's `api`).

pub mod clock;
pub mod files;
pub mod k8s;
pub mod logging;
pub mod node_root;
pub mod openstack;
pub mod output;
pub mod parallel;
pub mod process;
pub mod program;
pub mod tls;
