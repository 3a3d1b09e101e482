//! Reading one ansible-runner `job_events/<counter>-<uuid>.json` file (or one written by the
//! project's callback plugin, which uses the same layout), and the plugin's notes.
//!
//! Invariant: events are read leniently (task results as borrowed raw JSON, read only for
//! failures), and a result Ansible hid with `no_log` is never read at all.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

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
    /// The play's shape, when its start event says (the callback plugin's do).
    pub play_shape: Option<PlayShape>,
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

/// How a play runs, as far as which hosts a failure can stop goes (the callback plugin notes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlayShape {
    /// The linear strategy: every host still in the play starts each task together, so a host
    /// a failure stopped was in the task that failed (the fold sees it stop). Under another
    /// strategy (`free`) a host can be stopped anywhere.
    pub linear: bool,
    /// `serial`: the play runs in batches, and a batch that fails stops the playbook before
    /// the later batches, whose hosts then never appear in the play.
    pub serial: bool,
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
    #[serde(default)]
    linear: Option<bool>,
    #[serde(default)]
    serial: Option<bool>,
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
        play_shape: d.linear.zip(d.serial).map(|(linear, serial)| PlayShape { linear, serial }),
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
    /// play uuid → its shape (a plugin older than the shape notes none).
    pub shapes: BTreeMap<String, PlayShape>,
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
        linear: Option<bool>,
        serial: Option<bool>,
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
                    if let (Some(linear), Some(serial)) = (l.linear, l.serial) {
                        notes.shapes.insert(p.clone(), PlayShape { linear, serial });
                    }
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
