//! `run`: the AnsibleEE job entrypoint, as a sequence of I/O around the runner's decisions
//! (`runner::policy`): prepare the runner directory as upstream's image entrypoint does
//! (`runner::job::prepare`), run the play with ansible-runner (else ansible-playbook and the
//! project's callback plugin) under `runner::shell::supervise`, fold the job events into
//! per-host results, and write the summary and the termination message.
//!
//! Order matters: the previous attempt is archived and the retry's hosts chosen first, then
//! every input is checked before anything is written, so bad input leaves the runner directory
//! as it was and still produces a summary (status `invalid`) that names the input.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{AppError, Context};
use crate::environment::Env;
use crate::redact::Redactor;
use crate::runner::fold::RunFacts;
use crate::runner::job::{self, JobEnv, RunnerCommand};
use crate::runner::policy::{self, Given, InventoryPlan, Options};
use crate::runner::retry::{RetryPlan, RetryScope, retry_plan};
use crate::runner::shell::artifacts::{self as art, Layout, RETRY_LIMIT_FILE, TERMINATION_LOG};
use crate::runner::shell::play::{Play, find_program, play};
use crate::runner::shell::supervise::{self, Limits};
use crate::runner::summary::{RunStatus, RunSummary, describe};
use crate::shell::cli::{RunArgs, SourceArgs};
use crate::shell::exit::{Exit, Status};

/// Which attempt this is, and the hosts a retry limits it to.
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
        .map_err(|e| AppError::failure(format!("cannot block signals for supervision: {e}")))?;
    let termination_log = env
        .get("EDPM_AEE_TERMINATION_LOG")
        .map(PathBuf::from)
        .or_else(|| Path::new(TERMINATION_LOG).exists().then(|| PathBuf::from(TERMINATION_LOG)));
    // Errors before the artifacts directory is known: only the termination log can say so.
    let early = |e: AppError| -> AppError {
        let partial = Layout {
            runner_dir: PathBuf::new(),
            ident: String::new(),
            artifact_dir: PathBuf::new(),
            termination_log: termination_log.clone(),
        };
        publish(&partial, &RunSummary::invalid("", e.code() as i32, e.message(), 1, None));
        e
    };
    let given = Given {
        runner_dir: args.runner_dir,
        inventory_source: args.inventory_source,
        retry_failed: args.retry_failed,
        executor: args.executor,
        init: args.init,
        grace_period: args.grace_period,
        summarize_only: args.summarize_only,
        command: args.command,
    };
    let opts = Options::resolve(given, env).map_err(|e| early(e.into()))?;
    let (mut cmd, layout) =
        art::command_and_layout(&opts, env, termination_log.clone()).map_err(|e| early(e.into()))?;
    if opts.summarize_only {
        return summarize_only(&layout, out);
    }

    // The previous attempt: archived, and read for --retry-failed.
    let previous = art::read_previous(&layout.artifact_dir);
    let archived = art::archive_previous(&layout.artifact_dir, previous.as_ref().map(|p| p.attempt));
    let plan = opts.retry_failed.then(|| retry_plan(previous.as_ref()));
    let limit = match &plan {
        Some(RetryPlan { scope: RetryScope::Hosts(h), .. }) => Some(h.clone()),
        _ => None,
    };
    let attempt = Attempt { number: archived.as_ref().ok().copied().flatten().map_or(1, |n| n + 1), limit };
    let fail = |e: AppError| -> AppError {
        let s = RunSummary::invalid(
            &layout.ident,
            e.code() as i32,
            e.message(),
            attempt.number,
            attempt.limit.clone(),
        );
        publish(&layout, &s);
        e
    };
    if let Err(e) = archived {
        let where_ = layout.artifact_dir.display();
        return Err(fail(AppError::failure(format!(
            "cannot move the previous attempt aside in {where_}: {e}"
        ))));
    }

    let prepared = prepare(&opts, source, env, &mut cmd, &layout, &attempt).map_err(fail)?;
    if let Some(sig) = supervise::pending_stop() {
        let reason =
            format!("{} received before the play started; nothing was run", policy::signal_name(sig));
        let (n, l) = (attempt.number, attempt.limit.clone());
        let s = RunSummary::not_run(&layout.ident, RunStatus::Canceled, 128 + sig, &reason, n, l);
        let written = publish(&layout, &s);
        super::output::write_out(out, &describe(&s, &written))?;
        return Ok(Status::Play((128 + sig) as u8));
    }
    let note = match &plan {
        Some(p) => p.note.clone(),
        None => format!("running {} (attempt {})", prepared.play.spec.argv.join(" "), attempt.number),
    };
    super::output::write_out(out, &format!("edpm-agent: {note}\n"))?;

    let sink = super::output::stdout_for_pump()
        .map_err(|e| AppError::failure(format!("cannot stream the play's output: {e}")))?;
    let outcome = supervise::supervise(&prepared.play.spec, &prepared.limits, sink, prepared.play.tee)
        .map_err(|e| fail(AppError::failure(e)))?;
    let runner_status = prepared.ansible_runner.then(|| art::runner_result(&layout.artifact_dir).1).flatten();
    let end = policy::ending(&outcome, runner_status, &prepared.limits);
    if !prepared.ansible_runner {
        // The files ansible-runner would have written, so both ways leave the same artifacts.
        let _ = art::write_file(&layout.artifact_dir.join("rc"), end.rc.to_string().as_bytes(), 0o600);
        let _ = art::write_file(&layout.artifact_dir.join("status"), end.status.as_str().as_bytes(), 0o600);
    }
    let fold = art::read_job_events(&layout.artifact_dir);
    let mut secrets = prepared.secrets;
    if fold.has_failures()
        && let Some(inventory) = &prepared.mounted_inventory
    {
        secrets.extend(art::mounted_inventory_secrets(inventory));
    }
    let (status, rc, timeout, reason) = (end.status, end.rc, end.timeout, end.reason);
    let (attempt, limit) = (attempt.number, attempt.limit);
    let facts = RunFacts { ident: layout.ident.clone(), status, rc, timeout, reason, attempt, limit };
    let s = fold.finish(facts, &Redactor::new(secrets));
    let written = publish(&layout, &s);
    let _ = super::output::write_out(out, &describe(&s, &written));
    Ok(Status::Play((rc & 0xff) as u8))
}

