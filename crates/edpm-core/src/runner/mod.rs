//! The AnsibleEE job entrypoint (`edpm-agent run`). The pure half, one file per concept:
//! - the Job's contract (`job` says where each part lives, and holds its error): `argv`, the
//!   Job's `ansible-runner run` command read as ansible-runner reads it; `env`, its `RUNNER_*`
//!   environment, read once per run; `entrypoint`, the files upstream's entrypoint writes;
//!   `extra_vars`, the secret values extra vars give; `ansible_playbook`, the ansible-playbook
//!   command for images without ansible-runner; `shlex` and `envsubst`, Python's and GNU's
//!   text rules;
//! - `policy`: the run's decisions (options, executor, inventory, how it ended); `outcome`: how
//!   a supervised play ended, as plain data;
//! - `events`: one job event file read; `fold`: the events folded into per-host results;
//! - `summary`: `edpm-summary.json` and the job log's result line; `termination`: upstream's
//!   termination message; `retry`: the hosts a retry runs on; `text`: one-line, cut text.
//!
//! The shell half (the job's files, the supervised play) is `edpm-agent`'s `runner` module.

pub mod ansible_playbook;
pub mod argv;
pub mod entrypoint;
pub mod env;
pub mod envsubst;
pub mod events;
pub mod extra_vars;
pub mod fold;
pub mod job;
pub mod outcome;
pub mod policy;
pub mod retry;
pub mod shlex;
pub mod summary;
pub mod termination;
pub mod text;

#[cfg(test)]
mod tests;
