//! The per-host results of one run: `edpm-summary.json`'s format (docs/ansibleee.md, "The
//! run summary"), and the result line for the job's log.
//!
//! Field names and meanings are a contract (readiness and people read the file): add fields,
//! never rename or repurpose them (bump [`SUMMARY_VERSION`] if that ever has to happen).
//!
//! Invariant: a host counts as failed (unreachable) only when its `failures` (`dark`) count
//! is above 0: Ansible's statistics can keep a host's key with a 0 count, and upstream's
//! summary helper, which counts keys, then lists such a host as failed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::outcome::Timeout;
use super::termination::TerminationMessage;
use super::text::one_line;

/// Version of the `edpm-summary.json` format.
pub const SUMMARY_VERSION: u32 = 1;
/// File name of the full summary inside `<artifacts>/<ident>/`.
pub const SUMMARY_FILE: &str = "edpm-summary.json";
/// `rc` when the run's return code is unknown (`--summarize-only` without ansible-runner's
/// `rc` file): no exit status is negative.
pub const RC_UNKNOWN: i32 = -1;
/// Failure messages are cut to this many characters.
pub const MESSAGE_LIMIT: usize = 256;

pub use super::outcome::RunStatus;

/// One host's outcome, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostStatus {
    /// No failure, not unreachable, not interrupted.
    #[default]
    Ok,
    /// At least one task failed on the host (`failures` > 0).
    Failed,
    /// Ansible could not reach the host (`dark` > 0) and no task failed on it.
    Unreachable,
    /// The play stopped while the host was still in it, although nothing failed on the host:
    /// another host's failure with `any_errors_fatal` (or `max_fail_percentage`), a timeout,
    /// or a signal; or, for a retry, the playbook ended before reaching the host.
    Interrupted,
}

/// The task that failed a host (or found it unreachable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedTask {
    /// The task's name as Ansible prints it.
    pub task: String,
    /// The module, e.g. `ansible.builtin.command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The play's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub play: Option<String>,
    /// Where the task is defined, `file:line`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The host was unreachable at this task rather than failing it.
    #[serde(default)]
    pub unreachable: bool,
    /// Ansible's message, one line, at most [`MESSAGE_LIMIT`] characters, secrets redacted.
    pub message: String,
}

/// One host's results: Ansible's statistics (from `playbook_on_stats`, or counted from the
/// events when the run ended before Ansible printed them) and what failed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostResult {
    #[serde(default)]
    pub status: HostStatus,
    #[serde(default)]
    pub ok: u64,
    #[serde(default)]
    pub changed: u64,
    #[serde(default)]
    pub failures: u64,
    /// Unreachable count (Ansible's name).
    #[serde(default)]
    pub dark: u64,
    #[serde(default)]
    pub skipped: u64,
    #[serde(default)]
    pub rescued: u64,
    #[serde(default)]
    pub ignored: u64,
    /// See [`HostStatus::Interrupted`]; may be true for a failed host too (`status` says
    /// failed then).
    #[serde(default)]
    pub interrupted: bool,
    /// The playbook ran to its end for this host: it is ok, and the run's `ranToEnd`, and the
    /// last play cannot have stopped it unseen (`fold` says when). Only such hosts are named in
    /// the termination message's `completedHostList`.
    #[serde(default)]
    pub completed: bool,
    /// The first failed task that was neither rescued nor ignored; for an unreachable host,
    /// the task at which it was found unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_task: Option<FailedTask>,
}

/// The full summary of one run, written to `<artifacts>/<ident>/edpm-summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// [`SUMMARY_VERSION`].
    pub version: u32,
    /// ansible-runner's ident: the Job's name (`-i`).
    pub ident: String,
    pub status: RunStatus,
    /// The run's exit status: the play's return code, or edpm-agent's for bad input;
    /// [`RC_UNKNOWN`] when it is unknown (`reason` says why).
    pub rc: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// One line for people: why the run ended so (bad input, timeout, signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Ansible printed its final statistics: the counts are Ansible's own.
    #[serde(default)]
    pub complete: bool,
    /// Ansible printed its statistics after the playbook's last play started (its place known
    /// from the callback plugin), and every event was read: the playbook was not stopped before
    /// its last play.
    #[serde(default)]
    pub ran_to_end: bool,
    /// Every host of the last play that ran failed, was unreachable or was stopped, and it was
    /// not the playbook's last play (or that is unknown): Ansible ran no play after it, so
    /// hosts only later plays name never ran, and are not listed here.
    #[serde(default)]
    pub stopped_early: bool,
    /// 1 for the first run of this ident, then one more per retry (earlier attempts are kept
    /// under `<artifacts>/<ident>/attempts/<n>/`).
    #[serde(default = "one")]
    pub attempt: u32,
    /// The hosts `--retry-failed` limited this attempt to; absent when it ran on every host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Vec<String>>,
    /// Time of the first and last event (Ansible's clock, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// Event files that could not be read or parsed (the counts may then be short).
    #[serde(default)]
    pub unreadable_events: u64,
    /// Every host the play touched, by inventory hostname.
    #[serde(default)]
    pub hosts: BTreeMap<String, HostResult>,
    /// Exactly what was written to the termination log.
    pub termination_message: TerminationMessage,
}

fn one() -> u32 {
    1
}

impl RunSummary {
    /// Hosts by status, sorted.
    pub fn hosts_with(&self, status: HostStatus) -> Vec<&str> {
        self.hosts.iter().filter(|(_, h)| h.status == status).map(|(n, _)| n.as_str()).collect()
    }

