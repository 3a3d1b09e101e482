//! lib-common's condition type and rules (`modules/common/condition`), exactly, so that our
//! conditions read like upstream's and tools written for one work on the other.
//!
//! - A condition is `type`, `status`, `severity` (`Error`, `Warning`, `Info` or empty),
//!   `lastTransitionTime` (UTC, whole seconds), `reason` and `message`; no observedGeneration,
//!   no heartbeat time.
//! - [`Conditions::set`] keeps the old `lastTransitionTime` unless status, severity, reason or
//!   message changed; a changed condition keeps a time it already carries (a mirrored one
//!   carries its source's), else gets `now`.
//! - The list is kept sorted: `Ready` first, then by type (byte order).
//! - [`Conditions::mirror`] picks by priority False/Error > False/Warning > False/Info >
//!   Unknown > True (> False without a severity, lib-common's `groupOrder` trap), the newest
//!   `lastTransitionTime` winning within a level, and on equal times the one later in list
//!   order (so the alphabetically greatest type, as Go's insertion sort leaves them). A True
//!   `Ready` in the list wins outright; a True result has reason `Ready`.
//! - [`Condition::is_error`]: False with reason `Error` or `BackoffLimitExceeded`, whatever the
//!   severity.
//!
//! Condition types are [`types`]; reasons are [`reasons`], and a condition is built from its
//! reason ([`Condition::because`]), which decides its status and severity.
//!
//! Pure: the time is always passed in.

pub mod reasons;
pub mod types;

use std::cmp::Ordering;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `Ready`: always first in the list.
pub use types::READY;

pub use reasons::Reason;

/// A point in time, in whole seconds (lib-common truncates to seconds), written as RFC 3339 UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub i64);

impl Time {
    pub fn from_unix(seconds: i64) -> Time {
        Time(seconds)
    }

    /// Parses an RFC 3339 time as the API server writes it; fractions are dropped.
    pub fn parse(s: &str) -> Option<Time> {
        s.parse::<jiff::Timestamp>().ok().map(|t| Time(t.as_second()))
    }

    pub fn seconds(self) -> i64 {
        self.0
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match jiff::Timestamp::from_second(self.0) {
            Ok(t) => write!(f, "{}", t.strftime("%Y-%m-%dT%H:%M:%SZ")),
            Err(_) => write!(f, "1970-01-01T00:00:00Z"),
        }
    }
}

impl Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
        let s = String::deserialize(d)?;
        Time::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 time: {s:?}")))
    }
}

impl JsonSchema for Time {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Time".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "date-time"})
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Status {
    True,
    False,
    Unknown,
}

/// lib-common's severity; empty for True and Unknown conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub enum Severity {
    Error,
    Warning,
    Info,
    #[default]
    #[serde(rename = "")]
    None,
}

impl Severity {
    fn is_none(&self) -> bool {
        *self == Severity::None
    }
}

/// One condition, lib-common's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Severity::is_none")]
    pub severity: Severity,
    /// Always written; a condition read without one (hand-written fixtures) has the epoch, the
    /// oldest time, so it never wins a Mirror tie.
    #[serde(default)]
    pub last_transition_time: Time,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// At most 32768 bytes, as metav1.Condition's message: a longer one is cut, with a marker.
    // Bounded when built, set, carried or written (`bound_message`, MAX_MESSAGE_BYTES).
    #[serde(default, skip_serializing_if = "String::is_empty", serialize_with = "serialize_bounded")]
    #[schemars(length(max = 32768))]
    pub message: String,
}

/// The longest condition message, in bytes: `metav1.Condition` validates `message` at 32768
/// (`maxLength: 32768`; the API server refuses a longer one in a type that uses it), and a
/// message of input (a 1 MiB image name from podman) must not make a 1 MiB status write.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// `message` cut to [`MAX_MESSAGE_BYTES`] on a character boundary, the cut marked with how
/// long the whole was: `… (cut: 1048600 bytes in all)`; unchanged when it fits.
pub fn bound_message(message: &mut String) {
    if message.len() <= MAX_MESSAGE_BYTES {
        return;
    }
    let marker = format!("… (cut: {} bytes in all)", message.len());
    let mut end = MAX_MESSAGE_BYTES - marker.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str(&marker);
}

