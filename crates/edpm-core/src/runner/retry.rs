//! Which hosts `run --retry-failed` runs on, from the previous attempt's summary.

use super::summary::{HostStatus, RunStatus, RunSummary};

/// The hosts a retry runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryScope {
    /// Every host the job names (no `--limit` added).
    Everything,
    /// Only these hosts.
    Hosts(Vec<String>),
}

/// A retry's hosts, and the first output line that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPlan {
    pub scope: RetryScope,
    pub note: String,
}

/// Whether a host name reads back as itself from the limit file: no character that makes it
/// mean something else in an Ansible limit pattern, and nothing Ansible's reading of the file
/// changes (it opens it in text mode, so a CR ends a line too, and strips each line).
fn pattern_safe(host: &str) -> bool {
    // Python's str.isspace, which strip() uses: Unicode's white space and \x1c-\x1f.
    let py_space = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
    !host.is_empty()
        && !host.starts_with(['~', '!', '&', '@'])
        && !host.contains([',', ':', '*', '?', '[', ']', '\n', '\r'])
        && !host.starts_with(py_space)
        && !host.ends_with(py_space)
}

/// The first hosts, control characters escaped: the note is a line of the job's log.
fn list_for_people(hosts: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut s = hosts.iter().take(SHOWN).map(|h| crate::excerpt::printable(h)).collect::<Vec<_>>().join(", ");
    if hosts.len() > SHOWN {
        s.push_str(&format!(" and {} more", hosts.len() - SHOWN));
    }
    s
}

/// Which hosts `run --retry-failed` runs on, given the previous attempt's summary:
/// its failed ∪ unreachable ∪ interrupted hosts when that attempt ran to its end; the same
/// hosts as that attempt (every host, unless it was itself limited) when it did not finish,
/// never started, or left nothing to retry; every host without a previous summary.
#[allow(
    clippy::too_many_lines,
    reason = "one case per way the previous attempt ended, each with the note it gives"
)]
pub fn retry_plan(previous: Option<&RunSummary>) -> RetryPlan {
    let Some(prev) = previous else {
        return RetryPlan {
            scope: RetryScope::Everything,
            note: "--retry-failed: no earlier attempt recorded for this run; running on every host".into(),
        };
    };
    let same_scope = |why: &str| -> RetryPlan {
        match &prev.limit {
            Some(hosts) if !hosts.is_empty() => RetryPlan {
                scope: RetryScope::Hosts(hosts.clone()),
                note: format!(
                    "--retry-failed: attempt {} {why}; running again on the same {} host(s): {}",
                    prev.attempt,
                    hosts.len(),
                    list_for_people(hosts)
                ),
            },
            _ => RetryPlan {
                scope: RetryScope::Everything,
                note: format!("--retry-failed: attempt {} {why}; running on every host", prev.attempt),
            },
        }
    };
    if prev.status == RunStatus::Invalid {
        return same_scope("never started (invalid input)");
    }
    if !prev.complete {
        return same_scope(&format!("ended {} before Ansible's final statistics", prev.status.as_str()));
    }
    if prev.stopped_early {
        return same_scope(
            "stopped before its last play (every host of a play failed), so later plays never ran",
        );
    }
    let hosts: Vec<String> = prev
        .hosts
        .iter()
        .filter(|(_, h)| h.failures > 0 || h.dark > 0 || h.interrupted)
        .map(|(n, _)| n.clone())
        .collect();
    if hosts.is_empty() {
        return same_scope(&format!(
            "ended {} with no failed, unreachable or interrupted host",
            prev.status.as_str()
        ));
    }
    if let Some(bad) = hosts.iter().find(|h| !pattern_safe(h)) {
        return RetryPlan {
            scope: RetryScope::Everything,
            note: format!(
                "--retry-failed: host name {bad:?} cannot be used in an Ansible limit (a pattern character, a line break or white space at an end); running on every host"
            ),
        };
    }
    let n = |s: HostStatus| prev.hosts.values().filter(|h| h.status == s).count();
    RetryPlan {
        note: format!(
            "--retry-failed: attempt {} ended {}; running only on its {} failed ({}), unreachable ({}) or interrupted ({}) host(s) of {}: {}",
            prev.attempt,
            prev.status.as_str(),
            hosts.len(),
            n(HostStatus::Failed),
            n(HostStatus::Unreachable),
            n(HostStatus::Interrupted),
            prev.hosts.len(),
            list_for_people(&hosts)
        ),
        scope: RetryScope::Hosts(hosts),
    }
}
