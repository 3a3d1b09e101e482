//! Deployments as they concern one NodeSet: which ran, in which order, with which services
//! and which hosts, and what each service's condition says.
//!
//! Evidence, most specific first: a Deployment's own `status.nodeSetConditions[<nodeset>]`;
//! else the NodeSet's copy of it (`status.deploymentStatuses[<deployment>]`), for a Deployment
//! that is not in the snapshot. A Deployment without any status has not started.

use std::collections::BTreeMap;

use crate::condition::reasons::BACKOFF_LIMIT_EXCEEDED;
use crate::condition::{Condition, Conditions, Status, Time};
use crate::snapshot::evidence::{Deployment, Evidence, ExecutionSummary, NodeSetStatus};

use super::limit::{Coverage, Covers, Limits};

/// One Deployment's run on one NodeSet.
#[derive(Debug)]
pub struct Run<'a> {
    pub name: &'a str,
    /// Created later is newer; then the newest condition time; then the name.
    pub order: (Option<Time>, Time, &'a str),
    /// Services in the order they run: `servicesOverride`, else the NodeSet's.
    pub services: Vec<&'a str>,
    /// What its `ansibleLimit` selects (`None`: no limit, every host).
    pub limit: Option<&'a Coverage>,
    pub limit_text: Option<&'a str>,
    /// `nodeSetConditions[<nodeset>]`; `None` when the Deployment has no status yet.
    pub conds: Option<&'a Conditions>,
    /// The Deployment's conditions for every NodeSet, for global services deduplicated onto
    /// another NodeSet.
    pub all_conds: Vec<&'a Conditions>,
    /// Job name → summary (the Deployment's, else the NodeSet's copy).
    pub summaries: BTreeMap<&'a str, &'a ExecutionSummary>,
    pub deployment: Option<&'a Deployment>,
    /// Read from the NodeSet's copies, not from the Deployment object.
    pub from_nodeset_copy: bool,
    /// Why this run cannot be put in order (a `creationTimestamp` that is not a time): what
    /// it and the runs around it say of a node cannot be weighed, so it is named instead.
    pub unordered: Option<String>,
}

/// Where a run stands as a whole (upstream's `checkDeployment` reading of
/// `NodeSetDeploymentReady`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    NotStarted,
    Running,
    Done,
    /// `IsError`: terminal when the reason is `BackoffLimitExceeded`.
    Failed {
        terminal: bool,
    },
}

/// What a run says about one service.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Done(&'a Condition),
    /// Requested, or not reached yet while the run is going on.
    Pending(Option<&'a Condition>),
    Failed(&'a Condition),
    /// Not reached: the run stopped (or never started) before this service.
    NotReached,
}

impl RunState {
    /// Not finished: no status yet (the operator has not reconciled it, or it waits to
    /// start), running, or failed but retrying. Work on its nodes is in progress: nothing is
    /// planned again for them, and they are not stalled.
    pub fn unfinished(self) -> bool {
        matches!(self, RunState::NotStarted | RunState::Running | RunState::Failed { terminal: false })
    }
}

impl<'a> Run<'a> {
    /// When the Deployment was created (`metadata.creationTimestamp`), when known.
    pub fn created(&self) -> Option<Time> {
        self.order.0
    }

    pub fn state(&self) -> RunState {
        let Some(conds) = self.conds else { return RunState::NotStarted };
        match conds.get(crate::condition::types::NODESET_DEPLOYMENT_READY) {
            Some(c) if c.is_true() => RunState::Done,
            Some(c) if c.is_error() => RunState::Failed { terminal: c.has_reason(&BACKOFF_LIMIT_EXCEEDED) },
            Some(c) if c.status == Status::False => RunState::Running,
            // Unknown ("Deployment not started"), or no condition at all.
            _ if conds.iter().any(|c| c.type_.starts_with("Service") && c.status == Status::False) => {
                if conds.iter().any(|c| c.type_.starts_with("Service") && c.is_error()) {
                    RunState::Failed { terminal: false }
                } else {
                    RunState::Running
                }
            }
            _ => RunState::NotStarted,
        }
    }

    /// The top-level condition of the run for this NodeSet, for messages.
    pub fn nodeset_condition(&self) -> Option<&'a Condition> {
        self.conds.and_then(|c| c.get(crate::condition::types::NODESET_DEPLOYMENT_READY))
    }

    /// Whether the run covered the host of inventory hostname `host`.
    pub fn covers(&self, host: &str) -> Covers<'a> {
        self.limit.map_or(Covers::Yes, |l| l.covers(host))
    }

    /// Whether this run is work in progress on the host of inventory hostname `host`: not
    /// finished ([`RunState::unfinished`]) and its `ansibleLimit` covers the host for certain.
    /// What `status plan` leaves to it and what a node's `Reconciling` names.
    pub fn in_progress_on(&self, host: &str) -> bool {
        self.state().unfinished() && self.covers(host) == Covers::Yes
    }

    /// The words naming this run's limit, for a message: `Deployment x's ansibleLimit "…"`.
    pub fn limit_words(&self) -> String {
        let limit = crate::excerpt::echo(&crate::excerpt::printable(self.limit_text.unwrap_or(""))).debug();
        format!("Deployment {}'s ansibleLimit {limit}", self.name)
    }

    pub fn runs(&self, service: &str) -> bool {
        self.services.contains(&service)
    }

    /// What this run says of a service (condition type `ty`); a global service's condition may
    /// sit on another NodeSet of the Deployment.
    pub fn outcome_with(&self, ty: &str, global: bool, state: RunState) -> Outcome<'a> {
        let found = self
            .conds
            .and_then(|c| c.get(ty))
            .or_else(|| if global { self.all_conds.iter().find_map(|c| c.get(ty)) } else { None });
        match found {
            Some(c) if c.is_true() => Outcome::Done(c),
            Some(c) if c.status == Status::False && c.severity == crate::condition::Severity::Error => {
                Outcome::Failed(c)
            }
            Some(c) if c.is_error() => Outcome::Failed(c),
            Some(c) => Outcome::Pending(Some(c)),
            None => match state {
                RunState::Running => Outcome::Pending(None),
                _ => Outcome::NotReached,
            },
        }
    }
}

