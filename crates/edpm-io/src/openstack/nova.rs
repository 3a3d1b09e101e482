//! Asks Nova whether the computes are serving (issue 20; `docs/design/020-nova-compute-readiness.md`):
//! Keystone v3 login as each cell's service user, then the compute API's nova-compute services
//! (microversion 2.69) and every hypervisor page (2.53), parsed by `nova::answer`.
//!
//! Async (reqwest's async client): the controller runs a current-thread tokio runtime, where a
//! blocking client must be neither built nor dropped. The answer is always `NovaEvidence`: a
//! failure is `Unavailable` with a redacted message naming the step and what to check, so that
//! our own trouble shows as Unknown on the nodes, never as an error of the evaluation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

use super::{Scope, application_credential_body, catalog_endpoint, keystone_v3, password_body};
use edpm_core::condition::Time;
use edpm_core::nova::answer::{hypervisors, next_page, services};
use edpm_core::nova::{HYPERVISORS_MICROVERSION, Login, NovaAnswer, NovaEvidence, SERVICES_MICROVERSION};
use edpm_core::redact::Redactor;

/// The largest answer read: os-services is ≈250 B a compute (2.5 MB at 10,000), a hypervisor
/// page of Nova's default 1000 about as much; a server that sends more is not Nova.
const MAX_ANSWER: usize = 64 << 20;

/// The most hypervisor pages followed in one answer: 10,000 computes are 11 pages of Nova's
/// default `max_limit`; links that never end must not keep the poller forever.
const MAX_PAGES: usize = 1000;

/// A token is renewed this long before its `expires_at` (or 10 % of its lifetime, if shorter),
/// so that it never expires between the freshness check and the compute call.
const MARGIN_SECONDS: i64 = 60;

type LoginKey = (String, String, String, String, String);

/// A Keystone login's result: the token, the compute endpoint from its catalog, and until when
/// the token is used without logging in again.
#[derive(Clone)]
struct Session {
    token: String,
    endpoint: String,
    fresh_until: Time,
}

/// The Nova client: HTTP clients per CA bundle and tokens per login, kept between asks.
pub struct NovaClient {
    timeout: Duration,
    /// One HTTP client per CA bundle (`None`: the system roots). Building one parses the
    /// bundle and sets up TLS, and each keeps its own connection pool, so they are kept.
    http: Mutex<Vec<(Option<String>, reqwest::Client)>>,
    sessions: Mutex<Vec<(LoginKey, Session)>>,
    keystone: AtomicU64,
    compute: AtomicU64,
}

impl NovaClient {
    /// A client whose every request (connect, send, whole answer) gives up after `timeout`.
    pub fn new(timeout: Duration) -> NovaClient {
        // kube already brings rustls with ring; make it the process default once.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // HTTP clients are built on first use, for the CA bundle a login brings: a client
        // with the system roots cannot be built where there are none (the controller's
        // distroless image), and that must be an Unknown on the computes, not a controller
        // that does not start.
        NovaClient {
            timeout,
            http: Mutex::new(Vec::new()),
            sessions: Mutex::new(Vec::new()),
            keystone: AtomicU64::new(0),
            compute: AtomicU64::new(0),
        }
    }

    /// One answer from every login (normally one; logins that reach a compute endpoint
    /// already asked are not asked again): the nova-compute services and all hypervisor pages,
    /// merged. `now` is when it is asked (the answer's `observed_at`) and the time tokens are
    /// judged by. Any failure makes the whole answer `Unavailable`: a partial answer would
    /// read as "not registered" for the computes the failed login would have shown.
    pub async fn ask(&self, logins: &[Login], now: Time) -> NovaEvidence {
        if logins.is_empty() {
            return unavailable(
                "no NovaCell gives a login to ask Nova with; check the computes' nova.openstack.org/cell annotations"
                    .into(),
            );
        }
        let mut answer = NovaAnswer {
            source: String::new(),
            observed_at: Some(now),
            services: Vec::new(),
            hypervisors: None,
        };
        let mut asked: Vec<String> = Vec::new();
        for login in logins {
            match self.ask_one(login, now, &asked).await {
                Ok(None) => {}
                Ok(Some((endpoint, s, h))) => {
                    asked.push(endpoint);
                    answer.services.extend(s);
                    answer.hypervisors.get_or_insert_with(Vec::new).extend(h);
                }
                Err(message) => {
                    // What a server says is redacted where it is quoted (`echo`); the whole
                    // message passes the redactor too, for the URLs it names (an OS_AUTH_URL
                    // with a password in it) before it reaches a log line or a condition.
                    let message =
                        edpm_core::redact::scrub(&format!("{}{message}", cells(login))).into_owned();
                    tracing::debug!(%message, "Nova could not be asked");
                    return unavailable(message);
                }
            }
        }
        answer.source = format!(
            "Nova API {} (compute {SERVICES_MICROVERSION} services, {HYPERVISORS_MICROVERSION} hypervisors)",
            asked.join(", ")
        );
        NovaEvidence::Answer(answer)
    }