/// Everything the play needs, checked; the runner directory written.
struct Prepared {
    play: Play,
    limits: Limits,
    ansible_runner: bool,
    /// Secret values known to edpm-agent (its own inventory's Secrets, secret-named extra
    /// vars), for redaction.
    secrets: Vec<String>,
    /// The mounted inventory, read for secret-named variables if a host failed.
    mounted_inventory: Option<PathBuf>,
    /// Temporary files (inventory, callback plugin, role play) that must outlive the play.
    _scratch: tempfile::TempDir,
}

/// Checks every input, builds the inventory when edpm-agent provides it, and only then writes
/// the runner directory and the retry's limit.
fn prepare(
    opts: &Options,
    source: &SourceArgs,
    env: &Env,
    cmd: &mut RunnerCommand,
    layout: &Layout,
    attempt: &Attempt,
) -> Result<Prepared, AppError> {
    let lookup = |k: &str| env.string(k);
    let job = JobEnv::read(&lookup)?;
    let settings = art::read_optional(&layout.runner_dir.join("env/settings"))?;
    let files = job::prepare(cmd, &job, settings.as_deref(), &lookup)?;
    let written = |p: &Path| files.writes.iter().any(|w| w.path == p);
    policy::check_playbook(cmd, &|p| written(p) || p.is_file())?;
    let scratch = tempfile::Builder::new()
        .prefix("edpm-agent-run.")
        .tempdir()
        .map_err(|e| AppError::failure(format!("cannot create a temporary directory: {e}")))?;
    let mut secrets = files.secrets.clone();
    let (generated, mounted) =
        match policy::choose_inventory(opts.inventory_source, cmd, job.cmdline.as_deref(), &written) {
            InventoryPlan::Mounted { path, check } => {
                if check {
                    policy::check_inventory(&path, art::scan_inventory(&path))?;
                }
                (None, Some(path))
            }
            InventoryPlan::Build { kube_only } => {
                (Some(build_inventory(source, env, cmd, kube_only, scratch.path(), &mut secrets)?), None)
            }
        };
    let path_var = env.get("PATH").unwrap_or_default();
    let program = find_program(&cmd.program, path_var);
    let playbook_found = find_program("ansible-playbook", path_var).is_some();
    let ansible_runner = policy::choose_executor(opts.executor, cmd, program.as_deref(), playbook_found)?;

    // Every input checked: write the runner directory, then the retry's limit.
    for w in &files.writes {
        art::write_file(&w.path, w.contents.as_bytes(), w.mode)?;
    }
    art::create_dir(&layout.artifact_dir)?;
    if let Some(hosts) = &attempt.limit {
        let path = layout.artifact_dir.join(RETRY_LIMIT_FILE);
        art::write_file(&path, format!("{}\n", hosts.join("\n")).as_bytes(), 0o600)?;
        cmd.push_option("--limit", &format!("@{}", path.display()));
    }
    if let Some(p) = &generated {
        cmd.push_option("--inventory", &p.display().to_string());
    }
    let play =
        play(opts.init.as_deref(), env, cmd, layout, ansible_runner, generated.as_deref(), scratch.path())?;
    let limits = Limits { job: job.job_timeout, idle: job.idle_timeout, grace: opts.grace };
    Ok(Prepared { play, limits, ansible_runner, secrets, mounted_inventory: mounted, _scratch: scratch })
}

