//! `run`: the AnsibleEE job entrypoint. Prepares the runner directory as upstream's image
//! entrypoint does (`job::prepare`), runs the play with ansible-runner (else ansible-playbook
//! and the project's callback plugin) under `supervise::supervise`, folds the job events into
//! per-host results (`summary`), and writes the full summary and the termination message.
//!
//! Order matters: the previous attempt is archived and the retry's hosts chosen first, then
//! every input is checked before anything is written, so bad input leaves the runner directory
//! as it was and still produces a summary (status `invalid`) that names the input.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{AppError, Context};
use crate::redact::{Redactor, secret_values};
use crate::runner::events::{event_file_counter, parse_event, parse_notes};
use crate::runner::fold::{Fold, RunFacts};
use crate::runner::job::Timeout;
use crate::runner::job::{self, DirState, JobEnv, Playbook, RunnerCommand};
use crate::runner::retry::{RetryPlan, RetryScope, retry_plan};
use crate::runner::shell::supervise::{self, Ending, Limits, Spec, Stop};
use crate::runner::summary::{RunStatus, RunSummary, SUMMARY_FILE};
use crate::settings::Env;
use crate::shell::cli::{Executor, InventorySource, RunArgs, SourceArgs};
use crate::shell::exit::{Exit, Status};

/// The callback plugin that writes job_events when ansible-playbook runs the play.
const EVENTS_PLUGIN: &str = include_str!("../../../packaging/ansible/callback_plugins/edpm_agent_events.py");
const EVENTS_PLUGIN_NAME: &str = "edpm_agent_events";
/// Kubernetes' termination message file (the Job's `terminationMessagePath`).
const TERMINATION_LOG: &str = "/dev/termination-log";
/// The retry's host list, one per line, passed as `--limit @FILE`.
const RETRY_LIMIT_FILE: &str = "edpm-retry-limit";
/// Under ansible-runner, the callback plugin's notes: each play's place in the playbook, and
/// which failures could stop the play.
const NOTES_FILE: &str = "edpm-notes.jsonl";
/// What a run leaves in `<artifacts>/<ident>/`, moved to `attempts/<n>/` before the next run
/// of the same ident (ansible-runner would otherwise mix both runs' events). The fact cache
/// stays: it is meant to outlive runs.
const RUN_FILES: &[&str] = &[
    "job_events",
    "stdout",
    "stderr",
    "rc",
    "status",
    "command",
    SUMMARY_FILE,
    "termination-log",
    RETRY_LIMIT_FILE,
    NOTES_FILE,
];
/// ansible-runner's return code for a timed-out or canceled run; used for our own timeouts.
const RC_STOPPED: i32 = 254;

/// Where this run reads and writes.
struct Layout {
    runner_dir: PathBuf,
    ident: String,
    artifact_dir: PathBuf,
    termination_log: Option<PathBuf>,
}

/// `run`'s own settings: flag, then environment (empty means unset), then default.
struct Options {
    runner_dir: Option<PathBuf>,
    inventory_source: InventorySource,
    retry_failed: bool,
    executor: Executor,
    init: Option<String>,
    grace: Duration,
    summarize_only: bool,
    command: Vec<String>,
}

fn options(args: RunArgs, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Options, AppError> {
    use clap::ValueEnum;
    let bad = |name: &str, v: &str, want: &str| {
        AppError::new(Exit::Usage, format!("environment variable {name}={v:?}: expected {want}"))
    };
    fn choice<T: ValueEnum>(
        name: &str,
        v: &str,
        bad: &dyn Fn(&str, &str, &str) -> AppError,
    ) -> Result<T, AppError> {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|x| Some(x.to_possible_value()?.get_name().to_string()))
            .collect();
        T::from_str(v.trim(), true).map_err(|_| bad(name, v, &names.join(", ")))
    }
    let retry_env = match lookup("EDPM_AGENT_RETRY_FAILED").map(|v| v.trim().to_ascii_lowercase()) {
        None => false,
        Some(v) if ["1", "true", "yes", "on", "y"].contains(&v.as_str()) => true,
        Some(v) if ["0", "false", "no", "off", "n"].contains(&v.as_str()) => false,
        Some(v) => return Err(bad("EDPM_AGENT_RETRY_FAILED", &v, "true or false")),
    };
    Ok(Options {
        runner_dir: args.runner_dir.or_else(|| lookup("EDPM_AGENT_RUNNER_DIR").map(PathBuf::from)),
        inventory_source: match (args.inventory_source, lookup("EDPM_AGENT_INVENTORY_SOURCE")) {
            (Some(s), _) => s,
            (None, Some(v)) => choice("EDPM_AGENT_INVENTORY_SOURCE", &v, &bad)?,
            (None, None) => InventorySource::Mounted,
        },
        retry_failed: args.retry_failed || retry_env,
        executor: match (args.executor, lookup("EDPM_AGENT_EXECUTOR")) {
            (Some(e), _) => e,
            (None, Some(v)) => choice("EDPM_AGENT_EXECUTOR", &v, &bad)?,
            (None, None) => Executor::Auto,
        },
        init: args.init.or_else(|| lookup("EDPM_AGENT_INIT")),
        grace: Duration::from_secs(match (args.grace_period, lookup("EDPM_AGENT_GRACE_PERIOD")) {
            (Some(g), _) => g,
            (None, Some(v)) => v
                .trim()
                .parse()
                .map_err(|_| bad("EDPM_AGENT_GRACE_PERIOD", &v, "a whole number of seconds"))?,
            (None, None) => 20,
        }),
        summarize_only: args.summarize_only,
        command: args.command,
    })
}

