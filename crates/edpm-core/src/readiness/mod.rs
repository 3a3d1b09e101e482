//! Readiness: phase -1 (bare metal), phase 0 (infrastructure) and phase 1 (OpenStack
//! services) per node and per NodeSet, computed from what the snapshot holds.
//!
//! Pure: the snapshot, the model, the phase map and `now` in; conditions (lib-common's shape
//! and rules, `crate::condition`) and, on request, the evidence behind each out.
//!
//! Per node, for each service the node runs, the newest Deployment that ran that service on
//! that node decides (a node outside an `ansibleLimit` keeps its earlier state; a service of a
//! `servicesOverride` only counts while that Deployment is the node's newest). A failed Job
//! fails only the hosts its summary names (`HostFailed`, `HostUnreachable`); the others are
//! `OtherHostsFailed`. Phases roll the services up by the phase map; `Ready` mirrors the phases
//! and the node agent's conditions; a Lease that expired turns the agent's conditions Unknown.
//! Per NodeSet, `DeploymentReady` and the service conditions follow upstream's own rules (so
//! they agree with upstream's NodeSet status), and the phase rollups count nodes.

pub mod api;
mod baremetal;
pub mod deploy;
mod history;
mod inputs;
pub mod jobs;
pub mod limit;
pub mod names;
mod node;
mod nova;
pub mod plan;
pub mod report;
mod rollup;
mod service;
pub mod show;
pub mod version;
pub mod wait;

/// A NodeSet's counts of its nodes (`EDPMNodeSetStatus` `status.nodes`), as the controller's
/// `edpm_nodeset_node_count` reports them too.
pub use rollup::counts as node_counts;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::condition::{Condition, Conditions, READY, Severity, Status, Time, mirror};
use crate::model::{GroupKind, HostGroup, Member, Model};
use crate::services::Phase;
use crate::snapshot::Snapshot;
use crate::snapshot::evidence::{BaremetalSet, LegacyStatus, NodeSetStatus};

use self::api::{NodeCounts, OwnerKind};
use self::deploy::{Outcome, Run, RunState};
use self::limit::{Covers, Limits};
use self::service::ServiceState;

pub use crate::condition::types::{
    BAREMETAL, DEPLOYMENT_READY, INFRASTRUCTURE, NODE_AGENT, NODESET_BAREMETAL, NODESET_INFRASTRUCTURE,
    NODESET_SERVICES, RECONCILING, SERVICES, STALLED, is_agent_condition,
};

/// What a node runs and holds, judged outside `Ready` (a node behind still serves), each by a
/// module of its own: the node's condition from what its evaluation gathered ([`Held`]), and
/// the NodeSet's over its nodes. The node and the roll-up evaluate them in this order; a new
/// type of the kind is its module and its line here (ARCHITECTURE.md, "Adding a condition
/// type").
const HOLDINGS: &[Holding] = &[version::HOLDING, inputs::HOLDING];

/// One of [`HOLDINGS`].
struct Holding {
    /// The node's condition type (the evidence's key).
    ty: &'static str,
    /// The node's condition and the evidence behind it.
    node: fn(&GroupContext, &Member, &Held) -> (Condition, Vec<String>),
    /// The NodeSet's condition over its nodes, and the evidence behind it.
    nodeset: fn(&GroupContext, &[NodeView]) -> (Condition, Vec<String>),
}

/// What a node's evaluation gathered that [`HOLDINGS`] judge.
struct Held<'h> {
    /// What was last deployed to the node (`version`).
    deployed: &'h crate::snapshot::evidence::Deployed,
    /// The Secrets and ConfigMaps last delivered to it (`inputs`).
    delivered: &'h [crate::snapshot::evidence::Delivery],
}

/// upstream's messages.
const WAITING_FOR_DEPLOYMENT: &str = "NodeSet setup ready, waiting for OpenStackDataPlaneDeployment...";
const DEPLOYMENT_IN_PROGRESS: &str = "Deployment in progress";
const DEPLOYMENT_COMPLETED: &str = "Deployment completed";

/// Which phase each service belongs to: the catalogue's (upstream's infrastructure services
/// are phase 0, everything else phase 1), overridden per service from the config file.
#[derive(Debug, Clone, Default)]
pub struct PhaseMap {
    pub overrides: BTreeMap<String, Phase>,
}

