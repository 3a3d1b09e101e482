//! Objects derived from the data plane. Today: the NovaExternalCompute CRs that seed 003 says
//! nova-operator auto-creates for every node with a `nova.openstack.org/cell` annotation.
//!
//! Pure. The CR is named after the node; cellName, inventoryConfigMapName, networkAttachments,
//! sshKeySecretName and deploy are copied from the Node (or its Role, by inheritance); images
//! come from the configured defaults; `customServiceConfig` is never set by us, and is kept when
//! an existing CR has it. Moving a compute to another cell is refused: nova does not support it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::model::{GroupKind, Model};
use crate::snapshot::Snapshot;

pub const NEC_API_VERSION: &str = "nova.openstack.org/v1beta1";

/// Settings image keys that fill the CR's image fields when set.
pub const IMAGE_FIELDS: &[(&str, &str)] = &[
    ("nova_compute_container_image", "novaComputeContainerImage"),
    ("nova_libvirt_container_image", "novaLibvirtContainerImage"),
    ("ansibleee_container_image", "ansibleEEContainerImage"),
];

#[derive(Debug, Clone, thiserror::Error)]
pub enum DeriveError {
    #[error(
        "node {node}: {annotation} now says cell \"{wanted}\" ({from}), but NovaExternalCompute/{node} is in cell \"{existing}\"; nova cannot move a compute between cells: restore the annotation, or remove the compute from its cell first"
    )]
    CellMove { node: String, annotation: String, from: String, wanted: String, existing: String },
}

/// The CRs, in node order.
#[allow(clippy::too_many_lines, reason = "builds each CR field by field, in the order of upstream's CRD")]
pub fn novaexternalcomputes(
    snap: &Snapshot,
    model: &Model,
    images: &BTreeMap<String, String>,
) -> Result<Vec<Value>, DeriveError> {
    let mut out = Vec::new();
    for (g, m) in model.members() {
        let Some(cell) = m.cell(g) else { continue };
        let existing = snap.openstack_object("NovaExternalCompute", &m.key);
        if let Some(have) = existing.and_then(|e| e.body.pointer("/spec/cellName")).and_then(Value::as_str)
            && have != cell.name
        {
            return Err(DeriveError::CellMove {
                node: m.key.clone(),
                annotation: crate::snapshot::resource::CELL_ANNOTATION.into(),
                from: cell.object.short(),
                wanted: cell.name.clone(),
                existing: have.into(),
            });
        }
        let (attachments, deploy) = match g.kind {
            GroupKind::Role => {
                let node = snap.nodes.iter().find(|n| n.id.name == m.key).map(|n| &n.body);
                let role = snap.roles.iter().find(|r| r.id.name == g.name).map(|r| &r.body);
                let attachments = node
                    .map(|n| n.network_attachments.clone())
                    .filter(|a| !a.is_empty())
                    .or_else(|| role.map(|r| r.network_attachments.clone()))
                    .unwrap_or_default();
                let deploy_of = |s: Option<&Value>| s.and_then(|d| d.get("deploy")).and_then(Value::as_bool);
                let deploy = deploy_of(node.and_then(|n| n.deploy_strategy.as_ref()))
                    .or_else(|| deploy_of(role.and_then(|r| r.deploy_strategy.as_ref())))
                    .unwrap_or(true);
                (attachments, deploy)
            }
            GroupKind::NodeSet => {
                let ns = snap.nodesets.iter().find(|n| n.id.name == g.name).map(|n| &n.body);
                (ns.map(|n| n.network_attachments.clone()).unwrap_or_default(), true)
            }
        };
        let inventory = match g.kind {
            GroupKind::Role => format!("dataplanenode-{}", m.key),
            GroupKind::NodeSet => format!("dataplanenodeset-{}", g.name),
        };
        let ssh =
            m.section.ssh_key_secret.as_ref().or(g.template.ssh_key_secret.as_ref()).map(|f| f.value.clone());
        let mut spec = Map::new();
        spec.insert("dataplaneNodeName".into(), json!(m.key));
        spec.insert("cellName".into(), json!(cell.name));
        spec.insert("inventoryConfigMapName".into(), json!(inventory));
        spec.insert("networkAttachments".into(), json!(attachments));
        if let Some(ssh) = ssh {
            spec.insert("sshKeySecretName".into(), json!(ssh));
        }
        spec.insert("deploy".into(), json!(deploy));
        for (key, field) in IMAGE_FIELDS {
            if let Some(image) = images.get(*key) {
                spec.insert((*field).into(), json!(image));
            }
        }
        if let Some(csc) = existing.and_then(|e| e.body.pointer("/spec/customServiceConfig")) {
            spec.insert("customServiceConfig".into(), csc.clone());
        }
        let mut metadata = json!({ "name": m.key });
        if let Some(ns) = existing.and_then(|e| e.meta.namespace.clone()) {
            metadata["namespace"] = json!(ns);
        }
        out.push(json!({ "apiVersion": NEC_API_VERSION, "kind": "NovaExternalCompute", "metadata": metadata, "spec": spec }));
    }
    Ok(out)
}
