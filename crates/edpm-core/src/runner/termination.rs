//! Upstream's summary for `/dev/termination-log`, which openstack-operator parses (and keeps
//! in the NodeSet's `deploymentExecutionSummaries`, which readiness reads back through this
//! same type), kept within Kubernetes' 4096-byte limit.
//!
//! Invariant: the message never exceeds [`TERMINATION_MESSAGE_LIMIT`] bytes: host lists are
//! shortened (and `truncated` set), counts never are; the first failed host's reason in
//! `hostFailures` keeps its room ahead of the lists' tails, the other reasons take the room
//! upstream's fields leave.
//!
//! `completedHostList` (edpm-agent's own key) names the hosts the playbook ran to its end for,
//! in a run that did not succeed: readiness credits them (docs/reference.md). It is a list of
//! what is known done, never of what is not, so a name left out for room (or a message without
//! the key, as upstream's runner writes) credits less, never more. Its names take the room left
//! after upstream's lists and the first host's reason, before the other reasons.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::outcome::RunStatus;

/// Kubernetes keeps at most this many bytes of a container's termination message.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;

/// Upstream's summary for the termination log, as edpm-ansible's `write_runner_summary.py`
/// writes it, plus `rc`, `status` and `truncated`. Field order is the sorted key order, so the
/// compact serialization is the compact JSON with sorted keys upstream writes.
///
/// Read back (from the operator's copy in a NodeSet's or Deployment's status), fields the
/// operator does not keep (`rc`, `status`, `truncated`) take their defaults and a `null` list
/// is empty, as the API server serves them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminationMessage {
    /// edpm-agent's own key (upstream's parser ignores it), in a run that did not succeed:
    /// the hosts the playbook ran to its end for (`HostResult::completed`), sorted, as many as
    /// fit (`truncated` set when some did not). Absent: no host is known complete.
    #[serde(
        rename = "completedHostList",
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "nullable"
    )]
    pub completed_host_list: Vec<String>,
    #[serde(rename = "failedHostList", deserialize_with = "nullable")]
    pub failed_host_list: Vec<String>,
    #[serde(rename = "failedHosts")]
    pub failed_hosts: u64,
    /// (failed ∪ unreachable) × 100 / total, rounded half up.
    #[serde(rename = "failurePercent")]
    pub failure_percent: u64,
    /// edpm-agent's own key (upstream's parser ignores it): the first failed task of each
    /// failed or unreachable host, `Task (role/tasks/file.yml:line): message`, secrets masked
    /// as in `edpm-summary.json`, as many as fit, each cut to the same length.
    #[serde(
        rename = "hostFailures",
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "nullable"
    )]
    pub host_failures: BTreeMap<String, String>,
    /// How many hosts' reasons did not fit in `hostFailures`.
    #[serde(rename = "hostFailuresOmitted", skip_serializing_if = "is_zero")]
    pub host_failures_omitted: u64,
    pub rc: i32,
    pub status: RunStatus,
    #[serde(rename = "totalHosts")]
    pub total_hosts: u64,
    /// A host list was shortened to stay within [`TERMINATION_MESSAGE_LIMIT`].
    pub truncated: bool,
    #[serde(rename = "unreachableHostList", deserialize_with = "nullable")]
    pub unreachable_host_list: Vec<String>,
    #[serde(rename = "unreachableHosts")]
    pub unreachable_hosts: u64,
}

