//! A small OpenStack client: Keystone (application credential or password) and Manila, for
//! resolving a Manila CSI volume to the CephFS export and cephx access key a node mounts
//! (seed 002); and Nova (`nova`), asked whether each compute's service is up and its
//! hypervisor known (issue 20). Shell code: network I/O with a timeout; response parsing is in
//! pure functions.

pub mod asker;
pub mod nova;

use std::time::Duration;

use serde_json::{Value, json};

use edpm_core::staging::units::{Credentials, CsiShare, ResolvedShare};

/// Manila microversion with share access rules by ID (2.45) and export location `preferred`.
const MANILA_MICROVERSION: &str = "2.51";

/// The most of an answer read from Keystone or Manila: a token with its service catalog, or
/// one share's export locations, is a few KiB; a server that sends more is not answering.
const MAX_ANSWER: u64 = 4 << 20;

/// The answer's body as JSON, read to at most [`MAX_ANSWER`] bytes.
fn read_json(resp: reqwest::blocking::Response, step: &str) -> Result<Value, OpenStackError> {
    use std::io::Read;
    let mut body = Vec::new();
    #[allow(clippy::disallowed_methods, reason = "bounded by take")]
    resp.take(MAX_ANSWER + 1).read_to_end(&mut body).map_err(|e| OpenStackError::Api {
        step: step.to_string(),
        message: format!("cannot read the answer: {e}"),
        hint: String::new(),
    })?;
    if body.len() as u64 > MAX_ANSWER {
        return Err(OpenStackError::Api {
            step: step.to_string(),
            message: format!("the answer is larger than {} MiB", MAX_ANSWER >> 20),
            hint: "; check that the URL is the OpenStack API's".into(),
        });
    }
    serde_json::from_slice(&body).map_err(|e| OpenStackError::Api {
        step: step.to_string(),
        message: format!("invalid JSON: {e}"),
        hint: String::new(),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum OpenStackError {
    #[error("{step}: {message}{hint}")]
    Api { step: String, message: String, hint: String },
}

pub struct Client {
    http: reqwest::blocking::Client,
}

impl Client {
    pub fn new(timeout: Duration) -> Result<Client, OpenStackError> {
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
    #[allow(
        clippy::too_many_lines,
        reason = "the three requests of one Manila lookup in order, each with its error naming the step"
    )]
    pub fn resolve(&self, share: &CsiShare) -> Result<ResolvedShare, OpenStackError> {
        let creds = &share.credentials;
        let auth = format!("{}/auth/tokens", keystone_v3(&creds.auth_url));
        let step = format!("volume {} (Manila share {}): Keystone {auth}", share.volume, share.share_id);
        let resp = self.http.post(&auth).json(&auth_body(creds)).send().map_err(|e| transport(&step, &e))?;
        let status = resp.status();
        let token = resp.headers().get("X-Subject-Token").and_then(|v| v.to_str().ok()).map(str::to_string);
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
        let body = read_json(resp, &step)?;
        let manila = catalog_endpoint(&body, "sharev2", creds.region.as_deref()).ok_or_else(|| {
            OpenStackError::Api {
                step: step.clone(),
                message: format!(
                    "the service catalog has no sharev2 endpoint{}",
                    creds.region.as_ref().map_or(String::new(), |r| format!(" in region {r}"))
                ),
                hint: "; check os-region in the Secret".into(),
            }
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
            read_json(resp, &step)
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
pub fn keystone_v3(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") { base.to_string() } else { format!("{base}/v3") }
}

/// The project a password login is scoped to: Manila's CSI Secrets name it by id, Nova's cell
/// users (nova-operator's `01-nova.conf`) by name in a domain.
pub enum Scope<'a> {
    ProjectId(Option<&'a str>),
    ProjectName { name: &'a str, domain: &'a str },
}

/// Keystone v3 password authentication: the user (in its domain) and the project scope.
pub fn password_body(user: Option<&str>, domain: &str, password: Option<&str>, scope: Scope<'_>) -> Value {
    let scope = match scope {
        Scope::ProjectId(id) => json!({"project": {"id": id}}),
        Scope::ProjectName { name, domain } => json!({"project": {"name": name, "domain": {"name": domain}}}),
    };
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": domain}, "password": password}}},
        "scope": scope}})
}

/// Keystone v3 application-credential authentication: the credential fixes the scope.
pub fn application_credential_body(id: &str, secret: &str) -> Value {
    json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"id": id, "secret": secret}}}})
}

pub fn auth_body(c: &Credentials) -> Value {
    match (&c.application_credential_id, &c.application_credential_secret) {
        (Some(id), Some(secret)) => application_credential_body(id, secret),
        _ => password_body(
            c.user_name.as_deref(),
            c.domain_name.as_deref().unwrap_or("Default"),
            c.password.as_deref(),
            Scope::ProjectId(c.project_id.as_deref()),
        ),
    }
}

/// An endpoint from a token's catalog: the service of this type, in the region when one is
/// given (`region_id`, else the older `region`), `internal` before `public` (a service's
/// internal endpoint is the one inside the control plane's network, as nova's own
/// `valid_interfaces = internal`).
pub fn catalog_endpoint(token: &Value, service_type: &str, region: Option<&str>) -> Option<String> {
    let catalog = token.pointer("/token/catalog")?.as_array()?;
    let service = catalog.iter().find(|s| s.get("type").and_then(Value::as_str) == Some(service_type))?;
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
pub fn parse_share(share: &CsiShare, exports: &Value, access: &Value) -> Result<ResolvedShare, String> {
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
        assert_eq!(catalog_endpoint(&t, "sharev2", Some("regionOne")).as_deref(), Some("https://int/v2"));
        assert_eq!(catalog_endpoint(&t, "sharev2", Some("nowhere")), None);
        assert_eq!(catalog_endpoint(&t, "compute", Some("regionOne")), None);
        // An endpoint with only the older `region` key, and a public one when no internal.
        let t = json!({"token": {"catalog": [{"type": "compute", "endpoints": [
            {"interface": "admin", "region": "regionOne", "url": "https://adm/v2.1"},
            {"interface": "public", "region": "regionOne", "url": "https://pub/v2.1"}]}]}});
        assert_eq!(catalog_endpoint(&t, "compute", Some("regionOne")).as_deref(), Some("https://pub/v2.1"));
        assert_eq!(keystone_v3("https://ks:5000"), "https://ks:5000/v3");
        assert_eq!(keystone_v3("https://ks:5000/v3/"), "https://ks:5000/v3");
    }

    #[test]
    fn password_logins_scope_by_project_id_or_by_name_in_a_domain() {
        let by_id = password_body(Some("u"), "Default", Some("pw"), Scope::ProjectId(Some("p1")));
        assert_eq!(by_id["auth"]["scope"], json!({"project": {"id": "p1"}}));
        let by_name = password_body(
            Some("nova"),
            "Default",
            Some("pw"),
            Scope::ProjectName { name: "service", domain: "Default" },
        );
        assert_eq!(
            by_name["auth"]["scope"],
            json!({"project": {"name": "service", "domain": {"name": "Default"}}})
        );
        assert_eq!(by_name["auth"]["identity"]["password"]["user"]["domain"]["name"], "Default");
        let ac = application_credential_body("id", "s");
        assert_eq!(ac["auth"]["identity"]["methods"], json!(["application_credential"]));
        assert!(ac["auth"].get("scope").is_none());
    }
}
