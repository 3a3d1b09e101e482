//! Upstream's summary for `/dev/termination-log`, which openstack-operator parses (and keeps
//! in the NodeSet's `deploymentExecutionSummaries`, which readiness reads back through this
//! same type), kept within Kubernetes' 4096-byte limit.
//!
//! Invariant: the message never exceeds [`TERMINATION_MESSAGE_LIMIT`] bytes: host lists are
//! shortened (and `truncated` set), counts never are; the reasons of `hostFailures` come
//! last, in the room upstream's fields leave.

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

    pub(crate) fn fit(&mut self) {
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

/// A reason is never cut shorter than this (characters): below it, a host is left out instead.
const MIN_REASON_CHARS: usize = 40;

impl TerminationMessage {
    /// Adds the hosts' reasons, in the order given, after upstream's fields have been fitted:
    /// as many hosts as fit with every reason cut to at least [`MIN_REASON_CHARS`], then the
    /// longest common cut that still fits; the rest are counted in `hostFailuresOmitted`.
    pub(crate) fn add_host_failures(&mut self, reasons: &[(String, String)]) {
        if reasons.is_empty() {
            return;
        }
        let with = |k: usize, cap: usize| {
            let mut m = self.clone();
            m.host_failures =
                reasons[..k].iter().map(|(h, r)| (h.clone(), super::text::cut(r, cap))).collect();
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