/// What the summary of a run that ends early (bad input) needs to know.
struct Attempt {
    number: u32,
    limit: Option<Vec<String>>,
}

pub(super) fn run(
    source: &SourceArgs,
    args: RunArgs,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Status, AppError> {
    // Before anything can start a thread (the Kubernetes client): signals are taken in the
    // supervision loop, never by default action.
    supervise::block_signals()
        .map_err(|e| AppError::new(Exit::Failure, format!("cannot block signals for supervision: {e}")))?;
    let lookup = |k: &str| env.string(k);
    let termination_log = lookup("EDPM_AEE_TERMINATION_LOG")
        .map(PathBuf::from)
        .or_else(|| Path::new(TERMINATION_LOG).exists().then(|| PathBuf::from(TERMINATION_LOG)));

    // The settings, the command and the paths it implies. Errors here have no artifacts
    // directory yet: only the termination log can say so.
    let early = |e: AppError| -> AppError {
        let partial = Layout {
            runner_dir: PathBuf::new(),
            ident: String::new(),
            artifact_dir: PathBuf::new(),
            termination_log: termination_log.clone(),
        };
        publish(&partial, &RunSummary::invalid("", e.code as i32, &e.message, 1, None));
        e
    };
    let args = options(args, &lookup).map_err(early)?;
    let (mut cmd, layout) = command_and_layout(&args, &lookup, termination_log.clone()).map_err(early)?;
    if args.summarize_only {
        return summarize_only(&layout, out);
    }

    // The previous attempt: archived, and read for --retry-failed.
    let previous = read_previous(&layout.artifact_dir);
    let archived = archive_previous(&layout.artifact_dir, previous.as_ref().map(|p| p.attempt));
    let number = match &archived {
        Ok(Some(n)) => n + 1,
        _ => 1,
    };
    let plan = args.retry_failed.then(|| retry_plan(previous.as_ref()));
    let limit = match &plan {
        Some(RetryPlan { scope: RetryScope::Hosts(h), .. }) => Some(h.clone()),
        _ => None,
    };
    let attempt = Attempt { number, limit };
    let fail = |e: AppError| -> AppError {
        let s = RunSummary::invalid(
            &layout.ident,
            e.code as i32,
            &e.message,
            attempt.number,
            attempt.limit.clone(),
        );
        publish(&layout, &s);
        e
    };
    if let Err(e) = archived {
        return Err(fail(AppError::new(
            Exit::Failure,
            format!("cannot move the previous attempt aside in {}: {e}", layout.artifact_dir.display()),
        )));
    }

    let prepared = prepare(&args, source, env, &lookup, &mut cmd, &layout, &attempt).map_err(fail)?;
    if let Some(sig) = supervise::pending_stop() {
        let reason = format!("{} received before the play started; nothing was run", signal_name(sig));
        let s = RunSummary::not_run(
            &layout.ident,
            RunStatus::Canceled,
            128 + sig,
            &reason,
            attempt.number,
            attempt.limit.clone(),
        );
        let written = publish(&layout, &s);
        super::output::write_out(out, &describe(&s, &written))?;
        return Ok(Status::Play((128 + sig) as u8));
    }
    let note = match &plan {
        Some(p) => p.note.clone(),
        None => format!("running {} (attempt {})", prepared.spec.argv.join(" "), attempt.number),
    };
    super::output::write_out(out, &format!("edpm-agent: {note}\n"))?;

    let sink = stdout_for_pump()
        .map_err(|e| AppError::new(Exit::Failure, format!("cannot stream the play's output: {e}")))?;
    let outcome = supervise::supervise(&prepared.spec, &prepared.limits, sink, prepared.tee)
        .map_err(|e| fail(AppError::new(Exit::Failure, e)))?;

    let runner_status = if prepared.ansible_runner {
        std::fs::read_to_string(layout.artifact_dir.join("status"))
            .ok()
            .and_then(|s| RunStatus::from_runner(&s))
    } else {
        None
    };
    let (status, rc, timeout, reason) = ending(&outcome, runner_status, &prepared.limits);
    if !prepared.ansible_runner {
        // The files ansible-runner would have written, so both ways leave the same artifacts.
        let _ = crate::shell::files::write_atomic(
            &layout.artifact_dir.join("rc"),
            rc.to_string().as_bytes(),
            0o600,
        );
        let _ = crate::shell::files::write_atomic(
            &layout.artifact_dir.join("status"),
            status.as_str().as_bytes(),
            0o600,
        );
    }
    let fold = read_job_events(&layout.artifact_dir);
    let mut secrets = prepared.secrets;
    if fold.has_failures()
        && let Some(inventory) = &prepared.mounted_inventory
    {
        secrets.extend(mounted_inventory_secrets(inventory));
    }
    let facts = RunFacts {
        ident: layout.ident.clone(),
        status,
        rc,
        timeout,
        reason,
        attempt: attempt.number,
        limit: attempt.limit.clone(),
    };
    let s = fold.finish(facts, &Redactor::new(secrets));
    let written = publish(&layout, &s);
    let _ = super::output::write_out(out, &describe(&s, &written));
    Ok(Status::Play((rc & 0xff) as u8))
}

/// How the run ended, in the summary's terms: edpm-agent's own stop reason first, then
/// ansible-runner's `status` file, then the exit status. Timeouts exit 254, as ansible-runner's
/// own do; a canceled run exits with the child's status (ansible-runner: 254).
fn ending(
    outcome: &supervise::Outcome,
    runner_status: Option<RunStatus>,
    limits: &Limits,
) -> (RunStatus, i32, Option<Timeout>, Option<String>) {
    let killed = if outcome.killed {
        format!(", and killed after the {}s grace period", limits.grace.as_secs())
    } else {
        String::new()
    };
    let secs = |d: Option<Duration>| d.map_or(0, |d| d.as_secs());
    let rc = outcome.ending.code();
    match outcome.stop {
        Some(Stop::Timeout(t @ Timeout::Job)) => (
            RunStatus::Timeout,
            RC_STOPPED,
            Some(t),
            Some(format!(
                "job timeout: the play ran longer than RUNNER_JOB_TIMEOUT={}s and was stopped{killed}",
                secs(limits.job)
            )),
        ),
        Some(Stop::Timeout(t @ Timeout::Idle)) => (
            RunStatus::Timeout,
            RC_STOPPED,
            Some(t),
            Some(format!(
                "idle timeout: the play printed nothing for RUNNER_IDLE_TIMEOUT={}s and was stopped{killed}",
                secs(limits.idle)
            )),
        ),
        Some(Stop::Signal(sig)) => (
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
                (RunStatus::Timeout, rc, Some(kind), Some("ansible-runner stopped the play: timeout".into()))
            }
            Some(s) => (s, rc, None, None),
            None if rc == 0 => (RunStatus::Successful, rc, None, None),
            None => {
                let reason = match outcome.ending {
                    Ending::Signaled(s) => Some(format!("the play was killed by signal {s}")),
                    Ending::Exited(_) => None,
                };
                (RunStatus::Failed, rc, None, reason)
            }
        },
    }
}

