//! The run's decisions, as pure functions of what the shell found: the run's own options,
//! which executor runs the play, where its inventory comes from, whether its inputs are there,
//! and how the run ended in the summary's terms. `edpm_runner::run` gathers the facts (files,
//! PATH, the supervisor's outcome) and does what these say.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::argv::{Playbook, RunnerCommand};
use super::job::JobError;
use super::outcome::{Ending, Limits, Outcome, Stop, Timeout};
use super::summary::RunStatus;
use crate::environment::Env;

/// ansible-runner's return code for a timed-out or canceled run; used for our own timeouts.
pub const RC_STOPPED: i32 = 254;

/// A setting with a few named values, spelled as on the command line (`ansible-runner`):
/// what the environment variables take, and what the command line offers (the shell's clap
/// parser is built from [`Choice::NAMES`]).
pub trait Choice: Sized + Copy + 'static {
    /// Each value with its name.
    const NAMES: &'static [(&'static str, Self)];

    /// The value named `v` (ASCII case aside).
    fn from_name(v: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(v.trim())).map(|(_, x)| *x)
    }

    /// The names, for messages and the command line's list.
    fn names() -> Vec<&'static str> {
        Self::NAMES.iter().map(|(n, _)| *n).collect()
    }
}

/// Where the play's inventory comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InventorySource {
    /// `DIR/inventory`, as the operator mounts it.
    Mounted,
    /// edpm-agent's own inventory, read from the API.
    Kube,
    /// edpm-agent's own inventory, from `--source` or `EDPM_AGENT_SOURCE`.
    Sources,
}

impl Choice for InventorySource {
    const NAMES: &'static [(&'static str, Self)] =
        &[("mounted", Self::Mounted), ("kube", Self::Kube), ("sources", Self::Sources)];
}

/// What runs the play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// ansible-runner when it is on PATH, else ansible-playbook.
    Auto,
    AnsibleRunner,
    AnsiblePlaybook,
}

impl Choice for Executor {
    const NAMES: &'static [(&'static str, Self)] = &[
        ("auto", Self::Auto),
        ("ansible-runner", Self::AnsibleRunner),
        ("ansible-playbook", Self::AnsiblePlaybook),
    ];
}

/// Why the run cannot go on, by class (the CLI's `app::errors` gives each its exit code).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The command line or the run's own variables ask for something impossible (exit 2).
    #[error("{0}")]
    Usage(String),
    /// An input the play needs is not there or cannot be read (exit 6).
    #[error("{0}")]
    Unreadable(String),
    /// Something failed that is not the input's fault (exit 1).
    #[error("{0}")]
    Failure(String),
    /// The Job's contract was broken (its command, variables or files).
    #[error(transparent)]
    Job(#[from] JobError),
}

/// `run`'s own settings as given on the command line (clap's `RunArgs`, as plain data).
#[derive(Debug, Default)]
pub struct Given {
    pub runner_dir: Option<PathBuf>,
    pub inventory_source: Option<InventorySource>,
    pub retry_failed: bool,
    pub executor: Option<Executor>,
    pub init: Option<String>,
    pub grace_period: Option<u64>,
    pub summarize_only: bool,
    pub command: Vec<String>,
}

/// `run`'s own settings: flag, then environment (empty means unset), then default.
#[derive(Debug)]
pub struct Options {
    pub runner_dir: Option<PathBuf>,
    pub inventory_source: InventorySource,
    pub retry_failed: bool,
    pub executor: Executor,
    pub init: Option<String>,
    pub grace: Duration,
    pub summarize_only: bool,
    pub command: Vec<String>,
}