fn serialize_bounded<S: serde::Serializer>(message: &str, s: S) -> Result<S::Ok, S::Error> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return s.serialize_str(message);
    }
    let mut m = message.to_string();
    bound_message(&mut m);
    s.serialize_str(&m)
}

impl Condition {
    /// lib-common `TrueCondition`: reason `Ready`, no severity.
    pub fn true_(type_: &str, message: impl Into<String>) -> Condition {
        Condition::because(type_, &reasons::READY, message)
    }

    /// A condition of `reason`, with the status and severity the reason is written with
    /// (lib-common's `TrueCondition`, `FalseCondition` and `UnknownCondition` in one).
    pub fn because(type_: &str, reason: &Reason, message: impl Into<String>) -> Condition {
        Condition::new(type_, reason.status, reason.severity(), reason.name, message)
    }

    fn new(
        type_: &str,
        status: Status,
        severity: Severity,
        reason: &str,
        message: impl Into<String>,
    ) -> Condition {
        let mut message = message.into();
        bound_message(&mut message);
        Condition {
            type_: type_.to_string(),
            status,
            severity,
            last_transition_time: Time(0),
            reason: reason.to_string(),
            message,
        }
    }

    /// The same condition under another type (`Mirror` copies everything but the type).
    pub fn as_type(&self, type_: &str) -> Condition {
        Condition { type_: type_.to_string(), ..self.clone() }
    }

    /// Whether the condition's reason is `reason`, whatever its status and severity.
    pub fn has_reason(&self, reason: &Reason) -> bool {
        self.reason == reason.name
    }

    /// lib-common `IsError`: False with reason `Error` or `BackoffLimitExceeded`.
    pub fn is_error(&self) -> bool {
        self.status == Status::False
            && (self.has_reason(&reasons::ERROR) || self.has_reason(&reasons::BACKOFF_LIMIT_EXCEEDED))
    }

    /// `True`, `False` or `Unknown`, for messages.
    pub fn status_word(&self) -> &'static str {
        match self.status {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    pub fn is_true(&self) -> bool {
        self.status == Status::True
    }

    /// Whether a change from `old` to `self` is a transition: status, severity, reason or
    /// message differ (lib-common compares all four; the time alone is never a change).
    pub fn differs_from(&self, old: &Condition) -> bool {
        self.status != old.status
            || self.severity != old.severity
            || self.reason != old.reason
            || self.message != old.message
    }

    /// How bad a reading is, for choosing among conflicting copies of one type: False is
    /// worse than Unknown, which is worse than True; among False, by severity (a False
    /// without severity is still False here, unlike in [`mirror`]'s ranking). Higher is worse.
    fn badness(&self) -> u8 {
        match (self.status, self.severity) {
            (Status::True, _) => 0,
            (Status::Unknown, _) => 1,
            (Status::False, Severity::None) => 2,
            (Status::False, Severity::Info) => 3,
            (Status::False, Severity::Warning) => 4,
            (Status::False, Severity::Error) => 5,
        }
    }

    /// `True Ready`, `False Error (Error)`: the condition's reading in a few words.
    pub fn reading(&self) -> String {
        match self.severity {
            Severity::None => format!("{} {}", self.status_word(), self.reason),
            s => format!("{} {} ({s:?})", self.status_word(), self.reason),
        }
    }

    /// Mirror priority (lib-common `groupOrder`): lower is more important. A False condition
    /// without a severity ranks below every True one, as upstream ranks it.
    pub fn level(&self) -> u8 {
        match (self.status, self.severity) {
            (Status::False, Severity::Error) => 0,
            (Status::False, Severity::Warning) => 1,
            (Status::False, Severity::Info) => 2,
            (Status::Unknown, _) => 3,
            (Status::True, _) => 4,
            (Status::False, Severity::None) => 5,
        }
    }
}

/// A condition list, kept in lib-common's order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Conditions(pub Vec<Condition>);

/// A list read from the cluster may hold a type twice (written by hand, or by an older
/// operator; the API server's map-list never does): its copies are put worst first, so that
/// [`Conditions::get`], which takes the first, reads the worst, and conflicting evidence never
/// reads better than its worst part. Done once, when read, not at every lookup.
impl<'de> Deserialize<'de> for Conditions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Conditions, D::Error> {
        Ok(Conditions::worst_first(Vec::deserialize(d)?))
    }
}

