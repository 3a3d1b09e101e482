//! `edpm-agent-node`: the node agent on its own, as its systemd unit runs it (and `edpm-agent
//! node`, which hands its process over to this binary). It links only what a node needs (this
//! crate, the core, the shared I/O), so it starts small and stays small. `main` is
//! `edpm_io::program::main` with what the node agent is.

use std::process::ExitCode;

use clap::Parser;
use edpm_io::program::{Logging, Program, no_defaults};

// The same allocator as edpm-agent, with its eager arena commit off under the unit
// (MIMALLOC_ARENA_EAGER_COMMIT=0), so an idle agent holds little.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The node agent: check this EDPM node and report its readiness (systemd service); --once
/// runs one check and prints it.
#[derive(Debug, Parser)]
#[command(name = "edpm-agent-node", version)]
struct Cli {
    #[command(flatten)]
    args: edpm_node::NodeArgs,
    /// Log to stderr (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> ExitCode {
    edpm_io::program::main(Program {
        name: "edpm-agent-node",
        parse: Cli::try_parse_from,
        defaults: no_defaults,
        // The loop is a service: it always logs (to the journal under systemd).
        logging: |cli| Logging {
            verbose: cli.verbose,
            service: !cli.args.once,
            journal_name: "edpm-agent-node",
        },
        run: |cli, env, out| edpm_node::run(cli.args, env, out).map(|()| 0),
    })
}