impl PhaseMap {
    pub fn phase(&self, service: &str) -> Phase {
        self.overrides
            .get(service)
            .copied()
            .unwrap_or_else(|| crate::services::find(service).map_or(Phase::Services, |s| s.phase))
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Keep the evidence behind each condition (for `status explain`).
    pub evidence: bool,
}

/// The object a status object is owned by (for its owner reference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub kind: String,
    pub name: String,
    pub uid: Option<String>,
}

/// One node's readiness.
#[derive(Debug, Clone)]
pub struct NodeView {
    /// The `EDPMNodeStatus` object name.
    pub object: String,
    pub node: String,
    pub host: String,
    pub host_name: String,
    pub nodeset: String,
    pub kind: OwnerKind,
    pub owner: Owner,
    pub namespace: Option<String>,
    pub conditions: Conditions,
    /// Condition type → the evidence lines behind it (with [`Options::evidence`]).
    pub evidence: BTreeMap<String, Vec<String>>,
    /// Per phase condition type: the service and reason that block it (rollup messages), and
    /// why (`status show`'s rows).
    pub blocking: BTreeMap<&'static str, Block>,
    /// The node's last runs, oldest first (`history`).
    pub runs: Vec<crate::snapshot::evidence::NodeRun>,
    /// What was last deployed to the node: its OpenStack version and images (`version`).
    pub deployed: crate::snapshot::evidence::Deployed,
    /// The Secrets and ConfigMaps last delivered to the node (`inputs`).
    pub delivered: Vec<crate::snapshot::evidence::Delivery>,
    /// Behind the target version: the target and the first update step not run (`version`).
    pub behind: Option<(String, &'static str)>,
    /// The condition types whose `lastTransitionTime` is this evaluation's `now` because no
    /// evidence and no stored status said when they changed: what `report` writes (as
    /// lib-common stamps a new condition), but a view says "unknown", never "since now".
    pub untimed: BTreeSet<String>,
}

/// What blocks a phase on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Block {
    /// The service whose condition blocks (empty for phase -1 and configuration drift).
    pub service: String,
    pub reason: String,
    /// That condition's whole message.
    pub message: String,
    /// Why, in short: the failed task's own message when a run gave one (the pod's
    /// `hostFailures`), else `None` and the message is all there is.
    pub cause: Option<String>,
}

impl Block {
    /// The short cause: the failed task's message, else the condition's.
    pub fn why(&self) -> &str {
        self.cause.as_deref().unwrap_or(&self.message)
    }
}

/// `nova: HostFailed`, as rollup messages name a blocking node's cause.
impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.service.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.service, self.reason)
        }
    }
}

