//! The AnsibleEE job contract: what openstack-operator's Job asks of the runner image, and
//! what edpm-agent derives from it (readiness-runner.md §2).
//!
//! - [`RunnerCommand`] is the Job's command, `ansible-runner run /runner -p <playbook>
//!   -i <ident>` (or `-r <role>`), read the way ansible-runner's argparse reads it;
//! - [`JobEnv`] is the Job's environment (`RUNNER_PLAYBOOK`, `RUNNER_CMDLINE`,
//!   `RUNNER_EXTRA_VARS`, `RUNNER_INVENTORY`, the timeouts), each value wrapped in newlines by
//!   the operator;
//! - [`prepare`] is what edpm-ansible's image entrypoint writes into the runner directory;
//! - [`playbook_command`] is the `ansible-playbook` command ansible-runner would run, for
//!   images without ansible-runner.
//!
//! Pure: values in, values out; the shell (`app::run`) reads the runner directory and writes
//! the files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// The runner directory the Job's command names.
pub const DEFAULT_RUNNER_DIR: &str = "/runner";
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
/// The ident `run` uses when it builds the command itself (`run --runner-dir DIR` alone).
pub const LOCAL_IDENT: &str = "edpm-agent";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("the command after -- must be `ansible-runner run DIR ...`, got {}", crate::excerpt::echo(got).debug())]
    NotRunner { got: String },
    #[error("ansible-runner {option}: {message}")]
    BadOption { option: String, message: String },
    #[error("ansible-runner run needs the runner directory (ansible-runner run DIR ...)")]
    NoDirectory,
    #[error("ansible-runner run needs -p PLAYBOOK or -r ROLE")]
    NoPlaybook,
    #[error(
        "--runner-dir {given} and the command's runner directory {command} differ; give one of them (the command's /runner is replaced by --runner-dir)"
    )]
    DirMismatch { given: String, command: String },
    #[error("{name}: {message}")]
    Env { name: &'static str, message: String },
    #[error("{input}: {message}")]
    Malformed { input: String, message: String },
    #[error("ansible-runner {option} cannot be run without ansible-runner: {message}")]
    NoFallback { option: String, message: String },
}

/// How an ansible-runner option takes values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Takes {
    Flag,
    Count,
    One,
    /// argparse `nargs='*'`: values up to the next option.
    Many,
}

/// An ansible-runner option: long name, short letter, what it takes.
type OptionSpec = (&'static str, Option<char>, Takes);

/// ansible-runner 2.4's `run` options.
const OPTIONS: &[OptionSpec] = &[
    ("--help", Some('h'), Takes::Flag),
    ("--process-isolation", None, Takes::Flag),
    ("--process-isolation-executable", None, Takes::One),
    ("--process-isolation-path", None, Takes::One),
    ("--process-isolation-hide-paths", None, Takes::Many),
    ("--process-isolation-show-paths", None, Takes::Many),
    ("--process-isolation-ro-paths", None, Takes::Many),
    ("--directory-isolation-base-path", None, Takes::One),
    ("--version", None, Takes::Flag),
    ("--debug", None, Takes::Flag),
    ("--logfile", None, Takes::One),
    ("--binary", Some('b'), Takes::One),
    ("--ident", Some('i'), Takes::One),
    ("--rotate-artifacts", None, Takes::One),
    ("--artifact-dir", None, Takes::One),
    ("--project-dir", None, Takes::One),
    ("--inventory", None, Takes::One),
    ("--json", Some('j'), Takes::Flag),
    ("--omit-event-data", None, Takes::Flag),
    ("--only-failed-event-data", None, Takes::Flag),
    ("--omit-env-files", None, Takes::Flag),
    ("--quiet", Some('q'), Takes::Flag),
    ("-v", Some('v'), Takes::Count),
    ("--playbook", Some('p'), Takes::One),
    ("--module", Some('m'), Takes::One),
    ("--role", Some('r'), Takes::One),
    ("--limit", None, Takes::One),
    ("--cmdline", None, Takes::One),
    ("--hosts", None, Takes::One),
    ("--forks", None, Takes::One),
    ("--roles-path", None, Takes::One),
    ("--role-vars", None, Takes::One),
    ("--role-skip-facts", None, Takes::Flag),
    ("--args", Some('a'), Takes::One),
    ("--container-image", None, Takes::One),
    ("--container-volume-mount", None, Takes::One),
    ("--container-option", None, Takes::One),
];

/// The Job's command, `ansible-runner run DIR [options]`, as ansible-runner reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerCommand {
    /// The program as given (`ansible-runner`, or a path to it).
    pub program: String,
    /// Everything after the program, unchanged (starts with `run`).
    pub args: Vec<String>,
    pub private_data_dir: String,
    /// Where the private data directory is in `args`.
    dir_arg: usize,
    /// Option values by long name (the last one given wins, as with argparse), flags as "".
    pub values: BTreeMap<&'static str, String>,
    /// `-v` count.
    pub verbosity: u8,
    /// Options `playbook_command` cannot translate, in order.
    pub unsupported: Vec<&'static str>,
}