fn order(a: &Condition, b: &Condition) -> Ordering {
    match (a.type_ == READY, b.type_ == READY) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.type_.cmp(&b.type_),
    }
}

impl Conditions {
    /// The condition of `type_`: the first of the list, which is the worst when a list read
    /// from the cluster held the type twice (see [`Conditions::worst_first`];
    /// [`Conditions::conflicts`] names such a conflict).
    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.0.iter().find(|c| c.type_ == type_)
    }

    /// `list` with the copies of each type held more than once reordered worst first, in the
    /// places those copies held (everything else stays where it was).
    pub fn worst_first(mut list: Vec<Condition>) -> Conditions {
        let duplicated =
            |l: &[Condition]| l.iter().enumerate().any(|(i, c)| l[..i].iter().any(|p| p.type_ == c.type_));
        if !duplicated(&list) {
            return Conditions(list);
        }
        for i in 0..list.len() {
            let ty = list[i].type_.clone();
            if list[..i].iter().any(|p| p.type_ == ty) {
                continue;
            }
            let places: Vec<usize> = (i..list.len()).filter(|&j| list[j].type_ == ty).collect();
            if places.len() < 2 {
                continue;
            }
            let mut copies: Vec<Condition> = places.iter().map(|&j| list[j].clone()).collect();
            // Stable: among equally bad copies the list's order stays.
            copies.sort_by_key(|c| std::cmp::Reverse(c.badness()));
            for (&j, c) in places.iter().zip(copies) {
                list[j] = c;
            }
        }
        Conditions(list)
    }

    /// The same list with every message passed through the one redactor
    /// (`redact::scrub`): for conditions others wrote, read from the cluster.
    pub fn scrubbed(mut self) -> Conditions {
        for c in &mut self.0 {
            if let std::borrow::Cow::Owned(clean) = crate::redact::scrub(&c.message) {
                c.message = clean;
            }
        }
        self
    }

    /// The types this list holds more than once with different readings, each with its
    /// readings in list order (`True Ready`, `False Error`): what `explain` names as a conflict.
    pub fn conflicts(&self) -> Vec<(&str, Vec<String>)> {
        let mut out: Vec<(&str, Vec<String>)> = Vec::new();
        for (i, c) in self.0.iter().enumerate() {
            if self.0[..i].iter().any(|p| p.type_ == c.type_) {
                continue;
            }
            let same: Vec<&Condition> = self.0[i..].iter().filter(|x| x.type_ == c.type_).collect();
            if same.len() > 1 && same.iter().any(|x| x.differs_from(c)) {
                out.push((c.type_.as_str(), same.iter().map(|x| x.reading()).collect()));
            }
        }
        out
    }

    /// The conflict over `type_`, as one line for `explain`: `None` when the list holds it
    /// at most once (or every copy says the same).
    pub fn conflict_line(&self, type_: &str, place: &str) -> Option<String> {
        let (_, readings) = self.conflicts().into_iter().find(|(t, _)| *t == type_)?;
        Some(format!(
            "conflict: {place} holds {} {type_} conditions ({}); the worst counts",
            readings.len(),
            readings.join(", ")
        ))
    }

    /// lib-common `Set`: adds or replaces the condition of `c.type_`. Its
    /// `lastTransitionTime` is the old one when nothing but the time changed, else `now`.
    pub fn set(&mut self, mut c: Condition, now: Time) {
        bound_message(&mut c.message);
        match self.0.iter_mut().find(|x| x.type_ == c.type_) {
            Some(old) => {
                c.last_transition_time = if !c.differs_from(old) {
                    old.last_transition_time
                } else if c.last_transition_time == Time(0) {
                    now
                } else {
                    c.last_transition_time
                };
                *old = c;
            }
            None => {
                if c.last_transition_time == Time(0) {
                    c.last_transition_time = now;
                }
                self.0.push(c);
            }
        }
        self.0.sort_by(order);
    }

    /// lib-common `RestoreLastTransitionTimes` after a fresh computation: every condition that
    /// did not change against `previous` keeps its time; the others get `now`.
    pub fn carry_times(fresh: Vec<Condition>, previous: &Conditions, now: Time) -> Conditions {
        Conditions::carry_times_noting(fresh, previous, now).0
    }

    /// [`Conditions::carry_times`], also naming the types that got `now` because neither the
    /// computation nor `previous` gave them a time: when they changed was not observed, so a
    /// view must not say "since now" of them.
    pub fn carry_times_noting(
        fresh: Vec<Condition>,
        previous: &Conditions,
        now: Time,
    ) -> (Conditions, Vec<String>) {
        // Conditions the computation no longer produces are dropped, as a reset list drops them.
        let mut out = fresh;
        let mut stamped = Vec::new();
        for c in &mut out {
            // A message joined from several (or read from another writer) is bounded here,
            // before it is compared with what was stored (bounded when it was written).
            bound_message(&mut c.message);
            let old = previous.get(&c.type_);
            c.last_transition_time = match old {
                Some(o) if !c.differs_from(o) => o.last_transition_time,
                _ if c.last_transition_time == Time(0) => {
                    stamped.push(c.type_.clone());
                    now
                }
                _ => c.last_transition_time,
            };
        }
        out.sort_by(order);
        (Conditions(out), stamped)
    }

    /// lib-common `Mirror`: the most important condition of the list as `type_`; `None` when
    /// the list is empty.
    pub fn mirror(&self, type_: &str) -> Option<Condition> {
        mirror(self.0.iter(), type_)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Condition> {
        self.0.iter()
    }

    /// Equal apart from the transition times: what decides whether a write is needed.
    pub fn same_apart_from_times(&self, other: &Conditions) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|(a, b)| a.type_ == b.type_ && !a.differs_from(b))
    }
}