/// One NodeSet's (or Role's) readiness.
#[derive(Debug, Clone)]
pub struct NodeSetView {
    pub object: String,
    pub name: String,
    pub kind: OwnerKind,
    pub owner: Owner,
    pub namespace: Option<String>,
    pub conditions: Conditions,
    pub counts: NodeCounts,
    pub evidence: BTreeMap<String, Vec<String>>,
    /// As [`NodeView::untimed`].
    pub untimed: BTreeSet<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Readiness {
    pub nodes: Vec<NodeView>,
    pub nodesets: Vec<NodeSetView>,
}

/// One group's readiness: its nodes' views and its NodeSet's (or Role's) rollup.
pub type GroupReadiness = (Vec<NodeView>, NodeSetView);

/// How [`evaluate_spread`] runs its per-group work: `spread(n, work)` returns `work(0..n)` in
/// order, one after the other ([`evaluate`]) or over cores (the shell's `parallel::map`).
pub type Spread<'s> = &'s dyn Fn(usize, &(dyn Fn(usize) -> GroupReadiness + Sync)) -> Vec<GroupReadiness>;

/// Below this many nodes, the groups are evaluated one after the other whatever `spread` is:
/// starting threads costs more than they save.
const SPREAD_FROM_NODES: usize = 2_000;

/// Computes every node's and every NodeSet's conditions. Transition times carry over from the
/// status objects the snapshot holds (edpm-agent's own, as written last time).
pub fn evaluate(snap: &Snapshot, model: &Model, phases: &PhaseMap, opts: Options, now: Time) -> Readiness {
    evaluate_spread(snap, model, phases, opts, now, &|n, work| (0..n).map(work).collect())
}

/// [`evaluate`], with the groups' work run through `spread`. Groups are independent and come
/// back in their order, so the result is the same however the caller spread them.
pub fn evaluate_spread(
    snap: &Snapshot,
    model: &Model,
    phases: &PhaseMap,
    opts: Options,
    now: Time,
    spread: Spread,
) -> Readiness {
    let ev = &snap.evidence;
    let reports: HashMap<&str, &crate::snapshot::evidence::NodeReport> =
        ev.reports.iter().map(|r| (r.id.name.as_str(), r)).collect();
    let rollups: HashMap<&str, &Conditions> =
        ev.rollups.iter().map(|r| (r.id.name.as_str(), &r.status.conditions)).collect();
    let leases: HashMap<&str, &crate::snapshot::evidence::Lease> =
        ev.leases.iter().map(|l| (l.id.name.as_str(), l)).collect();
    let jobs = jobs::Jobs::new(ev);
    let limits = Limits::new(ev, &limit::Shape::of(model));
    let saved = nova_saved(snap);
    let nova = snap.evidence.nova.as_deref().or(saved.as_ref()).map(|e| nova::NovaContext::new(snap, e));
    let one = |i: usize| -> GroupReadiness {
        let group = &model.groups[i];
        let cx = GroupContext::new(snap, group, phases, &jobs, &limits, opts, nova.as_ref());
        let nodes: Vec<NodeView> = group.members.iter().map(|m| cx.node(m, &reports, &leases, now)).collect();
        let set = cx.rollup(&nodes, &rollups, now);
        (nodes, set)
    };
    let nodes: usize = model.groups.iter().map(|g| g.members.len()).sum();
    let parts = if nodes < SPREAD_FROM_NODES {
        (0..model.groups.len()).map(one).collect()
    } else {
        spread(model.groups.len(), &one)
    };
    let mut out = Readiness::default();
    for (n, set) in parts {
        out.nodes.extend(n);
        out.nodesets.push(set);
    }
    out
}

/// A directory source's saved Nova answer, when Nova was not asked live. (The shell refuses
/// a broken one before it gets here; should one get here, it reads as Nova unavailable.)
fn nova_saved(snap: &Snapshot) -> Option<crate::nova::NovaEvidence> {
    use crate::nova::NovaEvidence;
    if snap.evidence.nova.is_some() {
        return None;
    }
    match crate::nova::answer::from_saved(&snap.evidence.nova_saved) {
        Ok(a) => a.map(NovaEvidence::Answer),
        Err(message) => Some(NovaEvidence::Unavailable { message, since: None, last_answer: None }),
    }
}

/// The names a host may go by in a Job's summary: its inventory name, its key in the NodeSet,
/// its host name.
fn member_names(m: &Member) -> [&str; 3] {
    [m.inventory_hostname(), m.key.as_str(), m.host_name.value.as_str()]
}

/// What one NodeSet's nodes share: its runs, its services and their phases, its status.
struct GroupContext<'a> {
    snap: &'a Snapshot,
    group: &'a HostGroup,
    jobs: &'a jobs::Jobs<'a>,
    /// This NodeSet's Jobs: (service, deployment, Job), for the nodes' run history.
    own_jobs: Vec<(&'a str, &'a str, &'a crate::snapshot::evidence::Job)>,
    /// Those of them that failed for good: (service, deployment), what a True service
    /// condition is checked against (most NodeSets have none, so the check costs nothing).
    failed_jobs: Vec<(&'a str, &'a str)>,
    opts: Options,
    status: Option<&'a NodeSetStatus>,
    legacy: Option<&'a LegacyStatus>,
    runs: Vec<Run<'a>>,
    /// Whether any run carries status: when none does, the NodeSet's own DeploymentReady is
    /// the only evidence.
    any_run_status: bool,
    bms: Option<&'a BaremetalSet>,
    drift: Option<String>,
    /// Each run's state, computed once.
    states: Vec<RunState>,
    /// Every service a node of this group can have: its condition type, whether it is global,
    /// whether the NodeSet lists it, its phase.
    svcs: Vec<SvcInfo<'a>>,
    /// What each run says of each service it runs, computed once for all nodes.
    outcomes: Vec<Vec<Option<Outcome<'a>>>>,
    /// Each run's services, as indices into `svcs`.
    run_svcs: Vec<Vec<usize>>,
    /// The Nova evidence, when there is any.
    nova: Option<&'a nova::NovaContext<'a>>,
    /// This group's service that deploys nova-compute (type `nova`).
    nova_service: Option<&'a str>,
    /// The namespace's OpenStackVersion target, for `VersionCurrent`.
    target: version::Target,
    /// The recorded Secrets' and ConfigMaps' hashes as they are now (`inputs`).
    hashes_now: BTreeMap<(String, String), Option<String>>,
    /// The snapshot's Secrets by name: each node looks up every recorded one (a NodeSet of
    /// 100 nodes with 4 certificates each records 400), which a scan made quadratic.
    secrets_by_name: std::collections::HashMap<
        &'a str,
        &'a crate::snapshot::resource::Object<crate::snapshot::SecretData>,
    >,
    /// What each run that failed for good mounted alike for every host it completed, computed
    /// on first use (`inputs::failed_run`): the same for each of its nodes.
    failed_runs: Vec<std::cell::OnceCell<Option<inputs::FailedRun>>>,
}

struct SvcInfo<'a> {
    name: &'a str,
    ty: String,
    global: bool,
    in_group: bool,
    phase: Phase,
}

