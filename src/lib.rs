//! edpm-agent: Ansible inventories, oslo.config rendering and file staging for OpenStack
//! External DataPlane Management (EDPM) nodes; readiness per node, its controller, and the
//! AnsibleEE job entrypoint.
//!
//! This crate is the CLI, the `edpm-agent` binary: the command line parsed (`cli`), each
//! command (`app`, one file each) calling the crates that do the work, the exit codes (`exit`)
//! and the manifest directories read as a source (`source`). The pure core is `edpm_core`; the
//! I/O every program shares is `edpm_io`; `status controller` is `edpm_controller`, `run` is
//! `edpm_runner`; the node agent is a program of its own, `edpm-agent-node` (`edpm_node`),
//! which `edpm-agent node` hands its process over to (ARCHITECTURE.md, "Layout").

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
