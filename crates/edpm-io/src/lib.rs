//! The I/O both of edpm-agent's binaries (`edpm-agent`, `edpm-agent-node`) share: files
//! replaced atomically and read bounded (`files`), short-lived programs run bounded (`process`),
//! work spread over cores (`parallel`), CA bundles checked before a client trusts them (`tls`),
//! and the Kubernetes client (`k8s`: configuration, retries, deadlines, credential plugins).
//! What each binary asks of the API server is its own (the product's `shell::k8s`, the node
//! agent's `api`).

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
