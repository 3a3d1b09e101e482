//! Thin entry point: parse arguments, set up logging, run, map the result to an exit code.

use std::io::Write;
use std::process::ExitCode;

use edpm_agent::shell::{app, cli, exit::Exit};

// Inventories and config files are many small allocations (provenance, keys, values): a third
// of all instructions with glibc's malloc (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // kube runs edpm-agent itself to run a kubeconfig's credential plugin, bounded.
    if let Some(code) = edpm_io::k8s::exec::answer(&args) {
        return code;
    }
    // As `kubectl edpm`, the default source is the cluster, as for every kubectl command.
    let plugin_default =
        cli::is_kubectl_plugin(&args).then(|| ("EDPM_AGENT_SOURCE".to_string(), "kube".to_string()));
    let cli = match cli::parse(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { Exit::Usage.into() } else { Exit::Success.into() };
        }
    };
    // The one read of the process environment; everything after looks variables up in `env`.
    #[allow(clippy::disallowed_methods, reason = "main reads the environment once, for everyone")]
    let env = app::Env::new(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            // After the process's own: the first definition wins.
            .chain(plugin_default),
    );
    // The node agent and the controller are services: they always log (the node agent to the
    // journal under systemd).
    let service = matches!(&cli.command, cli::Command::Node(n) if !n.once)
        || matches!(&cli.command, cli::Command::Status(s) if matches!(s.action, cli::StatusAction::Controller { .. }));
    let journal_name =
        if matches!(&cli.command, cli::Command::Node(_)) { "edpm-agent-node" } else { "edpm-agent" };
    edpm_io::logging::init(&env, cli.verbose, service, journal_name);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match edpm_agent::run(cli, &env, &mut out) {
        Ok(code) => code.into(),
        Err(e) if e.code() == Exit::Success => Exit::Success.into(),
        Err(e) => {
            let _ = out.flush();
            #[allow(clippy::disallowed_macros, reason = "the one line an error prints")]
            {
                // One line, whatever input the message quotes.
                eprintln!("edpm-agent: error: {}", edpm_core::excerpt::printable(&e.to_string()));
            }
            e.code().into()
        }
    }
}
