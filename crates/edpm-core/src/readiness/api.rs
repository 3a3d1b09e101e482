//! edpm-agent's own API: the status objects readiness is reported in.
//!
//! Group `agent.edpm.openstack.org`, version `v1alpha1`:
//! - `EDPMNodeStatus` (short name `edpmnode`): one per EDPM node, named by [`super::names`];
//! - `EDPMNodeSetStatus` (short name `edpmnodeset`): one per NodeSet or Role, the rollup.
//!
//! Both have a status subresource whose `conditions` is a map-list keyed by `type`, so that the
//! reporter (`status report`, field manager `edpm-agent`) and the node agent (its own field
//! manager) each own their condition types and never clobber each other's. The CRD YAML is
//! generated from these types (`crds`) and committed under `packaging/kubernetes/`.
//!
//! Pure types: the derive only describes the resource; talking to the API server is `k8s`'s.
//! Their plurals are the kinds table's (`crate::kinds::KINDS`): the derive's own (kube's
//! plural of the lower-cased kind) is checked against it, never spelled here.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::types::Column;
use crate::condition::{Conditions, READY};

pub const GROUP: &str = "agent.edpm.openstack.org";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "agent.edpm.openstack.org/v1alpha1";
pub const NODE_KIND: &str = "EDPMNodeStatus";
pub const NODESET_KIND: &str = "EDPMNodeSetStatus";

/// Labels on every object, for selection (`kubectl get edpmnode -l agent.edpm.openstack.org/nodeset=x`).
pub const NODESET_LABEL: &str = "agent.edpm.openstack.org/nodeset";
pub const NODE_LABEL: &str = "agent.edpm.openstack.org/node";
/// Where the node agents' Leases live by default: a namespace of their own (as kubelet's
/// `kube-node-lease`), so that whoever writes them holds no write on other Leases (other
/// operators' leader Leases).
pub const DEFAULT_LEASE_NAMESPACE: &str = "edpm-node-lease";
/// The whole node (and NodeSet) name, on objects whose label had to be shortened
/// (`names::label_value`): label values are at most 63 characters, node FQDNs are not.
pub const NODE_ANNOTATION: &str = "agent.edpm.openstack.org/node";
pub const NODESET_ANNOTATION: &str = "agent.edpm.openstack.org/nodeset";

/// The labels of an object of `node` (when given) of `nodeset`, each a valid label value,
/// and the annotations that keep the whole names that had to be shortened.
pub fn labels_and_annotations(
    nodeset: &str,
    node: Option<&str>,
) -> (std::collections::BTreeMap<String, String>, std::collections::BTreeMap<String, String>) {
    let mut labels = std::collections::BTreeMap::new();
    let mut annotations = std::collections::BTreeMap::new();
    for (label, annotation, value) in
        [(NODESET_LABEL, NODESET_ANNOTATION, Some(nodeset)), (NODE_LABEL, NODE_ANNOTATION, node)]
    {
        let Some(value) = value else { continue };
        let short = super::names::label_value(value);
        if short != value {
            annotations.insert(annotation.to_string(), value.to_string());
        }
        labels.insert(label.to_string(), short);
    }
    (labels, annotations)
}

/// Which model the node comes from: a NodeSet node, or a seeds' Node of a Role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OwnerKind {
    OpenStackDataPlaneNodeSet,
    OpenStackDataPlaneRole,
}

/// The per-node status object.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "agent.edpm.openstack.org",
    version = "v1alpha1",
    kind = "EDPMNodeStatus",
    root = "EdpmNodeStatus",
    shortname = "edpmnode",
    category = "edpm",
    namespaced,
    status = "NodeStatus",
    doc = "Phase -1/0/1 readiness of one EDPM node, with edpm-agent's conditions and the node agent's"
)]
#[serde(rename_all = "camelCase")]
pub struct EdpmNodeStatusSpec {
    /// The NodeSet (or the seeds' Role) the node belongs to.
    pub node_set: String,
    pub node_set_kind: OwnerKind,
    /// The node: its key in the NodeSet's `spec.nodes`, or the seeds' Node name.
    pub node: String,
    /// The node's `hostName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_name: String,
    /// What edpm-agent keeps of the node so it outlives the Deployments: its last runs and
    /// what was last deployed and delivered to it. In the spec, which the node agent cannot
    /// write (it may patch only the status subresource), so it is evidence the agent cannot
    /// forge.
    #[serde(default, skip_serializing_if = "crate::snapshot::evidence::NodeRecord::is_empty")]
    pub record: crate::snapshot::evidence::NodeRecord,
}