impl Default for TerminationMessage {
    fn default() -> Self {
        TerminationMessage {
            completed_host_list: Vec::new(),
            failed_host_list: Vec::new(),
            failed_hosts: 0,
            failure_percent: 0,
            host_failures: BTreeMap::new(),
            host_failures_omitted: 0,
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
    /// Compact JSON, keys sorted; never longer than [`TERMINATION_MESSAGE_LIMIT`] bytes when
    /// built by `TerminationMessage::from_summary` (in `summary`).
    pub fn to_json(&self) -> String {
        // Plain strings, integers and booleans: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn fit(&mut self) {
        if self.to_json().len() <= TERMINATION_MESSAGE_LIMIT {
            return;
        }
        self.truncated = true;
        // Measure once, then drop names (each costs its JSON text plus a comma) from the end of
        // the longer list until the message fits.
        let mut len = self.to_json().len();
        let cost = |name: &str| serde_json::to_string(name).map_or(name.len() + 2, |s| s.len()) + 1;
        while len > TERMINATION_MESSAGE_LIMIT {
            // edpm-agent's completed hosts go first: upstream's lists keep what they kept.
            let list = if !self.completed_host_list.is_empty() {
                &mut self.completed_host_list
            } else if self.failed_host_list.len() >= self.unreachable_host_list.len() {
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
            if self.completed_host_list.pop().is_none()
                && self.failed_host_list.pop().is_none()
                && self.unreachable_host_list.pop().is_none()
            {
                break;
            }
        }
    }
}

/// A reason is never cut shorter than this (characters): below it, a host is left out instead.
const MIN_REASON_CHARS: usize = 40;

/// The room the first failed host's reason keeps ahead of the host lists' tails
/// (characters): the whole of a usual reason (task, place, a message of some 100
/// characters), a few dozen host names' worth of the 4096 bytes.
pub const FIRST_REASON_CHARS: usize = 200;

impl TerminationMessage {
    /// [`TerminationMessage::fit`], keeping room for `first`, the first host's reason (cut to
    /// at most [`FIRST_REASON_CHARS`], and shorter when even empty lists leave less room):
    /// with 400 failed hosts the names alone fill the message, and the cluster would see
    /// the hosts but never why. `of` is the number of reasons; the room is then filled by
    /// [`TerminationMessage::add_host_failures`]. Returns the cut the first reason was
    /// given room for (0: none).
    pub fn fit_keeping_first(&mut self, first: Option<&(String, String)>, of: usize) -> usize {
        let Some((host, reason)) = first else {
            self.fit();
            return 0;
        };
        let with = |cap: usize| {
            let mut m = self.clone();
            m.host_failures = BTreeMap::from([(host.clone(), super::text::cut(reason, cap))]);
            m.host_failures_omitted = of.saturating_sub(1) as u64;
            m.fit();
            m
        };
        let fits = |m: &TerminationMessage| m.to_json().len() <= TERMINATION_MESSAGE_LIMIT;
        let m = with(FIRST_REASON_CHARS);
        if fits(&m) {
            *self = m;
            return FIRST_REASON_CHARS;
        }
        // Only a very long host name or reason: the longest cut that fits beside empty lists.
        let (mut lo, mut hi) = (0, FIRST_REASON_CHARS);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(&with(mid)) { lo = mid } else { hi = mid - 1 }
        }
        let m = with(lo);
        if lo > 0 && fits(&m) {
            *self = m;
            lo
        } else {
            self.fit();
            0
        }
    }
}

impl TerminationMessage {
    /// Adds the completed hosts (sorted), after upstream's fields and the first reason have
    /// been fitted: as many of the first as fit, `truncated` set when not all did.
    pub fn add_completed(&mut self, completed: &[String]) {
        if completed.is_empty() {
            return;
        }
        let with = |k: usize| {
            let mut m = self.clone();
            m.completed_host_list = completed[..k].to_vec();
            m.truncated |= k < completed.len();
            m
        };
        let fits = |m: &TerminationMessage| m.to_json().len() <= TERMINATION_MESSAGE_LIMIT;
        let (mut lo, mut hi) = (0, completed.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(&with(mid)) { lo = mid } else { hi = mid - 1 }
        }
        let m = with(lo);
        // `truncated` set alone can take the last byte of room.
        if fits(&m) {
            *self = m;
        }
    }

    /// Adds the hosts' reasons, in the order given, after upstream's fields have been fitted:
    /// as many hosts as fit with every reason cut to at least [`MIN_REASON_CHARS`], then the
    /// longest common cut that still fits; the rest are counted in `hostFailuresOmitted`. The
    /// first reason is never cut shorter than `first_cap`, the room
    /// [`TerminationMessage::fit_keeping_first`] kept for it: a second host's reason does not
    /// take that room away (two reasons cut to 40 characters say less than one whole).
    pub fn add_host_failures(&mut self, reasons: &[(String, String)], first_cap: usize) {
        if reasons.is_empty() {
            return;
        }
        let with = |k: usize, cap: usize| {
            let mut m = self.clone();
            m.host_failures = reasons[..k]
                .iter()
                .enumerate()
                .map(|(i, (h, r))| {
                    let cap = if i == 0 { cap.max(first_cap) } else { cap };
                    (h.clone(), super::text::cut(r, cap))
                })
                .collect();
            m.host_failures_omitted = (reasons.len() - k) as u64;
            m
        };
        let fits = |m: &TerminationMessage| m.to_json().len() <= TERMINATION_MESSAGE_LIMIT;
        // Fitting is monotone in both the number of hosts and the cut: search each.
        let (mut lo, mut hi) = (0, reasons.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(&with(mid, MIN_REASON_CHARS)) { lo = mid } else { hi = mid - 1 }
        }
        let k = lo;
        let longest = reasons[..k].iter().map(|(_, r)| r.chars().count()).max().unwrap_or(0);
        let (mut lo, mut hi) = (MIN_REASON_CHARS.min(longest), longest);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(&with(k, mid)) { lo = mid } else { hi = mid - 1 }
        }
        let m = with(k, lo);
        // Even the count of omitted reasons may not fit next to very long host lists.
        if fits(&m) {
            *self = m;
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `null` reads as empty, as the API server serves an unset list.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
