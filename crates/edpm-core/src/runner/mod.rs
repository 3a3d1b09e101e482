//! The AnsibleEE job entrypoint (`edpm-agent run`). The pure half, one file per concept:
//! - `job`: the Job's contract (its `ansible-runner run` command, `RUNNER_*` environment, the
//!   files upstream's entrypoint writes, the ansible-playbook command for images without
//!   ansible-runner);
//! - `policy`: the run's decisions (options, executor, inventory, how it ended);
//! - `events`: one job event file read; `fold`: the events folded into per-host results;
//! - `summary`: `edpm-summary.json` and the job log's result line; `termination`: upstream's
//!   termination message; `retry`: the hosts a retry runs on; `text`: one-line, cut text.
//!
//! The shell half (the job's files, the supervised play) is `edpm-agent`'s `runner` module.

pub mod events;
pub mod fold;
pub mod job;
pub mod outcome;
pub mod policy;
pub mod retry;
pub mod summary;
pub mod termination;
pub mod text;

#[cfg(test)]
mod tests;
