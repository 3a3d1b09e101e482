//! One document decoded into an [`Entry`]: its kind's spec and status, typed, or the error
//! naming the object and the field. What a controller's store keeps per watched object.

use std::collections::BTreeMap;

use serde_json::Value;

use super::classify::UnknownKind;
use super::resource::{
    self, DataPlaneSpec, DecodeError, DnsMasqStatus, FieldLines, IpSetStatus, Meta, NetConfigSpec,
    NodeSetSpec, NodeSpec, ObjRef, Object, Origin, RoleSpec, ServiceSpec,
};
use super::{ConfigMapData, SecretData, SnapshotError, evidence};
use crate::kinds::KnownKind;
use crate::yaml::{Data, Node};

/// One decoded object, before it is filed into a [`Snapshot`]'s lists: what a store of
/// watched objects keeps per object. Boxed, so that an entry costs its object and a pointer.
#[derive(Debug, Clone)]
pub enum Entry {
    DataPlane(Box<Object<DataPlaneSpec>>),
    Role(Box<Object<RoleSpec>>, Box<evidence::LegacyStatus>),
    Node(Box<Object<NodeSpec>>, Box<evidence::LegacyStatus>),
    NodeSet(Box<Object<NodeSetSpec>>, Box<evidence::NodeSetStatus>),
    Deployment(Box<evidence::Deployment>),
    Job(Box<evidence::Job>),
    Pod(Box<evidence::Pod>),
    BaremetalSet(Box<evidence::BaremetalSet>),
    NodeReport(Box<evidence::NodeReport>),
    Rollup(Box<evidence::NodeReport>),
    Lease(Box<evidence::Lease>),
    /// One of edpm-agent's own status objects that does not decode.
    Unreadable(Box<evidence::Unreadable>),
    Service(Box<Object<ServiceSpec>>),
    IpSet(Box<Object<IpSetStatus>>),
    NetConfig(Box<Object<NetConfigSpec>>),
    DnsMasq(Box<Object<DnsMasqStatus>>),
    ConfigMap(Box<Object<ConfigMapData>>),
    Secret(Box<Object<SecretData>>),
    OpenStack(Box<Object<Value>>),
    /// A kind nothing here reads.
    Ignored,
    /// A kind of a group we read that no operator defines.
    Unknown(UnknownKind),
    /// An object of another namespace than the one read.
    Elsewhere,
}

impl Entry {
    /// Decodes one document (`namespace`, when given, leaves out objects of another).
    pub fn decode(
        origin: Origin,
        lines: FieldLines,
        node: Node<'_>,
        namespace: Option<&str>,
    ) -> Result<Entry, SnapshotError> {
        let not_object =
            |reason: &str| SnapshotError::NotAnObject { origin: origin.clone(), reason: reason.to_string() };
        if !node.is_map() {
            return Err(not_object("it is not a mapping"));
        }
        let (Some(api_version), Some(kind)) =
            (node.get("apiVersion").and_then(Node::as_str), node.get("kind").and_then(Node::as_str))
        else {
            return Err(not_object("apiVersion or kind is missing or not a string"));
        };
        let Some(known) = crate::kinds::classify(api_version, kind) else {
            return Ok(match super::classify::not_read(origin, api_version, kind, &node, namespace)? {
                None => Entry::Ignored,
                Some(unknown) => Entry::Unknown(unknown),
            });
        };
        let kind = kind.to_string();
        let null = Node::new(node.line, Data::Null);
        let provisional = ObjRef::new(kind.clone(), String::new(), origin.clone());
        let meta: Meta = resource::decode_node("metadata", node.get("metadata").unwrap_or(&null))
            .map_err(|error| SnapshotError::Invalid { object: provisional, kind: kind.clone(), error })?;
        if meta.name.is_empty() {
            return Err(not_object("metadata.name is missing or empty"));
        }
        if let (Some(want), Some(have)) = (namespace, meta.namespace.as_deref())
            && want != have
        {
            return Ok(Entry::Elsewhere);
        }
        let id = ObjRef::with_lines(kind.clone(), meta.name.clone(), origin, lines);
        // An absent spec or status is an empty one, as the API server treats it.
        let empty = Node::new(node.line, Data::Map(Vec::new()));
        let parts = Parts { node: &node, empty, id, kind, meta };
        match known {
            KnownKind::DataPlane
            | KnownKind::Role
            | KnownKind::Node
            | KnownKind::NodeSet
            | KnownKind::Service
            | KnownKind::IpSet
            | KnownKind::NetConfig
            | KnownKind::DnsMasq => parts.dataplane(known),
            KnownKind::ConfigMap | KnownKind::Secret | KnownKind::OpenStack => parts.config(known),
            KnownKind::Deployment
            | KnownKind::Job
            | KnownKind::Pod
            | KnownKind::BaremetalSet
            | KnownKind::NodeReport
            | KnownKind::RollupReport
            | KnownKind::Lease => parts.evidence(known),
        }
    }
}

/// A document whose kind, identity and metadata are known, to be decoded into its [`Entry`].
struct Parts<'n, 'a> {
    node: &'n Node<'a>,
    /// What an absent or null spec or status reads as.
    empty: Node<'a>,
    id: ObjRef,
    kind: String,
    meta: Meta,
}

impl Parts<'_, '_> {
    fn invalid(&self, error: DecodeError) -> SnapshotError {
        SnapshotError::Invalid { object: self.id.clone(), kind: self.kind.clone(), error }
    }

    /// The document's `name` field (spec, status), decoded.
    fn decode<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, SnapshotError> {
        self.decode_field(name).map_err(|e| self.invalid(e))
    }