/// Our stdout for the output pump's thread: a duplicate descriptor, so that the caller's
/// locked handle and the pump never wait on each other.
fn stdout_for_pump() -> std::io::Result<Box<dyn Write + Send>> {
    use std::os::fd::AsFd;
    Ok(Box::new(std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?)))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// The Job's command (or the default one), its runner directory, artifacts directory and
/// ident.
fn command_and_layout(
    args: &Options,
    lookup: &dyn Fn(&str) -> Option<String>,
    termination_log: Option<PathBuf>,
) -> Result<(RunnerCommand, Layout), AppError> {
    let usage = |e: job::JobError| AppError::new(Exit::Usage, e);
    let given_dir = args.runner_dir.as_ref().map(|d| d.display().to_string());
    let mut cmd = if args.command.is_empty() {
        let env = JobEnv::read(lookup).map_err(|e| AppError::new(Exit::InvalidInput, e))?;
        RunnerCommand::default_for(given_dir.as_deref().unwrap_or(job::DEFAULT_RUNNER_DIR), &env)
    } else {
        RunnerCommand::parse(&args.command).map_err(usage)?
    };
    if let Some(d) = &given_dir {
        if cmd.private_data_dir == job::DEFAULT_RUNNER_DIR || cmd.private_data_dir == *d {
            cmd.set_private_data_dir(d);
        } else {
            return Err(usage(job::JobError::DirMismatch {
                given: d.clone(),
                command: cmd.private_data_dir.clone(),
            }));
        }
    }
    // Where ansible-runner writes its artifacts is where the summary is read: the command's
    // --artifact-dir, else EDPM_AEE_ARTIFACTS_ROOT (passed on so ansible-runner writes there).
    if cmd.get("--artifact-dir").is_none()
        && let Some(root) = lookup("EDPM_AEE_ARTIFACTS_ROOT")
    {
        cmd.push_option("--artifact-dir", &root);
    }
    let root = cmd.artifact_root();
    let ident = match cmd.ident() {
        Some(i) => i.to_string(),
        None if args.summarize_only => newest_dir(&root).unwrap_or_default(),
        None => {
            // ansible-runner would pick a random ident; name it, so the artifacts can be found.
            let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let ident = format!("edpm-agent-{secs}-{}", std::process::id());
            cmd.push_option("--ident", &ident);
            ident
        }
    };
    if ident.is_empty() || ident.contains('/') || ident == "." || ident == ".." {
        return Err(AppError::new(
            Exit::Usage,
            format!("ident {ident:?} cannot name an artifacts directory"),
        ));
    }
    let artifact_dir = root.join(&ident);
    let termination_log = termination_log.or_else(|| Some(artifact_dir.join("termination-log")));
    let runner_dir = PathBuf::from(&cmd.private_data_dir);
    Ok((cmd, Layout { runner_dir, ident, artifact_dir, termination_log }))
}

