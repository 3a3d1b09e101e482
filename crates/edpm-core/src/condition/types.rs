//! The condition types edpm-agent writes and reads: one vocabulary, each name defined once.
//! Operators grep these names, and upstream's own types are spelled as upstream spells them:
//! change nothing here without a CHANGELOG entry.
//!
//! [`TYPES`] is the one table of the types our status objects hold: each with its NodeSet
//! twin, whether it counts toward `Ready`, who writes it, the phase it says, whether `status
//! wait --for` takes it, its gauge on `/metrics`, its column in `status show` and its printer
//! columns in the CRDs. `status wait`, the controller's gauges, `status show`, the roll-up and
//! the CRDs read it; a type is added here, once (ARCHITECTURE.md, "Adding a condition type").

/// Every object's summary condition (lib-common's `ReadyCondition`).
pub const READY: &str = "Ready";

// A node's phases (EDPMNodeStatus).
/// Phase -1: the node's operating system is installed.
pub const BAREMETAL: &str = "BaremetalProvisionReady";
/// Phase 0: every infrastructure service deployed.
pub const INFRASTRUCTURE: &str = "InfrastructureReady";
/// Phase 1: every OpenStack service deployed.
pub const SERVICES: &str = "ServicesReady";
/// kstatus: a Deployment is working on the node.
pub const RECONCILING: &str = "Reconciling";
/// kstatus: a terminal failure no running Deployment will retry.
pub const STALLED: &str = "Stalled";
/// Phase 1, Nova's own view: nova-compute registered, up and enabled, its hypervisor known
/// (nova-operator's `Nova<Thing>Ready` style; a member of `ServicesReady`).
pub const NOVA_COMPUTE: &str = "NovaComputeReady";
/// The node agent's own phase -1 and 0 checks, on the node.
pub const NODE_AGENT: &str = "NodeAgentReady";
/// The node agent's own credential: True when its token is past the point it is renewed at
/// and could not be renewed (it then expires, and with it the agent's Lease).
pub const AGENT_CREDENTIAL: &str = "AgentCredentialExpiring";
/// The node's deployed OpenStack version is the OpenStackVersion's `spec.targetVersion` (not a
/// member of `Ready`: a node on the previous version still serves).
pub const VERSION_CURRENT: &str = "VersionCurrent";
/// Every Secret and ConfigMap last delivered to the node is as it is now (not a member of
/// `Ready`).
pub const SECRETS_CURRENT: &str = "SecretsCurrent";

// A NodeSet's (EDPMNodeSetStatus), and upstream's on its NodeSet and Deployment.
pub const NODESET_BAREMETAL: &str = "NodeSetBaremetalProvisionReady";
pub const NODESET_INFRASTRUCTURE: &str = "NodeSetInfrastructureReady";
pub const NODESET_SERVICES: &str = "NodeSetServicesReady";
/// Every node of the NodeSet at the target version.
pub const NODESET_VERSION_CURRENT: &str = "NodeSetVersionCurrent";
/// Every node of the NodeSet holds every current input.
pub const NODESET_SECRETS_CURRENT: &str = "NodeSetSecretsCurrent";
/// The seeds' Role's provisioning condition (dataplane-operator's `RoleBaremetalProvisionReady`).
pub const ROLE_BAREMETAL: &str = "RoleBaremetalProvisionReady";
/// The node agent's stand-in when it cannot tell which services were deployed.
pub const SERVICES_RUNTIME: &str = "ServiceRuntimeReady";
/// upstream's NodeSet condition.
pub const DEPLOYMENT_READY: &str = "DeploymentReady";
/// upstream's Deployment condition, per NodeSet.
pub const NODESET_DEPLOYMENT_READY: &str = "NodeSetDeploymentReady";

/// The per-service types' pattern: `Service<Camel>…`, the service's name in `to_camel`'s form.
const PER_SERVICE: &str = "Service<Camel>";
/// The row of every service's deployment condition.
const SERVICE_DEPLOYMENT: &str = "Service<Camel>DeploymentReady";

/// Who writes a type into our status objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// `status report` and the controller (field manager `edpm-agent`).
    Reporter,
    /// The node agent, on its node's object (field manager `edpm-agent-node`).
    NodeAgent,
}

