//! Per node: the phases from its services' states, kstatus's Reconciling and Stalled, the node
//! agent's conditions (Unknown once its Lease expired), and `Ready` over all of them.

use super::*;
use crate::condition::Reason;
use crate::condition::reasons::{
    self, AGENT_CLOCK_SKEW, AGENT_HEARTBEAT_EXPIRED, AGENT_LEASE_MISSING, AGENT_LEASE_UNREADABLE,
    CONFIG_DRIFT,
};

/// What one node's evaluation gathers before its conditions are put together.
#[derive(Default)]
struct Gathered<'a> {
    fresh: Vec<Condition>,
    evidence: BTreeMap<String, Vec<String>>,
    blocking: BTreeMap<&'static str, Block>,
    /// What a Deployment not finished is doing on the node, and since when (its creation).
    running: Option<(String, Time)>,
    /// The first terminal failure: service and its condition.
    stalled: Option<(&'a str, Condition)>,
}

impl<'a> GroupContext<'a> {
    pub(super) fn node(
        &self,
        m: &Member,
        reports: &HashMap<&str, &crate::snapshot::evidence::NodeReport>,
        leases: &HashMap<&str, &crate::snapshot::evidence::Lease>,
        now: Time,
    ) -> NodeView {
        let host = m.inventory_hostname();
        let object = names::node_object(&self.group.name, &m.key);
        let mut g = Gathered { fresh: Vec::with_capacity(self.svcs.len() + 8), ..Default::default() };
        self.phase_baremetal(m, &mut g);
        self.phases(m, &mut g);
        let running = g.running.take();
        let idle = if running.is_none() { self.idle_since(host) } else { Time(0) };
        g.fresh.extend(kstatus(running.as_ref().map(|(w, t)| (w.as_str(), *t)), idle, g.stalled.take()));
        let report = reports.get(object.as_str()).copied();
        let previous = report.map(|r| &r.status.conditions);
        // What edpm-agent kept, from the spec only (the node agent can write the status).
        let record = report.map(|r| &r.spec.record);
        let runs = self.history(m, record.map_or(&[], |r| r.runs.as_slice()));
        let deployed = self.deployed(m, record.map(|r| r.deployed()).as_ref(), now);
        let kept = record.map_or(&[][..], |r| r.delivered_inputs.as_slice());
        let delivered = self.delivered(m, kept, now);
        let held = Held { deployed: &deployed, delivered: &delivered };
        // A Deployment that may have deployed here, and whose limit cannot be evaluated, makes
        // every holding Unknown: what it delivered is the node's or not.
        let undecided = self.undecided_on(m.inventory_hostname());
        for h in HOLDINGS {
            let (c, ev) = (h.node)(self, m, &held);
            self.keep(&mut g.evidence, h.ty, ev);
            g.fresh.push(match &undecided {
                Some(why) => Condition::because(h.ty, &reasons::LIMIT_UNKNOWN, why.clone()),
                None => c,
            });
        }
        let version = g.fresh.iter().find(|c| c.type_ == crate::condition::types::VERSION_CURRENT);
        let behind = version.and_then(|v| self.behind(m, v));
        let agent =
            self.agent_conditions(previous, leases.get(object.as_str()).copied(), now, &mut g.evidence);
        let (conditions, untimed) = node_conditions(g.fresh, agent, previous, now);
        NodeView {
            object,
            node: m.key.clone(),
            host: host.to_string(),
            host_name: m.host_name.value.clone(),
            nodeset: self.group.name.clone(),
            kind: owner_kind(self.group),
            owner: self.owner_of(m),
            namespace: self.group_namespace(),
            conditions,
            evidence: g.evidence,
            blocking: g.blocking,
            runs,
            deployed,
            delivered,
            behind,
            untimed,
        }
    }