/// The newest run directory under `root`, as upstream's summary helper picks it.
fn newest_dir(root: &Path) -> Option<String> {
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let m = e.metadata().ok()?;
            if !m.is_dir() {
                return None;
            }
            Some((m.modified().ok()?, e.file_name().into_string().ok()?))
        })
        .max()
        .map(|(_, n)| n)
}

/// Everything the play needs, checked; the runner directory written.
struct Prepared {
    spec: Spec,
    limits: Limits,
    ansible_runner: bool,
    /// The artifacts `stdout` file, when edpm-agent writes it (ansible-playbook).
    tee: Option<std::fs::File>,
    /// Secret values known to edpm-agent (its own inventory's Secrets, secret-named extra
    /// vars), for redaction.
    secrets: Vec<String>,
    /// The mounted inventory, whose secret-named variables are read for redaction when a
    /// host failed.
    mounted_inventory: Option<PathBuf>,
    /// Temporary files (inventory, callback plugin, role play) that must live as long as
    /// the play.
    _scratch: tempfile::TempDir,
}

fn invalid(e: job::JobError) -> AppError {
    use job::JobError as J;
    let code = match e {
        J::NotRunner { .. }
        | J::BadOption { .. }
        | J::NoDirectory
        | J::NoPlaybook
        | J::DirMismatch { .. } => Exit::Usage,
        J::Env { .. } | J::Malformed { .. } | J::NoFallback { .. } => Exit::InvalidInput,
    };
    AppError::new(code, e)
}

/// Checks every input, builds the inventory when edpm-agent provides it, and only then writes
/// the runner directory and the retry's limit.
fn prepare(
    args: &Options,
    source: &SourceArgs,
    env: &Env,
    lookup: &dyn Fn(&str) -> Option<String>,
    cmd: &mut RunnerCommand,
    layout: &Layout,
    attempt: &Attempt,
) -> Result<Prepared, AppError> {
    let job = JobEnv::read(lookup).map_err(invalid)?;
    let dir = &layout.runner_dir;
    let settings = read_optional(&dir.join("env/settings"))?;
    let writes = job::prepare(cmd, &job, settings.as_deref(), lookup).map_err(invalid)?;
    let written = |p: &Path| writes.iter().any(|w| w.path == p);
    check_playbook(cmd, &written)?;
    let scratch = tempfile::Builder::new()
        .prefix("edpm-agent-run.")
        .tempdir()
        .map_err(|e| AppError::new(Exit::Failure, format!("cannot create a temporary directory: {e}")))?;
    let inventory = choose_inventory(args, source, env, cmd, &job, &written, scratch.path())?;
    let ansible_runner = choose_executor(args.executor, cmd, lookup)?;

    // Every input checked: write the runner directory, then the retry's limit.
    for w in &writes {
        write_with_parents(&w.path, w.contents.as_bytes(), w.mode)?;
    }
    create_dir(&layout.artifact_dir)?;
    if let Some(hosts) = &attempt.limit {
        let path = layout.artifact_dir.join(RETRY_LIMIT_FILE);
        super::output::write_file(&path, format!("{}\n", hosts.join("\n")).as_bytes(), 0o600)?;
        cmd.push_option("--limit", &format!("@{}", path.display()));
    }
    if let Some(p) = &inventory.generated {
        cmd.push_option("--inventory", &p.display().to_string());
    }
    let (spec, tee) =
        child(args, lookup, cmd, layout, ansible_runner, inventory.generated.as_deref(), scratch.path())?;
    Ok(Prepared {
        spec,
        limits: Limits { job: job.job_timeout, idle: job.idle_timeout, grace: args.grace },
        ansible_runner,
        tee,
        secrets: inventory.secrets,
        mounted_inventory: inventory.mounted,
        _scratch: scratch,
    })
}

