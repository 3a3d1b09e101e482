//! The AnsibleEE job contract: what openstack-operator's Job asks of the runner image, and
//! what edpm-agent derives from it (readiness-runner.md §2), one module per part:
//!
//! - [`argv`](super::argv): the Job's command, `ansible-runner run /runner -p <playbook>
//!   -i <ident>` (or `-r <role>`), read the way ansible-runner's argparse reads it;
//! - [`env`](super::env): the Job's environment (`RUNNER_PLAYBOOK`, `RUNNER_CMDLINE`,
//!   `RUNNER_EXTRA_VARS`, `RUNNER_INVENTORY`, the timeouts), read once per run;
//! - [`entrypoint`](super::entrypoint): what edpm-ansible's image entrypoint writes into the
//!   runner directory; [`extra_vars`](super::extra_vars): the secret values extra vars give;
//! - [`ansible_playbook`](super::ansible_playbook): the `ansible-playbook` command
//!   ansible-runner would run, for images without ansible-runner;
//! - [`shlex`](super::shlex) and [`envsubst`](super::envsubst): Python's and GNU's text
//!   rules the contract relies on.
//!
//! This module holds the one error they share. Pure: values in, values out; the shell
//! (`edpm-agent`'s `runner`) reads the runner directory and writes the files.

/// A Job whose command, environment or runner directory does not keep the contract.
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
