//! The kinds edpm-agent reads, in one table: where each lives in the API, how it is read, what
//! it is in a snapshot, and which NodeSets a change of one reaches. Everything that lists,
//! watches, classifies or maps a change is derived from [`KINDS`]:
//! `edpm_io::k8s::read` lists the kinds whose [`Read`] is a list, the controller's watches watch
//! the same, `snapshot` classifies a document by the table, and `controller::touch` takes a
//! kind's [`ReachRule`] from it. A kind is added here, once.

/// Upstream's API groups, so that a manifest with the right kind but a foreign group is not
/// mistaken for one of ours.
pub const DATAPLANE_GROUP: &str = "dataplane.openstack.org";
pub const NETWORK_GROUP: &str = "network.openstack.org";
pub const NOVA_GROUP: &str = "nova.openstack.org";
pub const CORE_OPENSTACK_GROUP: &str = "core.openstack.org";
pub const BAREMETAL_GROUP: &str = "baremetal.openstack.org";
/// edpm-agent's own API group (its status objects).
pub const AGENT_GROUP: &str = "agent.edpm.openstack.org";

/// What a document of a kind is in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownKind {
    DataPlane,
    Role,
    Node,
    NodeSet,
    Service,
    IpSet,
    NetConfig,
    DnsMasq,
    ConfigMap,
    Secret,
    /// A control-plane object the rendering reads (NovaCell, the control plane, …).
    OpenStack,
    Deployment,
    Job,
    Pod,
    BaremetalSet,
    NodeReport,
    RollupReport,
    Lease,
}

/// How the API server is asked for a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Listed with the user's label selector: the kinds that produce hosts.
    Selected,
    /// Listed whole.
    Listed,
    /// Listed with a label selector of its own (the operator's Jobs, the node agents' Leases).
    Labelled(&'static str),
    /// Never listed: got by name, only the objects the others reference (ConfigMaps, Secrets).
    ByName,
}

/// Which NodeSets a change of an object of a kind can move (`controller::touch::reach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReachRule {
    /// The NodeSet (or seeds' Role) of the object's own name.
    OwnName,
    /// A seeds' Node: its `spec.role`.
    SpecRole,
    /// A Deployment: its `spec.nodeSets`.
    DeploymentNodeSets,
    /// A Job: its NodeSet label and its Deployment's NodeSets.
    JobLabels,
    /// A pod: its Job's.
    PodJob,
    /// edpm-agent's own status objects: `spec.nodeSet`, else the NodeSet label.
    StatusNodeSet,
    /// A node agent's Lease: its NodeSet label.
    LeaseNodeSet,
    /// Any NodeSet (services, the network, Nova, the control plane).
    All,
}

/// One kind edpm-agent reads.
#[derive(Debug)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub read: Read,
    /// Read only for readiness (the `status` commands and the controller).
    pub evidence: bool,
    pub known: KnownKind,
    pub reach: ReachRule,
}

impl Kind {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (or `plural` for the core group), as messages and RBAC name it.
    pub fn resource_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether the API server is asked for a list of this kind (and a controller watches it).
    pub fn is_listed(&self) -> bool {
        self.read != Read::ByName
    }

    /// Whether its objects are groups of hosts (a NodeSet, a seeds' Role): what an evaluation
    /// of everything covers, one group at a time.
    pub fn holds_hosts(&self) -> bool {
        matches!(self.known, KnownKind::NodeSet | KnownKind::Role)
    }
}

/// A row of the table, in the order the kinds are listed.
#[allow(clippy::too_many_arguments, reason = "a table row: one argument a column, so KINDS reads as a table")]
const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    read: Read,
    evidence: bool,
    known: KnownKind,
    reach: ReachRule,
) -> Kind {
    Kind { group, version, kind, plural, read, evidence, known, reach }
}

const V1BETA1: &str = "v1beta1";

