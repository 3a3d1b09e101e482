//! The node agents' identities (issue 38): for each node of a NodeSet, its ServiceAccount, a
//! Role and RoleBinding limited by `resourceNames` to its own status object and Lease (and to
//! a TokenRequest for its own ServiceAccount), the status object and Lease themselves, and one
//! Secret per NodeSet holding each node's initial credential (a kubeconfig with a bound,
//! expiring token). What exists is compared here with what should, so the shell applies only
//! what changed, deletes what belongs to nodes no longer in the NodeSet, and mints a token only
//! for a node whose entry is missing, stale or bound to a ServiceAccount that was replaced.
//!
//! Pure: the objects are plain JSON, the time is passed in, tokens are only decoded (their
//! claims), never verified: the API server does that.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::kinds;
use crate::readiness::api::{self, OwnerKind};
use crate::readiness::names;

/// Labels on every object this module makes, beside the NodeSet's and node's
/// ([`api::labels_and_annotations`]), so the shell lists exactly its own.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "edpm-agent";
/// The component of the per-node ServiceAccounts, Roles and RoleBindings.
pub const IDENTITY: &str = "edpm-agent-node-identity";
/// The component of the NodeSet's credentials Secret: a Deployment mounts it by this label
/// (and the NodeSet label) as an extra mount.
pub const CREDENTIALS: &str = "edpm-agent-node-credentials";
/// Where the docs' extraMount puts the Secret in the AnsibleEE pod; the `edpm_agent_node`
/// role reads `<this>/<node>` (its `edpm_agent_node_credentials_dir`).
pub const MOUNT_PATH: &str = "/runner/secrets/edpm-agent-node";
/// The most a Secret may hold (etcd's and the API server's limit is 1 MiB), with room for
/// its metadata.
pub const MAX_SECRET_BYTES: usize = 1_000_000;
/// The shortest token lifetime TokenRequest accepts.
pub const MIN_TOKEN_SECONDS: i64 = 600;

/// One node of the NodeSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its key in `spec.nodes` (or the seeds' Node name): the Secret's entry and the role's
    /// `edpm_agent_node_name`.
    pub key: String,
    pub host_name: String,
}

/// A NodeSet and where its identities go.
#[derive(Debug, Clone)]
pub struct NodeSet {
    pub name: String,
    pub kind: OwnerKind,
    /// The owner of the status objects (the NodeSet, or the seeds' Role), when its uid is known.
    pub owner: Option<(String, String)>,
    pub namespace: String,
    pub lease_namespace: String,
    pub nodes: Vec<Node>,
}

/// The kinds of object an identity is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    ServiceAccount,
    Role,
    RoleBinding,
    NodeStatus,
    Lease,
    Secret,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Role => "Role",
            Kind::RoleBinding => "RoleBinding",
            Kind::NodeStatus => api::NODE_KIND,
            Kind::Lease => "Lease",
            Kind::Secret => "Secret",
        }
    }
}

/// An object that should exist.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// The whole object to apply.
    pub body: Value,
    /// Made when missing, never changed after (the status object and Lease: `status report`,
    /// the controller and the agent own what is in them).
    pub create_only: bool,
}

/// An object as the API server holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub body: Value,
}

/// Why no identities can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "node {node:?} of NodeSet {nodeset}: its key is no Secret key ([-._a-zA-Z0-9]+), so its credential has no entry; rename the node in spec.nodes"
    )]
    BadKey { nodeset: String, node: String },
    #[error(
        "the credentials of NodeSet {nodeset}'s {nodes} nodes take {bytes} bytes, more than a Secret holds ({MAX_SECRET_BYTES}); split the NodeSet, or give a shorter --certificate-authority bundle"
    )]
    TooLarge { nodeset: String, nodes: usize, bytes: usize },
    #[error(
        "a credential lifetime of {seconds} s is shorter than TokenRequest's minimum ({MIN_TOKEN_SECONDS} s); give a longer --credential-lifetime"
    )]
    Lifetime { seconds: i64 },
}

