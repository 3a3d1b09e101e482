//! A fake Keystone v3 + Nova compute API on loopback, for the Nova client (issue 20) and its
//! benchmark. It enforces what the client relies on:
//! - `POST /v3/auth/tokens`: password authentication (user name, user domain name, password,
//!   and a project scope by name + domain name) or an application credential; 201 with a fresh
//!   token in `X-Subject-Token` (`tok-1`, `tok-2`, …), `token.expires_at` = the fake's clock +
//!   the token lifetime, and a catalog whose `compute` service has an `internal` endpoint in
//!   `regionOne` pointing back here, a `public` one and one in another region that cannot be
//!   reached (so a client that picks the wrong one fails); 401 for wrong credentials;
//! - `GET /compute/v2.1/os-services[?binary=…&host=…]` and
//!   `GET /compute/v2.1/os-hypervisors/detail[?limit=N&marker=ID]` from a programmable state,
//!   paged as Nova pages (`limit` capped by the page size; a `hypervisors_links` `next` href,
//!   absolute, carrying `marker`, whenever a page is exactly full; 400 for an unknown marker);
//!   401 unless `X-Auth-Token` is a current token (issued, not revoked, not expired by the
//!   fake's clock);
//! - faults per path prefix for a number of requests: an HTTP status, or a delay before the
//!   normal answer (to exceed a client's timeout);
//! - a record of every request: `"METHOD target"` plus the `OpenStack-API-Version` header as
//!   `service=version` (`"GET /compute/v2.1/os-services?binary=nova-compute compute=2.69"`),
//!   the raw requests (head and body) and counters per API.
//!
//! One thread per connection, one request per connection (`Connection: close`), like
//! `tests/util/fake_openstack.rs`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

pub const USER: &str = "nova";
pub const DOMAIN: &str = "Default";
pub const PROJECT: &str = "service";
pub const PASSWORD: &str = "nova-service-password-42";
pub const APP_ID: &str = "nova-app-credential-id";
pub const APP_SECRET: &str = "nova-app-credential-secret-42";
pub const REGION: &str = "regionOne";
/// Keystone's default `[token] expiration`.
pub const DEFAULT_LIFETIME: i64 = 3600;
/// Nova's default `[api] max_limit`.
pub const DEFAULT_PAGE_SIZE: usize = 1000;

/// What a request on a path prefix gets instead of (or before) its answer.
#[derive(Debug, Clone)]
enum Fault {
    Status(u16),
    Delay(Duration),
}

struct State {
    services: Vec<Value>,
    hypervisors: Vec<Value>,
    page_size: usize,
    lifetime: i64,
    /// The fake's clock (Unix seconds); `None`: the system clock.
    clock: Option<i64>,
    /// Issued tokens and when each expires.
    tokens: Vec<(String, i64)>,
    issued: u64,
    faults: Vec<(String, Fault, usize)>,
    requests: Vec<String>,
    /// Every request as received: the head (request line, headers) and the body.
    raw: Vec<String>,
    bodies: Vec<(String, String)>,
    keystone: u64,
    compute: u64,
    /// What the next-page links start with instead of this server's own compute URL.
    link_prefix: Option<String>,
    /// `http` or `https`: the scheme of the URLs the catalog and the links give.
    scheme: &'static str,
}

impl State {
    fn now(&self) -> i64 {
        self.clock
            .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64))
    }
}

pub struct FakeNova {
    pub addr: SocketAddr,
    scheme: &'static str,
    state: Arc<Mutex<State>>,
}

impl FakeNova {
    pub fn start() -> FakeNova {
        FakeNova::start_with(None)
    }

    /// Over TLS with this certificate chain and key (PEM): `tests/fixtures/tls/` has a test CA
    /// (`ca.pem`) and a certificate for 127.0.0.1 it signed (`server.pem`, `server.key`).
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> FakeNova {
        FakeNova::start_with(Some((cert_pem, key_pem)))
    }

