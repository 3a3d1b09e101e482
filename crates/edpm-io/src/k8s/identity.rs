//! The node agents' identities, made and kept (`status identities`, and the controller with
//! `--node-identities`): what `edpm_core::identity` says should exist is compared with what
//! does, and only the difference is sent, by server-side apply under field manager
//! `edpm-agent`. A node that left the NodeSet loses its RoleBindings, Roles and ServiceAccount
//! (deleting the account invalidates every token it was given) and its entry in the
//! credentials Secret; a node whose entry is missing, past half its lifetime or bound to an
//! account that was replaced gets a new token from TokenRequest. Tokens are never logged.

use std::collections::BTreeMap;

use futures::{StreamExt, stream};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::apply::FIELD_MANAGER;
use super::status::{CONCURRENCY, retry_conflicts};
use super::{Client, Error};
use edpm_core::identity::{self, Access, Kind, Live, NodeSet};
use edpm_core::readiness::{api, names};

/// What one reconciliation did: objects by `kind namespace/name`, never a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    pub nodeset: String,
    pub applied: Vec<String>,
    pub deleted: Vec<String>,
    /// The nodes given a new token.
    pub minted: Vec<String>,
    /// Nodes whose entry left the Secret.
    pub dropped: Vec<String>,
    pub unchanged: usize,
    /// The credentials Secret, and whether it was written.
    pub secret: String,
    pub secret_written: bool,
}

fn resource(kind: Kind) -> ApiResource {
    let (group, version, plural) = match kind {
        Kind::ServiceAccount => ("", "v1", "serviceaccounts"),
        Kind::Role => ("rbac.authorization.k8s.io", "v1", "roles"),
        Kind::RoleBinding => ("rbac.authorization.k8s.io", "v1", "rolebindings"),
        // Those edpm-agent also reads, as the one table of kinds names them.
        Kind::Secret => return super::read::resource(super::read::named("Secret")),
        Kind::Lease => return super::read::resource(super::read::named("Lease")),
        Kind::NodeStatus => return super::read::resource(super::read::named(api::NODE_KIND)),
    };
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
        kind: kind.name().into(),
        plural: plural.into(),
    }
}

fn api_of(client: &Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.kube(), namespace, &resource(kind))
}

/// The objects of `kind` in `namespace` that `selector` finds.
async fn list(client: &Client, kind: Kind, namespace: &str, selector: &str) -> Result<Vec<Live>, Error> {
    let action = format!("listing {}s labelled {selector} in namespace {namespace}", kind.name());
    let list = client
        .within_time(api_of(client, kind, namespace).list(&ListParams::default().labels(selector)))
        .await
        .map_err(|e| client.error(action, &e))?;
    let ar = resource(kind);
    Ok(list
        .items
        .into_iter()
        .map(|o| {
            let mut body = serde_json::to_value(&o).unwrap_or(Value::Null);
            // A list's items carry no apiVersion and kind: they are the list's.
            body["apiVersion"] = Value::String(ar.api_version.clone());
            body["kind"] = Value::String(ar.kind.clone());
            Live {
                kind,
                namespace: namespace.to_string(),
                name: o.metadata.name.clone().unwrap_or_default(),
                body,
            }
        })
        .collect())
}

/// Everything of the NodeSet's identities that exists now (the Secret apart).
async fn live(client: &Client, set: &NodeSet) -> Result<Vec<Live>, Error> {
    let ours = identity::selector(&set.name, identity::IDENTITY);
    let nodeset = format!("{}={}", api::NODESET_LABEL, names::label_value(&set.name));
    let (ns, leases) = (set.namespace.as_str(), set.lease_namespace.as_str());
    let mut all = Vec::new();
    for (kind, namespace, selector) in [
        (Kind::ServiceAccount, ns, &ours),
        (Kind::Role, ns, &ours),
        (Kind::RoleBinding, ns, &ours),
        (Kind::Role, leases, &ours),
        (Kind::RoleBinding, leases, &ours),
        (Kind::NodeStatus, ns, &nodeset),
        (Kind::Lease, leases, &nodeset),
    ] {
        all.extend(list(client, kind, namespace, selector).await?);
    }
    Ok(all)
}