impl<'a> GroupContext<'a> {
    #[allow(
        clippy::too_many_lines,
        reason = "gathers a group's evidence into one context; split, each part would take the same borrows"
    )]
    fn new(
        snap: &'a Snapshot,
        group: &'a HostGroup,
        phases: &'a PhaseMap,
        jobs: &'a jobs::Jobs<'a>,
        limits: &'a Limits,
        opts: Options,
        nova: Option<&'a nova::NovaContext<'a>>,
    ) -> GroupContext<'a> {
        let ev = &snap.evidence;
        let (status, legacy) = match group.kind {
            GroupKind::NodeSet => (ev.nodesets.get(&group.name), None),
            GroupKind::Role => (None, ev.roles.get(&group.name)),
        };
        let runs = deploy::runs(ev, &group.name, status, &group.services.value, limits);
        let any_run_status = runs.iter().any(|r| r.conds.is_some());
        let bms = ev.baremetal_sets.iter().find(|b| b.id.name == group.name);
        let states: Vec<RunState> = runs.iter().map(Run::state).collect();
        // Services by index: no hashing per node.
        let mut names_idx: HashMap<&'a str, usize> = HashMap::new();
        let mut svcs: Vec<SvcInfo<'a>> = Vec::new();
        let listed = group.services.value.iter().map(String::as_str);
        for s in listed.chain(runs.iter().flat_map(|r| r.services.iter().copied())) {
            names_idx.entry(s).or_insert_with(|| {
                svcs.push(SvcInfo {
                    name: s,
                    ty: crate::condition::types::service_deployment(s),
                    global: snap.service_is_global(s),
                    in_group: group.services.value.iter().any(|x| x == s),
                    phase: phases.phase(s),
                });
                svcs.len() - 1
            });
        }
        let run_svcs: Vec<Vec<usize>> =
            runs.iter().map(|r| r.services.iter().map(|s| names_idx[s]).collect()).collect();
        let outcomes: Vec<Vec<Option<Outcome<'a>>>> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut row = vec![None; svcs.len()];
                for &k in &run_svcs[i] {
                    row[k] = Some(r.outcome_with(&svcs[k].ty, svcs[k].global, states[i]));
                }
                row
            })
            .collect();
        let mut cx = GroupContext {
            snap,
            group,
            jobs,
            failed_jobs: jobs
                .of_nodeset(&group.name)
                .into_iter()
                .filter(|(_, _, j)| j.condition("Failed").is_some())
                .map(|(s, d, _)| (s, d))
                .collect(),
            own_jobs: jobs.of_nodeset(&group.name),
            opts,
            status,
            legacy,
            runs,
            any_run_status,
            bms,
            drift: None,
            states,
            svcs,
            outcomes,
            run_svcs,
            nova_service: nova.and_then(|_| crate::nova_cell::nova_service(snap, group)),
            nova,
            target: version::Target::None { namespace: String::new() },
            hashes_now: BTreeMap::new(),
            secrets_by_name: snap.secrets.iter().map(|o| (o.id.name.as_str(), o)).collect(),
            failed_runs: Vec::new(),
        };
        cx.failed_runs = (0..cx.runs.len()).map(|_| std::cell::OnceCell::new()).collect();
        cx.hashes_now = inputs::hashes_now(snap, &cx.runs, status);
        cx.drift = cx.drift();
        cx.target = version::target(snap, cx.group_namespace().as_deref());
        cx
    }

    /// The NodeSet changed since the Deployment that last completed on it: its spec
    /// (`configHash`), or, when provisioned by edpm-agent's bare-metal path, its hosts
    /// (`bmhRefHash`).
    fn drift(&self) -> Option<String> {
        let s = self.status?;
        let done = self.runs.iter().rev().find(|r| r.state() == RunState::Done)?;
        let ns = self.group.name.as_str();
        let mut problems = Vec::new();
        if let (Some(d), Some(now)) = (done.deployment, s.config_hash.as_deref()) {
            if let Some(then) = d.status.node_set_hashes.get(ns)
                && then != now
            {
                problems.push(format!("configHash {} (deployed {})", short(now), short(then)));
            }
            if !self.group.pre_provisioned
                && let (Some(then), Some(now)) = (d.status.bmh_ref_hashes.get(ns), s.bmh_ref_hash.as_deref())
                && then != now
            {
                problems.push(format!("bmhRefHash {} (deployed {})", short(now), short(then)));
            }
        } else if let (Some(now), Some(then)) = (s.config_hash.as_deref(), s.deployed_config_hash.as_deref())
            && now != then
        {
            problems.push(format!("configHash {} (deployed {})", short(now), short(then)));
        }
        if problems.is_empty() {
            return None;
        }
        Some(format!(
            "NodeSet {} changed since Deployment {} completed: {}; run a new OpenStackDataPlaneDeployment",
            ns,
            done.name,
            problems.join(", ")
        ))
    }

    /// The services a node's readiness covers: the NodeSet's, then those the node's newest
    /// Deployment ran through a `servicesOverride` that the NodeSet does not list (they count
    /// only while that Deployment is the newest, as upstream's NodeSet view does).
    fn services(&self, host: &str) -> Vec<usize> {
        let listed = self.group.services.value.len();
        let mut out: Vec<usize> = (0..listed).collect();
        let newest = (0..self.runs.len())
            .rev()
            // A run whose limit cannot be evaluated may be the newest: its services are judged
            // (and read Unknown) rather than left out.
            .find(|&i| self.states[i] != RunState::NotStarted && self.runs[i].covers(host) != Covers::No);
        for &k in newest.into_iter().flat_map(|i| self.run_svcs[i].iter()) {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    fn group_namespace(&self) -> Option<String> {
        let id = &self.group.id;
        match self.group.kind {
            GroupKind::NodeSet => {
                self.snap.nodesets.iter().find(|n| n.id == *id).and_then(|n| n.meta.namespace.clone())
            }
            GroupKind::Role => {
                self.snap.roles.iter().find(|n| n.id == *id).and_then(|n| n.meta.namespace.clone())
            }
        }
    }

    fn owner_of(&self, m: &Member) -> Owner {
        match self.group.kind {
            GroupKind::NodeSet => self.group_owner(),
            // The seeds' Node is its own object: the node's status belongs to it.
            GroupKind::Role => Owner {
                kind: "OpenStackDataPlaneNode".into(),
                name: m.key.clone(),
                uid: self.snap.nodes.iter().find(|n| n.id.name == m.key).and_then(|n| n.meta.uid.clone()),
            },
        }
    }

    /// When the NodeSet (or Role) was created, as its `creationTimestamp` says.
    fn group_created(&self) -> Option<Time> {
        let id = &self.group.id;
        let meta = match self.group.kind {
            GroupKind::NodeSet => self.snap.nodesets.iter().find(|n| n.id == *id).map(|n| &n.meta),
            GroupKind::Role => self.snap.roles.iter().find(|n| n.id == *id).map(|n| &n.meta),
        };
        meta?.creation_timestamp.as_deref().and_then(Time::parse)
    }

    fn group_owner(&self) -> Owner {
        let uid = match self.group.kind {
            GroupKind::NodeSet => self
                .snap
                .nodesets
                .iter()
                .find(|n| n.id.name == self.group.name)
                .and_then(|n| n.meta.uid.clone()),
            GroupKind::Role => {
                self.snap.roles.iter().find(|n| n.id.name == self.group.name).and_then(|n| n.meta.uid.clone())
            }
        };
        Owner { kind: self.group.id.kind.clone(), name: self.group.name.clone(), uid }
    }
}

fn owner_kind(g: &HostGroup) -> OwnerKind {
    match g.kind {
        GroupKind::NodeSet => OwnerKind::OpenStackDataPlaneNodeSet,
        GroupKind::Role => OwnerKind::OpenStackDataPlaneRole,
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests;