/// A phase of readiness as the commands and the metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// `-1`, `0`, `1`, `ready`: `status wait --phase`, the `edpm_nodeset_nodes` gauge's `phase`.
    pub label: &'static str,
    /// Also taken by `--phase` (`baremetal`).
    pub word: &'static str,
    /// What it is, in a usage message (`bare metal`); `None`: the label says it.
    pub said: Option<&'static str>,
}

/// A printer column of a status object's CRD: `kubectl get` shows the type's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub description: Option<&'static str>,
}

/// A per-node gauge on `/metrics`: 1 while the type is True, 0 while False, no series while
/// Unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gauge {
    /// Its name after the registry's `edpm_` prefix.
    pub name: &'static str,
    pub help: &'static str,
}

/// A node's column in `status show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    pub head: &'static str,
    /// Only in `-o wide`.
    pub wide: bool,
}

/// A NodeSet's count of the nodes that hold a type True, as a MachineConfigPool counts a
/// rollout (`updatedMachineCount`): a field of the `EDPMNodeSetStatus`'s `status.nodes`
/// (`readiness::api::NodeCounts`), its printer column, and a `count` of
/// `edpm_nodeset_node_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Its field in `status.nodes`, as the CRD spells it.
    pub field: &'static str,
    /// Its `count` label on `/metrics`.
    pub label: &'static str,
    /// Its printer column; the CRD's description adds `(<Type> True)`.
    pub column: Column,
}

/// One condition type of our status objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Type {
    /// Its name on a node's object (`EDPMNodeStatus`); `None` for a NodeSet's own type. A name
    /// starting `Service<Camel>` stands for one type per service.
    pub node: Option<&'static str>,
    /// Its twin on the NodeSet's object (`EDPMNodeSetStatus`): the NodeSet's roll-up of it, or
    /// a type only NodeSets have.
    pub nodeset: Option<&'static str>,
    /// Whether it counts toward its object's `Ready`.
    pub in_ready: bool,
    pub writer: Writer,
    /// The phase it says (`Ready`: all of them).
    pub phase: Option<Phase>,
    /// What a node runs and holds, outside `Ready`: `status wait --for` takes it, and a
    /// NodeSet's header in `status show` says it under this word.
    pub wait_for: Option<&'static str>,
    pub gauge: Option<Gauge>,
    pub shown: Option<Shown>,
    /// Its printer column on the node's CRD, and its twin's on the NodeSet's.
    pub column: Option<Column>,
    pub nodeset_column: Option<Column>,
    /// The NodeSet's count of its nodes that hold it True.
    pub count: Option<Count>,
    /// A warning `status show` names on the node's row whenever it is True, ready or not,
    /// after the phases' cause.
    pub warns: bool,
}

impl Type {
    /// Whether `ty` is this type on a node's object (for a per-service type, any service's).
    pub fn is(&self, ty: &str) -> bool {
        match self.node {
            Some(name) => match name.strip_prefix(PER_SERVICE) {
                Some(suffix) => ty.starts_with("Service") && ty.ends_with(suffix),
                None => name == ty,
            },
            None => false,
        }
    }
}

/// A row that says nothing more than its names and writer.
const fn plain(
    node: Option<&'static str>,
    nodeset: Option<&'static str>,
    in_ready: bool,
    writer: Writer,
) -> Type {
    Type {
        node,
        nodeset,
        in_ready,
        writer,
        phase: None,
        wait_for: None,
        gauge: None,
        shown: None,
        column: None,
        nodeset_column: None,
        count: None,
        warns: false,
    }
}

/// A phase's row: in `Ready`, with its roll-up, its column in `status show` (headed by its
/// label) and both CRDs'.
const fn phase(node: &'static str, nodeset: &'static str, phase: Phase, column: Column) -> Type {
    Type {
        phase: Some(phase),
        shown: Some(Shown { head: phase.label, wide: false }),
        column: Some(column),
        nodeset_column: Some(column),
        ..plain(Some(node), Some(nodeset), true, Writer::Reporter)
    }
}

/// What a node runs and holds, outside `Ready`: with its roll-up, `status wait --for`, its
/// gauge and the NodeSet CRD's column.
const fn held(
    node: &'static str,
    nodeset: &'static str,
    word: &'static str,
    gauge: Gauge,
    column: Column,
) -> Type {
    Type {
        wait_for: Some(word),
        gauge: Some(gauge),
        nodeset_column: Some(column),
        ..plain(Some(node), Some(nodeset), false, Writer::Reporter)
    }
}