/// Applies `body` as `kind namespace/name` under our field manager: the object as applied.
async fn apply(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    body: &Value,
) -> Result<Value, Error> {
    let api = api_of(client, kind, namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let action = format!("applying {} {name} in namespace {namespace}", kind.name());
    let patch = Patch::Apply(body);
    let mut requests = 0;
    let o = retry_conflicts(client, &action, || api.patch(name, &params, &patch), &mut requests)
        .await
        .map_err(|e| match e.code() {
            Some(404) => Error::Request {
                action: action.clone(),
                message: format!("namespace {namespace} (or the {} CRD) does not exist", kind.name()),
                hint: "; create the namespace (or install packaging/kubernetes/crds.yaml), or name another with --namespace / --lease-namespace".into(),
                code: Some(404),
            },
            _ => e,
        })?;
    Ok(serde_json::to_value(&o).unwrap_or(Value::Null))
}

async fn delete(client: &Client, kind: Kind, namespace: &str, name: &str) -> Result<(), Error> {
    let action =
        format!("deleting {} {name} in namespace {namespace} (its node left the NodeSet)", kind.name());
    match client.within_time(api_of(client, kind, namespace).delete(name, &DeleteParams::default())).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(client.error(action, &e)),
    }
}

/// A bound token of ServiceAccount `namespace/name`, valid `seconds`.
pub async fn token(client: &Client, namespace: &str, name: &str, seconds: i64) -> Result<String, Error> {
    let api: Api<ServiceAccount> = Api::namespaced(client.kube(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(seconds), ..Default::default() }),
        ..Default::default()
    };
    let action =
        format!("requesting a token for ServiceAccount {name} in namespace {namespace} (TokenRequest)");
    let answer = client
        .within_time(api.create_token_request(name, &PostParams::default(), &request))
        .await
        .map_err(|e| client.error(action.clone(), &e))?;
    answer.status.and_then(|s| s.token).filter(|t| !t.is_empty()).ok_or_else(|| Error::Request {
        action,
        message: "the API server answered without a token".into(),
        hint: String::new(),
        code: None,
    })
}

/// Makes the NodeSet's identities what they should be: `access` is what each node's
/// kubeconfig points at, `lifetime` the seconds each new token lives, `now` unix seconds.
pub async fn reconcile(
    client: &Client,
    set: &NodeSet,
    access: &Access,
    lifetime: i64,
    now: i64,
) -> Result<Outcome, Error> {
    let invalid = |e: identity::IdentityError| Error::Request {
        action: format!("making the node agents' identities of NodeSet {}", set.name),
        message: e.to_string(),
        hint: String::new(),
        code: None,
    };
    let want = identity::objects(set).map_err(invalid)?;
    let have = live(client, set).await?;
    let plan = identity::plan(want, &have);
    let mut out = Outcome { nodeset: set.name.clone(), unchanged: plan.unchanged, ..Outcome::default() };
    // Each node's ServiceAccount uid as it is now: a token names the account it was made for.
    let mut uids: BTreeMap<String, String> = have
        .iter()
        .filter(|l| l.kind == Kind::ServiceAccount)
        .filter_map(|l| Some((l.name.clone(), l.body["metadata"]["uid"].as_str()?.to_string())))
        .collect();
    // CONCURRENCY at a time, the RoleBindings after the Roles they name.
    let (bindings, first): (Vec<_>, Vec<_>) = plan.apply.iter().partition(|o| o.kind == Kind::RoleBinding);
    for wave in [first, bindings] {
        let applied: Vec<Result<(&identity::Object, Value), Error>> =
            stream::iter(wave)
                .map(|o| async move {
                    apply(client, o.kind, &o.namespace, &o.name, &o.body).await.map(|v| (o, v))
                })
                .buffered(CONCURRENCY)
                .collect()
                .await;
        for r in applied {
            let (o, body) = r?;
            if o.kind == Kind::ServiceAccount
                && let Some(uid) = body["metadata"]["uid"].as_str()
            {
                uids.insert(o.name.clone(), uid.to_string());
            }
            out.applied.push(format!("{} {}/{}", o.kind.name(), o.namespace, o.name));
        }
    }
    // In order: RoleBindings, Roles, then the ServiceAccount, whose tokens die with it.
    for (kind, namespace, name) in &plan.delete {
        delete(client, *kind, namespace, name).await?;
        out.deleted.push(format!("{} {namespace}/{name}", kind.name()));
    }
    credentials(client, set, access, lifetime, now, &uids, &mut out).await.map_err(|e| match e {
        Failed::Api(e) => e,
        Failed::Invalid(e) => invalid(e),
    })?;
    Ok(out)
}

