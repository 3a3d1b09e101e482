//! Reads a snapshot from the API server: lists the data-plane kinds (the ones that produce
//! hosts with the label selector), then gets by name only the ConfigMaps and Secrets those
//! objects reference (`snapshot::refs`); it never lists Secrets.
//!
//! Every object is turned back into plain JSON and goes through the same [`Snapshot`]
//! decoding as a manifest, so both sources yield identical models. A kind whose CRD is not
//! installed answers 404 to a list and is read as empty.

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Client, Error};
use edpm_core::kinds::{self, Kind, KnownKind, Read};
use edpm_core::snapshot::resource::Origin;
use edpm_core::snapshot::{Located, Snapshot, SnapshotError};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Api(#[from] Error),
    #[error("{0}")]
    Snapshot(#[from] SnapshotError),
}

/// A kind of the table (`edpm_core::kinds::KINDS`) as kube's client names it: every request
/// for a kind we read takes its group, version and plural from the table.
pub fn resource(kind: &Kind) -> ApiResource {
    ApiResource {
        group: kind.group.into(),
        version: kind.version.into(),
        api_version: kind.api_version(),
        kind: kind.kind.into(),
        plural: kind.plural.into(),
    }
}

/// The table's row of a kind we read and write (our status objects, Leases): a name the table
/// does not hold is a bug, caught by every test that writes one.
pub fn named(kind: &str) -> &'static Kind {
    kinds::named(kind).unwrap_or_else(|| panic!("{kind} is not in edpm_core::kinds::KINDS"))
}

/// A kind of the table of kinds read (`edpm_core::kinds`), as the API server is asked for it.
pub type Listed = Kind;

/// The kinds listed (and watched): every kind of the table but those only got by name.
pub fn listed() -> impl Iterator<Item = &'static Listed> {
    kinds::KINDS.iter().filter(|k| k.is_listed())
}

/// How a kind is asked for.
pub trait Listing {
    fn resource(&self) -> ApiResource;
    /// `plural.group` (or `plural` for the core group), for messages.
    fn name(&self) -> String;
    /// The namespace this kind is read in: the node agents' Leases have one of their own
    /// (`--lease-namespace`); everything else is the data plane's `ns`.
    fn namespace<'a>(&self, client: &'a Client, ns: &'a str) -> &'a str;
    /// The label selector a read of this kind uses.
    fn selector(&self, selector: Option<&str>) -> Option<String>;
}

impl Listing for Kind {
    fn resource(&self) -> ApiResource {
        resource(self)
    }

    fn name(&self) -> String {
        self.resource_name()
    }

    fn namespace<'a>(&self, client: &'a Client, ns: &'a str) -> &'a str {
        if self.known == KnownKind::Lease { client.lease_namespace() } else { ns }
    }

    fn selector(&self, selector: Option<&str>) -> Option<String> {
        let (own, labels) = match self.read {
            Read::Selected => (selector, None),
            Read::Labelled(l) => (None, Some(l)),
            Read::Listed | Read::ByName => (None, None),
        };
        match (own, labels) {
            (Some(a), Some(b)) => Some(format!("{a},{b}")),
            (a, b) => a.or(b).map(String::from),
        }
    }
}

/// How many lists or gets are in flight at once: a slow API server costs the slowest answer
/// per round, not the sum of all answers, and the server is not flooded.
const READ_CONCURRENCY: usize = 8;