    /// Requests made so far: (Keystone, compute), for the benchmark.
    pub fn counts(&self) -> (u64, u64) {
        (self.keystone.load(Ordering::Relaxed), self.compute.load(Ordering::Relaxed))
    }

    /// One login's answer: its compute endpoint, services and hypervisors; `None` when that
    /// endpoint was already asked (several cells share one Nova API).
    async fn ask_one(
        &self,
        login: &Login,
        now: Time,
        asked: &[String],
    ) -> Result<
        Option<(String, Vec<edpm_core::nova::ComputeService>, Vec<edpm_core::nova::Hypervisor>)>,
        String,
    > {
        let http = self.http(login)?;
        let mut session = match self.cached(login, now) {
            Some(s) => s,
            None => self.login(&http, login, now).await?,
        };
        let endpoint = session.endpoint.trim_end_matches('/').to_string();
        if asked.contains(&endpoint) {
            return Ok(None);
        }
        let mut relogged = false;
        let mut call =
            Call { client: self, http: &http, login, now, session: &mut session, relogged: &mut relogged };
        let url = format!("{endpoint}/os-services?binary=nova-compute");
        let body = call.get(&url, SERVICES_MICROVERSION).await?;
        let found = services(&body).map_err(|e| unparsable(login, &call.session.token, &url, &e))?;
        let mut url = format!("{endpoint}/os-hypervisors/detail");
        let mut seen = vec![url.clone()];
        let mut all = Vec::new();
        loop {
            let page = call.get(&url, HYPERVISORS_MICROVERSION).await?;
            all.extend(hypervisors(&page).map_err(|e| unparsable(login, &call.session.token, &url, &e))?);
            let Some(link) = next_page(&page) else { break };
            // Only the link's query (`limit`, `marker`) is taken, on the catalog's endpoint:
            // Nova builds the href from its own idea of its URL (behind a TLS-terminating
            // proxy often `http://` or the public name), and the token must go nowhere else.
            let next = match link.split_once('?') {
                Some((_, query)) => format!("{endpoint}/os-hypervisors/detail?{query}"),
                None => String::new(),
            };
            if next.is_empty() || seen.contains(&next) || seen.len() >= MAX_PAGES {
                return Err(format!(
                    "Nova {url}: the hypervisor pages do not end (the next link {} has no query, repeats, or there are more than {MAX_PAGES} pages); check the Nova API's [api] max_limit",
                    echo(login, &call.session.token, link)
                ));
            }
            url = next;
            seen.push(url.clone());
        }
        Ok(Some((endpoint, found, all)))
    }

