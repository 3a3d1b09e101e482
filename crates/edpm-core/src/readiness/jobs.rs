//! The AnsibleEE Jobs and their attempts: which Job ran a service of a Deployment on a
//! NodeSet (by the operator's labels), and each attempt's pod with the summary from its
//! termination message, newest first, as upstream's `GetAnsibleExecutionSummary` orders them.
//!
//! The operator copies a Job's summary into its status only once the Job has ended, and drops
//! the keys it does not know; the pods carry the whole message (`hostFailures`, why each host
//! failed) and carry it while the Job still retries.

use std::collections::HashMap;

use crate::condition::Time;
use crate::snapshot::evidence::{Evidence, ExecutionSummary, Job, Pod, Terminated};

/// One attempt of a Job: its pod, what the runner reported, and how its container ended.
pub struct Attempt<'a> {
    pub pod: &'a Pod,
    pub summary: ExecutionSummary,
    pub terminated: &'a Terminated,
}

pub struct Jobs<'a> {
    /// (service, deployment, nodeset) → Job.
    by_labels: HashMap<(&'a str, &'a str, &'a str), &'a Job>,
    /// Job name → its attempts that reported a summary, newest first.
    attempts: HashMap<&'a str, Vec<Attempt<'a>>>,
    /// Job name → every pod of it that ended (with a summary or not: an OOM kill writes none)
    /// and that can be placed ([`ran_at`]), newest first: the attempts' places in the Job's
    /// count.
    ended: HashMap<&'a str, Vec<&'a Pod>>,
    /// Job name → how many of its ended pods cannot be placed (no time can be read of them).
    unplaced: HashMap<&'a str, usize>,
}

/// When a pod ran, as far as can be told: its `creationTimestamp`, else (one absent or not a
/// time) when its container ended; `None` when neither can be read.
pub fn ran_at(p: &Pod) -> Option<Time> {
    p.meta.creation_timestamp.as_deref().and_then(Time::parse).or_else(|| finished_at(p))
}

/// When the pod's containers last ended.
fn finished_at(p: &Pod) -> Option<Time> {
    p.status
        .container_statuses
        .iter()
        .filter_map(|c| c.state.terminated.as_ref().or(c.last_state.terminated.as_ref()))
        .filter_map(|t| t.finished_at.as_deref().and_then(Time::parse))
        .max()
}

/// Why a pod is not placed among its Job's attempts by its `creationTimestamp`: `None` when it
/// is; else what the timestamp held and how the pod was placed instead, if at all.
pub fn unordered(p: &Pod) -> Option<String> {
    let created = p.meta.creation_timestamp.as_deref();
    if created.and_then(Time::parse).is_some() {
        return None;
    }
    let what = match created {
        Some(c) => format!(
            "pod {}: metadata.creationTimestamp {:?} is not a time",
            p.id.name,
            crate::excerpt::printable(&crate::excerpt::echo(c).to_string())
        ),
        None => format!("pod {}: no metadata.creationTimestamp", p.id.name),
    };
    Some(if finished_at(p).is_some() {
        format!("{what}; placed by when its container ended")
    } else {
        format!("{what}, and when its container ended is unknown: which attempt it was cannot be told")
    })
}

impl<'a> Jobs<'a> {
    pub fn new(ev: &'a Evidence) -> Jobs<'a> {
        let by_labels = ev
            .jobs
            .iter()
            .filter_map(|j| {
                let l = &j.meta.labels;
                Some((
                    (
                        l.get("openstackdataplaneservice")?.as_str(),
                        l.get("openstackdataplanedeployment")?.as_str(),
                        l.get("openstackdataplanenodeset")?.as_str(),
                    ),
                    j,
                ))
            })
            .collect();
        let mut attempts: HashMap<&'a str, Vec<Attempt<'a>>> = HashMap::new();
        let mut ended: HashMap<&'a str, Vec<&'a Pod>> = HashMap::new();
        let mut unplaced: HashMap<&'a str, usize> = HashMap::new();
        for pod in &ev.pods {
            let Some(job) = pod.job() else { continue };
            let summary = pod.summary();
            if summary.is_some() || matches!(pod.status.phase.as_deref(), Some("Succeeded" | "Failed")) {
                if ran_at(pod).is_some() {
                    ended.entry(job).or_default().push(pod);
                } else {
                    *unplaced.entry(job).or_default() += 1;
                }
            }
            if let Some((summary, terminated)) = summary {
                attempts.entry(job).or_default().push(Attempt { pod, summary, terminated });
            }
        }
        // Newest first: when they ran (creation time, else when they ended: one whose
        // creationTimestamp cannot be read is not taken for the oldest), then the name, so the
        // order never depends on the order the pods were read in.
        let key = |p: &Pod| (ran_at(p), p.id.name.clone());
        for list in attempts.values_mut() {
            list.sort_by_key(|a| std::cmp::Reverse(key(a.pod)));
        }
        for list in ended.values_mut() {
            list.sort_by_key(|p| std::cmp::Reverse(key(p)));
        }
        Jobs { by_labels, attempts, ended, unplaced }
    }

    /// How many ended pods of the Job named `job` cannot be placed among its attempts.
    pub fn unplaced(&self, job: &str) -> usize {
        self.unplaced.get(job).copied().unwrap_or(0)
    }

    /// The ended pods of the Job named `job` that can be placed, newest first.
    pub fn ended(&self, job: &str) -> &[&'a Pod] {
        self.ended.get(job).map_or(&[], Vec::as_slice)
    }

    /// The Jobs of `nodeset`: (service, deployment, Job), in a fixed order.
    pub fn of_nodeset(&self, nodeset: &str) -> Vec<(&'a str, &'a str, &'a Job)> {
        let mut out: Vec<(&'a str, &'a str, &'a Job)> = self
            .by_labels
            .iter()
            .filter(|((_, _, ns), _)| *ns == nodeset)
            .map(|((s, d, _), j)| (*s, *d, *j))
            .collect();
        out.sort_by(|a, b| a.2.id.name.cmp(&b.2.id.name));
        out
    }

    pub fn job(&self, service: &str, deployment: &str, nodeset: &str) -> Option<&'a Job> {
        self.by_labels.get(&(service, deployment, nodeset)).copied()
    }

    /// The attempts of the Job named `job` that reported a summary, newest first.
    pub fn attempts(&self, job: &str) -> &[Attempt<'a>] {
        self.attempts.get(job).map_or(&[], Vec::as_slice)
    }

    /// Why the newest attempt that names one of `names` among its failed or unreachable hosts
    /// failed there: the attempt, whether the host was unreachable, and the runner's reason
    /// (absent from an older runner's message).
    pub fn host_failure(&self, job: &str, names: &[&str]) -> Option<HostFailure<'_, 'a>> {
        let named = |list: &[String]| list.iter().any(|h| names.contains(&h.as_str()));
        self.attempts(job).iter().find_map(|a| {
            let s = &a.summary;
            let unreachable = !named(&s.failed_host_list) && named(&s.unreachable_host_list);
            if !named(&s.failed_host_list) && !unreachable {
                return None;
            }
            let reason = names.iter().find_map(|n| s.host_failures.get(*n)).map(String::as_str);
            Some(HostFailure { attempt: a, unreachable, reason })
        })
    }
}

pub struct HostFailure<'j, 'a> {
    pub attempt: &'j Attempt<'a>,
    pub unreachable: bool,
    pub reason: Option<&'j str>,
}
