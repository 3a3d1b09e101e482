//! A small fake Kubernetes API server on loopback, for testing the Kubernetes shell without a
//! cluster. It enforces what edpm-agent relies on:
//! - list/get of the objects it was given; 404 (with a proper `Status` body) for resources whose
//!   CRD was not registered and for absent objects; equality and existence label selectors;
//! - server-side apply (`PATCH` with `application/apply-patch+yaml`): a `resourceVersion` in
//!   the patch is a precondition (409 when the object changed or is gone); fields are owned per
//!   field manager (`fieldManager`), a field another manager owns with a different value is a
//!   409 conflict unless `force=true` (which takes it over), and a field the applier owned and
//!   no longer names is removed; `metadata.generation` moves when the spec changes;
//! - the status subresource (`…/status`): applies there change only `status`, applies to the
//!   object ignore `status`; `status.conditions` is a map-list keyed by `type`, so entries of
//!   different managers never clobber each other;
//! - an outage for a while (`down_for`: watches break, everything answers 503);
//! - injected faults on request paths, each for a given number of requests: an HTTP status
//!   (403, 404, 409, 429, 5xx), 429/503 with `Retry-After`, a delay, or a dropped connection;
//! - watches (`?watch=1`): from a `resourceVersion`, the `ADDED`/`MODIFIED`/`DELETED` events
//!   after it (chunked, one JSON event per line), `BOOKMARK`s when asked for, a `410 Gone`
//!   `ERROR` event for a version older than the last compaction ([`FakeApi::compact`]), the
//!   stream ended at `timeoutSeconds`, and streams dropped on demand ([`FakeApi::drop_watches`]);
//!   lists carry the current `resourceVersion`, and are paged (`limit`, `continue`);
//! - `POST` creates Leases (409 AlreadyExists when present), for leader election, and Events;
//!   a merge patch (JSON or strategic) takes the fields it sets or removes from the appliers
//!   that owned them, as an update does, and a `resourceVersion` in it is a precondition (409
//!   when the object changed since);
//! - `POST` of a TokenReview (authentication.k8s.io/v1) and a SubjectAccessReview
//!   (authorization.k8s.io/v1) on a non-resource URL, answered from the tokens and grants
//!   given ([`FakeApi::add_token`], [`FakeApi::grant_non_resource`]), as the API server's
//!   authenticator and RBAC answer them;
//! - the CRDs it was given (`add_crd`, `remove_crd`) as `customresourcedefinitions` of
//!   `apiextensions.k8s.io/v1` (cluster-scoped: list, get, watch; a CRD added later is an
//!   `ADDED` event, one removed a `DELETED`), Established at once;
//! - metadata-only reads, as the API server serves them to `Accept:
//!   application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (kube's
//!   `PartialObjectMeta`): gets, lists and watch events carry `metadata` alone, no content;
//! - a record of every request (method and target, and whether it asked for metadata only)
//!   and every JSON body.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub enum Fault {
    Status(u16),
    /// A status with a `Retry-After` header (seconds).
    RetryAfter(u16, u64),
    Delay(Duration),
    /// Close the connection without answering.
    Drop,
}

/// What one field manager owns of one object.
#[derive(Debug, Clone, Default)]
struct Owned {
    spec: BTreeSet<String>,
    labels: BTreeSet<String>,
    /// `status.conditions` entries, by `type`.
    conditions: BTreeSet<String>,
    /// Other top-level `status` fields.
    status: BTreeSet<String>,
}

/// An object's identity: (apiVersion, plural, namespace, name).
type Key = (String, String, String, String);

#[derive(Default)]
struct State {
    /// Every object by its identity: lists come out sorted by name, as etcd's keys do.
    objects: BTreeMap<Key, Value>,
    /// Field ownership per object and manager.
    owners: HashMap<Key, BTreeMap<String, Owned>>,
    /// The last resourceVersion handed out.
    version: u64,
    crds: HashSet<(String, String, String)>,
    faults: Vec<(String, Fault, usize)>,
    requests: Vec<String>,
    /// Whether each request asked for metadata only (same order as `requests`).
    metadata_only: Vec<bool>,
    /// When each request arrived (same order as `requests`).
    request_times: Vec<std::time::Instant>,
    bodies: Vec<(String, Value)>,
    /// Every change, in order: (resourceVersion, event type, the object after it).
    history: Vec<(u64, &'static str, Value)>,
    /// Watches from a version older than this get 410 Gone.
    compacted: u64,
    /// Bumped by `drop_watches`: watches started before end their streams mid-way.
    drops: u64,
    /// Until then every request is answered 503 (`down_for`).
    down_until: Option<std::time::Instant>,
    /// Bearer tokens the authenticator knows: token → (user, groups).
    tokens: HashMap<String, (String, Vec<String>)>,
    /// Non-resource grants: (user or group, path, verb).
    grants: HashSet<(String, String, String)>,
    /// How often a watch that asked for bookmarks gets one (`None`: every 500 ms).
    bookmark_interval: Option<Duration>,
}

/// The identity of a stored object.
fn key_of(obj: &Value) -> Key {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (
        s(&obj["apiVersion"]),
        plural(obj["kind"].as_str().unwrap_or("")),
        s(&obj["metadata"]["namespace"]),
        s(&obj["metadata"]["name"]),
    )
}

fn key(api_version: &str, plural: &str, ns: &str, name: &str) -> Key {
    (api_version.into(), plural.into(), ns.into(), name.into())
}

impl State {
    /// The key of the object of a kind and name (any apiVersion and namespace).
    fn find(&self, kind: &str, name: &str) -> Option<Key> {
        let p = plural(kind);
        self.objects.keys().find(|k| k.1 == p && k.3 == name).cloned()
    }

