//! Resolves a [`Snapshot`] into the domain: host groups (a Role or a NodeSet) and their
//! members (Nodes, or NodeSet node entries), each field remembering where it was written.
//!
//! Pure. The seeds' Role/Node model and today's NodeSet model both map into [`HostGroup`],
//! so the inventory, config and mounts stages are written once. Defaults that the CRD and the
//! webhook would fill on the API server are applied here too, because manifests read from a
//! directory never went through them; on objects read from the API they are no-ops.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use crate::services::{DEFAULT_NODESET_SERVICES, DEFAULT_ROLE_SERVICES};
use crate::snapshot::Snapshot;
use crate::snapshot::resource::{
    AnsibleOpts, AnsibleVars, CELL_ANNOTATION, DataSource, IpSetNetwork, LegacyNodeSection, Meta,
    NodeSetSpec, NodeSpec, ObjRef, Object, Origin, RoleSpec,
};

/// Webhook default for `ansibleUser` on pre-provisioned NodeSets.
pub const DEFAULT_ANSIBLE_USER: &str = "cloud-admin";
/// CRD default for `nodeTemplate.managementNetwork`.
pub const DEFAULT_MANAGEMENT_NETWORK: &str = "ctlplane";

/// A value and the field path it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Field<T> {
    pub value: T,
    /// Borrowed when it is the same for every object (`spec.node.ansibleUser`).
    pub path: Cow<'static, str>,
    /// True when the value is a default filled in by us (CRD or webhook default).
    pub defaulted: bool,
}

impl<T> Field<T> {
    fn set(value: T, path: impl Into<Cow<'static, str>>) -> Self {
        Field { value, path: path.into(), defaulted: false }
    }
    fn default(value: T, path: impl Into<Cow<'static, str>>) -> Self {
        Field { value, path: path.into(), defaulted: true }
    }
}

/// The Ansible-relevant settings of a template or a node, in either model.
#[derive(Debug, Clone, Default)]
pub struct AnsibleSection {
    pub user: Option<Field<String>>,
    pub host: Option<Field<String>>,
    pub port: Option<Field<i64>>,
    pub management_network: Option<Field<String>>,
    /// `ansibleVars` as written (a mapping, or a YAML string in the earliest CRD).
    pub vars: Option<Field<AnsibleVars>>,
    pub vars_from: Vec<Field<DataSource>>,
    pub networks: Option<Field<Vec<IpSetNetwork>>>,
    /// The old model's `networkConfig.template` (os-net-config j2 text).
    pub network_config_template: Option<Field<String>>,
    pub ssh_key_secret: Option<Field<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    Role,
    NodeSet,
}

/// A cell assignment and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRef {
    pub name: String,
    pub object: ObjRef,
    pub field: &'static str,
}

/// The field that places an object in a cell.
pub const CELL_FIELD: &str = "metadata.annotations.\"nova.openstack.org/cell\"";

/// A Role or a NodeSet: one inventory group.
#[derive(Debug, Clone)]
pub struct HostGroup {
    pub name: String,
    pub kind: GroupKind,
    pub id: ObjRef,
    pub template: AnsibleSection,
    pub services: Field<Vec<String>>,
    pub tls_enabled: Option<Field<bool>>,
    pub tags: Option<Field<Vec<String>>>,
    pub pre_provisioned: bool,
    pub cell: Option<CellRef>,
    pub extra_mounts: Field<Vec<Value>>,
    pub members: Vec<Member>,
}

/// A host: a Node object, or an entry of a NodeSet's `spec.nodes`.
#[derive(Debug, Clone)]
pub struct Member {
    /// The Node name or the NodeSet map key.
    pub key: String,
    pub id: ObjRef,
    pub host_name: Field<String>,
    pub section: AnsibleSection,
    /// Own cell annotation (Node model only); the effective cell is [`Member::cell`].
    pub own_cell: Option<CellRef>,
}

impl Member {
    /// Ansible's `inventory_hostname`: the short host name, as upstream uses since
    /// dataplane-operator PR #567.
    pub fn inventory_hostname(&self) -> &str {
        self.host_name.value.split('.').next().unwrap_or("")
    }