    /// The summary of a run that never started because of bad input.
    pub fn invalid(
        ident: &str,
        rc: i32,
        reason: &str,
        attempt: u32,
        limit: Option<Vec<String>>,
    ) -> RunSummary {
        RunSummary::not_run(ident, RunStatus::Invalid, rc, reason, attempt, limit)
    }

    /// The summary of a run whose play never started: no hosts, `reason` says why.
    pub fn not_run(
        ident: &str,
        status: RunStatus,
        rc: i32,
        reason: &str,
        attempt: u32,
        limit: Option<Vec<String>>,
    ) -> RunSummary {
        let mut s = RunSummary {
            version: SUMMARY_VERSION,
            ident: ident.to_string(),
            status,
            rc,
            timeout: None,
            reason: Some(one_line(reason)),
            complete: false,
            ran_to_end: false,
            stopped_early: false,
            attempt,
            limit,
            started: None,
            finished: None,
            unreadable_events: 0,
            hosts: BTreeMap::new(),
            termination_message: TerminationMessage::default(),
        };
        s.termination_message = TerminationMessage::from_summary(&s);
        s
    }
}

/// The result for the job's log: a line of counts, then one line per host that failed or was
/// unreachable, with the task and the message. `written` says where the summary went.
/// Text from the play (host and task names, messages) has its control characters escaped
/// (`excerpt::printable`): a host named with ESC or CR must not rewrite the job's log.
pub fn describe(s: &RunSummary, written: &str) -> String {
    use crate::excerpt::printable;
    use HostStatus as H;
    let rc = if s.rc == RC_UNKNOWN { "unknown".to_string() } else { s.rc.to_string() };
    let mut line = format!("edpm-agent: {} (rc {rc}): {} host(s)", s.status.as_str(), s.hosts.len());
    for (label, st) in
        [("failed", H::Failed), ("unreachable", H::Unreachable), ("interrupted", H::Interrupted)]
    {
        let hosts = s.hosts_with(st);
        if !hosts.is_empty() {
            let more = hosts.len().saturating_sub(10);
            let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
            let shown: Vec<_> = hosts[..hosts.len().min(10)].iter().map(|h| printable(h)).collect();
            line.push_str(&format!(", {label} {} ({}{tail})", hosts.len(), shown.join(", ")));
        }
    }
    if let Some(r) = &s.reason {
        line.push_str(&format!("; {}", printable(r)));
    }
    line.push_str(&printable(written));
    for (host, h) in &s.hosts {
        if let Some(t) = &h.failed_task {
            let what = if t.unreachable { "unreachable at" } else { "failed at" };
            let (host, task, message) = (printable(host), printable(&t.task), printable(&t.message));
            line.push_str(&format!("\nedpm-agent: {host}: {what} task \"{task}\": {message}"));
        }
    }
    line.push('\n');
    line
}

impl TerminationMessage {
    /// The message for `summary`: counts over every host, lists shortened (from the end, the
    /// longer list first) until the compact JSON fits in [`TERMINATION_MESSAGE_LIMIT`] bytes.
    pub fn from_summary(summary: &RunSummary) -> TerminationMessage {
        let failed: Vec<String> =
            summary.hosts.iter().filter(|(_, h)| h.failures > 0).map(|(n, _)| n.clone()).collect();
        let unreachable: Vec<String> =
            summary.hosts.iter().filter(|(_, h)| h.dark > 0).map(|(n, _)| n.clone()).collect();
        let impacted = summary.hosts.values().filter(|h| h.failures > 0 || h.dark > 0).count() as u64;
        let total = summary.hosts.len() as u64;
        let percent = (impacted * 100 + total / 2).checked_div(total).unwrap_or(0);
        let mut m = TerminationMessage {
            failed_hosts: failed.len() as u64,
            unreachable_hosts: unreachable.len() as u64,
            failed_host_list: failed,
            unreachable_host_list: unreachable,
            failure_percent: percent,
            rc: summary.rc,
            status: summary.status,
            total_hosts: total,
            truncated: false,
            ..TerminationMessage::default()
        };
        // Failed hosts' reasons first, then the unreachable ones'.
        let mut reasons: Vec<(String, String)> = Vec::new();
        for unreachable in [false, true] {
            reasons.extend(summary.hosts.iter().filter_map(|(host, h)| {
                let t = h.failed_task.as_ref().filter(|t| t.unreachable == unreachable)?;
                (h.failures > 0 || h.dark > 0).then(|| (host.clone(), t.reason()))
            }));
        }
        let first_cap = m.fit_keeping_first(reasons.first(), reasons.len());
        // A run that succeeded completed every host: the list would say nothing.
        if summary.status != RunStatus::Successful {
            let completed: Vec<String> =
                summary.hosts.iter().filter(|(_, h)| h.completed).map(|(n, _)| n.clone()).collect();
            m.add_completed(&completed);
        }
        m.add_host_failures(&reasons, first_cap);
        m
    }
}

impl FailedTask {
    /// One line for the cluster: `Task (role/tasks/file.yml:line): message`; the path from
    /// the role's name on, else from the project directory (`/runner/project/` in the Job),
    /// else the file's last three parts.
    pub fn reason(&self) -> String {
        let place = self.path.as_deref().map(|p| {
            let short = match (p.rfind("/roles/"), p.rfind("/project/")) {
                (Some(i), _) => p[i + "/roles/".len()..].to_string(),
                (None, Some(i)) => p[i + "/project/".len()..].to_string(),
                (None, None) => {
                    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
                    parts[parts.len().saturating_sub(3)..].join("/")
                }
            };
            format!(" ({short})")
        });
        format!("{}{}: {}", self.task, place.unwrap_or_default(), self.message)
    }
}