/// The playbook must exist, unless only Ansible can find it (a collection's playbook).
fn check_playbook(cmd: &RunnerCommand, written: &dyn Fn(&Path) -> bool) -> Result<(), AppError> {
    let Some(Playbook::File(p)) = cmd.playbook() else { return Ok(()) };
    if written(&p) || p.is_file() {
        return Ok(());
    }
    let hint = if cmd.get("--playbook") == Some("playbook.yaml") {
        "set RUNNER_PLAYBOOK to the playbook's text, or mount it there"
    } else {
        "mount it there, or name a collection playbook (namespace.collection.name)"
    };
    Err(AppError::new(
        Exit::SourceUnreadable,
        format!(
            "playbook {}: not found (ansible-runner -p {}); {hint}",
            p.display(),
            cmd.get("--playbook").unwrap_or("")
        ),
    ))
}

/// Where the play's inventory comes from, and the secret values known for redaction.
struct InventoryChoice {
    /// edpm-agent's own inventory, written for the play.
    generated: Option<PathBuf>,
    /// The mounted inventory, read for secret-named variables if a host fails.
    mounted: Option<PathBuf>,
    secrets: Vec<String>,
}

/// The mounted inventory, checked file by file, or edpm-agent's own, built now into
/// `scratch` (mode 0600: it holds values from Secrets).
fn choose_inventory(
    args: &Options,
    source: &SourceArgs,
    env: &Env,
    cmd: &RunnerCommand,
    job: &JobEnv,
    written: &dyn Fn(&Path) -> bool,
    scratch: &Path,
) -> Result<InventoryChoice, AppError> {
    let dir = Path::new(&cmd.private_data_dir);
    let mut secrets = Vec::new();
    if let Some(text) = &job.extra_vars
        && let Ok(v) = serde_saphyr::from_str::<serde_json::Value>(text)
    {
        secret_values(&v, &mut secrets);
    }
    if args.inventory_source == InventorySource::Mounted {
        let named_by_cmdline = job
            .cmdline
            .as_deref()
            .map(job::shlex_split)
            .and_then(Result::ok)
            .is_some_and(|w| w.iter().any(|a| a == "-i" || a.starts_with("--inventory")));
        let inventory = cmd.get("--inventory").map_or_else(|| dir.join("inventory"), |p| dir.join(p));
        if !named_by_cmdline && !written(&dir.join("inventory/inventory.yaml")) {
            check_inventory(&inventory)?;
        }
        return Ok(InventoryChoice { generated: None, mounted: Some(inventory), secrets });
    }
    let mut source = source.clone();
    if args.inventory_source == InventorySource::Kube {
        source.sources = vec!["kube".into()];
    }
    let mut settings = super::resolve_settings(&source, env)?;
    if settings.ssh_key_dir == crate::settings::DEFAULT_SSH_KEY_DIR
        && dir != Path::new(job::DEFAULT_RUNNER_DIR)
    {
        settings.ssh_key_dir = dir.join("env/ssh_key").display().to_string();
    }
    let (snap, _model, inv) = Context::new(&settings).inventory()?;
    for s in &snap.secrets {
        secrets.extend(s.body.data.values().filter_map(|v| String::from_utf8(v.clone()).ok()));
    }
    let path = scratch.join("edpm-inventory.json");
    super::output::write_file(&path, crate::inventory::export::static_json(&inv).as_bytes(), 0o600)?;
    Ok(InventoryChoice { generated: Some(path), mounted: None, secrets })
}

