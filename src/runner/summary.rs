//! Per-host results of one Ansible run, and what edpm-agent reports from them.
//!
//! - [`parse_event`] reads one ansible-runner `job_events/<counter>-<uuid>.json` file (or one
//!   written by the project's callback plugin, which uses the same layout);
//! - [`Fold`] folds the events, in counter order, into per-host results;
//! - [`RunSummary`] is the full summary `run` writes to `<artifacts>/<ident>/edpm-summary.json`
//!   (format documented in README, "The run summary");
//! - [`TerminationMessage`] is upstream's summary for `/dev/termination-log`, which
//!   openstack-operator parses, kept within Kubernetes' 4096-byte limit;
//! - [`retry_plan`] picks the hosts `run --retry-failed` runs on from the previous summary;
//! - [`Redactor`] keeps secrets out of failure messages.
//!
//! Pure: bytes and plain values in, plain values out; no I/O, no clock. The readiness work
//! reads `edpm-summary.json` through these types, so field names and meanings are a contract:
//! add fields, never rename or repurpose them (bump [`SUMMARY_VERSION`] if that ever has to
//! happen).
//!
//! Invariants:
//! - a host counts as failed (unreachable) only when its `failures` (`dark`) count is above 0:
//!   Ansible's statistics can keep a host's key with a 0 count, and upstream's summary
//!   helper, which counts keys, then lists such a host as failed;
//! - failure messages are redacted before they are cut to [`MESSAGE_LIMIT`] characters, and
//!   a result Ansible hid with `no_log` is never read at all;
//! - the termination message never exceeds [`TERMINATION_MESSAGE_LIMIT`] bytes: host lists are
//!   shortened (and `truncated` set), counts never are.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Version of the `edpm-summary.json` format.
pub const SUMMARY_VERSION: u32 = 1;
/// File name of the full summary inside `<artifacts>/<ident>/`.
pub const SUMMARY_FILE: &str = "edpm-summary.json";
/// Kubernetes keeps at most this many bytes of a container's termination message.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;
/// Failure messages are cut to this many characters.
pub const MESSAGE_LIMIT: usize = 256;

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

/// Which limit a timed-out run hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timeout {
    /// `RUNNER_JOB_TIMEOUT`: the whole run took too long.
    Job,
    /// `RUNNER_IDLE_TIMEOUT`: the play printed nothing for too long.
    Idle,
}

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
    /// The run's exit status: the play's return code, or edpm-agent's for bad input.
    pub rc: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// One line for people: why the run ended so (bad input, timeout, signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Ansible printed its final statistics: the counts are Ansible's own.
    #[serde(default)]
    pub complete: bool,
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

/// Upstream's summary for the termination log, as edpm-ansible's `write_runner_summary.py`
/// writes it, plus `rc`, `status` and `truncated`. Field order is the sorted key order, so the
/// compact serialization is the compact JSON with sorted keys upstream writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminationMessage {
    #[serde(rename = "failedHostList")]
    pub failed_host_list: Vec<String>,
    #[serde(rename = "failedHosts")]
    pub failed_hosts: u64,
    /// (failed ∪ unreachable) × 100 / total, rounded half up.
    #[serde(rename = "failurePercent")]
    pub failure_percent: u64,
    pub rc: i32,
    pub status: RunStatus,
    #[serde(rename = "totalHosts")]
    pub total_hosts: u64,
    /// A host list was shortened to stay within [`TERMINATION_MESSAGE_LIMIT`].
    pub truncated: bool,
    #[serde(rename = "unreachableHostList")]
    pub unreachable_host_list: Vec<String>,
    #[serde(rename = "unreachableHosts")]
    pub unreachable_hosts: u64,
}

impl Default for TerminationMessage {
    fn default() -> Self {
        TerminationMessage {
            failed_host_list: Vec::new(),
            failed_hosts: 0,
            failure_percent: 0,
            rc: 0,
            status: RunStatus::Invalid,
            total_hosts: 0,
            truncated: false,
            unreachable_host_list: Vec::new(),
            unreachable_hosts: 0,
        }
    }
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
        };
        m.fit();
        m
    }

    /// Compact JSON, keys sorted; never longer than [`TERMINATION_MESSAGE_LIMIT`] bytes when
    /// built by [`TerminationMessage::from_summary`].
    pub fn to_json(&self) -> String {
        // Plain strings, integers and booleans: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    fn fit(&mut self) {
        if self.to_json().len() <= TERMINATION_MESSAGE_LIMIT {
            return;
        }
        self.truncated = true;
        // Measure once, then drop names (each costs its JSON text plus a comma) from the end of
        // the longer list until the message fits.
        let mut len = self.to_json().len();
        let cost = |name: &str| serde_json::to_string(name).map_or(name.len() + 2, |s| s.len()) + 1;
        while len > TERMINATION_MESSAGE_LIMIT {
            let list = if self.failed_host_list.len() >= self.unreachable_host_list.len() {
                &mut self.failed_host_list
            } else {
                &mut self.unreachable_host_list
            };
            match list.pop() {
                // The last element has no comma after it, but the one before it then loses its
                // own; counting one comma per name is exact except for the list's first name.
                Some(name) => len -= cost(&name).min(len),
                None => break,
            }
        }
        // The estimate can be off by the one comma of a list that became empty; settle it by
        // measuring.
        while self.to_json().len() > TERMINATION_MESSAGE_LIMIT {
            if self.failed_host_list.pop().is_none() && self.unreachable_host_list.pop().is_none() {
                break;
            }
        }
    }
}

/// The kinds of event the fold reads; every other kind is [`EventKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventKind {
    PlayStart,
    /// A task, handler or cleanup task starts (for every host in the play at once, with the
    /// linear strategy).
    TaskStart,
    /// A task starts on one host.
    HostStart,
    Ok,
    Failed,
    Skipped,
    Unreachable,
    Stats,
    #[default]
    Other,
}

/// Ansible's final statistics: host → count, per counter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub processed: BTreeMap<String, u64>,
    pub ok: BTreeMap<String, u64>,
    pub changed: BTreeMap<String, u64>,
    pub failures: BTreeMap<String, u64>,
    pub dark: BTreeMap<String, u64>,
    pub skipped: BTreeMap<String, u64>,
    pub rescued: BTreeMap<String, u64>,
    pub ignored: BTreeMap<String, u64>,
}

