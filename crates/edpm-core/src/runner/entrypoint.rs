//! What edpm-ansible's image entrypoint (`edpm_entrypoint.sh`) does before it runs
//! ansible-runner: write the Job's environment into the runner directory (the inline playbook,
//! `env/cmdline`, `env/extravars`, the inventory) and expand `env/settings` with its defaults
//! exported. Every input is checked first, so that bad input stops the run before anything is
//! written; the files are returned, the shell writes them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::argv::RunnerCommand;
use super::env::JobEnv;
use super::envsubst::envsubst;
use super::job::JobError;
use super::shlex::shlex_split;

/// Upstream entrypoint defaults (edpm_entrypoint.sh), exported to the play's environment.
pub const DEFAULT_ENV: &[(&str, &str)] = &[
    ("RUNNER_IDLE_TIMEOUT", "600"),
    ("RUNNER_JOB_TIMEOUT", "3600"),
    ("RUNNER_PEXPECT_TIMEOUT", "10"),
    ("RUNNER_PEXPECT_USE_POLL", "True"),
    ("RUNNER_SUPPRESS_OUTPUT_FILE", "False"),
    ("RUNNER_SUPPRESS_ANSIBLE_OUTPUT", "False"),
    ("RUNNER_FACT_CACHE", "fact_cache"),
    ("RUNNER_FACT_CACHE_TYPE", "jsonfile"),
];

/// A file to write into the runner directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    pub path: PathBuf,
    pub contents: String,
    pub mode: u32,
}

/// What the entrypoint writes, and the secret values it learned on the way (secret-named
/// extra vars), for redaction.
#[derive(Debug, Default)]
pub struct JobFiles {
    pub writes: Vec<FileWrite>,
    pub secrets: Vec<String>,
}