    /// The Node's annotation wins over its Role's (seed 003).
    pub fn cell<'a>(&'a self, group: &'a HostGroup) -> Option<&'a CellRef> {
        self.own_cell.as_ref().or(group.cell.as_ref())
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    #[error("{node}: spec.role names Role \"{}\", which does not exist{hint}", crate::excerpt::echo(role))]
    MissingRole { node: ObjRef, role: String, hint: String },
    #[error("{node}: spec.role is empty; set it to the name of an OpenStackDataPlaneRole")]
    NoRole { node: ObjRef },
}

#[derive(Debug, Clone, Default)]
pub struct Model {
    pub groups: Vec<HostGroup>,
}

impl Model {
    pub fn members(&self) -> impl Iterator<Item = (&HostGroup, &Member)> {
        self.groups.iter().flat_map(|g| g.members.iter().map(move |m| (g, m)))
    }

    /// Finds a host by inventory hostname, node key, or full host name.
    pub fn find_member(&self, host: &str) -> Option<(&HostGroup, &Member)> {
        self.members()
            .find(|(_, m)| m.inventory_hostname() == host)
            .or_else(|| self.members().find(|(_, m)| m.key == host || m.host_name.value == host))
    }
}

/// Builds the model. Errors are references that cannot be resolved at all (a Node without its
/// Role); everything else is left to the inventory and `validate`.
pub fn resolve(snap: &Snapshot) -> Result<Model, ModelError> {
    build(snap, snap.roles.clone(), snap.nodes.clone(), snap.nodesets.clone())
}

/// [`resolve`], moving the Roles, Nodes and NodeSets out of the snapshot instead of copying
/// them, for callers that need nothing more of those (the inventory for Ansible): with 10,000
/// nodes, the copy and the freeing of the originals were a fifth of a run.
pub fn take(snap: &mut Snapshot) -> Result<Model, ModelError> {
    let roles = std::mem::take(&mut snap.roles);
    let nodes = std::mem::take(&mut snap.nodes);
    let nodesets = std::mem::take(&mut snap.nodesets);
    build(snap, roles, nodes, nodesets)
}

fn build(
    snap: &Snapshot,
    mut roles: Vec<Object<RoleSpec>>,
    mut nodes: Vec<Object<NodeSpec>>,
    nodesets: Vec<Object<NodeSetSpec>>,
) -> Result<Model, ModelError> {
    let (inline_roles, inline_nodes) = inline_objects(snap, &roles, &nodes);
    roles.extend(inline_roles);
    nodes.extend(inline_nodes);
    // Each node's Role, by position; the nodes are then dealt to their Roles in one pass.
    let index: HashMap<&str, usize> =
        roles.iter().enumerate().map(|(i, r)| (r.id.name.as_str(), i)).collect();
    let mut role_of = Vec::with_capacity(nodes.len());
    let mut counts = vec![0; roles.len()];
    for node in &nodes {
        match node.body.role.as_deref() {
            None | Some("") => return Err(ModelError::NoRole { node: node.id.clone() }),
            Some(role) => match index.get(role) {
                Some(&i) => {
                    role_of.push(i);
                    counts[i] += 1;
                }
                None => {
                    return Err(ModelError::MissingRole {
                        node: node.id.clone(),
                        role: role.to_string(),
                        hint: did_you_mean(role, roles.iter().map(|r| r.id.name.as_str())),
                    });
                }
            },
        }
    }
    let mut by_role: Vec<Vec<Object<NodeSpec>>> = counts.into_iter().map(Vec::with_capacity).collect();
    for (node, i) in nodes.into_iter().zip(role_of) {
        by_role[i].push(node);
    }
    let mut groups = Vec::with_capacity(roles.len() + nodesets.len());
    for (role, members) in roles.into_iter().zip(by_role) {
        groups.push(role_group(role, members));
    }
    for ns in nodesets {
        groups.push(nodeset_group(ns));
    }
    Ok(Model { groups })
}

pub use crate::suggest::did_you_mean;

/// Roles and Nodes that an OpenStackDataPlane declares inline. A standalone object of the same
/// name wins: it is what the operator's fan-out left on the API server.
fn inline_objects(
    snap: &Snapshot,
    standalone_roles: &[Object<RoleSpec>],
    standalone_nodes: &[Object<NodeSpec>],
) -> (Vec<Object<RoleSpec>>, Vec<Object<NodeSpec>>) {
    let mut roles: Vec<Object<RoleSpec>> = Vec::new();
    let mut nodes: Vec<Object<NodeSpec>> = Vec::new();
    if snap.dataplanes.is_empty() {
        return (roles, nodes);
    }
    let mut role_names: std::collections::HashSet<String> =
        standalone_roles.iter().map(|r| r.id.name.clone()).collect();
    let mut node_names: std::collections::HashSet<String> =
        standalone_nodes.iter().map(|n| n.id.name.clone()).collect();
    for dp in &snap.dataplanes {
        let from = dp.id.short();
        for (name, spec) in &dp.body.roles {
            if !role_names.insert(name.clone()) {
                continue;
            }
            let mut spec = spec.clone();
            spec.data_plane.get_or_insert_with(|| dp.id.name.clone());
            let path = format!("spec.roles.{name}");
            let lines = dp.id.lines.spec_at(&path);
            let origin = Origin::Expanded { from: from.clone(), path };
            roles.push(Object {
                id: ObjRef::with_lines("OpenStackDataPlaneRole", name.as_str(), origin, lines),
                meta: child_meta(name, &dp.meta),
                body: spec,
            });
        }
        for (name, spec) in &dp.body.nodes {
            if !node_names.insert(name.clone()) {
                continue;
            }
            let path = format!("spec.nodes.{name}");
            let lines = dp.id.lines.spec_at(&path);
            let origin = Origin::Expanded { from: from.clone(), path };
            nodes.push(Object {
                id: ObjRef::with_lines("OpenStackDataPlaneNode", name.as_str(), origin, lines),
                meta: child_meta(name, &dp.meta),
                body: spec.clone(),
            });
        }
    }
    (roles, nodes)
}

fn child_meta(name: &str, parent: &Meta) -> Meta {
    Meta { name: name.to_string(), namespace: parent.namespace.clone(), ..Default::default() }
}

fn cell_of(id: &ObjRef, meta: &Meta) -> Option<CellRef> {
    meta.annotations.get(CELL_ANNOTATION).filter(|c| !c.is_empty()).map(|c| CellRef {
        name: c.clone(),
        object: id.clone(),
        field: CELL_FIELD,
    })
}

fn non_empty(s: Option<String>, path: impl Into<Cow<'static, str>>) -> Option<Field<String>> {
    s.filter(|s| !s.is_empty()).map(|v| Field::set(v, path))
}

/// Where a section of the seeds' model sits: `spec.node` of a Node, `spec.nodeTemplate` of a
/// Role. Its field paths are constants.
#[derive(Clone, Copy)]
enum LegacyBase {
    Node,
    Template,
}

macro_rules! legacy_path {
    ($base:expr, $leaf:literal) => {
        match $base {
            LegacyBase::Node => Cow::Borrowed(concat!("spec.node.", $leaf)),
            LegacyBase::Template => Cow::Borrowed(concat!("spec.nodeTemplate.", $leaf)),
        }
    };
}

fn legacy_section(s: LegacyNodeSection, base: LegacyBase) -> AnsibleSection {
    AnsibleSection {
        user: non_empty(s.ansible_user, legacy_path!(base, "ansibleUser")),
        host: None,
        port: s.ansible_port.filter(|p| *p > 0).map(|p| Field::set(p, legacy_path!(base, "ansiblePort"))),
        management_network: non_empty(s.management_network, legacy_path!(base, "managementNetwork")),
        vars: s.ansible_vars.map(|v| Field::set(v, legacy_path!(base, "ansibleVars"))),
        vars_from: Vec::new(),
        networks: (!s.networks.is_empty()).then(|| Field::set(s.networks, legacy_path!(base, "networks"))),
        network_config_template: s
            .network_config
            .and_then(|n| non_empty(n.template, legacy_path!(base, "networkConfig.template"))),
        ssh_key_secret: non_empty(
            s.ansible_ssh_private_key_secret,
            legacy_path!(base, "ansibleSSHPrivateKeySecret"),
        ),
    }
}

fn role_group(role: Object<RoleSpec>, nodes: Vec<Object<NodeSpec>>) -> HostGroup {
    let spec = role.body;
    let services = match spec.services {
        Some(s) => Field::set(s, "spec.services"),
        None => {
            Field::default(DEFAULT_ROLE_SERVICES.iter().map(|s| s.to_string()).collect(), "spec.services")
        }
    };
    let mut members: Vec<Member> = nodes
        .into_iter()
        .map(|node| {
            let own_cell = cell_of(&node.id, &node.meta);
            let body = node.body;
            let mut section = legacy_section(body.node, LegacyBase::Node);
            section.host = non_empty(body.ansible_host, "spec.ansibleHost");
            let host_name = non_empty(body.host_name, "spec.hostName")
                .unwrap_or_else(|| Field::default(node.id.name.clone(), "metadata.name"));
            Member { key: node.id.name.clone(), id: node.id, host_name, section, own_cell }
        })
        .collect();
    members.sort_by(|a, b| a.key.cmp(&b.key));
    let extra_mounts = Field::set(spec.node_template.extra_mounts.clone(), "spec.nodeTemplate.extraMounts");
    HostGroup {
        name: role.id.name.clone(),
        kind: GroupKind::Role,
        cell: cell_of(&role.id, &role.meta),
        id: role.id,
        template: legacy_section(spec.node_template, LegacyBase::Template),
        services,
        tls_enabled: None,
        tags: None,
        pre_provisioned: spec.pre_provisioned.unwrap_or(false),
        extra_mounts,
        members,
    }
}

/// `nodeTemplate.ansible` (`base` is `spec.nodeTemplate`) or a node's `ansible`.
fn ansible_section(a: AnsibleOpts, base: &str) -> AnsibleSection {
    AnsibleSection {
        user: non_empty(a.ansible_user, format!("{base}.ansible.ansibleUser")),
        host: non_empty(a.ansible_host, format!("{base}.ansible.ansibleHost")),
        port: a.ansible_port.filter(|p| *p > 0).map(|p| Field::set(p, format!("{base}.ansible.ansiblePort"))),
        management_network: None,
        vars: a.ansible_vars.map(|v| Field::set(v, format!("{base}.ansible.ansibleVars"))),
        vars_from: a
            .ansible_vars_from
            .into_iter()
            .enumerate()
            .map(|(i, d)| Field::set(d, format!("{base}.ansible.ansibleVarsFrom[{i}]")))
            .collect(),
        networks: None,
        network_config_template: None,
        ssh_key_secret: None,
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "maps a NodeSet's spec field by field, each with its webhook default, in the CRD's order"
)]
fn nodeset_group(ns: Object<NodeSetSpec>) -> HostGroup {
    let spec = ns.body;
    let pre_provisioned = spec.pre_provisioned.unwrap_or(false);
    let bm = spec.baremetal_set_template.as_ref();
    let template_section = spec.node_template;
    let mut template = ansible_section(template_section.ansible, "spec.nodeTemplate");
    if template.user.is_none() {
        // Webhook default: cloud-admin, or the baremetal template's cloudUserName.
        let bm_user =
            bm.and_then(|b| b.cloud_user_name.clone()).filter(|u| !u.is_empty() && !pre_provisioned);
        template.user = Some(match bm_user {
            Some(u) => Field::default(u, "spec.baremetalSetTemplate.cloudUserName"),
            None => Field::default(DEFAULT_ANSIBLE_USER.to_string(), "spec.nodeTemplate.ansible.ansibleUser"),
        });
    }
    template.management_network = Some(
        non_empty(template_section.management_network, "spec.nodeTemplate.managementNetwork").unwrap_or_else(
            || Field::default(DEFAULT_MANAGEMENT_NETWORK.to_string(), "spec.nodeTemplate.managementNetwork"),
        ),
    );
    template.networks = (!template_section.networks.is_empty())
        .then(|| Field::set(template_section.networks, "spec.nodeTemplate.networks"));
    template.ssh_key_secret = non_empty(
        template_section.ansible_ssh_private_key_secret,
        "spec.nodeTemplate.ansibleSSHPrivateKeySecret",
    );
    let domain = bm.and_then(|b| b.domain_name.clone()).filter(|d| !d.is_empty() && !pre_provisioned);
    let members = spec
        .nodes
        .into_iter()
        .map(|(key, node)| {
            let base = format!("spec.nodes.{key}");
            let mut section = ansible_section(node.ansible, &base);
            section.management_network =
                non_empty(node.management_network, format!("{base}.managementNetwork"));
            section.networks =
                (!node.networks.is_empty()).then(|| Field::set(node.networks, format!("{base}.networks")));
            let host_name = non_empty(node.host_name, format!("{base}.hostName")).unwrap_or_else(|| {
                // Webhook default: the map key, made an FQDN with the baremetal domain.
                let name = match &domain {
                    Some(d) => format!("{key}.{d}"),
                    None => key.clone(),
                };
                Field::default(name, format!("{base}.hostName"))
            });
            Member { key, id: ns.id.clone(), host_name, section, own_cell: None }
        })
        .collect();
    HostGroup {
        name: ns.id.name.clone(),
        kind: GroupKind::NodeSet,
        cell: cell_of(&ns.id, &ns.meta),
        id: ns.id,
        template,
        services: match spec.services {
            Some(s) => Field::set(s, "spec.services"),
            None => Field::default(
                DEFAULT_NODESET_SERVICES.iter().map(|s| s.to_string()).collect(),
                "spec.services",
            ),
        },
        tls_enabled: Some(match spec.tls_enabled {
            Some(t) => Field::set(t, "spec.tlsEnabled"),
            None => Field::default(true, "spec.tlsEnabled"),
        }),
        tags: spec.tags.map(|t| Field::set(t, "spec.tags")),
        pre_provisioned,
        extra_mounts: Field::set(template_section.extra_mounts, "spec.nodeTemplate.extraMounts"),
        members,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::snapshot::Located;

    fn snap(values: Vec<Value>) -> Snapshot {
        let docs = values.into_iter().enumerate().map(|(i, value)| {
            Located::from_value(Origin::File { path: "m.yaml".into(), line: i as u64 + 1 }, &value)
        });
        Snapshot::from_documents(docs, None).unwrap()
    }

    fn role(name: &str, extra: Value) -> Value {
        json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneRole",
               "metadata": {"name": name, "annotations": extra["annotations"].clone()}, "spec": extra["spec"].clone()})
    }