/// Counted by the NodeSet (its field of `readiness::api::NodeCounts` named in `held_mut`).
const fn with_count(t: Type, count: Count) -> Type {
    Type { count: Some(count), ..t }
}

/// A column in `status show -o wide` only.
const fn wide(t: Type, head: &'static str) -> Type {
    Type { shown: Some(Shown { head, wide: true }), ..t }
}

/// Every condition type our status objects hold, in the order `status show` and the CRDs
/// show their columns.
pub const TYPES: &[Type] = &[
    phase(
        BAREMETAL,
        NODESET_BAREMETAL,
        Phase { label: "-1", word: "baremetal", said: Some("bare metal") },
        Column { name: "Baremetal", description: Some("phase -1") },
    ),
    phase(
        INFRASTRUCTURE,
        NODESET_INFRASTRUCTURE,
        Phase { label: "0", word: "infrastructure", said: Some("infrastructure") },
        Column { name: "Infra", description: Some("phase 0") },
    ),
    phase(
        SERVICES,
        NODESET_SERVICES,
        Phase { label: "1", word: "services", said: Some("OpenStack services") },
        Column { name: "Services", description: Some("phase 1") },
    ),
    // Nova's own view, a member of ServicesReady.
    wide(plain(Some(NOVA_COMPUTE), None, false, Writer::Reporter), "NOVA"),
    wide(plain(Some(NODE_AGENT), None, true, Writer::NodeAgent), "AGENT"),
    // `Ready` itself: over the types above that count toward it.
    Type {
        phase: Some(Phase { label: "ready", word: "ready", said: None }),
        shown: Some(Shown { head: "READY", wide: false }),
        column: Some(Column { name: "Ready", description: None }),
        nodeset_column: Some(Column { name: "Ready", description: None }),
        ..plain(Some(READY), Some(READY), false, Writer::Reporter)
    },
    wide(
        with_count(
            held(
                VERSION_CURRENT,
                NODESET_VERSION_CURRENT,
                "version",
                Gauge {
                    name: "node_version_current",
                    help: "1 when the node runs the OpenStackVersion's target version, 0 when it is behind (no series while unknown)",
                },
                Column { name: "Version", description: Some("every node at the OpenStackVersion's target") },
            ),
            Count {
                field: "updated",
                label: "updated",
                column: Column { name: "Updated", description: Some("nodes that run the target version") },
            },
        ),
        "VERSION",
    ),
    wide(
        with_count(
            held(
                SECRETS_CURRENT,
                NODESET_SECRETS_CURRENT,
                "inputs",
                Gauge {
                    name: "node_inputs_current",
                    help: "1 when the node holds every current Secret and ConfigMap delivered to it, 0 when one is stale (no series while unknown)",
                },
                Column {
                    name: "Inputs",
                    description: Some("every node holds every current Secret and ConfigMap"),
                },
            ),
            Count {
                field: "inputsCurrent",
                label: "inputs_current",
                column: Column {
                    name: "Inputs",
                    description: Some("nodes that hold every current Secret and ConfigMap"),
                },
            },
        ),
        "INPUTS",
    ),
    plain(Some(RECONCILING), None, false, Writer::Reporter),
    plain(Some(STALLED), None, false, Writer::Reporter),
    // Per service: upstream's deployment state on the node (members of the phases), and the
    // node agent's view of its containers (members of Ready; `ServiceRuntimeReady` when it
    // cannot tell which services were deployed).
    plain(Some(SERVICE_DEPLOYMENT), None, false, Writer::Reporter),
    plain(Some("Service<Camel>RuntimeReady"), None, true, Writer::NodeAgent),
    // The node agent's credential (outside Ready: a token about to expire still works; the
    // Lease it can no longer renew is what turns the agent's word Unknown).
    Type { warns: true, ..plain(Some(AGENT_CREDENTIAL), None, false, Writer::NodeAgent) },
    // The NodeSet's own: upstream's DeploymentReady, as upstream's rules say it.
    plain(None, Some(DEPLOYMENT_READY), true, Writer::Reporter),
];

/// The types the NodeSet counts its nodes by, in the table's order.
pub fn counted() -> impl Iterator<Item = (&'static str, Count)> {
    TYPES.iter().filter_map(|t| Some((t.node?, t.count?)))
}

/// The row of a node's condition type.
pub fn of(ty: &str) -> Option<&'static Type> {
    TYPES.iter().find(|t| t.is(ty))
}