/// What a failure event says, before redaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failure {
    /// The result was hidden with `no_log`: nothing of it was read.
    pub hidden: bool,
    /// Ansible's message plus the last line of the command's stderr, raw (bounded).
    pub text: String,
}

/// One event, reduced to what the fold needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    pub counter: u64,
    pub kind: EventKind,
    pub created: Option<String>,
    pub host: Option<String>,
    pub play: Option<String>,
    pub play_uuid: Option<String>,
    /// The play's index and the number of plays in the playbook (the callback plugin's play
    /// start events carry them).
    pub play_position: Option<(u64, u64)>,
    pub task: Option<String>,
    pub task_uuid: Option<String>,
    pub action: Option<String>,
    pub path: Option<String>,
    pub ignore_errors: bool,
    /// Whether the failed task had `any_errors_fatal`, when the event says so (the project's
    /// callback plugin does; ansible-runner's events do not).
    pub any_errors_fatal: Option<bool>,
    pub changed: bool,
    pub failure: Option<Failure>,
    pub stats: Option<Stats>,
}

/// An event file that is not an event.
#[derive(Debug, Clone, thiserror::Error)]
#[error("not an ansible-runner event: {0}")]
pub struct EventError(String);

/// Raw text kept per failure, before redaction and cutting: enough for any message, bounded
/// so a task that prints megabytes cannot fill memory.
const RAW_TEXT_LIMIT: usize = 16 * 1024;

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(default)]
    counter: u64,
    #[serde(default, borrow)]
    created: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    event_data: Option<RawEventData<'a>>,
}

#[derive(Deserialize, Default)]
struct RawEventData<'a> {
    #[serde(default, borrow)]
    host: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    play: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    play_uuid: Option<Cow<'a, str>>,
    #[serde(default)]
    play_index: Option<u64>,
    #[serde(default)]
    play_count: Option<u64>,
    #[serde(default, borrow)]
    task: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    task_uuid: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    resolved_action: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    task_action: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    task_path: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    ignore_errors: Option<&'a RawValue>,
    #[serde(default, borrow)]
    any_errors_fatal: Option<&'a RawValue>,
    #[serde(default, borrow)]
    res: Option<RawRes<'a>>,
    #[serde(default, borrow)]
    processed: Option<&'a RawValue>,
    #[serde(default, borrow)]
    ok: Option<&'a RawValue>,
    #[serde(default, borrow)]
    changed: Option<&'a RawValue>,
    #[serde(default, borrow)]
    failures: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dark: Option<&'a RawValue>,
    #[serde(default, borrow)]
    skipped: Option<&'a RawValue>,
    #[serde(default, borrow)]
    rescued: Option<&'a RawValue>,
    #[serde(default, borrow)]
    ignored: Option<&'a RawValue>,
}

/// A task result (`res`). Every field is read leniently (any JSON type), since modules put
/// whatever they like there and one odd result must not make the whole event unreadable.
#[derive(Deserialize, Default)]
struct RawRes<'a> {
    #[serde(default, borrow)]
    changed: Option<&'a RawValue>,
    #[serde(default, borrow)]
    failed: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "_ansible_no_log")]
    no_log: Option<&'a RawValue>,
    #[serde(default, borrow)]
    censored: Option<&'a RawValue>,
    #[serde(default, borrow)]
    msg: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stderr: Option<&'a RawValue>,
    #[serde(default, borrow)]
    module_stderr: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stdout: Option<&'a RawValue>,
    #[serde(default, borrow)]
    rc: Option<&'a RawValue>,
    #[serde(default, borrow)]
    item: Option<&'a RawValue>,
    #[serde(default, borrow)]
    results: Option<Vec<RawRes<'a>>>,
}

fn truthy(v: Option<&RawValue>) -> bool {
    // Ansible's booleans, as JSON booleans or as the strings its templating leaves behind.
    matches!(v.map(|r| r.get().trim()), Some("true" | "\"True\"" | "\"true\"" | "\"yes\"" | "1"))
}

fn tri(v: Option<&RawValue>) -> Option<bool> {
    match v.map(|r| r.get().trim()) {
        None | Some("null") => None,
        Some(_) => Some(truthy(v)),
    }
}

