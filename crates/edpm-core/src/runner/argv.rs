//! ansible-runner's argv, emulated: the Job's command, `ansible-runner run DIR [options]`,
//! read the way ansible-runner 2.4's argparse reads it (unique long-option prefixes,
//! `--opt=value`, `-ivalue`, `-vvv`), anything else refused; and the paths it names, resolved
//! as ansible-runner resolves them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::env::JobEnv;
use super::job::JobError;

/// The runner directory the Job's command names.
pub const DEFAULT_RUNNER_DIR: &str = "/runner";
/// The ident `run` uses when it builds the command itself (`run --runner-dir DIR` alone).
pub const LOCAL_IDENT: &str = "edpm-agent";

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

/// The options ansible-runner runs in ways `playbook_command` cannot reproduce.
const NO_FALLBACK: &[&str] = &[
    "--process-isolation",
    "--process-isolation-executable",
    "--process-isolation-path",
    "--process-isolation-hide-paths",
    "--process-isolation-show-paths",
    "--process-isolation-ro-paths",
    "--directory-isolation-base-path",
    "--container-image",
    "--container-volume-mount",
    "--container-option",
    "--module",
    "--args",
    "--binary",
    "--help",
    "--version",
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
        let program = argv.first().ok_or(JobError::NotRunner { got: String::new() })?;
        let name = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name != "ansible-runner" || argv.get(1).map(String::as_str) != Some("run") {
            return Err(JobError::NotRunner { got: argv.join(" ") });
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
            } else if a == "--" {
                only_positional = true;
            } else {
                i = cmd.take_option(argv, i, a)?;
            }
        }
        cmd.set_directory(&positional)?;
        if cmd.get("--playbook").is_none() && cmd.get("--role").is_none() && cmd.get("--module").is_none() {
            return Err(JobError::NoPlaybook);
        }
        Ok(cmd)
    }

    /// Reads the option `arg`, with its value inline or from `argv[i]` on; returns where the
    /// next argument is.
    fn take_option(&mut self, argv: &[String], mut i: usize, arg: &str) -> Result<usize, JobError> {
        let (spec, inline) = find_option(arg)?;
        let (long, _, takes) = *spec;
        match takes {
            Takes::Flag => {
                if inline.is_some() {
                    return Err(JobError::BadOption { option: arg.into(), message: "takes no value".into() });
                }
                self.values.insert(long, String::new());
            }
            Takes::Count => {
                self.verbosity = self.verbosity.saturating_add(inline.map_or(1, |v| v.len() as u8 + 1))
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
                self.values.insert(long, v);
            }
            Takes::Many => {
                let mut vs: Vec<String> = inline.into_iter().collect();
                while i < argv.len() && !argv[i].starts_with('-') {
                    vs.push(argv[i].clone());
                    i += 1;
                }
                self.values.insert(long, vs.join(" "));
            }
        }
        if NO_FALLBACK.contains(&long) && !self.unsupported.contains(&long) {
            self.unsupported.push(long);
        }
        Ok(i)
    }

    /// ansible-runner's only positional argument after `run`: the private data directory.
    fn set_directory(&mut self, positional: &[(String, usize)]) -> Result<(), JobError> {
        match positional {
            [(dir, at)] => {
                (self.private_data_dir, self.dir_arg) = (dir.clone(), *at);
                Ok(())
            }
            [] => Err(JobError::NoDirectory),
            [_, (extra, _), ..] => Err(JobError::BadOption {
                option: extra.clone(),
                message: "unexpected argument: ansible-runner run takes one directory".into(),
            }),
        }
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

    /// `--inventory` as ansible-runner's `valid_inventory` resolves it: an absolute path as
    /// it is; a relative one against the working directory `cwd` when a file or directory is
    /// there (`is_inventory`), else against `DIR/inventory/` (`--inventory hosts` is
    /// `DIR/inventory/hosts`). What neither holds is named as `DIR/inventory/<path>`, where
    /// the mounted inventory belongs, so that the error says where it was looked for last.
    /// Call after [`RunnerCommand::resolve_paths`] (the directory is absolute then).
    pub fn resolve_inventory(&mut self, cwd: &Path, is_inventory: &dyn Fn(&Path) -> bool) {
        let Some(given) = self.get("--inventory").filter(|p| Path::new(p).is_relative()) else { return };
        let here = PathBuf::from(absolute(cwd, given));
        let resolved = if is_inventory(&here) {
            here
        } else {
            Path::new(&self.private_data_dir).join("inventory").join(given)
        };
        self.push_option("--inventory", &resolved.display().to_string());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::argv;

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

    /// `--inventory` as ansible-runner's `valid_inventory`: the working directory's first,
    /// then `DIR/inventory/`; an absolute one as given.
    #[test]
    fn a_relative_inventory_is_found_where_ansible_runner_finds_it() {
        let resolve = |given: &str, present: &[&str]| {
            let mut c =
                RunnerCommand::parse(&argv(&format!("ansible-runner run /r -p x.yml --inventory {given}")))
                    .unwrap();
            c.resolve_inventory(Path::new("/w"), &|p| present.iter().any(|x| Path::new(x) == p));
            c.get("--inventory").unwrap().to_string()
        };
        assert_eq!(resolve("hosts", &[]), "/r/inventory/hosts");
        assert_eq!(resolve("hosts", &["/r/inventory/hosts"]), "/r/inventory/hosts");
        assert_eq!(resolve("hosts", &["/w/hosts", "/r/inventory/hosts"]), "/w/hosts");
        assert_eq!(resolve("./inv/../hosts", &["/w/hosts"]), "/w/hosts");
        assert_eq!(resolve("/abs/hosts", &[]), "/abs/hosts");
        let mut c = RunnerCommand::parse(&argv("ansible-runner run /r -p x.yml")).unwrap();
        c.resolve_inventory(Path::new("/w"), &|_| true);
        assert_eq!(c.get("--inventory"), None, "none given, none added");
    }
}