/// The condition [`mirror`] copies: a True `Ready` outright, else the highest priority level,
/// the newest within it, and on equal times the later one.
pub fn mirror_source<'a>(conds: impl Iterator<Item = &'a Condition>) -> Option<&'a Condition> {
    let mut best: Option<&Condition> = None;
    for c in conds {
        if c.type_ == READY && c.status == Status::True {
            return Some(c);
        }
        best = match best {
            None => Some(c),
            Some(b) if c.level() < b.level() => Some(c),
            Some(b) if c.level() == b.level() && c.last_transition_time >= b.last_transition_time => Some(c),
            keep => keep,
        };
    }
    best
}

/// lib-common `Mirror` over conditions in list order: a True `Ready` wins outright; else the
/// highest priority level, the newest within it, and on equal times the later one. The result
/// has the source's time; a True result has reason `Ready` and no severity.
pub fn mirror<'a>(conds: impl Iterator<Item = &'a Condition>, type_: &str) -> Option<Condition> {
    mirror_source(conds).map(|c| match c.status {
        Status::True => {
            Condition { reason: reasons::READY.name.into(), severity: Severity::None, ..c.as_type(type_) }
        }
        _ => c.as_type(type_),
    })
}

#[cfg(test)]
mod tests {
    use super::reasons::{BACKOFF_LIMIT_EXCEEDED, ERROR, INIT, REQUESTED};
    use super::*;