    /// The objects of one resource in one namespace, in name order.
    fn of<'a>(&'a self, api_version: &str, plural: &str, ns: &str) -> impl Iterator<Item = &'a Value> + 'a {
        let from = key(api_version, plural, ns, "");
        let (a, p, n) = (from.0.clone(), from.1.clone(), from.2.clone());
        self.objects.range(from..).take_while(move |(k, _)| k.0 == a && k.1 == p && k.2 == n).map(|(_, v)| v)
    }

    fn record(&mut self, kind: &'static str, obj: &Value) {
        let rv =
            obj["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).unwrap_or(self.version);
        self.history.push((rv, kind, obj.clone()));
    }
}

pub struct FakeApi {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    dir: tempfile::TempDir,
}

impl FakeApi {
    pub fn start() -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        FakeApi { addr, state, stop, dir: tempfile::tempdir().unwrap() }
    }

    /// The CRDs `status` reads and writes: NodeSets, Deployments and edpm-agent's own.
    pub fn add_readiness_crds(&self) {
        for (g, v, p) in [
            ("dataplane.openstack.org", "v1beta1", "openstackdataplanenodesets"),
            ("dataplane.openstack.org", "v1beta1", "openstackdataplanedeployments"),
            ("agent.edpm.openstack.org", "v1alpha1", "edpmnodestatuses"),
            ("agent.edpm.openstack.org", "v1alpha1", "edpmnodesetstatuses"),
        ] {
            self.add_crd(g, v, p);
        }
    }

    /// Serves `plural` of `group`/`version` from now on, and holds its CRD (`plural.group`,
    /// Established), which the watches of CRDs see `ADDED` (`MODIFIED` for another version of
    /// one held).
    pub fn add_crd(&self, group: &str, version: &str, plural: &str) {
        let mut st = self.state.lock().unwrap();
        st.crds.insert((group.into(), version.into(), plural.into()));
        let k = key(CRD_API_VERSION, "customresourcedefinitions", "", &format!("{plural}.{group}"));
        let mut versions: Vec<String> =
            st.crds.iter().filter(|(g, _, p)| g == group && p == plural).map(|c| c.1.clone()).collect();
        versions.sort();
        let kind = plural.trim_end_matches('s');
        let obj = json!({"apiVersion": CRD_API_VERSION, "kind": "CustomResourceDefinition",
            "metadata": {"name": k.3, "uid": format!("uid-crd-{plural}.{group}"), "creationTimestamp": "2026-11-23T00:00:00Z"},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind, "listKind": format!("{kind}List")},
                "versions": versions.iter().map(|v| json!({"name": v, "served": true, "storage": v == version})).collect::<Vec<_>>()},
            "status": {"conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}]}});
        put_locked(&mut st, obj);
    }

    /// Stops serving `plural` of `group` (every version) and deletes its CRD: a `DELETED`
    /// event for the watches of CRDs. Its objects stay stored, unserved.
    pub fn remove_crd(&self, group: &str, plural: &str) {
        let mut st = self.state.lock().unwrap();
        st.crds.retain(|(g, _, p)| !(g == group && p == plural));
        drop(st);
        self.delete("CustomResourceDefinition", &format!("{plural}.{group}"));
    }

    /// How often a watch that asked for bookmarks gets one (500 ms unless set): the API
    /// server's watch cache sends one about every minute.
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.state.lock().unwrap().bookmark_interval = Some(every);
    }

    pub fn put(&self, mut obj: Value) {
        let mut st = self.state.lock().unwrap();
        st.version += 1;
        obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
        st.record("ADDED", &obj);
        st.objects.insert(key_of(&obj), obj);
    }

    /// Deletes the stored object of a kind and name (a `DELETED` event for watches).
    pub fn delete(&self, kind: &str, name: &str) {
        let mut st = self.state.lock().unwrap();
        if let Some(k) = st.find(kind, name) {
            st.version += 1;
            let mut obj = st.objects.remove(&k).unwrap_or_default();
            obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
            st.record("DELETED", &obj);
        }
    }

    /// Forgets the history so far, as etcd's compaction does: a watch from an older version
    /// gets 410 Gone and must list again.
    pub fn compact(&self) {
        let mut st = self.state.lock().unwrap();
        st.compacted = st.version;
        st.history.clear();
    }

