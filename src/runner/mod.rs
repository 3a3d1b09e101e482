//! The AnsibleEE job entrypoint (`edpm-agent run`): the job contract, reading the play's
//! events, the per-host fold, the summary and termination message, and the retry plan are
//! pure; `shell` supervises the child process.

pub(crate) mod job;
pub(crate) mod shell;
pub mod summary;
