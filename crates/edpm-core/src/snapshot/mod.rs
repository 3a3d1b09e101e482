//! One consistent set of typed objects, whichever source produced it.
//!
//! Pure: documents in, a [`Snapshot`] or an error naming the object and field out. A document
//! is classified by its kind (`classify`, by the table of kinds read, `crate::kinds`), decoded
//! into an [`Entry`] (`entry`), and filed into the snapshot's lists (here); a manifest file's
//! pieces are assembled in document order (`assemble`).
//! Objects of kinds edpm-agent does not read are counted and dropped; objects of a known kind
//! with the wrong shape are errors, because silently skipping a broken Node would hand Ansible
//! an inventory without that host.

use std::collections::BTreeMap;

use serde_json::Value;

mod assemble;
mod classify;
mod entry;
pub mod evidence;
pub mod manifest;
pub mod refs;
pub mod resource;
pub mod selector;

pub use assemble::{FilePart, from_file_text};
pub use classify::UnknownKind;
pub use entry::Entry;

use self::evidence::Evidence;
use self::resource::{
    DataPlaneSpec, DataSource, DecodeError, DnsMasqStatus, FieldLines, IpSetStatus, LocalRef, NetConfigSpec,
    NodeSetSpec, NodeSpec, ObjRef, Object, Origin, RoleSpec, ServiceSpec,
};
use crate::services::SourceKind;
use crate::yaml::Node;

/// ConfigMap contents: text keys and binary keys.
#[derive(Debug, Clone, Default)]
pub struct ConfigMapData {
    pub data: BTreeMap<String, String>,
    pub binary: BTreeMap<String, Vec<u8>>,
}

/// Secret contents, decoded from base64 (`data`) and merged with `stringData`, and its `type`
/// (`Opaque` when a manifest gives none), as the API server stores them.
/// Opaque bytes: never printed by `Debug`.
#[derive(Clone, Default)]
pub struct SecretData {
    pub data: BTreeMap<String, Vec<u8>>,
    pub type_: String,
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretData")
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .field("type", &self.type_)
            .finish()
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
    /// Secrets and ConfigMaps whose content was not got (kind, name → lib-common hash): the
    /// controller's, for objects whose `resourceVersion` has not moved since it hashed them.
    /// Each is in `secrets`/`config_maps` with its metadata and no content.
    pub hashed: BTreeMap<(String, String), String>,
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
            hashed: parts.iter_mut().flat_map(|p| std::mem::take(&mut p.hashed)).collect(),
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
    pub fn service_image_fields(&self, name: &str) -> &[String] {
        self.services
            .iter()
            .find(|s| s.id.name == name)
            .map_or(&[], |s| s.body.container_image_fields.as_slice())
    }

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
