//! The `ansible-playbook` command ansible-runner would run, for images without
//! ansible-runner: ansible-runner 2.4's `generate_ansible_command` and `prepare_env`, from the
//! Job's command and what the runner directory holds.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::argv::{Playbook, RunnerCommand};
use super::job::JobError;
use super::shlex::shlex_split;

/// What `playbook_command` needs to know about the runner directory.
#[derive(Debug, Clone, Default)]
pub struct DirState {
    pub project_exists: bool,
    /// `env/cmdline` text.
    pub cmdline: Option<String>,
    pub extravars_exists: bool,
    /// `env/ssh_key` is a file (ansible-runner loads it into ssh-agent).
    pub ssh_key_file: bool,
    /// `env/envvars`, a YAML mapping.
    pub envvars: Option<String>,
    /// `env/settings` (expanded), a YAML mapping.
    pub settings: Option<String>,
}

/// An `ansible-playbook` run equivalent to the ansible-runner one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaybookCommand {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Variables to set, on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// For `-r ROLE`: the play to write to `role_playbook_path` (ansible-runner generates the
    /// same one).
    pub role_play: Option<String>,
}

/// The `ansible-playbook` command ansible-runner would build (ansible-runner 2.4's
/// `generate_ansible_command` and `prepare_env`): env/cmdline, inventory, limit, extra vars,
/// verbosity, forks, then the playbook; env/envvars, retry files off, host key checking off
/// unless set, the jsonfile fact cache in the artifacts directory. `inventory` overrides the
pub fn playbook_command(
    cmd: &RunnerCommand,
    state: &DirState,
    inventory: Option<&Path>,
    artifact_dir: &Path,
    role_playbook_path: &Path,
) -> Result<PlaybookCommand, JobError> {
    if let Some(option) = cmd.unsupported.first() {
        return Err(JobError::NoFallback {
            option: (*option).into(),
            message: "install ansible-runner, or run the play without this option".into(),
        });
    }
    let dir = Path::new(&cmd.private_data_dir);
    let mut argv = vec!["ansible-playbook".to_string()];
    argv.extend(options(cmd, state, inventory)?);
    let mut env = environment(state, artifact_dir)?;
    let mut role_play = None;
    match (cmd.get("--playbook"), cmd.get("--role")) {
        (Some(p), _) => argv.push(match cmd.playbook() {
            Some(Playbook::File(path)) if Path::new(p).is_relative() => {
                // ansible-playbook runs in the project directory, as under ansible-runner.
                if state.project_exists { p.to_string() } else { path.display().to_string() }
            }
            _ => p.to_string(),
        }),
        (None, Some(role)) => {
            role_play = Some(play_for_role(cmd, role));
            let roles = cmd.get("--roles-path").map_or_else(|| dir.join("roles"), |p| dir.join(p));
            env.push(("ANSIBLE_ROLES_PATH".into(), roles.display().to_string()));
            argv.push(role_playbook_path.display().to_string());
        }
        (None, None) => return Err(JobError::NoPlaybook),
    }
    let cwd = if state.project_exists { cmd.project_dir() } else { dir.to_path_buf() };
    Ok(PlaybookCommand { argv, cwd, env, role_play })
}

/// ansible-playbook's options, before the playbook: env/cmdline (the command's `--cmdline`
/// instead, when given), inventory, limit, extra vars, verbosity, forks, the private key.
fn options(cmd: &RunnerCommand, state: &DirState, inventory: Option<&Path>) -> Result<Vec<String>, JobError> {
    let dir = Path::new(&cmd.private_data_dir);
    let mut argv = Vec::new();
    let cmdline = cmd.get("--cmdline").map(str::to_string).or_else(|| state.cmdline.clone());
    if let Some(text) = cmdline {
        argv.extend(
            shlex_split(&text).map_err(|message| JobError::Malformed { input: "cmdline".into(), message })?,
        );
    }
    let inventory = match (inventory, cmd.get("--inventory")) {
        (Some(p), _) => Some(p.to_path_buf()),
        (None, Some(p)) => Some(dir.join(p)),
        (None, None) => Some(dir.join("inventory")),
    };
    if let Some(p) = inventory {
        argv.extend(["-i".to_string(), p.display().to_string()]);
    }
    if let Some(l) = cmd.get("--limit") {
        argv.extend(["--limit".to_string(), l.to_string()]);
    }
    if state.extravars_exists {
        argv.extend(["-e".to_string(), format!("@{}", dir.join("env/extravars").display())]);
    }
    if cmd.verbosity > 0 {
        argv.push(format!("-{}", "v".repeat(cmd.verbosity.min(5) as usize)));
    }
    if let Some(f) = cmd.get("--forks") {
        argv.extend(["--forks".to_string(), f.to_string()]);
    }
    if state.ssh_key_file {
        argv.extend(["--private-key".to_string(), dir.join("env/ssh_key").display().to_string()]);
    }
    Ok(argv)
}