/// The node's ServiceAccount (and Role and RoleBinding): `edpm-agent-node-<object>`, as
/// `packaging/kubernetes/rbac-node-agent.yaml` names them.
pub fn account(object: &str) -> String {
    format!("edpm-agent-node-{object}")
}

/// The NodeSet's credentials Secret.
pub fn secret_name(nodeset: &str) -> String {
    names::shorten(&format!("edpm-agent-node-{nodeset}"))
}

fn is_secret_key(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

/// The labels of one of its objects (`node`: a node's; `None`: the NodeSet's Secret).
pub fn labels(set: &NodeSet, node: Option<&str>, component: &str) -> (Value, Value) {
    let (mut labels, annotations) = api::labels_and_annotations(&set.name, node);
    labels.insert(COMPONENT_LABEL.into(), component.into());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    (json!(labels), json!(annotations))
}

/// The label selector that finds the NodeSet's objects of `component`.
pub fn selector(nodeset: &str, component: &str) -> String {
    format!(
        "{}={},{COMPONENT_LABEL}={component},{MANAGED_BY_LABEL}={MANAGED_BY}",
        api::NODESET_LABEL,
        names::label_value(nodeset)
    )
}

/// The NodeSet as the owner of what is made in its own namespace (the garbage collector deletes
/// them with it; the Lease namespace's Roles cannot name an owner in another namespace).
fn owned(mut meta: Value, set: &NodeSet) -> Value {
    if let Some((kind, uid)) = &set.owner {
        meta["ownerReferences"] = json!([{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": kind, "name": set.name, "uid": uid}]);
    }
    meta
}

fn metadata(name: &str, namespace: &str, labels: (Value, Value)) -> Value {
    let mut m = json!({"name": name, "namespace": namespace, "labels": labels.0});
    if labels.1.as_object().is_some_and(|a| !a.is_empty()) {
        m["annotations"] = labels.1;
    }
    m
}

/// Every object of every node's identity but the Secret, in a stable order.
pub fn objects(set: &NodeSet) -> Result<Vec<Object>, IdentityError> {
    let mut out = Vec::new();
    for n in &set.nodes {
        if !is_secret_key(&n.key) || n.key == CA_KEY {
            return Err(IdentityError::BadKey { nodeset: set.name.clone(), node: n.key.clone() });
        }
        out.extend(node_objects(set, n));
    }
    Ok(out)
}

fn node_objects(set: &NodeSet, n: &Node) -> Vec<Object> {
    let object = names::node_object(&set.name, &n.key);
    let sa = account(&object);
    let (ns, leases) = (set.namespace.as_str(), set.lease_namespace.as_str());
    let ident = || labels(set, Some(&n.key), IDENTITY);
    let obj = |kind, namespace: &str, name: &str, body: Value, create_only| Object {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        body,
        create_only,
    };
    let binding = |namespace: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": if namespace == ns { owned(metadata(&sa, namespace, ident()), set) } else { metadata(&sa, namespace, ident()) },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        })
    };
    // The resources its Roles name, as the one table of kinds spells them.
    let status = kinds::named(api::NODE_KIND).map_or("", |k| k.plural);
    let lease = kinds::named("Lease").map_or(("", ""), |k| (k.group, k.plural));
    let mut out = vec![
        obj(
            Kind::ServiceAccount,
            ns,
            &sa,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": owned(metadata(&sa, ns, ident()), set)}),
            false,
        ),
        obj(
            Kind::Role,
            ns,
            &sa,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": owned(metadata(&sa, ns, ident()), set),
                "rules": [
                    {"apiGroups": [api::GROUP], "resources": [status], "resourceNames": [object], "verbs": ["get"]},
                    {"apiGroups": [api::GROUP], "resources": [format!("{status}/status")], "resourceNames": [object], "verbs": ["get", "patch"]},
                    // Its own token, renewed by itself: TokenRequest for its own name only.
                    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": [sa], "verbs": ["create"]},
                ],
            }),
            false,
        ),
        obj(Kind::RoleBinding, ns, &sa, binding(ns), false),
        obj(
            Kind::Role,
            leases,
            &sa,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": metadata(&sa, leases, ident()),
                "rules": [{"apiGroups": [lease.0], "resources": [lease.1], "resourceNames": [object], "verbs": ["get", "patch", "update"]}],
            }),
            false,
        ),
        obj(Kind::RoleBinding, leases, &sa, binding(leases), false),
    ];
    out.extend(status_and_lease(set, n, &object));
    out
}

