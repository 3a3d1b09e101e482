//! The job's files: the runner directory's inputs, the artifacts directory (the previous
//! attempt archived and read back, job events, the summary) and the termination log.
//!
//! Every input is read regular-only and bounded (`edpm_io::files`), so a FIFO or a device
//! mounted where a file is expected is named, never waited on. Files are replaced with
//! `write_atomic`, but for the termination log (see [`publish`]).

use std::path::{Path, PathBuf};

use edpm_core::environment::Env;
use edpm_core::redact::{Redactor, secret_values};
use edpm_core::runner::argv::{self, DEFAULT_RUNNER_DIR, RunnerCommand};
use edpm_core::runner::env::JobEnv;
use edpm_core::runner::events::{event_file_counter, parse_event, parse_notes};
use edpm_core::runner::fold::{Fold, RunFacts};
use edpm_core::runner::job::JobError;
use edpm_core::runner::policy::{InventoryScan, Options, RC_STOPPED, RunError};
use edpm_core::runner::summary::{RunStatus, RunSummary, SUMMARY_FILE};
use edpm_io::files::{self, MAX_FILE_BYTES, ReadError};

/// Kubernetes' termination message file (the Job's `terminationMessagePath`).
pub(crate) const TERMINATION_LOG: &str = "/dev/termination-log";
/// The retry's host list, one per line, passed as `--limit @FILE`.
pub(crate) const RETRY_LIMIT_FILE: &str = "edpm-retry-limit";
/// Under ansible-runner, the callback plugin's notes: each play's place in the playbook, and
/// which failures could stop the play.
pub(crate) const NOTES_FILE: &str = "edpm-notes.jsonl";
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

/// Where this run reads and writes.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub runner_dir: PathBuf,
    pub ident: String,
    pub artifact_dir: PathBuf,
    pub termination_log: Option<PathBuf>,
}

/// The Job's command (or the default one, from the Job's environment `job`), its runner
/// directory, artifacts directory and ident. `termination_log`: where the termination message
/// goes when Kubernetes gave none.
pub(crate) fn command_and_layout(
    opts: &Options,
    env: &Env,
    job: &JobEnv,
    termination_log: Option<PathBuf>,
) -> Result<(RunnerCommand, Layout), RunError> {
    // Resolved once, absolutely, as ansible-runner resolves them: every path derived from
    // them (the retry's limit file, the notes file) is then the same for every process.
    let cwd = std::env::current_dir()
        .map_err(|e| RunError::Failure(format!("cannot read the working directory: {e}")))?;
    let given_dir = opts.runner_dir.as_ref().map(|d| argv::absolute(&cwd, &d.display().to_string()));
    let mut cmd = if opts.command.is_empty() {
        RunnerCommand::default_for(given_dir.as_deref().unwrap_or(DEFAULT_RUNNER_DIR), job)
    } else {
        RunnerCommand::parse(&opts.command)?
    };
    cmd.resolve_paths(&cwd);
    if let Some(d) = &given_dir {
        if cmd.private_data_dir == DEFAULT_RUNNER_DIR || cmd.private_data_dir == *d {
            cmd.set_private_data_dir(d);
        } else {
            return Err(
                JobError::DirMismatch { given: d.clone(), command: cmd.private_data_dir.clone() }.into()
            );
        }
    }
    // Against the runner directory settled just above.
    cmd.resolve_inventory(&cwd, &|p| p.is_file() || p.is_dir());
    // Where ansible-runner writes its artifacts is where the summary is read: the command's
    // --artifact-dir, else EDPM_AEE_ARTIFACTS_ROOT (passed on so ansible-runner writes there).
    if cmd.get("--artifact-dir").is_none()
        && let Some(root) = env.get("EDPM_AEE_ARTIFACTS_ROOT")
    {
        cmd.push_option("--artifact-dir", &argv::absolute(&cwd, root));
    }
    let root = cmd.artifact_root();
    let ident = match cmd.ident() {
        Some(i) => i.to_string(),
        None if opts.summarize_only => newest_dir(&root).unwrap_or_default(),
        None => {
            // ansible-runner would pick a random ident; name it, so the artifacts can be found.
            let secs =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let ident = format!("edpm-agent-{secs}-{}", std::process::id());
            cmd.push_option("--ident", &ident);
            ident
        }
    };
    if ident.is_empty() || ident.contains('/') || ident == "." || ident == ".." {
        return Err(RunError::Usage(format!("ident {ident:?} cannot name an artifacts directory")));
    }
    let artifact_dir = root.join(&ident);
    let termination_log = termination_log.or_else(|| Some(artifact_dir.join("termination-log")));
    let runner_dir = PathBuf::from(&cmd.private_data_dir);
    Ok((cmd, Layout { runner_dir, ident, artifact_dir, termination_log }))
}