    /// Phase -1.
    fn phase_baremetal(&self, m: &Member, g: &mut Gathered) {
        let (bm, bm_ev) = self.baremetal(m);
        self.keep(&mut g.evidence, BAREMETAL, bm_ev);
        if !bm.is_true() {
            let block = Block { reason: bm.reason.clone(), message: bm.message.clone(), ..Block::default() };
            g.blocking.insert(BAREMETAL, block);
        }
        g.fresh.push(bm);
    }

    /// Phases 0 and 1, from each service's state; the services' own conditions after them.
    fn phases(&self, m: &Member, g: &mut Gathered<'a>) {
        let host = m.inventory_hostname();
        let mut states: Vec<(&'a str, Phase, ServiceState)> = self
            .services(host)
            .into_iter()
            .map(|k| (self.svcs[k].name, self.svcs[k].phase, self.service_state(m, host, k)))
            .collect();
        // Nova's verdict joins the phase once the nova service succeeded; before, it only
        // says it waits, and the service's own condition is what blocks the phase.
        let mut waiting = None;
        if let Some(nova) = self.nova_member(m, &states) {
            self.keep(&mut g.evidence, crate::condition::types::NOVA_COMPUTE, nova.2.evidence.clone());
            if nova.2.cond.has_reason(crate::nova::verdict::NOT_ASKED_YET) {
                waiting = Some(nova.2.cond);
            } else {
                states.push(nova);
            }
        }
        for (ty, phase, label) in [
            (INFRASTRUCTURE, Phase::Infrastructure, "infrastructure"),
            (SERVICES, Phase::Services, "OpenStack"),
        ] {
            let members: Vec<&(&str, Phase, ServiceState)> =
                states.iter().filter(|(_, p, _)| *p == phase).collect();
            let (c, block) = phase_condition(ty, label, &members, self.drift.as_deref());
            if let Some(b) = block {
                g.blocking.insert(ty, b);
            }
            if self.opts.evidence {
                g.evidence.insert(ty.to_string(), self.phase_evidence(&members));
            }
            g.fresh.push(c);
        }
        g.running = self.in_progress(host, states.iter().find_map(|(_, _, st)| st.running.clone()));
        g.stalled = states.iter().find(|(_, _, st)| st.terminal).map(|(s, _, st)| (*s, st.cond.clone()));
        g.fresh.extend(states.into_iter().map(|(_, _, st)| st.cond));
        g.fresh.extend(waiting);
    }

    /// What a Deployment not finished does on the node, and since when (its condition's time,
    /// else its creation): the one running a
    /// service here (`running`, as the service's state says it), else the newest that covers the
    /// node and has no status yet (applied, not yet reconciled: it will run here).
    fn in_progress(&self, host: &str, running: Option<String>) -> Option<(String, Time)> {
        // Since its own condition's time when it has one (the operator's word), else its creation.
        let created = |name: &str| {
            let run = self.runs.iter().find(|r| r.name == name);
            let said = run.and_then(Run::nodeset_condition).map(|c| c.last_transition_time);
            said.filter(|t| *t != Time(0)).or_else(|| run.and_then(Run::created)).unwrap_or_default()
        };
        if let Some(what) = running {
            let name = what.strip_prefix("Deployment ").and_then(|w| w.split(' ').next()).unwrap_or("");
            let since = created(name);
            return Some((what, since));
        }
        // Not started: one running here was named by its service's state above.
        let (_, run) = self
            .runs
            .iter()
            .enumerate()
            .rev()
            .find(|(i, r)| self.states[*i] == RunState::NotStarted && r.in_progress_on(host))?;
        Some((
            format!("Deployment {} covers this node and has not started yet (no status so far)", run.name),
            created(run.name),
        ))
    }

    /// Since when no Deployment works on the node: when the last that covered it finished
    /// (its `NodeSetDeploymentReady` time, completed or failed for good); zero (unknown) when
    /// none covered it or one says no time.
    fn idle_since(&self, host: &str) -> Time {
        let mut last = Time(0);
        for (i, run) in self.runs.iter().enumerate() {
            if run.covers(host) != super::limit::Covers::Yes {
                continue;
            }
            let ended = run.nodeset_condition().map(|c| c.last_transition_time).unwrap_or_default();
            if self.states[i].unfinished() || ended == Time(0) {
                return Time(0);
            }
            last = last.max(ended);
        }
        last
    }

    /// A phase's evidence: each service's state and what it was read from, then drift.
    fn phase_evidence(&self, members: &[&(&str, Phase, ServiceState)]) -> Vec<String> {
        let mut lines = Vec::new();
        for (s, _, st) in members {
            lines.push(format!("{s}: {} {} ({})", st.cond.status_word(), st.cond.reason, st.cond.message));
            lines.extend(st.evidence.iter().map(|e| format!("  {e}")));
        }
        if let Some(d) = &self.drift {
            lines.push(d.clone());
        }
        lines
    }

    /// The node agent's conditions, as it last reported them, while its Lease supports them:
    /// present, readable and unexpired. Otherwise each is Unknown, with a reason that says
    /// which: the Lease expired, is missing, cannot be read, or is dated too far ahead.
    fn agent_conditions(
        &self,
        previous: Option<&Conditions>,
        lease: Option<&crate::snapshot::evidence::Lease>,
        now: Time,
        evidence: &mut BTreeMap<String, Vec<String>>,
    ) -> Vec<Condition> {
        use crate::snapshot::evidence::Heartbeat;
        // The agent wrote these (an older one, anyone with its rights): its messages pass the
        // one redactor before they are shown. They are never written back as they are, so
        // masking here changes nothing stored.
        let mut agent: Vec<Condition> = previous
            .map(|p| p.iter().filter(|c| is_agent_condition(&c.type_)).cloned().collect::<Vec<_>>())
            .map(|a| crate::condition::Conditions(a).scrubbed().0)
            .unwrap_or_default();
        if agent.is_empty() {
            return agent;
        }
        let (reason, message, line) = match lease.map(|l| (l, l.heartbeat(now))) {
            Some((l, Heartbeat::Alive { renewed, expires })) => {
                self.keep(
                    evidence,
                    NODE_AGENT,
                    vec![format!("Lease {}: renewed {renewed}, valid until {expires}", l.id.name)],
                );
                return agent;
            }
            Some((l, Heartbeat::Expired { renewed, expires })) => (
                &AGENT_HEARTBEAT_EXPIRED,
                format!(
                    "the node agent's Lease {} expired at {expires} (last renewed {renewed}): the agent stopped renewing it, or the node's clock is behind this one by more than the Lease lasts (check NTP on the node)",
                    l.id.name
                ),
                format!("Lease {}: renewed {renewed}, expired {expires}", l.id.name),
            ),
            Some((l, Heartbeat::Skewed { renewed, ahead })) => (
                &AGENT_CLOCK_SKEW,
                format!(
                    "the node agent's Lease {} says it was renewed at {renewed}, {ahead} s ahead of this clock and more than the Lease lasts: a clock is wrong (check NTP on the node); its reports are no evidence until the clocks agree",
                    l.id.name
                ),
                format!("Lease {}: renewTime {renewed} is {ahead} s ahead of now", l.id.name),
            ),
            Some((l, Heartbeat::Unreadable(why))) => (
                &AGENT_LEASE_UNREADABLE,
                format!("the node agent's Lease {} cannot vouch for its reports: {why}", l.id.name),
                format!("Lease {}: {why}", l.id.name),
            ),
            None => match &self.snap.evidence.leases_unread {
                Some(why) => (&AGENT_LEASE_MISSING, format!("the node agent reported, but its Lease cannot be read: {why}"), why.clone()),
                None => (
                    &AGENT_LEASE_MISSING,
                    "the node agent reported, but it has no Lease: nothing says it is still alive (edpm-agent status report creates the Lease; the agent renews it)".to_string(),
                    "no Lease for this node".to_string(),
                ),
            },
        };
        // An expired Lease turned the reports Unknown when it ended; for the other readings
        // it is when readiness first said so (carried over from the object after that).
        let since = match lease.map(|l| l.heartbeat(now)) {
            Some(Heartbeat::Expired { expires, .. }) => expires,
            _ => Time(0),
        };
        for c in &mut agent {
            *c = Condition {
                last_transition_time: since,
                ..Condition::because(&c.type_, reason, message.clone())
            };
        }
        self.keep(evidence, NODE_AGENT, vec![line]);
        agent
    }

    pub(super) fn keep(&self, evidence: &mut BTreeMap<String, Vec<String>>, ty: &str, lines: Vec<String>) {
        if self.opts.evidence {
            evidence.entry(ty.to_string()).or_default().extend(lines);
        }
    }
}

/// The reasons readiness gives the node agent's conditions when its Lease cannot vouch for
/// them: edpm-agent writes these (the agent writes the rest), so the stored object says what
/// `status show` says.
pub(super) const AGENT_VERDICTS: [&Reason; 4] =
    [&AGENT_HEARTBEAT_EXPIRED, &AGENT_CLOCK_SKEW, &AGENT_LEASE_UNREADABLE, &AGENT_LEASE_MISSING];

/// Whether `c` is one of the node agent's conditions as readiness turned it Unknown.
pub(crate) fn is_agent_verdict(c: &Condition) -> bool {
    c.status == Status::Unknown && AGENT_VERDICTS.iter().any(|r| c.has_reason(r))
}

/// A phase of one node from its services' states: True when all are; else the worst one
/// (lib-common priority) with a count in front. Drift turns a True phase into ConfigDrift.
pub(super) fn phase_condition(
    ty: &str,
    label: &str,
    members: &[&(&str, Phase, ServiceState)],
    drift: Option<&str>,
) -> (Condition, Option<Block>) {
    // The Nova check is a member, not a service: the count is of services deployed.
    let services = || members.iter().filter(|(n, _, _)| *n != super::nova::NOVA_MEMBER);
    let total = services().count();
    let done = services().filter(|(_, _, s)| s.cond.is_true()).count();
    if members.iter().all(|(_, _, s)| s.cond.is_true()) {
        if let Some(d) = drift
            && total > 0
        {
            let block =
                Block { reason: CONFIG_DRIFT.name.into(), message: d.to_string(), ..Block::default() };
            return (Condition::because(ty, &CONFIG_DRIFT, d.to_string()), Some(block));
        }
        let mut msg = if total == 0 {
            format!("no {label} services")
        } else {
            format!("{done}/{total} {label} services deployed")
        };
        if members.iter().any(|(n, _, _)| *n == super::nova::NOVA_MEMBER) {
            msg.push_str("; nova-compute serving (Nova)");
        }
        // True since the last of its members became True, when each says when.
        let since = newest_known(members.iter().map(|(_, _, s)| &s.cond));
        return (Condition { last_transition_time: since, ..Condition::true_(ty, msg) }, None);
    }
    // Of equals, the first in the NodeSet's order (the mirror keeps the later of equals): the
    // first service missing, the one that runs first.
    let worst =
        mirror(members.iter().rev().map(|(_, _, s)| &s.cond), ty).expect("not all True, so not empty");
    let source = worst_source(members, &worst);
    let member = members.iter().find(|(_, _, s)| s.cond.type_ == source);
    let service = member.map(|(n, _, _)| *n).unwrap_or("");
    let message = format!("{done}/{total} {label} services deployed; {service}: {}", worst.message);
    let block = Block {
        service: service.to_string(),
        reason: worst.reason.clone(),
        message: worst.message.clone(),
        cause: member.and_then(|(_, _, s)| s.cause.clone()),
    };
    (Condition { message, ..worst }, Some(block))
}

/// The newest of `conds`' transition times when every one is known (not zero), else zero
/// (unknown): a condition True because all of them are became True at the last of them.
pub(super) fn newest_known<'c>(conds: impl Iterator<Item = &'c Condition>) -> Time {
    let mut newest = None;
    for c in conds {
        if c.last_transition_time == Time(0) {
            return Time(0);
        }
        newest = newest.max(Some(c.last_transition_time));
    }
    newest.unwrap_or(Time(0))
}