impl RunnerCommand {
    /// Reads `argv` (`ansible-runner run DIR ...`).
    pub fn parse(argv: &[String]) -> Result<RunnerCommand, JobError> {
        let got = || argv.join(" ");
        let program = argv.first().ok_or(JobError::NotRunner { got: String::new() })?;
        let name = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name != "ansible-runner" || argv.get(1).map(String::as_str) != Some("run") {
            return Err(JobError::NotRunner { got: got() });
        }
        let mut cmd =
            RunnerCommand { program: program.clone(), args: argv[1..].to_vec(), ..Default::default() };
        // Each positional argument with its place in `args`.
        let mut positional = Vec::new();
        let mut i = 2;
        let mut only_positional = false;
        while i < argv.len() {
            let a = &argv[i];
            i += 1;
            if only_positional || a == "-" || !a.starts_with('-') {
                positional.push((a.clone(), i - 2));
                continue;
            }
            if a == "--" {
                only_positional = true;
                continue;
            }
            let (spec, inline) = find_option(a)?;
            let (long, _, takes) = *spec;
            match takes {
                Takes::Flag => {
                    if inline.is_some() {
                        return Err(JobError::BadOption {
                            option: a.clone(),
                            message: "takes no value".into(),
                        });
                    }
                    cmd.values.insert(long, String::new());
                }
                Takes::Count => {
                    cmd.verbosity = cmd.verbosity.saturating_add(inline.map_or(1, |v| v.len() as u8 + 1))
                }
                Takes::One => {
                    let v = match inline {
                        Some(v) => v,
                        None => {
                            let v = argv.get(i).ok_or_else(|| JobError::BadOption {
                                option: long.into(),
                                message: "needs a value".into(),
                            })?;
                            i += 1;
                            v.clone()
                        }
                    };
                    cmd.values.insert(long, v);
                }
                Takes::Many => {
                    let mut vs: Vec<String> = inline.into_iter().collect();
                    while i < argv.len() && !argv[i].starts_with('-') {
                        vs.push(argv[i].clone());
                        i += 1;
                    }
                    cmd.values.insert(long, vs.join(" "));
                }
            }
            if matches!(
                long,
                "--process-isolation"
                    | "--process-isolation-executable"
                    | "--process-isolation-path"
                    | "--process-isolation-hide-paths"
                    | "--process-isolation-show-paths"
                    | "--process-isolation-ro-paths"
                    | "--directory-isolation-base-path"
                    | "--container-image"
                    | "--container-volume-mount"
                    | "--container-option"
                    | "--module"
                    | "--args"
                    | "--binary"
                    | "--help"
                    | "--version"
            ) && !cmd.unsupported.contains(&long)
            {
                cmd.unsupported.push(long);
            }
        }
        // ansible-runner's only positional after `run` is the private data directory.
        match positional.as_slice() {
            [(dir, at)] => (cmd.private_data_dir, cmd.dir_arg) = (dir.clone(), *at),
            [] => return Err(JobError::NoDirectory),
            [_, (extra, _), ..] => {
                return Err(JobError::BadOption {
                    option: extra.clone(),
                    message: "unexpected argument: ansible-runner run takes one directory".into(),
                });
            }
        }
        if cmd.get("--playbook").is_none() && cmd.get("--role").is_none() && cmd.get("--module").is_none() {
            return Err(JobError::NoPlaybook);
        }
        Ok(cmd)
    }

