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

pub(crate) mod api;
pub(crate) mod deploy;
pub(crate) mod limit;
pub(crate) mod names;
pub(crate) mod report;
pub(crate) mod show;

use std::collections::{BTreeMap, HashMap};

use crate::condition::{Condition, Conditions, READY, Severity, Status, Time, mirror};
use crate::model::{GroupKind, HostGroup, Member, Model};
use crate::services::Phase;
use crate::snapshot::Snapshot;
use crate::snapshot::evidence::{BaremetalSet, Job, LegacyStatus, NodeSetStatus};

use self::api::{NodeCounts, OwnerKind};
use self::deploy::{Outcome, Run, RunState};

pub(crate) const BAREMETAL: &str = "BaremetalProvisionReady";
pub(crate) const INFRASTRUCTURE: &str = "InfrastructureReady";
pub(crate) const SERVICES: &str = "ServicesReady";
pub(crate) const RECONCILING: &str = "Reconciling";
pub(crate) const STALLED: &str = "Stalled";
pub(crate) const NODE_AGENT: &str = "NodeAgentReady";
pub(crate) const NODESET_BAREMETAL: &str = "NodeSetBaremetalProvisionReady";
pub(crate) const NODESET_INFRASTRUCTURE: &str = "NodeSetInfrastructureReady";
pub(crate) const NODESET_SERVICES: &str = "NodeSetServicesReady";
pub(crate) const DEPLOYMENT_READY: &str = "DeploymentReady";

/// upstream's messages.
const WAITING_FOR_DEPLOYMENT: &str = "NodeSet setup ready, waiting for OpenStackDataPlaneDeployment...";
const DEPLOYMENT_IN_PROGRESS: &str = "Deployment in progress";
const DEPLOYMENT_COMPLETED: &str = "Deployment completed";

/// Whether a condition type is the node agent's to write (`status report` never writes them).
pub(crate) fn is_agent_condition(type_: &str) -> bool {
    type_ == NODE_AGENT || (type_.starts_with("Service") && type_.ends_with("RuntimeReady"))
}

/// Which phase each service belongs to: the catalogue's (upstream's infrastructure services
/// are phase 0, everything else phase 1), overridden per service from the config file.
#[derive(Debug, Clone, Default)]
pub(crate) struct PhaseMap {
    pub overrides: BTreeMap<String, Phase>,
}

impl PhaseMap {
    pub(crate) fn phase(&self, service: &str) -> Phase {
        self.overrides
            .get(service)
            .copied()
            .unwrap_or_else(|| crate::services::find(service).map_or(Phase::Services, |s| s.phase))
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// Keep the evidence behind each condition (for `status explain`).
    pub evidence: bool,
}

/// The object a status object is owned by (for its owner reference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub kind: String,
    pub name: String,
    pub uid: Option<String>,
}

/// One node's readiness.
#[derive(Debug, Clone)]
pub(crate) struct NodeView {
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
    /// Per phase condition type: the service and reason that block it, for rollup messages.
    pub blocking: BTreeMap<&'static str, String>,
}