/// The service condition a mirror picked (same status, reason, severity, message and time).
pub(super) fn worst_source(members: &[&(&str, Phase, ServiceState)], worst: &Condition) -> String {
    members
        .iter()
        .map(|(_, _, s)| &s.cond)
        .find(|c| {
            c.status == worst.status
                && c.reason == worst.reason
                && c.severity == worst.severity
                && c.message == worst.message
                && c.last_transition_time == worst.last_transition_time
        })
        .map(|c| c.type_.clone())
        .unwrap_or_default()
}

pub(super) fn order(a: &Condition, b: &Condition) -> std::cmp::Ordering {
    match (a.type_ == READY, b.type_ == READY) {
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.type_.cmp(&b.type_),
    }
}

/// kstatus: Reconciling while a Deployment works on this node, Stalled on a terminal failure
/// no running Deployment will retry.
fn kstatus(running: Option<(&str, Time)>, idle: Time, stalled: Option<(&str, Condition)>) -> [Condition; 2] {
    let reconciling = match running {
        // Since the Deployment's creation, when known.
        Some((what, since)) => Condition {
            last_transition_time: since,
            ..Condition::because(RECONCILING, &reasons::DEPLOYING, what)
        },
        // Since the last Deployment on the node finished, when known.
        None => Condition {
            last_transition_time: idle,
            ..Condition::because(RECONCILING, &reasons::IDLE, "no Deployment is running on this node")
        },
    };
    let stalled = match (stalled, running) {
        // Stalled since the failure that stalls it.
        (Some((s, failed)), None) => Condition {
            reason: failed.reason,
            last_transition_time: failed.last_transition_time,
            ..Condition::true_(STALLED, format!("{s}: {}", failed.message))
        },
        // Not stalled since what would have ended a stall: the running Deployment's creation (a
        // retry), else the last Deployment on the node finishing (it did not fail for good, or
        // this would be True); dated as `Reconciling` is, and unknown where that is.
        _ => Condition {
            last_transition_time: running.map_or(idle, |(_, since)| since),
            ..Condition::because(STALLED, &reasons::PROGRESSING, "no terminal failure on this node")
        },
    };
    [reconciling, stalled]
}