    fn t(s: i64) -> Time {
        Time(s)
    }

    #[test]
    fn a_message_is_bounded_at_32_kib_with_a_marker() {
        // A 1 MiB image name, with a multi-byte character across the cut.
        let huge = format!("container nova_compute runs {}é{}", "a".repeat(32_700), "b".repeat(1 << 20));
        let c = Condition::because("X", &ERROR, huge.clone());
        assert!(c.message.len() <= MAX_MESSAGE_BYTES, "{}", c.message.len());
        assert!(
            c.message.ends_with(&format!("… (cut: {} bytes in all)", huge.len())),
            "{}",
            &c.message[32_000..]
        );
        assert!(huge.starts_with(c.message.split('…').next().unwrap()));
        // Whatever was built another way is bounded when set, carried or written.
        let raw = Condition { message: huge.clone(), ..Condition::because("Y", &ERROR, "") };
        let json = serde_json::to_string(&raw).unwrap();
        assert!(json.len() < MAX_MESSAGE_BYTES + 200, "{}", json.len());
        let carried = Conditions::carry_times(vec![raw.clone()], &Conditions::default(), t(5));
        assert_eq!(carried.0[0].message, c.message);
        let mut set = Conditions::default();
        set.set(raw, t(5));
        assert_eq!(set.0[0].message, c.message);
        // A message at the bound is kept whole.
        let fits = "m".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(Condition::because("X", &ERROR, fits.clone()).message, fits);
    }

    /// A False condition of any severity: the rules hold for whatever a list holds.
    fn false_(type_: &str, reason: &Reason, severity: Severity, message: &str) -> Condition {
        Condition::new(type_, Status::False, severity, reason.name, message)
    }

    fn unknown(type_: &str, reason: &Reason, message: &str) -> Condition {
        Condition::new(type_, Status::Unknown, Severity::None, reason.name, message)
    }

    #[test]
    fn time_is_rfc3339_utc_in_whole_seconds() {
        let time = Time::parse("2024-05-06T07:08:09.987654Z").unwrap();
        assert_eq!(time.to_string(), "2024-05-06T07:08:09Z");
        assert_eq!(Time::parse("2024-05-06T09:08:09+02:00"), Some(time));
        assert_eq!(Time::parse("yesterday"), None);
        let json = serde_json::to_string(&time).unwrap();
        assert_eq!(serde_json::from_str::<Time>(&json).unwrap(), time);
    }

    #[test]
    fn set_moves_the_time_only_on_a_change_of_status_reason_severity_or_message() {
        let mut cs = Conditions::default();
        cs.set(false_("X", &REQUESTED, Severity::Info, "waiting"), t(10));
        assert_eq!(cs.get("X").unwrap().last_transition_time, t(10));
        cs.set(false_("X", &REQUESTED, Severity::Info, "waiting"), t(20));
        assert_eq!(cs.get("X").unwrap().last_transition_time, t(10), "nothing changed");
        for (i, changed) in [
            false_("X", &REQUESTED, Severity::Info, "still waiting"),
            false_("X", &REQUESTED, Severity::Warning, "still waiting"),
            false_("X", &ERROR, Severity::Warning, "still waiting"),
            Condition::true_("X", "still waiting"),
        ]
        .into_iter()
        .enumerate()
        {
            let now = t(30 + i as i64);
            cs.set(changed, now);
            assert_eq!(cs.get("X").unwrap().last_transition_time, now, "change {i}");
        }
    }