/// Whether ansible-runner runs the play (else ansible-playbook), checking that it is there.
fn choose_executor(
    executor: Executor,
    cmd: &RunnerCommand,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<bool, AppError> {
    let path_var = lookup("PATH").unwrap_or_default();
    let runner_bin = if cmd.program.contains('/') {
        is_executable(Path::new(&cmd.program)).then(|| PathBuf::from(&cmd.program))
    } else {
        which(&cmd.program, &path_var)
    };
    let ansible_runner = match executor {
        Executor::AnsibleRunner => true,
        Executor::AnsiblePlaybook => false,
        Executor::Auto => runner_bin.is_some(),
    };
    if ansible_runner && runner_bin.is_none() {
        return Err(AppError::new(
            Exit::Failure,
            format!(
                "{} not found on PATH; install ansible-runner, or use --executor ansible-playbook",
                cmd.program
            ),
        ));
    }
    if !ansible_runner && which("ansible-playbook", &path_var).is_none() {
        return Err(AppError::new(
            Exit::Failure,
            "neither ansible-runner nor ansible-playbook is on PATH; install ansible-runner (or ansible-core)",
        ));
    }
    Ok(ansible_runner)
}

/// The play's command line and environment: upstream's defaults, the container user's HOME,
/// the callback plugin (under ansible-runner it only notes play positions and fatal failures;
/// with ansible-playbook it writes the job events, and edpm-agent tees the output to the
/// artifacts' `stdout` as ansible-runner would), then the init in front.
fn child(
    args: &Options,
    lookup: &dyn Fn(&str) -> Option<String>,
    cmd: &RunnerCommand,
    layout: &Layout,
    ansible_runner: bool,
    inventory: Option<&Path>,
    scratch: &Path,
) -> Result<(Spec, Option<std::fs::File>), AppError> {
    let dir = &layout.runner_dir;
    let mut env: Vec<(String, String)> = job::DEFAULT_ENV
        .iter()
        .filter(|(k, _)| lookup(k).is_none())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.extend(supervise::user_environment(dir, lookup));
    if lookup("PYTHONUNBUFFERED").is_none() {
        // ansible-runner writes some output without flushing; the job's log should not wait.
        env.push(("PYTHONUNBUFFERED".into(), "1".into()));
    }
    let plugins = scratch.join("callback_plugins");
    create_dir(&plugins)?;
    super::output::write_file(
        &plugins.join(format!("{EVENTS_PLUGIN_NAME}.py")),
        EVENTS_PLUGIN.as_bytes(),
        0o644,
    )?;
    let join = |name: &str, add: &str, sep: &str| match lookup(name) {
        Some(v) => format!("{v}{sep}{add}"),
        None => add.to_string(),
    };
    env.extend([
        (
            "ANSIBLE_CALLBACK_PLUGINS".into(),
            join("ANSIBLE_CALLBACK_PLUGINS", &plugins.display().to_string(), ":"),
        ),
        ("ANSIBLE_CALLBACKS_ENABLED".into(), join("ANSIBLE_CALLBACKS_ENABLED", EVENTS_PLUGIN_NAME, ",")),
        ("EDPM_AGENT_IDENT".into(), layout.ident.clone()),
    ]);
    let (mut argv, cwd, tee) = if ansible_runner {
        // Absolute: ansible-runner runs ansible-playbook in the project directory, where a
        // relative --runner-dir would point elsewhere.
        let notes = std::path::absolute(layout.artifact_dir.join(NOTES_FILE))
            .map_err(|e| AppError::new(Exit::Failure, format!("{}: {e}", layout.artifact_dir.display())))?;
        env.push(("EDPM_AGENT_NOTES_FILE".into(), notes.display().to_string()));
        let mut argv = vec![cmd.program.clone()];
        argv.extend(cmd.args.iter().cloned());
        (argv, std::env::current_dir().unwrap_or_else(|_| dir.clone()), None)
    } else {
        let state = DirState {
            project_exists: cmd.project_dir().is_dir(),
            cmdline: read_optional(&dir.join("env/cmdline"))?,
            extravars_exists: dir.join("env/extravars").is_file(),
            ssh_key_file: dir.join("env/ssh_key").is_file(),
            envvars: read_optional(&dir.join("env/envvars"))?,
            settings: read_optional(&dir.join("env/settings"))?,
        };
        let role_play = scratch.join("role-play.json");
        let p = job::playbook_command(cmd, &state, inventory, &layout.artifact_dir, &role_play)
            .map_err(invalid)?;
        if let Some(play) = &p.role_play {
            super::output::write_file(&role_play, play.as_bytes(), 0o644)?;
        }
        let events = layout.artifact_dir.join("job_events");
        create_dir(&events)?;
        env.extend(p.env);
        let events = std::path::absolute(&events)
            .map_err(|e| AppError::new(Exit::Failure, format!("{}: {e}", events.display())))?;
        env.push(("EDPM_AGENT_EVENTS_DIR".into(), events.display().to_string()));
        if lookup("ANSIBLE_HOST_KEY_CHECKING").is_none() {
            env.push(("ANSIBLE_HOST_KEY_CHECKING".into(), "False".into()));
        }
        let stdout = layout.artifact_dir.join("stdout");
        let tee = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&stdout)
            .map_err(|e| AppError::new(Exit::Failure, format!("cannot write {}: {e}", stdout.display())))?;
        (p.argv, p.cwd, Some(tee))
    };
    if let Some(init) = &args.init {
        argv.splice(0..0, [init.clone(), "--".into()]);
    }
    Ok((Spec { argv, cwd, env }, tee))
}

fn read_optional(path: &Path) -> Result<Option<String>, AppError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AppError::new(Exit::SourceUnreadable, format!("{}: {e}", path.display()))),
    }
}

fn create_dir(path: &Path) -> Result<(), AppError> {
    std::fs::create_dir_all(path)
        .map_err(|e| AppError::new(Exit::Failure, format!("cannot create {}: {e}", path.display())))
}

