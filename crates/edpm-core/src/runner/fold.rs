//! Folding a run's events, in counter order, into per-host results.
//!
//! Invariants: Ansible's own statistics win over counts from events; failure messages are
//! redacted before they are cut to [`MESSAGE_LIMIT`] characters, and the task's and play's
//! names and path are redacted too (Ansible templates them). Interruption: hosts in a task
//! where another host failed (fatally, when the callback plugin's notes say so) that never
//! show up again; a playbook whose last play with hosts saw them all fail, and was not its
//! last play, `stoppedEarly`.
//!
//! Completion (`completed`, the termination message's `completedHostList`): a host ran the
//! playbook to its end only when Ansible printed its statistics, every event was read, the
//! last play that started is the playbook's last (its place known), the host is ok (not failed,
//! unreachable or interrupted), and the last play cannot have stopped it unseen: a failure that
//! could stop the play (`any_errors_fatal`, `max_fail_percentage`, or not known not to) under a
//! strategy other than linear credits none of its hosts, and a last play that runs in batches
//! (`serial`, or not known not to) and saw a host fail credits no host it did not see (its batch
//! may never have run), and a last play that saw no host at all credits no host. When in doubt,
//! a host is not complete.

use std::collections::{BTreeMap, BTreeSet};

use super::events::{Event, EventKind, Failure, Notes, PlayShape, Stats};
use super::outcome::{Timeout, exit_reason};
use super::summary::{
    FailedTask, HostResult, HostStatus, MESSAGE_LIMIT, RunStatus, RunSummary, SUMMARY_VERSION,
};
use super::termination::TerminationMessage;
use super::text::{cut, one_line, strip_ansi};
use crate::redact::Redactor;

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
    pub(super) play_position: Option<(u64, u64)>,
    /// The current play's shape, when known.
    play_shape: Option<PlayShape>,
    /// A failure in the current play could have stopped it (for every host).
    play_fatal: bool,
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

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per ansible-runner event kind, folding into the same per-host state"
    )]
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
                self.play_shape = ev
                    .play_shape
                    .or_else(|| ev.play_uuid.as_ref().and_then(|u| self.notes.shapes.get(u).copied()));
                self.play_fatal = false;
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
                            self.play_fatal = true;
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
    #[allow(
        clippy::too_many_lines,
        reason = "the summary's fields, each from the folded events, in the summary's order"
    )]
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
        let ran_to_end =
            complete && self.unreadable == 0 && self.play_position.is_some_and(|(i, n)| i + 1 == n);
        if ran_to_end {
            let last_ok = self
                .play_hosts
                .iter()
                .all(|h| hosts.get(h).is_some_and(|r: &HostResult| r.status == HostStatus::Ok));
            let shape = self.play_shape;
            // Seen in the last play: its stop is seen only under the linear strategy.
            let seen_ok = !self.play_fatal || shape.is_some_and(|s| s.linear);
            // Not seen in it: left out of it, unless a failed batch stopped it first. A last
            // play that saw no host at all may have started after a stop with none left to
            // run (ansible-core 2.19 starts it so): it vouches for nobody it did not see.
            let unseen_ok = !self.play_hosts.is_empty() && (last_ok || shape.is_some_and(|s| !s.serial));
            for (name, r) in &mut hosts {
                let sure = if self.play_hosts.contains(name) { seen_ok } else { unseen_ok };
                r.completed = r.status == HostStatus::Ok && sure;
            }
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
        // A failed play without a reason of ours: what Ansible's exit code means.
        let reason = facts.reason.or_else(|| {
            let unreachable = hosts.values().any(|h| h.dark > 0);
            (facts.status == RunStatus::Failed).then(|| exit_reason(facts.rc, unreachable)).flatten()
        });
        let mut summary = RunSummary {
            version: SUMMARY_VERSION,
            ident: facts.ident,
            status: facts.status,
            rc: facts.rc,
            timeout: facts.timeout,
            reason: reason.map(|r| one_line(&r)),
            complete,
            ran_to_end,
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
    // Names are templated too (`name: deploy {{ db_password }}`): redacted like the message.
    let clean = |s: &Option<String>| s.as_deref().map(|s| redactor.redact(s));
    Some(FailedTask {
        task: clean(&record.task).unwrap_or_default(),
        action: record.action.clone(),
        play: clean(&record.play),
        path: clean(&record.path),
        unreachable: record.unreachable,
        message,
    })
}
