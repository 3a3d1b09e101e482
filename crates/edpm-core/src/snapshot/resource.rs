//! Typed views of the Kubernetes objects edpm-agent reads.
//!
//! This module is the API boundary with the cluster: field names follow the upstream CRDs
//! (`dataplane.openstack.org/v1beta1`, `network.openstack.org/v1beta1`, core `v1`).
//! Every spec-level struct keeps the fields it does not know in `unknown`, because the API
//! server would prune them silently and `validate` warns about them.
//! Decoding is pure: a `serde_json::Value` in, a typed object or a [`DecodeError`] naming the
//! field path out.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, de::DeserializeOwned};
use serde_json::Value;

/// Upstream's API groups and our own, defined with the table of kinds read.
pub use crate::kinds::{
    AGENT_GROUP, BAREMETAL_GROUP, CORE_OPENSTACK_GROUP, DATAPLANE_GROUP, NETWORK_GROUP, NOVA_GROUP,
};

/// Annotation that places a Node (or every Node of a Role / NodeSet) in a nova cell.
pub const CELL_ANNOTATION: &str = "nova.openstack.org/cell";

/// Fields the API server keeps but nothing in this crate reads.
pub type Unknown = BTreeMap<String, Value>;

/// Treats an explicit `null` like an absent field, as the API server does.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    /// Set on objects read from the API server; owner references need it.
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub generation: Option<i64>,
    #[serde(default)]
    pub creation_timestamp: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub labels: BTreeMap<String, String>,
    /// When the object last changed, as its `managedFields` say: the newest `time` of an entry
    /// that is not the `status` subresource's (the API server sets an entry's time when its
    /// manager adds, changes or removes a field). `None` without such an entry (a dump made
    /// without `--show-managed-fields`, a reset): then nothing says when it last changed.
    #[serde(default, rename = "managedFields", deserialize_with = "last_changed")]
    pub changed: Option<String>,
}

/// [`Meta::changed`] from `managedFields`: only each entry's `time` and `subresource` are read
/// (never `fieldsV1`). An entry without a readable time makes the whole unknown: its manager
/// changed something at a time nobody can tell.
fn last_changed<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct Entry {
        #[serde(default)]
        time: Option<String>,
        #[serde(default)]
        subresource: Option<String>,
    }
    let entries = Option::<Vec<Entry>>::deserialize(d)?.unwrap_or_default();
    let mut newest: Option<(crate::condition::Time, String)> = None;
    for e in entries.into_iter().filter(|e| e.subresource.as_deref().is_none_or(|s| s != "status")) {
        let Some(t) = e.time.as_deref().and_then(crate::condition::Time::parse) else { return Ok(None) };
        if newest.as_ref().is_none_or(|(n, _)| t > *n) {
            newest = Some((t, e.time.unwrap_or_default()));
        }
    }
    Ok(newest.map(|(_, s)| s))
}

/// `ansibleVars` as written: a mapping of variable names to values (the CRD's
/// `map[string]RawJSON`), or anything else, which the inventory refuses unless it is the
/// earliest CRD's string of YAML. A mapping is kept as a list in key order: most hold a handful
/// of variables, and a tree for each node was a large share of a 10,000-node run's memory.
#[derive(Debug, Clone, PartialEq)]
pub enum AnsibleVars {
    Map(Vec<(String, Value)>),
    Other(Value),
}

impl<'de> Deserialize<'de> for AnsibleVars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Object(m) => AnsibleVars::Map(m.into_iter().collect()),
            other => AnsibleVars::Other(other),
        })
    }
}

