//! Thin entry point: parse arguments, set up logging, run, map the result to an exit code.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use edpm_agent::shell::{app, cli, exit::Exit};

// Inventories and config files are many small allocations (provenance, keys, values): a third
// of all instructions with glibc's malloc (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match cli::parse(std::env::args_os().collect()) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { Exit::Usage.into() } else { Exit::Success.into() };
        }
    };
    // The node agent is a service: it always logs, to the journal under systemd.
    match &cli.command {
        cli::Command::Node(n) if !n.once => init_service_logging(cli.verbose),
        _ => init_logging(cli.verbose),
    }
    let env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match app::run(cli, &env, &mut out) {
        Ok(code) => code.into(),
        Err(e) if e.code == Exit::Success => Exit::Success.into(),
        Err(e) => {
            let _ = out.flush();
            eprintln!("edpm-agent: error: {e}");
            e.code.into()
        }
    }
}

/// Logs go to stderr and only when asked for (`-v` or `EDPM_AGENT_LOG`): Ansible shows any
/// stderr of an inventory script as an error.
fn init_logging(verbose: u8) {
    let filter = match (verbose, std::env::var("EDPM_AGENT_LOG")) {
        (0, Err(_)) => return,
        (_, Ok(f)) if !f.is_empty() => f,
        (1, _) | (0, _) => "edpm_agent=info".to_string(),
        _ => "edpm_agent=debug,kube=debug".to_string(),
    };
    // Colour only for a person at a terminal, and never when NO_COLOR is set (no-color.org).
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .init();
}

/// The node agent's logs: info by default; to the journal when systemd says stderr is the
/// journal (`JOURNAL_STREAM`), else plain stderr. Condition messages name paths and units,
/// never file contents or credentials.
fn init_service_logging(verbose: u8) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = match (verbose, std::env::var("EDPM_AGENT_LOG")) {
        (_, Ok(f)) if !f.is_empty() => f,
        (0, _) => "edpm_agent=info".to_string(),
        _ => "edpm_agent=debug,kube=debug".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::new(filter);
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journal) = tracing_journald::layer()
    {
        tracing_subscriber::registry()
            .with(filter)
            .with(journal.with_syslog_identifier("edpm-agent-node".into()))
            .init();
        return;
    }
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(colour).with_env_filter(filter).init();
}
