//! Per node and service: the newest Deployment that ran the service on the node decides; a
//! failed Job fails only the hosts its summary names; without any run, the NodeSet's own
//! DeploymentReady or the seeds' Role/Node status.

use super::*;
use crate::condition::Reason;
use crate::condition::reasons::{
    BACKOFF_LIMIT_EXCEEDED, ERROR, HOST_FAILED, HOST_UNREACHABLE, INVALID_EVIDENCE, LIMIT_UNKNOWN,
    NOT_DEPLOYED, OTHER_HOSTS_FAILED, REQUESTED, RETRYING,
};
use crate::snapshot::evidence::ExecutionSummary;

/// The message of a condition that cannot be told because `run`'s limit cannot be evaluated
/// (`why`): `what` (whether it ran nova on this node) is unknown, and what to do.
pub(super) fn limit_unknown(run: &Run, why: &str, what: &str) -> String {
    format!(
        "{} cannot be evaluated ({why}), so {what} is unknown; run it again with a limit of host and group names, globs or regular expressions both Python and edpm-agent read alike (`edpm-agent status plan` writes one)",
        run.limit_words()
    )
}

impl<'a> GroupContext<'a> {
    /// One service's state on one node: the newest run that ran it there decides.
    pub(super) fn service_state(&self, m: &Member, host: &str, k: usize) -> ServiceState {
        let info = &self.svcs[k];
        let keep = self.opts.evidence;
        let mut evidence = Vec::new();
        let mut newest_covering = true;
        // A run that cannot be put in order: no run's word on this node can be weighed.
        if let Some(why) = self
            .runs
            .iter()
            .filter(|r| r.unordered.is_some() && r.runs(info.name) && r.covers(host) != Covers::No)
            .find_map(|r| r.unordered.as_deref())
        {
            evidence.push(why.to_string());
            let cond = Condition::because(&info.ty, &INVALID_EVIDENCE, why);
            return ServiceState { cond, running: None, terminal: false, evidence, cause: None };
        }
        for (idx, run) in self.runs.iter().enumerate().rev() {
            if self.states[idx] == RunState::NotStarted {
                if keep && run.runs(info.name) && run.covers(host) != Covers::No {
                    evidence.push(format!("Deployment {}: not started yet (no status)", run.name));
                }
                continue;
            }
            match run.covers(host) {
                Covers::Yes => {}
                Covers::No => {
                    if keep {
                        evidence.push(format!("{} leaves this node out", run.limit_words()));
                    }
                    continue;
                }
                // Whether it ran the service here cannot be told: neither its word nor an
                // older run's is the node's.
                Covers::Unknown(why) if self.outcomes[idx][k].is_some() => {
                    let message =
                        limit_unknown(run, why, &format!("whether it ran {} on this node", info.name));
                    evidence.push(message.clone());
                    let cond = Condition::because(&info.ty, &LIMIT_UNKNOWN, message);
                    return ServiceState { cond, running: None, terminal: false, evidence, cause: None };
                }
                Covers::Unknown(_) => {
                    newest_covering = false;
                    continue;
                }
            }
            let was_newest = std::mem::replace(&mut newest_covering, false);
            let Some(outcome) = &self.outcomes[idx][k] else { continue };
            // A service only a servicesOverride ran counts while that Deployment is the node's newest.
            if !info.in_group && !was_newest {
                break;
            }
            if let Some(state) = self.decided(m, info, run, outcome, &mut evidence) {
                return state;
            }
        }
        self.fallback(m, info.name, &info.ty, evidence)
    }

    /// What one run says of the service on the node; `None` when the run stopped before it.
    fn decided(
        &self,
        m: &Member,
        info: &SvcInfo,
        run: &Run,
        outcome: &Outcome,
        evidence: &mut Vec<String>,
    ) -> Option<ServiceState> {
        let (service, ty) = (info.name, info.ty.as_str());
        let keep = self.opts.evidence;
        if keep && let Some(conds) = run.conds {
            for t in [ty, crate::condition::types::NODESET_DEPLOYMENT_READY] {
                evidence.extend(conds.conflict_line(t, &self.source(run)));
            }
        }
        match *outcome {
            Outcome::Done(c) => Some(self.done(m, info, run, c, evidence)),
            Outcome::Pending(c) => Some(self.pending(m, info, run, c, evidence)),
            Outcome::Failed(c) => {
                if keep {
                    let line = format!(
                        "{}: {ty} False {} {:?} ({})",
                        self.source(run),
                        c.reason,
                        c.severity,
                        c.message
                    );
                    evidence.push(line);
                    evidence.extend(self.job_line(service, run.name));
                }
                Some(self.failed(m, service, ty, run, c, info.global, std::mem::take(evidence)))
            }
            Outcome::NotReached => {
                if keep {
                    let why = run.nodeset_condition().map(|c| c.message.as_str());
                    let why = why.unwrap_or("no NodeSetDeploymentReady");
                    evidence.push(format!("Deployment {} stopped before {service} ({why})", run.name));
                }
                None
            }
        }
    }

