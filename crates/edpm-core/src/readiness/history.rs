//! A node's run history: its last runs (Deployment, service, Job, attempt, result, finish
//! time, failed task), from the Jobs' pods seen now merged into the list written last time,
//! so deleting a Deployment (and its Jobs and pods) does not erase it. At most
//! [`RUN_HISTORY`] runs, oldest first.
//!
//! A pod's termination message names only the failed and unreachable hosts: a node is `ok` in
//! an attempt only when the attempt's Deployment is known and its `ansibleLimit` covers the
//! node; `interrupted` when the run was canceled or timed out without failing it.

use super::api::RUN_HISTORY;
use super::*;
use crate::runner::outcome::RunStatus;
use crate::snapshot::evidence::NodeRun;

impl<'a> GroupContext<'a> {
    pub(super) fn history(&self, m: &Member, previous: &[NodeRun]) -> Vec<NodeRun> {
        let names = member_names(m);
        let named = |list: &[String]| list.iter().any(|h| names.contains(&h.as_str()));
        let host = m.inventory_hostname();
        let mut seen: Vec<NodeRun> = Vec::new();
        for &(service, deployment, job) in &self.own_jobs {
            let attempts = self.jobs.attempts(&job.id.name);
            let covered =
                self.runs.iter().find(|r| r.name == deployment).map(|r| r.covers(host) == limit::Covers::Yes);
            // Attempts are numbered from the Job's own count of ended pods, not from the pods
            // still there: when the oldest pod is gone, the others keep their numbers. Each
            // attempt's place is among every ended pod (one without a summary, an OOM kill,
            // counts too). While the Job's count lags behind its pods (read between a pod's
            // end and the Job's update), nothing new is recorded: a recorded attempt is never
            // rewritten, so a wrong number would stay.
            let total = usize::try_from(job.status.failed.saturating_add(job.status.succeeded)).unwrap_or(0);
            let ended = self.jobs.ended(&job.id.name);
            // The newest pods the Job has not counted yet wait for the next evaluation.
            let lag = (ended.len() + self.jobs.unplaced(&job.id.name)).saturating_sub(total);
            for a in attempts.iter() {
                // A pod whose creationTimestamp cannot be read is placed by when it ended, or,
                // when that is unknown too, recorded as attempt 0: never taken for the first.
                let note = super::jobs::unordered(a.pod);
                let attempt = match ended.iter().position(|p| std::ptr::eq(*p, a.pod)) {
                    Some(i) => {
                        let Some(i) = i.checked_sub(lag) else { continue };
                        u32::try_from(total - i).unwrap_or(u32::MAX)
                    }
                    None if note.is_some() => 0,
                    None => continue,
                };
                let s = &a.summary;
                let result = if named(&s.failed_host_list) {
                    "failed"
                } else if named(&s.unreachable_host_list) {
                    "unreachable"
                } else if covered != Some(true) {
                    continue;
                } else if matches!(s.status, RunStatus::Canceled | RunStatus::Timeout) {
                    "interrupted"
                } else {
                    "ok"
                };
                seen.push(NodeRun {
                    deployment: deployment.to_string(),
                    service: service.to_string(),
                    job: job.id.name.clone(),
                    attempt,
                    result: result.to_string(),
                    finished: a.terminated.finished_at.clone(),
                    failed_task: names.iter().find_map(|n| s.host_failures.get(*n)).cloned(),
                    pod: Some(a.pod.id.name.clone()),
                    note,
                });
            }
        }
        merge(previous, seen)
    }
}

/// `previous` with what `seen` adds, oldest first by finish time (unknown last), the newest
/// [`RUN_HISTORY`] kept. A recorded attempt is never rewritten: an attempt seen again (the
/// same pod; for records from before pods were kept, the same Job and attempt) keeps its
/// record, so a pod that disappears or a renumbering can neither drop nor change it.
pub(crate) fn merge(previous: &[NodeRun], seen: Vec<NodeRun>) -> Vec<NodeRun> {
    let recorded = |s: &NodeRun| {
        previous.iter().any(|p| match (&p.pod, &s.pod) {
            (Some(a), Some(b)) => a == b && p.job == s.job,
            _ => p.job == s.job && p.attempt == s.attempt,
        })
    };
    let mut all: Vec<NodeRun> = previous.to_vec();
    all.extend(seen.into_iter().filter(|s| !recorded(s)));
    // RFC 3339 times in UTC compare as text; a run not finished yet sorts last.
    all.sort_by(|a, b| {
        (a.finished.is_none(), a.finished.as_deref(), &a.job, a.attempt).cmp(&(
            b.finished.is_none(),
            b.finished.as_deref(),
            &b.job,
            b.attempt,
        ))
    });
    let extra = all.len().saturating_sub(RUN_HISTORY);
    all.drain(..extra);
    all
}