    /// The HTTP client for the login's CA bundle, built on first use.
    fn http(&self, login: &Login) -> Result<reqwest::Client, String> {
        let ca = login.ca_bundle.as_deref();
        let mut clients = self.http.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, c)) = clients.iter().find(|(k, _)| k.as_deref() == ca) {
            return Ok(c.clone());
        }
        let c = build_http(self.timeout, ca, login)?;
        clients.push((ca.map(str::to_string), c.clone()));
        Ok(c)
    }

    /// The login's token while it is fresh at `now`.
    fn cached(&self, login: &Login, now: Time) -> Option<Session> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.iter().find(|(k, s)| same(k, login) && now < s.fresh_until).map(|(_, s)| s.clone())
    }

    fn forget(&self, login: &Login) {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).retain(|(k, _)| !same(k, login));
    }

    /// A new token from Keystone (password scoped to the project by name in the login's
    /// domain, or the application credential), cached for the next asks.
    #[allow(
        clippy::too_many_lines,
        reason = "Keystone's two login bodies and the token's checks, each failure naming the step"
    )]
    async fn login(&self, http: &reqwest::Client, login: &Login, now: Time) -> Result<Session, String> {
        let url = format!("{}/auth/tokens", keystone_v3(&login.auth_url));
        let step = format!("Keystone {url}");
        let body = match (&login.application_credential, &login.password) {
            (Some((id, secret)), _) => application_credential_body(id, secret),
            (None, Some(password)) => password_body(
                Some(&login.user),
                &login.domain,
                Some(password),
                Scope::ProjectName { name: &login.project, domain: &login.domain },
            ),
            (None, None) => {
                return Err(format!(
                    "{step}: no password and no application credential to log in with; set {} in Secret {}",
                    login.from.credential_keys(),
                    login.secret
                ));
            }
        };
        self.keystone.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(url = %edpm_core::redact::scrub(&url), user = %login.user, "logging in to Keystone to ask Nova");
        let reach = "check the NovaCell's keystoneAuthURL and that Keystone is reachable from here";
        let resp = http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| transport(&step, &e, self.timeout, reach, login))?;
        let status = resp.status();
        let token = resp.headers().get("X-Subject-Token").and_then(|v| v.to_str().ok()).map(str::to_string);
        let bytes = read(resp, &step, self.timeout, reach, login).await?;
        if !status.is_success() {
            let hint = if status.as_u16() == 401 {
                format!(
                    "the credentials in Secret {} were rejected; check its {}{}",
                    login.secret,
                    login.from.credential_keys(),
                    match login.from {
                        edpm_core::nova::LoginFrom::Cell =>
                            format!(" and the NovaCell's serviceUser ({})", login.user),
                        edpm_core::nova::LoginFrom::Explicit => String::new(),
                    }
                )
            } else {
                "check that Keystone is up".into()
            };
            return Err(format!("{step}: HTTP {status}{}; {hint}", fault(login, "", &bytes)));
        }
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{step}: the answer is not JSON ({e}); {reach}"))?;
        let token = token.filter(|t| !t.is_empty()).ok_or_else(|| {
            format!(
                "{step}: the answer has no X-Subject-Token header; check that this URL is Keystone's v3 API"
            )
        })?;
        let region = Some(login.region.as_str()).filter(|r| !r.is_empty());
        let endpoint = catalog_endpoint(&body, "compute", region).ok_or_else(|| {
            format!(
                "{step}: the service catalog has no compute endpoint (internal or public){}; check the NovaCell's region",
                region.map_or(String::new(), |r| format!(" in region {r}"))
            )
        })?;
        // Without an expiry Keystone can be trusted with, the token serves this ask only.
        let fresh_until = body
            .pointer("/token/expires_at")
            .and_then(Value::as_str)
            .and_then(keystone_time)
            .map_or(now, |expires| Time(expires.0 - margin(now, expires)));
        let session = Session { token, endpoint, fresh_until };
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|(k, _)| !same(k, login));
        let key = login.key();
        let key =
            (key.0.to_string(), key.1.to_string(), key.2.to_string(), key.3.to_string(), key.4.to_string());
        sessions.push((key, session.clone()));
        Ok(session)
    }
}

/// One login's compute calls within one ask: the session, and whether it already logged in
/// again after a 401 (once per ask: a second 401 is an answer, not bad luck).
struct Call<'a> {
    client: &'a NovaClient,
    http: &'a reqwest::Client,
    login: &'a Login,
    now: Time,
    session: &'a mut Session,
    relogged: &'a mut bool,
}

impl Call<'_> {
    /// A compute GET at a microversion, as JSON. A 401 drops the token; the first one in an
    /// ask logs in again and retries once.
    async fn get(&mut self, url: &str, microversion: &str) -> Result<Value, String> {
        let step = format!("Nova {url}");
        let reach = "check that the compute endpoint in Keystone's catalog is reachable from here";
        loop {
            self.client.compute.fetch_add(1, Ordering::Relaxed);
            let resp = self
                .http
                .get(url)
                .header("X-Auth-Token", sensitive(&self.session.token)?)
                .header("OpenStack-API-Version", format!("compute {microversion}"))
                .send()
                .await
                .map_err(|e| transport(&step, &e, self.client.timeout, reach, self.login))?;
            let status = resp.status();
            tracing::debug!(url = %edpm_core::redact::scrub(url), status = status.as_u16(), "Nova answered");
            let bytes = read(resp, &step, self.client.timeout, reach, self.login).await?;
            if status.as_u16() == 401 {
                self.client.forget(self.login);
                if *self.relogged {
                    return Err(format!(
                        "{step}: HTTP {status} again with a new token; check that Nova accepts Keystone's tokens (nova-api's [keystone_authtoken]) and that user {} has a role in project {}",
                        self.login.user, self.login.project
                    ));
                }
                *self.relogged = true;
                *self.session = self.client.login(self.http, self.login, self.now).await?;
                continue;
            }
            if !status.is_success() {
                let hint = match status.as_u16() {
                    403 => format!(
                        "user {} needs the admin role in project {} (Nova's policy for os-services and os-hypervisors)",
                        self.login.user, self.login.project
                    ),
                    404 => format!(
                        "check the compute endpoint in Keystone's catalog (region {})",
                        self.login.region
                    ),
                    406 => format!("the Nova API does not offer microversion {microversion}"),
                    _ => "check that the Nova API is up (the nova-api pods and their logs)".into(),
                };
                return Err(format!(
                    "{step}: HTTP {status}{}; {hint}",
                    fault(self.login, &self.session.token, &bytes)
                ));
            }
            return serde_json::from_slice(&bytes)
                .map_err(|e| unparsable(self.login, &self.session.token, url, &e.to_string()));
        }
    }
}