/// A JSON value as text: strings unescaped, anything else as its JSON.
fn text_of(v: Option<&RawValue>) -> Option<String> {
    let raw = v?.get().trim();
    if raw == "null" {
        return None;
    }
    if raw.starts_with('"') {
        return serde_json::from_str::<String>(raw).ok();
    }
    Some(raw.to_string())
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

fn bounded(mut s: String) -> String {
    if s.len() > RAW_TEXT_LIMIT {
        let mut cut = RAW_TEXT_LIMIT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

impl RawRes<'_> {
    fn hidden(&self) -> bool {
        truthy(self.no_log) || self.censored.is_some()
    }

    /// Ansible's message, with the last line of stderr (or stdout) when the message alone
    /// ("non-zero return code", "MODULE FAILURE") does not say what went wrong.
    fn failure(&self) -> Failure {
        if self.hidden() {
            return Failure { hidden: true, text: String::new() };
        }
        // A loop: the first failed item says more than "One or more items failed".
        if let Some(items) = &self.results
            && let Some(item) = items.iter().find(|i| truthy(i.failed) || i.hidden())
        {
            let inner = item.failure();
            if inner.hidden {
                return inner;
            }
            let label = text_of(item.item).map(|i| format!("item {i}: ")).unwrap_or_default();
            return Failure { hidden: false, text: bounded(format!("{label}{}", inner.text)) };
        }
        let msg = text_of(self.msg).unwrap_or_default();
        let detail = [self.stderr, self.module_stderr, self.stdout]
            .into_iter()
            .filter_map(text_of)
            .find_map(|t| last_line(&t).map(str::to_string));
        let mut text = msg.clone();
        if let Some(d) = detail
            && !msg.contains(&d)
        {
            if let Some(rc) = text_of(self.rc).filter(|rc| rc != "0") {
                text.push_str(&format!(" (rc {rc})"));
            }
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&d);
        }
        Failure { hidden: false, text: bounded(text) }
    }
}

fn counts(v: Option<&RawValue>) -> BTreeMap<String, u64> {
    let Some(raw) = v else { return BTreeMap::new() };
    let Ok(map) = serde_json::from_str::<BTreeMap<String, serde_json::Value>>(raw.get()) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .map(|(host, n)| {
            let n = match n {
                serde_json::Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
                serde_json::Value::String(s) => s.trim().parse().ok(),
                serde_json::Value::Bool(b) => Some(u64::from(b)),
                _ => None,
            };
            (host, n.unwrap_or(0))
        })
        .collect()
}

fn owned(c: Option<Cow<'_, str>>) -> Option<String> {
    c.map(Cow::into_owned)
}

/// Parses one event file's bytes.
pub fn parse_event(bytes: &[u8]) -> Result<Event, EventError> {
    let raw: RawEvent = serde_json::from_slice(bytes).map_err(|e| EventError(e.to_string()))?;
    let kind = match raw.event.as_ref() {
        "playbook_on_play_start" => EventKind::PlayStart,
        "playbook_on_task_start" | "playbook_on_handler_task_start" | "playbook_on_cleanup_task_start" => {
            EventKind::TaskStart
        }
        "runner_on_start" => EventKind::HostStart,
        "runner_on_ok" => EventKind::Ok,
        "runner_on_failed" => EventKind::Failed,
        "runner_on_skipped" => EventKind::Skipped,
        "runner_on_unreachable" => EventKind::Unreachable,
        "playbook_on_stats" => EventKind::Stats,
        _ => EventKind::Other,
    };
    let d = raw.event_data.unwrap_or_default();
    let res = d.res.unwrap_or_default();
    let failure = matches!(kind, EventKind::Failed | EventKind::Unreachable).then(|| res.failure());
    let stats = (kind == EventKind::Stats).then(|| Stats {
        processed: counts(d.processed),
        ok: counts(d.ok),
        changed: counts(d.changed),
        failures: counts(d.failures),
        dark: counts(d.dark),
        skipped: counts(d.skipped),
        rescued: counts(d.rescued),
        ignored: counts(d.ignored),
    });
    Ok(Event {
        counter: raw.counter,
        kind,
        created: owned(raw.created),
        host: owned(d.host),
        play: owned(d.play),
        play_uuid: owned(d.play_uuid),
        play_position: d.play_index.zip(d.play_count),
        task: owned(d.task),
        task_uuid: owned(d.task_uuid),
        action: owned(d.resolved_action.or(d.task_action)),
        path: owned(d.task_path),
        ignore_errors: truthy(d.ignore_errors),
        any_errors_fatal: tri(d.any_errors_fatal),
        changed: truthy(res.changed),
        failure,
        stats,
    })
}

/// What the project's callback plugin notes under ansible-runner (`edpm-notes.jsonl`), whose
/// own events lack it: each play's place in the playbook, and whether a failure could stop
/// the play.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notes {
    /// (host, task uuid) → the failure could stop the play.
    pub fatality: BTreeMap<(String, String), bool>,
    /// play uuid → (index, number of plays in the playbook).
    pub plays: BTreeMap<String, (u64, u64)>,
}

/// Reads `edpm-notes.jsonl`; lines that are not notes are skipped.
pub fn parse_notes(text: &str) -> Notes {
    #[derive(Deserialize)]
    struct Line {
        kind: Option<String>,
        host: Option<String>,
        task_uuid: Option<String>,
        any_errors_fatal: Option<bool>,
        play_uuid: Option<String>,
        play_index: Option<u64>,
        play_count: Option<u64>,
    }
    let mut notes = Notes::default();
    for l in text.lines().filter_map(|l| serde_json::from_str::<Line>(l).ok()) {
        match l.kind.as_deref() {
            Some("failure") => {
                if let (Some(h), Some(t), Some(f)) = (l.host, l.task_uuid, l.any_errors_fatal) {
                    notes.fatality.insert((h, t), f);
                }
            }
            Some("play") => {
                if let (Some(p), Some(i), Some(n)) = (l.play_uuid, l.play_index, l.play_count) {
                    notes.plays.insert(p, (i, n));
                }
            }
            _ => {}
        }
    }
    notes
}

/// The counter of an event file name, `<counter>-<uuid>.json`; `None` for anything else
/// (ansible-runner's `<uuid>-partial.json`, temporary files).
pub fn event_file_counter(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".json")?;
    let (counter, uuid) = stem.split_once('-')?;
    if uuid.is_empty() || uuid.ends_with("partial") {
        return None;
    }
    counter.parse().ok()
}

#[derive(Debug, Clone)]
struct FailureRecord {
    task: Option<String>,
    action: Option<String>,
    play: Option<String>,
    path: Option<String>,
    unreachable: bool,
    failure: Failure,
}

#[derive(Debug, Clone, Default)]
struct HostAcc {
    ok: u64,
    changed: u64,
    failures: u64,
    dark: u64,
    skipped: u64,
    ignored: u64,
    /// Failures (not ignored) and unreachable results, in order.
    records: Vec<FailureRecord>,
}

/// The hosts seen in a play, and its (index, count) in the playbook when known.
type PlayHosts = (BTreeSet<String>, Option<(u64, u64)>);

/// Folds events, in counter order, into per-host results.
///
/// Interruption: when a host fails (or is unreachable) at a task, every other host in that
/// task becomes a suspect; a suspect that later shows up at another task was not stopped.
/// Those still suspected at the end were in the play when it stopped there
/// (`any_errors_fatal`, `max_fail_percentage`), or had nothing left to run (their last task
/// was the failing one): events alone cannot tell these apart, so both count as interrupted,
/// which errs towards running a host again. The project's callback plugin says whether a
/// failure could stop the play (in its events, or through [`Fold::set_fatality`]); when it
/// says no, nobody becomes a suspect, and when it says yes, Ansible itself counts the others
/// as failed (handlers do not run for them).
#[derive(Debug, Default)]
pub struct Fold {
    hosts: BTreeMap<String, HostAcc>,
    stats: Option<Stats>,
    play: Option<String>,
    task_uuid: Option<String>,
    /// Hosts that started the current task.
    started: BTreeSet<String>,
    /// The last task at which a failure may have stopped the play.
    suspect_task: Option<Option<String>>,
    /// Suspects, with the task they were last seen at.
    suspects: BTreeMap<String, Option<String>>,
    notes: Notes,
    /// Hosts seen in the current play, and its place in the playbook when known.
    play_hosts: BTreeSet<String>,
    play_position: Option<(u64, u64)>,
    /// The same for the last play that had hosts, once another play started.
    last_play: Option<PlayHosts>,
    first_created: Option<String>,
    last_created: Option<String>,
    unreadable: u64,
}