/// The node's status object and Lease, made when missing and never changed after.
fn status_and_lease(set: &NodeSet, n: &Node, object: &str) -> [Object; 2] {
    let (ns, leases) = (set.namespace.as_str(), set.lease_namespace.as_str());
    let (labels, annotations) = api::labels_and_annotations(&set.name, Some(&n.key));
    let mut status_meta = json!({"name": object, "namespace": ns, "labels": labels});
    if !annotations.is_empty() {
        status_meta["annotations"] = json!(annotations);
    }
    if let Some((kind, uid)) = &set.owner {
        status_meta["ownerReferences"] = json!([{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": kind, "name": set.name, "uid": uid}]);
    }
    let mut spec = json!({"nodeSet": set.name, "nodeSetKind": set.kind, "node": n.key});
    if !n.host_name.is_empty() {
        spec["hostName"] = json!(n.host_name);
    }
    let mut lease_meta = json!({"name": object, "namespace": leases, "labels": labels});
    if !annotations.is_empty() {
        lease_meta["annotations"] = json!(annotations);
    }
    [
        Object {
            kind: Kind::NodeStatus,
            namespace: ns.to_string(),
            name: object.to_string(),
            body: json!({"apiVersion": api::API_VERSION, "kind": api::NODE_KIND, "metadata": status_meta, "spec": spec}),
            create_only: true,
        },
        Object {
            kind: Kind::Lease,
            namespace: leases.to_string(),
            name: object.to_string(),
            body: json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": lease_meta}),
            create_only: true,
        },
    ]
}

/// The NodeSet (or seeds' Role) `name` of the model, as identities see it.
pub fn nodeset_of(
    snap: &crate::snapshot::Snapshot,
    model: &crate::model::Model,
    name: &str,
    namespace: &str,
    lease_namespace: &str,
) -> Option<NodeSet> {
    let g = model.groups.iter().find(|g| g.name == name)?;
    let (kind, owner) = match g.kind {
        crate::model::GroupKind::NodeSet => (
            OwnerKind::OpenStackDataPlaneNodeSet,
            snap.nodesets
                .iter()
                .find(|n| n.id.name == name)
                .and_then(|n| n.meta.uid.clone())
                .map(|uid| (g.id.kind.clone(), uid)),
        ),
        crate::model::GroupKind::Role => (OwnerKind::OpenStackDataPlaneRole, None),
    };
    Some(NodeSet {
        name: name.to_string(),
        kind,
        owner,
        namespace: namespace.to_string(),
        lease_namespace: lease_namespace.to_string(),
        nodes: g
            .members
            .iter()
            .map(|m| Node { key: m.key.clone(), host_name: m.host_name.value.clone() })
            .collect(),
    })
}

/// Whether `live` already says everything `want` says (maps: each key of `want` in `live`
/// with a value that says it; lists: as long, item by item; scalars: equal). What the server
/// added (defaults, uid, managedFields) does not count.
pub fn says(live: &Value, want: &Value) -> bool {
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => w.iter().all(|(k, v)| l.get(k).is_some_and(|lv| says(lv, v))),
        (Value::Array(l), Value::Array(w)) => l.len() == w.len() && l.iter().zip(w).all(|(a, b)| says(a, b)),
        _ => live == want,
    }
}

/// What to do about the objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub apply: Vec<Object>,
    /// (kind, namespace, name) of identities whose node left the NodeSet.
    pub delete: Vec<(Kind, String, String)>,
    pub unchanged: usize,
}

/// Compares `want` with `live` (every object of these kinds the shell found: the NodeSet's
/// labelled identities, and the status objects and Leases by name).
pub fn plan(want: Vec<Object>, live: &[Live]) -> Plan {
    let key = |k: Kind, ns: &str, n: &str| (k, ns.to_string(), n.to_string());
    let have: BTreeMap<_, &Live> = live.iter().map(|l| (key(l.kind, &l.namespace, &l.name), l)).collect();
    let wanted: BTreeSet<_> = want.iter().map(|o| key(o.kind, &o.namespace, &o.name)).collect();
    let mut p = Plan::default();
    for o in want {
        match have.get(&key(o.kind, &o.namespace, &o.name)) {
            Some(_) if o.create_only => p.unchanged += 1,
            Some(l) if says(&l.body, &o.body) => p.unchanged += 1,
            _ => p.apply.push(o),
        }
    }
    p.delete = live
        .iter()
        .filter(|l| matches!(l.kind, Kind::ServiceAccount | Kind::Role | Kind::RoleBinding))
        .map(|l| key(l.kind, &l.namespace, &l.name))
        .filter(|k| !wanted.contains(k))
        .collect();
    // RoleBindings first, then Roles, then the ServiceAccount: its tokens die with it.
    p.delete.sort_by_key(|(k, ns, n)| {
        (
            match k {
                Kind::RoleBinding => 0,
                Kind::Role => 1,
                _ => 2,
            },
            ns.clone(),
            n.clone(),
        )
    });
    p
}

/// The claims of a ServiceAccount token edpm-agent cares about (decoded, never verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub issued: i64,
    pub expires: i64,
    pub namespace: String,
    pub account: String,
    pub account_uid: String,
}