    /// Ends every open watch stream abruptly (no final chunk), as a dropped connection does.
    pub fn drop_watches(&self) {
        self.state.lock().unwrap().drops += 1;
    }

    /// An outage: open watches break, and every request is answered 503 for `d`.
    pub fn down_for(&self, d: Duration) {
        let mut st = self.state.lock().unwrap();
        st.down_until = Some(std::time::Instant::now() + d);
        st.drops += 1;
    }

    /// Replaces the stored object of the same kind and name (another controller's write).
    pub fn put_replace(&self, obj: Value) {
        put_locked(&mut self.state.lock().unwrap(), obj);
    }

    /// Fails the next `times` requests whose path contains `path`.
    pub fn fault(&self, path: &str, fault: Fault, times: usize) {
        self.state.lock().unwrap().faults.push((path.into(), fault, times));
    }

    /// The stored object of a kind and name, as the server holds it now.
    pub fn object(&self, kind: &str, name: &str) -> Option<Value> {
        let st = self.state.lock().unwrap();
        st.find(kind, name).and_then(|k| st.objects.get(&k)).cloned()
    }

    /// Every stored object of `kind`.
    pub fn objects(&self, kind: &str) -> Vec<Value> {
        self.state.lock().unwrap().objects.values().filter(|o| o["kind"] == kind).cloned().collect()
    }

    /// Request bodies seen for paths containing `path`, as JSON.
    pub fn bodies(&self, path: &str) -> Vec<Value> {
        self.state
            .lock()
            .unwrap()
            .bodies
            .iter()
            .filter(|(p, _)| p.contains(path))
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Sends a request straight to the server's logic (as another client would), e.g. the node
    /// agent's apply: `patch("/apis/…/status?fieldManager=x&force=true", body)`.
    pub fn patch(&self, target: &str, body: &Value) -> (u16, Value) {
        route(&self.state, "PATCH", target, body.to_string().as_bytes())
    }

    /// Drops every pending fault.
    /// A bearer token the TokenReview authenticates as `user` in `groups`.
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        let groups = groups.iter().map(|g| (*g).to_string()).collect();
        self.state.lock().unwrap().tokens.insert(token.into(), (user.into(), groups));
    }

    /// Lets a user or group (`group:NAME`) `verb` the non-resource URL `path`.
    pub fn grant_non_resource(&self, who: &str, path: &str, verb: &str) {
        self.state.lock().unwrap().grants.insert((who.into(), path.into(), verb.into()));
    }

    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    /// How many requests with this method had a target containing `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests().iter().filter(|r| r.starts_with(method) && r.contains(path)).count()
    }

    /// Requests from the `from`-th on, with when each arrived.
    /// How many requests with this method had a target containing `path` and asked for the
    /// whole object (not metadata only): what carries a Secret's content.
    pub fn count_full(&self, method: &str, path: &str) -> usize {
        let st = self.state.lock().unwrap();
        st.requests
            .iter()
            .zip(&st.metadata_only)
            .filter(|(r, meta)| !**meta && r.starts_with(method) && r.contains(path))
            .count()
    }

    /// Of the requests from the `from`th on, (method and target, metadata only).
    pub fn requests_with_accept(&self, from: usize) -> Vec<(String, bool)> {
        let st = self.state.lock().unwrap();
        st.requests.iter().cloned().zip(st.metadata_only.iter().copied()).skip(from).collect()
    }

    pub fn requests_timed(&self, from: usize) -> Vec<(std::time::Instant, String)> {
        let st = self.state.lock().unwrap();
        st.request_times.iter().copied().zip(st.requests.iter().cloned()).skip(from).collect()
    }

    /// Requests seen so far, as `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// A kubeconfig pointing at this server, context namespace `openstack`.
    pub fn kubeconfig(&self) -> PathBuf {
        let p = self.dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: openstack\ncurrent-context: fake\n",
            self.addr
        );
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// The CRDs' API.
const CRD_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// Stores `obj` in place of the one of its kind and name, if any (`ADDED` or `MODIFIED`).
fn put_locked(st: &mut State, mut obj: Value) {
    st.version += 1;
    obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
    let k = key_of(&obj);
    let kind = if st.objects.contains_key(&k) { "MODIFIED" } else { "ADDED" };
    st.record(kind, &obj);
    st.objects.insert(k, obj);
}

fn plural(kind: &str) -> String {
    let k = kind.to_lowercase();
    if k.ends_with('s') { format!("{k}es") } else { format!("{k}s") }
}

fn status(code: u16, message: &str) -> (u16, Value) {
    let reason = match code {
        403 => "Forbidden",
        404 => "NotFound",
        400 => "BadRequest",
        409 => "Conflict",
        429 => "TooManyRequests",
        _ => "InternalError",
    };
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches_selector(obj: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| match term.split_once('=') {
        Some((k, v)) => obj["metadata"]["labels"][k.trim_end_matches('=')] == v,
        None => !obj["metadata"]["labels"][term].is_null(),
    })
}

