//! The status writer: server-side apply of edpm-agent's status objects under field manager
//! `edpm-agent`, only for what `readiness::report::plan` says changed.
//!
//! - An object that does not exist is created by an apply of its metadata and spec; its
//!   status then goes through the status subresource (the main endpoint ignores status).
//! - Status applies carry only the condition types edpm-agent owns, so in the
//!   `listType=map` condition list the node agent's entries (another field manager) stay.
//! - Writes run a few at a time, within one overall deadline; 409 Conflict (another writer
//!   won a race) is retried after a jittered backoff; 429/5xx/transport failures are retried
//!   below by the client's retry layer.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::apply::FIELD_MANAGER;
use super::{Client, Error};
use edpm_core::readiness::api;
use edpm_core::readiness::report::Write;

/// What a report did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: usize,
    /// Write requests sent (creations count two: object and status).
    pub requests: usize,
}

/// How many objects are written at once.
pub const CONCURRENCY: usize = 8;

fn resource(kind: &str) -> ApiResource {
    super::read::resource(super::read::named(kind))
}

/// Applies the writes that need it, `CONCURRENCY` at a time, all within `deadline`, each only
/// while `may_write` says so (a controller that may have lost its leadership stops).
#[allow(
    clippy::too_many_lines,
    reason = "the write loop: deadline, concurrency and the leadership check share the in-flight requests"
)]
pub async fn apply(
    client: &Client,
    writes: Vec<Write>,
    deadline: Duration,
    may_write: &dyn Fn() -> bool,
) -> Result<Outcome, Error> {
    let mut outcome = Outcome::default();
    let todo: Vec<Write> = writes
        .into_iter()
        .filter(|w| {
            let needed = w.needs_object || w.needs_status;
            if !needed {
                outcome.unchanged += 1;
            }
            needed
        })
        .collect();
    let total = todo.len();
    let names: Vec<String> = todo.iter().map(|w| format!("{} {}", w.kind, w.name)).collect();
    // Results are gathered as they come, so that a deadline passing mid-way still knows what
    // landed.
    let results = std::sync::Mutex::new(Vec::with_capacity(total));
    let run = futures::stream::iter(todo.into_iter().map(|w| {
        let label = format!("{} {}", w.kind, w.name);
        let results = &results;
        async move {
            let r = write_one(client, w, may_write).await;
            results.lock().unwrap_or_else(|e| e.into_inner()).push((label, r));
        }
    }))
    .buffer_unordered(CONCURRENCY)
    .collect::<Vec<()>>();
    let finished = tokio::time::timeout(deadline, run).await.is_ok();
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut first_error = None;
    let mut landed = std::collections::BTreeSet::new();
    for (label, r) in results {
        match r {
            Ok((name, created, requests)) => {
                outcome.requests += requests;
                landed.insert(label);
                if created { outcome.created.push(name) } else { outcome.updated.push(name) }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    outcome.created.sort();
    outcome.updated.sort();
    if finished && first_error.is_none() {
        return Ok(outcome);
    }
    // Some landed, some did not: say which, so nobody reads a partial write as none or all.
    let missing: Vec<&str> = names.iter().filter(|n| !landed.contains(*n)).map(String::as_str).collect();
    let shown = missing.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    let more = if missing.len() > 5 { format!(" and {} more", missing.len() - 5) } else { String::new() };
    let code = first_error.as_ref().and_then(Error::code);
    let why = match first_error {
        Some(e) => e.to_string(),
        None => format!("not finished within {deadline:?}"),
    };
    Err(Error::Request {
        action: "writing edpm-agent status objects".into(),
        message: format!(
            "{} of {total} written; not written: {shown}{more}; first failure: {why}",
            landed.len()
        ),
        hint: "; the next report sends the latest state of every object (it is recomputed from the evidence)"
            .into(),
        code,
    })
}

/// One object: (name, created, requests sent).
async fn write_one(
    client: &Client,
    w: Write,
    may_write: &dyn Fn() -> bool,
) -> Result<(String, bool, usize), Error> {
    if !may_write() {
        return Err(Error::Request {
            action: format!("applying {} {} in namespace {}", w.kind, w.name, client.namespace()),
            message: "this replica's leadership is not confirmed".into(),
            hint: "; not written: the leader writes it".into(),
            code: None,
        });
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.kube(), client.namespace(), &resource(w.kind));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut requests = 0;
    let mut generation = None;
    let object = w.object.to_value().map_err(|e| Error::Request {
        action: format!("encoding {} {}", w.kind, w.name),
        message: e.to_string(),
        hint: " (a bug: the status types always encode)".into(),
        code: None,
    })?;
    if w.needs_object {
        let mut body = object.clone();
        if let Some(m) = body.as_object_mut() {
            m.remove("status");
        }
        body["metadata"]["namespace"] = Value::String(client.namespace().to_string());
        let action = format!("applying {} {} in namespace {}", w.kind, w.name, client.namespace());
        let patch = Patch::Apply(&body);
        let applied =
            retry_conflicts(client, &action, || api.patch(&w.name, &params, &patch), &mut requests).await?;
        generation = applied.metadata.generation;
    }
    if w.needs_status || w.needs_object {
        let mut status = object["status"].clone();
        if let Some(g) = generation {
            status["observedGeneration"] = Value::from(g);
        }
        let body = serde_json::json!({
            "apiVersion": api::API_VERSION,
            "kind": w.kind,
            "metadata": {"name": w.name},
            "status": status,
        });
        let action =
            format!("applying the status of {} {} in namespace {}", w.kind, w.name, client.namespace());
        let patch = Patch::Apply(&body);
        retry_conflicts(client, &action, || api.patch_status(&w.name, &params, &patch), &mut requests)
            .await?;
    }
    Ok((w.name, w.needs_object, requests))
}

/// 409 Conflict: another writer got there first; wait a jittered moment and apply again
/// (bounded). Everything else the client's retry layer already handled.
pub(super) async fn retry_conflicts<T, F, Fut>(
    client: &Client,
    action: &str,
    mut f: F,
    requests: &mut usize,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(100);
    let mut attempt = 1;
    loop {
        *requests += 1;
        match client.within_time(f()).await {
            Ok(v) => return Ok(v),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 4 => {
                tracing::debug!(action, attempt, "409 Conflict, retrying");
                tokio::time::sleep(super::jitter(delay)).await;
                delay *= 2;
                attempt += 1;
            }
            Err(e) => return Err(client.error(action.to_string(), &e)),
        }
    }
}

/// Creates the Leases of nodes that have none, so that each node agent, which may only patch
/// its own Lease by name, can renew it (RBAC `resourceNames` cannot restrict create). Carries
/// labels only: the agent writes the spec. `leases`: (name, node, nodeset).
pub async fn ensure_leases(
    client: &Client,
    leases: Vec<(String, String, String)>,
    deadline: Duration,
) -> Result<usize, Error> {
    let ns = client.lease_namespace();
    if deadline.is_zero() {
        return Err(Error::Request {
            action: format!("creating {} node agent Lease(s) in namespace {ns}", leases.len()),
            message: "the command's --timeout ran out after the status objects were written".into(),
            hint: "; the next report creates them (or give a longer --timeout)".into(),
            code: None,
        });
    }
    let api: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.kube(), ns);
    let params = PatchParams::apply(FIELD_MANAGER);
    let count = leases.len();
    let one = |(name, node, nodeset): (String, String, String)| {
        let api = api.clone();
        let params = params.clone();
        async move {
            let (labels, annotations) = api::labels_and_annotations(&nodeset, Some(&node));
            let mut metadata = serde_json::json!({"name": name, "labels": labels});
            if !annotations.is_empty() {
                metadata["annotations"] = serde_json::json!(annotations);
            }
            let body = serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata});
            let action = format!("creating Lease {name} for its node agent in namespace {ns}");
            let patch = Patch::Apply(&body);
            let mut requests = 0;
            retry_conflicts(client, &action, || api.patch(&name, &params, &patch), &mut requests)
                .await
                .map(drop)
                // An apply creates what is missing: a 404 says the namespace itself is.
                .map_err(|e| match e.code() {
                    Some(404) => Error::Request {
                        action: action.clone(),
                        message: format!("namespace {ns} does not exist"),
                        hint: format!("; create it (kubectl create namespace {ns}; the kustomization in packaging/kubernetes does) or name the node agents' namespace with --lease-namespace"),
                        code: Some(404),
                    },
                    _ => e,
                })
        }
    };
    let run =
        futures::stream::iter(leases.into_iter().map(one)).buffer_unordered(CONCURRENCY).collect::<Vec<_>>();
    match tokio::time::timeout(deadline, run).await {
        Ok(results) => results.into_iter().collect::<Result<Vec<()>, Error>>().map(|_| count),
        Err(_) => Err(Error::Request {
            action: "creating node agent Leases".into(),
            message: format!("not finished within {deadline:?}"),
            hint: "; the next report creates the rest".into(),
            code: None,
        }),
    }
}