impl AnsibleVars {
    /// As a plain JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            AnsibleVars::Map(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            AnsibleVars::Other(v) => v.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Seeds' model: OpenStackDataPlane / OpenStackDataPlaneRole / OpenStackDataPlaneNode (2023).

/// `NodeSection` of the old model, used by `Role.spec.nodeTemplate` and `Node.spec.node`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyNodeSection {
    #[serde(default)]
    pub ansible_user: Option<String>,
    #[serde(default)]
    pub ansible_port: Option<i64>,
    /// A mapping, or (in the earliest CRD, `5ebd8ad4`) a string holding YAML.
    #[serde(default)]
    pub ansible_vars: Option<AnsibleVars>,
    #[serde(default, rename = "ansibleSSHPrivateKeySecret")]
    pub ansible_ssh_private_key_secret: Option<String>,
    #[serde(default)]
    pub management_network: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub networks: Vec<IpSetNetwork>,
    #[serde(default)]
    pub network_config: Option<NetworkConfig>,
    #[serde(default, deserialize_with = "nullable")]
    pub extra_mounts: Vec<Value>,
    #[serde(default)]
    pub user_data: Option<Value>,
    #[serde(default)]
    pub network_data: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfig {
    #[serde(default)]
    pub template: Option<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleSpec {
    #[serde(default)]
    pub data_plane: Option<String>,
    #[serde(default)]
    pub node_template: LegacyNodeSection,
    #[serde(default)]
    pub pre_provisioned: Option<bool>,
    #[serde(default)]
    pub services: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub network_attachments: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub env: Vec<Value>,
    #[serde(default)]
    pub deploy_strategy: Option<Value>,
    #[serde(default)]
    pub baremetal_set_template: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default)]
    pub host_name: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub ansible_host: Option<String>,
    #[serde(default)]
    pub node: LegacyNodeSection,
    #[serde(default, deserialize_with = "nullable")]
    pub env: Vec<Value>,
    #[serde(default)]
    pub deploy_strategy: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub network_attachments: Vec<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataPlaneSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub nodes: BTreeMap<String, NodeSpec>,
    #[serde(default, deserialize_with = "nullable")]
    pub roles: BTreeMap<String, RoleSpec>,
    #[serde(default)]
    pub deploy_strategy: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

// ---------------------------------------------------------------------------------------------
// Current model: OpenStackDataPlaneNodeSet.

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnsibleOpts {
    #[serde(default)]
    pub ansible_user: Option<String>,
    #[serde(default)]
    pub ansible_host: Option<String>,
    #[serde(default)]
    pub ansible_port: Option<i64>,
    #[serde(default)]
    pub ansible_vars: Option<AnsibleVars>,
    #[serde(default, deserialize_with = "nullable")]
    pub ansible_vars_from: Vec<DataSource>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataSource {
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub config_map_ref: Option<LocalRef>,
    #[serde(default)]
    pub secret_ref: Option<LocalRef>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalRef {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default)]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpSetNetwork {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default)]
    pub subnet_name: Option<String>,
    #[serde(default, rename = "fixedIP")]
    pub fixed_ip: Option<String>,
    #[serde(default)]
    pub default_route: Option<bool>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTemplate {
    #[serde(default, rename = "ansibleSSHPrivateKeySecret")]
    pub ansible_ssh_private_key_secret: Option<String>,
    #[serde(default)]
    pub management_network: Option<String>,
    #[serde(default)]
    pub ansible: AnsibleOpts,
    #[serde(default, deserialize_with = "nullable")]
    pub networks: Vec<IpSetNetwork>,
    #[serde(default, deserialize_with = "nullable")]
    pub extra_mounts: Vec<Value>,
    #[serde(default)]
    pub user_data: Option<Value>,
    #[serde(default)]
    pub network_data: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSection {
    #[serde(default)]
    pub host_name: Option<String>,
    #[serde(default)]
    pub ansible: AnsibleOpts,
    #[serde(default, deserialize_with = "nullable")]
    pub networks: Vec<IpSetNetwork>,
    #[serde(default)]
    pub management_network: Option<String>,
    #[serde(default)]
    pub bmh_label_selector: Option<Value>,
    #[serde(default)]
    pub user_data: Option<Value>,
    #[serde(default)]
    pub network_data: Option<Value>,
    #[serde(default)]
    pub ctlplane_interface: Option<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BaremetalSetTemplate {
    #[serde(default)]
    pub domain_name: Option<String>,
    #[serde(default)]
    pub cloud_user_name: Option<String>,
    /// The provisioning fields belong to openstack-baremetal-operator; kept, never checked.
    #[serde(flatten)]
    pub rest: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSetSpec {
    #[serde(default)]
    pub node_template: NodeTemplate,
    #[serde(default, deserialize_with = "nullable")]
    pub nodes: BTreeMap<String, NodeSection>,
    #[serde(default)]
    pub services: Option<Vec<String>>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default, rename = "tlsEnabled")]
    pub tls_enabled: Option<bool>,
    #[serde(default)]
    pub pre_provisioned: Option<bool>,
    #[serde(default)]
    pub baremetal_set_template: Option<BaremetalSetTemplate>,
    #[serde(default, deserialize_with = "nullable")]
    pub env: Vec<Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub network_attachments: Vec<String>,
    #[serde(default)]
    pub secret_max_size: Option<i64>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

// ---------------------------------------------------------------------------------------------
// Supporting kinds.

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default, rename = "edpmServiceType")]
    pub edpm_service_type: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub data_sources: Vec<DataSource>,
    /// The CA bundle Secret (CRD default `combined-ca-bundle`).
    #[serde(default)]
    pub ca_certs: Option<String>,
    /// Runs once per Deployment for all its NodeSets (upstream dedupes it onto the first).
    #[serde(default)]
    pub deploy_on_all_node_sets: Option<bool>,
    /// The OpenStackVersion image fields the service deploys (`OvnControllerImage`): a
    /// Deployment that ran it records those images in `status.containerImages`.
    #[serde(default, deserialize_with = "nullable")]
    pub container_image_fields: Vec<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    #[serde(default, deserialize_with = "nullable")]
    pub network: String,
    #[serde(default)]
    pub subnet: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub address: String,
    #[serde(default)]
    pub mtu: Option<i64>,
    #[serde(default)]
    pub cidr: Option<String>,
    #[serde(default)]
    pub vlan: Option<i64>,
    #[serde(default)]
    pub gateway: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub routes: Vec<Value>,
    #[serde(default, rename = "dnsDomain", deserialize_with = "nullable")]
    pub dns_domain: String,
    #[serde(default)]
    pub service_network: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct IpSetStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub reservations: Vec<Reservation>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default)]
    pub cidr: Option<String>,
    #[serde(default)]
    pub vlan: Option<i64>,
    #[serde(default)]
    pub gateway: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub routes: Vec<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConfigNetwork {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, rename = "dnsDomain")]
    pub dns_domain: Option<String>,
    #[serde(default)]
    pub mtu: Option<i64>,
    #[serde(default)]
    pub service_network: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub subnets: Vec<Subnet>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NetConfigSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub networks: Vec<NetConfigNetwork>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsMasqStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub dns_addresses: Vec<String>,
}

