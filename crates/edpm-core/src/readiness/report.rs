//! What `status report` writes: edpm-agent's status objects built from a readiness
//! computation, and, against what the snapshot already holds of them, which need a write.
//!
//! Only changes other than transition times cause a write: an object that does not exist
//! yet is created (its metadata and spec) and then gets its status; an existing one gets its
//! status only when a condition's status, reason, severity or message changed, or its
//! `observedGeneration` lags. The conditions written are edpm-agent's own; the node agent's
//! are left to it, except when its Lease expired: then they are written as Unknown, taking
//! them over until the agent writes them again (it applies with force). Pure.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::api::{
    EdpmNodeSetStatus, EdpmNodeSetStatusSpec, EdpmNodeStatus, EdpmNodeStatusSpec, NodeSetStatus, NodeStatus,
    labels_and_annotations,
};
use super::{NodeSetView, NodeView, Owner, Readiness, is_agent_condition};
use crate::condition::{Conditions, Status};
use crate::snapshot::evidence::{Evidence, NodeReport};

/// One object to write, and what of it.
#[derive(Debug, Clone)]
pub struct Write {
    pub kind: &'static str,
    pub name: String,
    /// The whole object, as the directory writer stores it and the API server receives it;
    /// encoded only when written (at 10,000 nodes, encoding every object of every evaluation
    /// was most of a controller's peak memory, for writes that were rarely needed).
    pub object: StatusObject,
    /// Create it (or fix its labels and owner): apply metadata and spec.
    pub needs_object: bool,
    /// Apply its status.
    pub needs_status: bool,
}

/// One of edpm-agent's status objects.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum StatusObject {
    Node(EdpmNodeStatus),
    NodeSet(EdpmNodeSetStatus),
}