impl Options {
    pub fn resolve(given: Given, env: &Env) -> Result<Options, RunError> {
        fn bad(name: &str, v: &str, want: &str) -> RunError {
            RunError::Usage(format!("environment variable {name}={v:?}: expected {want}"))
        }
        fn choice<T: Choice>(name: &str, v: &str) -> Result<T, RunError> {
            T::from_name(v).ok_or_else(|| bad(name, v, &T::names().join(", ")))
        }
        let retry_env = match env.get("EDPM_AGENT_RETRY_FAILED").map(|v| v.trim().to_ascii_lowercase()) {
            None => false,
            Some(v) if ["1", "true", "yes", "on", "y"].contains(&v.as_str()) => true,
            Some(v) if ["0", "false", "no", "off", "n"].contains(&v.as_str()) => false,
            Some(v) => return Err(bad("EDPM_AGENT_RETRY_FAILED", &v, "true or false")),
        };
        Ok(Options {
            runner_dir: given.runner_dir.or_else(|| env.get("EDPM_AGENT_RUNNER_DIR").map(PathBuf::from)),
            inventory_source: match (given.inventory_source, env.get("EDPM_AGENT_INVENTORY_SOURCE")) {
                (Some(s), _) => s,
                (None, Some(v)) => choice("EDPM_AGENT_INVENTORY_SOURCE", v)?,
                (None, None) => InventorySource::Mounted,
            },
            retry_failed: given.retry_failed || retry_env,
            executor: match (given.executor, env.get("EDPM_AGENT_EXECUTOR")) {
                (Some(e), _) => e,
                (None, Some(v)) => choice("EDPM_AGENT_EXECUTOR", v)?,
                (None, None) => Executor::Auto,
            },
            init: given.init.or_else(|| env.string("EDPM_AGENT_INIT")),
            grace: Duration::from_secs(match (given.grace_period, env.get("EDPM_AGENT_GRACE_PERIOD")) {
                (Some(g), _) => g,
                (None, Some(v)) => v
                    .trim()
                    .parse()
                    .map_err(|_| bad("EDPM_AGENT_GRACE_PERIOD", v, "a whole number of seconds"))?,
                (None, None) => 20,
            }),
            summarize_only: given.summarize_only,
            command: given.command,
        })
    }
}

/// How the run ended, in the summary's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub rc: i32,
    pub timeout: Option<Timeout>,
    pub reason: Option<String>,
}

/// How the run ended: edpm-agent's own stop reason first, then ansible-runner's `status` file,
/// then the exit status. Timeouts exit 254, as ansible-runner's own do; a canceled run exits
/// with the child's status (ansible-runner: 254).
pub fn ending(outcome: &Outcome, runner_status: Option<RunStatus>, limits: &Limits) -> RunEnd {
    let killed = if outcome.killed {
        format!(", and killed after the {}s grace period", limits.grace.as_secs())
    } else {
        String::new()
    };
    let secs = |d: Option<Duration>| d.map_or(0, |d| d.as_secs());
    let rc = outcome.ending.code();
    let end = |status, rc, timeout, reason: Option<String>| RunEnd { status, rc, timeout, reason };
    match outcome.stop {
        Some(Stop::Timeout(t @ Timeout::Job)) => end(
            RunStatus::Timeout,
            RC_STOPPED,
            Some(t),
            Some(format!(
                "job timeout: the play ran longer than RUNNER_JOB_TIMEOUT={}s and was stopped{killed}",
                secs(limits.job)
            )),
        ),
        Some(Stop::Timeout(t @ Timeout::Idle)) => end(
            RunStatus::Timeout,
            RC_STOPPED,
            Some(t),
            Some(format!(
                "idle timeout: the play printed nothing for RUNNER_IDLE_TIMEOUT={}s and was stopped{killed}",
                secs(limits.idle)
            )),
        ),
        Some(Stop::Signal(sig)) => end(
            RunStatus::Canceled,
            rc,
            None,
            Some(format!("{} received: the play was canceled{killed}", signal_name(sig))),
        ),
        None => match runner_status {
            Some(RunStatus::Timeout) => {
                // ansible-runner's own timers (env/settings) fired first.
                let kind = match limits.job {
                    Some(j) if outcome.elapsed >= j => Timeout::Job,
                    _ => Timeout::Idle,
                };
                end(
                    RunStatus::Timeout,
                    rc,
                    Some(kind),
                    Some("ansible-runner stopped the play: timeout".into()),
                )
            }
            Some(s) => end(s, rc, None, None),
            None if rc == 0 => end(RunStatus::Successful, rc, None, None),
            None => {
                let reason = match outcome.ending {
                    Ending::Signaled(s) => Some(format!("the play was killed by signal {s}")),
                    Ending::Exited(_) => None,
                };
                end(RunStatus::Failed, rc, None, reason)
            }
        },
    }
}

