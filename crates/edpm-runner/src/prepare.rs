//! Preparing the run: every input checked before anything is written, then the runner
//! directory, the retry's limit and the play.

use std::path::{Path, PathBuf};

use super::artifacts::{Layout, RETRY_LIMIT_FILE, create_dir, read_optional, scan_inventory, write_file};
use super::play::{Play, find_program, play};
use edpm_core::environment::Env;
use edpm_core::runner::argv::RunnerCommand;
use edpm_core::runner::entrypoint;
use edpm_core::runner::env::JobEnv;
use edpm_core::runner::extra_vars::extra_var_secrets;
use edpm_core::runner::job::JobError;
use edpm_core::runner::policy::{self, InventoryPlan, Options, RunError};
use edpm_io::process::supervise::Limits;

/// Everything the play needs, checked; the runner directory written.
pub(crate) struct Prepared {
    pub play: Play,
    pub limits: Limits,
    pub ansible_runner: bool,
    /// The values of the Secrets edpm-agent's own inventory read, for redaction.
    pub secrets: Vec<String>,
    /// The values of secret-named extra vars (`RUNNER_EXTRA_VARS`, `env/extravars`, the
    /// command line's `-e`), masked at any length (`Redactor::with_named`).
    pub named: Vec<String>,
    /// The mounted inventory, read for secret-named variables if a host failed.
    pub mounted_inventory: Option<PathBuf>,
    /// Temporary files (inventory, callback plugin, role play) that must outlive the play.
    pub _scratch: tempfile::TempDir,
}

/// Checks every input (the Job's environment `job`, read once by the caller, first), builds the inventory when edpm-agent provides it (`build(kube_only,
/// scratch, secrets)`, the command's, which adds the values of the Secrets it read), and only
/// then writes the runner directory and the retry's `limit`. Generic over the command's error,
/// so the inventory's own errors keep their exit codes.
pub(crate) fn prepare<E: From<RunError> + From<JobError>>(
    opts: &Options,
    env: &Env,
    job: &JobEnv,
    cmd: &mut RunnerCommand,
    layout: &Layout,
    limit: Option<&[String]>,
    build: impl FnOnce(bool, &Path, &mut Vec<String>) -> Result<PathBuf, E>,
) -> Result<Prepared, E> {
    let limits = job.limits(opts.grace)?;
    // `env/settings` may name any variable: it is expanded from the whole environment.
    let lookup = |k: &str| env.string(k);
    let settings = read_optional(&layout.runner_dir.join("env/settings"))?;
    let files = entrypoint::prepare(cmd, job, settings.as_deref(), &lookup)?;
    let written = |p: &Path| files.writes.iter().any(|w| w.path == p);
    policy::check_playbook(cmd, &|p| written(p) || p.is_file())?;
    let scratch = tempfile::Builder::new()
        .prefix("edpm-agent-run.")
        .tempdir()
        .map_err(|e| RunError::Failure(format!("cannot create a temporary directory: {e}")))?;
    let mut named = files.secrets.clone();
    named.extend(named_secrets(&layout.runner_dir, cmd, job));
    let mut secrets = Vec::new();
    let (generated, mounted) =
        match policy::choose_inventory(opts.inventory_source, cmd, job.cmdline.as_deref(), &written) {
            InventoryPlan::Mounted { path, check } => {
                if check {
                    policy::check_inventory(&path, scan_inventory(&path))?;
                }
                (None, Some(path))
            }
            InventoryPlan::Build { kube_only } => {
                (Some(build(kube_only, scratch.path(), &mut secrets)?), None)
            }
        };
    let path_var = env.get("PATH").unwrap_or_default();
    let program = find_program(&cmd.program, path_var);
    let playbook_found = find_program("ansible-playbook", path_var).is_some();
    let ansible_runner = policy::choose_executor(opts.executor, cmd, program.as_deref(), playbook_found)?;

    // Every input checked: write the runner directory, then the retry's limit.
    for w in &files.writes {
        write_file(&w.path, w.contents.as_bytes(), w.mode)?;
    }
    create_dir(&layout.artifact_dir)?;
    if let Some(hosts) = limit {
        let path = layout.artifact_dir.join(RETRY_LIMIT_FILE);
        write_file(&path, format!("{}\n", hosts.join("\n")).as_bytes(), 0o600)?;
        cmd.push_option("--limit", &format!("@{}", path.display()));
    }
    if let Some(p) = &generated {
        cmd.push_option("--inventory", &p.display().to_string());
    }
    let play =
        play(opts.init.as_deref(), env, cmd, layout, ansible_runner, generated.as_deref(), scratch.path())?;
    Ok(Prepared {
        play,
        limits,
        ansible_runner,
        secrets,
        named,
        mounted_inventory: mounted,
        _scratch: scratch,
    })
}

/// The values of secret-named extra vars the play gets: `RUNNER_EXTRA_VARS`, else the runner
/// directory's `env/extravars`, and the command line's `-e` (the command's `--cmdline`, else
/// `RUNNER_CMDLINE`, else `env/cmdline`), with the files `-e @FILE` names (relative to the
/// project directory, where ansible-runner runs ansible-playbook). Files that cannot be read
/// give nothing here (the run names them where it reads them for the play; ansible-playbook
/// names an `@FILE` it cannot read).
pub(crate) fn named_secrets(dir: &Path, cmd: &RunnerCommand, job: &JobEnv) -> Vec<String> {
    let read = |rel: &str| read_optional(&dir.join(rel)).ok().flatten();
    let extravars = match &job.extra_vars {
        // As the entrypoint writes it (entrypoint::prepare).
        Some(text) => Some(format!("---\n{text}\n")),
        None => read("env/extravars"),
    };
    let cmdline = match cmd.get("--cmdline") {
        Some(c) => Some(c.to_string()),
        None => job.cmdline.clone().or_else(|| read("env/cmdline")),
    };
    // Where ansible-playbook runs: the project directory, else the runner directory (as
    // ansible-runner and `ansible_playbook::command` choose it).
    let project = cmd.project_dir();
    let base = if project.is_dir() { project } else { dir.to_path_buf() };
    let read_file = |p: &str| read_optional(&base.join(p)).ok().flatten();
    extra_var_secrets(extravars.as_deref(), cmdline.as_deref(), &read_file)
}