/// Every kind edpm-agent reads. The data plane's own kinds first, then what rendering reads
/// of the network and the control plane, then the evidence readiness reads.
// One row a kind, so the table reads as a table.
#[rustfmt::skip]
pub const KINDS: &[Kind] = &[
    kind(DATAPLANE_GROUP, V1BETA1, "OpenStackDataPlane", "openstackdataplanes", Read::Selected, false, KnownKind::DataPlane, ReachRule::All),
    kind(DATAPLANE_GROUP, V1BETA1, "OpenStackDataPlaneRole", "openstackdataplaneroles", Read::Selected, false, KnownKind::Role, ReachRule::OwnName),
    kind(DATAPLANE_GROUP, V1BETA1, "OpenStackDataPlaneNode", "openstackdataplanenodes", Read::Selected, false, KnownKind::Node, ReachRule::SpecRole),
    kind(DATAPLANE_GROUP, V1BETA1, "OpenStackDataPlaneNodeSet", "openstackdataplanenodesets", Read::Selected, false, KnownKind::NodeSet, ReachRule::OwnName),
    kind(DATAPLANE_GROUP, V1BETA1, "OpenStackDataPlaneService", "openstackdataplaneservices", Read::Listed, false, KnownKind::Service, ReachRule::All),
    kind(NETWORK_GROUP, V1BETA1, "IPSet", "ipsets", Read::Listed, false, KnownKind::IpSet, ReachRule::All),
    kind(NETWORK_GROUP, V1BETA1, "NetConfig", "netconfigs", Read::Listed, false, KnownKind::NetConfig, ReachRule::All),
    kind(NETWORK_GROUP, V1BETA1, "DNSMasq", "dnsmasqs", Read::Listed, false, KnownKind::DnsMasq, ReachRule::All),
    kind(NOVA_GROUP, V1BETA1, "NovaCell", "novacells", Read::Listed, false, KnownKind::OpenStack, ReachRule::All),
    kind(NOVA_GROUP, V1BETA1, "NovaExternalCompute", "novaexternalcomputes", Read::Listed, false, KnownKind::OpenStack, ReachRule::All),
    kind(CORE_OPENSTACK_GROUP, V1BETA1, "OpenStackControlPlane", "openstackcontrolplanes", Read::Listed, false, KnownKind::OpenStack, ReachRule::All),
    // The target version of a minor update (`VersionCurrent`): one per namespace.
    kind(CORE_OPENSTACK_GROUP, V1BETA1, "OpenStackVersion", "openstackversions", Read::Listed, true, KnownKind::OpenStack, ReachRule::All),
    kind("", "v1", "ConfigMap", "configmaps", Read::ByName, false, KnownKind::ConfigMap, ReachRule::All),
    kind("", "v1", "Secret", "secrets", Read::ByName, false, KnownKind::Secret, ReachRule::All),
    kind(DATAPLANE_GROUP, V1BETA1, "OpenStackDataPlaneDeployment", "openstackdataplanedeployments", Read::Listed, true, KnownKind::Deployment, ReachRule::DeploymentNodeSets),
    kind("batch", "v1", "Job", "jobs", Read::Labelled("app=openstackansibleee"), true, KnownKind::Job, ReachRule::JobLabels),
    // Each attempt's pod, for its termination message (why each host failed, also while the
    // Job still retries), selected as upstream selects them.
    kind("", "v1", "Pod", "pods", Read::Labelled("batch.kubernetes.io/job-name"), true, KnownKind::Pod, ReachRule::PodJob),
    kind(BAREMETAL_GROUP, V1BETA1, "OpenStackBaremetalSet", "openstackbaremetalsets", Read::Listed, true, KnownKind::BaremetalSet, ReachRule::OwnName),
    kind(AGENT_GROUP, "v1alpha1", "EDPMNodeStatus", "edpmnodestatuses", Read::Listed, true, KnownKind::NodeReport, ReachRule::StatusNodeSet),
    kind(AGENT_GROUP, "v1alpha1", "EDPMNodeSetStatus", "edpmnodesetstatuses", Read::Listed, true, KnownKind::RollupReport, ReachRule::StatusNodeSet),
    kind("coordination.k8s.io", "v1", "Lease", "leases", Read::Labelled("agent.edpm.openstack.org/node"), true, KnownKind::Lease, ReachRule::LeaseNodeSet),
];