    #[test]
    fn a_type_held_twice_reads_as_its_worst_copy_and_is_named_a_conflict() {
        let ok = Condition::true_("ServiceNovaDeploymentReady", "done");
        let failed = false_("ServiceNovaDeploymentReady", &ERROR, Severity::Error, "nova failed");
        let waiting = unknown("ServiceNovaDeploymentReady", &INIT, "");
        for list in [vec![ok.clone(), failed.clone()], vec![failed.clone(), ok.clone()]] {
            // As read from the cluster.
            let cs: Conditions = serde_json::from_value(serde_json::to_value(&list).unwrap()).unwrap();
            assert_eq!(cs.get("ServiceNovaDeploymentReady"), Some(&failed), "the worst, in either order");
            let line = cs.conflict_line("ServiceNovaDeploymentReady", "Deployment d").unwrap();
            assert!(line.contains("2 ServiceNovaDeploymentReady") && line.contains("False Error"), "{line}");
        }
        let cs = Conditions::worst_first(vec![ok.clone(), waiting.clone()]);
        assert_eq!(cs.get("ServiceNovaDeploymentReady"), Some(&waiting));
        // A False without severity is still worse than True here.
        let bare = false_("X", &REQUESTED, Severity::None, "");
        let cs = Conditions::worst_first(vec![Condition::true_("X", ""), bare.clone()]);
        assert_eq!(cs.get("X"), Some(&bare));
        // Other types keep their places.
        let a = Condition::true_("A", "a");
        let cs = Conditions::worst_first(vec![ok.clone(), a.clone(), failed.clone()]);
        assert_eq!(cs.0, vec![failed.clone(), a, ok.clone()]);
        // Copies that say the same are no conflict; a single one neither.
        assert!(Conditions(vec![ok.clone(), ok.clone()]).conflicts().is_empty());
        assert!(Conditions(vec![ok]).conflict_line("ServiceNovaDeploymentReady", "x").is_none());
    }

    #[test]
    fn ready_sorts_first_then_by_type() {
        let mut cs = Conditions::default();
        for ty in ["ServicesReady", "Ready", "BaremetalProvisionReady", "InfrastructureReady"] {
            cs.set(unknown(ty, &INIT, ""), t(1));
        }
        let types: Vec<&str> = cs.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready", "BaremetalProvisionReady", "InfrastructureReady", "ServicesReady"]);
    }

    #[test]
    fn mirror_priority_and_newest_within_a_level() {
        let mut info_old = false_("A", &REQUESTED, Severity::Info, "a");
        info_old.last_transition_time = t(1);
        let mut info_new = false_("B", &REQUESTED, Severity::Info, "b");
        info_new.last_transition_time = t(2);
        let mut unknown = unknown("C", &INIT, "c");
        unknown.last_transition_time = t(9);
        let mut warning = false_("D", &ERROR, Severity::Warning, "d");
        warning.last_transition_time = t(0);
        let mut error = false_("E", &ERROR, Severity::Error, "e");
        error.last_transition_time = t(0);
        let mut ok = Condition::true_("F", "f");
        ok.last_transition_time = t(99);

        let pick = |cs: Vec<&Condition>| mirror(cs.into_iter(), "Ready").unwrap().message;
        assert_eq!(pick(vec![&ok, &unknown, &info_old, &info_new]), "b", "newest Info wins over Unknown");
        assert_eq!(pick(vec![&ok, &unknown]), "c");
        assert_eq!(pick(vec![&info_new, &warning]), "d");
        assert_eq!(pick(vec![&warning, &error, &info_new]), "e");
        assert_eq!(pick(vec![&ok]), "f");
        assert!(mirror(std::iter::empty(), "Ready").is_none());
        let m = mirror([&error].into_iter(), "Ready").unwrap();
        assert_eq!((m.type_.as_str(), m.reason.as_str(), m.severity), ("Ready", "Error", Severity::Error));
        assert_eq!(m.last_transition_time, error.last_transition_time, "the source's time");
    }