/// One NodeSet's (or Role's) readiness.
#[derive(Debug, Clone)]
pub(crate) struct NodeSetView {
    pub object: String,
    pub name: String,
    pub kind: OwnerKind,
    pub owner: Owner,
    pub namespace: Option<String>,
    pub conditions: Conditions,
    pub counts: NodeCounts,
    pub evidence: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Readiness {
    pub nodes: Vec<NodeView>,
    pub nodesets: Vec<NodeSetView>,
}

/// Computes every node's and every NodeSet's conditions. Transition times carry over from the
/// status objects the snapshot holds (edpm-agent's own, as written last time).
pub(crate) fn evaluate(
    snap: &Snapshot,
    model: &Model,
    phases: &PhaseMap,
    opts: Options,
    now: Time,
) -> Readiness {
    let ev = &snap.evidence;
    let reports: HashMap<&str, &Conditions> =
        ev.reports.iter().map(|r| (r.id.name.as_str(), &r.status.conditions)).collect();
    let rollups: HashMap<&str, &Conditions> =
        ev.rollups.iter().map(|r| (r.id.name.as_str(), &r.status.conditions)).collect();
    let leases: HashMap<&str, &crate::snapshot::evidence::Lease> =
        ev.leases.iter().map(|l| (l.id.name.as_str(), l)).collect();
    let jobs: HashMap<(&str, &str, &str), &Job> = ev
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
    let one = |group: &HostGroup| -> (Vec<NodeView>, NodeSetView) {
        let cx = GroupContext::new(snap, group, phases, &jobs, opts);
        let nodes: Vec<NodeView> = group.members.iter().map(|m| cx.node(m, &reports, &leases, now)).collect();
        let set = cx.rollup(&nodes, &rollups, now);
        (nodes, set)
    };
    // Groups are independent: a large data plane is evaluated on every core, in a fixed
    // order of groups, so the result is the same however many threads ran.
    let nodes: usize = model.groups.iter().map(|g| g.members.len()).sum();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(model.groups.len());
    let parts: Vec<(Vec<NodeView>, NodeSetView)> = if nodes < 2_000 || workers < 2 {
        model.groups.iter().map(one).collect()
    } else {
        let chunk = model.groups.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = model
                .groups
                .chunks(chunk)
                .map(|c| scope.spawn(move || c.iter().map(one).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut out = Readiness::default();
    for (n, set) in parts {
        out.nodes.extend(n);
        out.nodesets.push(set);
    }
    out
}

/// What one NodeSet's nodes share: its runs, its services and their phases, its status.
struct GroupContext<'a> {
    snap: &'a Snapshot,
    group: &'a HostGroup,
    jobs: &'a HashMap<(&'a str, &'a str, &'a str), &'a Job>,
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
}

struct SvcInfo<'a> {
    name: &'a str,
    ty: String,
    global: bool,
    in_group: bool,
    phase: Phase,
}

/// A service's state on one node.
struct ServiceState {
    cond: Condition,
    running: Option<String>,
    terminal: bool,
    evidence: Vec<String>,
}

impl<'a> GroupContext<'a> {
    fn new(
        snap: &'a Snapshot,
        group: &'a HostGroup,
        phases: &'a PhaseMap,
        jobs: &'a HashMap<(&'a str, &'a str, &'a str), &'a Job>,
        opts: Options,
    ) -> GroupContext<'a> {
        let ev = &snap.evidence;
        let (status, legacy) = match group.kind {
            GroupKind::NodeSet => (ev.nodesets.get(&group.name), None),
            GroupKind::Role => (None, ev.roles.get(&group.name)),
        };
        let runs = deploy::runs(ev, &group.name, status, &group.services.value);
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
                    ty: deploy::service_condition(s),
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
        };
        cx.drift = cx.drift();
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
    fn services(&self, names: &[&str]) -> Vec<usize> {
        let listed = self.group.services.value.len();
        let mut out: Vec<usize> = (0..listed).collect();
        let newest = (0..self.runs.len())
            .rev()
            .find(|&i| self.states[i] != RunState::NotStarted && self.runs[i].covers(names));
        for &k in newest.into_iter().flat_map(|i| self.run_svcs[i].iter()) {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    fn node(
        &self,
        m: &Member,
        reports: &HashMap<&str, &Conditions>,
        leases: &HashMap<&str, &crate::snapshot::evidence::Lease>,
        now: Time,
    ) -> NodeView {
        let host = m.inventory_hostname();
        let mut names: Vec<&str> =
            vec![host, m.key.as_str(), m.host_name.value.as_str(), self.group.name.as_str(), "all"];
        if let Some(c) = m.cell(self.group) {
            names.push(c.name.as_str());
        }
        let object = names::node_object(&self.group.name, &m.key);
        let mut evidence: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut fresh: Vec<Condition> = Vec::with_capacity(self.svcs.len() + 8);
        let mut blocking = BTreeMap::new();

        // Phase -1.
        let (bm, bm_ev) = self.baremetal(m);
        self.keep(&mut evidence, BAREMETAL, bm_ev);
        if !bm.is_true() {
            blocking.insert(BAREMETAL, bm.reason.clone());
        }
        fresh.push(bm);

        // Phases 0 and 1, from each service's state.
        let services = self.services(&names);
        let mut states: Vec<(&str, Phase, ServiceState)> = Vec::with_capacity(services.len());
        for &k in &services {
            let st = self.service_state(m, &names, k);
            let info = &self.svcs[k];
            states.push((info.name, info.phase, st));
        }
        for (ty, phase, label) in [
            (INFRASTRUCTURE, Phase::Infrastructure, "infrastructure"),
            (SERVICES, Phase::Services, "OpenStack"),
        ] {
            let members: Vec<&(&str, Phase, ServiceState)> =
                states.iter().filter(|(_, p, _)| *p == phase).collect();
            let (c, block) = phase_condition(ty, label, &members, self.drift.as_deref());
            if let Some(b) = block {
                blocking.insert(ty, b);
            }
            if self.opts.evidence {
                let mut lines = Vec::new();
                for (s, _, st) in &members {
                    lines.push(format!(
                        "{s}: {} {} ({})",
                        st.cond.status_word(),
                        st.cond.reason,
                        st.cond.message
                    ));
                    lines.extend(st.evidence.iter().map(|e| format!("  {e}")));
                }
                if let Some(d) = &self.drift {
                    lines.push(d.clone());
                }
                evidence.insert(ty.to_string(), lines);
            }
            fresh.push(c);
        }
        let running = states.iter().find_map(|(_, _, st)| st.running.clone());
        let stalled = states
            .iter()
            .find(|(_, _, st)| st.terminal)
            .map(|(s, _, st)| (*s, st.cond.reason.clone(), st.cond.message.clone()));
        for (_, _, st) in states {
            fresh.push(st.cond);
        }

        // kstatus: Reconciling while a Deployment works on this node, Stalled on a terminal
        // failure no running Deployment will retry.
        fresh.push(match &running {
            Some(what) => {
                Condition { reason: "Deploying".into(), ..Condition::true_(RECONCILING, what.clone()) }
            }
            None => Condition::false_(
                RECONCILING,
                "Idle",
                Severity::Info,
                "no Deployment is running on this node",
            ),
        });
        fresh.push(match (stalled, &running) {
            (Some((s, reason, message)), None) => {
                Condition { reason, ..Condition::true_(STALLED, format!("{s}: {message}")) }
            }
            _ => {
                Condition::false_(STALLED, "Progressing", Severity::Info, "no terminal failure on this node")
            }
        });

        // The node agent's conditions, as it last reported them; Unknown once its Lease expired.
        let previous = reports.get(object.as_str()).copied();
        let mut agent: Vec<Condition> = previous
            .map(|p| p.iter().filter(|c| is_agent_condition(&c.type_)).cloned().collect())
            .unwrap_or_default();
        if let Some(lease) = leases.get(object.as_str())
            && let Some(expires) = lease.expires()
            && expires < now
        {
            let renewed = lease.spec.renew_time.clone().unwrap_or_default();
            for c in &mut agent {
                *c = Condition {
                    last_transition_time: c.last_transition_time,
                    ..Condition::unknown(
                        &c.type_,
                        "AgentHeartbeatExpired",
                        format!(
                            "the node agent's Lease {} expired at {expires} (last renewed {renewed})",
                            lease.id.name
                        ),
                    )
                };
            }
            self.keep(
                &mut evidence,
                NODE_AGENT,
                vec![format!("Lease {}: renewed {renewed}, expired {expires}", lease.id.name)],
            );
        }

        // Times carry over from the last report; the agent's conditions are its own.
        let empty = Conditions::default();
        let mut conds = Conditions::carry_times(fresh, previous.unwrap_or(&empty), now);
        for c in agent {
            conds.0.push(c);
        }
        conds.0.sort_by(order);
        let mut sub: Vec<&Condition> = conds
            .iter()
            .filter(|c| {
                matches!(c.type_.as_str(), BAREMETAL | INFRASTRUCTURE | SERVICES)
                    || is_agent_condition(&c.type_)
            })
            .collect();
        sub.sort_by(|a, b| a.type_.cmp(&b.type_));
        let ready = if sub.iter().all(|c| c.is_true()) {
            Condition::true_(READY, "node ready: bare metal, infrastructure and OpenStack services")
        } else {
            mirror(sub.into_iter(), READY)
                .unwrap_or_else(|| Condition::unknown(READY, "Init", "no conditions"))
        };
        // Ready keeps its time while it says the same.
        let ready = match previous.and_then(|p| p.get(READY)) {
            Some(p) if !ready.differs_from(p) => {
                Condition { last_transition_time: p.last_transition_time, ..ready }
            }
            _ => ready,
        };
        conds.set(ready, now);
        NodeView {
            object,
            node: m.key.clone(),
            host: host.to_string(),
            host_name: m.host_name.value.clone(),
            nodeset: self.group.name.clone(),
            kind: owner_kind(self.group),
            owner: self.owner_of(m),
            namespace: self.group_namespace(),
            conditions: conds,
            evidence,
            blocking,
        }
    }

    fn keep(&self, evidence: &mut BTreeMap<String, Vec<String>>, ty: &str, lines: Vec<String>) {
        if self.opts.evidence {
            evidence.entry(ty.to_string()).or_default().extend(lines);
        }
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

    /// Phase -1 for one node.
    fn baremetal(&self, m: &Member) -> (Condition, Vec<String>) {
        if self.group.members.is_empty() {
            // The NodeSet's own view (no nodes): nothing to provision.
            return (
                Condition::true_(BAREMETAL, "no nodes to provision"),
                vec!["the NodeSet has no nodes".into()],
            );
        }
        if self.group.pre_provisioned {
            return (
                Condition::true_(
                    BAREMETAL,
                    "pre-provisioned: the operating system was installed before edpm-agent saw it",
                ),
                vec![format!("{} spec.preProvisioned is true", self.group.id.short())],
            );
        }
        if let Some(bms) = self.bms {
            let host = bms
                .status
                .baremetal_hosts
                .get(&m.host_name.value)
                .or_else(|| bms.status.baremetal_hosts.get(&m.key));
            let ev = |state: &str| {
                vec![format!(
                    "{} status.baremetalHosts[{}].provisioningState {state:?}",
                    bms.id.short(),
                    m.host_name.value
                )]
            };
            return match host {
                Some(h) => {
                    let state = h.provisioning_state.as_deref().unwrap_or("");
                    let bmh = h.bmh_ref.as_deref().unwrap_or("unassigned");
                    let c = match state {
                        "provisioned" | "externally provisioned" => {
                            Condition::true_(BAREMETAL, format!("BareMetalHost {bmh} is {state}"))
                        }
                        "deprovisioning" | "deleting" | "powering off before delete" => Condition::false_(
                            BAREMETAL,
                            "Deprovisioning",
                            Severity::Warning,
                            format!("BareMetalHost {bmh} is {state}"),
                        ),
                        "" => Condition::false_(
                            BAREMETAL,
                            "Provisioning",
                            Severity::Info,
                            format!("BareMetalHost {bmh} has no provisioning state yet"),
                        ),
                        _ => Condition::false_(
                            BAREMETAL,
                            "Provisioning",
                            Severity::Info,
                            format!("BareMetalHost {bmh} is {state}"),
                        ),
                    };
                    (c, ev(state))
                }
                None => (
                    Condition::false_(
                        BAREMETAL,
                        "Provisioning",
                        Severity::Info,
                        format!(
                            "OpenStackBaremetalSet {} has no host for {} yet",
                            bms.id.name, m.host_name.value
                        ),
                    ),
                    ev(""),
                ),
            };
        }
        let upstream = match self.group.kind {
            GroupKind::NodeSet => self.status.and_then(|s| s.conditions.get(NODESET_BAREMETAL)),
            GroupKind::Role => self.legacy.and_then(|s| s.conditions.get("RoleBaremetalProvisionReady")),
        };
        match upstream {
            Some(c) => (
                c.as_type(BAREMETAL),
                vec![format!(
                    "{} status.conditions {} {} ({})",
                    self.group.id.short(),
                    c.type_,
                    c.status_word(),
                    c.message
                )],
            ),
            None => (
                Condition::unknown(
                    BAREMETAL,
                    "NotObserved",
                    "no OpenStackBaremetalSet and no provisioning condition on the NodeSet: read them with --source kube",
                ),
                vec!["no OpenStackBaremetalSet of the same name in the snapshot".into()],
            ),
        }
    }

    /// One service's state on one node: the newest run that ran it there decides.
    fn service_state(&self, m: &Member, names: &[&str], k: usize) -> ServiceState {
        let info = &self.svcs[k];
        let (service, ty, global, in_group) = (info.name, info.ty.as_str(), info.global, info.in_group);
        let ns = self.group.name.as_str();
        let keep = self.opts.evidence;
        let mut evidence = Vec::new();
        let mut newest_covering = true;
        for (idx, run) in self.runs.iter().enumerate().rev() {
            if self.states[idx] == RunState::NotStarted {
                if keep && run.runs(service) && run.covers(names) {
                    evidence.push(format!("Deployment {}: not started yet (no status)", run.name));
                }
                continue;
            }
            if !run.covers(names) {
                if keep {
                    evidence.push(format!(
                        "Deployment {}: ansibleLimit {:?} leaves this node out",
                        run.name,
                        run.limit_text.unwrap_or("")
                    ));
                }
                continue;
            }
            let was_newest = std::mem::replace(&mut newest_covering, false);
            let Some(outcome) = &self.outcomes[idx][k] else { continue };
            // A service only a servicesOverride ran counts while that Deployment is the node's newest.
            if !in_group && !was_newest {
                break;
            }
            let source = || {
                if run.from_nodeset_copy {
                    format!("NodeSet {ns} status.deploymentStatuses[{}]", run.name)
                } else {
                    format!("Deployment {} status.nodeSetConditions[{ns}]", run.name)
                }
            };
            match *outcome {
                Outcome::Done(c) => {
                    if keep {
                        evidence.push(format!("{}: {ty} True ({})", source(), c.message));
                    }
                    // The run's condition is of this very type: shared as it is.
                    return ServiceState { cond: c.clone(), running: None, terminal: false, evidence };
                }
                Outcome::Pending(c) => {
                    if keep {
                        match c {
                            Some(c) => evidence.push(format!(
                                "{}: {ty} {} {} ({})",
                                source(),
                                c.status_word(),
                                c.reason,
                                c.message
                            )),
                            None => evidence.push(format!(
                                "{}: no {ty} yet: an earlier service is still running",
                                source()
                            )),
                        }
                        evidence.extend(self.job_line(service, run.name));
                    }
                    let message = format!("Deployment not yet ready for {service} service");
                    let mut cond = Condition::false_(ty, "Requested", Severity::Info, message);
                    if let Some(c) = c {
                        cond.last_transition_time = c.last_transition_time;
                    }
                    return ServiceState {
                        cond,
                        running: Some(format!("Deployment {} is running {service}", run.name)),
                        terminal: false,
                        evidence,
                    };
                }
                Outcome::Failed(c) => {
                    if keep {
                        evidence.push(format!(
                            "{}: {ty} False {} {:?} ({})",
                            source(),
                            c.reason,
                            c.severity,
                            c.message
                        ));
                        evidence.extend(self.job_line(service, run.name));
                    }
                    return self.failed(m, service, ty, run, c, global, evidence);
                }
                Outcome::NotReached => {
                    if keep {
                        evidence.push(format!(
                            "Deployment {} stopped before {service} ({})",
                            run.name,
                            run.nodeset_condition()
                                .map(|c| c.message.as_str())
                                .unwrap_or("no NodeSetDeploymentReady")
                        ));
                    }
                }
            }
        }
        self.fallback(m, service, ty, evidence)
    }

    /// A failed service: only the hosts its Job's summary names fail; without a summary the
    /// whole Job failed and upstream's message is all there is.
    #[allow(clippy::too_many_arguments)]
    fn failed(
        &self,
        m: &Member,
        service: &str,
        ty: &str,
        run: &Run,
        c: &Condition,
        global: bool,
        mut evidence: Vec<String>,
    ) -> ServiceState {
        let terminal = c.reason == "BackoffLimitExceeded";
        let host = m.inventory_hostname();
        let named =
            |list: &[String]| list.iter().any(|h| h == host || h == &m.key || h == &m.host_name.value);
        if terminal && let Some((job, s)) = deploy::summary(run, service, &self.group.name, global) {
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
            let (reason, severity, message, term) = if named(&s.failed_host_list) {
                (
                    "HostFailed",
                    Severity::Error,
                    format!("{service} failed on this host in job {job} (Deployment {})", run.name),
                    true,
                )
            } else if named(&s.unreachable_host_list) {
                (
                    "HostUnreachable",
                    Severity::Error,
                    format!("this host was unreachable in job {job} (Deployment {}, {service})", run.name),
                    true,
                )
            } else if s.total_hosts > 0 {
                let others: Vec<&String> =
                    s.failed_host_list.iter().chain(&s.unreachable_host_list).take(5).collect();
                (
                    "OtherHostsFailed",
                    Severity::Warning,
                    format!(
                        "job {job} ({service}) failed on {}; this host was not reported failed, but the play stopped before {service} completed here",
                        others.iter().map(|h| h.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                    false,
                )
            } else {
                ("BackoffLimitExceeded", Severity::Error, c.message.clone(), true)
            };
            let mut cond = Condition::false_(ty, reason, severity, message);
            cond.last_transition_time = c.last_transition_time;
            return ServiceState { cond, running: None, terminal: term, evidence };
        }
        let mut cond = c.as_type(ty);
        cond.severity = Severity::Error;
        ServiceState { cond, running: None, terminal, evidence }
    }

    /// No run with status decided the service: the NodeSet's own DeploymentReady when no run
    /// carries any status, else the seeds' Role/Node status, else not deployed.
    fn fallback(&self, m: &Member, service: &str, ty: &str, mut evidence: Vec<String>) -> ServiceState {
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
                    Condition::false_(
                        ty,
                        "Requested",
                        Severity::Info,
                        format!("Deployment not yet ready for {service} service"),
                    ),
                    Some(format!("NodeSet {ns} reports a Deployment in progress")),
                    false,
                )
            } else if c.is_error() {
                (Condition::false_(ty, "Error", Severity::Error, c.message.clone()), None, false)
            } else {
                (not_deployed(ty, service), None, false)
            };
            return ServiceState {
                cond: Condition { last_transition_time: c.last_transition_time, ..cond },
                running,
                terminal,
                evidence,
            };
        }
        if let Some(c) = self.legacy_condition(m, service) {
            evidence.push(format!("{}: {} {} ({})", c.0, c.1.type_, c.1.status_word(), c.1.message));
            let cond = match c.1.status {
                Status::True => Condition::true_(ty, format!("Deployment ready for {service} service")),
                Status::False if c.1.severity == Severity::Error || c.1.is_error() => {
                    Condition::false_(ty, "Error", Severity::Error, c.1.message.clone())
                }
                _ => Condition::false_(
                    ty,
                    "Requested",
                    Severity::Info,
                    format!("Deployment not yet ready for {service} service"),
                ),
            };
            return ServiceState { cond, running: None, terminal: false, evidence };
        }
        evidence.push(format!("no OpenStackDataPlaneDeployment has run {service} on this node"));
        ServiceState { cond: not_deployed(ty, service), running: None, terminal: false, evidence }
    }

    /// The seeds' model: the Node's, else the Role's status for a service (`"<svc> service
    /// ready"`, dataplane-operator 605f1a16), else its DeploymentReady.
    fn legacy_condition(&self, m: &Member, service: &str) -> Option<(String, Condition)> {
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

    /// What the Job of a service says: running, attempts, backoff.
    fn job_line(&self, service: &str, deployment: &str) -> Vec<String> {
        match self.jobs.get(&(service, deployment, self.group.name.as_str())) {
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

    /// The NodeSet's (or Role's) own conditions.
    fn rollup(&self, nodes: &[NodeView], reports: &HashMap<&str, &Conditions>, now: Time) -> NodeSetView {
        let mut evidence: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut fresh = Vec::new();
        let (deployment_ready, dr_ev) = self.deployment_ready();
        self.keep(&mut evidence, DEPLOYMENT_READY, dr_ev);
        fresh.push(deployment_ready);
        // upstream's service conditions: those of the newest run with status.
        if let Some(run) = self.runs.iter().rev().find(|r| r.conds.is_some()) {
            for c in run.conds.into_iter().flat_map(|c| c.iter()).filter(|c| c.type_.starts_with("Service")) {
                fresh.push(c.clone());
            }
        }
        // With no nodes, the phases are the NodeSet's own: a node that every run covers.
        let virtual_node;
        let counted: Vec<&NodeView> = if nodes.is_empty() {
            virtual_node = self.virtual_node(now);
            vec![&virtual_node]
        } else {
            nodes.iter().collect()
        };
        let mut counts = NodeCounts { total: nodes.len() as u32, ..Default::default() };
        for (node_ty, ty) in [
            (BAREMETAL, NODESET_BAREMETAL),
            (INFRASTRUCTURE, NODESET_INFRASTRUCTURE),
            (SERVICES, NODESET_SERVICES),
        ] {
            let ready =
                nodes.iter().filter(|n| n.conditions.get(node_ty).is_some_and(Condition::is_true)).count()
                    as u32;
            match node_ty {
                BAREMETAL => counts.baremetal_ready = ready,
                INFRASTRUCTURE => counts.infrastructure_ready = ready,
                _ => counts.services_ready = ready,
            }
            fresh.push(rollup_condition(ty, node_ty, &counted, nodes.len()));
        }
        counts.ready =
            nodes.iter().filter(|n| n.conditions.get(READY).is_some_and(Condition::is_true)).count() as u32;
        counts.summary = format!("{}/{}", counts.ready, counts.total);
        if self.opts.evidence {
            evidence.insert(
                NODESET_SERVICES.to_string(),
                nodes
                    .iter()
                    .filter_map(|n| n.blocking.get(SERVICES).map(|b| format!("{}: {b}", n.node)))
                    .collect(),
            );
            evidence.insert(
                NODESET_INFRASTRUCTURE.to_string(),
                nodes
                    .iter()
                    .filter_map(|n| n.blocking.get(INFRASTRUCTURE).map(|b| format!("{}: {b}", n.node)))
                    .collect(),
            );
        }
        let object = names::nodeset_object(&self.group.name);
        let empty = Conditions::default();
        let previous = reports.get(object.as_str()).copied().unwrap_or(&empty);
        let mut conds = Conditions::carry_times(fresh, previous, now);
        let sub: Vec<&Condition> = conds
            .iter()
            .filter(|c| {
                matches!(
                    c.type_.as_str(),
                    DEPLOYMENT_READY | NODESET_BAREMETAL | NODESET_INFRASTRUCTURE | NODESET_SERVICES
                )
            })
            .collect();
        let ready = if sub.iter().all(|c| c.is_true()) {
            Condition::true_(READY, "NodeSet Ready")
        } else {
            let m = mirror(sub.into_iter(), READY)
                .unwrap_or_else(|| Condition::unknown(READY, "Init", "no conditions"));
            // "7/10 nodes ready; blocking: …" from a rollup; the count in front of anything else.
            if m.message.starts_with(&format!("{}/", counts.ready)) || nodes.is_empty() {
                m
            } else {
                Condition { message: format!("{} nodes ready; {}", counts.summary, m.message), ..m }
            }
        };
        let ready = match previous.get(READY) {
            Some(p) if !ready.differs_from(p) => {
                Condition { last_transition_time: p.last_transition_time, ..ready }
            }
            _ => ready,
        };
        conds.set(ready, now);
        NodeSetView {
            object,
            name: self.group.name.clone(),
            kind: owner_kind(self.group),
            owner: self.group_owner(),
            namespace: self.group_namespace(),
            conditions: conds,
            counts,
            evidence,
        }
    }

    fn virtual_node(&self, now: Time) -> NodeView {
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
    fn deployment_ready(&self) -> (Condition, Vec<String>) {
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
                Condition::false_(DEPLOYMENT_READY, "Requested", Severity::Info, WAITING_FOR_DEPLOYMENT),
                vec!["no OpenStackDataPlaneDeployment names this NodeSet".into()],
            );
        };
        let line = format!("newest Deployment with status: {}", run.name);
        let c = match run.state() {
            RunState::Done if self.drift.is_some() => {
                Condition::false_(DEPLOYMENT_READY, "Requested", Severity::Info, WAITING_FOR_DEPLOYMENT)
            }
            RunState::Done => Condition::true_(DEPLOYMENT_READY, DEPLOYMENT_COMPLETED),
            RunState::Running => {
                Condition::false_(DEPLOYMENT_READY, "Requested", Severity::Info, DEPLOYMENT_IN_PROGRESS)
            }
            RunState::Failed { .. } => Condition::false_(
                DEPLOYMENT_READY,
                "Error",
                Severity::Error,
                run.nodeset_condition().map(|c| c.message.clone()).unwrap_or_default(),
            ),
            RunState::NotStarted => {
                Condition::false_(DEPLOYMENT_READY, "Requested", Severity::Info, WAITING_FOR_DEPLOYMENT)
            }
        };
        let mut lines = vec![line];
        lines.extend(self.drift.clone());
        (c, lines)
    }
}

fn not_deployed(ty: &str, service: &str) -> Condition {
    Condition::false_(
        ty,
        "NotDeployed",
        Severity::Info,
        format!("no OpenStackDataPlaneDeployment has deployed {service} on this node yet"),
    )
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

fn order(a: &Condition, b: &Condition) -> std::cmp::Ordering {
    match (a.type_ == READY, b.type_ == READY) {
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.type_.cmp(&b.type_),
    }
}

/// A phase of one node from its services' states: True when all are; else the worst one
/// (lib-common priority) with a count in front. Drift turns a True phase into ConfigDrift.
fn phase_condition(
    ty: &str,
    label: &str,
    members: &[&(&str, Phase, ServiceState)],
    drift: Option<&str>,
) -> (Condition, Option<String>) {
    let total = members.len();
    let done = members.iter().filter(|(_, _, s)| s.cond.is_true()).count();
    if done == total {
        if let Some(d) = drift
            && total > 0
        {
            return (
                Condition::false_(ty, "ConfigDrift", Severity::Warning, d.to_string()),
                Some("ConfigDrift".into()),
            );
        }
        let msg = if total == 0 {
            format!("no {label} services")
        } else {
            format!("{done}/{total} {label} services deployed")
        };
        return (Condition::true_(ty, msg), None);
    }
    let worst = mirror(members.iter().map(|(_, _, s)| &s.cond), ty).expect("not all True, so not empty");
    let service = members
        .iter()
        .find(|(_, _, s)| s.cond.type_ == worst_source(members, &worst))
        .map(|(n, _, _)| *n)
        .unwrap_or("");
    let message = format!("{done}/{total} {label} services deployed; {service}: {}", worst.message);
    let block = format!("{service}: {}", worst.reason);
    (Condition { message, ..worst }, Some(block))
}

/// The service condition a mirror picked (same status, reason, severity, message and time).
fn worst_source(members: &[&(&str, Phase, ServiceState)], worst: &Condition) -> String {
    members
        .iter()
        .rev()
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

/// A NodeSet phase from its nodes' phase conditions, in upstream's reason vocabulary (`Error`,
/// `Requested`, with our `ConfigDrift`), counting nodes and naming the ones that block.
fn rollup_condition(ty: &str, node_ty: &str, nodes: &[&NodeView], total: usize) -> Condition {
    let conds: Vec<(&NodeView, &Condition)> =
        nodes.iter().filter_map(|n| n.conditions.get(node_ty).map(|c| (*n, c))).collect();
    let ready = conds.iter().filter(|(_, c)| c.is_true()).count();
    if conds.iter().all(|(_, c)| c.is_true()) {
        let msg = if total == 0 {
            "no nodes; the NodeSet's own deployment is complete".to_string()
        } else {
            format!("{ready}/{total} nodes ready")
        };
        return Condition::true_(ty, msg);
    }
    let worst = mirror(conds.iter().map(|(_, c)| *c), ty).expect("not all True, so not empty");
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
    let reason = match (worst.status, worst.severity) {
        (Status::False, Severity::Error) => "Error".to_string(),
        (Status::False, Severity::Warning) if worst.reason == "ConfigDrift" => "ConfigDrift".into(),
        (Status::False, Severity::Warning) => "Error".into(),
        (Status::False, _) => "Requested".into(),
        _ => worst.reason.clone(),
    };
    Condition { type_: ty.to_string(), reason, message, ..worst }
}

#[cfg(test)]
mod tests;
