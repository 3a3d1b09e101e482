//! The AnsibleEE job entrypoint's shell (`edpm-agent run`), as a sequence of I/O around the
//! runner's decisions (the pure `edpm_core::runner::policy`): prepare the runner directory as
//! upstream's image entrypoint does (`runner::entrypoint::prepare`), run the play with
//! ansible-runner (else ansible-playbook and the project's callback plugin) under
//! `edpm_io::process::supervise`, fold the job events into per-host results, and write the
//! summary and the termination message. The Job's environment (`runner::env::JobEnv`) is read
//! once, here, and passed down. The CLI parses the flags into a [`Given`], and builds the play's
//! inventory when edpm-agent provides it ([`Inventory`]).
//!
//! Order matters: the previous attempt is archived and the retry's hosts chosen first, then
//! every input is checked before anything is written, so bad input leaves the runner directory
//! as it was and still produces a summary (status `invalid`) that names the input.
//!
//! - `prepare`: every input checked before anything is written; `play`: the play's command,
//!   environment and embedded callback plugin; `user`: the container user's passwd entry and
//!   HOME; `artifacts`: the job's files.

mod artifacts;
mod play;
mod prepare;
mod user;

use std::io::Write;
use std::path::{Path, PathBuf};

use artifacts::{self as art, Layout, TERMINATION_LOG};
use edpm_core::environment::Env;
use edpm_core::redact::Redactor;
use edpm_core::runner::argv::RunnerCommand;
use edpm_core::runner::env::JobEnv;
use edpm_core::runner::fold::RunFacts;
use edpm_core::runner::job::JobError;
use edpm_core::runner::policy::{self, Options, RunError};
use edpm_io::output::{OutputError, write_out};
use prepare::{Prepared, prepare};

pub use edpm_core::runner::policy::Given;

/// A run's error: one of the runner's own, or one of the CLI's while it built the play's
/// inventory, which keeps its exit code. A run that fails says the code and the message in its
/// summary and termination message, so the error must give both.
pub trait Failure: edpm_io::program::Failure + From<RunError> + From<JobError> + From<OutputError> {
    /// Its one-line message.
    fn message(&self) -> &str;
}

/// What a run ended with (an error aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The play's return code (or 128 + the signal that stopped it before it started).
    Play(u8),
    /// Nothing was run: `--summarize-only` summarized, or found nothing to.
    Summarized,
}

/// What the CLI builds the play's inventory from, when edpm-agent provides it: where the
/// command's runner directory is, whether only the cluster is read (`--inventory-source
/// kube`), and where to write it (a directory of the run's, mode 0600: it holds values from
/// Secrets). The builder adds the values of the Secrets it read to the run's redactions.
pub struct Inventory<'a> {
    pub runner_dir: &'a Path,
    pub kube_only: bool,
    pub scratch: &'a Path,
}
use edpm_core::runner::retry::{RetryPlan, RetryScope, retry_plan};
use edpm_core::runner::summary::{RC_UNKNOWN, RunStatus, RunSummary, describe};
use edpm_io::process::supervise;

/// Which attempt this is, and the hosts a retry limits it to.
struct Attempt {
    number: u32,
    limit: Option<Vec<String>>,
}

impl Attempt {
    /// `e`, once a summary (status `invalid`) that names it is written where this attempt's
    /// summary goes.
    fn fail<E: Failure>(&self, layout: &Layout, e: E) -> E {
        let s = RunSummary::invalid(
            &layout.ident,
            i32::from(e.exit_code()),
            e.message(),
            self.number,
            self.limit.clone(),
        );
        publish(layout, &s);
        e
    }
}

