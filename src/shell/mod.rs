//! The imperative shell shared by every command: the command line (`cli`, `app`), the
//! sources (`source`, and `k8s`, the one module that talks to the API server), files
//! (`files`, `node_root`), OpenStack's APIs (`openstack`), spreading work over cores
//! (`parallel`), running a program for its answer, bounded (`process`), and checking CA
//! bundles before a client trusts them (`tls`).

pub mod app;
#[doc(hidden)]
pub mod bench;
pub mod cli;
pub mod exit;
pub mod files;
pub(crate) mod k8s;
pub(crate) mod node_root;
pub(crate) mod openstack;
pub(crate) mod parallel;
pub(crate) mod probes;
pub(crate) mod process;
pub(crate) mod source;
pub(crate) mod tls;