/// The status both writers share: conditions keyed by type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The object's `metadata.generation` the conditions were computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
}

/// How many runs a node's history keeps (the CRD's description says 20 too).
pub const RUN_HISTORY: usize = 20;

/// The per-NodeSet (or per-Role) rollup object.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "agent.edpm.openstack.org",
    version = "v1alpha1",
    kind = "EDPMNodeSetStatus",
    root = "EdpmNodeSetStatus",
    shortname = "edpmnodeset",
    category = "edpm",
    namespaced,
    status = "NodeSetStatus",
    doc = "Phase -1/0/1 readiness of a NodeSet (or a seeds' Role): how many nodes are ready and which block"
)]
#[serde(rename_all = "camelCase")]
pub struct EdpmNodeSetStatusSpec {
    pub node_set: String,
    pub node_set_kind: OwnerKind,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    #[serde(default)]
    pub nodes: NodeCounts,
}

/// How many of the NodeSet's nodes are ready, overall and per phase.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    pub total: u32,
    pub ready: u32,
    pub baremetal_ready: u32,
    pub infrastructure_ready: u32,
    pub services_ready: u32,
    /// Nodes that run the target version (`VersionCurrent` True): an update's progress, as a
    /// MachineConfigPool's `updatedMachineCount`.
    #[serde(default)]
    pub updated: u32,
    /// Nodes that hold every current Secret and ConfigMap delivered to them (`SecretsCurrent`
    /// True): a rotation's progress.
    #[serde(default)]
    pub inputs_current: u32,
    /// Nodes whose `Ready` is False with severity Error (a failure, not a wait), as a
    /// MachineConfigPool's `degradedMachineCount`.
    #[serde(default)]
    pub degraded: u32,
    /// `ready/total`, for the printer column.
    #[serde(default)]
    pub summary: String,
}

impl NodeCounts {
    /// The count a condition type's row names (`condition::types::Count::field`): a field
    /// above, spelled as the CRD spells it.
    pub fn held_mut(&mut self, field: &str) -> Option<&mut u32> {
        match field {
            "updated" => Some(&mut self.updated),
            "inputsCurrent" => Some(&mut self.inputs_current),
            _ => None,
        }
    }

    /// Each count as `edpm_nodeset_node_count` labels it: total, ready, those of the condition
    /// types' table, degraded.
    pub fn labelled(&self) -> Vec<(&'static str, u32)> {
        let mut out = vec![("total", self.total), ("ready", self.ready)];
        let mut held = self.clone();
        out.extend(
            crate::condition::types::counted()
                .map(|(_, c)| (c.label, held.held_mut(c.field).map_or(0, |n| *n))),
        );
        out.push(("degraded", self.degraded));
        out
    }
}

/// The two CRDs, as generated from the types, with their printer columns: the objects' own
/// fields, and a status column for each condition type the types table gives one
/// (`condition::types::TYPES`).
pub fn crds() -> Vec<CustomResourceDefinition> {
    use crate::condition::types::TYPES;
    use kube_core::CustomResourceExt;
    let conditions = |of: fn(&crate::condition::types::Type) -> Option<(&str, Column)>| {
        TYPES
            .iter()
            .filter_map(of)
            .map(|(ty, c)| column(c.name, c.description, &condition_path(ty, "status")))
    };
    let node = [column("NodeSet", None, ".spec.nodeSet"), column("Node", None, ".spec.node")]
        .into_iter()
        .chain(conditions(|t| Some((t.node?, t.column?))))
        .chain([
            column("Reason", None, &condition_path(READY, "reason")),
            column(
                "Version",
                Some("the OpenStack version last deployed to the node"),
                ".status.deployedVersion.value",
            ),
            age(),
        ]);
    let nodeset = std::iter::once(column("Nodes", None, ".status.nodes.summary"))
        .chain(crate::condition::types::counted().map(|(ty, c)| {
            let said =
                c.column.description.map_or_else(|| format!("{ty} True"), |d| format!("{d} ({ty} True)"));
            count(c.column.name, &said, c.field)
        }))
        .chain([count("Degraded", "nodes whose Ready is False with severity Error (a failure)", "degraded")])
        .chain(conditions(|t| Some((t.nodeset?, t.nodeset_column?))))
        .chain([
            CustomResourceColumnDefinition {
                priority: Some(1),
                ..column("Message", None, &condition_path(READY, "message"))
            },
            age(),
        ]);
    vec![with_columns(EdpmNodeStatus::crd(), node), with_columns(EdpmNodeSetStatus::crd(), nodeset)]
}