/// A file of the runner directory that may be absent (`env/settings`, `env/cmdline`,
/// `env/envvars`): regular and bounded, or an error naming it.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, RunError> {
    match files::read_bounded(path, MAX_FILE_BYTES, false) {
        Ok(s) => Ok(Some(s)),
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RunError::Unreadable(format!("{}: {e}", path.display()))),
    }
}

/// A small file ansible-runner leaves in the artifacts (`rc`, `status`), if readable.
fn read_small(path: &Path) -> Option<String> {
    files::read_bounded(path, 4096, false).ok()
}

pub(crate) fn create_dir(path: &Path) -> Result<(), RunError> {
    fs_err::create_dir_all(path)
        .map_err(|e| RunError::Failure(format!("cannot create {}: {e}", path.display())))
}

/// Replaces `path` (creating its directory) atomically.
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), RunError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir(parent)?;
    }
    files::write_atomic(path, bytes, mode)
        .map_err(|e| RunError::Failure(format!("cannot write {}: {e}; nothing was run", path.display())))
}

/// The newest run directory under `root`, as upstream's summary helper picks it.
pub(crate) fn newest_dir(root: &Path) -> Option<String> {
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

/// Walks a mounted inventory (a file, or a directory whose dot-names Ansible skips and
/// Kubernetes keeps its mount bookkeeping in): how many files, each regular and readable.
pub(crate) fn scan_inventory(path: &Path) -> InventoryScan {
    let fail = |p: &Path, e: &dyn std::fmt::Display| (p.to_path_buf(), e.to_string());
    let meta = std::fs::metadata(path).map_err(|e| fail(path, &e))?;
    if !meta.is_dir() {
        return files::check_regular_readable(path).map(|()| 1).map_err(|e| fail(path, &e));
    }
    let mut stack = vec![path.to_path_buf()];
    let mut count = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| fail(&d, &e))? {
            let entry = entry.map_err(|e| fail(&d, &e))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let p = entry.path();
            if std::fs::metadata(&p).map_err(|e| fail(&p, &e))?.is_dir() {
                stack.push(p);
            } else {
                files::check_regular_readable(&p).map_err(|e| fail(&p, &e))?;
                count += 1;
            }
        }
    }
    Ok(count)
}

/// Values of secret-named variables in a mounted inventory (`*password*`, `*secret*`, ...),
/// for redaction: the operator's inventory Secret does not say which values came from Secrets.
/// Files that are not regular, too large or not YAML are passed over.
pub(crate) fn mounted_inventory_secrets(path: &Path) -> Vec<String> {
    let mut found = Vec::new();
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
            found.push(p);
        }
    }
    let mut out = Vec::new();
    for f in found {
        let Ok(text) = files::read_bounded(&f, MAX_FILE_BYTES, false) else { continue };
        if let Ok(v) = edpm_core::yaml::ansible::<serde_json::Value>(&text) {
            secret_values(&v, &mut out);
        }
    }
    out
}

