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
pub(crate) struct Attempt<'a> {
    pub pod: &'a Pod,
    pub summary: ExecutionSummary,
    pub terminated: &'a Terminated,
}

pub(crate) struct Jobs<'a> {
    /// (service, deployment, nodeset) → Job.
    by_labels: HashMap<(&'a str, &'a str, &'a str), &'a Job>,
    /// Job name → its attempts that reported a summary, newest first.
    attempts: HashMap<&'a str, Vec<Attempt<'a>>>,
}

impl<'a> Jobs<'a> {
    pub(crate) fn new(ev: &'a Evidence) -> Jobs<'a> {
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
        for pod in &ev.pods {
            if let (Some(job), Some((summary, terminated))) = (pod.job(), pod.summary()) {
                attempts.entry(job).or_default().push(Attempt { pod, summary, terminated });
            }
        }
        for list in attempts.values_mut() {
            // Newest first: creation time, then the name, so the order never depends on the
            // order the pods were read in.
            let key = |a: &Attempt| {
                (a.pod.meta.creation_timestamp.as_deref().and_then(Time::parse), a.pod.id.name.clone())
            };
            list.sort_by_key(|a| std::cmp::Reverse(key(a)));
        }
        Jobs { by_labels, attempts }
    }

    /// The Jobs of `nodeset`: (service, deployment, Job), in a fixed order.
    pub(crate) fn of_nodeset(&self, nodeset: &str) -> Vec<(&'a str, &'a str, &'a Job)> {
        let mut out: Vec<(&'a str, &'a str, &'a Job)> = self
            .by_labels
            .iter()
            .filter(|((_, _, ns), _)| *ns == nodeset)
            .map(|((s, d, _), j)| (*s, *d, *j))
            .collect();
        out.sort_by(|a, b| a.2.id.name.cmp(&b.2.id.name));
        out
    }

    pub(crate) fn job(&self, service: &str, deployment: &str, nodeset: &str) -> Option<&'a Job> {
        self.by_labels.get(&(service, deployment, nodeset)).copied()
    }

    /// The attempts of the Job named `job` that reported a summary, newest first.
    pub(crate) fn attempts(&self, job: &str) -> &[Attempt<'a>] {
        self.attempts.get(job).map_or(&[], Vec::as_slice)
    }

    /// Why the newest attempt that names one of `names` among its failed or unreachable hosts
    /// failed there: the attempt, whether the host was unreachable, and the runner's reason
    /// (absent from an older runner's message).
    pub(crate) fn host_failure(&self, job: &str, names: &[&str]) -> Option<HostFailure<'_, 'a>> {
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

pub(crate) struct HostFailure<'j, 'a> {
    pub attempt: &'j Attempt<'a>,
    pub unreachable: bool,
    pub reason: Option<&'j str>,
}