/// Reads the snapshot of the client's namespace. `selector` applies to the kinds that
/// produce hosts. The kinds are listed a few at a time; their objects keep the list's order.
pub async fn snapshot(
    client: &Client,
    selector: Option<&str>,
    with_evidence: bool,
) -> Result<Snapshot, ReadError> {
    let ns = client.namespace().to_string();
    let kinds: Vec<&Listed> = listed().filter(|l| with_evidence || !l.evidence).collect();
    let lists = futures::stream::iter(kinds.iter().map(|l| list_kind(client, &ns, l, selector)))
        .buffered(READ_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let mut docs = Vec::new();
    let mut not_served = Vec::new();
    let mut leases_unread = None;
    for (l, listed) in kinds.iter().zip(lists) {
        match listed {
            Ok(Some(items)) => docs.extend(items),
            Ok(None) => not_served.push(l.name()),
            // The Leases only vouch for the node agents' word: without them those conditions
            // read Unknown, saying why, and everything else is still evaluated (a reporter's
            // RBAC from before the Leases had a namespace of their own answers 403).
            Err(ReadError::Api(e)) if l.known == KnownKind::Lease && e.code() == Some(403) => {
                leases_unread = Some(format!(
                    "the node agents' Leases in namespace {} cannot be listed ({e}); grant list on leases there (packaging/kubernetes/rbac-reporter.yaml), or name their namespace with --lease-namespace",
                    client.lease_namespace()
                ));
            }
            Err(e) => return Err(e),
        }
    }
    let mut snap = with_references(client, docs).await?;
    snap.not_served = not_served;
    snap.evidence.leases_unread = leases_unread;
    Ok(snap)
}

/// One kind's objects; `None` when the API server does not serve the kind (404: its CRD is
/// not installed, that operator is not deployed; v1, batch/v1 and coordination.k8s.io/v1 are
/// built in).
async fn list_kind(
    client: &Client,
    ns: &str,
    l: &Listed,
    selector: Option<&str>,
) -> Result<Option<Vec<Located<'static>>>, ReadError> {
    let ns = l.namespace(client, ns);
    let api: Api<DynamicObject> = Api::namespaced_with(client.kube(), ns, &l.resource());
    let mut lp = ListParams::default();
    if let Some(sel) = l.selector(selector) {
        lp = lp.labels(&sel);
    }
    let action = format!("listing {} in namespace {ns}", l.name());
    let list = match client.within_time(api.list(&lp)).await {
        Ok(list) => list,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(client.error(action, &e).into()),
    };
    let mut docs = Vec::with_capacity(list.items.len());
    for item in list.items {
        docs.push(located(ns, listed_json(&action, l, &item)?));
    }
    Ok(Some(docs))
}

/// The snapshot of `docs` and of the ConfigMaps and Secrets they reference, got by name.
pub async fn with_references(client: &Client, docs: Vec<Located<'static>>) -> Result<Snapshot, ReadError> {
    add_references(client, Snapshot::from_documents(docs, None)?).await
}

/// `snap` with the ConfigMaps and Secrets its objects reference, got by name; then the
/// packed certificate Secrets the first round's say there are more of
/// (`refs::more_references`).
pub async fn add_references(client: &Client, snap: Snapshot) -> Result<Snapshot, ReadError> {
    let (config_maps, secrets) = edpm_core::snapshot::refs::references(&snap);
    let snap = get_named(client, snap, config_maps, secrets).await?;
    let more = edpm_core::snapshot::refs::more_references(&snap);
    if more.is_empty() {
        return Ok(snap);
    }
    get_named(client, snap, BTreeSet::new(), more).await
}