fn write_with_parents(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AppError> {
    if let Some(parent) = path.parent() {
        create_dir(parent)?;
    }
    super::output::write_file(path, bytes, mode)
}

/// Every file of a mounted inventory must be readable: Ansible would otherwise skip it with
/// a warning and run on fewer hosts.
fn check_inventory(path: &Path) -> Result<(), AppError> {
    let unreadable = |p: &Path, e: &dyn std::fmt::Display| {
        AppError::new(
            Exit::SourceUnreadable,
            format!(
                "inventory {}: {e}; mount the inventory there, or use --inventory-source kube",
                p.display()
            ),
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| unreadable(path, &e))?;
    if meta.is_file() {
        return std::fs::File::open(path).map(drop).map_err(|e| unreadable(path, &e));
    }
    let mut stack = vec![path.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| unreadable(&d, &e))? {
            let entry = entry.map_err(|e| unreadable(&d, &e))?;
            let p = entry.path();
            // Ansible skips dot-names; Kubernetes keeps its mount bookkeeping there.
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let m = std::fs::metadata(&p).map_err(|e| unreadable(&p, &e))?;
            if m.is_dir() {
                stack.push(p);
            } else {
                std::fs::File::open(&p).map_err(|e| unreadable(&p, &e))?;
                files += 1;
            }
        }
    }
    if files == 0 {
        return Err(unreadable(path, &"no inventory files"));
    }
    Ok(())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn which(program: &str, path_var: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var).map(|d| d.join(program)).find(|p| is_executable(p))
}

/// The previous attempt's summary: its `edpm-summary.json`, else its events folded now (a
/// pod killed before it could write one).
fn read_previous(artifact_dir: &Path) -> Option<RunSummary> {
    if let Ok(text) = std::fs::read_to_string(artifact_dir.join(SUMMARY_FILE))
        && let Ok(s) = serde_json::from_str::<RunSummary>(&text)
    {
        return Some(s);
    }
    let events = artifact_dir.join("job_events");
    if !events.is_dir() {
        return None;
    }
    let rc = std::fs::read_to_string(artifact_dir.join("rc")).ok().and_then(|s| s.trim().parse().ok());
    let status =
        std::fs::read_to_string(artifact_dir.join("status")).ok().and_then(|s| RunStatus::from_runner(&s));
    let facts = RunFacts {
        ident: artifact_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        status: status.unwrap_or(RunStatus::Canceled),
        rc: rc.unwrap_or(RC_STOPPED),
        timeout: None,
        reason: Some("summarized from the events a previous pod left".into()),
        attempt: attempts_so_far(artifact_dir) + 1,
        limit: None,
    };
    Some(read_job_events(artifact_dir).finish(facts, &Redactor::default()))
}

/// The highest attempt number archived under `attempts/`.
fn attempts_so_far(artifact_dir: &Path) -> u32 {
    std::fs::read_dir(artifact_dir.join("attempts"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).max().unwrap_or(0))
        .unwrap_or(0)
}

/// Moves the previous run's files to `attempts/<n>/`; returns `n`, or `None` when there was
/// no previous run.
fn archive_previous(artifact_dir: &Path, previous_attempt: Option<u32>) -> std::io::Result<Option<u32>> {
    let present: Vec<&str> =
        RUN_FILES.iter().copied().filter(|f| artifact_dir.join(f).symlink_metadata().is_ok()).collect();
    if present.is_empty() {
        return Ok(None);
    }
    let archived = attempts_so_far(artifact_dir);
    let n = previous_attempt.filter(|p| *p > archived).unwrap_or(archived + 1);
    let to = artifact_dir.join("attempts").join(n.to_string());
    std::fs::create_dir_all(&to)?;
    for f in present {
        std::fs::rename(artifact_dir.join(f), to.join(f))?;
    }
    Ok(Some(n))
}

/// Folds the event files of `<artifact_dir>/job_events` in counter order, reading and parsing
/// them on every core, with the callback plugin's notes on failures.
fn read_job_events(artifact_dir: &Path) -> Fold {
    let mut fold = Fold::new();
    if let Ok(text) = std::fs::read_to_string(artifact_dir.join(NOTES_FILE)) {
        fold.set_notes(parse_notes(&text));
    }
    let dir = artifact_dir.join("job_events");
    let (Ok(entries), Ok(files)) = (std::fs::read_dir(&dir), crate::shell::files::DirFiles::open(&dir))
    else {
        return fold;
    };
    let mut names: Vec<(u64, std::ffi::OsString)> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            Some((event_file_counter(name.to_str()?)?, name))
        })
        .collect();
    names.sort_unstable_by_key(|(n, _)| *n);
    // Read and parsed on every core, a chunk at a time, while this thread folds the chunks
    // already done, in order; memory holds only a few chunks of parsed events.
    crate::shell::parallel::for_each_ordered(
        &names,
        2048,
        |chunk| {
            let mut buf = Vec::new();
            chunk
                .iter()
                .map(|(_, name)| {
                    let quick = files.read(name, &mut buf, false).ok().and_then(|b| parse_event(b).ok());
                    // A short read that was not the end of the file: read it whole.
                    quick.or_else(|| files.read(name, &mut buf, true).ok().and_then(|b| parse_event(b).ok()))
                })
                .collect::<Vec<_>>()
        },
        |events| {
            for ev in events {
                match ev {
                    Some(e) => fold.push(e),
                    None => fold.unreadable(),
                }
            }
        },
    );
    fold
}