/// The node's conditions: times carried over from the last report, the agent's own as it
/// reported them, and `Ready` over the phases and the agent's (keeping its time while it
/// says the same); with the types whose time no evidence gave ([`NodeView::untimed`]).
fn node_conditions(
    fresh: Vec<Condition>,
    agent: Vec<Condition>,
    previous: Option<&Conditions>,
    now: Time,
) -> (Conditions, BTreeSet<String>) {
    let empty = Conditions::default();
    let previous = previous.unwrap_or(&empty);
    // The agent's conditions as it wrote them carry their own times; turned Unknown, they get
    // the time readiness first said so, as every condition of ours does.
    let mut fresh = fresh;
    fresh.extend(agent);
    let (mut conds, mut untimed) = carry_times(fresh, previous, now);
    conds.0.sort_by(order);
    let mut sub: Vec<&Condition> =
        conds.iter().filter(|c| crate::condition::types::counts_toward_ready(&c.type_)).collect();
    // Reverse order of names, so that of equals the mirror (which keeps the later) keeps the
    // earliest phase (BaremetalProvision < Infrastructure < Services): what runs first.
    sub.sort_by(|a, b| b.type_.cmp(&a.type_));
    let ready =
        derived(READY, &sub, &untimed, "node ready: bare metal, infrastructure and OpenStack services");
    let ready = ready.unwrap_or_else(|| Condition::because(READY, &reasons::INIT, "no conditions"));
    set_derived(&mut conds, &mut untimed, ready, previous, now);
    (conds, untimed)
}

