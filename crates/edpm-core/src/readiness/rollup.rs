//! Per NodeSet: upstream's own DeploymentReady and service conditions, and the phase rollups
//! that count nodes and name the blocking ones.

use super::*;
use crate::condition::reasons::{self, CONFIG_DRIFT, ERROR, REQUESTED, RETRYING};

impl<'a> GroupContext<'a> {
    /// The NodeSet's (or Role's) own conditions.
    pub(super) fn rollup(
        &self,
        nodes: &[NodeView],
        reports: &HashMap<&str, &Conditions>,
        now: Time,
    ) -> NodeSetView {
        let mut evidence: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut fresh = Vec::new();
        let (deployment_ready, dr_ev) = self.deployment_ready();
        self.keep(&mut evidence, DEPLOYMENT_READY, dr_ev);
        fresh.push(deployment_ready);
        // upstream's service conditions: those of the newest run with status.
        if let Some(run) = self.runs.iter().rev().find(|r| r.conds.is_some()) {
            fresh.extend(
                run.conds
                    .into_iter()
                    .flat_map(|c| c.iter())
                    .filter(|c| c.type_.starts_with("Service"))
                    .cloned(),
            );
        }
        // With no nodes, the phases are the NodeSet's own: a node that every run covers.
        let virtual_node;
        let counted: Vec<&NodeView> = if nodes.is_empty() {
            virtual_node = self.virtual_node(now);
            vec![&virtual_node]
        } else {
            nodes.iter().collect()
        };
        let counts = counts(nodes);
        for phase in crate::condition::types::phases() {
            if let (Some(node_ty), Some(ty)) = (phase.node, phase.nodeset) {
                fresh.push(rollup_condition(ty, node_ty, &counted, nodes.len()));
            }
        }
        for h in HOLDINGS {
            let (c, ev) = (h.nodeset)(self, nodes);
            self.keep(&mut evidence, &c.type_, ev);
            fresh.push(c);
        }
        if self.opts.evidence {
            for (node_ty, ty) in [(SERVICES, NODESET_SERVICES), (INFRASTRUCTURE, NODESET_INFRASTRUCTURE)] {
                let blocking =
                    nodes.iter().filter_map(|n| n.blocking.get(node_ty).map(|b| format!("{}: {b}", n.node)));
                evidence.insert(ty.to_string(), blocking.collect());
            }
        }
        let object = names::nodeset_object(&self.group.name);
        let empty = Conditions::default();
        let previous = reports.get(object.as_str()).copied().unwrap_or(&empty);
        let (conditions, untimed) = nodeset_conditions(fresh, previous, &counts, nodes.is_empty(), now);
        NodeSetView {
            object,
            name: self.group.name.clone(),
            kind: owner_kind(self.group),
            owner: self.group_owner(),
            namespace: self.group_namespace(),
            conditions,
            counts,
            evidence,
            untimed,
        }
    }

    pub(super) fn virtual_node(&self, now: Time) -> NodeView {
        let m = Member {
            key: self.group.name.clone(),
            id: self.group.id.clone(),
            host_name: crate::model::Field {
                value: self.group.name.clone(),
                path: String::new().into(),
                defaulted: true,
            },
            section: Default::default(),
            own_cell: None,
        };
        self.node(&m, &HashMap::new(), &HashMap::new(), now)
    }

    /// upstream's NodeSet `DeploymentReady` from the newest run with status.
    pub(super) fn deployment_ready(&self) -> (Condition, Vec<String>) {
        let latest = self.runs.iter().rev().find(|r| r.conds.is_some());
        let Some(run) = latest else {
            if let Some(c) = self.status.and_then(|s| s.conditions.get(DEPLOYMENT_READY)) {
                return (
                    c.clone(),
                    vec![format!(
                        "NodeSet {} status.conditions DeploymentReady, as upstream reports it",
                        self.group.name
                    )],
                );
            }
            return (
                Condition::because(DEPLOYMENT_READY, &REQUESTED, WAITING_FOR_DEPLOYMENT),
                vec!["no OpenStackDataPlaneDeployment names this NodeSet".into()],
            );
        };
        let line = format!("newest Deployment with status: {}", run.name);
        // Since the run's own NodeSetDeploymentReady changed, when it has one.
        let since = run.nodeset_condition().map_or(Time(0), |c| c.last_transition_time);
        let c = match run.state() {
            RunState::Done if self.drift.is_some() => {
                Condition::because(DEPLOYMENT_READY, &REQUESTED, WAITING_FOR_DEPLOYMENT)
            }
            RunState::Done => Condition::true_(DEPLOYMENT_READY, DEPLOYMENT_COMPLETED),
            RunState::Running => Condition::because(DEPLOYMENT_READY, &REQUESTED, DEPLOYMENT_IN_PROGRESS),
            RunState::Failed { .. } => Condition::because(
                DEPLOYMENT_READY,
                &ERROR,
                run.nodeset_condition().map(|c| c.message.clone()).unwrap_or_default(),
            ),
            RunState::NotStarted => Condition::because(DEPLOYMENT_READY, &REQUESTED, WAITING_FOR_DEPLOYMENT),
        };
        let mut lines = vec![line];
        lines.extend(self.drift.clone());
        // Drift is not dated: when the NodeSet changed is not kept.
        let since = if self.drift.is_some() { Time(0) } else { since };
        (Condition { last_transition_time: since, ..c }, lines)
    }
}

