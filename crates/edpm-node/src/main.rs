//! `edpm-agent-node`: the node agent on its own, as its systemd unit runs it. It links only
//! what a node needs (this crate, the core, the shared I/O), so it starts small and stays
//! small; `edpm-agent node` runs the same code.

use std::process::ExitCode;

use clap::Parser;

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
    // kube runs a kubeconfig's credential plugin through this binary itself, bounded
    // (`edpm-agent-node __exec-credential …`, see edpm_io::k8s::exec): answer it before clap.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = edpm_io::k8s::exec::answer(&args) {
        return code;
    }
    let cli = Cli::parse_from(args);
    // The one read of the process environment; everything after looks variables up in `env`.
    #[allow(clippy::disallowed_methods, reason = "main reads the environment once, for everyone")]
    let env = edpm_core::environment::Env::new(
        std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    );
    edpm_io::logging::init(&env, cli.verbose, !cli.args.once, "edpm-agent-node");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match edpm_node::run(cli.args, &env, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::disallowed_macros, reason = "the one line an error prints")]
            {
                eprintln!("edpm-agent-node: error: {}", edpm_core::excerpt::printable(&e.to_string()));
            }
            ExitCode::from(e.exit_code())
        }
    }
}