    /// Where a run's conditions were read, for evidence lines.
    fn source(&self, run: &Run) -> String {
        let ns = self.group.name.as_str();
        if run.from_nodeset_copy {
            format!("NodeSet {ns} status.deploymentStatuses[{}]", run.name)
        } else {
            format!("Deployment {} status.nodeSetConditions[{ns}]", run.name)
        }
    }

    /// A run that says the service is done on the node: its condition, unless the Job that ran
    /// the service failed for good and its summary names this host (the worst reading wins).
    fn done(
        &self,
        m: &Member,
        info: &SvcInfo,
        run: &Run,
        c: &Condition,
        evidence: &mut Vec<String>,
    ) -> ServiceState {
        let ty = info.ty.as_str();
        if self.opts.evidence {
            evidence.push(format!("{}: {ty} True ({})", self.source(run), c.message));
        }
        if let Some(failure) = self.job_contradicts(m, info, run, c) {
            evidence.push(format!(
                "conflict: {} says {ty} True, but {}; the failure counts",
                self.source(run),
                failure.message
            ));
            return self.failed(m, info.name, ty, run, &failure, info.global, std::mem::take(evidence));
        }
        // The run's condition is of this very type: shared as it is.
        let evidence = std::mem::take(evidence);
        ServiceState { cond: c.clone(), running: None, terminal: false, evidence, cause: None }
    }

    /// A run still going on that has not finished the service on the node (`Retrying` when a
    /// failed attempt named this host).
    fn pending(
        &self,
        m: &Member,
        info: &SvcInfo,
        run: &Run,
        c: Option<&Condition>,
        evidence: &mut Vec<String>,
    ) -> ServiceState {
        let (service, ty) = (info.name, info.ty.as_str());
        if self.opts.evidence {
            evidence.push(match c {
                Some(c) => {
                    format!("{}: {ty} {} {} ({})", self.source(run), c.status_word(), c.reason, c.message)
                }
                None => format!("{}: no {ty} yet: an earlier service is still running", self.source(run)),
            });
            evidence.extend(self.job_line(service, run.name));
        }
        let mut state = pending(ty, service, run, c, std::mem::take(evidence));
        if let Some((retrying, cause)) = self.retrying(m, service, ty, run, &mut state.evidence) {
            state.cond = Condition { last_transition_time: state.cond.last_transition_time, ..retrying };
            state.cause = cause;
        }
        state
    }

    /// A Job of the service in `run` that failed for good (`BackoffLimitExceeded`, or any
    /// `Failed` condition) while its summary (the operator's copy, else the newest attempt's)
    /// names this host as failed or unreachable: a `BackoffLimitExceeded` condition of the
    /// service's type that says so, for [`Self::failed`].
    fn job_contradicts(&self, m: &Member, info: &SvcInfo, run: &Run, done: &Condition) -> Option<Condition> {
        if !self.failed_jobs.iter().any(|(s, d)| *s == info.name && *d == run.name) {
            return None;
        }
        let job = self.jobs.job(info.name, run.name, &self.group.name)?;
        let failed = job.condition("Failed")?;
        let names = member_names(m);
        let named = |list: &[String]| list.iter().any(|h| names.contains(&h.as_str()));
        let summary = deploy::summary(run, info.name, &self.group.name, info.global)
            .map(|(_, s)| s)
            .or_else(|| self.jobs.attempts(&job.id.name).first().map(|a| &a.summary))?;
        if !named(&summary.failed_host_list) && !named(&summary.unreachable_host_list) {
            return None;
        }
        let reason = failed.reason.as_deref().filter(|r| !r.is_empty()).unwrap_or("Failed");
        let reason = crate::redact::scrub(reason);
        let mut c = Condition::because(
            &info.ty,
            &BACKOFF_LIMIT_EXCEEDED,
            format!("Job {} failed ({reason}) and its summary names this host", job.id.name),
        );
        // A Job condition carries no time the snapshot keeps: the service condition's.
        c.last_transition_time = done.last_transition_time;
        Some(c)
    }