impl Claims {
    /// The token's whole lifetime, in seconds.
    pub fn lifetime(&self) -> i64 {
        self.expires - self.issued
    }

    /// When `percent` of its lifetime has passed (unix seconds).
    pub fn renew_at(&self, percent: u8) -> i64 {
        self.issued + self.lifetime() * i64::from(percent) / 100
    }
}

/// The claims of a bound ServiceAccount token (a JWT), or `None` for anything else.
pub fn claims(token: &str) -> Option<Claims> {
    let mut parts = token.trim().split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    let bytes = decode_base64url(payload)?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let k = &v["kubernetes.io"];
    Some(Claims {
        issued: v["iat"].as_i64()?,
        expires: v["exp"].as_i64()?,
        namespace: k["namespace"].as_str()?.to_string(),
        account: k["serviceaccount"]["name"].as_str()?.to_string(),
        account_uid: k["serviceaccount"]["uid"].as_str()?.to_string(),
    })
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (what `certificate-authority-data` holds).
pub fn encode_base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// base64url without padding (a JWT's parts); `None` when it is not.
fn decode_base64url(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// What a node's kubeconfig says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub server: String,
    /// The cluster's CA bundle (PEM), when it has one.
    pub ca_pem: Option<String>,
    pub namespace: String,
}

/// The Secret's key of the CA bundle, once for every node: each node's kubeconfig names it as
/// `certificate-authority: ca.crt`, a path relative to the kubeconfig's own directory (as
/// kubectl and kube read it), so an entry works where the Secret is mounted and where the role
/// installs it (the bundle beside it). Written once, a bundle of several CAs costs nothing per
/// node.
pub const CA_KEY: &str = "ca.crt";

/// A kubeconfig for `token` (YAML), its CA bundle (when there is one) in `ca.crt` beside it.
/// Never logged: it holds the token.
pub fn kubeconfig(access: &Access, user: &str, token: &str) -> String {
    let ca = match &access.ca_pem {
        Some(_) => format!("    certificate-authority: {CA_KEY}\n"),
        None => String::new(),
    };
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: edpm\n  cluster:\n    server: {}\n{ca}users:\n- name: {}\n  user:\n    token: {}\ncontexts:\n- name: edpm\n  context:\n    cluster: edpm\n    user: {}\n    namespace: {}\ncurrent-context: edpm\n",
        q(&access.server),
        q(user),
        q(token),
        q(user),
        q(&access.namespace)
    )
}

/// What to do about the credentials Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The nodes that need a new token: no entry, an entry that is no token of its current
    /// ServiceAccount, or one past half its lifetime.
    pub mint: Vec<Node>,
    /// Entries of nodes no longer in the NodeSet.
    pub drop: Vec<String>,
    /// Entries kept as they are.
    pub keep: Vec<String>,
}