impl Fold {
    pub fn new() -> Fold {
        Fold::default()
    }

    /// Whether any host failed or was unreachable so far (a message will need redaction).
    pub fn has_failures(&self) -> bool {
        self.hosts.values().any(|h| !h.records.is_empty())
    }

    /// An event file that could not be read or parsed.
    pub fn unreadable(&mut self) {
        self.unreadable += 1;
    }

    /// The callback plugin's notes, for events that do not carry those facts.
    pub fn set_notes(&mut self, notes: Notes) {
        self.notes = notes;
    }

    pub fn push(&mut self, mut ev: Event) {
        if ev.any_errors_fatal.is_none()
            && matches!(ev.kind, EventKind::Failed | EventKind::Unreachable)
            && let (Some(h), Some(t)) = (&ev.host, &ev.task_uuid)
        {
            ev.any_errors_fatal = self.notes.fatality.get(&(h.clone(), t.clone())).copied();
        }
        if let Some(c) = ev.created {
            if self.first_created.is_none() {
                self.first_created = Some(c.clone());
            }
            self.last_created = Some(c);
        }
        let kind = ev.kind;
        // The task a host event belongs to: its own, else the last one announced.
        let task = ev.task_uuid.clone().or_else(|| self.task_uuid.clone());
        if let Some(h) = &ev.host
            && matches!(
                kind,
                EventKind::HostStart
                    | EventKind::Ok
                    | EventKind::Skipped
                    | EventKind::Failed
                    | EventKind::Unreachable
            )
        {
            if !self.play_hosts.contains(h) {
                self.play_hosts.insert(h.clone());
            }
            match self.suspects.get(h) {
                Some(at) if *at != task => {
                    self.suspects.remove(h);
                }
                None if self.suspect_task.as_ref() == Some(&task) => {
                    self.suspects.insert(h.clone(), task.clone());
                }
                _ => {}
            }
        }
        match kind {
            EventKind::PlayStart => {
                if !self.play_hosts.is_empty() {
                    self.last_play = Some((std::mem::take(&mut self.play_hosts), self.play_position));
                }
                self.play_position = ev
                    .play_position
                    .or_else(|| ev.play_uuid.as_ref().and_then(|u| self.notes.plays.get(u).copied()));
                self.play = ev.play;
                self.task_uuid = None;
                self.started.clear();
            }
            EventKind::TaskStart => {
                if ev.task_uuid.is_none() || ev.task_uuid != self.task_uuid {
                    self.task_uuid = ev.task_uuid;
                    self.started.clear();
                }
            }
            EventKind::HostStart => {
                if let Some(h) = ev.host {
                    self.hosts.entry(h.clone()).or_default();
                    self.started.insert(h);
                }
            }
            EventKind::Ok | EventKind::Skipped | EventKind::Failed | EventKind::Unreachable => {
                let Some(host) = ev.host else { return };
                let acc = self.hosts.entry(host.clone()).or_default();
                match kind {
                    EventKind::Ok => {
                        acc.ok += 1;
                        acc.changed += u64::from(ev.changed);
                    }
                    EventKind::Skipped => acc.skipped += 1,
                    EventKind::Failed if ev.ignore_errors => {
                        // Ansible counts an ignored failure as ok and as ignored.
                        acc.ok += 1;
                        acc.ignored += 1;
                        acc.changed += u64::from(ev.changed);
                    }
                    _ => {
                        let unreachable = kind == EventKind::Unreachable;
                        if unreachable {
                            acc.dark += 1;
                        } else {
                            acc.failures += 1;
                        }
                        acc.records.push(FailureRecord {
                            task: ev.task,
                            action: ev.action,
                            play: ev.play.or_else(|| self.play.clone()),
                            path: ev.path,
                            unreachable,
                            failure: ev.failure.unwrap_or_default(),
                        });
                        // A failure the plugin knows was not fatal cannot have stopped the play.
                        if ev.any_errors_fatal != Some(false) {
                            for h in self.started.iter().chain(std::iter::once(&host)) {
                                self.suspects.entry(h.clone()).or_insert_with(|| task.clone());
                            }
                            self.suspect_task = Some(task);
                        }
                    }
                }
            }
            EventKind::Stats => self.stats = ev.stats,
            EventKind::Other => {}
        }
    }

    /// The summary. `facts` are what the shell knows about the run; `redactor` cleans the
    /// failure messages.
    pub fn finish(self, facts: RunFacts, redactor: &Redactor) -> RunSummary {
        let complete = self.stats.is_some();
        let mut names: BTreeSet<String> = self.hosts.keys().cloned().collect();
        // Hosts the attempt was limited to that no event mentions: the playbook ended before
        // reaching them.
        let unreached: BTreeSet<String> =
            facts.limit.iter().flatten().filter(|h| !names.contains(*h)).cloned().collect();
        if let Some(s) = &self.stats {
            for m in
                [&s.processed, &s.ok, &s.changed, &s.failures, &s.dark, &s.skipped, &s.rescued, &s.ignored]
            {
                names.extend(m.keys().cloned());
            }
        }
        let mut hosts = BTreeMap::new();
        for name in names.into_iter().chain(unreached.iter().cloned()) {
            let acc = self.hosts.get(&name).cloned().unwrap_or_default();
            let mut r = match &self.stats {
                Some(s) => {
                    let get = |m: &BTreeMap<String, u64>| m.get(&name).copied().unwrap_or(0);
                    HostResult {
                        ok: get(&s.ok),
                        changed: get(&s.changed),
                        failures: get(&s.failures),
                        dark: get(&s.dark),
                        skipped: get(&s.skipped),
                        rescued: get(&s.rescued),
                        ignored: get(&s.ignored),
                        ..HostResult::default()
                    }
                }
                None => HostResult {
                    ok: acc.ok,
                    changed: acc.changed,
                    failures: acc.failures,
                    dark: acc.dark,
                    skipped: acc.skipped,
                    ignored: acc.ignored,
                    ..HostResult::default()
                },
            };
            r.interrupted = if unreached.contains(&name) {
                true
            } else if complete {
                self.suspects.contains_key(&name) && r.failures == 0 && r.dark == 0
            } else {
                // The run ended before Ansible's statistics: it stopped under every host that
                // had not already failed.
                r.failures == 0 && r.dark == 0
            };
            r.failed_task = failed_task(&acc.records, &r, redactor);
            r.status = if r.failures > 0 {
                HostStatus::Failed
            } else if r.dark > 0 {
                HostStatus::Unreachable
            } else if r.interrupted {
                HostStatus::Interrupted
            } else {
                HostStatus::Ok
            };
            hosts.insert(name, r);
        }
        // Ansible ends the whole playbook when every host of a play has failed (any_errors_fatal
        // counts the others as failed too): later plays, and their hosts, never ran.
        let (last_hosts, position) = if self.play_hosts.is_empty() {
            self.last_play.unwrap_or_default()
        } else {
            (self.play_hosts, self.play_position)
        };
        let stopped_early = complete
            && !last_hosts.is_empty()
            && last_hosts
                .iter()
                .all(|h| hosts.get(h).is_some_and(|r: &HostResult| r.status != HostStatus::Ok))
            && position.is_none_or(|(i, n)| i + 1 < n);
        let mut summary = RunSummary {
            version: SUMMARY_VERSION,
            ident: facts.ident,
            status: facts.status,
            rc: facts.rc,
            timeout: facts.timeout,
            reason: facts.reason.map(|r| one_line(&r)),
            complete,
            stopped_early,
            attempt: facts.attempt,
            limit: facts.limit,
            started: self.first_created,
            finished: self.last_created,
            unreadable_events: self.unreadable,
            hosts,
            termination_message: TerminationMessage::default(),
        };
        summary.termination_message = TerminationMessage::from_summary(&summary);
        summary
    }
}