    /// The command `run` uses when none is given: the directory's inline playbook (or the
    /// role in `RUNNER_ROLE`), under the ident `edpm-agent`.
    pub fn default_for(dir: &str, env: &JobEnv) -> RunnerCommand {
        let target = match (&env.playbook, &env.role) {
            (None, Some(role)) => ["-r".to_string(), role.trim().to_string()],
            _ => ["-p".to_string(), "playbook.yaml".to_string()],
        };
        let mut argv = vec!["ansible-runner".to_string(), "run".into(), dir.into()];
        argv.extend(target);
        argv.extend(["-i".to_string(), LOCAL_IDENT.to_string()]);
        // Built from known-good parts: parsing cannot fail.
        RunnerCommand::parse(&argv).unwrap_or_default()
    }

    pub fn get(&self, long: &str) -> Option<&str> {
        self.values.get(long).map(String::as_str)
    }

    /// Replaces the runner directory (`/runner` in the Job's command) with `dir`, in the
    /// parsed value and in the arguments passed on.
    pub fn set_private_data_dir(&mut self, dir: &str) {
        self.private_data_dir = dir.to_string();
        if let Some(arg) = self.args.get_mut(self.dir_arg) {
            *arg = dir.to_string();
        }
    }

    /// Makes the paths ansible-runner resolves against its working directory absolute
    /// against `cwd` (the private data directory, `--artifact-dir`, `--project-dir`), as it
    /// does (`os.path.abspath`), so that every path derived from them (the retry's
    /// `--limit @FILE`, read by ansible-playbook in the project directory) means the same
    /// wherever it is used.
    pub fn resolve_paths(&mut self, cwd: &Path) {
        let dir = absolute(cwd, &self.private_data_dir);
        if dir != self.private_data_dir {
            self.set_private_data_dir(&dir);
        }
        for long in ["--artifact-dir", "--project-dir"] {
            if let Some(p) = self.get(long).filter(|p| Path::new(p).is_relative()) {
                let p = absolute(cwd, p);
                self.push_option(long, &p);
            }
        }
    }

    /// Adds `option value` to the arguments passed on (it wins over an earlier one, as
    /// argparse keeps the last value).
    pub fn push_option(&mut self, long: &'static str, value: &str) {
        self.args.extend([long.to_string(), value.to_string()]);
        self.values.insert(long, value.to_string());
    }

    pub fn ident(&self) -> Option<&str> {
        self.get("--ident")
    }

    /// A path option resolved against the runner directory (ansible-runner resolves relative
    /// paths against its working directory; the Job always gives absolute ones).
    fn dir_option(&self, long: &str, default: &str) -> PathBuf {
        let base = Path::new(&self.private_data_dir);
        match self.get(long) {
            Some(p) => base.join(p),
            None => base.join(default),
        }
    }

    pub fn project_dir(&self) -> PathBuf {
        self.dir_option("--project-dir", "project")
    }

    pub fn artifact_root(&self) -> PathBuf {
        self.dir_option("--artifact-dir", "artifacts")
    }

    /// The playbook: a file (relative ones are in the project directory, as ansible-runner
    /// runs from there), or a collection playbook (`namespace.collection.name`), which only
    /// Ansible can find.
    pub fn playbook(&self) -> Option<Playbook> {
        let p = self.get("--playbook")?;
        if is_collection_playbook(p) {
            return Some(Playbook::Collection(p.to_string()));
        }
        Some(Playbook::File(self.project_dir().join(p)))
    }
}