/// The token as a header value marked sensitive, so that no debug output of the request
/// shows it.
fn sensitive(token: &str) -> Result<reqwest::header::HeaderValue, String> {
    let mut v = reqwest::header::HeaderValue::from_str(token).map_err(|_| {
        "Keystone's token is not a valid header value; check that the URL is Keystone's".to_string()
    })?;
    v.set_sensitive(true);
    Ok(v)
}

fn unavailable(message: String) -> NovaEvidence {
    NovaEvidence::Unavailable { message, since: None, last_answer: None }
}

/// A parser's complaint quotes the answer's values: redacted like any server text.
fn unparsable(login: &Login, token: &str, url: &str, problem: &str) -> String {
    format!(
        "Nova {url}: the answer cannot be read ({}); check that the endpoint is Nova's compute API v2.1",
        redactor(login, token).redact(problem)
    )
}

/// Text a server sent, as a message may quote it: cut, and with the login's secrets masked
/// (a server that echoes a request must not make us print the password).
fn echo(login: &Login, token: &str, text: &str) -> String {
    redactor(login, token).redact(&edpm_core::excerpt::echo(text).to_string())
}

/// The login's secrets and the token in use: what no message may show ("Could not find
/// token: …" quotes one).
fn redactor(login: &Login, token: &str) -> Redactor {
    let mut secrets = login.secrets();
    secrets.extend(Some(token.to_string()).filter(|t| !t.is_empty()));
    Redactor::new(secrets)
}

/// `NovaCell nova-cell1: ` (the cells that log in this way), to start a message with.
fn cells(login: &Login) -> String {
    match login.cells.as_slice() {
        [] => String::new(),
        [one] => format!("NovaCell {one}: "),
        many => format!("NovaCells {}: ", many.join(", ")),
    }
}

fn same(key: &LoginKey, login: &Login) -> bool {
    let k = login.key();
    (key.0.as_str(), key.1.as_str(), key.2.as_str(), key.3.as_str(), key.4.as_str()) == k
}

/// How long before `expires_at` a token is renewed: [`MARGIN_SECONDS`], or a tenth of the
/// lifetime left at `now` if that is shorter (a short-lived token still serves most of it).
fn margin(now: Time, expires: Time) -> i64 {
    MARGIN_SECONDS.min((expires.0 - now.0).max(0) / 10)
}

/// Keystone's `expires_at` (`2026-11-26T20:00:00.000000Z`); a time without a zone is UTC, as
/// Keystone means it.
fn keystone_time(s: &str) -> Option<Time> {
    Time::parse(s).or_else(|| Time::parse(&format!("{s}Z")))
}

fn build_http(timeout: Duration, ca_bundle: Option<&str>, login: &Login) -> Result<reqwest::Client, String> {
    let mut b = reqwest::Client::builder().timeout(timeout);
    if let Some(pem) = ca_bundle {
        let what = format!("the CA bundle ({})", login.ca_where());
        // Checked first: reqwest takes a CERTIFICATE block whatever it holds and fails only
        // when the client is built, saying "builder error".
        crate::tls::pem_bundle(pem.as_bytes(), &what)?;
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|e| format!("{what} cannot be read ({e}); it must hold PEM certificates"))?;
        // The control plane's combined bundle already holds the system roots it trusts.
        b = b.tls_certs_only(certs);
    }
    b.build().map_err(|e| format!("the HTTP client cannot be built ({e})"))
}