/// edpm-agent's own inventory, built now into `scratch` (mode 0600: it holds values from
/// Secrets), whose Secrets' values are added to `secrets`.
fn build_inventory(
    source: &SourceArgs,
    env: &Env,
    cmd: &RunnerCommand,
    kube_only: bool,
    scratch: &Path,
    secrets: &mut Vec<String>,
) -> Result<PathBuf, AppError> {
    let mut source = source.clone();
    if kube_only {
        source.sources = vec!["kube".into()];
    }
    let mut settings = super::resolve_settings(&source, env)?;
    let dir = Path::new(&cmd.private_data_dir);
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
    Ok(path)
}

/// `--summarize-only`: what upstream's summary helper does, from existing artifacts.
fn summarize_only(layout: &Layout, out: &mut dyn Write) -> Result<Status, AppError> {
    if !layout.artifact_dir.is_dir() {
        let dir = layout.artifact_dir.display();
        super::output::write_out(out, &format!("edpm-agent: no artifacts in {dir}; nothing to summarize\n"))?;
        return Ok(Exit::Success.into());
    }
    let (rc, runner) = art::runner_result(&layout.artifact_dir);
    let status = runner.unwrap_or(if rc == Some(0) { RunStatus::Successful } else { RunStatus::Failed });
    let attempt = art::attempts_so_far(&layout.artifact_dir) + 1;
    let (ident, rc) = (layout.ident.clone(), rc.unwrap_or(0));
    let facts = RunFacts { ident, status, rc, timeout: None, reason: None, attempt, limit: None };
    let s = art::read_job_events(&layout.artifact_dir).finish(facts, &Redactor::default());
    let written = publish(layout, &s);
    super::output::write_out(out, &describe(&s, &written))?;
    Ok(Exit::Success.into())
}

/// Writes the summary and the termination message; a failure to write either is a warning
/// and does not change the run's result. Returns a note on where the summary went.
fn publish(layout: &Layout, s: &RunSummary) -> String {
    let (note, problems) = art::publish(layout, s);
    for p in problems {
        super::output::warn(&p);
    }
    note
}