    /// The Job that ran `service` of `run` on this NodeSet, when it has ended failed and its
    /// newest attempt (the newest pod that ended, every ended pod placed) says, in
    /// edpm-agent's `completedHostList`, that its playbook ran to the end for one of `names`:
    /// that attempt's pod. Upstream's runner writes no such list: no host is credited then.
    pub(super) fn completed_here(&self, service: &str, run: &Run, names: &[&str]) -> Option<&'a str> {
        let job = self.jobs.job(service, run.name, &self.group.name)?;
        job.condition("Failed")?;
        let name = job.id.name.as_str();
        let newest = self.jobs.attempts(name).first()?;
        // A newer pod that ended without a summary (an OOM kill) may have run part of the
        // playbook again: its word is unknown, so no earlier one counts.
        let last = self.jobs.ended(name).first()?;
        if self.jobs.unplaced(name) > 0 || !std::ptr::eq(*last, newest.pod) {
            return None;
        }
        let listed = newest.summary.completed_host_list.iter().any(|h| names.contains(&h.as_str()));
        listed.then_some(newest.pod.id.name.as_str())
    }

    /// A failed service: only the hosts its Job's summary names fail; without a summary the
    /// whole Job failed and upstream's message is all there is. A host the Job's newest
    /// attempt ran the playbook to the end for ([`Self::completed_here`]) has the service.
    #[allow(
        clippy::too_many_arguments,
        reason = "the failed service's run, condition and evidence as the caller has them apart"
    )]
    pub(super) fn failed(
        &self,
        m: &Member,
        service: &str,
        ty: &str,
        run: &Run,
        c: &Condition,
        global: bool,
        mut evidence: Vec<String>,
    ) -> ServiceState {
        let terminal = c.has_reason(&BACKOFF_LIMIT_EXCEEDED);
        let names = member_names(m);
        if let Some(pod) = self.completed_here(service, run, &names) {
            let job = self.job_name(service, run, global);
            if self.opts.evidence {
                evidence.push(format!("Pod {pod} termination message: completedHostList names this host"));
            }
            let mut cond = Condition::true_(
                ty,
                format!(
                    "Deployment ready for {service} service on this host: job {job} (Deployment {}) failed on other hosts and ran its playbook to the end here",
                    run.name
                ),
            );
            cond.last_transition_time = c.last_transition_time;
            return ServiceState { cond, running: None, terminal: false, evidence, cause: None };
        }
        // The operator's copy of the summary, else the newest attempt's own message (an
        // operator that has not copied it yet, or a Deployment that was not read).
        let job_name = self.job_name(service, run, global);
        let summary = deploy::summary(run, service, &self.group.name, global).or_else(|| {
            let a = self.jobs.attempts(&job_name).first()?;
            Some((job_name.clone(), &a.summary))
        });
        if terminal && let Some((job, s)) = summary {
            if self.opts.evidence {
                evidence.push(format!(
                    "Job {job} summary: {} of {} host(s) failed {:?}, {} unreachable {:?}",
                    s.failed_hosts,
                    s.total_hosts,
                    s.failed_host_list,
                    s.unreachable_hosts,
                    s.unreachable_host_list
                ));
            }
            let why = self.why_failed(&job, &names, &mut evidence);
            let at = Failure { service, deployment: run.name, job: &job, why: &why };
            let (reason, message) = host_verdict(&at, s, &names, c);
            let mut cond = Condition::because(ty, reason, message);
            cond.last_transition_time = c.last_transition_time;
            let terminal = *reason != OTHER_HOSTS_FAILED;
            // The failed task's own words, for a view's one line; only of this host's failure.
            let cause = if terminal { why.strip_prefix(": ").map(str::to_string) } else { None };
            return ServiceState { cond, running: None, terminal, evidence, cause };
        }
        let mut cond = c.as_type(ty);
        cond.severity = Severity::Error;
        ServiceState { cond, running: None, terminal, evidence, cause: None }
    }

    /// Why the host failed in `job`, from the pods' termination messages (the operator's copy
    /// drops it): `": <reason>"`, or nothing.
    fn why_failed(&self, job: &str, names: &[&str], evidence: &mut Vec<String>) -> String {
        let why = self.jobs.host_failure(job, names).and_then(|f| {
            if self.opts.evidence {
                evidence.push(format!(
                    "Pod {} termination message: hostFailures: {}",
                    f.attempt.pod.id.name,
                    f.reason.unwrap_or("(none: the runner did not say)")
                ));
            }
            f.reason.map(|r| format!(": {r}"))
        });
        why.unwrap_or_default()
    }

    /// No run with status decided the service: the NodeSet's own DeploymentReady when no run
    /// carries any status, else the seeds' Role/Node status, else not deployed.
    pub(super) fn fallback(
        &self,
        m: &Member,
        service: &str,
        ty: &str,
        mut evidence: Vec<String>,
    ) -> ServiceState {
        let ns = self.group.name.as_str();
        if !self.any_run_status
            && let Some(c) = self.status.and_then(|s| s.conditions.get(DEPLOYMENT_READY))
        {
            evidence.push(format!(
                "NodeSet {ns} status.conditions DeploymentReady {} {} ({}); no Deployment status was read",
                c.status_word(),
                c.reason,
                c.message
            ));
            let (cond, running, terminal) = if c.is_true() {
                (Condition::true_(ty, format!("Deployment ready for {service} service")), None, false)
            } else if c.message == DEPLOYMENT_IN_PROGRESS {
                (
                    Condition::because(
                        ty,
                        &REQUESTED,
                        format!("Deployment not yet ready for {service} service"),
                    ),
                    Some(format!("NodeSet {ns} reports a Deployment in progress")),
                    false,
                )
            } else if c.is_error() {
                (Condition::because(ty, &ERROR, c.message.clone()), None, false)
            } else {
                (not_deployed(ty, service), None, false)
            };
            return ServiceState {
                cond: Condition { last_transition_time: c.last_transition_time, ..cond },
                running,
                terminal,
                evidence,
                cause: None,
            };
        }
        if let Some(c) = self.legacy_condition(m, service) {
            evidence.push(format!("{}: {} {} ({})", c.0, c.1.type_, c.1.status_word(), c.1.message));
            let cond = match c.1.status {
                Status::True => Condition::true_(ty, format!("Deployment ready for {service} service")),
                Status::False if c.1.severity == Severity::Error || c.1.is_error() => {
                    Condition::because(ty, &ERROR, c.1.message.clone())
                }
                _ => Condition::because(
                    ty,
                    &REQUESTED,
                    format!("Deployment not yet ready for {service} service"),
                ),
            };
            return ServiceState { cond, running: None, terminal: false, evidence, cause: None };
        }
        evidence.push(format!("no OpenStackDataPlaneDeployment has run {service} on this node"));
        ServiceState {
            cond: not_deployed(ty, service),
            running: None,
            terminal: false,
            evidence,
            cause: None,
        }
    }

    /// The seeds' model: the Node's, else the Role's status for a service (`"<svc> service
    /// ready"`, dataplane-operator 605f1a16), else its DeploymentReady.
    pub(super) fn legacy_condition(&self, m: &Member, service: &str) -> Option<(String, Condition)> {
        if self.group.kind != GroupKind::Role {
            return None;
        }
        let per_service = format!("{service} service ready");
        let node = self.snap.evidence.nodes.get(&m.key);
        for (what, st) in
            [(format!("OpenStackDataPlaneNode/{}", m.key), node), (self.group.id.short(), self.legacy)]
        {
            let Some(st) = st else { continue };
            if let Some(c) = st.conditions.get(&per_service).or_else(|| st.conditions.get(DEPLOYMENT_READY)) {
                return Some((format!("{what} status.conditions"), c.clone()));
            }
            if st.deployed {
                return Some((
                    format!("{what} status.deployed"),
                    Condition::true_(DEPLOYMENT_READY, "deployed"),
                ));
            }
        }
        None
    }

    /// The name of the Job that runs `service` of `run` on this NodeSet: the Job found by the
    /// operator's labels, else the name the operator gives it.
    fn job_name(&self, service: &str, run: &Run, global: bool) -> String {
        match self.jobs.job(service, run.name, &self.group.name) {
            Some(j) => j.id.name.clone(),
            None => super::names::job_name(service, run.name, &self.group.name, global),
        }
    }

    /// A Job that failed an attempt on this host and still has attempts left: `Retrying`
    /// (Warning) with the attempt's reason, before the operator says anything (it copies a
    /// summary only once the Job has ended).
    fn retrying(
        &self,
        m: &Member,
        service: &str,
        ty: &str,
        run: &Run,
        evidence: &mut Vec<String>,
    ) -> Option<(Condition, Option<String>)> {
        let job = self.jobs.job(service, run.name, &self.group.name)?;
        if job.status.failed < 1 || job.condition("Failed").is_some() || job.condition("Complete").is_some() {
            return None;
        }
        let names = member_names(m);
        let f = self.jobs.host_failure(&job.id.name, &names)?;
        if self.opts.evidence {
            evidence.push(format!(
                "Pod {} termination message: this host {}: {}",
                f.attempt.pod.id.name,
                if f.unreachable { "unreachable" } else { "failed" },
                f.reason.unwrap_or("(no reason given)")
            ));
        }
        let attempts = job.spec.backoff_limit.unwrap_or(6) + 1;
        let what = if f.unreachable { "this host was unreachable" } else { "failed on this host" };
        let why = f.reason.map(|r| format!(": {r}")).unwrap_or_default();
        let cond = Condition::because(
            ty,
            &RETRYING,
            format!(
                "attempt {} of {attempts} {what} in job {} (Deployment {}){why}; the Job retries",
                job.status.failed, job.id.name, run.name
            ),
        );
        Some((cond, f.reason.map(str::to_string)))
    }

    /// What the Job of a service says: running, attempts, backoff.
    pub(super) fn job_line(&self, service: &str, deployment: &str) -> Vec<String> {
        match self.jobs.job(service, deployment, &self.group.name) {
            Some(j) => {
                let limit = j.spec.backoff_limit.unwrap_or(6);
                let failed = j
                    .condition("Failed")
                    .map(|c| format!(", failed: {}", c.reason.as_deref().unwrap_or("")))
                    .unwrap_or_default();
                vec![format!(
                    "Job {}: {} active, {} succeeded, {} failed of {} attempt(s){failed}",
                    j.id.name,
                    j.status.active,
                    j.status.succeeded,
                    j.status.failed,
                    limit + 1
                )]
            }
            None => Vec::new(),
        }
    }
}

