//! The one `main` of edpm-agent's binaries (`edpm-agent`, `edpm-agent-node`): each says what it
//! is ([`Program`]) and hands it to [`main`], which runs the same steps in the same order.
//!
//! 1. A kubeconfig's credential plugin is answered first: kube runs it through the running
//!    binary (`… __exec-credential …`, [`crate::k8s::exec`]), before any parsing.
//! 2. The command line is parsed; help and version are printed as clap prints them (exit 0),
//!    a usage error on one line as every other error (exit 2): clap's message, its tip, the usage.
//! 3. The process environment is read, once, into an [`Env`] (empty is unset), with the
//!    program's defaults after it (the first definition wins).
//! 4. Logging is set up ([`crate::logging`]).
//! 5. The command runs, writing to locked standard output. An error is printed once, on one
//!    line, as `NAME: error: MESSAGE` (control characters escaped), and its code is the exit
//!    code; an error whose code is 0 (the output's reader went away) ends quietly.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use edpm_core::environment::Env;

/// The name a program started by another's hand-over (`edpm-agent node` running
/// `edpm-agent-node`, [`crate::process::hand_over`]) is given as its `argv[0]`: its errors are
/// said under the first word, and its usage under the whole.
pub const NODE_AGENT_AS_SUBCOMMAND: &str = "edpm-agent node";

/// What a program's failure says: its message ([`std::fmt::Display`]) and its exit code.
pub trait Failure: std::fmt::Display {
    /// The process exit code; 0 ends the program quietly, with success.
    fn exit_code(&self) -> u8;
}

/// How logging is set up for one run (`logging::init`'s arguments).
pub struct Logging {
    /// `-v` given this many times.
    pub verbose: u8,
    /// A service logs at info by default (to the journal under systemd).
    pub service: bool,
    /// The syslog identifier under systemd.
    pub journal_name: &'static str,
}

/// One program: its name and its steps.
pub struct Program<C, E> {
    /// The name its errors are said under.
    pub name: &'static str,
    /// Its command line parsed (`args[0]` included).
    pub parse: fn(Vec<OsString>) -> Result<C, clap::Error>,
    /// Variables the environment holds when it does not say them itself (`args` decides).
    pub defaults: fn(&[OsString]) -> Vec<(String, String)>,
    pub logging: fn(&C) -> Logging,
    /// The command: its exit code, or its failure.
    pub run: fn(C, &Env, &mut dyn Write) -> Result<u8, E>,
}

/// No defaults.
pub fn no_defaults(_: &[OsString]) -> Vec<(String, String)> {
    Vec::new()
}

/// clap's usage error (`error: …`, a tip, `Usage: …`, a pointer to `--help`) as one line:
/// `unexpected argument '--nodset' found; tip: a similar argument exists: '--nodeset'; usage:
/// edpm-agent status show --nodeset <NODESETS> (--help says more)`.
fn usage_line(rendered: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("For more information") {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        let line = match line.strip_prefix("Usage: ") {
            Some(u) => format!("usage: {u} (--help says more)"),
            None => line.to_string(),
        };
        match parts.last_mut() {
            // A list after its heading: `not provided: --timeout <DURATION>, --phase <PHASE>`.
            Some(last) if last.ends_with(':') => {
                last.push(' ');
                last.push_str(&line);
            }
            Some(last) if last.contains(": --") && line.starts_with('-') => {
                last.push_str(", ");
                last.push_str(&line);
            }
            _ => parts.push(line),
        }
    }
    parts.join("; ")
}

/// Runs `program`: the steps of the module's documentation.
pub fn main<C, E: Failure>(program: Program<C, E>) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(code) = crate::k8s::exec::answer(&args) {
        return code;
    }
    let name = if args.first().is_some_and(|a| a == NODE_AGENT_AS_SUBCOMMAND) {
        NODE_AGENT_AS_SUBCOMMAND.split(' ').next().unwrap_or(program.name)
    } else {
        program.name
    };
    let defaults = (program.defaults)(&args);
    let cli = match (program.parse)(args) {
        Ok(c) => c,
        // Help and version as clap prints them.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // A usage error on one line, as every other error: clap's message, its tip, the usage.
        Err(e) => {
            #[allow(clippy::disallowed_macros, reason = "the one line an error prints")]
            {
                eprintln!(
                    "{name}: error: {}",
                    edpm_core::excerpt::printable(&usage_line(&e.render().to_string()))
                );
            }
            return ExitCode::from(2);
        }
    };
    // The one read of the process environment; everything after looks variables up in `env`.
    #[allow(clippy::disallowed_methods, reason = "main reads the environment once, for everyone")]
    let env = Env::new(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            // After the process's own: the first definition wins.
            .chain(defaults),
    );
    let log = (program.logging)(&cli);
    crate::logging::init(&env, log.verbose, log.service, log.journal_name);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match (program.run)(cli, &env, &mut out) {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.exit_code() == 0 => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            #[allow(clippy::disallowed_macros, reason = "the one line an error prints")]
            {
                // One line, whatever input the message quotes.
                eprintln!("{name}: error: {}", edpm_core::excerpt::printable(&e.to_string()));
            }
            ExitCode::from(e.exit_code())
        }
    }
}
