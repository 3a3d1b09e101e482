//! edpm-agent: Ansible inventories, oslo.config rendering and file staging for OpenStack
//! External DataPlane Management (EDPM) nodes; readiness per node, its controller, and the
//! AnsibleEE job entrypoint.
//!
//! This crate is the product's shell: the command line (`shell::cli`, `shell::app`), the
//! sources, what it asks of the Kubernetes API server and of OpenStack, the controller and
//! the runner's supervision. The pure core is `edpm_core`; the I/O shared with the node agent
//! is `edpm_io`; the node agent is `edpm_node` (ARCHITECTURE.md).

pub mod app;
pub mod cli;
pub mod exit;
mod source;

/// Runs one parsed command. `env` is the process environment (injected so tests can pass their
/// own).
pub fn run(
    cli: cli::Cli,
    env: &app::Env,
    out: &mut dyn std::io::Write,
) -> Result<exit::Status, app::AppError> {
    app::run(cli, env, out)
}