/// The row of a NodeSet's condition type.
pub fn of_nodeset(ty: &str) -> Option<&'static Type> {
    TYPES.iter().find(|t| t.nodeset == Some(ty))
}

/// The phases a node's `Ready` sums up, in order (-1, 0, 1).
pub fn phases() -> impl Iterator<Item = &'static Type> {
    TYPES.iter().filter(|t| t.phase.is_some() && t.in_ready)
}

/// Whether a node's condition type counts toward the node's `Ready`.
pub fn counts_toward_ready(ty: &str) -> bool {
    of(ty).is_some_and(|t| t.in_ready)
}

/// Whether a NodeSet's condition type counts toward the NodeSet's `Ready`.
pub fn counts_toward_nodeset_ready(ty: &str) -> bool {
    of_nodeset(ty).is_some_and(|t| t.in_ready)
}

/// The node's and the NodeSet's type of a phase as `status wait --phase` names it (`-1`,
/// `baremetal`, …, `ready`).
pub fn phase_named(name: &str) -> Option<(&'static str, &'static str)> {
    TYPES.iter().find_map(|t| {
        let p = t.phase?;
        (p.label == name || p.word == name).then_some((t.node?, t.nodeset?))
    })
}

/// The phases in words, for a usage message: `-1 (bare metal), 0 (infrastructure), … or ready`.
pub fn phases_said() -> String {
    let said: Vec<String> = TYPES
        .iter()
        .filter_map(|t| t.phase)
        .map(|p| match p.said {
            Some(s) => format!("{} ({s})", p.label),
            None => p.label.to_string(),
        })
        .collect();
    or_list(&said)
}

/// The node's and the NodeSet's type `status wait --for` takes by this name.
pub fn wait_named(name: &str) -> Option<(&'static str, &'static str)> {
    TYPES
        .iter()
        .filter(|t| t.wait_for.is_some())
        .find_map(|t| (t.node? == name).then_some((t.node?, t.nodeset?)))
}

/// The names `status wait --for` takes, in words: `VersionCurrent or SecretsCurrent`.
pub fn wait_said() -> String {
    let names: Vec<String> =
        TYPES.iter().filter(|t| t.wait_for.is_some()).filter_map(|t| t.node.map(String::from)).collect();
    or_list(&names)
}

/// The names `status wait --for` takes, each with what it says of the NodeSet:
/// `VersionCurrent (every node at …) or SecretsCurrent (every node holds …)`.
pub fn wait_explained() -> String {
    let names: Vec<String> = TYPES
        .iter()
        .filter(|t| t.wait_for.is_some())
        .filter_map(|t| {
            let name = t.node?;
            Some(match t.nodeset_column.and_then(|c| c.description) {
                Some(d) => format!("{name} ({d})"),
                None => name.to_string(),
            })
        })
        .collect();
    or_list(&names)
}

/// `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// upstream `strcase.ToCamel` (iancoleman/strcase v0.3.0, byte by byte), as the service
/// condition types use it: `configure-network` → `ConfigureNetwork`, `install-os` →
/// `InstallOs`. A letter after `-`, `_`, `.`, a space or a digit is upper-cased, an upper-case
/// letter after another is lower-cased, and every other byte is dropped.
pub fn to_camel(s: &str) -> String {
    let s = s.trim();
    let mut out = String::with_capacity(s.len());
    let mut cap_next = true;
    let mut prev_cap = false;
    for &b in s.as_bytes() {
        let (is_cap, is_low) = (b.is_ascii_uppercase(), b.is_ascii_lowercase());
        let mut v = b;
        if cap_next {
            v = v.to_ascii_uppercase();
        } else if prev_cap && is_cap {
            v = v.to_ascii_lowercase();
        }
        prev_cap = is_cap;
        if is_cap || is_low {
            out.push(v as char);
            cap_next = false;
        } else if b.is_ascii_digit() {
            out.push(v as char);
            cap_next = true;
        } else {
            cap_next = matches!(b, b'_' | b' ' | b'-' | b'.');
        }
    }
    out
}

/// `Service<Camel>DeploymentReady`: upstream's per-service condition (a node's, from the
/// newest Deployment that ran the service there).
pub fn service_deployment(service: &str) -> String {
    format!("Service{}DeploymentReady", to_camel(service))
}

/// Whether `ty` is a service's deployment condition ([`service_deployment`]'s form).
pub fn is_service_deployment(ty: &str) -> bool {
    of(ty).and_then(|t| t.node) == Some(SERVICE_DEPLOYMENT)
}

