//! One consistent set of typed objects, whichever source produced it.
//!
//! Pure: documents in, a [`Snapshot`] or an error naming the object and field out.
//! Objects of kinds edpm-agent does not read are counted and dropped; objects of a known kind
//! with the wrong shape are errors, because silently skipping a broken Node would hand Ansible
//! an inventory without that host.

use std::collections::BTreeMap;

use serde_json::Value;

pub mod evidence;
pub mod manifest;
pub mod refs;
pub mod resource;
pub mod selector;

use self::evidence::Evidence;
use self::manifest::Document;
use self::resource::{
    AGENT_GROUP, BAREMETAL_GROUP, CORE_OPENSTACK_GROUP, DATAPLANE_GROUP, DataPlaneSpec, DataSource,
    DecodeError, DnsMasqStatus, FieldLines, IpSetStatus, LocalRef, Meta, NETWORK_GROUP, NOVA_GROUP,
    NetConfigSpec, NodeSetSpec, NodeSpec, ObjRef, Object, Origin, RoleSpec, ServiceSpec,
};
use crate::services::SourceKind;
use crate::yaml::{Data, Node};

/// ConfigMap contents: text keys and binary keys.
#[derive(Debug, Clone, Default)]
pub struct ConfigMapData {
    pub data: BTreeMap<String, String>,
    pub binary: BTreeMap<String, Vec<u8>>,
}

/// Secret contents, decoded from base64 (`data`) and merged with `stringData`.
/// Opaque bytes: never printed by `Debug`.
#[derive(Clone, Default)]
pub struct SecretData {
    pub data: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretData").field("keys", &self.data.keys().collect::<Vec<_>>()).finish()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub dataplanes: Vec<Object<DataPlaneSpec>>,
    pub roles: Vec<Object<RoleSpec>>,
    pub nodes: Vec<Object<NodeSpec>>,
    pub nodesets: Vec<Object<NodeSetSpec>>,
    pub services: Vec<Object<ServiceSpec>>,
    pub ipsets: Vec<Object<IpSetStatus>>,
    pub netconfigs: Vec<Object<NetConfigSpec>>,
    pub dnsmasqs: Vec<Object<DnsMasqStatus>>,
    pub config_maps: Vec<Object<ConfigMapData>>,
    pub secrets: Vec<Object<SecretData>>,
    /// Kinds read by later stages (NovaCell, OpenStackControlPlane, NovaExternalCompute), kept
    /// as plain JSON until those stages type them.
    pub openstack: Vec<Object<Value>>,
    /// What the cluster says about deployments, for readiness: upstream status blocks, Jobs,
    /// BaremetalSets, edpm-agent's own status objects and the node agents' Leases.
    pub evidence: Evidence,
    /// Number of documents of kinds nothing here reads.
    pub ignored: usize,
    /// Documents of a kind in an API group edpm-agent reads that no operator defines (a typo
    /// close to a kind we read is an error instead): warned about, never silently dropped.
    pub unknown_kinds: Vec<UnknownKind>,
    /// Data-plane objects a label selector left out (directory sources).
    pub deselected: usize,
    /// Files that hold no Kubernetes object at all (settings files, Helm values beside the
    /// manifests): skipped whole, named so the shell can log them.
    pub not_manifests: Vec<String>,
    /// Kinds the API server does not serve (a list answered 404: the CRD is not installed),
    /// as `plural.group`: said when nothing was found.
    pub not_served: Vec<String>,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SnapshotError {
    /// Unreadable YAML or JSON, or input past a limit; the message says which and what to do.
    #[error("{0}")]
    Parse(#[from] manifest::ParseError),
    #[error(
        "{origin}: document is not a Kubernetes object: {reason}; every document needs apiVersion, kind and metadata.name"
    )]
    NotAnObject { origin: Origin, reason: String },
    #[error("{object}: {error}; fix the manifest so it matches the {kind} CRD")]
    Invalid { object: ObjRef, kind: String, error: DecodeError },
    #[error(
        "{origin}: kind {kind} is not a kind of {group}; did you mean {suggestion}? The API server would refuse this object, so edpm-agent does too: fix the kind"
    )]
    KindTypo { origin: Origin, kind: String, group: String, suggestion: &'static str },
    #[error(
        "{origin}: this looks like a saved Nova answer, but {message}; save it again with `openstack compute service list -f json` (or `hypervisor list -f json`), or save the compute API's JSON as it came"
    )]
    NovaAnswer { origin: Origin, message: String },
    #[error("{kind}/{name} is defined twice: at {first} and at {second}; remove one of them")]
    Duplicate { kind: String, name: String, first: Origin, second: Origin },
}