/// `snap` with the ConfigMaps `config_maps` and Secrets `secrets`, got by name.
async fn get_named(
    client: &Client,
    mut snap: Snapshot,
    config_maps: BTreeSet<String>,
    secrets: BTreeSet<String>,
) -> Result<Snapshot, ReadError> {
    let ns = client.namespace().to_string();
    let config_map_api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.kube(), &ns);
    let secret_api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.kube(), &ns);
    // A few at a time, in the order the references were found.
    let config_maps =
        futures::stream::iter(config_maps.iter().map(|name| get(client, &config_map_api, "configmap", name)))
            .buffered(READ_CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
    let secrets = futures::stream::iter(secrets.iter().map(|name| get(client, &secret_api, "secret", name)))
        .buffered(READ_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let mut docs = Vec::new();
    for (got, kind) in
        config_maps.into_iter().map(|g| (g, "ConfigMap")).chain(secrets.into_iter().map(|g| (g, "Secret")))
    {
        if let Some(value) = got? {
            docs.push(located(&ns, typed(value, kind)));
        }
    }
    if !docs.is_empty() {
        snap.merge(Snapshot::from_documents(docs, None)?)?;
    }
    Ok(snap)
}

/// What the controller keeps of a Secret or ConfigMap it hashed: the version hashed, the
/// hash, and the metadata the evaluation reads (name, namespace, uid, labels, when it last
/// changed: [`change_times`]); never content.
#[derive(Debug, Clone)]
pub struct Hashed {
    pub version: String,
    pub hash: String,
    pub metadata: Value,
}

/// The controller's cache of hashed inputs, and the versions its watch has seen.
pub trait InputCache {
    /// The object's `resourceVersion` now, as watched; `None` when not known.
    fn version_now(&self, kind: &str, name: &str) -> Option<String>;
    /// Whether the watch has listed the object's kind and the object is not there: it is not
    /// asked for (its get would answer 404).
    fn absent(&self, kind: &str, name: &str) -> bool;
    fn hashed(&self, kind: &str, name: &str) -> Option<Hashed>;
    fn keep(&self, kind: &str, name: &str, hashed: Hashed);
}

/// [`add_references`], but a Secret or ConfigMap whose version now (`cache.version_now`) is
/// the one its kept hash was computed from is not got: the snapshot holds its metadata and
/// its hash (`Snapshot::hashed`); one the watch has listed as absent (`cache.absent`) is not
/// asked for, whichever it is. That holds for every reference, recorded by a Deployment or not (an SSH key,
/// `ansibleVarsFrom`). What is got is hashed and kept (never its content). Always got whole:
/// Secrets an OpenStack object names (a NovaCell's, the CA bundle: Nova's logins read them),
/// and packed certificate Secrets (label `numberOfSecrets`: a node's share is the hash of its
/// own keys, which a hash of the whole cannot give).
pub async fn add_references_cached(
    client: &Client,
    snap: Snapshot,
    cache: &dyn InputCache,
) -> Result<Snapshot, ReadError> {
    let (config_maps, secrets) = edpm_core::snapshot::refs::references(&snap);
    let snap = get_named_cached(client, snap, config_maps, secrets, cache).await?;
    // The packed certificate Secrets the first round's say there are more of.
    let more = edpm_core::snapshot::refs::more_references(&snap);
    if more.is_empty() {
        return Ok(snap);
    }
    get_named_cached(client, snap, BTreeSet::new(), more, cache).await
}

/// `snap` with the ConfigMaps `config_maps` and Secrets `secrets`, each got by name unless
/// `cache` has it ([`add_references_cached`]).
async fn get_named_cached(
    client: &Client,
    mut snap: Snapshot,
    config_maps: BTreeSet<String>,
    secrets: BTreeSet<String>,
    cache: &dyn InputCache,
) -> Result<Snapshot, ReadError> {
    let ns = client.namespace().to_string();
    let mut whole: BTreeSet<String> = BTreeSet::from(["combined-ca-bundle".to_string()]);
    for o in &snap.openstack {
        strings(&o.body, &mut whole);
    }
    let mut stubs = Vec::new();
    let mut wanted: Vec<(&'static str, String)> = Vec::new();
    for (kind, name) in
        config_maps.into_iter().map(|n| ("ConfigMap", n)).chain(secrets.into_iter().map(|n| ("Secret", n)))
    {
        if cache.absent(kind, &name) {
            // As its 404 would: not in the snapshot.
            continue;
        }
        match kept_hash(cache, &whole, kind, &name) {
            Some(h) => {
                snap.hashed.insert((kind.to_string(), name.clone()), h.hash);
                stubs.push(located(&ns, json!({"apiVersion": "v1", "kind": kind, "metadata": h.metadata})));
            }
            None => wanted.push((kind, name)),
        }
    }
    let config_map_api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.kube(), &ns);
    let secret_api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.kube(), &ns);
    let got = futures::stream::iter(wanted.iter().map(|(kind, name)| {
        let (cm, sec) = (&config_map_api, &secret_api);
        async move {
            if *kind == "Secret" {
                get(client, sec, "secret", name).await
            } else {
                get(client, cm, "configmap", name).await
            }
        }
    }))
    .buffered(READ_CONCURRENCY)
    .collect::<Vec<_>>()
    .await;
    let mut docs = stubs;
    let mut versions: BTreeMap<(&'static str, String), (String, Value)> = BTreeMap::new();
    for ((kind, name), got) in wanted.into_iter().zip(got) {
        if let Some(value) = got? {
            let meta = &value["metadata"];
            let packed = meta["labels"].get(PACKED).is_some();
            if let Some(v) = meta["resourceVersion"].as_str()
                && !packed
            {
                let kept = json!({"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"], "labels": meta["labels"], "managedFields": change_times(&meta["managedFields"])});
                versions.insert((kind, name), (v.to_string(), kept));
            }
            docs.push(located(&ns, typed(value, kind)));
        }
    }
    if !docs.is_empty() {
        let got = Snapshot::from_documents(docs, None)?;
        keep_hashes(&got, versions, cache);
        snap.merge(got)?;
    }
    Ok(snap)
}

