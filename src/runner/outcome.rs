//! How a supervised play ended, as plain data: what `shell::supervise` returns and
//! `policy::ending` reads.

use std::time::Duration;

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