/// A decoded object: its identity, where it came from, and its typed body.
#[derive(Debug, Clone)]
pub struct Object<T> {
    pub id: ObjRef,
    pub meta: Meta,
    pub body: T,
}

/// Names an object for people: its kind, name, and the place it was read from. Shared: every
/// variable, host and error that names an object clones this, so a clone is a reference count.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjRef(std::sync::Arc<ObjId>);

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjId {
    pub kind: String,
    pub name: String,
    pub origin: Origin,
    /// Where each of its fields was written, when the source was read for `explain`.
    pub lines: FieldLines,
}

impl std::ops::Deref for ObjRef {
    type Target = ObjId;

    fn deref(&self) -> &ObjId {
        &self.0
    }
}

impl ObjRef {
    pub fn new(kind: impl Into<String>, name: impl Into<String>, origin: Origin) -> ObjRef {
        ObjRef::with_lines(kind, name, origin, FieldLines::default())
    }

    pub fn with_lines(
        kind: impl Into<String>,
        name: impl Into<String>,
        origin: Origin,
        lines: FieldLines,
    ) -> ObjRef {
        ObjRef(std::sync::Arc::new(ObjId { kind: kind.into(), name: name.into(), origin, lines }))
    }

    /// Where `field` (`spec.nodeTemplate.ansibleVars.edpm_x`) was written: its own line when
    /// the lines were kept, else the nearest enclosing field's, else the object's.
    pub fn origin_of(&self, field: &str) -> Origin {
        self.lines.origin_of(field).unwrap_or_else(|| self.origin.clone())
    }
}

/// The line of every field of one document, shared by everything that names the object. It
/// never takes part in comparisons: two references to one object are equal whether or not
/// they carry lines.
#[derive(Clone, Default)]
pub struct FieldLines {
    index: Option<std::sync::Arc<FieldIndex>>,
    /// For an object expanded from another (an OpenStackDataPlane's inline Role), where its
    /// `spec` sits inside that object (`spec.roles.edpm-compute`).
    spec_at: Option<String>,
}