/// Times carried over from the last report ([`Conditions::carry_times_noting`]), but the
/// evidence's first: a condition the evidence dates keeps that time, whatever a report stored
/// for it (a report stores the moment it first said what no evidence dated). With the types no
/// time was known for.
pub(super) fn carry_times(
    fresh: Vec<Condition>,
    previous: &Conditions,
    now: Time,
) -> (Conditions, BTreeSet<String>) {
    let dated: BTreeMap<String, Time> = fresh
        .iter()
        .filter(|c| c.last_transition_time != Time(0))
        .map(|c| (c.type_.clone(), c.last_transition_time))
        .collect();
    let (mut conds, stamped) = Conditions::carry_times_noting(fresh, previous, now);
    for c in &mut conds.0 {
        if let Some(t) = dated.get(&c.type_) {
            c.last_transition_time = *t;
        }
    }
    (conds, stamped.into_iter().collect())
}

/// A condition over `sub` (stamped already; `untimed` names those no evidence timed): True,
/// with `true_message`, since the newest of them when all are True and timed; else lib-common's
/// mirror, with its source's time unless that time is only the clock's (then zero: unknown).
pub(super) fn derived(
    ty: &str,
    sub: &[&Condition],
    untimed: &BTreeSet<String>,
    true_message: &str,
) -> Option<Condition> {
    let timed = |c: &&Condition| !untimed.contains(&c.type_);
    if sub.iter().all(|c| c.is_true()) {
        let since = if sub.iter().all(timed) { newest_known(sub.iter().copied()) } else { Time(0) };
        return Some(Condition { last_transition_time: since, ..Condition::true_(ty, true_message) });
    }
    let source = crate::condition::mirror_source(sub.iter().copied())?;
    let m = mirror(std::iter::once(source), ty)?;
    Some(if timed(&source) { m } else { Condition { last_transition_time: Time(0), ..m } })
}

