//! The play's command line, environment and files: upstream's defaults, the container user's
//! HOME, the callback plugin (under ansible-runner it only notes play positions and fatal
//! failures; with ansible-playbook it writes the job events, and edpm-agent tees the output
//! to the artifacts' `stdout` as ansible-runner would), then the init in front.

use std::io::IsTerminal;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::artifacts::{Layout, NOTES_FILE, create_dir, read_optional, write_file};
use super::user;
use edpm_core::environment::Env;
use edpm_core::runner::ansible_playbook::{DirState, playbook_command};
use edpm_core::runner::argv::RunnerCommand;
use edpm_core::runner::entrypoint::DEFAULT_ENV;
use edpm_core::runner::policy::RunError;
use edpm_io::process::supervise::Spec;

/// The callback plugin that writes job_events when ansible-playbook runs the play.
const EVENTS_PLUGIN: &str = include_str!("../../../packaging/ansible/callback_plugins/edpm_agent_events.py");
const EVENTS_PLUGIN_NAME: &str = "edpm_agent_events";

/// The play to start: its spec, and the artifacts' `stdout` file when edpm-agent writes it
/// (ansible-playbook).
pub(crate) struct Play {
    pub spec: Spec,
    pub tee: Option<std::fs::File>,
}

/// Builds the play; `scratch` holds the plugin and a role's play, and must live as long as it.
#[allow(
    clippy::too_many_lines,
    reason = "builds one command from the Job's contract, option by option, in ansible-runner's order"
)]
pub(crate) fn play(
    init: Option<&str>,
    env: &Env,
    cmd: &RunnerCommand,
    layout: &Layout,
    ansible_runner: bool,
    inventory: Option<&Path>,
    scratch: &Path,
) -> Result<Play, RunError> {
    let lookup = |k: &str| env.string(k);
    let dir = &layout.runner_dir;
    let failure = |p: &Path, e: std::io::Error| RunError::Failure(format!("{}: {e}", p.display()));
    let mut vars: Vec<(String, String)> = DEFAULT_ENV
        .iter()
        .filter(|(k, _)| env.get(k).is_none())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.extend(user::user_environment(dir, &lookup));
    if env.get("PYTHONUNBUFFERED").is_none() {
        // ansible-runner writes some output without flushing; the job's log should not wait.
        vars.push(("PYTHONUNBUFFERED".into(), "1".into()));
    }
    let plugins = scratch.join("callback_plugins");
    write_file(&plugins.join(format!("{EVENTS_PLUGIN_NAME}.py")), EVENTS_PLUGIN.as_bytes(), 0o644)?;
    let join = |name: &str, add: &str, sep: &str| match env.get(name) {
        Some(v) => format!("{v}{sep}{add}"),
        None => add.to_string(),
    };
    vars.extend([
        (
            "ANSIBLE_CALLBACK_PLUGINS".into(),
            join("ANSIBLE_CALLBACK_PLUGINS", &plugins.display().to_string(), ":"),
        ),
        ("ANSIBLE_CALLBACKS_ENABLED".into(), join("ANSIBLE_CALLBACKS_ENABLED", EVENTS_PLUGIN_NAME, ",")),
        ("EDPM_AGENT_IDENT".into(), layout.ident.clone()),
    ]);
    // Ansible colours its output whenever it sees a terminal, and ansible-runner gives it
    // one (a pty): escape codes then fill the pod's log and the artifacts' stdout. Colour
    // only when this process writes to a terminal, unless the Job chose (ANSIBLE_NOCOLOR,
    // ANSIBLE_FORCE_COLOR, NO_COLOR).
    let chosen = ["ANSIBLE_NOCOLOR", "ANSIBLE_FORCE_COLOR", "NO_COLOR"].iter().any(|v| env.get(v).is_some());
    if !chosen && !std::io::stdout().is_terminal() {
        vars.push(("ANSIBLE_NOCOLOR".into(), "1".into()));
    }
    // EDPM's groups are NodeSet and Role names (`edpm-compute`), which Ansible calls invalid
    // (a `-`) and uses as they are, as upstream's inventories do: no warning on every run,
    // unless the Job chose (ANSIBLE_TRANSFORM_INVALID_GROUP_CHARS).
    if env.get("ANSIBLE_TRANSFORM_INVALID_GROUP_CHARS").is_none() {
        vars.push(("ANSIBLE_TRANSFORM_INVALID_GROUP_CHARS".into(), "ignore".into()));
    }
    let (mut argv, cwd, tee) = if ansible_runner {
        // Absolute: ansible-runner runs ansible-playbook in the project directory, where a
        // relative --runner-dir would point elsewhere.
        let notes = std::path::absolute(layout.artifact_dir.join(NOTES_FILE))
            .map_err(|e| failure(&layout.artifact_dir, e))?;
        vars.push(("EDPM_AGENT_NOTES_FILE".into(), notes.display().to_string()));
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
        let p = playbook_command(cmd, &state, inventory, &layout.artifact_dir, &role_play)?;
        if let Some(text) = &p.role_play {
            write_file(&role_play, text.as_bytes(), 0o644)?;
        }
        let events = layout.artifact_dir.join("job_events");
        create_dir(&events)?;
        vars.extend(p.env);
        let events = std::path::absolute(&events).map_err(|e| failure(&events, e))?;
        vars.push(("EDPM_AGENT_EVENTS_DIR".into(), events.display().to_string()));
        if env.get("ANSIBLE_HOST_KEY_CHECKING").is_none() {
            vars.push(("ANSIBLE_HOST_KEY_CHECKING".into(), "False".into()));
        }
        // A log that grows as the play runs, not a file replaced: opened once, truncated.
        let stdout = layout.artifact_dir.join("stdout");
        let tee = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&stdout)
            .map_err(|e| RunError::Failure(format!("cannot write {}: {e}", stdout.display())))?;
        (p.argv, p.cwd, Some(tee))
    };
    if let Some(init) = init {
        argv.splice(0..0, [init.to_string(), "--".into()]);
    }
    Ok(Play { spec: Spec { argv, cwd, env: vars }, tee })
}

/// Where `program` is: a path as given, else the first executable of that name on `PATH`.
pub(crate) fn find_program(program: &str, path_var: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return executable(Path::new(program)).then(|| program.into());
    }
    std::env::split_paths(path_var).map(|d| d.join(program)).find(|p| executable(p))
}