/// `Service<Camel>RuntimeReady`: the node agent's per-service condition (the service's
/// containers on the node, as it runs them now).
pub fn service_runtime(service: &str) -> String {
    format!("Service{}RuntimeReady", to_camel(service))
}

/// Whether a condition type is the node agent's to write (`status report` never writes them).
pub fn is_agent_condition(type_: &str) -> bool {
    of(type_).is_some_and(|t| t.writer == Writer::NodeAgent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_as_strcase() {
        for (s, want) in [
            ("configure-network", "ConfigureNetwork"),
            ("install-os", "InstallOs"),
            ("ssh-known-hosts", "SshKnownHosts"),
            ("neutron-metadata", "NeutronMetadata"),
            ("nova", "Nova"),
            ("failed-service", "FailedService"),
            ("nova-cell1", "NovaCell1"),
            ("this-service-does-not-exist", "ThisServiceDoesNotExist"),
            ("custom_svc", "CustomSvc"),
            ("ovs-DPDK", "OvsDpdk"),
            ("a/b", "Ab"),
            ("2nd-svc", "2NdSvc"),
        ] {
            assert_eq!(to_camel(s), want, "{s}");
        }
        assert_eq!(service_deployment("install-certs"), "ServiceInstallCertsDeploymentReady");
        assert_eq!(service_runtime("neutron-metadata"), "ServiceNeutronMetadataRuntimeReady");
        assert!(is_agent_condition("ServiceNovaRuntimeReady") && is_agent_condition(NODE_AGENT));
        assert!(!is_agent_condition("ServiceNovaDeploymentReady"));
        assert!(is_service_deployment(&service_deployment("nova-cell1")));
        assert!(!is_service_deployment(&service_runtime("nova")) && !is_service_deployment(DEPLOYMENT_READY));
    }

    #[test]
    fn every_named_type_has_one_row_and_every_row_a_name() {
        for t in TYPES {
            assert!(t.node.is_some() || t.nodeset.is_some(), "{t:?}");
            if let Some(n) = t.node.filter(|n| !n.starts_with(PER_SERVICE)) {
                assert_eq!(of(n), Some(t), "{n}: the first row that takes it is its own");
            }
            // A twin is a NodeSet's roll-up: a node's phase, `Ready`, or what nodes hold.
            if t.node.is_some() && t.nodeset.is_some() {
                assert!(t.phase.is_some() || t.wait_for.is_some(), "{t:?}");
            }
        }
        assert_eq!(of("ServiceNovaRuntimeReady").map(|t| t.writer), Some(Writer::NodeAgent));
        assert_eq!(of(SERVICES_RUNTIME).map(|t| t.writer), Some(Writer::NodeAgent));
        assert_eq!(of(&service_deployment("nova")).map(|t| t.in_ready), Some(false));
        assert!(of("NoSuchType").is_none());
    }

    #[test]
    fn the_commands_read_the_table() {
        assert_eq!(phase_named("-1"), Some((BAREMETAL, NODESET_BAREMETAL)));
        assert_eq!(phase_named("services"), Some((SERVICES, NODESET_SERVICES)));
        assert_eq!(phase_named("ready"), Some((READY, READY)));
        assert_eq!(phase_named("2"), None);
        assert_eq!(phases_said(), "-1 (bare metal), 0 (infrastructure), 1 (OpenStack services) or ready");
        assert_eq!(wait_named(SECRETS_CURRENT), Some((SECRETS_CURRENT, NODESET_SECRETS_CURRENT)));
        assert_eq!(wait_named(READY), None);
        assert_eq!(wait_said(), "VersionCurrent or SecretsCurrent");
        assert_eq!(
            phases().filter_map(|t| t.node).collect::<Vec<_>>(),
            [BAREMETAL, INFRASTRUCTURE, SERVICES]
        );
        assert!(counts_toward_ready(NODE_AGENT) && counts_toward_ready("ServiceOvnRuntimeReady"));
        assert!(!counts_toward_ready(NOVA_COMPUTE) && !counts_toward_ready(VERSION_CURRENT));
        assert!(
            counts_toward_nodeset_ready(DEPLOYMENT_READY) && counts_toward_nodeset_ready(NODESET_SERVICES)
        );
        assert!(!counts_toward_nodeset_ready(NODESET_SECRETS_CURRENT));
    }
}