/// What upstream's entrypoint writes, from the Job's environment, checked first so that bad
/// input stops the run before anything is written:
/// - `project/playbook.yaml` from `RUNNER_PLAYBOOK` when the command runs `-p playbook.yaml`
///   (upstream also writes a playbook's *name* there when the command runs it by name);
/// - `env/cmdline` from `RUNNER_CMDLINE` (upstream appends; written whole here, so that a
///   runner directory can be used again);
/// - `env/extravars` from `RUNNER_EXTRA_VARS`, which must be a YAML mapping;
/// - `inventory/inventory.yaml` from `RUNNER_INVENTORY`;
/// - `env/settings` with `$VAR`/`${VAR}` expanded (`settings` is its current text), as
///   `envsubst` does with the entrypoint's defaults exported.
pub fn prepare(
    cmd: &RunnerCommand,
    env: &JobEnv,
    settings: Option<&str>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<JobFiles, JobError> {
    let dir = Path::new(&cmd.private_data_dir);
    let mut writes = Vec::new();
    let mut secrets = Vec::new();
    if let Some(text) = &env.playbook
        && cmd.get("--playbook") == Some("playbook.yaml")
    {
        let (contents, _) = upstream_file(
            "RUNNER_PLAYBOOK",
            text,
            Some(("an inline playbook must be a YAML list of plays", Value::is_array)),
        )?;
        writes.push(FileWrite { path: cmd.project_dir().join("playbook.yaml"), contents, mode: 0o644 });
    }
    if let Some(text) = &env.cmdline {
        shlex_split(text)
            .map_err(|message| JobError::Malformed { input: "RUNNER_CMDLINE".into(), message })?;
        writes.push(FileWrite { path: dir.join("env/cmdline"), contents: format!("{text}\n"), mode: 0o644 });
    }
    if let Some(text) = &env.extra_vars {
        let want = (
            "extra vars must be a YAML mapping of variable names to values",
            Value::is_object as fn(&Value) -> bool,
        );
        // One reading for the check and for redaction, with Ansible's rule for a repeated key
        // (the last wins): what passes the check is exactly what is searched for secrets.
        let (contents, value) = upstream_file("RUNNER_EXTRA_VARS", text, Some(want))?;
        crate::redact::secret_values(&value, &mut secrets);
        writes.push(FileWrite { path: dir.join("env/extravars"), contents, mode: 0o600 });
    }
    if let Some(text) = &env.inventory {
        let (contents, _) = upstream_file("RUNNER_INVENTORY", text, None)?;
        writes.push(FileWrite { path: dir.join("inventory/inventory.yaml"), contents, mode: 0o600 });
    }
    if let Some(text) = settings
        && text.contains('$')
    {
        let with_defaults = |k: &str| {
            lookup(k).or_else(|| DEFAULT_ENV.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
        };
        writes.push(FileWrite {
            path: dir.join("env/settings"),
            contents: envsubst(text, &with_defaults),
            mode: 0o644,
        });
    }
    Ok(JobFiles { writes, secrets })
}

/// The kind of YAML document Ansible needs in a file: what to say otherwise, and the check.
type Want<'a> = (&'a str, fn(&Value) -> bool);

/// A file as upstream's entrypoint writes it (`---`, then the value), checked to read as YAML
/// and, when `want` says so, as the kind of document Ansible needs there.
fn upstream_file(input: &'static str, text: &str, want: Option<Want>) -> Result<(String, Value), JobError> {
    let contents = format!("---\n{text}\n");
    let value = crate::yaml::ansible::<Value>(&contents)
        .map_err(|message| JobError::Malformed { input: input.into(), message: own_lines(&message) })?;
    match want {
        Some((what, ok)) if !ok(&value) => Err(JobError::Malformed {
            input: input.into(),
            message: format!("{what}, found {}", kind_of(&value)),
        }),
        _ => Ok((contents, value)),
    }
}

/// A reader's `line N: …` counted in the variable's own lines, not in the file written from
/// it (whose first line is the `---` upstream puts in front).
fn own_lines(message: &str) -> String {
    let Some(rest) = message.strip_prefix("line ") else { return message.to_string() };
    match rest.split_once(": ").and_then(|(n, m)| Some((n.parse::<u64>().ok()?, m))) {
        Some((n, m)) => format!("line {}: {m}", n.saturating_sub(1).max(1)),
        None => message.to_string(),
    }
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "nothing",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::{argv, env_of};

    #[test]
    fn prepares_files_as_the_upstream_entrypoint() {
        let cmd = RunnerCommand::parse(&argv("ansible-runner run /runner -p playbook.yaml -i j")).unwrap();
        let env = JobEnv {
            playbook: Some("\n- hosts: all\n  tasks: []\n\n\n".into()),
            cmdline: Some("\n--tags a --limit 'h1,h2'\n\n".into()),
            extra_vars: Some("\nedpm_override_hosts: all\nedpm_service_type: nova\n\n".into()),
            ..Default::default()
        };
        let settings =
            "idle_timeout: ${RUNNER_IDLE_TIMEOUT}\njob_timeout: $RUNNER_JOB_TIMEOUT\nx: $$ ${1} ${UNSET}\n";
        let writes =
            prepare(&cmd, &env, Some(settings), &env_of(&[("RUNNER_JOB_TIMEOUT", "60")])).unwrap().writes;
        let got: Vec<(String, &str, u32)> =
            writes.iter().map(|w| (w.path.display().to_string(), w.contents.as_str(), w.mode)).collect();
        assert_eq!(
            got,
            [
                ("/runner/project/playbook.yaml".into(), "---\n\n- hosts: all\n  tasks: []\n\n\n\n", 0o644),
                ("/runner/env/cmdline".into(), "\n--tags a --limit 'h1,h2'\n\n\n", 0o644),
                (
                    "/runner/env/extravars".into(),
                    "---\n\nedpm_override_hosts: all\nedpm_service_type: nova\n\n\n",
                    0o600
                ),
                ("/runner/env/settings".into(), "idle_timeout: 600\njob_timeout: 60\nx: $$ ${1} \n", 0o644),
            ]
        );
        // A playbook run by name: upstream writes the name into playbook.yaml; nothing is written here.
        let by_name = RunnerCommand::parse(&argv("ansible-runner run /runner -p osp.edpm.x -i j")).unwrap();
        let env = JobEnv { playbook: Some("\nosp.edpm.x\n\n".into()), ..Default::default() };
        assert!(prepare(&by_name, &env, None, &env_of(&[])).unwrap().writes.is_empty());
    }

    #[test]
    fn malformed_inputs_name_themselves() {
        let cmd = RunnerCommand::parse(&argv("ansible-runner run /runner -p playbook.yaml -i j")).unwrap();
        for (env, want) in [
            (JobEnv { extra_vars: Some("\n[a\n\n".into()), ..Default::default() }, "RUNNER_EXTRA_VARS: "),
            (
                JobEnv { extra_vars: Some("\na: 1\n---\nb: 2\n\n".into()), ..Default::default() },
                "RUNNER_EXTRA_VARS: line 4: one YAML document expected",
            ),
            (
                JobEnv { extra_vars: Some("\n- a\n\n".into()), ..Default::default() },
                "RUNNER_EXTRA_VARS: extra vars must be a YAML mapping of variable names to values, found a list",
            ),
            (
                JobEnv { playbook: Some("\nhosts: all\n".into()), ..Default::default() },
                "RUNNER_PLAYBOOK: an inline playbook must be a YAML list of plays, found a mapping",
            ),
            (
                JobEnv { cmdline: Some("--limit 'a\n".into()), ..Default::default() },
                "RUNNER_CMDLINE: no closing quotation",
            ),
        ] {
            let e = prepare(&cmd, &env, None, &env_of(&[])).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
        // Repeated keys are fine, as for PyYAML; Ansible's own tags are read.
        let env =
            JobEnv { extra_vars: Some("\na: 1\na: 2\nb: !unsafe '{{ x }}'\n".into()), ..Default::default() };
        assert!(prepare(&cmd, &env, None, &env_of(&[])).is_ok());
    }
}
