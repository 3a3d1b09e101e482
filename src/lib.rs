//! edpm-agent: Ansible inventories, oslo.config rendering and file staging for OpenStack
//! External DataPlane Management (EDPM) nodes; readiness per node, its controller, and the
//! AnsibleEE job entrypoint.
//!
//! This crate is the product's shell: the command line (`shell::cli`, `shell::app`), the
//! sources, what it asks of the Kubernetes API server and of OpenStack, the controller and
//! the runner's supervision. The pure core is `edpm_core`; the I/O shared with the node agent
//! is `edpm_io`; the node agent is `edpm_node` (ARCHITECTURE.md).

// The shell of every command.
pub mod shell;

/// Runs one parsed command. `env` is the process environment (injected so tests can pass their
/// own).
pub fn run(
    cli: shell::cli::Cli,
    env: &shell::app::Env,
    out: &mut dyn std::io::Write,
) -> Result<shell::exit::Status, shell::app::AppError> {
    shell::app::run(cli, env, out)
}
