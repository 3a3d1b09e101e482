//! How a supervised play ended, as plain data: what `edpm_io::process::supervise` returns and
//! `policy::ending` reads.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which limit a timed-out run hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timeout {
    /// `RUNNER_JOB_TIMEOUT`: the whole run took too long.
    Job,
    /// `RUNNER_IDLE_TIMEOUT`: the play printed nothing for too long.
    Idle,
}

/// Limits on the run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub job: Option<Duration>,
    pub idle: Option<Duration>,
    /// Time between the first SIGTERM (or SIGINT) and SIGKILL.
    pub grace: Duration,
}

/// Why edpm-agent stopped the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Timeout(Timeout),
    /// SIGTERM or SIGINT received and forwarded.
    Signal(i32),
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Signaled(i32),
}

impl Ending {
    /// The shell's convention: the exit status, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Ending::Exited(c) => c,
            Ending::Signaled(s) => 128 + s,
        }
    }
}

/// What the supervisor saw.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
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

/// Why a play that ran to its end failed with `rc`, in the words of ansible-core's exit codes
/// (`ansible.errors.ExitCode`; ansible-runner passes ansible-playbook's on): `None` for a code
/// Ansible does not define. Ansible uses 4 both for unreachable hosts and for input it could
/// not parse: `unreachable` (some host was found unreachable) tells them apart.
pub fn exit_reason(rc: i32, unreachable: bool) -> Option<String> {
    let what = match rc {
        1 => "an error stopped the play; Ansible's message is in the play's output",
        2 => "one or more hosts failed",
        4 if unreachable => "one or more hosts were unreachable",
        4 => {
            "no host was unreachable, so Ansible could not parse its input (the playbook, \
             inventory, variables or a file they include); its message is in the play's output"
        }
        5 => "bad or incomplete options for ansible-playbook (the Job's command line, RUNNER_CMDLINE)",
        99 => "the play was interrupted (Ctrl-C)",
        250 => "an unexpected error in Ansible itself; its traceback is in the play's output",
        _ => return None,
    };
    Some(format!("Ansible's exit code {rc}: {what}"))
}

#[cfg(test)]
mod tests {
    use super::exit_reason;

    #[test]
    fn ansibles_exit_codes_are_said_in_words() {
        assert_eq!(
            exit_reason(4, true).as_deref(),
            Some("Ansible's exit code 4: one or more hosts were unreachable")
        );
        assert!(exit_reason(4, false).unwrap().contains("could not parse its input"));
        assert_eq!(exit_reason(2, false).as_deref(), Some("Ansible's exit code 2: one or more hosts failed"));
        assert!(exit_reason(5, false).unwrap().contains("RUNNER_CMDLINE"));
        assert_eq!(exit_reason(0, false), None);
        assert_eq!(exit_reason(137, false), None);
    }
}