/// The signal's name, for people.
pub fn signal_name(sig: i32) -> &'static str {
    // The values are Linux's (every architecture edpm-agent runs on).
    match sig {
        15 => "SIGTERM",
        2 => "SIGINT",
        _ => "a signal",
    }
}

/// Whether ansible-runner runs the play (else ansible-playbook). `program` is where the
/// command's program was found (`None`: not found), `playbook_found` whether ansible-playbook
/// is on PATH.
pub fn choose_executor(
    executor: Executor,
    cmd: &RunnerCommand,
    program: Option<&Path>,
    playbook_found: bool,
) -> Result<bool, RunError> {
    let ansible_runner = match executor {
        Executor::AnsibleRunner => true,
        Executor::AnsiblePlaybook => false,
        Executor::Auto => program.is_some(),
    };
    if ansible_runner && program.is_none() {
        return Err(RunError::Failure(format!(
            "{} not found on PATH; install ansible-runner, or use --executor ansible-playbook",
            cmd.program
        )));
    }
    if !ansible_runner && !playbook_found {
        return Err(RunError::Failure(
            "neither ansible-runner nor ansible-playbook is on PATH; install ansible-runner (or ansible-core)"
                .into(),
        ));
    }
    Ok(ansible_runner)
}

/// The playbook must exist (`present`: written for this run, or a file), unless only Ansible
/// can find it (a collection's playbook).
pub fn check_playbook(cmd: &RunnerCommand, present: &dyn Fn(&Path) -> bool) -> Result<(), RunError> {
    let Some(Playbook::File(p)) = cmd.playbook() else { return Ok(()) };
    if present(&p) {
        return Ok(());
    }
    let hint = if cmd.get("--playbook") == Some("playbook.yaml") {
        "set RUNNER_PLAYBOOK to the playbook's text, or mount it there"
    } else {
        "mount it there, or name a collection playbook (namespace.collection.name)"
    };
    Err(RunError::Unreadable(format!(
        "playbook {}: not found (ansible-runner -p {}); {hint}",
        p.display(),
        cmd.get("--playbook").unwrap_or("")
    )))
}

/// Where the play's inventory comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryPlan {
    /// The mounted inventory at `path`; `check`: every file of it must be readable (not when
    /// the Job's command line names its own, or the entrypoint writes one from
    /// `RUNNER_INVENTORY`).
    Mounted { path: PathBuf, check: bool },
    /// edpm-agent builds its own; `kube_only`: from the cluster alone.
    Build { kube_only: bool },
}

/// The inventory's source: `cmdline` is the Job's `RUNNER_CMDLINE`; `written` says whether
/// this run writes a file.
pub fn choose_inventory(
    source: InventorySource,
    cmd: &RunnerCommand,
    cmdline: Option<&str>,
    written: &dyn Fn(&Path) -> bool,
) -> InventoryPlan {
    let dir = Path::new(&cmd.private_data_dir);
    match source {
        InventorySource::Mounted => {
            let named_by_cmdline = cmdline
                .map(super::shlex::shlex_split)
                .and_then(Result::ok)
                .is_some_and(|w| w.iter().any(|a| a == "-i" || a.starts_with("--inventory")));
            let path = cmd.get("--inventory").map_or_else(|| dir.join("inventory"), |p| dir.join(p));
            let check = !named_by_cmdline && !written(&dir.join("inventory/inventory.yaml"));
            InventoryPlan::Mounted { path, check }
        }
        InventorySource::Kube => InventoryPlan::Build { kube_only: true },
        InventorySource::Sources => InventoryPlan::Build { kube_only: false },
    }
}