    #[test]
    fn mirror_ties_go_to_the_later_condition_and_a_true_ready_wins_outright() {
        let a = false_("AReady", &REQUESTED, Severity::Info, "a");
        let b = false_("BReady", &REQUESTED, Severity::Info, "b");
        assert_eq!(mirror([&a, &b].into_iter(), "Ready").unwrap().message, "b");
        let ready = Condition::true_("Ready", "all good");
        let failing = false_("X", &ERROR, Severity::Error, "x");
        let m = mirror([&ready, &failing].into_iter(), "Ready").unwrap();
        assert_eq!((m.status, m.message.as_str()), (Status::True, "all good"));
        // A True result is reason Ready whatever the source said; False without a severity
        // ranks below True (lib-common's groupOrder).
        let mut odd_true = Condition::true_("Y", "y");
        odd_true.reason = "Custom".into();
        let no_severity = false_("Z", &REQUESTED, Severity::None, "z");
        let m = mirror([&odd_true, &no_severity].into_iter(), "Ready").unwrap();
        assert_eq!((m.status, m.reason.as_str(), m.message.as_str()), (Status::True, "Ready", "y"));
    }

    #[test]
    fn set_keeps_a_time_the_condition_carries() {
        let mut cs = Conditions::default();
        cs.set(false_("Ready", &REQUESTED, Severity::Info, "x"), t(10));
        let mut mirrored = false_("Ready", &ERROR, Severity::Error, "y");
        mirrored.last_transition_time = t(7);
        cs.set(mirrored, t(20));
        assert_eq!(cs.get("Ready").unwrap().last_transition_time, t(7));
    }

    #[test]
    fn a_condition_built_from_its_reason_has_the_reasons_status_and_severity() {
        for r in reasons::ALL {
            let c = Condition::because("X", r, "m");
            assert_eq!((c.status, c.severity, c.reason.as_str()), (r.status, r.severity(), r.name));
            assert!(c.has_reason(r) && r.allows(c.severity), "{}", r.name);
        }
        assert_eq!(Condition::true_("X", "m"), Condition::because("X", &reasons::READY, "m"));
        let c = Condition::because("X", &reasons::HOST_FAILED, "m");
        assert_eq!((c.status, c.severity), (Status::False, Severity::Error));
        let c = Condition::because("X", &reasons::AGENT_LEASE_MISSING, "m");
        assert_eq!((c.status, c.severity), (Status::Unknown, Severity::None));
    }

    #[test]
    fn is_error_is_false_with_error_or_backoff_reason() {
        assert!(false_("X", &ERROR, Severity::Error, "").is_error());
        assert!(false_("X", &BACKOFF_LIMIT_EXCEEDED, Severity::Error, "").is_error());
        assert!(!false_("X", &REQUESTED, Severity::Info, "").is_error());
        assert!(!Condition::true_("X", "").is_error());
        assert!(false_("X", &ERROR, Severity::Warning, "").is_error(), "severity is ignored");
    }

    #[test]
    fn carry_times_keeps_unchanged_times_and_drops_vanished_types() {
        let mut prev = Conditions::default();
        prev.set(Condition::true_("A", "a"), t(5));
        prev.set(Condition::true_("Gone", "g"), t(5));
        let fresh = vec![Condition::true_("A", "a"), unknown("B", &INIT, "b")];
        let out = Conditions::carry_times(fresh, &prev, t(50));
        assert_eq!(out.get("A").unwrap().last_transition_time, t(5));
        assert_eq!(out.get("B").unwrap().last_transition_time, t(50));
        assert!(out.get("Gone").is_none());
    }

    #[test]
    fn serializes_in_lib_commons_shape() {
        let mut c = false_("ServicesReady", &REQUESTED, Severity::Info, "waiting");
        c.last_transition_time = Time::parse("2024-01-02T03:04:05Z").unwrap();
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "ServicesReady", "status": "False", "severity": "Info",
                "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "Requested", "message": "waiting"})
        );
        let ok = serde_json::to_value(Condition::true_("Ready", "")).unwrap();
        assert!(ok.get("severity").is_none() && ok.get("message").is_none());
        let back: Condition = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