/// The variables ansible-runner sets for the play: env/envvars, retry files off, and the
/// jsonfile fact cache (unless env/settings picks another) in the artifacts directory.
fn environment(state: &DirState, artifact_dir: &Path) -> Result<Vec<(String, String)>, JobError> {
    let mut env: Vec<(String, String)> = Vec::new();
    if let Some(text) = &state.envvars {
        let vars = crate::yaml::ansible::<Value>(text)
            .map_err(|message| JobError::Malformed { input: "env/envvars".into(), message })?;
        if let serde_json::Value::Object(m) = vars {
            for (k, v) in m {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                env.push((k, v));
            }
        }
    }
    env.push(("ANSIBLE_RETRY_FILES_ENABLED".into(), "False".into()));
    let settings = match &state.settings {
        Some(text) => crate::yaml::ansible::<Value>(text)
            .map_err(|message| JobError::Malformed { input: "env/settings".into(), message })?,
        None => serde_json::Value::Null,
    };
    let setting = |k: &str| settings.get(k).and_then(|v| v.as_str().map(str::to_string));
    if setting("fact_cache_type").as_deref().unwrap_or("jsonfile") == "jsonfile" {
        env.push(("ANSIBLE_CACHE_PLUGIN".into(), "jsonfile".into()));
        let cache = setting("fact_cache").unwrap_or_else(|| "fact_cache".into());
        env.push(("ANSIBLE_CACHE_PLUGIN_CONNECTION".into(), artifact_dir.join(cache).display().to_string()));
    }
    Ok(env)
}

/// The play ansible-runner generates for `-r ROLE` (`--role-vars`, `--hosts`,
/// `--role-skip-facts`), as JSON.
fn play_for_role(cmd: &RunnerCommand, role: &str) -> String {
    let mut r = serde_json::Map::new();
    r.insert("name".into(), role.into());
    if let Some(vars) = cmd.get("--role-vars") {
        r.insert("vars".into(), role_vars(vars).into());
    }
    let play = serde_json::json!([{
        "hosts": cmd.get("--hosts").unwrap_or("all"),
        "gather_facts": cmd.get("--role-skip-facts").is_none(),
        "roles": [r],
    }]);
    play.to_string()
}

/// `--role-vars 'a=1 b=x'` as ansible-runner reads it: Python literals where they parse
/// (numbers, booleans, quoted strings), strings otherwise.
fn role_vars(text: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    for item in text.split_whitespace() {
        let Some((k, v)) = item.split_once('=') else { continue };
        let value = if let Ok(i) = v.parse::<i64>() {
            i.into()
        } else if let Ok(f) = v.parse::<f64>() {
            f.into()
        } else if v == "True" || v == "False" {
            (v == "True").into()
        } else if v.len() >= 2
            && (v.starts_with('\'') && v.ends_with('\'') || v.starts_with('"') && v.ends_with('"'))
        {
            v[1..v.len() - 1].into()
        } else {
            v.into()
        };
        m.insert(k.to_string(), value);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::argv;

    #[test]
    #[allow(clippy::too_many_lines, reason = "a table of cases")]
    fn the_ansible_playbook_command_matches_ansible_runner() {
        let cmd = RunnerCommand::parse(&argv(
            "ansible-runner run /runner -p site.yml -i j --forks 7 -vv --limit x",
        ))
        .unwrap();
        let state = DirState {
            project_exists: true,
            cmdline: Some("\n--tags 'a b'\n".into()),
            extravars_exists: true,
            ssh_key_file: true,
            envvars: Some("FOO: bar\nN: 3\n".into()),
            settings: Some("fact_cache: fc\n".into()),
        };
        let p = playbook_command(
            &cmd,
            &state,
            None,
            Path::new("/runner/artifacts/j"),
            Path::new("/tmp/role.json"),
        )
        .unwrap();
        let want = [
            "ansible-playbook",
            "--tags",
            "a b",
            "-i",
            "/runner/inventory",
            "--limit",
            "x",
            "-e",
            "@/runner/env/extravars",
            "-vv",
            "--forks",
            "7",
            "--private-key",
            "/runner/env/ssh_key",
            "site.yml",
        ];
        assert_eq!(p.argv, want);
        assert_eq!(p.cwd, PathBuf::from("/runner/project"));
        assert!(p.env.contains(&("FOO".into(), "bar".into())) && p.env.contains(&("N".into(), "3".into())));
        assert!(p.env.contains(&("ANSIBLE_CACHE_PLUGIN_CONNECTION".into(), "/runner/artifacts/j/fc".into())));

        let role = RunnerCommand::parse(&argv(
            "ansible-runner run /runner -r myrole --role-vars a=1 --role-skip-facts -i j",
        ))
        .unwrap();
        let p = playbook_command(
            &role,
            &DirState::default(),
            Some(Path::new("/tmp/inv.json")),
            Path::new("/a"),
            Path::new("/tmp/role.json"),
        )
        .unwrap();
        assert_eq!(p.argv, argv("ansible-playbook -i /tmp/inv.json /tmp/role.json"));
        assert_eq!(
            p.role_play.as_deref(),
            Some(r#"[{"gather_facts":false,"hosts":"all","roles":[{"name":"myrole","vars":{"a":1}}]}]"#)
        );
        assert!(p.env.contains(&("ANSIBLE_ROLES_PATH".into(), "/runner/roles".into())));
        assert_eq!(p.cwd, PathBuf::from("/runner"));

        let module = RunnerCommand::parse(&argv("ansible-runner run /runner -m ping --hosts all")).unwrap();
        let e = playbook_command(&module, &DirState::default(), None, Path::new("/a"), Path::new("/r"))
            .unwrap_err();
        assert!(e.to_string().contains("--module cannot be run without ansible-runner"), "{e}");
    }
}