impl StatusObject {
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

/// Every status object of a readiness computation, with what needs writing against
/// `existing` (the objects as the snapshot read them).
pub fn plan(r: &Readiness, existing: &Evidence, namespace: &str) -> Vec<Write> {
    let nodes: HashMap<&str, &NodeReport> =
        existing.reports.iter().map(|x| (x.id.name.as_str(), x)).collect();
    let sets: HashMap<&str, &NodeReport> = existing.rollups.iter().map(|x| (x.id.name.as_str(), x)).collect();
    // An object that did not decode is left as it is: a write may not mend it (a field
    // another manager owns), and each write's own watch event would evaluate and write it
    // again. It is reported instead; deleting it has it written anew.
    let unreadable: std::collections::HashSet<&str> =
        existing.unreadable.iter().map(|u| u.id.name.as_str()).collect();
    let mut out = Vec::with_capacity(r.nodes.len() + r.nodesets.len());
    for n in r.nodes.iter().filter(|n| !unreadable.contains(n.object.as_str())) {
        out.push(node_write(n, nodes.get(n.object.as_str()).copied(), namespace));
    }
    for s in r.nodesets.iter().filter(|s| !unreadable.contains(s.object.as_str())) {
        out.push(nodeset_write(s, sets.get(s.object.as_str()).copied(), namespace));
    }
    out
}

fn meta(
    name: &str,
    namespace: &str,
    owner: &Owner,
    (labels, annotations): (BTreeMap<String, String>, BTreeMap<String, String>),
) -> ObjectMeta {
    let owner_references = owner.uid.as_ref().map(|uid| {
        vec![OwnerReference {
            api_version: "dataplane.openstack.org/v1beta1".into(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: uid.clone(),
            block_owner_deletion: None,
            controller: None,
        }]
    });
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references,
        ..Default::default()
    }
}

/// The conditions edpm-agent writes: its own, and the agent's when they were turned Unknown
/// (an expired Lease).
fn written(conds: &Conditions) -> Conditions {
    Conditions(
        conds
            .iter()
            .filter(|c| !is_agent_condition(&c.type_) || super::node::is_agent_verdict(c))
            .cloned()
            .collect(),
    )
}

/// Whether the existing object's metadata and spec already say what we would.
fn object_matches(
    existing: &NodeReport,
    (labels, annotations): &(BTreeMap<String, String>, BTreeMap<String, String>),
    owner: &Owner,
) -> bool {
    let labels_ok = labels.iter().all(|(k, v)| existing.meta.labels.get(k) == Some(v))
        && annotations.iter().all(|(k, v)| existing.meta.annotations.get(k) == Some(v));
    // The reader keeps no ownerReferences; an owner UID seen now but absent then is not
    // knowable here, so only labels decide (the owner is set when the object is created).
    let _ = owner;
    labels_ok
}

fn status_matches(existing: &NodeReport, ours: &Conditions, generation: Option<i64>) -> bool {
    if existing.status.observed_generation != generation {
        return false;
    }
    ours.iter().all(|c| existing.status.conditions.get(&c.type_).is_some_and(|e| !c.differs_from(e)))
        // A type we wrote before and no longer compute must be removed by a write.
        && existing.status.conditions.iter().filter(|e| !is_agent_condition(&e.type_)).all(|e| ours.get(&e.type_).is_some())
}

fn node_write(n: &NodeView, existing: Option<&NodeReport>, namespace: &str) -> Write {
    let labels = labels_and_annotations(&n.nodeset, Some(&n.node));
    let conds = written(&n.conditions);
    let generation = existing.and_then(|e| e.meta.generation).or(Some(1));
    let record = crate::snapshot::evidence::NodeRecord {
        runs: n.runs.clone(),
        deployed_version: n.deployed.version.clone(),
        container_images: n.deployed.images.clone(),
        delivered_inputs: n.delivered.clone(),
    };
    let object = EdpmNodeStatus {
        metadata: meta(&n.object, n.namespace.as_deref().unwrap_or(namespace), &n.owner, labels.clone()),
        spec: EdpmNodeStatusSpec {
            node_set: n.nodeset.clone(),
            node_set_kind: n.kind,
            node: n.node.clone(),
            host_name: n.host_name.clone(),
            record: record.clone(),
        },
        status: Some(NodeStatus { observed_generation: generation, conditions: conds.clone() }),
    };
    // The record is in the spec (the node agent cannot write it): a change is an apply of
    // the object, then of its status (for observedGeneration).
    let needs_object =
        existing.is_none_or(|e| !object_matches(e, &labels, &n.owner) || e.spec.record != record);
    let needs_status = existing.is_none_or(|e| !status_matches(e, &conds, generation));
    Write {
        kind: super::api::NODE_KIND,
        name: n.object.clone(),
        object: StatusObject::Node(object),
        needs_object,
        needs_status,
    }
}

fn nodeset_write(s: &NodeSetView, existing: Option<&NodeReport>, namespace: &str) -> Write {
    let labels = labels_and_annotations(&s.name, None);
    let generation = existing.and_then(|e| e.meta.generation).or(Some(1));
    let object = EdpmNodeSetStatus {
        metadata: meta(&s.object, s.namespace.as_deref().unwrap_or(namespace), &s.owner, labels.clone()),
        spec: EdpmNodeSetStatusSpec { node_set: s.name.clone(), node_set_kind: s.kind },
        status: Some(NodeSetStatus {
            observed_generation: generation,
            conditions: s.conditions.clone(),
            nodes: s.counts.clone(),
        }),
    };
    let needs_object = existing.is_none_or(|e| !object_matches(e, &labels, &s.owner));
    // The counts are part of the status too; they only change with a condition message.
    let needs_status = existing.is_none_or(|e| !status_matches(e, &s.conditions, generation));
    Write {
        kind: super::api::NODESET_KIND,
        name: s.object.clone(),
        object: StatusObject::NodeSet(object),
        needs_object,
        needs_status,
    }
}

/// The node agents' Leases to create: (name, node, NodeSet) of each node whose Lease
/// `existing` does not hold. The agent may only patch its own; the report creates it.
pub fn missing_leases(r: &Readiness, existing: &Evidence) -> Vec<(String, String, String)> {
    let have: std::collections::HashSet<&str> = existing.leases.iter().map(|l| l.id.name.as_str()).collect();
    r.nodes
        .iter()
        .filter(|n| !have.contains(n.object.as_str()))
        .map(|n| (n.object.clone(), n.node.clone(), n.nodeset.clone()))
        .collect()
}

/// A node condition that moved since the object was last written: what a Kubernetes Event
/// tells (`kubectl describe edpmnode/…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub object: String,
    /// The object's uid, when it was read from the API server.
    pub uid: Option<String>,
    pub type_: String,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub message: String,
    /// Not True: a Warning event.
    pub warning: bool,
}

/// The node conditions whose moves are told as Events.
const TOLD: [&str; 4] = [crate::condition::READY, super::SERVICES, super::INFRASTRUCTURE, super::BAREMETAL];

/// The transitions of `Ready` and the phase conditions (status or reason changed) of nodes
/// whose object existed before: a first report tells nothing (a new controller would
/// otherwise send an Event per node and condition). At most `limit`, the rest counted.
pub fn transitions(r: &Readiness, existing: &Evidence, limit: usize) -> (Vec<Transition>, usize) {
    let before: HashMap<&str, &NodeReport> =
        existing.reports.iter().map(|x| (x.id.name.as_str(), x)).collect();
    let mut out = Vec::new();
    let mut dropped = 0;
    for n in &r.nodes {
        let Some(old) = before.get(n.object.as_str()) else { continue };
        for ty in TOLD {
            let (Some(new), Some(prev)) = (n.conditions.get(ty), old.status.conditions.get(ty)) else {
                continue;
            };
            if new.status == prev.status && new.reason == prev.reason {
                continue;
            }
            if out.len() >= limit {
                dropped += 1;
                continue;
            }
            out.push(Transition {
                object: n.object.clone(),
                uid: old.meta.uid.clone(),
                type_: ty.to_string(),
                from: format!("{} {}", prev.status_word(), prev.reason),
                to: format!("{} {}", new.status_word(), new.reason),
                reason: new.reason.clone(),
                message: new.message.clone(),
                warning: new.status != Status::True,
            });
        }
    }
    (out, dropped)
}