/// `path` made absolute against `cwd` and cleaned without looking at the filesystem (`.` and
/// `..` resolved by name), as Python's `os.path.abspath` does.
pub fn absolute(cwd: &Path, path: &str) -> String {
    use std::path::Component;
    let mut out = PathBuf::from("/");
    for c in cwd.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out.display().to_string()
}

/// What `-p` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Playbook {
    File(PathBuf),
    Collection(String),
}

/// `osp.edpm.bootstrap`: three or more dot-separated identifiers, no path, no YAML suffix.
fn is_collection_playbook(p: &str) -> bool {
    let parts: Vec<&str> = p.split('.').collect();
    parts.len() >= 3
        && !p.ends_with(".yml")
        && !p.ends_with(".yaml")
        && parts.iter().all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// The option an argument names, with an inline value (`--ident=x`, `-ix`), as argparse
/// matches them (unique long-option prefixes included).
fn find_option(arg: &str) -> Result<(&'static OptionSpec, Option<String>), JobError> {
    if let Some(long) = arg.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        let full = format!("--{name}");
        if let Some(spec) = OPTIONS.iter().find(|o| o.0 == full) {
            return Ok((spec, inline));
        }
        let matches: Vec<_> =
            OPTIONS.iter().filter(|o| o.0.starts_with("--") && o.0.starts_with(&full)).collect();
        return match matches.as_slice() {
            [one] => Ok((*one, inline)),
            [] => Err(JobError::BadOption {
                option: arg.into(),
                message: "not an ansible-runner run option".into(),
            }),
            _ => Err(JobError::BadOption { option: arg.into(), message: "ambiguous abbreviation".into() }),
        };
    }
    let mut chars = arg.chars().skip(1);
    let c = chars.next().unwrap_or('-');
    let rest: String = chars.collect();
    let spec = OPTIONS.iter().find(|o| o.1 == Some(c)).ok_or_else(|| JobError::BadOption {
        option: arg.into(),
        message: "not an ansible-runner run option".into(),
    })?;
    match spec.2 {
        Takes::Count if !rest.is_empty() && rest.chars().all(|r| r == 'v') => Ok((spec, Some(rest))),
        _ if rest.is_empty() => Ok((spec, None)),
        Takes::One | Takes::Many => Ok((spec, Some(rest))),
        _ => Err(JobError::BadOption { option: arg.into(), message: "takes no value".into() }),
    }
}

/// The Job's environment. Values are kept as given (newline-wrapped by the operator);
/// whitespace-only values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobEnv {
    pub playbook: Option<String>,
    pub role: Option<String>,
    pub cmdline: Option<String>,
    pub extra_vars: Option<String>,
    pub inventory: Option<String>,
    /// `None` when set to 0 (no limit).
    pub job_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
}

impl JobEnv {
    pub fn read(lookup: &dyn Fn(&str) -> Option<String>) -> Result<JobEnv, JobError> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let seconds = |name: &'static str, default: u64| -> Result<Option<Duration>, JobError> {
            let n = match get(name) {
                None => default,
                Some(v) => v.trim().parse::<u64>().map_err(|_| JobError::Env {
                    name,
                    message: format!(
                        "{} is not a whole number of seconds (0 means no limit)",
                        crate::excerpt::echo(v.trim()).debug()
                    ),
                })?,
            };
            Ok((n > 0).then(|| Duration::from_secs(n)))
        };
        Ok(JobEnv {
            job_timeout: seconds("RUNNER_JOB_TIMEOUT", 3600)?,
            idle_timeout: seconds("RUNNER_IDLE_TIMEOUT", 600)?,
            ..JobEnv::read_texts(lookup)
        })
    }

    /// The text values only, which cannot be wrong here (their contents are checked by
    /// [`prepare`]), with the default timeouts: what the default command needs to know
    /// before the artifacts directory is known, so that a bad timeout is reported where the
    /// run's summary goes.
    pub fn read_texts(lookup: &dyn Fn(&str) -> Option<String>) -> JobEnv {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        JobEnv {
            playbook: get("RUNNER_PLAYBOOK"),
            role: get("RUNNER_ROLE"),
            cmdline: get("RUNNER_CMDLINE"),
            extra_vars: get("RUNNER_EXTRA_VARS"),
            inventory: get("RUNNER_INVENTORY"),
            job_timeout: Some(Duration::from_secs(3600)),
            idle_timeout: Some(Duration::from_secs(600)),
        }
    }
}

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