/// What the shell knows about a run that the events do not say.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub ident: String,
    pub status: RunStatus,
    pub rc: i32,
    pub timeout: Option<Timeout>,
    pub reason: Option<String>,
    pub attempt: u32,
    pub limit: Option<Vec<String>>,
}

/// Picks the record to report: for a failed host, the first failure that was neither rescued
/// nor ignored. Rescued failures come first (a failure that is not rescued ends the host's
/// play), so with `r` rescues the first real failure is the `r`-th failure record.
fn failed_task(records: &[FailureRecord], r: &HostResult, redactor: &Redactor) -> Option<FailedTask> {
    let record = if r.failures > 0 {
        let failures: Vec<&FailureRecord> = records.iter().filter(|f| !f.unreachable).collect();
        let at = (r.rescued as usize).min(failures.len().saturating_sub(1));
        failures.get(at).copied()
    } else if r.dark > 0 {
        records.iter().find(|f| f.unreachable)
    } else {
        None
    }?;
    let message = if record.failure.hidden {
        "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
            .to_string()
    } else {
        cut(&one_line(&redactor.redact(&strip_ansi(&record.failure.text))), MESSAGE_LIMIT)
    };
    Some(FailedTask {
        task: record.task.clone().unwrap_or_default(),
        action: record.action.clone(),
        play: record.play.clone(),
        path: record.path.clone(),
        unreachable: record.unreachable,
        message,
    })
}

/// Whitespace runs (newlines included) become one space; the ends are trimmed.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `limit` characters; a cut message ends with `…` (counted).
pub fn cut(s: &str, limit: usize) -> String {
    match s.char_indices().nth(limit) {
        None => s.to_string(),
        Some(_) => {
            let keep: String = s.chars().take(limit.saturating_sub(1)).collect();
            format!("{}…", keep.trim_end())
        }
    }
}