impl SnapshotError {
    pub fn is_duplicate(&self) -> bool {
        matches!(self, SnapshotError::Duplicate { .. })
    }
}

/// Which kinds a document can be, decided from `apiVersion` and `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KnownKind {
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
    OpenStack,
    Deployment,
    Job,
    Pod,
    BaremetalSet,
    NodeReport,
    RollupReport,
    Lease,
}

fn classify(api_version: &str, kind: &str) -> Option<KnownKind> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    Some(match (group, kind) {
        (DATAPLANE_GROUP, "OpenStackDataPlane") => KnownKind::DataPlane,
        (DATAPLANE_GROUP, "OpenStackDataPlaneRole") => KnownKind::Role,
        (DATAPLANE_GROUP, "OpenStackDataPlaneNode") => KnownKind::Node,
        (DATAPLANE_GROUP, "OpenStackDataPlaneNodeSet") => KnownKind::NodeSet,
        (DATAPLANE_GROUP, "OpenStackDataPlaneService") => KnownKind::Service,
        (NETWORK_GROUP, "IPSet") => KnownKind::IpSet,
        (NETWORK_GROUP, "NetConfig") => KnownKind::NetConfig,
        (NETWORK_GROUP, "DNSMasq") => KnownKind::DnsMasq,
        ("", "ConfigMap") if api_version == "v1" => KnownKind::ConfigMap,
        ("", "Secret") if api_version == "v1" => KnownKind::Secret,
        ("", "Pod") if api_version == "v1" => KnownKind::Pod,
        (NOVA_GROUP, _) | (CORE_OPENSTACK_GROUP, _) => KnownKind::OpenStack,
        (DATAPLANE_GROUP, "OpenStackDataPlaneDeployment") => KnownKind::Deployment,
        ("batch", "Job") => KnownKind::Job,
        (BAREMETAL_GROUP, "OpenStackBaremetalSet") => KnownKind::BaremetalSet,
        (AGENT_GROUP, "EDPMNodeStatus") => KnownKind::NodeReport,
        (AGENT_GROUP, "EDPMNodeSetStatus") => KnownKind::RollupReport,
        ("coordination.k8s.io", "Lease") => KnownKind::Lease,
        _ => return None,
    })
}

/// A document of a kind nobody defines in an API group edpm-agent reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind {
    pub origin: Origin,
    pub api_version: String,
    pub kind: String,
    /// `metadata.name`, when it has one.
    pub name: String,
}

impl std::fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}/{}): kind {} is not one edpm-agent knows in {}, so the object is not read; check the kind, or ignore this if a newer operator defines it",
            self.origin, self.kind, self.name, self.kind, self.api_version
        )
    }
}

/// The API groups edpm-agent reads, with every kind their operators define (read or not): a
/// kind outside these lists is unknown.
const READ_GROUPS: &[(&str, &[&str])] = &[
    (
        DATAPLANE_GROUP,
        &[
            "OpenStackDataPlane",
            "OpenStackDataPlaneRole",
            "OpenStackDataPlaneNode",
            "OpenStackDataPlaneNodeSet",
            "OpenStackDataPlaneService",
            "OpenStackDataPlaneDeployment",
        ],
    ),
    (
        NETWORK_GROUP,
        &[
            "IPSet",
            "NetConfig",
            "DNSMasq",
            "DNSData",
            "Reservation",
            "BGPConfiguration",
            "OpenStackNet",
            "OpenStackIPSet",
        ],
    ),
    (BAREMETAL_GROUP, &["OpenStackBaremetalSet", "OpenStackProvisionServer"]),
    (AGENT_GROUP, &["EDPMNodeStatus", "EDPMNodeSetStatus"]),
];

/// For a kind `classify` does not know: `None` when nothing is wrong (a group we do not read,
/// or a kind its operator defines that we do not need), else the closest kind of the group
/// when the kind is a near miss of it (a typo), or no suggestion.
fn unknown_kind(api_version: &str, kind: &str) -> Option<Option<&'static str>> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let (_, kinds) = READ_GROUPS.iter().find(|(g, _)| *g == group)?;
    if kinds.contains(&kind) {
        return None;
    }
    let close = crate::suggest::closest(kind, kinds.iter().copied(), crate::suggest::KINDS);
    Some(close)
}

/// The identity and origin of a document about to be decoded.
#[derive(Debug, Clone)]
pub struct Located<'a> {
    pub origin: Origin,
    pub node: Node<'a>,
}