/// The values of secret-named extra vars a play gets besides `RUNNER_EXTRA_VARS` (whose
/// values [`prepare`] returns): `extravars`, the text of an `env/extravars` file, and the
/// command line's `-e`/`--extra-vars` (`key=value` words, or YAML/JSON; a file named with
/// `@` is not read). Text that does not read as Ansible reads it gives nothing: Ansible
/// would refuse it too.
pub fn extra_var_secrets(extravars: Option<&str>, cmdline: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    let add = |text: &str, found: &mut Vec<String>| {
        if let Ok(v) = crate::yaml::ansible::<Value>(text) {
            crate::redact::secret_values(&v, found);
        }
    };
    if let Some(text) = extravars {
        add(text, &mut found);
    }
    let words = cmdline.and_then(|c| shlex_split(c).ok()).unwrap_or_default();
    let mut values = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "-e" || w == "--extra-vars" {
            values.extend(words.get(i).cloned());
            i += 1;
        } else if let Some(v) = w.strip_prefix("--extra-vars=") {
            values.push(v.to_string());
        } else if let Some(v) = w.strip_prefix("-e").filter(|v| !v.is_empty() && !w.starts_with("--")) {
            values.push(v.to_string());
        }
    }
    for v in values {
        let t = v.trim_start();
        if t.starts_with('@') {
            continue;
        }
        if t.starts_with(['{', '[']) {
            add(t, &mut found);
            continue;
        }
        // Ansible's key=value form: quoted values keep their spaces.
        let mut m = serde_json::Map::new();
        for kv in shlex_split(&v).unwrap_or_default() {
            if let Some((k, val)) = kv.split_once('=') {
                m.insert(k.to_string(), Value::String(val.to_string()));
            }
        }
        crate::redact::secret_values(&Value::Object(m), &mut found);
    }
    found
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