/// The answer's body, at most [`MAX_ANSWER`] bytes.
async fn read(
    mut resp: reqwest::Response,
    step: &str,
    timeout: Duration,
    reach: &str,
    login: &Login,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| transport(step, &e, timeout, reach, login))? {
        if out.len() + chunk.len() > MAX_ANSWER {
            return Err(format!(
                "{step}: the answer is larger than {} MiB; check that this is Nova",
                MAX_ANSWER >> 20
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A failed request, as what happened (no answer in time, or cannot connect and why).
fn transport(step: &str, e: &reqwest::Error, timeout: Duration, reach: &str, login: &Login) -> String {
    if e.is_timeout() {
        return format!("{step}: no answer in time (within {timeout:?}); {reach}");
    }
    // The innermost cause says what went wrong (refused, DNS, TLS); the outer ones repeat
    // the URL.
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    let verb = if e.is_connect() { "cannot connect" } else { "the request failed" };
    let text = cause.to_string();
    if text.contains("certificate") {
        return format!(
            "{step}: {verb} ({text}); check that the CA bundle ({}) holds the CA that signed this server's certificate",
            login.from.ca_source()
        );
    }
    format!("{step}: {verb} ({text}); {reach}")
}

/// The message of an OpenStack fault body (`{"<kind>": {"code": …, "message": "…"}}`, or
/// Keystone's `{"error": {…}}`), cut for a message: ` (message)`, or nothing.
fn fault(login: &Login, token: &str, body: &[u8]) -> String {
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) else { return String::new() };
    o.values()
        .find_map(|v| v.get("message").and_then(Value::as_str))
        .map_or(String::new(), |m| format!(" ({})", echo(login, token, m)))
}

#[cfg(test)]
mod tests {
    use edpm_testkit::fake_nova::{self as fake, FakeNova};

    use super::*;

    /// The fake's clock and the `now` the asks pass: 2026-11-26T19:00:00Z.
    const T0: i64 = 1_795_719_600;
    const SERVICES: &str = "GET /compute/v2.1/os-services?binary=nova-compute compute=2.69";
    const HYPERVISORS: &str = "GET /compute/v2.1/os-hypervisors/detail compute=2.53";
    const LOGIN: &str = "POST /v3/auth/tokens";

    fn started() -> FakeNova {
        let f = FakeNova::start();
        f.set_clock(T0);
        f.set_services(vec![
            fake::service("s0", "c0.example.com", "up", "enabled"),
            fake::service("s1", "c1.example.com", "down", "enabled"),
            fake::service("s2", "c2.example.com", "up", "disabled"),
            serde_json::json!({"id": "s9", "binary": "nova-conductor", "host": "ctl", "state": "up", "status": "enabled"}),
        ]);
        f.set_hypervisors(
            (0..5)
                .map(|i| {
                    fake::hypervisor(
                        &format!("h{i}"),
                        &format!("c{i}.example.com"),
                        &format!("s{i}"),
                        &format!("c{i}.example.com"),
                    )
                })
                .collect(),
        );
        f
    }

    fn login(f: &FakeNova) -> Login {
        Login {
            auth_url: f.auth_url(),
            region: fake::REGION.into(),
            user: fake::USER.into(),
            domain: fake::DOMAIN.into(),
            project: fake::PROJECT.into(),
            password: Some(fake::PASSWORD.into()),
            application_credential: None,
            ca_bundle: None,
            ca_secret: None,
            secret: "nova-cell1".into(),
            cells: vec!["nova-cell1".into()],
            from: edpm_core::nova::LoginFrom::Cell,
        }
    }

    fn client() -> NovaClient {
        NovaClient::new(Duration::from_secs(2))
    }

    fn answer(e: NovaEvidence) -> NovaAnswer {
        match e {
            NovaEvidence::Answer(a) => a,
            NovaEvidence::Unavailable { message, .. } => panic!("unavailable: {message}"),
        }
    }

    fn message(e: NovaEvidence) -> String {
        match e {
            NovaEvidence::Unavailable { message, since: None, last_answer: None } => message,
            other => panic!("expected Unavailable without times, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_full_answer_has_the_services_and_every_hypervisor_page() {
        let f = started();
        f.set_page_size(2);
        let c = client();
        let a = answer(c.ask(&[login(&f)], Time(T0)).await);
        assert_eq!(
            f.requests(),
            [
                LOGIN,
                SERVICES,
                HYPERVISORS,
                "GET /compute/v2.1/os-hypervisors/detail?marker=h1 compute=2.53",
                "GET /compute/v2.1/os-hypervisors/detail?marker=h3 compute=2.53",
            ]
        );
        assert_eq!(
            a.source,
            format!("Nova API {} (compute 2.69 services, 2.53 hypervisors)", f.compute_url())
        );
        assert_eq!(a.observed_at, Some(Time(T0)));
        let hosts: Vec<&str> = a.services.iter().map(|s| s.host.as_str()).collect();
        assert_eq!(hosts, ["c0.example.com", "c1.example.com", "c2.example.com"]);
        assert_eq!(
            (a.services[1].state.as_deref(), a.services[2].status.as_deref()),
            (Some("down"), Some("disabled"))
        );
        let hv = a.hypervisors.unwrap();
        let ids: Vec<&str> = hv.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["h0", "h1", "h2", "h3", "h4"]);
        assert_eq!(
            (hv[4].service_id.as_deref(), hv[4].service_host.as_deref()),
            (Some("s4"), Some("c4.example.com"))
        );
        assert_eq!(c.counts(), (1, 4));
        assert_eq!((f.keystone_requests(), f.compute_requests()), (1, 4));

        // A full last page costs one more, empty, request, as with Nova.
        f.set_hypervisors(f_hypervisors(4));
        let a = answer(c.ask(&[login(&f)], Time(T0 + 1)).await);
        assert_eq!(a.hypervisors.unwrap().len(), 4);
        assert_eq!(
            f.requests()[5..],
            [
                SERVICES,
                HYPERVISORS,
                "GET /compute/v2.1/os-hypervisors/detail?marker=h1 compute=2.53",
                "GET /compute/v2.1/os-hypervisors/detail?marker=h3 compute=2.53",
            ]
        );
    }

    fn f_hypervisors(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| fake::hypervisor(&format!("h{i}"), &format!("c{i}"), &format!("s{i}"), &format!("c{i}")))
            .collect()
    }

    #[tokio::test]
    async fn the_token_is_kept_until_shortly_before_it_expires() {
        let f = started();
        let c = client();
        for t in [T0, T0 + 100, T0 + 1000] {
            answer(c.ask(&[login(&f)], Time(t)).await);
        }
        assert_eq!(f.keystone_requests(), 1);
        // Issued at T0 for 3600 s: renewed 60 s before it expires, judged by the `now` given.
        answer(c.ask(&[login(&f)], Time(T0 + 3539)).await);
        assert_eq!(f.keystone_requests(), 1);
        answer(c.ask(&[login(&f)], Time(T0 + 3540)).await);
        assert_eq!(f.keystone_requests(), 2);
        assert_eq!(f.requests().iter().filter(|r| *r == LOGIN).count(), 2);

        // A short-lived token keeps a tenth of its lifetime as the margin.
        let f = started();
        f.set_token_lifetime(300);
        let c = client();
        answer(c.ask(&[login(&f)], Time(T0)).await);
        answer(c.ask(&[login(&f)], Time(T0 + 269)).await);
        assert_eq!(f.keystone_requests(), 1);
        answer(c.ask(&[login(&f)], Time(T0 + 270)).await);
        assert_eq!(f.keystone_requests(), 2);
        assert_eq!(margin(Time(0), Time(-5)), 0);
        assert_eq!(keystone_time("2026-11-26T20:00:00.000000Z"), Some(Time(T0 + 3600)));
        assert_eq!(keystone_time("2026-11-26T20:00:00.000000"), Some(Time(T0 + 3600)));
    }

    #[tokio::test]
    async fn a_revoked_token_is_renewed_once_and_the_ask_succeeds() {
        let f = started();
        let c = client();
        answer(c.ask(&[login(&f)], Time(T0)).await);
        f.revoke_tokens();
        let a = answer(c.ask(&[login(&f)], Time(T0 + 10)).await);
        assert_eq!(a.services.len(), 3);
        assert_eq!(f.requests()[3..], [SERVICES, LOGIN, SERVICES, HYPERVISORS]);
        assert_eq!(f.keystone_requests(), 2);
        // The new token is the one kept.
        answer(c.ask(&[login(&f)], Time(T0 + 20)).await);
        assert_eq!(f.keystone_requests(), 2);
    }

    #[tokio::test]
    async fn a_second_401_makes_nova_unavailable() {
        let f = started();
        f.fail_next("/compute/v2.1/os-services", 401, 2);
        let c = client();
        let m = message(c.ask(&[login(&f)], Time(T0)).await);
        assert!(m.starts_with(&format!("NovaCell nova-cell1: Nova {}/os-services?binary=nova-compute: HTTP 401 Unauthorized again with a new token;", f.compute_url())), "{m}");
        assert_eq!(f.requests(), [LOGIN, SERVICES, LOGIN, SERVICES]);
        // The token was dropped: the next ask logs in first.
        answer(c.ask(&[login(&f)], Time(T0 + 1)).await);
        assert_eq!(f.requests()[4], LOGIN);
        // A 401 on a later call of the same ask, after one re-login, is the second 401.
        f.revoke_tokens();
        f.fail_next("/compute/v2.1/os-hypervisors", 401, 1);
        let m = message(c.ask(&[login(&f)], Time(T0 + 2)).await);
        assert!(m.contains("os-hypervisors/detail: HTTP 401"), "{m}");
    }

    #[tokio::test]
    async fn server_errors_make_nova_unavailable_naming_the_url_and_status() {
        let f = started();
        let c = client();
        f.fail_next("/compute/v2.1/os-hypervisors", 500, 1);
        let m = message(c.ask(&[login(&f)], Time(T0)).await);
        assert_eq!(
            m,
            format!(
                "NovaCell nova-cell1: Nova {}/os-hypervisors/detail: HTTP 500 Internal Server Error (injected fault 500); check that the Nova API is up (the nova-api pods and their logs)",
                f.compute_url()
            )
        );
        f.fail_next("/compute/v2.1/os-services", 503, 1);
        let m = message(c.ask(&[login(&f)], Time(T0)).await);
        assert!(m.contains("/os-services?binary=nova-compute: HTTP 503 Service Unavailable"), "{m}");
        f.fail_next("/compute/v2.1/os-services", 403, 1);
        let m = message(c.ask(&[login(&f)], Time(T0)).await);
        assert!(
            m.contains("HTTP 403 Forbidden")
                && m.contains("user nova needs the admin role in project service"),
            "{m}"
        );
        f.fail_next("/compute/v2.1/os-hypervisors", 406, 1);
        let m = message(c.ask(&[login(&f)], Time(T0)).await);
        assert!(m.ends_with("the Nova API does not offer microversion 2.53"), "{m}");
        f.fail_next("/v3/auth/tokens", 503, 1);
        let m = message(client().ask(&[login(&f)], Time(T0)).await);
        assert!(
            m.contains("/v3/auth/tokens: HTTP 503 Service Unavailable")
                && m.ends_with("check that Keystone is up"),
            "{m}"
        );
        // Each failure was one request: no retries but the 401's.
        assert_eq!(f.compute_requests(), 2 + 1 + 1 + 2);
    }

    #[tokio::test]
    async fn no_answer_in_time_makes_nova_unavailable() {
        let f = started();
        f.delay_next("/compute/v2.1/os-services", Duration::from_millis(1500), 1);
        let c = NovaClient::new(Duration::from_millis(500));
        let started = std::time::Instant::now();
        let m = message(c.ask(&[login(&f)], Time(T0)).await);
        assert!(started.elapsed() < Duration::from_millis(1400), "{:?}", started.elapsed());
        assert_eq!(
            m,
            format!(
                "NovaCell nova-cell1: Nova {}/os-services?binary=nova-compute: no answer in time (within 500ms); check that the compute endpoint in Keystone's catalog is reachable from here",
                f.compute_url()
            )
        );
    }

    #[tokio::test]
    async fn rejected_credentials_name_the_secret_and_never_the_password() {
        let f = started();
        let mut l = login(&f);
        l.password = Some("wrong-password-123".into());
        l.cells = vec!["nova-cell0".into(), "nova-cell1".into()];
        let m = message(client().ask(&[l], Time(T0)).await);
        assert_eq!(
            m,
            format!(
                "NovaCells nova-cell0, nova-cell1: Keystone {}/v3/auth/tokens: HTTP 401 Unauthorized (The request you have made requires authentication.); the credentials in Secret nova-cell1 were rejected; check its ServicePassword (or ACID and ACSecret) and the NovaCell's serviceUser (nova)",
                f.auth_url()
            )
        );
        assert_eq!((f.keystone_requests(), f.compute_requests()), (1, 0));
        // Nothing to log in with is said without asking.
        let mut l = login(&f);
        l.password = None;
        let m = message(client().ask(&[l], Time(T0)).await);
        assert!(
            m.contains("no password and no application credential") && m.contains("Secret nova-cell1"),
            "{m}"
        );
        assert_eq!(f.keystone_requests(), 1);
    }

    #[tokio::test]
    async fn an_application_credential_logs_in_without_a_scope() {
        let f = started();
        let mut l = login(&f);
        l.password = None;
        l.application_credential = Some((fake::APP_ID.into(), fake::APP_SECRET.into()));
        let a = answer(client().ask(&[l], Time(T0)).await);
        assert_eq!(a.services.len(), 3);
        let (_, body) = &f.bodies()[0];
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["auth"]["identity"]["methods"], serde_json::json!(["application_credential"]));
        assert!(body["auth"].get("scope").is_none(), "{body}");
    }

    #[tokio::test]
    async fn the_password_goes_only_to_keystone_and_into_no_message() {
        let f = started();
        let c = client();
        answer(c.ask(&[login(&f)], Time(T0)).await);
        let (_, body) = &f.bodies()[0];
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            body["auth"],
            serde_json::json!({"identity": {"methods": ["password"], "password": {"user": {
                "name": "nova", "domain": {"name": "Default"}, "password": fake::PASSWORD}}},
                "scope": {"project": {"name": "service", "domain": {"name": "Default"}}}})
        );
        let mut messages = Vec::new();
        for (path, status) in
            [("/compute/v2.1/os-services", 401), ("/compute/v2.1/os-hypervisors", 500), ("/v3", 401)]
        {
            f.revoke_tokens();
            f.fail_next(path, status, 2);
            messages.push(message(c.ask(&[login(&f)], Time(T0)).await));
        }
        let mut bad = login(&f);
        bad.password = Some(format!("{}-not", fake::PASSWORD));
        messages.push(message(c.ask(&[bad], Time(T0)).await));
        for m in &messages {
            assert!(!m.contains(fake::PASSWORD) && !m.contains("tok-"), "{m}");
        }
        let raw = f.raw_requests();
        assert!(raw.len() > 8);
        for r in raw {
            let to_keystone = r.starts_with("POST /v3/auth/tokens ");
            assert_eq!(r.contains(fake::PASSWORD), to_keystone, "{r}");
            if !to_keystone {
                assert!(r.to_ascii_lowercase().contains("x-auth-token: tok-"), "{r}");
            }
        }
    }

    #[tokio::test]
    async fn next_page_links_to_another_host_are_followed_on_the_catalog_endpoint() {
        let f = started();
        f.set_page_size(2);
        // As Nova behind a TLS-terminating proxy writes its links: the token must not go there.
        f.set_link_prefix("http://nova-public.invalid/v2.1");
        let a = answer(client().ask(&[login(&f)], Time(T0)).await);
        assert_eq!(a.hypervisors.as_ref().map(Vec::len), Some(5));
        assert_eq!(f.requests().len(), 5, "{:?}", f.requests());
        assert!(f.requests()[4].ends_with("detail?marker=h3 compute=2.53"), "{:?}", f.requests());
    }

    #[tokio::test]
    async fn logins_that_reach_the_same_nova_ask_it_once() {
        let f = started();
        let mut other = login(&f);
        other.user = "nova-cell2-user".into();
        other.password = None;
        other.application_credential = Some((fake::APP_ID.into(), fake::APP_SECRET.into()));
        let a = answer(client().ask(&[login(&f), other], Time(T0)).await);
        assert_eq!(a.services.len(), 3);
        assert_eq!(f.requests(), [LOGIN, SERVICES, HYPERVISORS, LOGIN]);
        assert_eq!(
            a.source,
            format!("Nova API {} (compute 2.69 services, 2.53 hypervisors)", f.compute_url())
        );
        // No login at all is said, not asked.
        assert!(message(client().ask(&[], Time(T0)).await).starts_with("no NovaCell gives a login"));
    }

    #[tokio::test]
    async fn a_region_without_nova_or_a_bad_ca_bundle_is_named() {
        let f = started();
        let mut l = login(&f);
        l.region = "regionThree".into();
        let m = message(client().ask(&[l], Time(T0)).await);
        assert!(
            m.contains(
                "the service catalog has no compute endpoint (internal or public) in region regionThree"
            ),
            "{m}"
        );
        let mut l = login(&f);
        l.ca_bundle = Some("not a certificate".into());
        let m = message(client().ask(&[l], Time(T0)).await);
        assert!(
            m.contains("the CA bundle (key tls-ca-bundle.pem") && m.contains("holds no PEM certificate"),
            "{m}"
        );
        assert_eq!(f.keystone_requests(), 1);
        // An answer Nova would not give is named, and what it quotes is redacted.
        f.set_services(vec![serde_json::json!({"binary": "nova-compute", "host": {"echo": fake::PASSWORD}})]);
        let m = message(client().ask(&[login(&f)], Time(T0)).await);
        assert!(m.contains("/os-services?binary=nova-compute: the answer cannot be read (services[0].host: expected text, found {\"echo\":\"********\"})"), "{m}");
        assert!(!m.contains(fake::PASSWORD), "{m}");
        // Nothing listens: cannot connect, and why.
        let mut l = login(&f);
        l.auth_url = "http://127.0.0.1:9".into();
        let m = message(client().ask(&[l], Time(T0)).await);
        assert!(m.contains("Keystone http://127.0.0.1:9/v3/auth/tokens: cannot connect ("), "{m}");
    }

    /// Over HTTPS: the control plane's CA bundle is what is trusted, and only it.
    #[tokio::test]
    async fn tls_trusts_the_ca_bundle_and_only_it() {
        // A test CA and a certificate for 127.0.0.1 it signed (valid until 2126), and another CA.
        const CA: &str = include_str!("../../../../tests/fixtures/tls/ca.pem");
        const OTHER_CA: &str = include_str!("../../../../tests/fixtures/tls/other-ca.pem");
        const CERT: &str = include_str!("../../../../tests/fixtures/tls/server.pem");
        const KEY: &str = include_str!("../../../../tests/fixtures/tls/server.key");
        let f = FakeNova::start_tls(CERT, KEY);
        f.set_clock(T0);
        f.set_services(vec![fake::service("s0", "c0.example.com", "up", "enabled")]);
        let mut l = login(&f);
        assert!(l.auth_url.starts_with("https://127.0.0.1:"), "{}", l.auth_url);
        l.ca_bundle = Some(CA.into());
        let a = answer(client().ask(&[l.clone()], Time(T0)).await);
        assert_eq!(a.services.len(), 1);
        assert_eq!(f.requests(), [LOGIN, SERVICES, HYPERVISORS]);
        // Another CA: the handshake fails, and the message says to check the CA bundle.
        l.ca_bundle = Some(OTHER_CA.into());
        let m = message(client().ask(&[l], Time(T0)).await);
        assert!(
            m.contains("Keystone https://127.0.0.1:")
                && m.contains("cannot connect (invalid peer certificate"),
            "{m}"
        );
        assert!(m.ends_with("holds the CA that signed this server's certificate"), "{m}");
        assert_eq!(f.requests().len(), 3, "nothing reached the server past the handshake");
    }
}