/// A service's state on one node.
pub(super) struct ServiceState {
    pub(super) cond: Condition,
    pub(super) running: Option<String>,
    pub(super) terminal: bool,
    pub(super) evidence: Vec<String>,
    /// Why, in short: the failed task's message ([`Block::cause`]).
    pub(super) cause: Option<String>,
}

pub(super) fn not_deployed(ty: &str, service: &str) -> Condition {
    Condition::because(
        ty,
        &NOT_DEPLOYED,
        format!("no OpenStackDataPlaneDeployment has deployed {service} on this node yet"),
    )
}

/// A service a running Deployment has not finished on the node.
fn pending(ty: &str, service: &str, run: &Run, c: Option<&Condition>, evidence: Vec<String>) -> ServiceState {
    let message = format!("Deployment not yet ready for {service} service");
    let mut cond = Condition::because(ty, &REQUESTED, message);
    if let Some(c) = c {
        cond.last_transition_time = c.last_transition_time;
    }
    let running = Some(format!("Deployment {} is running {service}", run.name));
    ServiceState { cond, running, terminal: false, evidence, cause: None }
}

/// Where a terminal failure happened: the service, its Deployment and Job, and why the host
/// failed (`": <reason>"`, or nothing).
struct Failure<'f> {
    service: &'f str,
    deployment: &'f str,
    job: &'f str,
    why: &'f str,
}