/// Of an object's `managedFields`, what says when it last changed (`Meta::changed`): each
/// entry's `time` and `subresource`, without the fields it owns (`fieldsV1`, most of the size).
pub fn change_times(managed: &Value) -> Value {
    let Some(entries) = managed.as_array() else { return Value::Null };
    Value::Array(
        entries
            .iter()
            .map(|e| json!({"manager": e["manager"], "subresource": e["subresource"], "time": e["time"]}))
            .collect(),
    )
}

/// What `cache` kept of `kind` `name` when it is current (hashed at the version the watch
/// says is the object's now), unless the object is always got whole (`whole`: Secrets only).
fn kept_hash(cache: &dyn InputCache, whole: &BTreeSet<String>, kind: &str, name: &str) -> Option<Hashed> {
    if kind == "Secret" && whole.contains(name) {
        return None;
    }
    let (now, h) = cache.version_now(kind, name).zip(cache.hashed(kind, name))?;
    (now == h.version).then_some(h)
}

/// The label of a packed certificate Secret (`readiness::inputs::share`): never kept as a
/// hash alone.
const PACKED: &str = "numberOfSecrets";

/// Hashes what was got (`versions`: each with the version and metadata it was got at) into
/// `cache`.
fn keep_hashes(
    got: &Snapshot,
    mut versions: BTreeMap<(&'static str, String), (String, Value)>,
    cache: &dyn InputCache,
) {
    for s in &got.secrets {
        if let Some((version, metadata)) = versions.remove(&("Secret", s.id.name.clone())) {
            let hash = edpm_core::objecthash::secret(&s.body);
            cache.keep("Secret", &s.id.name, Hashed { version, hash, metadata });
        }
    }
    for c in &got.config_maps {
        if let Some((version, metadata)) = versions.remove(&("ConfigMap", c.id.name.clone())) {
            let hash = edpm_core::objecthash::config_map(&c.body);
            cache.keep("ConfigMap", &c.id.name, Hashed { version, hash, metadata });
        }
    }
}

/// Every string in `v`.
fn strings(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// One Secret, got by name (never listed), as a snapshot holding it (empty when it does not
/// exist): for a Secret named on the command line (`status --nova-credentials`).
pub async fn secret_by_name(client: &Client, name: &str) -> Result<Snapshot, ReadError> {
    let ns = client.namespace().to_string();
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.kube(), &ns);
    match get(client, &api, "secret", name).await? {
        Some(value) => Ok(Snapshot::from_documents(vec![located(&ns, typed(value, "Secret"))], None)?),
        None => Ok(Snapshot::default()),
    }
}

/// Fetches one object as JSON; a missing one is `None`, so that the model can report the
/// whole reference chain that needed it.
/// The `resourceVersion` of each Secret or ConfigMap (`kind`, name), got by name (metadata
/// only: no Secret's data is read); `None` for one that does not exist.
/// Each answer on its own: one object that cannot be read (a 403, a timeout) does not hide the
/// others.
pub async fn resource_versions(
    client: &Client,
    objects: Vec<(String, String)>,
) -> Vec<Result<Option<String>, Error>> {
    futures::stream::iter(objects.into_iter().map(|(k, n)| resource_version(client.clone(), k, n)))
        .buffered(READ_CONCURRENCY)
        .collect::<Vec<_>>()
        .await
}

async fn resource_version(client: Client, kind: String, name: String) -> Result<Option<String>, Error> {
    let ns = client.namespace().to_string();
    let action = format!("reading the metadata of {kind} {name} in namespace {ns}");
    invalid_name(&action, &name)?;
    let got = if kind == "Secret" {
        let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.kube(), &ns);
        client
            .within_time(api.get_metadata_opt(&name))
            .await
            .map(|m| m.and_then(|m| m.metadata.resource_version))
    } else {
        let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.kube(), &ns);
        client
            .within_time(api.get_metadata_opt(&name))
            .await
            .map(|m| m.and_then(|m| m.metadata.resource_version))
    };
    got.map_err(|e| client.error(action, &e))
}