    fn decode_field<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, DecodeError> {
        let part = match self.node.get(name) {
            Some(n) if !n.is_null() => n,
            _ => &self.empty,
        };
        resource::decode_node(name, part)
    }

    /// The object, its body decoded from its `field`.
    fn object<T: serde::de::DeserializeOwned>(self, field: &str) -> Result<Box<Object<T>>, SnapshotError> {
        let body = self.decode(field)?;
        Ok(Box::new(Object { id: self.id, meta: self.meta, body }))
    }

    /// The data plane's own kinds and what rendering reads of the network. A Role's, Node's or
    /// NodeSet's status is evidence, decoded before its spec.
    fn dataplane(self, known: KnownKind) -> Result<Entry, SnapshotError> {
        Ok(match known {
            KnownKind::Role => {
                let status = Box::new(self.decode("status")?);
                Entry::Role(self.object("spec")?, status)
            }
            KnownKind::Node => {
                let status = Box::new(self.decode("status")?);
                Entry::Node(self.object("spec")?, status)
            }
            KnownKind::NodeSet => {
                let status = Box::new(self.decode("status")?);
                Entry::NodeSet(self.object("spec")?, status)
            }
            KnownKind::DataPlane => Entry::DataPlane(self.object("spec")?),
            KnownKind::Service => Entry::Service(self.object("spec")?),
            KnownKind::IpSet => Entry::IpSet(self.object("status")?),
            KnownKind::NetConfig => Entry::NetConfig(self.object("spec")?),
            _ => Entry::DnsMasq(self.object("status")?),
        })
    }

    /// What readiness reads: Deployments, Jobs, pods, BaremetalSets, edpm-agent's own status
    /// objects and the node agents' Leases.
    fn evidence(self, known: KnownKind) -> Result<Entry, SnapshotError> {
        Ok(match known {
            KnownKind::Deployment => {
                let (spec, status) = (self.decode("spec")?, self.decode("status")?);
                Entry::Deployment(Box::new(evidence::Deployment {
                    id: self.id,
                    meta: self.meta,
                    spec,
                    status,
                }))
            }
            KnownKind::Job => {
                let (spec, status) = (self.decode("spec")?, self.decode("status")?);
                Entry::Job(Box::new(evidence::Job { id: self.id, meta: self.meta, spec, status }))
            }
            KnownKind::Pod => {
                let status = self.decode("status")?;
                Entry::Pod(Box::new(evidence::Pod { id: self.id, meta: self.meta, status }))
            }
            KnownKind::BaremetalSet => {
                let status = self.decode("status")?;
                Entry::BaremetalSet(Box::new(evidence::BaremetalSet { id: self.id, meta: self.meta, status }))
            }
            KnownKind::Lease => {
                // A Lease without spec is kept: it is evidence of nothing, and readiness says so.
                let spec = match self.node.get("spec") {
                    Some(n) if !n.is_null() => Some(self.decode("spec")?),
                    _ => None,
                };
                Entry::Lease(Box::new(evidence::Lease { id: self.id, meta: self.meta, spec, observed: None }))
            }
            _ => self.report(known == KnownKind::NodeReport),
        })
    }

    /// edpm-agent's own objects: one that does not decode is skipped and reported (its next
    /// write replaces it), never a failure of every node's evaluation.
    fn report(self, node: bool) -> Entry {
        match self.decode_field("spec").and_then(|spec| Ok((spec, self.decode_field("status")?))) {
            Ok((spec, status)) => {
                let report = Box::new(evidence::NodeReport { id: self.id, meta: self.meta, spec, status });
                if node { Entry::NodeReport(report) } else { Entry::Rollup(report) }
            }
            Err(e) => Entry::Unreadable(Box::new(evidence::Unreadable {
                uid: self.meta.uid.clone(),
                problem: crate::excerpt::printable(&e.to_string()).into_owned(),
                id: self.id,
            })),
        }
    }

    /// ConfigMaps, Secrets and the control plane's objects.
    fn config(self, known: KnownKind) -> Result<Entry, SnapshotError> {
        Ok(match known {
            KnownKind::ConfigMap => {
                let cm: k8s_openapi::api::core::v1::ConfigMap =
                    resource::decode_node("", self.node).map_err(|e| self.invalid(e))?;
                let body = ConfigMapData {
                    data: cm.data.unwrap_or_default(),
                    binary: cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect(),
                };
                Entry::ConfigMap(Box::new(Object { id: self.id, meta: self.meta, body }))
            }
            KnownKind::Secret => {
                // A Secret's values never reach a message, even when they do not decode.
                let s: k8s_openapi::api::core::v1::Secret = resource::decode_node("", self.node)
                    .map_err(|mut e| {
                        e.message = crate::excerpt::hide_quoted(&e.message);
                        e
                    })
                    .map_err(|e| self.invalid(e))?;
                let mut data: BTreeMap<String, Vec<u8>> =
                    s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
                // The API server merges stringData over data on write; do the same.
                for (k, v) in s.string_data.unwrap_or_default() {
                    data.insert(k, v.into_bytes());
                }
                // And defaults the type, which upstream's hash of the Secret covers.
                let type_ = s.type_.filter(|t| !t.is_empty()).unwrap_or_else(|| "Opaque".to_string());
                Entry::Secret(Box::new(Object {
                    id: self.id,
                    meta: self.meta,
                    body: SecretData { data, type_ },
                }))
            }
            _ => {
                let body = self.node.to_value();
                Entry::OpenStack(Box::new(Object { id: self.id, meta: self.meta, body }))
            }
        })
    }
}