/// GNU `envsubst` without a variable list: `$NAME` and `${NAME}` become the variable's value,
/// or nothing when unset; anything else is kept.
pub fn envsubst(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
            && braced[..end].starts_with(is_start)
            && braced[..end].chars().all(is_name)
        {
            out.push_str(&lookup(&braced[..end]).unwrap_or_default());
            rest = &braced[end + 1..];
        } else if after.starts_with(is_start) {
            let end = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            out.push_str(&lookup(&after[..end]).unwrap_or_default());
            rest = &after[end..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Python's `shlex.split(s)` (POSIX mode, no comments), which ansible-runner applies to
/// `env/cmdline`.
pub fn shlex_split(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(n) => word.push(n),
                    None => return Err("no escaped character".into()),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => word.push(n),
                        None => return Err("no closing quotation".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            // In double quotes a backslash escapes only a quote or a backslash.
                            Some(n @ ('"' | '\\')) => word.push(n),
                            Some(n) => {
                                word.push('\\');
                                word.push(n);
                            }
                            None => return Err("no closing quotation".into()),
                        },
                        Some(n) => word.push(n),
                        None => return Err("no closing quotation".into()),
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

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
/// runner directory's; `role_playbook_path` is where the shell will write a role's play.
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
            role_play = Some(play.to_string());
            let roles = cmd.get("--roles-path").map_or_else(|| dir.join("roles"), |p| dir.join(p));
            env.push(("ANSIBLE_ROLES_PATH".into(), roles.display().to_string()));
            argv.push(role_playbook_path.display().to_string());
        }
        (None, None) => return Err(JobError::NoPlaybook),
    }
    let cwd = if state.project_exists { cmd.project_dir() } else { dir.to_path_buf() };
    Ok(PlaybookCommand { argv, cwd, env, role_play })
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

/// Which limit a timed-out run hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timeout {
    /// `RUNNER_JOB_TIMEOUT`: the whole run took too long.
    Job,
    /// `RUNNER_IDLE_TIMEOUT`: the play printed nothing for too long.
    Idle,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn reads_the_jobs_command_like_argparse() {
        let c =
            RunnerCommand::parse(&argv("ansible-runner run /runner -p osp.edpm.bootstrap -i bootstrap-x"))
                .unwrap();
        assert_eq!(c.private_data_dir, "/runner");
        assert_eq!(c.get("--playbook"), Some("osp.edpm.bootstrap"));
        assert_eq!(c.ident(), Some("bootstrap-x"));
        assert_eq!(c.playbook(), Some(Playbook::Collection("osp.edpm.bootstrap".into())));
        let c = RunnerCommand::parse(&argv(
            "/usr/bin/ansible-runner run -r osp.edpm.role --ident=j --artifact-dir /a -vvv --role-skip-facts --proc /tmp /runner",
        ))
        .unwrap_err();
        assert!(matches!(c, JobError::BadOption { .. }), "--proc is ambiguous");
        let c = RunnerCommand::parse(&argv(
            "/usr/bin/ansible-runner run -r osp.edpm.role --ident=j --artifact-dir /a -vvv --role-skip --limit=h1 /runner",
        ))
        .unwrap();
        assert_eq!(
            (c.get("--role"), c.ident(), c.verbosity, c.get("--role-skip-facts"), c.get("--limit")),
            (Some("osp.edpm.role"), Some("j"), 3, Some(""), Some("h1"))
        );
        assert_eq!(c.artifact_root(), PathBuf::from("/a"));
        let c = RunnerCommand::parse(&argv("ansible-runner run /r -p site.yml -ij2")).unwrap();
        assert_eq!(
            (c.ident(), c.playbook()),
            (Some("j2"), Some(Playbook::File("/r/project/site.yml".into())))
        );
    }

    #[test]
    fn refuses_what_is_not_an_ansible_runner_run() {
        for (cmd, want) in [
            ("ansible-playbook site.yml", "must be `ansible-runner run"),
            ("ansible-runner start /runner -p x", "must be `ansible-runner run"),
            ("ansible-runner run -p x", "needs the runner directory"),
            ("ansible-runner run /runner", "needs -p PLAYBOOK or -r ROLE"),
            (
                "ansible-runner run /runner -p x --frobnicate",
                "--frobnicate: not an ansible-runner run option",
            ),
            ("ansible-runner run /runner /other -p x", "/other: unexpected argument"),
            ("ansible-runner run /runner -p", "--playbook: needs a value"),
        ] {
            let e = RunnerCommand::parse(&argv(cmd)).unwrap_err().to_string();
            assert!(e.contains(want), "{cmd}: {e}");
        }
    }

    #[test]
    fn the_runner_directory_can_be_replaced_and_options_added() {
        let mut c = RunnerCommand::parse(&argv("ansible-runner run /runner -p playbook.yaml -i j")).unwrap();
        c.set_private_data_dir("/tmp/x");
        c.push_option("--limit", "@/tmp/x/limit");
        assert_eq!(c.args, argv("run /tmp/x -p playbook.yaml -i j --limit @/tmp/x/limit"));
        assert_eq!(c.project_dir(), PathBuf::from("/tmp/x/project"));
        let d =
            RunnerCommand::default_for("/d", &JobEnv { role: Some("\nr\n\n".into()), ..Default::default() });
        assert_eq!(d.args, argv("run /d -r r -i edpm-agent"));
    }

    #[test]
    fn relative_paths_are_resolved_once_against_the_working_directory() {
        // The directory named like the ident: only the positional argument is the directory.
        let mut c = RunnerCommand::parse(&argv(
            "ansible-runner run -i runner -p x.yml --artifact-dir ../a --project-dir=./p runner",
        ))
        .unwrap();
        c.resolve_paths(Path::new("/w/d"));
        assert_eq!(c.private_data_dir, "/w/d/runner");
        assert_eq!(
            c.args,
            argv(
                "run -i runner -p x.yml --artifact-dir ../a --project-dir=./p /w/d/runner --artifact-dir /w/a --project-dir /w/d/p"
            )
        );
        assert_eq!((c.ident(), c.artifact_root()), (Some("runner"), PathBuf::from("/w/a")));
        assert_eq!(c.project_dir(), PathBuf::from("/w/d/p"));
        let mut c = RunnerCommand::parse(&argv("ansible-runner run /r -p x.yml")).unwrap();
        c.resolve_paths(Path::new("/w"));
        assert_eq!(c.args, argv("run /r -p x.yml"), "absolute paths stay as given");
        assert_eq!(absolute(Path::new("/w/d"), "../../../x/./y/"), "/x/y");
    }

    #[test]
    fn environment_values_are_unwrapped_and_timeouts_checked() {
        let e =
            JobEnv::read(&env_of(&[("RUNNER_CMDLINE", "\n\n\n"), ("RUNNER_JOB_TIMEOUT", " 60\n")])).unwrap();
        assert_eq!(e.cmdline, None);
        assert_eq!(e.job_timeout, Some(Duration::from_secs(60)));
        assert_eq!(e.idle_timeout, Some(Duration::from_secs(600)));
        let e = JobEnv::read(&env_of(&[("RUNNER_IDLE_TIMEOUT", "0")])).unwrap();
        assert_eq!(e.idle_timeout, None);
        let err = JobEnv::read(&env_of(&[("RUNNER_JOB_TIMEOUT", "1h")])).unwrap_err().to_string();
        assert!(err.starts_with("RUNNER_JOB_TIMEOUT: \"1h\""), "{err}");
        // The texts alone never fail: a bad timeout is reported once the summary has a place.
        let texts = JobEnv::read_texts(&env_of(&[("RUNNER_JOB_TIMEOUT", "-5"), ("RUNNER_ROLE", "\nr\n")]));
        assert_eq!(
            (texts.role.as_deref(), texts.job_timeout),
            (Some("\nr\n"), Some(Duration::from_secs(3600)))
        );
    }

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

    #[test]
    fn secret_named_extra_vars_are_found_wherever_they_are_given() {
        let cmdline = "--tags a -e 'db_password=\"two words\" user=nova' -eapi_token=t0k3n --extra-vars='{\"x\": {\"secret\": 9}}' --extra-vars @/f -e '[1]'";
        let found = extra_var_secrets(Some("---\nrabbit_pass: Zq7\nuser: nova\n"), Some(cmdline));
        assert_eq!(found, ["Zq7", "two words", "t0k3n", "9"]);
        assert!(extra_var_secrets(Some("[broken"), Some("'open")).is_empty());
    }

    #[test]
    fn shlex_matches_python() {
        for (input, want) in [
            ("--tags a,b --limit 'h1 h2'", vec!["--tags", "a,b", "--limit", "h1 h2"]),
            ("  -e \"x=\\\"q\\\" \\$y\"  ", vec!["-e", "x=\"q\" \\$y"]),
            ("a\\ b 'c'\"d\" ''", vec!["a b", "cd", ""]),
            ("\n\n", vec![]),
        ] {
            assert_eq!(shlex_split(input).unwrap(), want, "{input}");
        }
        assert!(shlex_split("'open").is_err());
        assert!(shlex_split("trailing\\").is_err());
    }

    #[test]
    fn envsubst_like_gnu() {
        let env = env_of(&[("A", "1"), ("B_2", "two")]);
        assert_eq!(envsubst("$A ${B_2} $ $1 ${A-x} $UNSET. $$A", &env), "1 two $ $1 ${A-x} . $1");
    }

    #[test]
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
