//! Thin entry point: parse arguments, set up logging, run, map the result to an exit code.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use edpm_agent::shell::{app, cli, exit::Exit};

// Inventories and config files are many small allocations (provenance, keys, values): a third
// of all instructions with glibc's malloc (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // kube runs edpm-agent itself to run a kubeconfig's credential plugin, bounded.
    if let Some(code) = app::exec_credential(&args) {
        return code;
    }
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
        std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    );
    // The node agent and the controller are services: they always log (the node agent to the
    // journal under systemd).
    let service = matches!(&cli.command, cli::Command::Node(n) if !n.once)
        || matches!(&cli.command, cli::Command::Status(s) if matches!(s.action, cli::StatusAction::Controller { .. }));
    init_logging(&env, cli.verbose, service);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match app::run(cli, &env, &mut out) {
        Ok(code) => code.into(),
        Err(e) if e.code() == Exit::Success => Exit::Success.into(),
        Err(e) => {
            let _ = out.flush();
            #[allow(clippy::disallowed_macros, reason = "the one line an error prints")]
            {
                // One line, whatever input the message quotes.
                eprintln!("edpm-agent: error: {}", edpm_agent::excerpt::printable(&e.to_string()));
            }
            e.code().into()
        }
    }
}

/// The one logging set-up. Commands log to stderr only when asked (`-v` or `EDPM_AGENT_LOG`):
/// Ansible shows any stderr of an inventory script as an error. The node agent (`service`)
/// logs at info by default, to the journal when systemd says stderr is the journal
/// (`JOURNAL_STREAM`). Condition messages name paths and units, never file contents or
/// credentials.
fn init_logging(env: &app::Env, verbose: u8, service: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = match (env.get("EDPM_AGENT_LOG"), verbose, service) {
        (Some(f), _, _) => f.to_string(),
        (None, 0, false) => return,
        (None, 0, true) | (None, 1, _) => "edpm_agent=info".to_string(),
        (None, _, _) => "edpm_agent=debug,kube=debug".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::new(filter);
    if service
        && env.get("JOURNAL_STREAM").is_some()
        && let Ok(journal) = tracing_journald::layer()
    {
        tracing_subscriber::registry()
            .with(filter)
            .with(journal.with_syslog_identifier("edpm-agent-node".into()))
            .init();
        return;
    }
    // Colour only for a person at a terminal, and never when NO_COLOR is set (no-color.org).
    let colour = std::io::stderr().is_terminal() && env.get("NO_COLOR").is_none();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(colour).with_env_filter(filter).init();
}
