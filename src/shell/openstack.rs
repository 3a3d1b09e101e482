//! A small OpenStack client: Keystone (application credential or password) and Manila, for
//! resolving a Manila CSI volume to the CephFS export and cephx access key a node mounts
//! (seed 002). Shell code: network I/O with a timeout; response parsing is in pure functions.

use std::time::Duration;

use serde_json::{Value, json};

use crate::staging::units::{Credentials, CsiShare, ResolvedShare};

/// Manila microversion with share access rules by ID (2.45) and export location `preferred`.
const MANILA_MICROVERSION: &str = "2.51";

#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenStackError {
    #[error("{step}: {message}{hint}")]
    Api { step: String, message: String, hint: String },
}

pub(crate) struct Client {
    http: reqwest::blocking::Client,
}

impl Client {
    pub(crate) fn new(timeout: Duration) -> Result<Client, OpenStackError> {
        // kube already brings rustls with ring; make it the process default once.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::blocking::Client::builder().timeout(timeout).build().map_err(|e| {
            OpenStackError::Api {
                step: "building the HTTP client".into(),
                message: e.to_string(),
                hint: String::new(),
            }
        })?;
        Ok(Client { http })
    }

    /// Token, then the share's preferred export location and the access rule's cephx key.
    pub(crate) fn resolve(&self, share: &CsiShare) -> Result<ResolvedShare, OpenStackError> {
        let creds = &share.credentials;
        let auth = format!("{}/auth/tokens", keystone_v3(&creds.auth_url));
        let step = format!("volume {} (Manila share {}): Keystone {auth}", share.volume, share.share_id);
        let resp = self.http.post(&auth).json(&auth_body(creds)).send().map_err(|e| transport(&step, &e))?;
        let status = resp.status();
        let token = resp.headers().get("X-Subject-Token").and_then(|v| v.to_str().ok()).map(str::to_string);
        let body: Value = resp.json().unwrap_or(Value::Null);
        if !status.is_success() {
            let hint = if status.as_u16() == 401 {
                format!("; the credentials in Secret {} were rejected", share.secret)
            } else {
                String::new()
            };
            return Err(OpenStackError::Api { step, message: format!("HTTP {status}"), hint });
        }
        let token = token.ok_or_else(|| OpenStackError::Api {
            step: step.clone(),
            message: "no X-Subject-Token in the answer".into(),
            hint: String::new(),
        })?;
        let manila = manila_endpoint(&body, creds.region.as_deref()).ok_or_else(|| OpenStackError::Api {
            step: step.clone(),
            message: format!(
                "the service catalog has no sharev2 endpoint{}",
                creds.region.as_ref().map_or(String::new(), |r| format!(" in region {r}"))
            ),
            hint: "; check os-region in the Secret".into(),
        })?;
        let get = |path: &str, what: &str| -> Result<Value, OpenStackError> {
            let url = format!("{}/{path}", manila.trim_end_matches('/'));
            let step = format!("volume {} (Manila share {}): {what} {url}", share.volume, share.share_id);
            let resp = self
                .http
                .get(&url)
                .header("X-Auth-Token", &token)
                .header("X-OpenStack-Manila-API-Version", MANILA_MICROVERSION)
                .send()
                .map_err(|e| transport(&step, &e))?;
            let status = resp.status();
            if !status.is_success() {
                let hint = if status.as_u16() == 404 {
                    "; check shareID and shareAccessID in volumeAttributes"
                } else {
                    ""
                };
                return Err(OpenStackError::Api {
                    step,
                    message: format!("HTTP {status}"),
                    hint: hint.into(),
                });
            }
            resp.json().map_err(|e| OpenStackError::Api {
                step,
                message: format!("invalid JSON: {e}"),
                hint: String::new(),
            })
        };
        let exports = get(&format!("shares/{}/export_locations", share.share_id), "export locations")?;
        let access = get(&format!("share-access-rules/{}", share.access_id), "access rule")?;
        parse_share(share, &exports, &access).map_err(|message| OpenStackError::Api {
            step: format!("volume {} (Manila share {})", share.volume, share.share_id),
            message,
            hint: String::new(),
        })
    }
}