/// Runs the Job: `given` (the command line's), `env` (the process environment, read once by
/// `main`), the run's notes and summary to `out`, and `build` to make the play's inventory when
/// edpm-agent provides it (returning its path).
pub fn run<E: Failure>(
    given: Given,
    env: &Env,
    out: &mut dyn Write,
    build: impl FnOnce(Inventory, &mut Vec<String>) -> Result<PathBuf, E>,
) -> Result<Ended, E> {
    // Before anything can start a thread (the Kubernetes client): signals are taken in the
    // supervision loop, never by default action.
    supervise::block_signals()
        .map_err(|e| RunError::Failure(format!("cannot block signals for supervision: {e}")))?;
    let termination_log = termination_log(env);
    // Errors before the artifacts directory is known: only the termination log can say so.
    let early = |e: E| early_failure(termination_log.clone(), e);
    let opts = Options::resolve(given, env).map_err(|e| early(e.into()))?;
    // The Job's environment, read once for the whole run: the default command, the runner
    // directory's files, the limits and the secrets of extra vars all come from this reading.
    let job = JobEnv::read(&|k: &str| env.string(k));
    let (mut cmd, layout) =
        art::command_and_layout(&opts, env, &job, termination_log.clone()).map_err(|e| early(e.into()))?;
    if opts.summarize_only {
        return summarize_only(&opts, &cmd, &job, &layout, out);
    }
    let (plan, attempt) = next_attempt::<E>(&opts, &layout)?;

    let cmd_dir = PathBuf::from(&cmd.private_data_dir);
    let build = |kube_only: bool, scratch: &Path, secrets: &mut Vec<String>| {
        build(Inventory { runner_dir: &cmd_dir, kube_only, scratch }, secrets)
    };
    let prepared = prepare(&opts, env, &job, &mut cmd, &layout, attempt.limit.as_deref(), build)
        .map_err(|e| attempt.fail(&layout, e))?;
    if let Some(sig) = supervise::pending_stop() {
        return not_started(sig, &layout, &attempt, out);
    }
    let redactor = Redactor::new(prepared.secrets.iter().cloned()).with_named(prepared.named.iter().cloned());
    let note = match &plan {
        Some(p) => p.note.clone(),
        None => format!("running {} (attempt {})", prepared.play.spec.argv.join(" "), attempt.number),
    };
    // The command line holds the Job's words (RUNNER_CMDLINE, `-e db_password=…` included): a
    // line of the log, redacted and escaped.
    let note = redactor.redact(&note);
    write_out(out, &format!("edpm-agent: {}\n", edpm_core::excerpt::printable(&note)))?;
    play_and_summarize(prepared, redactor, &layout, attempt, out)
}

/// Where the termination message goes: `EDPM_AEE_TERMINATION_LOG`, else Kubernetes' file when
/// it is there.
fn termination_log(env: &Env) -> Option<PathBuf> {
    env.get("EDPM_AEE_TERMINATION_LOG")
        .map(PathBuf::from)
        .or_else(|| Path::new(TERMINATION_LOG).exists().then(|| PathBuf::from(TERMINATION_LOG)))
}

/// `e`, before the artifacts directory is known: said in the termination log only.
fn early_failure<E: Failure>(termination_log: Option<PathBuf>, e: E) -> E {
    let partial = Layout {
        runner_dir: PathBuf::new(),
        ident: String::new(),
        artifact_dir: PathBuf::new(),
        termination_log,
    };
    publish(&partial, &RunSummary::invalid("", i32::from(e.exit_code()), e.message(), 1, None));
    e
}

/// The previous attempt, archived, and read for `--retry-failed`: the retry's plan, and this
/// attempt.
fn next_attempt<E: Failure>(opts: &Options, layout: &Layout) -> Result<(Option<RetryPlan>, Attempt), E> {
    let previous = art::read_previous(&layout.artifact_dir);
    let archived = art::archive_previous(&layout.artifact_dir, previous.as_ref().map(|p| p.attempt));
    let plan = opts.retry_failed.then(|| retry_plan(previous.as_ref()));
    let limit = match &plan {
        Some(RetryPlan { scope: RetryScope::Hosts(h), .. }) => Some(h.clone()),
        _ => None,
    };
    let attempt = Attempt { number: archived.as_ref().ok().copied().flatten().map_or(1, |n| n + 1), limit };
    if let Err(e) = archived {
        let where_ = layout.artifact_dir.display();
        return Err(attempt.fail(
            layout,
            RunError::Failure(format!("cannot move the previous attempt aside in {where_}: {e}")).into(),
        ));
    }
    Ok((plan, attempt))
}

/// A SIGTERM or SIGINT (`sig`) taken before the play started: nothing was run, and the summary
/// says so.
fn not_started<E: Failure>(
    sig: i32,
    layout: &Layout,
    attempt: &Attempt,
    out: &mut dyn Write,
) -> Result<Ended, E> {
    let reason = format!("{} received before the play started; nothing was run", policy::signal_name(sig));
    let (n, l) = (attempt.number, attempt.limit.clone());
    let s = RunSummary::not_run(&layout.ident, RunStatus::Canceled, 128 + sig, &reason, n, l);
    let written = publish(layout, &s);
    write_out(out, &describe(&s, &written))?;
    Ok(Ended::Play((128 + sig) as u8))
}

