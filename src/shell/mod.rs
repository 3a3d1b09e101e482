//! The product's imperative shell: the command line (`cli`, `app`, `exit`), the sources
//! (`source`, and `k8s`, what the product asks of the API server), OpenStack's APIs
//! (`openstack`). Files, processes, parallelism, CA
//! bundles and the Kubernetes client itself live in `edpm_io`, shared with the node agent.

pub mod app;
pub mod cli;
pub mod exit;
pub(crate) mod source;