/// Removes terminal colour sequences (`ESC [ … letter`) that Ansible leaves in some messages.
fn strip_ansi(s: &str) -> Cow<'_, str> {
    if !s.contains('\u{1b}') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for n in chars.by_ref() {
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c != '\u{1b}' {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

pub use crate::redact::{MASK, Redactor, secret_values};

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

/// Characters that make a host name mean something else in an Ansible limit pattern.
fn pattern_safe(host: &str) -> bool {
    !host.is_empty()
        && !host.starts_with(['~', '!', '&', '@'])
        && !host.contains([',', ':', '*', '?', '[', ']', '\n'])
}

fn list_for_people(hosts: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut s = hosts.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if hosts.len() > SHOWN {
        s.push_str(&format!(" and {} more", hosts.len() - SHOWN));
    }
    s
}

/// Which hosts `run --retry-failed` runs on, given the previous attempt's summary:
/// its failed ∪ unreachable ∪ interrupted hosts when that attempt ran to its end; the same
/// hosts as that attempt (every host, unless it was itself limited) when it did not finish,
/// never started, or left nothing to retry; every host without a previous summary.
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
                "--retry-failed: host name {bad:?} cannot be used in an Ansible limit; running on every host"
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn ev(v: serde_json::Value) -> Event {
        parse_event(v.to_string().as_bytes()).unwrap()
    }

    fn task(uuid: &str, name: &str) -> serde_json::Value {
        json!({"event": "playbook_on_task_start", "event_data": {"task": name, "task_uuid": uuid, "play": "p"}})
    }

    fn on(kind: &str, host: &str, uuid: &str, name: &str, res: serde_json::Value) -> serde_json::Value {
        json!({"event": kind, "event_data": {"host": host, "task": name, "task_uuid": uuid, "play": "p",
               "resolved_action": "ansible.builtin.command", "task_path": "/p/site.yml:4", "res": res}})
    }

    fn facts(status: RunStatus, rc: i32) -> RunFacts {
        RunFacts { ident: "job".into(), status, rc, timeout: None, reason: None, attempt: 1, limit: None }
    }

    fn stats(v: serde_json::Value) -> serde_json::Value {
        json!({"event": "playbook_on_stats", "event_data": v})
    }

    fn fold(events: Vec<serde_json::Value>) -> Fold {
        let mut f = Fold::new();
        for e in events {
            f.push(ev(e));
        }
        f
    }

    /// An any_errors_fatal play: b fails at task 2, so a and c stop with it; d had finished
    /// in an earlier play and is not interrupted.
    fn fatal_play() -> Vec<serde_json::Value> {
        vec![
            json!({"event": "playbook_on_play_start", "event_data": {"play": "first", "play_index": 0, "play_count": 2}}),
            task("t0", "d only"),
            on("runner_on_start", "d", "t0", "d only", json!(null)),
            on("runner_on_ok", "d", "t0", "d only", json!({"changed": true})),
            json!({"event": "playbook_on_play_start", "event_data": {"play": "p", "play_uuid": "p2"}}),
            task("t1", "ping"),
            on("runner_on_start", "a", "t1", "ping", json!(null)),
            on("runner_on_start", "b", "t1", "ping", json!(null)),
            on("runner_on_start", "c", "t1", "ping", json!(null)),
            on("runner_on_ok", "a", "t1", "ping", json!({})),
            on("runner_on_ok", "b", "t1", "ping", json!({})),
            on("runner_on_ok", "c", "t1", "ping", json!({})),
            task("t2", "fail on b"),
            on("runner_on_start", "a", "t2", "fail on b", json!(null)),
            on("runner_on_start", "b", "t2", "fail on b", json!(null)),
            on("runner_on_start", "c", "t2", "fail on b", json!(null)),
            on("runner_on_skipped", "a", "t2", "fail on b", json!({})),
            on(
                "runner_on_failed",
                "b",
                "t2",
                "fail on b",
                json!({"msg": "non-zero return code", "rc": 1, "stderr": "warning\nno such file: /etc/x\n", "changed": true}),
            ),
            on("runner_on_skipped", "c", "t2", "fail on b", json!({})),
            stats(
                json!({"processed": {"a": 1, "b": 1, "c": 1, "d": 1}, "ok": {"a": 1, "b": 1, "c": 1, "d": 1},
                         "failures": {"b": 1}, "skipped": {"a": 1, "c": 1}, "changed": {"d": 1, "b": 0}, "dark": {}}),
            ),
        ]
    }

    /// `fatal_play` folded with the plugin's note that "p" is the playbook's last play.
    fn fatal_summary() -> RunSummary {
        let mut f = Fold::new();
        f.set_notes(parse_notes(r#"{"kind": "play", "play_uuid": "p2", "play_index": 1, "play_count": 2}"#));
        fatal_play().into_iter().for_each(|e| f.push(ev(e)));
        f.finish(facts(RunStatus::Failed, 2), &Redactor::default())
    }

    #[test]
    fn any_errors_fatal_interrupts_the_hosts_still_in_the_play() {
        let s = fatal_summary();
        assert!(!s.stopped_early);
        assert!(s.complete);
        assert_eq!(s.hosts_with(HostStatus::Failed), ["b"]);
        assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "c"]);
        assert_eq!(s.hosts_with(HostStatus::Ok), ["d"]);
        let b = &s.hosts["b"];
        assert_eq!((b.ok, b.failures, b.changed), (1, 1, 0));
        let t = b.failed_task.as_ref().unwrap();
        assert_eq!(t.task, "fail on b");
        assert_eq!(t.play.as_deref(), Some("p"));
        assert_eq!(t.path.as_deref(), Some("/p/site.yml:4"));
        assert_eq!(t.message, "non-zero return code (rc 1): no such file: /etc/x");
        assert_eq!(
            s.termination_message.to_json(),
            r#"{"failedHostList":["b"],"failedHosts":1,"failurePercent":25,"rc":2,"status":"failed","totalHosts":4,"truncated":false,"unreachableHostList":[],"unreachableHosts":0}"#
        );
    }

    #[test]
    fn a_play_that_goes_on_after_a_failure_interrupts_nobody() {
        let mut events = fatal_play();
        let stats_event = events.pop().unwrap();
        events.push(task("t3", "after"));
        for h in ["a", "c"] {
            events.push(on("runner_on_start", h, "t3", "after", json!(null)));
            events.push(on("runner_on_ok", h, "t3", "after", json!({})));
        }
        events.push(stats_event);
        let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        assert!(s.hosts_with(HostStatus::Interrupted).is_empty());
    }

    #[test]
    fn a_playbook_that_ends_before_its_last_play_stopped_early() {
        // Without the plugin's note, the stop in play "p" may have skipped later plays.
        let s = fold(fatal_play()).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        assert!(s.stopped_early);
        assert_eq!(retry_plan(Some(&s)).scope, RetryScope::Everything);
        assert!(
            retry_plan(Some(&s)).note.contains("stopped before its last play"),
            "{}",
            retry_plan(Some(&s)).note
        );
        // With it: "p" is the last play, nothing was skipped.
        assert!(!fatal_summary().stopped_early);
    }

    #[test]
    fn limited_hosts_no_event_mentions_were_not_reached() {
        let mut f = facts(RunStatus::Failed, 4);
        f.limit = Some(vec!["a".into(), "u".into(), "x".into()]);
        let events = vec![
            json!({"event": "playbook_on_play_start", "event_data": {"play": "first", "play_index": 0, "play_count": 2}}),
            task("t1", "ping"),
            on("runner_on_unreachable", "u", "t1", "ping", json!({"msg": "refused"})),
            stats(json!({"processed": {"u": 1}, "dark": {"u": 1}})),
        ];
        let s = fold(events).finish(f, &Redactor::default());
        assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "x"]);
        assert_eq!(s.hosts_with(HostStatus::Unreachable), ["u"]);
        assert!(s.stopped_early);
        let plan = retry_plan(Some(&s));
        assert_eq!(plan.scope, RetryScope::Hosts(vec!["a".into(), "u".into(), "x".into()]));
    }

    #[test]
    fn a_later_play_without_hosts_does_not_undo_the_stop() {
        // What ansible-core 2.19 sends after any_errors_fatal stops a play that another play
        // follows: the next play starts with no host left to run.
        let mut events = fatal_play();
        let stats_event = events.pop().unwrap();
        events.push(json!({"event": "playbook_on_play_start", "event_data": {"play": "second"}}));
        events.push(stats_event);
        let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "c"]);
    }

    #[test]
    fn the_plugin_saying_not_fatal_interrupts_nobody() {
        let mut events = fatal_play();
        events[17]["event_data"]["any_errors_fatal"] = json!(false);
        let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        assert!(s.hosts_with(HostStatus::Interrupted).is_empty());
    }

    #[test]
    fn fatality_from_the_plugin_fills_events_that_lack_it() {
        let lines = concat!(
            "{\"kind\": \"failure\", \"host\": \"b\", \"task_uuid\": \"t2\", \"any_errors_fatal\": false}\n",
            "not json\n",
            "{\"kind\": \"play\", \"play_uuid\": \"p2\", \"play_index\": 1, \"play_count\": 2}\n",
        );
        let notes = parse_notes(lines);
        assert_eq!((notes.fatality.len(), notes.plays.get("p2")), (1, Some(&(1, 2))));
        let mut f = Fold::new();
        f.set_notes(notes);
        for e in fatal_play() {
            f.push(ev(e));
        }
        assert!(f.play_position.is_some(), "the play's place came from the notes");
        let s = f.finish(facts(RunStatus::Failed, 2), &Redactor::default());
        assert!(s.hosts_with(HostStatus::Interrupted).is_empty());
    }

    #[test]
    fn zero_counts_never_make_a_host_failed() {
        let s = fold(vec![stats(json!({"processed": {"a": 1, "b": 1}, "ok": {"a": 2, "b": 2},
                                          "failures": {"a": 0}, "dark": {"b": 0}}))])
        .finish(facts(RunStatus::Successful, 0), &Redactor::default());
        assert_eq!(s.hosts_with(HostStatus::Ok), ["a", "b"]);
        let m = &s.termination_message;
        assert_eq!((m.failed_hosts, m.unreachable_hosts, m.total_hosts, m.failure_percent), (0, 0, 2, 0));
    }

    #[test]
    fn a_run_cut_short_counts_events_and_interrupts_every_host_still_running() {
        let mut events = fatal_play();
        events.truncate(17); // up to c's start of task 2, b's failure not yet seen
        let s = fold(events).finish(facts(RunStatus::Canceled, 254), &Redactor::default());
        assert!(!s.complete);
        assert_eq!(s.hosts_with(HostStatus::Interrupted), ["a", "b", "c", "d"]);
        assert_eq!((s.hosts["a"].ok, s.hosts["a"].skipped, s.hosts["d"].changed), (1, 1, 1));
        assert_eq!(s.termination_message.status, RunStatus::Canceled);
        assert_eq!(s.termination_message.total_hosts, 4);
    }

    #[test]
    fn rescued_and_ignored_failures_are_not_the_failed_task() {
        let events = vec![
            task("t1", "rescued"),
            on("runner_on_start", "a", "t1", "rescued", json!(null)),
            on("runner_on_failed", "a", "t1", "rescued", json!({"msg": "first"})),
            task("t2", "rescue task"),
            on("runner_on_ok", "a", "t2", "rescue task", json!({})),
            task("t3", "ignored"),
            json!({"event": "runner_on_failed", "event_data": {"host": "a", "task": "ignored", "task_uuid": "t3",
                   "ignore_errors": true, "res": {"msg": "ignored", "changed": true}}}),
            task("t4", "real"),
            on("runner_on_failed", "a", "t4", "real", json!({"msg": "the real one"})),
            stats(json!({"processed": {"a": 1}, "ok": {"a": 2}, "failures": {"a": 1}, "rescued": {"a": 1},
                         "ignored": {"a": 1}, "changed": {"a": 1}})),
        ];
        let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        let a = &s.hosts["a"];
        assert_eq!((a.rescued, a.ignored, a.failures), (1, 1, 1));
        assert_eq!(a.failed_task.as_ref().unwrap().task, "real");
        assert_eq!(a.failed_task.as_ref().unwrap().message, "the real one");
    }

    #[test]
    fn unreachable_hosts_report_where_and_why() {
        let events = vec![
            task("t1", "ping"),
            on("runner_on_start", "d", "t1", "ping", json!(null)),
            on(
                "runner_on_unreachable",
                "d",
                "t1",
                "ping",
                json!({"unreachable": true, "msg": "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.2 port 1: Connection refused"}),
            ),
            stats(json!({"processed": {"d": 1}, "dark": {"d": 1}})),
        ];
        let s = fold(events).finish(facts(RunStatus::Failed, 4), &Redactor::default());
        let d = &s.hosts["d"];
        assert_eq!(d.status, HostStatus::Unreachable);
        let t = d.failed_task.as_ref().unwrap();
        assert!(t.unreachable && t.message.starts_with("Failed to connect"), "{t:?}");
        assert_eq!(s.termination_message.unreachable_host_list, ["d"]);
        assert_eq!(s.termination_message.failure_percent, 100);
    }

    #[test]
    fn no_log_results_are_never_read() {
        let events = vec![
            on(
                "runner_on_failed",
                "a",
                "t1",
                "secret",
                json!({"censored": "the output has been hidden", "_ansible_no_log": true, "msg": "pw=hunter22"}),
            ),
            on(
                "runner_on_failed",
                "b",
                "t1",
                "loop",
                json!({"msg": "One or more items failed", "results": [
                    {"failed": false, "item": 1},
                    {"failed": true, "_ansible_no_log": true, "msg": "pw=hunter22"}]}),
            ),
        ];
        let s = fold(events).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        for h in ["a", "b"] {
            let m = &s.hosts[h].failed_task.as_ref().unwrap().message;
            assert!(m.contains("no_log") && !m.contains("hunter22"), "{m}");
        }
    }

    #[test]
    fn loop_failures_name_the_item() {
        let s = fold(vec![on(
            "runner_on_failed",
            "a",
            "t1",
            "loop",
            json!({"msg": "One or more items failed", "results": [
                {"failed": false, "item": "x"}, {"failed": true, "item": "nova", "msg": "no package nova"}]}),
        )])
        .finish(facts(RunStatus::Failed, 2), &Redactor::default());
        assert_eq!(s.hosts["a"].failed_task.as_ref().unwrap().message, "item nova: no package nova");
    }

    #[test]
    fn messages_are_redacted_then_cut() {
        let long = format!(
            "rabbit://nova:S3cr3tPw@rabbitmq.openstack.svc:5672/?ssl=1 password=hunter22 \"token\": \"abc\" cell-secret-value {}",
            "x".repeat(400)
        );
        let s = fold(vec![on("runner_on_failed", "a", "t1", "t", json!({"msg": long}))])
            .finish(facts(RunStatus::Failed, 2), &Redactor::new(["cell-secret-value".to_string()]));
        let m = &s.hosts["a"].failed_task.as_ref().unwrap().message;
        assert_eq!(m.chars().count(), MESSAGE_LIMIT);
        assert!(m.ends_with('…'));
        for leak in ["S3cr3tPw", "hunter22", "abc", "cell-secret-value"] {
            assert!(!m.contains(leak), "{leak} in {m}");
        }
        assert!(m.starts_with("rabbit://nova:********@rabbitmq.openstack.svc:5672/"), "{m}");
    }

    #[test]
    fn event_files_are_named_counter_uuid() {
        assert_eq!(event_file_counter("12-02fc0000-0001-bd3f.json"), Some(12));
        assert_eq!(event_file_counter("02fc0000-partial.json"), None);
        assert_eq!(event_file_counter("3-abc.json.tmp"), None);
        assert_eq!(event_file_counter("x-abc.json"), None);
    }

    #[test]
    fn odd_event_data_is_read_leniently() {
        let e = ev(
            json!({"event": "runner_on_failed", "counter": 3, "event_data": {"host": "a", "ignore_errors": null,
            "res": {"msg": {"nested": ["list"]}, "rc": "2", "stderr": 5, "changed": "yes"}}}),
        );
        assert_eq!(e.counter, 3);
        assert!(e.changed);
        assert_eq!(e.failure.unwrap().text, "{\"nested\":[\"list\"]} (rc 2): 5");
        assert!(parse_event(b"{\"no\": \"event\"}").is_err());
        let s = ev(stats(json!({"processed": {"a": 1}, "failures": {"a": "2", "b": 1.0, "c": null}})));
        let st = s.stats.unwrap();
        assert_eq!((st.failures["a"], st.failures["b"], st.failures["c"]), (2, 1, 0));
    }

    #[test]
    fn termination_message_keys_are_sorted() {
        let text = TerminationMessage::default().to_json();
        let v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = v.keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        // serde_json's Map keeps keys sorted; compare with the text's own order instead.
        let order: Vec<usize> = keys.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert_eq!(keys, sorted);
    }

    fn summary_with(failed: &[String], unreachable: &[String], ok: usize) -> RunSummary {
        let mut hosts = BTreeMap::new();
        for h in failed {
            hosts.insert(
                h.clone(),
                HostResult { failures: 1, status: HostStatus::Failed, ..Default::default() },
            );
        }
        for h in unreachable {
            hosts.insert(
                h.clone(),
                HostResult { dark: 1, status: HostStatus::Unreachable, ..Default::default() },
            );
        }
        for i in 0..ok {
            hosts.insert(format!("ok-{i}"), HostResult::default());
        }
        let mut s = RunSummary::invalid("job", 2, "x", 1, None);
        s.status = RunStatus::Failed;
        s.hosts = hosts;
        s
    }

    proptest! {
        // Generating hundreds of long names is slow in a debug build: fewer, still large, cases.
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn termination_message_fits_and_keeps_counts(
            failed in proptest::collection::btree_set("[a-z0-9.\\-é\"\\\\]{1,64}", 0..200),
            unreachable in proptest::collection::btree_set("u[a-z0-9.\\-]{1,64}", 0..200),
            ok in 0usize..50,
        ) {
            let failed: Vec<String> = failed.into_iter().map(|h| format!("f{h}")).collect();
            let unreachable: Vec<String> = unreachable.into_iter().collect();
            let s = summary_with(&failed, &unreachable, ok);
            let m = TerminationMessage::from_summary(&s);
            let text = m.to_json();
            prop_assert!(text.len() <= TERMINATION_MESSAGE_LIMIT);
            prop_assert_eq!(m.failed_hosts as usize, failed.len());
            prop_assert_eq!(m.unreachable_hosts as usize, unreachable.len());
            prop_assert_eq!(m.total_hosts as usize, failed.len() + unreachable.len() + ok);
            prop_assert!(failed.starts_with(&m.failed_host_list));
            prop_assert!(unreachable.starts_with(&m.unreachable_host_list));
            let full = m.failed_host_list.len() == failed.len() && m.unreachable_host_list.len() == unreachable.len();
            prop_assert_eq!(m.truncated, !full);
            let back: TerminationMessage = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back, m);
        }

        #[test]
        fn redacted_messages_never_hold_the_secret(secret in "[A-Za-z0-9+/]{6,40}", pad in "[ a-z:=]{0,300}") {
            let r = Redactor::new([secret.clone()]);
            let text = format!("{pad}{secret}{pad}");
            let m = cut(&one_line(&r.redact(&text)), MESSAGE_LIMIT);
            prop_assert!(!m.contains(&secret));
            prop_assert!(m.chars().count() <= MESSAGE_LIMIT);
        }
    }

    #[test]
    fn retry_picks_failed_unreachable_and_interrupted_hosts() {
        let mut s = fatal_summary();
        s.hosts.insert(
            "e".into(),
            HostResult { dark: 1, status: HostStatus::Unreachable, ..Default::default() },
        );
        let plan = retry_plan(Some(&s));
        assert_eq!(plan.scope, RetryScope::Hosts(vec!["a".into(), "b".into(), "c".into(), "e".into()]));
        assert!(
            plan.note.contains("attempt 1 ended failed") && plan.note.contains("a, b, c, e"),
            "{}",
            plan.note
        );
        assert!(
            plan.note.contains("failed (1), unreachable (1) or interrupted (2) host(s) of 5"),
            "{}",
            plan.note
        );

        assert_eq!(retry_plan(None).scope, RetryScope::Everything);

        let mut cut_short = s.clone();
        cut_short.complete = false;
        cut_short.limit = Some(vec!["a".into(), "b".into()]);
        let plan = retry_plan(Some(&cut_short));
        assert_eq!(plan.scope, RetryScope::Hosts(vec!["a".into(), "b".into()]));
        cut_short.limit = None;
        assert_eq!(retry_plan(Some(&cut_short)).scope, RetryScope::Everything);

        let invalid = RunSummary::invalid("job", 3, "bad", 2, None);
        assert_eq!(retry_plan(Some(&invalid)).scope, RetryScope::Everything);

        let mut odd = s.clone();
        odd.hosts.insert(
            "web[1]".into(),
            HostResult { failures: 1, status: HostStatus::Failed, ..Default::default() },
        );
        let plan = retry_plan(Some(&odd));
        assert_eq!(plan.scope, RetryScope::Everything);
        assert!(plan.note.contains("web[1]"), "{}", plan.note);
    }

    #[test]
    fn summaries_read_back_and_tolerate_unknown_fields() {
        let s = fold(fatal_play()).finish(facts(RunStatus::Failed, 2), &Redactor::default());
        let text = serde_json::to_string_pretty(&s).unwrap();
        let back: RunSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["somethingNew"] = json!(1);
        v["hosts"]["a"]["newCounter"] = json!(2);
        assert!(serde_json::from_value::<RunSummary>(v).is_ok());
    }

    #[test]
    fn cut_and_one_line() {
        assert_eq!(one_line("a\n  b\t c "), "a b c");
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("ééééé", 4), "ééé…");
        assert_eq!(strip_ansi("\u{1b}[0;31mred\u{1b}[0m"), "red");
    }
}