/// Compares the Secret's entries (node key → kubeconfig) with the NodeSet: `accounts` gives
/// each node's ServiceAccount uid as it is now (a node whose account is new has none yet, and
/// is minted for), `now` in unix seconds.
pub fn credentials(
    set: &NodeSet,
    entries: &BTreeMap<String, String>,
    accounts: &BTreeMap<String, String>,
    now: i64,
) -> Credentials {
    let mut c = Credentials::default();
    for n in &set.nodes {
        let fresh =
            entries.get(&n.key).and_then(|text| token_of(text)).and_then(|t| claims(&t)).is_some_and(|cl| {
                accounts.get(&n.key) == Some(&cl.account_uid)
                    && cl.account == account(&names::node_object(&set.name, &n.key))
                    && now < cl.renew_at(50)
            });
        if fresh { c.keep.push(n.key.clone()) } else { c.mint.push(n.clone()) }
    }
    let keys: BTreeSet<&str> = set.nodes.iter().map(|n| n.key.as_str()).collect();
    c.drop = entries.keys().filter(|k| !keys.contains(k.as_str()) && *k != CA_KEY).cloned().collect();
    c
}

/// The token a kubeconfig of ours holds (the `token:` of its user).
pub fn token_of(kubeconfig: &str) -> Option<String> {
    kubeconfig.lines().find_map(|l| {
        let v = l.trim().strip_prefix("token:")?.trim();
        Some(serde_json::from_str::<String>(v).unwrap_or_else(|_| v.to_string()))
    })
}

/// The credentials Secret holding `entries` (node key → kubeconfig) and the CA bundle
/// (`ca.crt`) they name.
pub fn secret(
    set: &NodeSet,
    entries: &BTreeMap<String, String>,
    ca_pem: Option<&str>,
) -> Result<Object, IdentityError> {
    let mut data: BTreeMap<&str, String> = entries
        .iter()
        .filter(|(k, _)| *k != CA_KEY)
        .map(|(k, v)| (k.as_str(), encode_base64(v.as_bytes())))
        .collect();
    if let Some(pem) = ca_pem {
        data.insert(CA_KEY, encode_base64(pem.as_bytes()));
    }
    let bytes: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_SECRET_BYTES {
        return Err(IdentityError::TooLarge { nodeset: set.name.clone(), nodes: entries.len(), bytes });
    }
    let name = secret_name(&set.name);
    let mut meta = owned(metadata(&name, &set.namespace, labels(set, None, CREDENTIALS)), set);
    meta["annotations"]["agent.edpm.openstack.org/mount-path"] = json!(MOUNT_PATH);
    Ok(Object {
        kind: Kind::Secret,
        namespace: set.namespace.clone(),
        name,
        body: json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "data": data}),
        create_only: false,
    })
}

/// PEM of DER certificates (a kubeconfig's CA bundle, as the client holds it).
pub fn pem(certificates: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for der in certificates {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b = encode_base64(der);
        for line in b.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// The entries of a Secret's `data` (base64, as the API server returns it), decoded; entries
/// that are not text are left out (they are re-made).
pub fn decode_entries(data: &Value) -> BTreeMap<String, String> {
    data.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let bytes = decode_base64url(v.as_str()?)?;
            Some((k.clone(), String::from_utf8(bytes).ok()?))
        })
        .collect()
}