/// The operators' API groups whose kinds edpm-agent knows all of, with the kinds it does not
/// read: with [`KINDS`], every kind of these groups. A kind of one of these groups outside
/// both is unknown (a typo, or a newer operator's). Kubernetes' own groups are not checked.
pub const UNREAD: &[(&str, &[&str])] = &[
    (DATAPLANE_GROUP, &[]),
    (NETWORK_GROUP, &["DNSData", "Reservation", "BGPConfiguration", "OpenStackNet", "OpenStackIPSet"]),
    (BAREMETAL_GROUP, &["OpenStackProvisionServer"]),
    (AGENT_GROUP, &[]),
];

/// Groups whose every kind is a control-plane object to the snapshot (their operators define
/// many; rendering looks some up by kind and name).
const OPENSTACK_GROUPS: &[&str] = &[NOVA_GROUP, CORE_OPENSTACK_GROUP];

/// The table's row for `kind` of `api_version`'s group (the core group only as `v1`).
pub fn find(api_version: &str, kind: &str) -> Option<&'static Kind> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    KINDS
        .iter()
        .find(|k| k.kind == kind && k.group == group && (!group.is_empty() || api_version == k.version))
}

/// The table's row for a kind named alone (kind names are unique in the table).
pub fn named(kind: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// What a document of `kind` in `api_version` is, if edpm-agent reads it.
pub fn classify(api_version: &str, kind: &str) -> Option<KnownKind> {
    if let Some(k) = find(api_version, kind) {
        return Some(k.known);
    }
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    OPENSTACK_GROUPS.contains(&group).then_some(KnownKind::OpenStack)
}

/// Every kind the operator of `group` defines, when edpm-agent knows them all ([`UNREAD`]'s
/// groups).
pub fn kinds_of_group(group: &str) -> Option<Vec<&'static str>> {
    let (_, unread) = UNREAD.iter().find(|(g, _)| *g == group)?;
    let mut out: Vec<&'static str> = KINDS.iter().filter(|k| k.group == group).map(|k| k.kind).collect();
    out.extend(unread.iter().copied());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_unique_and_plurals_are_lower_case() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(KINDS[..i].iter().all(|o| o.kind != k.kind), "{} twice", k.kind);
            assert_eq!(k.plural, k.plural.to_lowercase(), "{}", k.kind);
            assert!(k.plural.starts_with(&k.kind.to_lowercase()[..3]), "{}: {}", k.kind, k.plural);
        }
    }

    #[test]
    fn classification_follows_the_table() {
        assert_eq!(
            classify("dataplane.openstack.org/v1beta1", "OpenStackDataPlaneNodeSet"),
            Some(KnownKind::NodeSet)
        );
        assert_eq!(classify("v1", "Secret"), Some(KnownKind::Secret));
        assert_eq!(classify("apps/v1", "Secret"), None, "the core group only as v1");
        assert_eq!(classify("nova.openstack.org/v1beta1", "NovaAPI"), Some(KnownKind::OpenStack));
        assert_eq!(classify("coordination.k8s.io/v1", "Lease"), Some(KnownKind::Lease));
        assert_eq!(classify("dataplane.openstack.org/v1beta1", "OpenStackDataPlaneNodeSets"), None);
        for k in KINDS {
            assert_eq!(classify(&k.api_version(), k.kind), Some(k.known), "{}", k.kind);
        }
    }

    #[test]
    fn what_is_read_by_name_is_never_listed() {
        let by_name: Vec<&str> = KINDS.iter().filter(|k| !k.is_listed()).map(|k| k.kind).collect();
        assert_eq!(by_name, ["ConfigMap", "Secret"]);
        let hosts: Vec<&str> = KINDS.iter().filter(|k| k.holds_hosts()).map(|k| k.kind).collect();
        assert_eq!(hosts, ["OpenStackDataPlaneRole", "OpenStackDataPlaneNodeSet"]);
    }

    #[test]
    fn a_read_group_lists_every_kind_of_its_operator() {
        let network = kinds_of_group(NETWORK_GROUP).unwrap();
        assert!(network.contains(&"IPSet") && network.contains(&"DNSData"), "{network:?}");
        assert!(kinds_of_group(NOVA_GROUP).is_none() && kinds_of_group("").is_none());
        assert!(kinds_of_group("batch").is_none(), "Kubernetes' own groups are not checked");
    }
}