    fn node(name: &str, role: &str, annotations: Value) -> Value {
        json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNode",
               "metadata": {"name": name, "annotations": annotations}, "spec": {"role": role, "hostName": format!("{name}.example.com")}})
    }

    #[test]
    fn node_annotation_overrides_role_cell() {
        let s = snap(vec![
            role("compute", json!({"annotations": {CELL_ANNOTATION: "nova-cell1"}, "spec": {}})),
            node("c0", "compute", json!({})),
            node("c1", "compute", json!({CELL_ANNOTATION: "nova-cell2"})),
        ]);
        let m = resolve(&s).unwrap();
        let g = &m.groups[0];
        let cells: Vec<_> = g.members.iter().map(|n| n.cell(g).unwrap().name.as_str()).collect();
        assert_eq!(cells, ["nova-cell1", "nova-cell2"]);
        assert_eq!(CELL_FIELD, format!("metadata.annotations.\"{CELL_ANNOTATION}\""));
        assert_eq!(g.members[0].inventory_hostname(), "c0");
    }

    #[test]
    fn missing_role_suggests_a_name() {
        let s = snap(vec![role("edpm-compute", json!({"spec": {}})), node("c0", "edpm-cmpute", json!({}))]);
        let err = resolve(&s).unwrap_err().to_string();
        assert!(
            err.contains("\"edpm-cmpute\", which does not exist; did you mean \"edpm-compute\"?"),
            "{err}"
        );
    }

    #[test]
    fn dataplane_expands_inline_roles_and_nodes_unless_standalone() {
        let s = snap(vec![
            json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlane", "metadata": {"name": "dp"},
                   "spec": {"roles": {"r": {"nodeTemplate": {"ansibleUser": "inline"}}}, "nodes": {"n0": {"role": "r"}, "n1": {"role": "r"}}}}),
            node("n1", "r", json!({})),
        ]);
        let m = resolve(&s).unwrap();
        let g = &m.groups[0];
        assert_eq!(g.template.user.as_ref().unwrap().value, "inline");
        let origins: Vec<_> =
            g.members.iter().map(|m| matches!(m.id.origin, Origin::Expanded { .. })).collect();
        assert_eq!(origins, [true, false]);
    }

    #[test]
    fn nodeset_webhook_defaults() {
        let s = snap(vec![
            json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNodeSet",
            "metadata": {"name": "ns"}, "spec": {"preProvisioned": false, "baremetalSetTemplate": {"domainName": "example.com", "cloudUserName": "stack"},
            "nodes": {"edpm-0": {}}}}),
        ]);
        let m = resolve(&s).unwrap();
        let g = &m.groups[0];
        assert_eq!(g.members[0].host_name.value, "edpm-0.example.com");
        assert_eq!(g.members[0].inventory_hostname(), "edpm-0");
        assert_eq!(g.template.user.as_ref().unwrap().value, "stack");
        assert_eq!(g.template.management_network.as_ref().unwrap().value, "ctlplane");
        assert!(g.tls_enabled.as_ref().unwrap().value);
        assert_eq!(g.services.value.len(), DEFAULT_NODESET_SERVICES.len());
    }
}