impl Located<'static> {
    /// A document that arrived as JSON from the API server (or was written in a test).
    pub fn from_value(origin: Origin, value: &Value) -> Located<'static> {
        Located { origin, node: Node::from_value(value) }
    }
}

/// Parses and decodes one manifest file's text (read from `path`) into its own snapshot, on
/// this thread. See [`FilePart`] for the rules; `source::dir` does the same on every core.
pub fn from_file_text(path: &str, text: &str, namespace: Option<&str>) -> Result<Snapshot, SnapshotError> {
    let mut part = FilePart::new();
    match manifest::parse(path, text) {
        Ok(docs) => part.add(path, docs, namespace, false),
        Err(e) => part = part.then_failed(e.into()),
    }
    FilePart::assemble(path, vec![part])
}

/// What a piece of one file (a run of its YAML sections, or a whole JSON file) decoded to.
///
/// A file in which no document is a mapping with `apiVersion` or `kind` is not a manifest at
/// all (a settings file, Helm values beside the manifests): it is skipped and named in
/// [`Snapshot::not_manifests`]. A file with at least one object keeps today's strictness:
/// every document must be an object. Which case applies is known only once every piece of the
/// file is decoded, so a piece keeps its first non-object document's error aside.
#[derive(Debug, Default)]
pub struct FilePart {
    snap: Snapshot,
    /// Documents that look like Kubernetes objects.
    objects: usize,
    /// The first document that is not an object, if that came before any hard error.
    not_object: Option<SnapshotError>,
    /// A syntax or decoding error; the piece stops there.
    error: Option<SnapshotError>,
}

impl FilePart {
    /// An empty piece, before its first document.
    pub fn new() -> FilePart {
        FilePart::default()
    }

