//! A fake Keystone + Manila on loopback: application-credential authentication (401 for wrong
//! credentials), a catalog with a sharev2 endpoint, a share's export locations and a cephx
//! access rule, each requiring the issued token; unknown IDs answer 404.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub const TOKEN: &str = "tok-123";
pub const APP_ID: &str = "app-id";
pub const APP_SECRET: &str = "app-secret";
pub const SHARE: &str = "share-1";
pub const ACCESS: &str = "access-1";
pub const EXPORT: &str = "192.0.2.11:6789,192.0.2.12:6789:/volumes/_nogroup/share-1";
pub const KEY: &str = "AQDfakeManilaCephxKey==";
/// A share whose export locations answer with 5 MiB: a server that is not answering.
pub const HUGE_SHARE: &str = "share-huge";

pub struct FakeOpenStack {
    pub addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeOpenStack {
    pub fn start() -> FakeOpenStack {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let r = requests.clone();
        let addr = edpm_testkit::http::serve(move |req, addr| answer(req, addr, &r));
        FakeOpenStack { addr, requests }
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(
    req: &edpm_testkit::http::Request,
    addr: std::net::SocketAddr,
    requests: &Mutex<Vec<String>>,
) -> (u16, String, Value) {
    let (method, path) = (req.method.as_str(), req.target.as_str());
    requests.lock().unwrap().push(format!(
        "{method} {path} microversion={}",
        req.header("X-OpenStack-Manila-API-Version").unwrap_or_default()
    ));
    let authorized = req.header("X-Auth-Token").as_deref() == Some(TOKEN);
    match (method, path) {
        ("POST", "/v3/auth/tokens") => {
            let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
            let cred = &body["auth"]["identity"]["application_credential"];
            if cred["id"] == APP_ID && cred["secret"] == APP_SECRET {
                let catalog = json!({"token": {"catalog": [{"type": "sharev2", "endpoints": [
                    {"interface": "public", "region_id": "regionOne", "url": "http://public.invalid/v2"},
                    {"interface": "internal", "region_id": "regionOne", "url": format!("http://{addr}/manila/v2")}]}]}});
                (201, "X-Subject-Token: tok-123\r\n".into(), catalog)
            } else {
                (
                    401,
                    String::new(),
                    json!({"error": {"code": 401, "message": "The request you have made requires authentication."}}),
                )
            }
        }
        ("GET", _) if !authorized => (401, String::new(), json!({"error": "no token"})),
        ("GET", p) if p == format!("/manila/v2/shares/{SHARE}/export_locations") => (
            200,
            String::new(),
            json!({"export_locations": [{"path": "192.0.2.99:6789:/volumes/_nogroup/other", "preferred": false}, {"path": EXPORT, "preferred": true}]}),
        ),
        ("GET", p) if p == format!("/manila/v2/shares/{HUGE_SHARE}/export_locations") => (
            200,
            String::new(),
            json!({"export_locations": [{"path": "x".repeat(5 << 20), "preferred": true}]}),
        ),
        ("GET", p) if p == format!("/manila/v2/share-access-rules/{ACCESS}") => (
            200,
            String::new(),
            json!({"access": {"access_to": "edpm", "access_key": KEY, "access_type": "cephx", "state": "active"}}),
        ),
        _ => (404, String::new(), json!({"itemNotFound": {"code": 404}})),
    }
}
