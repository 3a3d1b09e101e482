//! The writers: server-side apply under edpm-agent's own field manager.
//!
//! NovaExternalComputes (seed 003): each apply carries the `resourceVersion` read just before,
//! so the cell-move check and the write see the same object; if it changed in between, the
//! API server answers 409 and we read, check and apply again (bounded).

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::{Client, Error};

/// The field manager of everything edpm-agent writes from the control plane side.
pub const FIELD_MANAGER: &str = "edpm-agent";

/// Applies the NovaExternalComputes; returns one `kubectl`-style line per object.
pub async fn novaexternalcomputes(client: &Client, objects: &[Value]) -> Result<Vec<String>, Error> {
    let ar = super::read::resource(super::read::named("NovaExternalCompute"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.kube(), client.namespace(), &ar);
    let mut results = Vec::new();
    for obj in objects {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        results.push(apply_one(client, &api, &name, obj).await?);
    }
    Ok(results)
}

async fn apply_one(
    client: &Client,
    api: &Api<DynamicObject>,
    name: &str,
    desired: &Value,
) -> Result<String, Error> {
    let ns = client.namespace();
    let params = PatchParams::apply(FIELD_MANAGER);
    for _ in 0..3 {
        let action = format!("reading novaexternalcompute {name} in namespace {ns}");
        // Never a name that is none into the request path.
        super::read::invalid_name(&action, name)?;
        let live = match client.within_time(api.get(name)).await {
            Ok(o) => Some(o),
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => return Err(client.error(action, &e)),
        };
        let mut patch = desired.clone();
        patch["metadata"]["namespace"] = Value::String(ns.to_string());
        // customServiceConfig belongs to the operator who wrote it: never part of our apply.
        if let Some(spec) = patch["spec"].as_object_mut() {
            spec.remove("customServiceConfig");
        }
        if let Some(live) = &live {
            let have = live.data.pointer("/spec/cellName").and_then(Value::as_str).unwrap_or_default();
            let want = desired["spec"]["cellName"].as_str().unwrap_or_default();
            if !have.is_empty() && have != want {
                return Err(Error::Request {
                    action: format!("applying novaexternalcompute {name}"),
                    message: format!("it is in cell \"{have}\" and the annotation now says \"{want}\""),
                    hint: "; nova cannot move a compute between cells: restore the annotation".into(),
                    code: None,
                });
            }
            if let Some(rv) = &live.metadata.resource_version {
                patch["metadata"]["resourceVersion"] = Value::String(rv.clone());
            }
        }
        let action = format!("applying novaexternalcompute {name} in namespace {ns}");
        let body = Patch::Apply(&patch);
        match client.within_time(api.patch(name, &params, &body)).await {
            Ok(_) => {
                return Ok(format!(
                    "novaexternalcompute/{name} {}",
                    if live.is_some() { "configured" } else { "created" }
                ));
            }
            // Changed since we read it: read, check and apply again.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(client.error(action, &e)),
        }
    }
    Err(Error::Request {
        action: format!("applying novaexternalcompute {name} in namespace {ns}"),
        message: "the object kept changing (409 Conflict three times)".into(),
        hint: "; another client is writing it: try again".into(),
        code: None,
    })
}