    fn start_with(tls: Option<(&str, &str)>) -> FakeNova {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let state = Arc::new(Mutex::new(State {
            services: Vec::new(),
            hypervisors: Vec::new(),
            page_size: DEFAULT_PAGE_SIZE,
            lifetime: DEFAULT_LIFETIME,
            clock: None,
            tokens: Vec::new(),
            issued: 0,
            faults: Vec::new(),
            requests: Vec::new(),
            raw: Vec::new(),
            bodies: Vec::new(),
            keystone: 0,
            compute: 0,
            link_prefix: None,
            scheme,
        }));
        let s = state.clone();
        let handle = move |req: &crate::http::Request, addr| serve(req, addr, &s);
        let addr = match tls {
            None => crate::http::serve(handle),
            Some((cert, key)) => crate::http::serve_tls(cert, key, handle),
        };
        FakeNova { addr, scheme, state }
    }

    /// Keystone's URL as a NovaCell's `keystoneAuthURL` gives it (without `/v3`).
    pub fn auth_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The compute endpoint the catalog offers as `internal` in [`REGION`].
    pub fn compute_url(&self) -> String {
        format!("{}://{}/compute/v2.1", self.scheme, self.addr)
    }

    pub fn set_services(&self, services: Vec<Value>) {
        self.state.lock().unwrap().services = services;
    }

    pub fn set_hypervisors(&self, hypervisors: Vec<Value>) {
        self.state.lock().unwrap().hypervisors = hypervisors;
    }

    /// Next-page links as a Nova behind a proxy writes them (`https://nova-public.example/v2.1`):
    /// a client must follow them on its catalog endpoint, not send its token there.
    pub fn set_link_prefix(&self, prefix: &str) {
        self.state.lock().unwrap().link_prefix = Some(prefix.to_string());
    }

    /// Nova's `[api] max_limit`: the most hypervisors on one page.
    pub fn set_page_size(&self, size: usize) {
        self.state.lock().unwrap().page_size = size;
    }

    /// How long tokens issued from now on live, in seconds.
    pub fn set_token_lifetime(&self, seconds: i64) {
        self.state.lock().unwrap().lifetime = seconds;
    }

    /// Fixes the fake's clock (Unix seconds), used for `expires_at` and for expiring tokens;
    /// by default it is the system clock.
    pub fn set_clock(&self, unix: i64) {
        self.state.lock().unwrap().clock = Some(unix);
    }

    /// Every token issued so far stops being accepted (compute answers 401).
    pub fn revoke_tokens(&self) {
        self.state.lock().unwrap().tokens.clear();
    }

    /// The next `count` requests whose target starts with `path_prefix` answer `status`.
    pub fn fail_next(&self, path_prefix: &str, status: u16, count: usize) {
        self.state.lock().unwrap().faults.push((path_prefix.to_string(), Fault::Status(status), count));
    }

    /// The next `count` requests whose target starts with `path_prefix` wait `delay` before
    /// their normal answer.
    pub fn delay_next(&self, path_prefix: &str, delay: Duration, count: usize) {
        self.state.lock().unwrap().faults.push((path_prefix.to_string(), Fault::Delay(delay), count));
    }

    /// Every request, in order: `"POST /v3/auth/tokens"`,
    /// `"GET /compute/v2.1/os-services?binary=nova-compute compute=2.69"`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Every request's body, beside its line in [`FakeNova::requests`].
    pub fn bodies(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().bodies.clone()
    }

    /// Every request as received (request line, headers, body), in order.
    pub fn raw_requests(&self) -> Vec<String> {
        self.state.lock().unwrap().raw.clone()
    }

    pub fn keystone_requests(&self) -> u64 {
        self.state.lock().unwrap().keystone
    }

    pub fn compute_requests(&self) -> u64 {
        self.state.lock().unwrap().compute
    }
}

/// A nova-compute row as `GET /os-services` gives it at microversion 2.69 (state `up`/`down`,
/// status `enabled`/`disabled`).
pub fn service(id: &str, host: &str, state: &str, status: &str) -> Value {
    json!({"id": id, "binary": "nova-compute", "host": host, "zone": "nova", "state": state,
           "status": status, "disabled_reason": null, "updated_at": "2026-11-26T19:00:00.000000",
           "forced_down": false})
}