/// A NodeSet phase from its nodes' phase conditions, in upstream's reason vocabulary (`Error`,
/// `Requested`, with our `ConfigDrift`), counting nodes and naming the ones that block.
pub(super) fn rollup_condition(ty: &str, node_ty: &str, nodes: &[&NodeView], total: usize) -> Condition {
    let conds: Vec<(&NodeView, &Condition)> =
        nodes.iter().filter_map(|n| n.conditions.get(node_ty).map(|c| (*n, c))).collect();
    let ready = conds.iter().filter(|(_, c)| c.is_true()).count();
    // A node's condition whose time is only the clock's says nothing of when it changed.
    let timed = |n: &NodeView, c: &Condition| !n.untimed.contains(&c.type_);
    if conds.iter().all(|(_, c)| c.is_true()) {
        let msg = if total == 0 {
            "no nodes; the NodeSet's own deployment is complete".to_string()
        } else {
            format!("{ready}/{total} nodes ready")
        };
        // Ready since the last of its nodes became ready, when each says when.
        let since = if conds.iter().all(|(n, c)| timed(n, c)) {
            super::node::newest_known(conds.iter().map(|(_, c)| *c))
        } else {
            Time(0)
        };
        return Condition { last_transition_time: since, ..Condition::true_(ty, msg) };
    }
    let source = crate::condition::mirror_source(conds.iter().map(|(_, c)| *c)).expect("not all True");
    let worst = mirror(std::iter::once(source), ty).expect("one condition");
    let untimed_source = conds.iter().any(|(n, c)| std::ptr::eq(*c, source) && !timed(n, c));
    let worst = if untimed_source { Condition { last_transition_time: Time(0), ..worst } } else { worst };
    let blocking: Vec<String> = conds
        .iter()
        .filter(|(_, c)| !c.is_true())
        .map(|(n, c)| match n.blocking.get(node_ty) {
            Some(b) => format!("{} ({b})", n.node),
            None => format!("{} ({})", n.node, c.reason),
        })
        .collect();
    let shown: Vec<&String> = blocking.iter().take(5).collect();
    let more = if blocking.len() > 5 { format!(", and {} more", blocking.len() - 5) } else { String::new() };
    let message = if total == 0 {
        format!("no nodes; {}", worst.message)
    } else {
        format!(
            "{ready}/{total} nodes ready; blocking: {}{more}",
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )
    };
    // The worst node's severity stays; the reason is upstream's word for it (the vocabulary
    // lists the severities each is written with).
    let reason = match (worst.status, worst.severity) {
        (Status::False, Severity::Error) => &ERROR,
        (Status::False, Severity::Warning) if worst.has_reason(&CONFIG_DRIFT) => &CONFIG_DRIFT,
        // A Job retrying a failed attempt is still in progress, in upstream's words; the
        // severity (Warning) and the blocking node's reason say it failed once.
        (Status::False, Severity::Warning) if worst.has_reason(&RETRYING) => &REQUESTED,
        (Status::False, Severity::Warning) => &ERROR,
        (Status::False, _) => &REQUESTED,
        // True or Unknown: the worst node's own reason.
        _ => return Condition { type_: ty.to_string(), message, ..worst },
    };
    Condition { type_: ty.to_string(), reason: reason.name.to_string(), message, ..worst }
}

/// How many of the nodes are ready, per phase and in all; updated, with current inputs, and
/// degraded.
pub fn counts<'a>(nodes: impl IntoIterator<Item = &'a NodeView> + Clone) -> NodeCounts {
    let ready = |ty: &str| {
        nodes.clone().into_iter().filter(|n| n.conditions.get(ty).is_some_and(Condition::is_true)).count()
            as u32
    };
    let mut counts = NodeCounts {
        total: nodes.clone().into_iter().count() as u32,
        baremetal_ready: ready(BAREMETAL),
        infrastructure_ready: ready(INFRASTRUCTURE),
        services_ready: ready(SERVICES),
        ready: ready(READY),
        degraded: nodes
            .clone()
            .into_iter()
            .filter(|n| {
                n.conditions
                    .get(READY)
                    .is_some_and(|c| c.status == Status::False && c.severity == Severity::Error)
            })
            .count() as u32,
        ..Default::default()
    };
    for (ty, c) in crate::condition::types::counted() {
        if let Some(n) = counts.held_mut(c.field) {
            *n = ready(ty);
        }
    }
    counts.summary = format!("{}/{}", counts.ready, counts.total);
    counts
}

/// The NodeSet's conditions: times carried over from the last report, and `Ready` over
/// DeploymentReady and the phase rollups, the node count in front (keeping its time while it
/// says the same); with the types whose time no evidence gave ([`NodeSetView::untimed`]).
fn nodeset_conditions(
    fresh: Vec<Condition>,
    previous: &Conditions,
    counts: &NodeCounts,
    no_nodes: bool,
    now: Time,
) -> (Conditions, BTreeSet<String>) {
    let (mut conds, mut untimed) = super::node::carry_times(fresh, previous, now);
    let sub: Vec<&Condition> =
        conds.iter().filter(|c| crate::condition::types::counts_toward_nodeset_ready(&c.type_)).collect();
    let all_true = sub.iter().all(|c| c.is_true());
    let ready = super::node::derived(READY, &sub, &untimed, "NodeSet Ready")
        .unwrap_or_else(|| Condition::because(READY, &reasons::INIT, "no conditions"));
    // "7/10 nodes ready; blocking: …" from a rollup; the count in front of anything else.
    let ready = if all_true || ready.message.starts_with(&format!("{}/", counts.ready)) || no_nodes {
        ready
    } else {
        Condition { message: format!("{} nodes ready; {}", counts.summary, ready.message), ..ready }
    };
    super::node::set_derived(&mut conds, &mut untimed, ready, previous, now);
    (conds, untimed)
}