/// The node agent's `AgentCredentialExpiring` for its token (`claims`), renewed at `percent`
/// of its lifetime; `failure`: why the last renewal failed, when it did and the token was not
/// renewed since. `now` in unix seconds.
pub fn credential_condition(
    claims: &Claims,
    percent: u8,
    now: i64,
    failure: Option<&str>,
) -> crate::condition::Condition {
    use crate::condition::{Condition, Time, reasons, types};
    let expires = Time::from_unix(claims.expires);
    let due = claims.renew_at(percent);
    match failure {
        Some(why) if now >= due => Condition::because(
            types::AGENT_CREDENTIAL,
            &reasons::CREDENTIAL_EXPIRING,
            format!(
                "the token of ServiceAccount {}/{} expires at {expires} and could not be renewed: {}; see the runbook (docs/node-agent.md, \"AgentCredentialExpiring\")",
                claims.namespace,
                claims.account,
                crate::redact::scrub(why)
            ),
        ),
        _ => Condition::because(
            types::AGENT_CREDENTIAL,
            &reasons::CREDENTIAL_CURRENT,
            format!(
                "the token of ServiceAccount {}/{} expires at {expires}; renewed from {} ({percent}% of its lifetime)",
                claims.namespace,
                claims.account,
                Time::from_unix(due)
            ),
        ),
    }
}

/// A kubeconfig's text with its token replaced (every other line kept); `None` when `old` is
/// not in it exactly once.
pub fn with_token(kubeconfig: &str, old: &str, new: &str) -> Option<String> {
    (!old.is_empty() && kubeconfig.matches(old).count() == 1).then(|| kubeconfig.replacen(old, new, 1))
}