/// Runs the prepared play under supervision, folds its job events into the summary and
/// publishes it. The play's return code is the exit status.
fn play_and_summarize<E: Failure>(
    prepared: Prepared,
    mut redactor: Redactor,
    layout: &Layout,
    attempt: Attempt,
    out: &mut dyn Write,
) -> Result<Ended, E> {
    let sink = edpm_io::output::stdout_for_pump()
        .map_err(|e| RunError::Failure(format!("cannot stream the play's output: {e}")))?;
    let outcome = supervise::supervise(&prepared.play.spec, &prepared.limits, sink, prepared.play.tee)
        .map_err(|e| attempt.fail::<E>(layout, RunError::Failure(e.to_string()).into()))?;
    let runner_status = prepared.ansible_runner.then(|| art::runner_result(&layout.artifact_dir).1).flatten();
    let end = policy::ending(&outcome, runner_status, &prepared.limits);
    if !prepared.ansible_runner {
        // The files ansible-runner would have written, so both ways leave the same artifacts.
        let _ = art::write_file(&layout.artifact_dir.join("rc"), end.rc.to_string().as_bytes(), 0o600);
        let _ = art::write_file(&layout.artifact_dir.join("status"), end.status.as_str().as_bytes(), 0o600);
    }
    let fold = art::read_job_events(&layout.artifact_dir);
    if fold.has_failures()
        && let Some(inventory) = &prepared.mounted_inventory
    {
        // The operator's inventory Secret does not say which values came from Secrets: its
        // secret-named variables are masked as named values.
        redactor = redactor.with_named(art::mounted_inventory_secrets(inventory));
    }
    let (status, rc, timeout, reason) = (end.status, end.rc, end.timeout, end.reason);
    let (attempt, limit) = (attempt.number, attempt.limit);
    let facts = RunFacts { ident: layout.ident.clone(), status, rc, timeout, reason, attempt, limit };
    let s = fold.finish(facts, &redactor);
    let written = publish(layout, &s);
    let _ = write_out(out, &describe(&s, &written));
    Ok(Ended::Play((rc & 0xff) as u8))
}

/// `--summarize-only`: what upstream's summary helper does, from existing artifacts, masking
/// what `run` masks: the secret-named extra vars, and the mounted inventory's secret-named
/// variables (the Secrets of edpm-agent's own inventory would need the cluster: `run` itself
/// masks those).
fn summarize_only<E: Failure>(
    opts: &Options,
    cmd: &RunnerCommand,
    job: &JobEnv,
    layout: &Layout,
    out: &mut dyn Write,
) -> Result<Ended, E> {
    if !layout.artifact_dir.is_dir() {
        let dir = layout.artifact_dir.display();
        let dir = edpm_core::excerpt::printable(&dir.to_string()).into_owned();
        write_out(out, &format!("edpm-agent: no artifacts in {dir}; nothing to summarize\n"))?;
        return Ok(Ended::Summarized);
    }
    let (rc, runner) = art::runner_result(&layout.artifact_dir);
    let status = runner.unwrap_or(if rc == Some(0) { RunStatus::Successful } else { RunStatus::Failed });
    // Without ansible-runner's rc file the run's return code is unknown: say so, never 0.
    let reason = rc.is_none().then(|| {
        let path = layout.artifact_dir.join("rc");
        let why = if path.exists() { "does not hold a return code" } else { "is missing" };
        format!("the run's return code is unknown: {} {why}", path.display())
    });
    let attempt = art::attempts_so_far(&layout.artifact_dir) + 1;
    let (ident, rc) = (layout.ident.clone(), rc.unwrap_or(RC_UNKNOWN));
    let facts = RunFacts { ident, status, rc, timeout: None, reason, attempt, limit: None };
    let fold = art::read_job_events(&layout.artifact_dir);
    let mut named = prepare::named_secrets(&layout.runner_dir, cmd, job);
    if fold.has_failures()
        && let policy::InventoryPlan::Mounted { path, .. } =
            policy::choose_inventory(opts.inventory_source, cmd, job.cmdline.as_deref(), &|_| false)
        && path.exists()
    {
        named.extend(art::mounted_inventory_secrets(&path));
    }
    let s = fold.finish(facts, &Redactor::default().with_named(named));
    let written = publish(layout, &s);
    write_out(out, &describe(&s, &written))?;
    Ok(Ended::Summarized)
}

/// Writes the summary and the termination message; a failure to write either is a warning
/// and does not change the run's result. Returns a note on where the summary went.
fn publish(layout: &Layout, s: &RunSummary) -> String {
    let (note, problems) = art::publish(layout, s);
    for p in problems {
        edpm_io::output::warn(&edpm_core::excerpt::printable(&p));
    }
    note
}