/// The runs that concern `nodeset`, oldest first. `services` is the NodeSet's own list.
pub fn runs<'a>(
    evidence: &'a Evidence,
    nodeset: &'a str,
    status: Option<&'a NodeSetStatus>,
    services: &'a [String],
    limits: &'a Limits,
) -> Vec<Run<'a>> {
    let mut out: Vec<Run<'a>> = evidence
        .deployments
        .iter()
        .enumerate()
        .filter(|(_, d)| d.spec.node_sets.iter().any(|n| n == nodeset))
        .map(|(i, d)| deployment_run(d, nodeset, status, services, limits.of(i)))
        .collect();
    // Deployments known only from the NodeSet's copies (the Deployment objects were not read).
    if let Some(s) = status {
        for (name, conds) in &s.deployment_statuses {
            if out.iter().any(|r| r.name == name) || conds.0.is_empty() {
                continue;
            }
            let summaries = s
                .deployment_execution_summaries
                .get(name)
                .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
                .unwrap_or_default();
            out.push(Run {
                name,
                order: (None, newest(conds.iter()), name),
                services: services.iter().map(String::as_str).collect(),
                limit: None,
                limit_text: None,
                conds: Some(conds),
                all_conds: vec![conds],
                summaries,
                deployment: None,
                from_nodeset_copy: true,
                unordered: None,
            });
        }
    }
    out.sort_by(|a, b| a.order.cmp(&b.order));
    out
}

/// One Deployment's run on `nodeset`: its own `nodeSetConditions`, else the NodeSet's copy.
fn deployment_run<'a>(
    d: &'a Deployment,
    nodeset: &str,
    status: Option<&'a NodeSetStatus>,
    services: &'a [String],
    limit: Option<&'a Coverage>,
) -> Run<'a> {
    let own = d.status.node_set_conditions.get(nodeset);
    let copy = status.and_then(|s| s.deployment_statuses.get(&d.id.name));
    let (conds, from_copy) = match (own, copy) {
        (Some(c), _) if !c.0.is_empty() => (Some(c), false),
        (_, Some(c)) if !c.0.is_empty() => (Some(c), true),
        _ => (None, false),
    };
    let mut summaries: BTreeMap<&str, &ExecutionSummary> = BTreeMap::new();
    if let Some(s) = status.and_then(|s| s.deployment_execution_summaries.get(&d.id.name)) {
        summaries.extend(s.iter().map(|(k, v)| (k.as_str(), v)));
    }
    summaries.extend(d.status.ansible_execution_summaries.iter().map(|(k, v)| (k.as_str(), v)));
    let list: Vec<&str> = if !d.spec.services_override.is_empty() {
        d.spec.services_override.iter().map(String::as_str).collect()
    } else {
        services.iter().map(String::as_str).collect()
    };
    let (created, unordered) = match d.meta.creation_timestamp.as_deref() {
        None => (None, None),
        Some(text) => match Time::parse(text) {
            Some(t) => (Some(t), None),
            None => (
                None,
                Some(format!(
                    "Deployment {} metadata.creationTimestamp {} is not an RFC 3339 time, so which Deployment ran last cannot be told; fix or remove the field",
                    d.id.name,
                    crate::excerpt::echo(&crate::excerpt::printable(text)).debug()
                )),
            ),
        },
    };
    let updated = newest(d.status.conditions.iter().chain(conds.into_iter().flat_map(|c| c.iter())));
    Run {
        name: &d.id.name,
        order: (created, updated, &d.id.name),
        services: list,
        limit: limit.filter(|c| **c != Coverage::All),
        limit_text: d.spec.ansible_limit.as_deref(),
        conds,
        all_conds: d.status.node_set_conditions.values().collect(),
        summaries,
        deployment: Some(d),
        from_nodeset_copy: from_copy,
        unordered,
    }
}

fn newest<'a>(conds: impl Iterator<Item = &'a Condition>) -> Time {
    conds.map(|c| c.last_transition_time).max().unwrap_or_default()
}

/// The summary of the Job a run used for a service on a NodeSet.
pub fn summary<'a>(
    run: &Run<'a>,
    service: &str,
    nodeset: &str,
    global: bool,
) -> Option<(String, &'a ExecutionSummary)> {
    let job = super::names::job_name(service, run.name, nodeset, global);
    run.summaries.get(job.as_str()).map(|s| (job, *s))
}