/// What a walk over a mounted inventory found: the number of readable files, or the first
/// path that could not be read and why.
pub type InventoryScan = Result<usize, (PathBuf, String)>;

/// Every file of a mounted inventory must be readable, and there must be one: Ansible would
/// otherwise skip it with a warning and run on fewer hosts.
pub fn check_inventory(path: &Path, scan: InventoryScan) -> Result<(), RunError> {
    let unreadable = |p: &Path, e: &str| {
        RunError::Unreadable(format!(
            "inventory {}: {e}; mount the inventory there, or use --inventory-source kube",
            p.display()
        ))
    };
    match scan {
        Err((p, e)) => Err(unreadable(&p, &e)),
        Ok(0) => Err(unreadable(path, "no inventory files")),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ending: Ending, stop: Option<Stop>, killed: bool) -> Outcome {
        Outcome { ending, stop, killed, elapsed: Duration::from_secs(5) }
    }

    const LIMITS: Limits = Limits {
        job: Some(Duration::from_secs(3)),
        idle: Some(Duration::from_secs(2)),
        grace: Duration::from_secs(20),
    };

    #[test]
    fn our_stop_reason_comes_first() {
        let e =
            ending(&outcome(Ending::Signaled(15), Some(Stop::Timeout(Timeout::Job)), true), None, &LIMITS);
        assert_eq!((e.status, e.rc, e.timeout), (RunStatus::Timeout, RC_STOPPED, Some(Timeout::Job)));
        assert_eq!(
            e.reason.as_deref(),
            Some(
                "job timeout: the play ran longer than RUNNER_JOB_TIMEOUT=3s and was stopped, and killed after the 20s grace period"
            )
        );
        let e = ending(&outcome(Ending::Exited(1), Some(Stop::Timeout(Timeout::Idle)), false), None, &LIMITS);
        assert_eq!((e.status, e.rc, e.timeout), (RunStatus::Timeout, RC_STOPPED, Some(Timeout::Idle)));
        let e = ending(
            &outcome(Ending::Exited(254), Some(Stop::Signal(15)), false),
            Some(RunStatus::Failed),
            &LIMITS,
        );
        assert_eq!((e.status, e.rc), (RunStatus::Canceled, 254));
        assert_eq!(e.reason.as_deref(), Some("SIGTERM received: the play was canceled"));
    }

    #[test]
    fn then_ansible_runners_status_then_the_exit_status() {
        let e = ending(&outcome(Ending::Exited(254), None, false), Some(RunStatus::Timeout), &LIMITS);
        assert_eq!(
            (e.status, e.timeout),
            (RunStatus::Timeout, Some(Timeout::Job)),
            "5s elapsed ≥ the 3s job limit"
        );
        let e = ending(&outcome(Ending::Exited(2), None, false), Some(RunStatus::Failed), &LIMITS);
        assert_eq!((e.status, e.rc, e.reason), (RunStatus::Failed, 2, None));
        let e = ending(&outcome(Ending::Exited(0), None, false), None, &LIMITS);
        assert_eq!(e.status, RunStatus::Successful);
        let e = ending(&outcome(Ending::Signaled(9), None, false), None, &LIMITS);
        assert_eq!((e.status, e.rc), (RunStatus::Failed, 137));
        assert_eq!(e.reason.as_deref(), Some("the play was killed by signal 9"));
    }

    fn cmd(args: &str) -> RunnerCommand {
        RunnerCommand::parse(&args.split(' ').map(String::from).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn executors() {
        let c = cmd("ansible-runner run /runner -p playbook.yaml");
        let found = Some(Path::new("/usr/bin/ansible-runner"));
        assert!(choose_executor(Executor::Auto, &c, found, true).unwrap());
        assert!(!choose_executor(Executor::Auto, &c, None, true).unwrap());
        assert!(!choose_executor(Executor::AnsiblePlaybook, &c, found, true).unwrap());
        let e = choose_executor(Executor::AnsibleRunner, &c, None, true).unwrap_err().to_string();
        assert!(e.contains("ansible-runner not found on PATH"), "{e}");
        let e = choose_executor(Executor::Auto, &c, None, false).unwrap_err().to_string();
        assert!(e.contains("neither ansible-runner nor ansible-playbook"), "{e}");
    }

    #[test]
    fn playbooks_must_be_there_unless_ansible_finds_them() {
        let c = cmd("ansible-runner run /runner -p playbook.yaml");
        assert!(check_playbook(&c, &|_| true).is_ok());
        let e = check_playbook(&c, &|_| false).unwrap_err().to_string();
        assert!(
            e.contains("playbook /runner/project/playbook.yaml: not found") && e.contains("RUNNER_PLAYBOOK"),
            "{e}"
        );
        let c = cmd("ansible-runner run /runner -p osp.edpm.deploy_nova");
        assert!(check_playbook(&c, &|_| false).is_ok());
    }

    #[test]
    fn inventory_plans() {
        let c = cmd("ansible-runner run /runner -p playbook.yaml");
        let mounted = choose_inventory(InventorySource::Mounted, &c, None, &|_| false);
        assert_eq!(mounted, InventoryPlan::Mounted { path: "/runner/inventory".into(), check: true });
        let named = choose_inventory(InventorySource::Mounted, &c, Some("-i /x/hosts"), &|_| false);
        assert_eq!(named, InventoryPlan::Mounted { path: "/runner/inventory".into(), check: false });
        let written =
            choose_inventory(InventorySource::Mounted, &c, None, &|p| p.ends_with("inventory.yaml"));
        assert_eq!(written, InventoryPlan::Mounted { path: "/runner/inventory".into(), check: false });
        assert_eq!(
            choose_inventory(InventorySource::Kube, &c, None, &|_| false),
            InventoryPlan::Build { kube_only: true }
        );
        assert!(check_inventory(Path::new("/i"), Ok(2)).is_ok());
        let e = check_inventory(Path::new("/i"), Ok(0)).unwrap_err().to_string();
        assert_eq!(
            e,
            "inventory /i: no inventory files; mount the inventory there, or use --inventory-source kube"
        );
        let e =
            check_inventory(Path::new("/i"), Err(("/i/a".into(), "Permission denied".into()))).unwrap_err();
        assert!(e.to_string().starts_with("inventory /i/a: Permission denied;"), "{e}");
    }

    #[test]
    fn options_flag_then_environment_then_default() {
        let env = Env::new([
            ("EDPM_AGENT_EXECUTOR".to_string(), "ansible-playbook".to_string()),
            ("EDPM_AGENT_GRACE_PERIOD".to_string(), "5".to_string()),
            ("EDPM_AGENT_RETRY_FAILED".to_string(), "yes".to_string()),
        ]);
        let o = Options::resolve(Given { grace_period: Some(7), ..Default::default() }, &env).unwrap();
        assert_eq!(
            (o.executor, o.grace, o.retry_failed),
            (Executor::AnsiblePlaybook, Duration::from_secs(7), true)
        );
        assert_eq!(o.inventory_source, InventorySource::Mounted);
        let env = Env::new([("EDPM_AGENT_EXECUTOR".to_string(), "podman".to_string())]);
        let e = Options::resolve(Given::default(), &env).unwrap_err().to_string();
        assert_eq!(
            e,
            "environment variable EDPM_AGENT_EXECUTOR=\"podman\": expected auto, ansible-runner, ansible-playbook"
        );
    }
}