/// Sets a derived condition (`Ready`): its time is the stored one while it says the same,
/// else its own, else (none known) `now`, and then it is untimed.
pub(super) fn set_derived(
    conds: &mut Conditions,
    untimed: &mut BTreeSet<String>,
    c: Condition,
    previous: &Conditions,
    now: Time,
) {
    // The evidence's time first; a stored one only where the evidence gives none.
    let c = match previous.get(&c.type_) {
        Some(p) if !c.differs_from(p) && c.last_transition_time == Time(0) => {
            Condition { last_transition_time: p.last_transition_time, ..c }
        }
        _ => c,
    };
    if c.last_transition_time == Time(0) {
        untimed.insert(c.type_.clone());
    } else {
        untimed.remove(&c.type_);
    }
    conds.set(c, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time the evidence gives wins over the one a report stored for the same condition
    /// (a report stores its own moment for what nothing dated); without one, the stored time
    /// stays, and with neither it is `now`, noted as untimed.
    #[test]
    fn the_evidences_time_wins_over_a_reports() {
        let t = Time::parse;
        let c = |ty: &str, at: &str| Condition {
            last_transition_time: t(at).unwrap_or_default(),
            ..Condition::true_(ty, "m")
        };
        let previous = Conditions(vec![c("A", "2026-11-27T12:00:00Z"), c("B", "2026-11-27T12:00:00Z")]);
        let fresh = vec![c("A", "2026-11-20T09:40:00Z"), c("B", ""), c("C", "")];
        let (out, untimed) = carry_times(fresh, &previous, t("2026-11-28T00:00:00Z").unwrap());
        let at = |ty: &str| out.get(ty).unwrap().last_transition_time;
        assert_eq!(at("A"), t("2026-11-20T09:40:00Z").unwrap());
        assert_eq!(at("B"), t("2026-11-27T12:00:00Z").unwrap());
        assert_eq!(at("C"), t("2026-11-28T00:00:00Z").unwrap());
        assert_eq!(untimed.into_iter().collect::<Vec<_>>(), ["C"]);
    }
}