/// Values of secret-named variables in a mounted inventory (`*password*`, `*secret*`, ...),
/// for redaction: the operator's inventory Secret does not say which values came from Secrets.
fn mounted_inventory_secrets(path: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if let Ok(d) = std::fs::read_dir(&p) {
                stack.extend(
                    d.filter_map(|e| e.ok())
                        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                        .map(|e| e.path()),
                );
            }
        } else {
            files.push(p);
        }
    }
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let options = serde_saphyr::options! { duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins };
        if let Ok(v) = serde_saphyr::from_str_with_options::<serde_json::Value>(&text, options) {
            secret_values(&v, &mut out);
        }
    }
    out
}

/// `--summarize-only`: what upstream's summary helper does, from existing artifacts.
fn summarize_only(layout: &Layout, out: &mut dyn Write) -> Result<Status, AppError> {
    if !layout.artifact_dir.is_dir() {
        super::output::write_out(
            out,
            &format!("edpm-agent: no artifacts in {}; nothing to summarize\n", layout.artifact_dir.display()),
        )?;
        return Ok(Exit::Success.into());
    }
    let rc = std::fs::read_to_string(layout.artifact_dir.join("rc"))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let runner = std::fs::read_to_string(layout.artifact_dir.join("status"))
        .ok()
        .and_then(|s| RunStatus::from_runner(&s));
    let status = runner.unwrap_or(match rc {
        Some(0) => RunStatus::Successful,
        _ => RunStatus::Failed,
    });
    let facts = RunFacts {
        ident: layout.ident.clone(),
        status,
        rc: rc.unwrap_or(0),
        timeout: None,
        reason: None,
        attempt: attempts_so_far(&layout.artifact_dir) + 1,
        limit: None,
    };
    let s = read_job_events(&layout.artifact_dir).finish(facts, &Redactor::default());
    let written = publish(layout, &s);
    super::output::write_out(out, &describe(&s, &written))?;
    Ok(Exit::Success.into())
}

/// Writes the full summary and the termination message. A failure to write either is
/// reported and does not change the run's result. Returns a note on where they went.
fn publish(layout: &Layout, s: &RunSummary) -> String {
    let mut problems = Vec::new();
    let mut note = String::new();
    if !layout.ident.is_empty() {
        let path = layout.artifact_dir.join(SUMMARY_FILE);
        let text = serde_json::to_string_pretty(s).unwrap_or_default() + "\n";
        match std::fs::create_dir_all(&layout.artifact_dir)
            .and_then(|()| crate::shell::files::write_atomic(&path, text.as_bytes(), 0o644))
        {
            Ok(()) => note = format!("; summary in {}", path.display()),
            Err(e) => problems.push(format!("cannot write {}: {e}", path.display())),
        }
    }
    if let Some(path) = &layout.termination_log {
        // Written in place: Kubernetes bind-mounts this file, so it cannot be replaced by a
        // rename. One write of at most 4 KiB.
        let text = s.termination_message.to_json();
        let r = path
            .parent()
            .map_or(Ok(()), |p| if p.as_os_str().is_empty() { Ok(()) } else { std::fs::create_dir_all(p) });
        if let Err(e) = r.and_then(|()| std::fs::write(path, text.as_bytes())) {
            problems.push(format!("cannot write the termination message to {}: {e}", path.display()));
        }
    }
    for p in problems {
        eprintln!("edpm-agent: warning: {p}");
    }
    note
}

/// The result for the job's log: a line of counts, then one line per host that failed or was
/// unreachable, with the task and the message.
fn describe(s: &RunSummary, written: &str) -> String {
    use crate::runner::summary::HostStatus as H;
    let mut line = format!("edpm-agent: {} (rc {}): {} host(s)", s.status.as_str(), s.rc, s.hosts.len());
    for (label, st) in
        [("failed", H::Failed), ("unreachable", H::Unreachable), ("interrupted", H::Interrupted)]
    {
        let hosts = s.hosts_with(st);
        if !hosts.is_empty() {
            let more = hosts.len().saturating_sub(10);
            let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
            line.push_str(&format!(
                ", {label} {} ({}{tail})",
                hosts.len(),
                hosts[..hosts.len().min(10)].join(", ")
            ));
        }
    }
    if let Some(r) = &s.reason {
        line.push_str(&format!("; {r}"));
    }
    line.push_str(written);
    for (host, h) in &s.hosts {
        if let Some(t) = &h.failed_task {
            let what = if t.unreachable { "unreachable at" } else { "failed at" };
            line.push_str(&format!("\nedpm-agent: {host}: {what} task {:?}: {}", t.task, t.message));
        }
    }
    line.push('\n');
    line
}