    /// Decodes more documents of this piece, unless an earlier one failed; `lines` keeps every
    /// field's line on the objects (for `explain`). Callers pass each section's documents (or
    /// List item) as soon as it is parsed, so only one tree is alive at a time.
    pub fn add(&mut self, path: &str, docs: Vec<Document<'_>>, namespace: Option<&str>, lines: bool) {
        if self.error.is_some() {
            return;
        }
        // Typed objects are large: give the usual kinds their room at once.
        let kinds: Vec<Option<KnownKind>> = docs
            .iter()
            .map(|d| {
                let text = |k: &str| d.node.get(k).and_then(Node::as_str).unwrap_or_default();
                classify(text("apiVersion"), text("kind"))
            })
            .collect();
        let count = |k: KnownKind| kinds.iter().filter(|x| **x == Some(k)).count();
        self.snap.nodes.reserve(count(KnownKind::Node));
        self.snap.roles.reserve(count(KnownKind::Role));
        self.snap.ipsets.reserve(count(KnownKind::IpSet));
        self.snap.config_maps.reserve(count(KnownKind::ConfigMap));
        self.snap.secrets.reserve(count(KnownKind::Secret));
        for doc in docs {
            let looks_like_object = doc.node.get("apiVersion").is_some() || doc.node.get("kind").is_some();
            self.objects += usize::from(looks_like_object);
            let origin = Origin::File { path: path.to_string(), line: doc.line };
            // A saved Nova answer (`openstack … -f json`, or the compute API's JSON) is not an
            // object: it becomes evidence.
            if !looks_like_object && let Some(found) = crate::nova::answer::detect(&doc.node.to_value()) {
                match found {
                    Ok(part) => {
                        let origin = format!("{path}:{}", doc.line);
                        self.snap.evidence.nova_saved.push(crate::nova::Saved { origin, part });
                        continue;
                    }
                    Err(message) => {
                        self.error = Some(SnapshotError::NovaAnswer { origin, message });
                        break;
                    }
                }
            }
            let field_lines = if lines {
                let mut entries = Vec::new();
                doc.node.field_lines(&mut entries);
                FieldLines::new(path, entries)
            } else {
                FieldLines::default()
            };
            match self.snap.add(origin, field_lines, doc.node, namespace) {
                Ok(()) => {}
                Err(e) if !looks_like_object => {
                    self.not_object.get_or_insert(e);
                }
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
        }
    }

    /// Adds what `other`, the documents that follow, decoded to: its objects and first
    /// problems come after this piece's, and nothing does once this piece has failed.
    pub fn absorb(&mut self, other: FilePart) {
        if self.error.is_some() {
            return;
        }
        self.snap.absorb(other.snap);
        self.objects += other.objects;
        if self.not_object.is_none() {
            self.not_object = other.not_object;
        }
        self.error = other.error;
    }

    /// This piece, whose text stopped parsing after its documents (an error after them).
    pub fn then_failed(mut self, e: SnapshotError) -> FilePart {
        self.error.get_or_insert(e);
        self
    }

    /// The snapshot of a whole file from its pieces, in order; the first problem in document
    /// order wins.
    pub fn assemble(path: &str, parts: Vec<FilePart>) -> Result<Snapshot, SnapshotError> {
        let objects: usize = parts.iter().map(|p| p.objects).sum();
        let mut snaps = Vec::with_capacity(parts.len());
        let mut docs = 0;
        for p in parts {
            docs += p.objects + usize::from(p.not_object.is_some());
            match (p.not_object, p.error) {
                (Some(e), _) if objects > 0 => return Err(e),
                (_, Some(e)) => return Err(e),
                _ => snaps.push(p.snap),
            }
        }
        if objects == 0 && docs > 0 {
            return Ok(Snapshot { not_manifests: vec![path.to_string()], ..Default::default() });
        }
        Ok(Snapshot::concat(snaps))
    }
}

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
        let Some(known) = classify(api_version, kind) else {
            // An object another namespace holds is not read, so its kind is not our concern.
            let elsewhere = match (namespace, node.get("metadata").and_then(|m| m.get("namespace"))) {
                (Some(want), Some(have)) => have.as_str().is_some_and(|h| h != want),
                _ => false,
            };
            return match unknown_kind(api_version, kind).filter(|_| !elsewhere) {
                None => Ok(Entry::Ignored),
                Some(Some(suggestion)) => {
                    return Err(SnapshotError::KindTypo {
                        origin,
                        kind: kind.to_string(),
                        group: api_version.split_once('/').map_or("", |(g, _)| g).to_string(),
                        suggestion,
                    });
                }
                Some(None) => Ok(Entry::Unknown(UnknownKind {
                    origin,
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    name: node
                        .get("metadata")
                        .and_then(|m| m.get("name"))
                        .and_then(Node::as_str)
                        .unwrap_or("-")
                        .to_string(),
                })),
            };
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
        let invalid =
            |error: DecodeError| SnapshotError::Invalid { object: id.clone(), kind: kind.clone(), error };
        // An absent spec or status is an empty one, as the API server treats it.
        let empty = Node::new(node.line, Data::Map(Vec::new()));
        let part = |name: &str| match node.get(name) {
            None => &empty,
            Some(n) if n.is_null() => &empty,
            Some(n) => n,
        };
        macro_rules! object {
            ($field:literal) => {{
                let body = resource::decode_node($field, part($field)).map_err(invalid)?;
                Box::new(Object { id: id.clone(), meta, body })
            }};
        }
        macro_rules! status {
            () => {{ Box::new(resource::decode_node("status", part("status")).map_err(invalid)?) }};
        }
        Ok(match known {
            KnownKind::DataPlane => Entry::DataPlane(object!("spec")),
            KnownKind::Role => {
                let status = status!();
                Entry::Role(object!("spec"), status)
            }
            KnownKind::Node => {
                let status = status!();
                Entry::Node(object!("spec"), status)
            }
            KnownKind::NodeSet => {
                let status = status!();
                Entry::NodeSet(object!("spec"), status)
            }
            KnownKind::Deployment => {
                let spec = resource::decode_node("spec", part("spec")).map_err(invalid)?;
                let status = resource::decode_node("status", part("status")).map_err(invalid)?;
                Entry::Deployment(Box::new(evidence::Deployment { id, meta, spec, status }))
            }
            KnownKind::Job => {
                let spec = resource::decode_node("spec", part("spec")).map_err(invalid)?;
                let status = resource::decode_node("status", part("status")).map_err(invalid)?;
                Entry::Job(Box::new(evidence::Job { id, meta, spec, status }))
            }
            KnownKind::Pod => {
                let status = resource::decode_node("status", part("status")).map_err(invalid)?;
                Entry::Pod(Box::new(evidence::Pod { id, meta, status }))
            }
            KnownKind::BaremetalSet => {
                let status = resource::decode_node("status", part("status")).map_err(invalid)?;
                Entry::BaremetalSet(Box::new(evidence::BaremetalSet { id, meta, status }))
            }
            // edpm-agent's own objects: one that does not decode is skipped and reported (its
            // next write replaces it), never a failure of every node's evaluation.
            KnownKind::NodeReport | KnownKind::RollupReport => {
                let decoded = resource::decode_node("spec", part("spec"))
                    .and_then(|spec| Ok((spec, resource::decode_node("status", part("status"))?)));
                match decoded {
                    Ok((spec, status)) => {
                        let report = Box::new(evidence::NodeReport { id, meta, spec, status });
                        if known == KnownKind::NodeReport {
                            Entry::NodeReport(report)
                        } else {
                            Entry::Rollup(report)
                        }
                    }
                    Err(e) => Entry::Unreadable(Box::new(evidence::Unreadable {
                        uid: meta.uid.clone(),
                        problem: crate::excerpt::printable(&e.to_string()).into_owned(),
                        id,
                    })),
                }
            }
            KnownKind::Lease => {
                // A Lease without spec is kept: it is evidence of nothing, and readiness says so.
                let spec = match node.get("spec") {
                    Some(n) if !n.is_null() => Some(resource::decode_node("spec", n).map_err(invalid)?),
                    _ => None,
                };
                Entry::Lease(Box::new(evidence::Lease { id, meta, spec, observed: None }))
            }
            KnownKind::Service => Entry::Service(object!("spec")),
            KnownKind::IpSet => Entry::IpSet(object!("status")),
            KnownKind::NetConfig => Entry::NetConfig(object!("spec")),
            KnownKind::DnsMasq => Entry::DnsMasq(object!("status")),
            KnownKind::ConfigMap => {
                let cm: k8s_openapi::api::core::v1::ConfigMap =
                    resource::decode_node("", &node).map_err(invalid)?;
                let body = ConfigMapData {
                    data: cm.data.unwrap_or_default(),
                    binary: cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect(),
                };
                Entry::ConfigMap(Box::new(Object { id, meta, body }))
            }
            KnownKind::Secret => {
                // A Secret's values never reach a message, even when they do not decode.
                let s: k8s_openapi::api::core::v1::Secret = resource::decode_node("", &node)
                    .map_err(|mut e| {
                        e.message = crate::excerpt::hide_quoted(&e.message);
                        e
                    })
                    .map_err(invalid)?;
                let mut data: BTreeMap<String, Vec<u8>> =
                    s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
                // The API server merges stringData over data on write; do the same.
                for (k, v) in s.string_data.unwrap_or_default() {
                    data.insert(k, v.into_bytes());
                }
                Entry::Secret(Box::new(Object { id, meta, body: SecretData { data } }))
            }
            KnownKind::OpenStack => {
                let body = node.to_value();
                Entry::OpenStack(Box::new(Object { id, meta, body }))
            }
        })
    }
}