/// The previous attempt's summary: its `edpm-summary.json`, else its events folded now (a
/// pod killed before it could write one).
pub(crate) fn read_previous(artifact_dir: &Path) -> Option<RunSummary> {
    if let Ok(text) = files::read_bounded(&artifact_dir.join(SUMMARY_FILE), MAX_FILE_BYTES, false)
        && let Ok(s) = serde_json::from_str::<RunSummary>(&text)
    {
        return Some(s);
    }
    if !artifact_dir.join("job_events").is_dir() {
        return None;
    }
    let (rc, status) = runner_result(artifact_dir);
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

/// ansible-runner's `rc` and `status` files, where it left them.
pub(crate) fn runner_result(artifact_dir: &Path) -> (Option<i32>, Option<RunStatus>) {
    let rc = read_small(&artifact_dir.join("rc")).and_then(|s| s.trim().parse().ok());
    let status = read_small(&artifact_dir.join("status")).and_then(|s| RunStatus::from_runner(&s));
    (rc, status)
}

/// The highest attempt number archived under `attempts/`.
pub(crate) fn attempts_so_far(artifact_dir: &Path) -> u32 {
    std::fs::read_dir(artifact_dir.join("attempts"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).max().unwrap_or(0))
        .unwrap_or(0)
}

/// Moves the previous run's files to `attempts/<n>/`; returns `n`, or `None` when there was
/// no previous run.
#[allow(clippy::disallowed_methods, reason = "moves files into a new directory; nothing is replaced")]
pub(crate) fn archive_previous(
    artifact_dir: &Path,
    previous_attempt: Option<u32>,
) -> std::io::Result<Option<u32>> {
    let present: Vec<&str> =
        RUN_FILES.iter().copied().filter(|f| artifact_dir.join(f).symlink_metadata().is_ok()).collect();
    if present.is_empty() {
        return Ok(None);
    }
    let archived = attempts_so_far(artifact_dir);
    let n = previous_attempt.filter(|p| *p > archived).unwrap_or(archived + 1);
    let to = artifact_dir.join("attempts").join(n.to_string());
    fs_err::create_dir_all(&to)?;
    for f in present {
        std::fs::rename(artifact_dir.join(f), to.join(f))?;
    }
    Ok(Some(n))
}

/// Folds the event files of `<artifact_dir>/job_events` in counter order, reading and parsing
/// them on every core, with the callback plugin's notes on failures.
pub(crate) fn read_job_events(artifact_dir: &Path) -> Fold {
    let mut fold = Fold::new();
    if let Ok(text) = files::read_bounded(&artifact_dir.join(NOTES_FILE), MAX_FILE_BYTES, false) {
        fold.set_notes(parse_notes(&text));
    }
    let dir = artifact_dir.join("job_events");
    let (Ok(entries), Ok(dir_files)) = (std::fs::read_dir(&dir), files::DirFiles::open(&dir, MAX_FILE_BYTES))
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
    edpm_io::parallel::for_each_ordered(
        &names,
        2048,
        |chunk| {
            let mut buf = Vec::new();
            chunk
                .iter()
                .map(|(_, name)| {
                    let quick = dir_files.read(name, &mut buf, false).ok().and_then(|b| parse_event(b).ok());
                    // A short read that was not the end of the file: read it whole.
                    quick.or_else(|| {
                        dir_files.read(name, &mut buf, true).ok().and_then(|b| parse_event(b).ok())
                    })
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

/// Writes the full summary and the termination message. A failure to write either is
/// reported (returned as problems) and does not change the run's result. Returns a note on
/// where the summary went, and the problems.
pub(crate) fn publish(layout: &Layout, s: &RunSummary) -> (String, Vec<String>) {
    let mut problems = Vec::new();
    let mut note = String::new();
    if !layout.ident.is_empty() {
        let path = layout.artifact_dir.join(SUMMARY_FILE);
        let text = serde_json::to_string_pretty(s).unwrap_or_default() + "\n";
        match fs_err::create_dir_all(&layout.artifact_dir)
            .and_then(|()| files::write_atomic(&path, text.as_bytes(), 0o644))
        {
            Ok(()) => note = format!("; summary in {}", path.display()),
            Err(e) => problems.push(format!("cannot write {}: {e}", path.display())),
        }
    }
    if let Some(path) = &layout.termination_log
        && let Err(e) = write_termination_log(path, &s.termination_message.to_json())
    {
        problems.push(format!("cannot write the termination message to {}: {e}", path.display()));
    }
    (note, problems)
}

/// The one file written in place: Kubernetes bind-mounts the termination log, so it cannot be
/// replaced by a rename. One write of at most 4 KiB.
#[allow(clippy::disallowed_methods, reason = "the termination log is bind-mounted: written in place")]
fn write_termination_log(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(p) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs_err::create_dir_all(p)?;
    }
    std::fs::write(path, text.as_bytes())
}