fn transport(step: &str, e: &reqwest::Error) -> OpenStackError {
    let kind = if e.is_timeout() { "no answer in time" } else { "cannot connect" };
    OpenStackError::Api {
        step: step.into(),
        message: format!("{kind}: {e}"),
        hint: "; check os-authURL and that the API is reachable from here".into(),
    }
}

/// The Keystone v3 base: `os-authURL` with or without `/v3`.
pub(crate) fn keystone_v3(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") { base.to_string() } else { format!("{base}/v3") }
}

pub(crate) fn auth_body(c: &Credentials) -> Value {
    match (&c.application_credential_id, &c.application_credential_secret) {
        (Some(id), Some(secret)) => json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"id": id, "secret": secret}}}}),
        _ => json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": c.user_name, "domain": {"name": c.domain_name.clone().unwrap_or_else(|| "Default".into())}, "password": c.password}}},
            "scope": {"project": {"id": c.project_id}}}}),
    }
}

/// The Manila v2 endpoint from a token's catalog: type `sharev2`, in the region when one is
/// given, `internal` before `public`.
pub(crate) fn manila_endpoint(token: &Value, region: Option<&str>) -> Option<String> {
    let catalog = token.pointer("/token/catalog")?.as_array()?;
    let service = catalog.iter().find(|s| s.get("type").and_then(Value::as_str) == Some("sharev2"))?;
    let endpoints: Vec<&Value> = service
        .get("endpoints")?
        .as_array()?
        .iter()
        .filter(|e| {
            region.is_none_or(|r| {
                e.get("region_id").or_else(|| e.get("region")).and_then(Value::as_str) == Some(r)
            })
        })
        .collect();
    ["internal", "public"].iter().find_map(|want| {
        endpoints
            .iter()
            .find(|e| e.get("interface").and_then(Value::as_str) == Some(want))
            .and_then(|e| e.get("url"))
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// The preferred export location (else the first) and an active cephx access rule.
pub(crate) fn parse_share(
    share: &CsiShare,
    exports: &Value,
    access: &Value,
) -> Result<ResolvedShare, String> {
    let locations = exports.get("export_locations").and_then(Value::as_array).cloned().unwrap_or_default();
    let chosen = locations
        .iter()
        .find(|l| l.get("preferred").and_then(Value::as_bool) == Some(true))
        .or(locations.first())
        .and_then(|l| l.get("path"))
        .and_then(Value::as_str)
        .ok_or("the share has no export location (is it available?)")?;
    let rule = access.get("access").ok_or("the access rule answer has no 'access' object")?;
    let field = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    if field("access_type") != "cephx" {
        return Err(format!(
            "access rule {} is of type {:?}, not cephx",
            share.access_id,
            field("access_type")
        ));
    }
    if field("state") != "active" {
        return Err(format!("access rule {} is {:?}, not active yet", share.access_id, field("state")));
    }
    let key = field("access_key");
    if key.is_empty() {
        return Err(format!("access rule {} carries no access_key", share.access_id));
    }
    Ok(ResolvedShare { export: chosen.to_string(), user: field("access_to"), key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_prefers_internal_in_region() {
        let t = json!({"token": {"catalog": [
            {"type": "identity", "endpoints": []},
            {"type": "sharev2", "endpoints": [
                {"interface": "public", "region_id": "regionOne", "url": "https://pub/v2"},
                {"interface": "internal", "region_id": "regionTwo", "url": "https://other/v2"},
                {"interface": "internal", "region_id": "regionOne", "url": "https://int/v2"}]}]}});
        assert_eq!(manila_endpoint(&t, Some("regionOne")).as_deref(), Some("https://int/v2"));
        assert_eq!(manila_endpoint(&t, Some("nowhere")), None);
        assert_eq!(keystone_v3("https://ks:5000"), "https://ks:5000/v3");
        assert_eq!(keystone_v3("https://ks:5000/v3/"), "https://ks:5000/v3");
    }
}