struct FieldIndex {
    file: String,
    lines: std::collections::HashMap<String, u32>,
}

impl FieldLines {
    /// Lines of a document read from `file`: field paths as `Node::field_lines` writes them.
    /// Fields without a line (JSON text) are left out: they are shown at their object.
    pub fn new(file: &str, entries: Vec<(String, u32)>) -> FieldLines {
        let lines: std::collections::HashMap<String, u32> =
            entries.into_iter().filter(|(_, l)| *l > 0).collect();
        if lines.is_empty() {
            return FieldLines::default();
        }
        FieldLines {
            index: Some(std::sync::Arc::new(FieldIndex { file: file.to_string(), lines })),
            spec_at: None,
        }
    }

    /// The lines of an object whose `spec` is written at `path` inside this one.
    pub fn spec_at(&self, path: &str) -> FieldLines {
        FieldLines { index: self.index.clone(), spec_at: Some(path.to_string()) }
    }

    fn origin_of(&self, field: &str) -> Option<Origin> {
        let index = self.index.as_ref()?;
        // Paths quote keys with dots (`annotations."nova.openstack.org/cell"`); the index does not.
        let field = field.replace('"', "");
        let (mut path, floor) = match &self.spec_at {
            None => (field, 0),
            Some(at) => match field.strip_prefix("spec") {
                Some(rest) if rest.is_empty() || rest.starts_with(['.', '[']) => {
                    (format!("{at}{rest}"), at.len())
                }
                // The expanded object's own metadata is its entry in the parent.
                _ => (at.clone(), at.len()),
            },
        };
        loop {
            if let Some(line) = index.lines.get(&path) {
                return Some(Origin::File { path: index.file.clone(), line: u64::from(*line) });
            }
            // A field that was not written (a default) is shown where its parent is.
            let cut = path.rfind(['.', '['])?;
            if cut < floor {
                return None;
            }
            path.truncate(cut);
        }
    }
}

impl std::fmt::Debug for FieldLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.index.is_some() { "FieldLines(..)" } else { "FieldLines(none)" })
    }
}

impl PartialEq for FieldLines {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for FieldLines {}

impl PartialOrd for FieldLines {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FieldLines {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl std::hash::Hash for FieldLines {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// Where an object was read: a manifest file and the line its document starts on, the API
/// server, or expansion from another object (OpenStackDataPlane's inline roles and nodes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    File {
        path: String,
        line: u64,
    },
    Api {
        namespace: String,
    },
    Expanded {
        from: String,
        path: String,
    },
    /// A setting given in the environment (`EDPM_AGENT_IMAGE_*`).
    Environment {
        variable: String,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{path}:{line}"),
            Origin::Api { namespace } => write!(f, "namespace {namespace} on the API server"),
            Origin::Expanded { from, path } => write!(f, "{path} of {from}"),
            Origin::Environment { variable } => write!(f, "environment variable {variable}"),
        }
    }
}

impl std::fmt::Display for ObjRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} ({})", self.kind, self.name, self.origin)
    }
}