struct Apply<'a> {
    api_version: &'a str,
    plural: &'a str,
    ns: &'a str,
    name: &'a str,
    manager: &'a str,
    force: bool,
    status: bool,
}

fn conflict(manager: &str, field: &str) -> (u16, Value) {
    status(409, &format!("Apply failed with 1 conflict: conflict with \"{manager}\": {field}"))
}

/// Server-side apply (see the module comment).
fn apply(state: &Mutex<State>, a: Apply, body: &[u8]) -> (u16, Value) {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "body is not JSON");
    };
    // The API server's validation of label values (apimachinery `IsValidLabelValue`).
    for (k, v) in patch["metadata"]["labels"].as_object().into_iter().flatten() {
        let v = v.as_str().unwrap_or("");
        let b = v.as_bytes();
        let valid = v.is_empty()
            || (b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')));
        if !valid {
            return status(
                422,
                &format!(
                    "metadata.labels: Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', must start and end with an alphanumeric character, and be no more than 63 characters ({k})"
                ),
            );
        }
    }
    let mut guard = state.lock().unwrap();
    let st = &mut *guard;
    let key: Key = (a.api_version.into(), a.plural.into(), a.ns.into(), a.name.into());
    let found = st.objects.contains_key(&key);
    let precondition = patch["metadata"]["resourceVersion"].as_str();
    let found = match (found, precondition) {
        (true, Some(rv)) if st.objects[&key]["metadata"]["resourceVersion"] != rv => {
            return status(
                409,
                "the object has been modified; please apply your changes to the latest version and try again",
            );
        }
        (false, Some(_)) => return status(409, "the object does not exist any more"),
        (false, None) if a.status => return status(404, &format!("{} \"{}\" not found", a.plural, a.name)),
        (f, _) => f,
    };
    st.version += 1;
    let version = st.version.to_string();
    let owners = st.owners.entry(key.clone()).or_default();
    if !found {
        // Create: metadata and spec; status is the subresource's.
        let mut obj = json!({
            "apiVersion": a.api_version, "kind": patch["kind"].clone(),
            "metadata": {"name": a.name, "namespace": a.ns, "generation": 1, "resourceVersion": version,
                "uid": format!("uid-{version}"), "creationTimestamp": "2026-11-23T00:00:00Z"},
        });
        for k in ["labels", "annotations", "ownerReferences"] {
            if let Some(v) = patch["metadata"].get(k) {
                obj["metadata"][k] = v.clone();
            }
        }
        if let Some(spec) = patch.get("spec") {
            obj["spec"] = spec.clone();
        }
        let mine = owners.entry(a.manager.into()).or_default();
        mine.spec = obj["spec"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        mine.labels =
            obj["metadata"]["labels"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        st.objects.insert(key, obj.clone());
        st.record("ADDED", &obj);
        return (201, obj);
    }
    let Some(obj) = st.objects.get_mut(&key) else { return status(500, "the object went away") };
    if a.status {
        let mut status_obj = obj.get("status").cloned().unwrap_or_else(|| json!({}));
        let new = patch.get("status").cloned().unwrap_or_else(|| json!({}));
        // status.conditions: a map-list keyed by type.
        let mut conds: Vec<Value> = status_obj["conditions"].as_array().cloned().unwrap_or_default();
        let applied: Vec<Value> = new["conditions"].as_array().cloned().unwrap_or_default();
        let applied_types: BTreeSet<String> =
            applied.iter().filter_map(|c| c["type"].as_str().map(String::from)).collect();
        for c in &applied {
            let Some(t) = c["type"].as_str() else {
                return status(422, "a condition without type: the list is keyed by type");
            };
            let existing = conds.iter().position(|x| x["type"] == t);
            for (m, o) in owners.iter_mut().filter(|(m, _)| m.as_str() != a.manager) {
                if o.conditions.contains(t) {
                    let same = existing.is_some_and(|e| conds[e] == *c);
                    if !same && !a.force {
                        return conflict(m, &format!(".status.conditions[type=\"{t}\"]"));
                    }
                    if a.force {
                        o.conditions.remove(t);
                    }
                }
            }
            match existing {
                Some(e) => conds[e] = c.clone(),
                None => conds.push(c.clone()),
            }
        }
        let mine = owners.entry(a.manager.into()).or_default();
        for gone in mine.conditions.difference(&applied_types).cloned().collect::<Vec<_>>() {
            mine.conditions.remove(&gone);
            conds.retain(|x| x["type"] != gone.as_str());
        }
        mine.conditions.extend(applied_types);
        status_obj["conditions"] = Value::Array(conds);
        let scalars: BTreeSet<String> = new
            .as_object()
            .map(|m| m.keys().filter(|k| *k != "conditions").cloned().collect())
            .unwrap_or_default();
        for gone in mine.status.difference(&scalars).cloned().collect::<Vec<_>>() {
            if let Some(m) = status_obj.as_object_mut() {
                m.remove(&gone);
            }
        }
        for k in &scalars {
            status_obj[k] = new[k].clone();
        }
        mine.status = scalars;
        obj["status"] = status_obj;
    } else {
        let old_spec = obj["spec"].clone();
        let mut spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
        let new_keys: BTreeSet<String> =
            patch["spec"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        for k in &new_keys {
            for (m, o) in owners.iter_mut().filter(|(m, _)| m.as_str() != a.manager) {
                if o.spec.contains(k) && spec[k] != patch["spec"][k] {
                    if !a.force {
                        return conflict(m, &format!(".spec.{k}"));
                    }
                    o.spec.remove(k);
                }
            }
            spec[k] = patch["spec"][k].clone();
        }
        let mine = owners.entry(a.manager.into()).or_default();
        for gone in mine.spec.difference(&new_keys).cloned().collect::<Vec<_>>() {
            if let Some(m) = spec.as_object_mut() {
                m.remove(&gone);
            }
        }
        mine.spec = new_keys;
        if let Some(labels) = patch["metadata"]["labels"].as_object() {
            for (k, v) in labels {
                obj["metadata"]["labels"][k] = v.clone();
                mine.labels.insert(k.clone());
            }
        }
        if let Some(annotations) = patch["metadata"]["annotations"].as_object() {
            for (k, v) in annotations {
                obj["metadata"]["annotations"][k] = v.clone();
            }
        }
        if let Some(refs) = patch["metadata"].get("ownerReferences") {
            obj["metadata"]["ownerReferences"] = refs.clone();
        }
        if spec != old_spec && !(old_spec.is_null() && spec == json!({})) {
            let g = obj["metadata"]["generation"].as_i64().unwrap_or(1);
            obj["metadata"]["generation"] = json!(g + 1);
        }
        obj["spec"] = spec;
    }
    obj["metadata"]["resourceVersion"] = json!(version);
    let out = obj.clone();
    st.record("MODIFIED", &out);
    (200, out)
}

fn route(state: &Mutex<State>, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
    route_with(state, method, target, body, false)
}

/// A JSON merge patch (RFC 7386) of an existing object: what `kubectl patch --type merge` and
/// the node agent's Lease renewal send.
fn merge_patch(
    state: &Mutex<State>,
    api_version: &str,
    plural_name: &str,
    ns: &str,
    name: &str,
    body: &[u8],
) -> (u16, Value) {
    fn merge(into: &mut Value, patch: &Value) {
        match (into, patch) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    if v.is_null() {
                        a.remove(k);
                    } else {
                        merge(a.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            (slot, v) => *slot = v.clone(),
        }
    }
    let Ok(patch) = serde_json::from_slice::<Value>(body) else { return status(400, "body is not JSON") };
    let mut st = state.lock().unwrap();
    st.version += 1;
    let version = st.version.to_string();
    let Some(obj) = st.objects.get_mut(&key(api_version, plural_name, ns, name)) else {
        return status(404, &format!("{plural_name} \"{name}\" not found"));
    };
    // A `resourceVersion` in the patch is a precondition, as the API server makes it: 409 when
    // the object changed since (leader election's optimistic concurrency).
    if let Some(rv) = patch["metadata"]["resourceVersion"].as_str()
        && obj["metadata"]["resourceVersion"].as_str() != Some(rv)
    {
        return status(
            409,
            &format!(
                "Operation cannot be fulfilled on {plural_name} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        );
    }
    merge(obj, &patch);
    obj["metadata"]["resourceVersion"] = json!(version);
    let out = obj.clone();
    // An update takes the fields it sets from every applier, and a field it removes is
    // nobody's (as the API server's managedFields do): a later apply of them conflicts with
    // nobody.
    if let (Some(owners), Some(spec)) =
        (st.owners.get_mut(&key(api_version, plural_name, ns, name)), patch["spec"].as_object())
    {
        for k in spec.keys() {
            for o in owners.values_mut() {
                o.spec.remove(k);
            }
        }
    }
    st.record("MODIFIED", &out);
    (200, out)
}

/// `POST` to a collection: creates the object, 409 AlreadyExists when it is there.
fn create(state: &Mutex<State>, api_version: &str, plural_name: &str, ns: &str, body: &[u8]) -> (u16, Value) {
    let Ok(mut obj) = serde_json::from_slice::<Value>(body) else { return status(400, "body is not JSON") };
    let Some(name) = obj["metadata"]["name"].as_str().map(String::from) else {
        return status(422, "metadata.name is required");
    };
    let mut st = state.lock().unwrap();
    if st.objects.contains_key(&key(api_version, plural_name, ns, &name)) {
        let (_, mut v) = status(409, &format!("{plural_name} \"{name}\" already exists"));
        v["reason"] = json!("AlreadyExists");
        return (409, v);
    }
    st.version += 1;
    obj["apiVersion"] = json!(api_version);
    obj["metadata"]["namespace"] = json!(ns);
    obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
    obj["metadata"]["uid"] = json!(format!("uid-{}", st.version));
    st.record("ADDED", &obj);
    st.objects.insert(key(api_version, plural_name, ns, &name), obj.clone());
    (201, obj)
}

fn route_with(state: &Mutex<State>, method: &str, target: &str, body: &[u8], merge: bool) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let param = |name: &str| query.split('&').find_map(|kv| kv.strip_prefix(name)).map(decode);
    let selector = param("labelSelector=").unwrap_or_default();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let st = state.lock().unwrap();
    // /api/v1/namespaces/{ns}/{plural}[/{name}] or /apis/{g}/{v}/namespaces/{ns}/{plural}[/{name}]
    if method == "POST" {
        match parts.as_slice() {
            ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => return token_review(&st, body),
            ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
                return access_review(&st, body);
            }
            _ => {}
        }
    }
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return status(404, "the server could not find the requested resource"),
    };
    let (ns, plural_name, name, subresource) = match rest {
        // Cluster-scoped: the CRDs only.
        ["customresourcedefinitions"] => ("", "customresourcedefinitions", None, false),
        ["customresourcedefinitions", n] => ("", "customresourcedefinitions", Some(*n), false),
        ["namespaces", ns, p] => (*ns, *p, None, false),
        ["namespaces", ns, p, n] => (*ns, *p, Some(*n), false),
        ["namespaces", ns, p, n, "status"] => (*ns, *p, Some(*n), true),
        _ => return status(404, "the server could not find the requested resource"),
    };
    let core = group.is_empty()
        || ["batch", "coordination.k8s.io", "events.k8s.io"].contains(&group)
        || (group, version) == ("apiextensions.k8s.io", "v1");
    let known = core || st.crds.contains(&(group.into(), version.into(), plural_name.into()));
    let create_lease =
        method == "POST" && name.is_none() && (plural_name == "leases" || plural_name == "events");
    if !known || !(method == "GET" || (method == "PATCH" && name.is_some()) || create_lease) {
        return status(404, "the server could not find the requested resource");
    }
    let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    if create_lease {
        drop(st);
        return create(state, &api_version, plural_name, ns, body);
    }
    if method == "PATCH" && merge {
        drop(st);
        return merge_patch(state, &api_version, plural_name, ns, name.unwrap_or_default(), body);
    }
    if method == "PATCH" {
        drop(st);
        let manager = param("fieldManager=").unwrap_or_default();
        if manager.is_empty() {
            return status(422, "fieldManager is required for apply patch");
        }
        let force = param("force=").is_some_and(|f| f == "true");
        let a = Apply {
            api_version: &api_version,
            plural: plural_name,
            ns,
            name: name.unwrap_or_default(),
            manager: &manager,
            force,
            status: subresource,
        };
        return apply(state, a, body);
    }
    match name {
        Some(n) => match st.objects.get(&key(&api_version, plural_name, ns, n)) {
            Some(o) => (200, o.clone()),
            None => status(404, &format!("{plural_name} \"{n}\" not found")),
        },
        None => {
            // Pages, as the API server serves them: `limit` items in name order, and a
            // `continue` token (here the last name given) while more remain.
            let limit = param("limit=").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0);
            let after = param("continue=").unwrap_or_default();
            let mut items: Vec<Value> = st
                .of(&api_version, plural_name, ns)
                .filter(|o| after.is_empty() || o["metadata"]["name"].as_str().unwrap_or("") > after.as_str())
                .filter(|o| matches_selector(o, &selector))
                .take(limit.map_or(usize::MAX, |l| l + 1))
                .cloned()
                .collect();
            let mut meta = json!({"resourceVersion": st.version.to_string()});
            if let Some(l) = limit
                && items.len() > l
            {
                items.truncate(l);
                meta["continue"] = json!(items[l - 1]["metadata"]["name"].clone());
            }
            (200, json!({"apiVersion": api_version, "kind": "List", "metadata": meta, "items": items}))
        }
    }
}

/// A TokenReview's answer: the review with its `status`, as the authenticator fills it.
fn token_review(st: &State, body: &[u8]) -> (u16, Value) {
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else {
        return status(400, "body is not JSON");
    };
    let Some(token) = review["spec"]["token"].as_str() else {
        return status(422, "spec.token: Required value");
    };
    review["status"] = match st.tokens.get(token) {
        Some((user, groups)) => json!({
            "authenticated": true,
            "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups},
        }),
        None => json!({"authenticated": false, "error": "token not found"}),
    };
    (201, review)
}

/// A SubjectAccessReview's answer for a non-resource URL: allowed when the user or one of
/// its groups was granted the path and verb.
fn access_review(st: &State, body: &[u8]) -> (u16, Value) {
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else {
        return status(400, "body is not JSON");
    };
    let spec = &review["spec"];
    let (Some(path), Some(verb)) =
        (spec["nonResourceAttributes"]["path"].as_str(), spec["nonResourceAttributes"]["verb"].as_str())
    else {
        return status(422, "spec.nonResourceAttributes: only non-resource reviews are served here");
    };
    let mut who: Vec<String> = spec["user"].as_str().map(String::from).into_iter().collect();
    for g in spec["groups"].as_array().into_iter().flatten() {
        who.extend(g.as_str().map(|g| format!("group:{g}")));
    }
    let allowed = who.iter().any(|w| st.grants.contains(&(w.clone(), path.to_string(), verb.to_string())));
    review["status"] = json!({"allowed": allowed});
    (201, review)
}

/// Serves requests on one connection until the client closes it (HTTP/1.1 keep-alive, as
/// the API server does: clients reuse their connections).
fn serve(conn: TcpStream, state: &Mutex<State>) {
    let Ok(read_half) = conn.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut conn = conn;
    while serve_one(&mut reader, &mut conn, state) {}
}

/// One request and its response; false when the connection is done.
fn serve_one(reader: &mut BufReader<TcpStream>, conn: &mut TcpStream, state: &Mutex<State>) -> bool {
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return false;
    }
    let mut length = 0usize;
    let mut merge = false;
    let mut metadata_only = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("content-type:") && lower.contains("merge-patch") {
            merge = true;
        }
        if lower.starts_with("accept:") && lower.contains("as=partialobjectmetadata") {
            metadata_only = true;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let fault = {
        let mut st = state.lock().unwrap();
        st.requests.push(format!("{method} {target}"));
        st.metadata_only.push(metadata_only);
        st.request_times.push(std::time::Instant::now());
        if let Ok(v) = serde_json::from_slice::<Value>(&body) {
            st.bodies.push((target.to_string(), v));
        }
        if st.down_until.is_some_and(|t| std::time::Instant::now() < t) {
            Some(Fault::Status(503))
        } else {
            let hit = st.faults.iter_mut().find(|(p, _, n)| *n > 0 && target.contains(p.as_str()));
            hit.map(|(_, f, n)| {
                *n -= 1;
                f.clone()
            })
        }
    };
    let watching = method == "GET"
        && target
            .split_once('?')
            .is_some_and(|(_, q)| q.split('&').any(|kv| kv == "watch=1" || kv == "watch=true"));
    if watching && !matches!(fault, Some(Fault::Status(_) | Fault::RetryAfter(..) | Fault::Drop)) {
        if let Some(Fault::Delay(d)) = fault {
            std::thread::sleep(d);
        }
        serve_watch(conn, state, target, metadata_only);
        return false;
    }
    let mut extra = String::new();
    let (code, value) = match fault {
        Some(Fault::Status(code)) => status(code, "injected fault"),
        Some(Fault::RetryAfter(code, secs)) => {
            extra = format!("Retry-After: {secs}\r\n");
            status(code, "injected fault, come back later")
        }
        Some(Fault::Delay(d)) => {
            std::thread::sleep(d);
            route_with(state, method, target, &body, merge)
        }
        Some(Fault::Drop) => return false,
        None => route_with(state, method, target, &body, merge),
    };
    let value = if metadata_only && method == "GET" && code == 200 { partial(value) } else { value };
    let body = value.to_string();
    let response = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes()).is_ok()
}

/// An object or a list as a metadata-only read answers it: `PartialObjectMetadata`(`List`),
/// the objects' `metadata` alone.
fn partial(value: Value) -> Value {
    let one = |o: &Value| json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": o["metadata"]});
    if value["kind"] == "List" {
        let items: Vec<Value> = value["items"].as_array().into_iter().flatten().map(one).collect();
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": value["metadata"], "items": items})
    } else {
        one(&value)
    }
}

/// A watch (see the module comment): chunked JSON events until `timeoutSeconds`, a drop, or
/// the client going away; then the connection closes. `metadata_only`: each event's object is
/// its metadata alone.
fn serve_watch(conn: &mut TcpStream, state: &Mutex<State>, target: &str, metadata_only: bool) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let param = |name: &str| query.split('&').find_map(|kv| kv.strip_prefix(name)).map(decode);
    let selector = param("labelSelector=").unwrap_or_default();
    let bookmarks = param("allowWatchBookmarks=").is_some_and(|v| v == "true");
    let timeout = Duration::from_secs(param("timeoutSeconds=").and_then(|t| t.parse().ok()).unwrap_or(290));
    let from: u64 = param("resourceVersion=").and_then(|v| v.parse().ok()).unwrap_or(0);
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (api_version, ns, plural_name) = match parts.as_slice() {
        ["apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions"] => {
            (CRD_API_VERSION.to_string(), "", "customresourcedefinitions")
        }
        ["api", v, "namespaces", ns, p] => (v.to_string(), *ns, *p),
        ["apis", g, v, "namespaces", ns, p] => (format!("{g}/{v}"), *ns, *p),
        _ => {
            let body = status(404, "the server could not find the requested resource").1.to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 404 X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            return;
        }
    };
    let chunk = |conn: &mut TcpStream, v: &Value| {
        let line = format!("{v}\n");
        write!(conn, "{:x}\r\n{line}\r\n", line.len()).and_then(|_| conn.flush()).is_ok()
    };
    if conn
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        .is_err()
    {
        return;
    }
    let (drops, compacted, every) = {
        let st = state.lock().unwrap();
        (st.drops, st.compacted, st.bookmark_interval.unwrap_or(Duration::from_millis(500)))
    };
    if from < compacted {
        let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": format!("too old resource version: {from} ({compacted})"), "reason": "Expired", "code": 410}});
        let _ = chunk(conn, &gone);
        let _ = conn.write_all(b"0\r\n\r\n");
        return;
    }
    let started = std::time::Instant::now();
    let mut last_sent = from;
    let mut last_bookmark = std::time::Instant::now();
    loop {
        let (events, version, dropped) = {
            let st = state.lock().unwrap();
            // History is in resourceVersion order: start after what was sent.
            let start = st.history.partition_point(|(rv, _, _)| *rv <= last_sent);
            let events: Vec<(u64, &'static str, Value)> = st.history[start..]
                .iter()
                .filter(|(_, _, o)| {
                    o["apiVersion"] == api_version.as_str()
                        && plural(o["kind"].as_str().unwrap_or("")) == plural_name
                        && o["metadata"]["namespace"].as_str().unwrap_or("") == ns
                        && matches_selector(o, &selector)
                })
                .cloned()
                .collect();
            (events, st.version, st.drops != drops)
        };
        if dropped {
            // Mid-stream, without the final chunk: the client sees the connection break.
            let _ = conn.shutdown(std::net::Shutdown::Both);
            return;
        }
        for (rv, kind, obj) in events {
            let obj = if metadata_only { partial(obj) } else { obj };
            if !chunk(conn, &json!({"type": kind, "object": obj})) {
                return;
            }
            last_sent = rv;
        }
        if bookmarks && last_bookmark.elapsed() >= every {
            last_bookmark = std::time::Instant::now();
            let kind = plural_name.trim_end_matches('s');
            let mark = json!({"type": "BOOKMARK", "object": {"apiVersion": api_version, "kind": kind,
                "metadata": {"resourceVersion": version.to_string()}}});
            if !chunk(conn, &mark) {
                return;
            }
            last_sent = last_sent.max(version);
        }
        if started.elapsed() >= timeout {
            let _ = conn.write_all(b"0\r\n\r\n");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `GET target` with `accept`, and reads what comes back for `for_`.
    fn get(api: &FakeApi, target: &str, accept: &str, for_: Duration) -> String {
        let mut s = TcpStream::connect(api.addr).unwrap();
        write!(s, "GET {target} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let (mut out, mut buf, end) = (Vec::new(), [0u8; 4096], std::time::Instant::now() + for_);
        while std::time::Instant::now() < end {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    const META_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

    /// The CRDs given are listed metadata-only; one added later is an `ADDED` event on a watch
    /// of them, one removed a `DELETED`; bookmarks come at the interval set.
    #[test]
    fn crds_are_listed_and_watched_and_bookmarks_keep_their_interval() {
        let api = FakeApi::start();
        api.add_crd("nova.openstack.org", "v1beta1", "novacells");
        let list = get(&api, CRDS, META_LIST, Duration::from_millis(300));
        assert!(list.contains("\"PartialObjectMetadataList\""), "{list}");
        assert!(list.contains("novacells.nova.openstack.org"), "{list}");
        assert!(!list.contains("\"spec\""), "metadata only: {list}");
        let rv = api.state.lock().unwrap().version;

        api.set_bookmark_interval(Duration::from_secs(60));
        let target = format!("{CRDS}?&watch=true&allowWatchBookmarks=true&resourceVersion={rv}");
        let watched = std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                api.add_crd("baremetal.openstack.org", "v1beta1", "openstackbaremetalsets");
                api.remove_crd("nova.openstack.org", "novacells");
            });
            get(&api, &target, META_LIST, Duration::from_millis(1500))
        });
        assert!(
            watched.contains("\"ADDED\"")
                && watched.contains("openstackbaremetalsets.baremetal.openstack.org"),
            "{watched}"
        );
        assert!(
            watched.contains("\"DELETED\"") && watched.contains("novacells.nova.openstack.org"),
            "{watched}"
        );
        assert!(!watched.contains("BOOKMARK"), "a bookmark within 1.5 s of a minute's interval: {watched}");
        // Unless set: every 500 ms.
        let fresh = FakeApi::start();
        let target = format!("{CRDS}?&watch=true&allowWatchBookmarks=true&resourceVersion=0");
        let watched = get(&fresh, &target, META_LIST, Duration::from_millis(1300));
        assert!(watched.matches("BOOKMARK").count() >= 2, "{watched}");
    }
}
