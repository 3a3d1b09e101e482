//! Thin entry point: `edpm_io::program::main` with what edpm-agent is: its command line, the
//! kubectl plugin's default source, its logging, and `edpm_agent::run`.

use std::process::ExitCode;

use edpm_agent::cli;
use edpm_io::program::{Logging, Program};

// Inventories and config files are many small allocations (provenance, keys, values): a third
// of all instructions with glibc's malloc (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    edpm_io::program::main(Program {
        name: "edpm-agent",
        parse: cli::parse,
        // As `kubectl edpm`, the default source is the cluster, as for every kubectl command.
        defaults: |args| {
            cli::is_kubectl_plugin(args)
                .then(|| ("EDPM_AGENT_SOURCE".to_string(), "kube".to_string()))
                .into_iter()
                .collect()
        },
        // The controller is a service: it always logs.
        logging: |cli| Logging {
            verbose: cli.verbose,
            service: matches!(&cli.command, cli::Command::Status(s) if matches!(s.action, cli::StatusAction::Controller { .. })),
            journal_name: "edpm-agent",
        },
        run: |cli, env, out| edpm_agent::run(cli, env, out).map(edpm_agent::exit::Status::code),
    })
}