impl ObjRef {
    /// `Kind/name`, without the origin, for compact provenance lines.
    pub fn short(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// A field of an object could not be decoded into its expected type.
#[derive(Debug, Clone, thiserror::Error)]
#[error("field {path}{}: {message}", line.map(|l| format!(" (line {l})")).unwrap_or_default())]
pub struct DecodeError {
    pub path: String,
    /// The line the field was written on, when read from a file.
    pub line: Option<u64>,
    pub message: String,
}

/// Decodes a node of a manifest (a field of some object) into `T`, reporting the failing field
/// path relative to `base` and its line.
pub fn decode_node<'de, T: Deserialize<'de>>(
    base: &str,
    node: &crate::yaml::Node<'de>,
) -> Result<T, DecodeError> {
    crate::yaml::decode(node).map_err(|f| DecodeError {
        path: join_path(base, &f.path),
        line: (f.line > 0).then_some(u64::from(f.line)),
        message: with_yaml_hint(f.message),
    })
}

/// A value that is text to people but not to YAML 1.1 (`on`, `0640`, `1e3`, `~`) lands in a
/// string field as a boolean, number or null; say why, and the fix.
fn with_yaml_hint(message: String) -> String {
    let surprising = [
        "invalid type: boolean",
        "invalid type: integer",
        "invalid type: floating point",
        "invalid type: unit",
    ];
    if message.contains("expected a string") && surprising.iter().any(|s| message.starts_with(s)) {
        format!(
            "{message} (Kubernetes reads YAML 1.1, where y/yes/on/off, 0640, 1e3 and ~ are not text: quote the value)"
        )
    } else {
        message
    }
}

fn join_path(base: &str, inner: &str) -> String {
    match (base.is_empty(), inner == ".") {
        (true, _) => inner.to_string(),
        (false, true) => base.to_string(),
        (false, false) => format!("{base}.{inner}"),
    }
}

/// Decodes `value` (a field of some object) into `T`, reporting the failing field path
/// relative to `base`.
pub fn decode<T: DeserializeOwned>(base: &str, value: &Value) -> Result<T, DecodeError> {
    decode_owned(base, value.clone())
}

/// Like [`decode`], consuming the value so strings move instead of being copied.
pub fn decode_owned<T: DeserializeOwned>(base: &str, value: Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value).map_err(|e| DecodeError {
        path: join_path(base, &e.path().to_string()),
        line: None,
        message: crate::excerpt::cut_quoted(&e.into_inner().to_string()),
    })
}

/// Collects the paths of every field the typed structs did not recognise.
pub trait UnknownFields {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>);
}

fn push_unknown(unknown: &Unknown, base: &str, out: &mut Vec<String>) {
    out.extend(unknown.keys().map(|k| format!("{base}.{k}")));
}

impl UnknownFields for LegacyNodeSection {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>) {
        push_unknown(&self.unknown, base, out);
        for (i, n) in self.networks.iter().enumerate() {
            push_unknown(&n.unknown, &format!("{base}.networks[{i}]"), out);
        }
        if let Some(nc) = &self.network_config {
            push_unknown(&nc.unknown, &format!("{base}.networkConfig"), out);
        }
    }
}

impl UnknownFields for RoleSpec {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>) {
        push_unknown(&self.unknown, base, out);
        self.node_template.unknown_fields(&format!("{base}.nodeTemplate"), out);
    }
}

impl UnknownFields for NodeSpec {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>) {
        push_unknown(&self.unknown, base, out);
        self.node.unknown_fields(&format!("{base}.node"), out);
    }
}

impl UnknownFields for DataPlaneSpec {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>) {
        push_unknown(&self.unknown, base, out);
        for (k, r) in &self.roles {
            r.unknown_fields(&format!("{base}.roles.{k}"), out);
        }
        for (k, n) in &self.nodes {
            n.unknown_fields(&format!("{base}.nodes.{k}"), out);
        }
    }
}

impl UnknownFields for AnsibleOpts {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>) {
        push_unknown(&self.unknown, base, out);
        for (i, d) in self.ansible_vars_from.iter().enumerate() {
            push_unknown(&d.unknown, &format!("{base}.ansibleVarsFrom[{i}]"), out);
        }
    }
}