/// Which of a failed Job's hosts this node is, by the Job's summary: failed, unreachable, one
/// the play stopped before, or (a summary that names no host) the whole Job failed.
fn host_verdict(
    at: &Failure,
    s: &ExecutionSummary,
    names: &[&str],
    c: &Condition,
) -> (&'static Reason, String) {
    let Failure { service, deployment, job, why } = *at;
    let named = |list: &[String]| list.iter().any(|h| names.contains(&h.as_str()));
    if named(&s.failed_host_list) {
        let message = format!("{service} failed on this host in job {job} (Deployment {deployment}){why}");
        (&HOST_FAILED, message)
    } else if named(&s.unreachable_host_list) {
        let message =
            format!("this host was unreachable in job {job} (Deployment {deployment}, {service}){why}");
        (&HOST_UNREACHABLE, message)
    } else if s.total_hosts > 0 {
        let others: Vec<&String> =
            s.failed_host_list.iter().chain(&s.unreachable_host_list).take(5).collect();
        let message = format!(
            "job {job} ({service}) failed on {}; this host was not reported failed, but the play stopped before {service} completed here",
            others.iter().map(|h| h.as_str()).collect::<Vec<_>>().join(", ")
        );
        (&OTHER_HOSTS_FAILED, message)
    } else {
        (&BACKOFF_LIMIT_EXCEEDED, c.message.clone())
    }
}