impl Snapshot {
    /// Builds a snapshot from documents. `namespace`, when given, keeps only objects in that
    /// namespace (objects that name no namespace are kept: manifests often leave it out).
    pub fn from_documents<'a>(
        docs: impl IntoIterator<Item = Located<'a>>,
        namespace: Option<&str>,
    ) -> Result<Snapshot, SnapshotError> {
        let snap = Snapshot::from_documents_unchecked(docs, namespace)?;
        snap.check_duplicates()?;
        Ok(snap)
    }

    /// [`Snapshot::from_documents`] without the duplicate check, for sources that build one
    /// snapshot from many parts and check once at the end.
    pub fn from_documents_unchecked<'a>(
        docs: impl IntoIterator<Item = Located<'a>>,
        namespace: Option<&str>,
    ) -> Result<Snapshot, SnapshotError> {
        let mut snap = Snapshot::default();
        for Located { origin, node } in docs {
            snap.add(origin, FieldLines::default(), node, namespace)?;
        }
        Ok(snap)
    }

    fn add(
        &mut self,
        origin: Origin,
        lines: FieldLines,
        node: Node<'_>,
        namespace: Option<&str>,
    ) -> Result<(), SnapshotError> {
        let entry = Entry::decode(origin, lines, node, namespace)?;
        self.file(entry);
        Ok(())
    }

    /// Adds decoded objects (copies of them) to their lists.
    pub fn add_entries<'e>(&mut self, entries: impl IntoIterator<Item = &'e Entry>) {
        for e in entries {
            self.file(e.clone());
        }
    }

    /// Files one decoded object into its list.
    fn file(&mut self, entry: Entry) {
        match entry {
            Entry::DataPlane(o) => self.dataplanes.push(*o),
            Entry::Role(o, status) => {
                self.evidence.roles.insert(o.id.name.clone(), *status);
                self.roles.push(*o);
            }
            Entry::Node(o, status) => {
                self.evidence.nodes.insert(o.id.name.clone(), *status);
                self.nodes.push(*o);
            }
            Entry::NodeSet(o, status) => {
                self.evidence.nodesets.insert(o.id.name.clone(), *status);
                self.nodesets.push(*o);
            }
            Entry::Deployment(d) => self.evidence.deployments.push(*d),
            Entry::Job(j) => self.evidence.jobs.push(*j),
            Entry::Pod(p) => self.evidence.pods.push(*p),
            Entry::BaremetalSet(b) => self.evidence.baremetal_sets.push(*b),
            Entry::NodeReport(r) => self.evidence.reports.push(*r),
            Entry::Rollup(r) => self.evidence.rollups.push(*r),
            Entry::Lease(l) => self.evidence.leases.push(*l),
            Entry::Unreadable(u) => self.evidence.unreadable.push(*u),
            Entry::Service(o) => self.services.push(*o),
            Entry::IpSet(o) => self.ipsets.push(*o),
            Entry::NetConfig(o) => self.netconfigs.push(*o),
            Entry::DnsMasq(o) => self.dnsmasqs.push(*o),
            Entry::ConfigMap(o) => self.config_maps.push(*o),
            Entry::Secret(o) => self.secrets.push(*o),
            Entry::OpenStack(o) => self.openstack.push(*o),
            Entry::Ignored => self.ignored += 1,
            Entry::Unknown(u) => self.unknown_kinds.push(u),
            Entry::Elsewhere => {}
        }
    }

    /// Adds every object of `other`; used when several sources are named.
    pub fn merge(&mut self, other: Snapshot) -> Result<(), SnapshotError> {
        self.absorb(other);
        self.check_duplicates()
    }

    /// Adds every object of `other` without checking for duplicates; call
    /// [`Snapshot::check_duplicates`] when done.
    pub fn absorb(&mut self, other: Snapshot) {
        *self = Snapshot::concat(vec![std::mem::take(self), other]);
    }

    /// The objects of every part, in order. Each list is allocated once: typed objects are
    /// large, and growing the lists part by part copied them over and over.
    pub fn concat(parts: Vec<Snapshot>) -> Snapshot {
        fn join<T>(parts: &mut [Snapshot], list: impl Fn(&mut Snapshot) -> &mut Vec<T>) -> Vec<T> {
            let total = parts.iter_mut().map(|p| list(p).len()).sum();
            // One part holding them all (a single file or source) gives its list as it is.
            for p in parts.iter_mut() {
                let l = list(p);
                if l.len() == total {
                    return std::mem::take(l);
                }
                if !l.is_empty() {
                    break;
                }
            }
            let mut out = Vec::with_capacity(total);
            for p in parts.iter_mut() {
                // Taken, so each part's buffer is freed as soon as it is copied.
                out.extend(std::mem::take(list(p)));
            }
            out
        }
        let mut parts = parts;
        Snapshot {
            dataplanes: join(&mut parts, |p| &mut p.dataplanes),
            roles: join(&mut parts, |p| &mut p.roles),
            nodes: join(&mut parts, |p| &mut p.nodes),
            nodesets: join(&mut parts, |p| &mut p.nodesets),
            services: join(&mut parts, |p| &mut p.services),
            ipsets: join(&mut parts, |p| &mut p.ipsets),
            netconfigs: join(&mut parts, |p| &mut p.netconfigs),
            dnsmasqs: join(&mut parts, |p| &mut p.dnsmasqs),
            config_maps: join(&mut parts, |p| &mut p.config_maps),
            secrets: join(&mut parts, |p| &mut p.secrets),
            openstack: join(&mut parts, |p| &mut p.openstack),
            evidence: parts.iter_mut().fold(Evidence::default(), |mut e, p| {
                e.absorb(std::mem::take(&mut p.evidence));
                e
            }),
            ignored: parts.iter().map(|p| p.ignored).sum(),
            unknown_kinds: join(&mut parts, |p| &mut p.unknown_kinds),
            deselected: parts.iter().map(|p| p.deselected).sum(),
            not_manifests: join(&mut parts, |p| &mut p.not_manifests),
            not_served: join(&mut parts, |p| &mut p.not_served),
        }
    }

    /// Keeps the data-plane objects (DataPlanes, Roles, Nodes, NodeSets: the kinds a cluster
    /// list filters) whose labels `selector` matches, as the API server would have listed
    /// them; counts the rest in [`Snapshot::deselected`].
    pub fn select(&mut self, selector: &selector::Selector) {
        /// Drops what does not match; the names dropped.
        fn keep<T>(objs: &mut Vec<Object<T>>, sel: &selector::Selector) -> Vec<String> {
            let mut gone = Vec::new();
            objs.retain(|o| {
                let matched = sel.matches(&o.meta.labels);
                if !matched {
                    gone.push(o.id.name.clone());
                }
                matched
            });
            gone
        }
        let mut dropped = keep(&mut self.dataplanes, selector).len();
        // Their upstream status goes with them: readiness must not see a status without its object.
        for (gone, status) in [
            (keep(&mut self.roles, selector), &mut self.evidence.roles),
            (keep(&mut self.nodes, selector), &mut self.evidence.nodes),
        ] {
            dropped += gone.len();
            gone.iter().for_each(|n| drop(status.remove(n)));
        }
        let gone = keep(&mut self.nodesets, selector);
        dropped += gone.len();
        gone.iter().for_each(|n| drop(self.evidence.nodesets.remove(n)));
        self.deselected += dropped;
    }

    /// Fails on the first object defined twice (same kind and name), naming both places.
    pub fn check_duplicates(&self) -> Result<(), SnapshotError> {
        fn check<T>(objs: &[Object<T>]) -> Result<(), SnapshotError> {
            let mut seen: std::collections::HashMap<(&str, &str), &Origin> =
                std::collections::HashMap::with_capacity(objs.len());
            for o in objs {
                if let Some(first) = seen.insert((o.id.kind.as_str(), o.id.name.as_str()), &o.id.origin) {
                    return Err(SnapshotError::Duplicate {
                        kind: o.id.kind.clone(),
                        name: o.id.name.clone(),
                        first: first.clone(),
                        second: o.id.origin.clone(),
                    });
                }
            }
            Ok(())
        }
        check(&self.dataplanes)?;
        check(&self.roles)?;
        check(&self.nodes)?;
        check(&self.nodesets)?;
        check(&self.services)?;
        check(&self.ipsets)?;
        check(&self.netconfigs)?;
        check(&self.dnsmasqs)?;
        check(&self.config_maps)?;
        check(&self.secrets)?;
        check(&self.openstack)
    }

    pub fn config_map(&self, name: &str) -> Option<&Object<ConfigMapData>> {
        self.config_maps.iter().find(|o| o.id.name == name)
    }

    /// The identity of a Secret (`secret`) or ConfigMap, for messages.
    pub fn object_ref(&self, secret: bool, name: &str) -> Option<&resource::ObjRef> {
        if secret { self.secret(name).map(|o| &o.id) } else { self.config_map(name).map(|o| &o.id) }
    }

    /// Every value of every Secret in the snapshot, as text: what redaction must mask.
    pub fn secret_values(&self) -> impl Iterator<Item = String> + '_ {
        self.secrets
            .iter()
            .flat_map(|s| s.body.data.values())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    pub fn secret(&self, name: &str) -> Option<&Object<SecretData>> {
        self.secrets.iter().find(|o| o.id.name == name)
    }

    /// Every key of a Secret (`secret`) or ConfigMap (`data` then `binaryData`) as bytes, the
    /// files the kubelet would show for it; `None` when the object is not in the snapshot.
    pub fn object_files(&self, secret: bool, name: &str) -> Option<Vec<(String, Vec<u8>)>> {
        if secret {
            self.secret(name).map(|s| s.body.data.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        } else {
            self.config_map(name).map(|c| {
                let text = c.body.data.iter().map(|(k, v)| (k.clone(), v.clone().into_bytes()));
                text.chain(c.body.binary.iter().map(|(k, v)| (k.clone(), v.clone()))).collect()
            })
        }
    }

    /// A service's dataSources: its OpenStackDataPlaneService's when the snapshot has one,
    /// else upstream's defaults (none for services outside the catalogue).
    pub fn service_data_sources(&self, name: &str) -> Vec<DataSource> {
        match self.services.iter().find(|s| s.id.name == name) {
            Some(svc) => svc.body.data_sources.clone(),
            None => crate::services::default_sources(name)
                .iter()
                .map(|d| {
                    let r = Some(LocalRef { name: d.name.to_string(), optional: Some(d.optional) });
                    match d.kind {
                        SourceKind::Secret => DataSource { secret_ref: r, ..Default::default() },
                        SourceKind::ConfigMap => DataSource { config_map_ref: r, ..Default::default() },
                    }
                })
                .collect(),
        }
    }

    /// A service's `edpmServiceType` (the directory its files are staged in): its
    /// OpenStackDataPlaneService's, else its name, as the CRD defaults it.
    pub fn service_type(&self, name: &str) -> String {
        self.services
            .iter()
            .find(|s| s.id.name == name)
            .and_then(|s| s.body.edpm_service_type.clone())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| name.to_string())
    }

    /// Whether a service runs once for all NodeSets of a Deployment: its
    /// OpenStackDataPlaneService's `deployOnAllNodeSets`, else the catalogue's.
    pub fn service_is_global(&self, name: &str) -> bool {
        match self.services.iter().find(|s| s.id.name == name).and_then(|s| s.body.deploy_on_all_node_sets) {
            Some(g) => g,
            None => crate::services::find(name).is_some_and(|s| s.deploy_on_all_nodesets),
        }
    }

    /// A service's CA bundle Secret (`caCerts`, default `combined-ca-bundle`).
    pub fn service_ca_certs(&self, name: &str) -> String {
        self.services
            .iter()
            .find(|s| s.id.name == name)
            .and_then(|s| s.body.ca_certs.clone())
            .unwrap_or_else(|| crate::services::DEFAULT_CA_CERTS.into())
    }

    pub fn openstack_object(&self, kind: &str, name: &str) -> Option<&Object<Value>> {
        self.openstack.iter().find(|o| o.id.kind == kind && o.id.name == name)
    }

    /// Number of data-plane objects that can produce hosts.
    pub fn host_sources(&self) -> usize {
        self.dataplanes.len() + self.roles.len() + self.nodes.len() + self.nodesets.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn located(line: u64, value: Value) -> Located<'static> {
        Located::from_value(Origin::File { path: "t.yaml".into(), line }, &value)
    }

    #[test]
    fn classifies_by_group_and_kind() {
        let docs = vec![
            located(
                1,
                json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneRole", "metadata": {"name": "r"}, "spec": {}}),
            ),
            located(
                5,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
            ),
            located(9, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})),
            located(
                12,
                json!({"apiVersion": "other.example.com/v1", "kind": "OpenStackDataPlaneRole", "metadata": {"name": "x"}}),
            ),
        ];
        let s = Snapshot::from_documents(docs, None).unwrap();
        assert_eq!((s.roles.len(), s.config_maps.len(), s.ignored), (1, 1, 2));
        assert_eq!(s.config_map("c").unwrap().body.data["k"], "v");
    }

    #[test]
    fn secrets_decode_base64_and_merge_string_data() {
        let docs = vec![located(
            1,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "aGVsbG8=", "b": "eA=="}, "stringData": {"b": "plain"}}),
        )];
        let s = Snapshot::from_documents(docs, None).unwrap();
        let d = &s.secret("s").unwrap().body.data;
        assert_eq!((d["a"].as_slice(), d["b"].as_slice()), (&b"hello"[..], &b"plain"[..]));
        assert!(!format!("{:?}", s.secrets[0].body).contains("hello"));
    }

    #[test]
    fn bad_base64_names_the_secret() {
        let docs = vec![located(
            3,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "!!"}}),
        )];
        let err = Snapshot::from_documents(docs, None).unwrap_err().to_string();
        assert!(err.contains("Secret/s (t.yaml:3)") && err.contains("data"), "{err}");
    }

    #[test]
    fn wrong_types_name_object_and_field() {
        let docs = vec![located(
            7,
            json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNode",
            "metadata": {"name": "n"}, "spec": {"node": {"ansiblePort": "abc"}}}),
        )];
        let err = Snapshot::from_documents(docs, None).unwrap_err().to_string();
        assert!(
            err.contains("OpenStackDataPlaneNode/n (t.yaml:7)") && err.contains("spec.node.ansiblePort"),
            "{err}"
        );
    }

    #[test]
    fn duplicates_name_both_places() {
        let role = json!({"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneRole", "metadata": {"name": "r"}});
        let err =
            Snapshot::from_documents(vec![located(1, role.clone()), located(9, role)], None).unwrap_err();
        assert!(err.is_duplicate());
        assert!(err.to_string().contains("t.yaml:1") && err.to_string().contains("t.yaml:9"));
    }

    #[test]
    fn namespace_filter_keeps_unnamespaced_objects() {
        let docs = vec![
            located(
                1,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "openstack"}}),
            ),
            located(
                2,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "other"}}),
            ),
            located(3, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
        ];
        let s = Snapshot::from_documents(docs, Some("openstack")).unwrap();
        let names: Vec<_> = s.config_maps.iter().map(|o| o.id.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn missing_kind_is_reported() {
        let err =
            Snapshot::from_documents(vec![located(4, json!({"metadata": {"name": "x"}}))], None).unwrap_err();
        assert!(err.to_string().starts_with("t.yaml:4: document is not a Kubernetes object"), "{err}");
    }
}