/// A string column.
fn column(name: &str, description: Option<&str>, json_path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.into(),
        type_: "string".into(),
        description: description.map(Into::into),
        json_path: json_path.into(),
        ..Default::default()
    }
}

/// An integer column of `.status.nodes`.
fn count(name: &str, description: &str, field: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        type_: "integer".into(),
        ..column(name, Some(description), &format!(".status.nodes.{field}"))
    }
}

/// `kubectl get`'s `AGE`.
fn age() -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        type_: "date".into(),
        ..column("Age", None, ".metadata.creationTimestamp")
    }
}

/// The JSONPath of a field of the condition of type `ty`.
fn condition_path(ty: &str, field: &str) -> String {
    format!(".status.conditions[?(@.type==\"{ty}\")].{field}")
}

fn with_columns(
    mut crd: CustomResourceDefinition,
    columns: impl Iterator<Item = CustomResourceColumnDefinition>,
) -> CustomResourceDefinition {
    let columns: Vec<_> = columns.collect();
    for v in &mut crd.spec.versions {
        v.additional_printer_columns = Some(columns.clone());
    }
    crd
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_count_the_types_table_names_is_a_field_of_the_nodesets_counts() {
        let schema = serde_json::to_value(schemars::schema_for!(super::NodeCounts)).unwrap();
        let mut counts = super::NodeCounts::default();
        let held: Vec<_> = crate::condition::types::counted().collect();
        assert!(held.len() >= 2, "VersionCurrent and SecretsCurrent are counted");
        for (i, (ty, c)) in held.iter().enumerate() {
            assert!(
                schema["properties"].get(c.field).is_some(),
                "{ty}: no field {} in status.nodes",
                c.field
            );
            *counts.held_mut(c.field).unwrap_or_else(|| panic!("{ty}: held_mut knows no {}", c.field)) =
                10 + i as u32;
        }
        // Each reaches /metrics under its label, between ready and degraded.
        let labelled = counts.labelled();
        assert_eq!(labelled.first().map(|l| l.0), Some("total"));
        assert_eq!(labelled.last().map(|l| l.0), Some("degraded"));
        for (i, (_, c)) in held.iter().enumerate() {
            assert!(labelled.contains(&(c.label, 10 + i as u32)), "{labelled:?}");
        }
    }

    #[test]
    fn the_derived_plurals_are_the_kinds_tables() {
        use kube_core::Resource;
        for (kind, plural) in [
            (super::NODE_KIND, super::EdpmNodeStatus::plural(&())),
            (super::NODESET_KIND, super::EdpmNodeSetStatus::plural(&())),
        ] {
            assert_eq!(crate::kinds::named(kind).map(|k| k.plural), Some(plural.as_ref()), "{kind}");
        }
    }

    #[test]
    fn crds_declare_conditions_as_a_map_list_keyed_by_type() {
        for crd in super::crds() {
            let v = serde_json::to_value(&crd).unwrap();
            let version = &v["spec"]["versions"][0];
            let conds =
                &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"];
            assert_eq!(conds["x-kubernetes-list-type"], "map", "{}", crd.metadata.name.clone().unwrap());
            assert_eq!(conds["x-kubernetes-list-map-keys"], serde_json::json!(["type"]));
            assert!(
                conds["items"]["required"].as_array().unwrap().iter().any(|r| r == "type"),
                "a map-list key must be required"
            );
            assert!(version["subresources"]["status"].is_object(), "status subresource");
        }
    }
}