/// The credential lifetime, checked against TokenRequest's minimum.
pub fn lifetime(seconds: i64) -> Result<i64, IdentityError> {
    if seconds < MIN_TOKEN_SECONDS { Err(IdentityError::Lifetime { seconds }) } else { Ok(seconds) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(nodes: &[&str]) -> NodeSet {
        NodeSet {
            name: "edpm-compute".into(),
            kind: OwnerKind::OpenStackDataPlaneNodeSet,
            owner: Some(("OpenStackDataPlaneNodeSet".into(), "u-1".into())),
            namespace: "openstack".into(),
            lease_namespace: "edpm-node-lease".into(),
            nodes: nodes
                .iter()
                .map(|k| Node { key: (*k).into(), host_name: format!("{k}.example.com") })
                .collect(),
        }
    }

    fn jwt(iat: i64, exp: i64, name: &str, uid: &str) -> String {
        let payload = json!({"iat": iat, "exp": exp, "kubernetes.io": {"namespace": "openstack", "serviceaccount": {"name": name, "uid": uid}}});
        let b = encode_base64(payload.to_string().as_bytes()).replace('+', "-").replace('/', "_");
        format!("eyJhbGciOiJSUzI1NiJ9.{}.sig", b.trim_end_matches('='))
    }

    #[test]
    fn each_node_gets_its_own_account_roles_status_object_and_lease() {
        let objs = objects(&set(&["c-0", "c-1"])).unwrap();
        assert_eq!(objs.len(), 14);
        let role = &objs[1];
        assert_eq!((role.kind, role.name.as_str()), (Kind::Role, "edpm-agent-node-edpm-compute-c-0"));
        assert_eq!(role.body["rules"][0]["resourceNames"], json!(["edpm-compute-c-0"]));
        assert_eq!(role.body["rules"][2]["resourceNames"], json!(["edpm-agent-node-edpm-compute-c-0"]));
        assert!(
            objs.iter().filter(|o| o.create_only).all(|o| matches!(o.kind, Kind::NodeStatus | Kind::Lease))
        );
        assert_eq!(objs[4].namespace, "edpm-node-lease");
        // Owned by the NodeSet where it may be: in its own namespace.
        for o in &objs[..3] {
            assert_eq!(o.body["metadata"]["ownerReferences"][0]["uid"], "u-1", "{o:?}");
        }
        assert!(objs[3].body["metadata"].get("ownerReferences").is_none());
        assert_eq!(objs[4].body["subjects"][0]["namespace"], "openstack");
        assert!(matches!(objects(&set(&["a/b"])), Err(IdentityError::BadKey { .. })));
        // Least privilege: every rule names its objects; nothing listed or deleted; the one
        // create is a token for its own ServiceAccount.
        for r in
            objs.iter().filter(|o| o.kind == Kind::Role).flat_map(|o| o.body["rules"].as_array().unwrap())
        {
            assert_eq!(r["resourceNames"].as_array().map(Vec::len), Some(1), "{r}");
            for v in r["verbs"].as_array().unwrap() {
                assert!(["get", "patch", "update", "create"].contains(&v.as_str().unwrap()), "{r}");
                assert!(v != "create" || r["resources"] == json!(["serviceaccounts/token"]), "{r}");
            }
        }
    }

    #[test]
    fn only_what_differs_is_applied_and_what_left_is_deleted() {
        let want = objects(&set(&["c-0"])).unwrap();
        let mut live: Vec<Live> = want
            .iter()
            .map(|o| {
                let mut body = o.body.clone();
                body["metadata"]["uid"] = json!("x");
                Live { kind: o.kind, namespace: o.namespace.clone(), name: o.name.clone(), body }
            })
            .collect();
        live.push(Live {
            kind: Kind::ServiceAccount,
            namespace: "openstack".into(),
            name: "edpm-agent-node-gone".into(),
            body: json!({}),
        });
        live.push(Live {
            kind: Kind::RoleBinding,
            namespace: "openstack".into(),
            name: "edpm-agent-node-gone".into(),
            body: json!({}),
        });
        let p = plan(want.clone(), &live);
        assert!(p.apply.is_empty());
        assert_eq!(p.unchanged, 7);
        assert_eq!(p.delete[0].0, Kind::RoleBinding);
        assert_eq!(p.delete[1].0, Kind::ServiceAccount);
        live[1].body["rules"][0]["verbs"] = json!(["get", "list"]);
        live[5].body["spec"] = json!({});
        let p = plan(want, &live);
        assert_eq!(p.apply.len(), 1, "a changed Role is applied; a status object is only created");
    }

    #[test]
    fn tokens_are_minted_only_where_needed() {
        let s = set(&["c-0", "c-1", "c-2", "c-3"]);
        let sa = |k: &str| account(&names::node_object("edpm-compute", k));
        let access =
            Access { server: "https://api:6443".into(), ca_pem: None, namespace: "openstack".into() };
        let entries: BTreeMap<String, String> = [
            ("c-0", jwt(1000, 4600, &sa("c-0"), "u0")),
            ("c-1", jwt(1000, 4600, &sa("c-1"), "old")),
            ("c-2", jwt(1000, 2000, &sa("c-2"), "u2")),
            ("gone", jwt(1000, 4600, "x", "x")),
        ]
        .into_iter()
        .map(|(k, t)| (k.to_string(), kubeconfig(&access, k, &t)))
        .collect();
        let accounts: BTreeMap<String, String> = [("c-0", "u0"), ("c-1", "u1"), ("c-2", "u2")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let c = credentials(&s, &entries, &accounts, 1600);
        assert_eq!(c.keep, vec!["c-0"]);
        assert_eq!(c.mint.iter().map(|n| n.key.as_str()).collect::<Vec<_>>(), vec!["c-1", "c-2", "c-3"]);
        assert_eq!(c.drop, vec!["gone"]);
    }

    #[test]
    fn kubeconfigs_hold_the_token_and_claims_decode() {
        let t = jwt(100, 700, "edpm-agent-node-x", "u");
        let access =
            Access { server: "https://h".into(), ca_pem: Some("PEM\n".into()), namespace: "ns".into() };
        let kc = kubeconfig(&access, "x", &t);
        assert_eq!(token_of(&kc).as_deref(), Some(t.as_str()));
        assert!(kc.contains("certificate-authority: ca.crt\n"));
        let s = secret(&set(&["x"]), &[("x".to_string(), kc.clone())].into(), Some("PEM\n")).unwrap();
        assert_eq!(s.body["data"]["ca.crt"], "UEVNCg==");
        assert_eq!(decode_entries(&s.body["data"])["x"], kc);
        let c = claims(&t).unwrap();
        assert_eq!((c.issued, c.expires, c.account.as_str()), (100, 700, "edpm-agent-node-x"));
        assert_eq!(c.renew_at(80), 580);
        assert!(claims("not.a-jwt").is_none() && claims("abc").is_none());
        assert_eq!(encode_base64(b"hi!?"), "aGkhPw==");
        assert!(lifetime(599).is_err() && lifetime(600).is_ok());
    }
}