enum Failed {
    Api(Error),
    Invalid(identity::IdentityError),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed::Api(e)
    }
}

/// The credentials Secret: tokens minted where needed, entries of departed nodes dropped,
/// written only when one of those happened or its labels are not ours.
async fn credentials(
    client: &Client,
    set: &NodeSet,
    access: &Access,
    lifetime: i64,
    now: i64,
    uids: &BTreeMap<String, String>,
    out: &mut Outcome,
) -> Result<(), Failed> {
    let name = identity::secret_name(&set.name);
    out.secret = format!("Secret {}/{name}", set.namespace);
    let action = format!("reading Secret {name} in namespace {}", set.namespace);
    let secrets = api_of(client, Kind::Secret, &set.namespace);
    let existing = match client.within_time(secrets.get(&name)).await {
        Ok(s) => Some(serde_json::to_value(&s).unwrap_or(Value::Null)),
        Err(kube::Error::Api(s)) if s.code == 404 => None,
        Err(e) => return Err(client.error(action, &e).into()),
    };
    let entries = existing.as_ref().map(|s| identity::decode_entries(&s["data"])).unwrap_or_default();
    let accounts: BTreeMap<String, String> = set
        .nodes
        .iter()
        .filter_map(|n| {
            let uid = uids.get(&identity::account(&names::node_object(&set.name, &n.key)))?;
            Some((n.key.clone(), uid.clone()))
        })
        .collect();
    let plan = identity::credentials(set, &entries, &accounts, now);
    let mut next: BTreeMap<String, String> =
        entries.into_iter().filter(|(k, _)| plan.keep.contains(k)).collect();
    let minted: Vec<Result<(String, String), Error>> = stream::iter(&plan.mint)
        .map(|n| async move {
            let sa = identity::account(&names::node_object(&set.name, &n.key));
            let token = token(client, &set.namespace, &sa, lifetime).await?;
            Ok((n.key.clone(), identity::kubeconfig(access, &n.key, &token)))
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    for r in minted {
        let (node, kubeconfig) = r?;
        out.minted.push(node.clone());
        next.insert(node, kubeconfig);
    }
    out.dropped = plan.drop;
    let secret = identity::secret(set, &next, access.ca_pem.as_deref()).map_err(Failed::Invalid)?;
    // Its labels ours, and the CA bundle the one given now (or none).
    let same = existing.as_ref().is_some_and(|e| {
        identity::says(&e["metadata"], &secret.body["metadata"])
            && e["data"].get(identity::CA_KEY) == secret.body["data"].get(identity::CA_KEY)
    });
    if out.minted.is_empty() && out.dropped.is_empty() && same {
        return Ok(());
    }
    apply(client, Kind::Secret, &set.namespace, &name, &secret.body).await?;
    out.secret_written = true;
    Ok(())
}