async fn get<K>(client: &Client, api: &Api<K>, what: &str, name: &str) -> Result<Option<Value>, Error>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let action = format!("reading {what} {name} in namespace {}", client.namespace());
    // A name from an object never goes into a request path unchecked: kube puts it there
    // unescaped, so `a?watch=true` would become a query and `../x` another path.
    invalid_name(&action, name)?;
    match client.within_time(api.get(name)).await {
        Ok(obj) => to_json(&action, &obj).map(Some),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(client.error(action, &e)),
    }
}

/// An error naming `name` when it is no object name (RFC 1123 subdomain, as the API server
/// requires of a Secret's or ConfigMap's): no request is made with it.
pub(crate) fn invalid_name(action: &str, name: &str) -> Result<(), Error> {
    if edpm_core::validate::is_dns1123_subdomain(name) {
        return Ok(());
    }
    Err(Error::Request {
        action: action.to_string(),
        message: format!(
            "{} is no object name (a lowercase RFC 1123 subdomain of at most 253 characters): not asked",
            edpm_core::excerpt::echo(&edpm_core::excerpt::printable(name)).debug()
        ),
        hint: "fix the object that names it".to_string(),
        code: None,
    })
}

fn to_json(action: &str, obj: &impl serde::Serialize) -> Result<Value, Error> {
    serde_json::to_value(obj).map_err(|e| Error::Request {
        action: action.to_string(),
        message: format!("cannot re-encode the object: {e}"),
        hint: String::new(),
        code: None,
    })
}

fn typed(mut value: Value, kind: &str) -> Value {
    value["apiVersion"] = "v1".into();
    value["kind"] = kind.into();
    value
}

/// A listed (or watched) object as plain JSON, its type set: list items may omit it.
pub fn listed_json(action: &str, l: &Listed, obj: &DynamicObject) -> Result<Value, Error> {
    let mut value = to_json(action, obj)?;
    value["apiVersion"] = Value::String(l.resource().api_version);
    value["kind"] = Value::String(l.kind.into());
    Ok(value)
}

pub fn located(ns: &str, value: Value) -> Located<'static> {
    Located::from_value(Origin::Api { namespace: ns.to_string() }, &value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// The controller keeps of a hashed input's `managedFields` what says when it last
    /// changed, and no field it owns: read back, it says the same time.
    #[test]
    fn a_kept_inputs_change_times_say_when_it_last_changed() {
        let managed = json!([
            {"manager": "kubectl", "operation": "Update", "time": "2026-11-25T09:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:nova.conf": {}}}},
            {"manager": "operator", "operation": "Update", "subresource": "status", "time": "2026-11-26T09:00:00Z"}
        ]);
        let kept = super::change_times(&managed);
        assert!(!kept.to_string().contains("nova.conf"), "{kept}");
        let meta: edpm_core::snapshot::resource::Meta =
            edpm_core::snapshot::resource::decode("metadata", &json!({"name": "s", "managedFields": kept}))
                .unwrap();
        assert_eq!(meta.changed.as_deref(), Some("2026-11-25T09:00:00Z"));
        assert_eq!(super::change_times(&serde_json::Value::Null), serde_json::Value::Null);
    }
}
