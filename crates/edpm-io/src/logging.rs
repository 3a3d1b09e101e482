//! The one logging set-up, for every program's `main`. Commands log to stderr only when asked (`-v` or
//! `EDPM_AGENT_LOG`): Ansible shows any stderr of an inventory script as an error. A service
//! (the node agent's loop, the controller) logs at info by default, to the journal when
//! systemd says stderr is the journal (`JOURNAL_STREAM`). Condition messages name paths and
//! units, never file contents or credentials.

use std::io::IsTerminal;

use edpm_core::environment::Env;

/// Our crates, as tracing names their targets: a directive for `edpm_agent` reaches them all.
const CRATES: [&str; 6] =
    ["edpm_agent", "edpm_core", "edpm_io", "edpm_node", "edpm_controller", "edpm_runner"];

/// `directives` with every one about `edpm_agent` said for each of our crates too, so that
/// `EDPM_AGENT_LOG=edpm_agent=debug` means all of edpm-agent, whichever crate a line is in.
pub fn expand(directives: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for d in directives.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match d.strip_prefix("edpm_agent") {
            Some(rest) if rest.is_empty() || rest.starts_with(['=', '[']) => {
                out.extend(CRATES.iter().map(|c| format!("{c}{rest}")));
            }
            _ => out.push(d.to_string()),
        }
    }
    out.join(",")
}

/// Sets up logging once; `journal_name` is the syslog identifier under systemd.
pub fn init(env: &Env, verbose: u8, service: bool, journal_name: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = match (env.get("EDPM_AGENT_LOG"), verbose, service) {
        (Some(f), _, _) => expand(f),
        (None, 0, false) => return,
        (None, 0, true) | (None, 1, _) => expand("edpm_agent=info"),
        (None, _, _) => expand("edpm_agent=debug,kube=debug"),
    };
    let filter = tracing_subscriber::EnvFilter::new(filter);
    if service
        && env.get("JOURNAL_STREAM").is_some()
        && let Ok(journal) = tracing_journald::layer()
    {
        tracing_subscriber::registry()
            .with(filter)
            .with(journal.with_syslog_identifier(journal_name.into()))
            .init();
        return;
    }
    // Colour only for a person at a terminal, and never when NO_COLOR is set (no-color.org).
    let colour = std::io::stderr().is_terminal() && env.get("NO_COLOR").is_none();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(colour).with_env_filter(filter).init();
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_directive_for_edpm_agent_reaches_every_crate() {
        assert_eq!(
            super::expand("edpm_agent=debug,kube=debug"),
            "edpm_agent=debug,edpm_core=debug,edpm_io=debug,edpm_node=debug,edpm_controller=debug,edpm_runner=debug,kube=debug"
        );
        assert_eq!(super::expand("info"), "info");
        assert_eq!(super::expand("edpm_agentx=info"), "edpm_agentx=info");
    }
}