/// A hypervisor as `GET /os-hypervisors/detail` gives it at microversion 2.53, belonging to
/// the service `service_id` on `service_host`.
pub fn hypervisor(id: &str, hostname: &str, service_id: &str, service_host: &str) -> Value {
    json!({"id": id, "hypervisor_hostname": hostname, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
           "host_ip": "192.168.122.100", "state": "up", "status": "enabled",
           "service": {"id": service_id, "host": service_host, "disabled_reason": null},
           "vcpus": 8, "memory_mb": 15740, "local_gb": 40, "vcpus_used": 0, "memory_mb_used": 512,
           "local_gb_used": 0, "free_ram_mb": 15228, "free_disk_gb": 40, "current_workload": 0,
           "running_vms": 0, "disk_available_least": 38, "cpu_info": {"arch": "x86_64"}})
}

/// `2026-11-26T20:00:00.000000Z` for a Unix time, as Keystone writes `expires_at`.
pub fn iso8601(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000000Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

fn serve(req: &crate::http::Request, addr: SocketAddr, state: &Mutex<State>) -> (u16, String, Value) {
    let (method, target, body) = (&req.method, &req.target, &req.body);
    let logged = match req.header("OpenStack-API-Version") {
        Some(v) => format!("{method} {target} {}", v.replacen(' ', "=", 1)),
        None => format!("{method} {target}"),
    };
    let fault = {
        let mut s = state.lock().unwrap();
        s.requests.push(logged.clone());
        s.raw.push(format!("{}\r\n{}\r\n\r\n{body}", req.line, req.headers.join("\r\n")));
        s.bodies.push((logged, body.clone()));
        if target.starts_with("/v3") {
            s.keystone += 1;
        } else if target.starts_with("/compute") {
            s.compute += 1;
        }
        let hit = s.faults.iter_mut().find(|(prefix, _, n)| *n > 0 && target.starts_with(prefix.as_str()));
        hit.map(|(_, f, n)| {
            *n -= 1;
            f.clone()
        })
    };
    match fault {
        Some(Fault::Status(code)) => (
            code,
            String::new(),
            json!({"computeFault": {"code": code, "message": format!("injected fault {code}")}}),
        ),
        Some(Fault::Delay(d)) => {
            std::thread::sleep(d);
            answer(method, target, body, req.header("X-Auth-Token"), addr, state)
        }
        None => answer(method, target, body, req.header("X-Auth-Token"), addr, state),
    }
}

fn unauthorized() -> (u16, String, Value) {
    (
        401,
        "WWW-Authenticate: Keystone uri=\"http://keystone\"\r\n".into(),
        json!({"error": {"code": 401, "title": "Unauthorized",
                         "message": "The request you have made requires authentication."}}),
    )
}

fn answer(
    method: &str,
    target: &str,
    body: &str,
    token: Option<String>,
    addr: SocketAddr,
    state: &Mutex<State>,
) -> (u16, String, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let params: Vec<(&str, &str)> =
        query.split('&').filter(|p| !p.is_empty()).map(|p| p.split_once('=').unwrap_or((p, ""))).collect();
    let param = |k: &str| params.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let mut s = state.lock().unwrap();
    match (method, path) {
        ("POST", "/v3/auth/tokens") => {
            let req: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let identity = &req["auth"]["identity"];
            let password = &identity["password"]["user"];
            let project = &req["auth"]["scope"]["project"];
            let by_password = identity["methods"] == json!(["password"])
                && password["name"] == USER
                && password["domain"]["name"] == DOMAIN
                && password["password"] == PASSWORD
                && project["name"] == PROJECT
                && project["domain"]["name"] == DOMAIN;
            let cred = &identity["application_credential"];
            let by_credential = identity["methods"] == json!(["application_credential"])
                && cred["id"] == APP_ID
                && cred["secret"] == APP_SECRET;
            if !(by_password || by_credential) {
                return unauthorized();
            }
            s.issued += 1;
            let token = format!("tok-{}", s.issued);
            let now = s.now();
            let expires = now + s.lifetime;
            s.tokens.push((token.clone(), expires));
            let method = if by_password { "password" } else { "application_credential" };
            let scheme = s.scheme;
            let body = json!({"token": {
                "methods": [method],
                "issued_at": iso8601(now),
                "expires_at": iso8601(expires),
                "user": {"id": "u-nova", "name": USER, "domain": {"id": "default", "name": DOMAIN}},
                "project": {"id": "p-service", "name": PROJECT, "domain": {"id": "default", "name": DOMAIN}},
                "roles": [{"id": "r-admin", "name": "admin"}, {"id": "r-service", "name": "service"}],
                "catalog": [
                    {"type": "identity", "name": "keystone", "id": "s-keystone", "endpoints": [
                        {"interface": "internal", "region_id": REGION, "region": REGION, "url": format!("{scheme}://{addr}/v3"), "id": "e-1"}]},
                    {"type": "compute", "name": "nova", "id": "s-nova", "endpoints": [
                        {"interface": "public", "region_id": REGION, "region": REGION,
                         "url": "http://nova-public.invalid:8774/v2.1", "id": "e-2"},
                        {"interface": "internal", "region_id": "regionTwo", "region": "regionTwo",
                         "url": "http://nova-internal.region-two.invalid:8774/v2.1", "id": "e-3"},
                        {"interface": "internal", "region_id": REGION, "region": REGION,
                         "url": format!("{scheme}://{addr}/compute/v2.1"), "id": "e-4"}]}]}});
            (201, format!("X-Subject-Token: {token}\r\n"), body)
        }
        ("GET", p) if p.starts_with("/compute/") => {
            let now = s.now();
            let current = token.is_some_and(|t| s.tokens.iter().any(|(k, exp)| *k == t && now < *exp));
            if !current {
                return unauthorized();
            }
            match p {
                "/compute/v2.1/os-services" => {
                    let rows: Vec<Value> = s
                        .services
                        .iter()
                        .filter(|r| param("binary").is_none_or(|b| r["binary"] == b))
                        .filter(|r| param("host").is_none_or(|h| r["host"] == h))
                        .cloned()
                        .map(|mut r| {
                            // Every compute heartbeats: the row's time moves at each answer.
                            if r.get("updated_at").is_some_and(|t| !t.is_null()) {
                                r["updated_at"] = json!(iso8601(now).trim_end_matches('Z'));
                            }
                            r
                        })
                        .collect();
                    (200, String::new(), json!({"services": rows}))
                }
                "/compute/v2.1/os-hypervisors/detail" => {
                    let limit =
                        param("limit").and_then(|l| l.parse().ok()).unwrap_or(s.page_size).min(s.page_size);
                    let start = match param("marker") {
                        None => 0,
                        Some(m) => match s.hypervisors.iter().position(|h| h["id"] == m) {
                            Some(i) => i + 1,
                            None => {
                                return (
                                    400,
                                    String::new(),
                                    json!({"badRequest": {"code": 400, "message": format!("marker [{m}] not found")}}),
                                );
                            }
                        },
                    };
                    let page: Vec<Value> = s.hypervisors.iter().skip(start).take(limit).cloned().collect();
                    let mut out = json!({"hypervisors": page});
                    // Nova links the next page whenever this one is exactly full, keeping the
                    // request's own parameters (an explicit limit) and setting the marker.
                    if limit > 0 && page.len() == limit {
                        let last = page[limit - 1]["id"].as_str().unwrap_or_default().to_string();
                        let prefix = s
                            .link_prefix
                            .clone()
                            .unwrap_or_else(|| format!("{}://{addr}/compute/v2.1", s.scheme));
                        let mut next = format!("{prefix}/os-hypervisors/detail?");
                        if let Some(l) = param("limit") {
                            next.push_str(&format!("limit={l}&"));
                        }
                        next.push_str(&format!("marker={last}"));
                        out["hypervisors_links"] = json!([{"rel": "next", "href": next}]);
                    }
                    (200, String::new(), out)
                }
                _ => (404, String::new(), json!({"itemNotFound": {"code": 404, "message": "not found"}})),
            }
        }
        _ => (404, String::new(), json!({"error": {"code": 404, "message": "not found"}})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_writes_keystone_times() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(iso8601(1_795_723_200), "2026-11-26T20:00:00.000000Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00.000000Z");
    }
}