impl UnknownFields for NodeSetSpec {
    fn unknown_fields(&self, base: &str, out: &mut Vec<String>) {
        push_unknown(&self.unknown, base, out);
        let t = format!("{base}.nodeTemplate");
        push_unknown(&self.node_template.unknown, &t, out);
        self.node_template.ansible.unknown_fields(&format!("{t}.ansible"), out);
        for (i, n) in self.node_template.networks.iter().enumerate() {
            push_unknown(&n.unknown, &format!("{t}.networks[{i}]"), out);
        }
        for (k, node) in &self.nodes {
            let p = format!("{base}.nodes.{k}");
            push_unknown(&node.unknown, &p, out);
            node.ansible.unknown_fields(&format!("{p}.ansible"), out);
            for (i, n) in node.networks.iter().enumerate() {
                push_unknown(&n.unknown, &format!("{p}.networks[{i}]"), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_objects_last_change_is_its_newest_managed_fields_time_but_status() {
        let changed = |managed: serde_json::Value| {
            decode::<Meta>("metadata", &json!({"name": "x", "managedFields": managed})).unwrap().changed
        };
        let e = |t: &str, sub: Option<&str>| json!({"manager": "m", "time": t, "subresource": sub, "fieldsV1": {"f:data": {}}});
        assert_eq!(
            changed(json!([
                e("2026-11-01T10:00:00Z", None),
                e("2026-11-03T10:00:00Z", None),
                e("2026-11-02T10:00:00Z", None)
            ])),
            Some("2026-11-03T10:00:00Z".to_string())
        );
        // A status update changes no spec, data or label.
        assert_eq!(
            changed(json!([e("2026-11-01T10:00:00Z", None), e("2026-11-09T10:00:00Z", Some("status"))])),
            Some("2026-11-01T10:00:00Z".to_string())
        );
        // An entry without a readable time: when its manager changed the object is unknown.
        assert_eq!(changed(json!([e("2026-11-01T10:00:00Z", None), {"manager": "m"}])), None);
        assert_eq!(changed(json!([e("yesterday", None)])), None);
        assert_eq!(changed(json!(null)), None);
        assert_eq!(decode::<Meta>("metadata", &json!({"name": "x"})).unwrap().changed, None);
    }

    #[test]
    fn decode_names_the_failing_field() {
        let v = json!({"nodeTemplate": {"ansiblePort": "twenty-two"}});
        let err = decode::<RoleSpec>("spec", &v).unwrap_err();
        assert_eq!(err.path, "spec.nodeTemplate.ansiblePort");
        assert!(err.message.contains("invalid type"), "{}", err.message);
    }

    #[test]
    fn null_collections_read_as_empty() {
        let v = json!({"nodes": null, "nodeTemplate": {"networks": null}});
        let spec: NodeSetSpec = decode("spec", &v).unwrap();
        assert!(spec.nodes.is_empty());
        assert!(spec.node_template.networks.is_empty());
    }

    #[test]
    fn unknown_fields_are_reported_with_paths() {
        let v = json!({"nodeTemplate": {"managed": false, "ansibleUser": "root"}, "bogus": 1});
        let spec: RoleSpec = decode("spec", &v).unwrap();
        let mut out = vec![];
        spec.unknown_fields("spec", &mut out);
        out.sort();
        assert_eq!(out, ["spec.bogus", "spec.nodeTemplate.managed"]);
    }

    #[test]
    fn field_lines_name_the_nearest_written_field() {
        let lines = FieldLines::new(
            "f.yaml",
            vec![
                ("metadata.name".into(), 2),
                ("spec".into(), 3),
                ("spec.roles.r".into(), 5),
                ("spec.roles.r.nodeTemplate".into(), 6),
                ("spec.roles.r.nodeTemplate.ansibleUser".into(), 7),
                ("spec.nets[0].ip".into(), 9),
            ],
        );
        let file = Origin::File { path: "f.yaml".into(), line: 1 };
        let dp = ObjRef::with_lines("DP", "x", file, lines.clone());
        assert_eq!(dp.origin_of("spec.roles.r.nodeTemplate.ansibleUser").to_string(), "f.yaml:7");
        assert_eq!(dp.origin_of("spec.tlsEnabled").to_string(), "f.yaml:3");
        assert_eq!(dp.origin_of("spec.nets[0].ip").to_string(), "f.yaml:9");
        assert_eq!(dp.origin_of("metadata.annotations.\"a.b/c\"").to_string(), "f.yaml:1");
        let origin = Origin::Expanded { from: "DP/x".into(), path: "spec.roles.r".into() };
        let role = ObjRef::with_lines("Role", "r", origin.clone(), lines.spec_at("spec.roles.r"));
        assert_eq!(role.origin_of("spec.nodeTemplate.ansibleUser").to_string(), "f.yaml:7");
        assert_eq!(role.origin_of("spec.nodeTemplate.ansiblePort").to_string(), "f.yaml:6");
        assert_eq!(role.origin_of("metadata.name").to_string(), "f.yaml:5");
        let plain = ObjRef::new("Role", "r", origin);
        assert_eq!(plain.origin_of("spec.x").to_string(), "spec.roles.r of DP/x");
    }

    #[test]
    fn fixed_ip_uses_upstream_spelling() {
        let v = json!({"name": "ctlplane", "subnetName": "subnet1", "fixedIP": "192.0.2.10"});
        let n: IpSetNetwork = decode("", &v).unwrap();
        assert_eq!(n.fixed_ip.as_deref(), Some("192.0.2.10"));
        assert!(n.unknown.is_empty());
    }
}
