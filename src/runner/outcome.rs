//! How a supervised play ended, as plain data: what `shell::supervise` returns and
//! `policy::ending` reads.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::job::Timeout;

/// Limits on the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub job: Option<Duration>,
    pub idle: Option<Duration>,
    /// Time between the first SIGTERM (or SIGINT) and SIGKILL.
    pub grace: Duration,
}

/// Why edpm-agent stopped the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Timeout(Timeout),
    /// SIGTERM or SIGINT received and forwarded.
    Signal(i32),
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Exited(i32),
    Signaled(i32),
}

impl Ending {
    /// The shell's convention: the exit status, or 128 + the signal.
    pub(crate) fn code(self) -> i32 {
        match self {
            Ending::Exited(c) => c,
            Ending::Signaled(s) => 128 + s,
        }
    }
}

/// What the supervisor saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    pub ending: Ending,
    pub stop: Option<Stop>,
    /// The child outlived the grace period and was killed.
    pub killed: bool,
    pub elapsed: Duration,
}

/// How a run ended. The first four are ansible-runner's own `status` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The play ran and returned 0.
    Successful,
    /// The play ran and returned non-zero (failed or unreachable hosts, or a play error).
    Failed,
    /// The job or idle timeout ended the play (`RunSummary::timeout` says which).
    Timeout,
    /// SIGTERM or SIGINT ended the play.
    Canceled,
    /// Bad input (a missing playbook, an unreadable inventory, malformed extra vars, ...):
    /// the play never started; `RunSummary::reason` names the input.
    Invalid,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Successful => "successful",
            RunStatus::Failed => "failed",
            RunStatus::Timeout => "timeout",
            RunStatus::Canceled => "canceled",
            RunStatus::Invalid => "invalid",
        }
    }

    /// ansible-runner's `status` file text, if it is one of its values.
    pub fn from_runner(text: &str) -> Option<RunStatus> {
        match text.trim() {
            "successful" => Some(RunStatus::Successful),
            "failed" => Some(RunStatus::Failed),
            "timeout" => Some(RunStatus::Timeout),
            "canceled" => Some(RunStatus::Canceled),
            _ => None,
        }
    }
}
