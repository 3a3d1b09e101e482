//! The Job's environment: the `RUNNER_*` variables openstack-operator sets on the Job, each
//! value wrapped in newlines, read once per run ([`JobEnv::read`]) and passed down. Reading
//! never fails: the texts are checked where they are used ([`prepare`](super::entrypoint::prepare)),
//! the timeouts by [`JobEnv::limits`], so that bad input is reported once the run's summary
//! has a place.

use std::time::Duration;

use super::job::JobError;
use super::outcome::Limits;

/// The Job's environment. Values are kept as given (newline-wrapped by the operator);
/// whitespace-only values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobEnv {
    pub playbook: Option<String>,
    pub role: Option<String>,
    pub cmdline: Option<String>,
    pub extra_vars: Option<String>,
    pub inventory: Option<String>,
    /// `RUNNER_JOB_TIMEOUT` as given, read by [`JobEnv::limits`].
    pub job_timeout: Option<String>,
    /// `RUNNER_IDLE_TIMEOUT` as given, read by [`JobEnv::limits`].
    pub idle_timeout: Option<String>,
}

impl JobEnv {
    /// The Job's variables, looked up in the process environment: a run's one read of them.
    pub fn read(lookup: &dyn Fn(&str) -> Option<String>) -> JobEnv {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        JobEnv {
            playbook: get("RUNNER_PLAYBOOK"),
            role: get("RUNNER_ROLE"),
            cmdline: get("RUNNER_CMDLINE"),
            extra_vars: get("RUNNER_EXTRA_VARS"),
            inventory: get("RUNNER_INVENTORY"),
            job_timeout: get("RUNNER_JOB_TIMEOUT"),
            idle_timeout: get("RUNNER_IDLE_TIMEOUT"),
        }
    }

    /// The run's limits: the job and idle timeouts in whole seconds (unset: upstream's 3600
    /// and 600; 0: no limit), and `grace` between the first SIGTERM and SIGKILL.
    pub fn limits(&self, grace: Duration) -> Result<Limits, JobError> {
        Ok(Limits {
            job: seconds("RUNNER_JOB_TIMEOUT", self.job_timeout.as_deref(), 3600)?,
            idle: seconds("RUNNER_IDLE_TIMEOUT", self.idle_timeout.as_deref(), 600)?,
            grace,
        })
    }
}

/// A timeout variable's value, `default` when unset; `None` when 0 (no limit).
fn seconds(name: &'static str, given: Option<&str>, default: u64) -> Result<Option<Duration>, JobError> {
    let n = match given {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::env_of;

    #[test]
    fn environment_values_are_unwrapped_and_timeouts_checked() {
        let grace = Duration::from_secs(5);
        let e = JobEnv::read(&env_of(&[("RUNNER_CMDLINE", "\n\n\n"), ("RUNNER_JOB_TIMEOUT", " 60\n")]));
        let l = e.limits(grace).unwrap();
        assert_eq!(e.cmdline, None);
        assert_eq!(l.job, Some(Duration::from_secs(60)));
        assert_eq!(l.idle, Some(Duration::from_secs(600)));
        assert_eq!(l.grace, grace);
        let l = JobEnv::read(&env_of(&[("RUNNER_IDLE_TIMEOUT", "0")])).limits(grace).unwrap();
        assert_eq!(l.idle, None);
        let err =
            JobEnv::read(&env_of(&[("RUNNER_JOB_TIMEOUT", "1h")])).limits(grace).unwrap_err().to_string();
        assert!(err.starts_with("RUNNER_JOB_TIMEOUT: \"1h\""), "{err}");
        // Reading never fails: a bad timeout is reported once the summary has a place.
        let texts = JobEnv::read(&env_of(&[("RUNNER_JOB_TIMEOUT", "-5"), ("RUNNER_ROLE", "\nr\n")]));
        assert_eq!((texts.role.as_deref(), texts.job_timeout.as_deref()), (Some("\nr\n"), Some("-5")));
        assert!(texts.limits(grace).is_err());
    }
}
