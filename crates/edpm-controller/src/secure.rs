//! `/metrics` as controller-runtime serves it with `--metrics-secure`: over TLS, and only to a
//! bearer token the API server authenticates (TokenReview) whose user may `get /metrics`
//! (SubjectAccessReview), as its `filters.WithAuthenticationAndAuthorization` does.
//!
//! - The certificate is `--metrics-cert-path`'s `tls.crt`/`tls.key` (names as flags), read
//!   again when either file changes (OpenShift's service CA and cert-manager rotate the Secret
//!   under a running pod); without a path, or while the files are absent (an optional Secret
//!   not yet made), a self-signed certificate made at start, as controller-runtime does.
//! - Verdicts are kept for [`VERDICT_TTL`] per token (by its SHA-256, never the token), so a
//!   scrape every few seconds costs the API server two reviews per token and TTL, not per
//!   scrape; "not authenticated" is kept for [`NEGATIVE_TTL`]; an API error is answered 500
//!   and not kept.
//! - The endpoint cannot be turned against the API server: requests with one token share one
//!   review (singleflight), at most a few reviews are asked at once, tokens the API server has
//!   not authenticated here before are reviewed at a bounded rate (429 past it), and a review
//!   that hangs is answered 500 after [`REVIEW_BUDGET`], under Prometheus's scrape timeout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hyper::StatusCode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::k8s::{Client, review};

/// How long an authentication and authorization verdict is kept for one token.
pub(crate) const VERDICT_TTL: Duration = Duration::from_secs(10);
/// At most this many tokens' verdicts are kept (a flood of made-up tokens empties it).
const VERDICTS_MAX: usize = 256;
/// How often the certificate files are looked at for a change.
const CERT_RECHECK: Duration = Duration::from_secs(5);
/// The most a certificate or key file may hold.
const CERT_FILE_CAP: u64 = 1 << 20;

/// Where the serving certificate comes from (`--metrics-cert-path`, `--metrics-cert-name`,
/// `--metrics-cert-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub dir: PathBuf,
    pub cert: String,
    pub key: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing holding these locks panics; a poisoned one still holds usable state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The serving certificate: the files' (reloaded on change) or the self-signed one.
#[derive(Debug)]
pub(crate) struct Certs {
    files: Option<CertFiles>,
    self_signed: Arc<CertifiedKey>,
    state: Mutex<Loaded>,
}

#[derive(Debug, Default)]
struct Loaded {
    /// When the files were last looked at.
    checked: Option<Instant>,
    /// Their modification times then, and what they held.
    seen: Option<Stamps>,
    current: Option<Arc<CertifiedKey>>,
    /// The last problem told (each once).
    warned: Option<String>,
}

impl Certs {
    /// The certificate source; fails only when no self-signed certificate can be made.
    pub(crate) fn new(files: Option<CertFiles>) -> Result<Certs, String> {
        let made = rcgen::generate_simple_self_signed(vec!["edpm-agent-controller-metrics".to_string()])
            .map_err(|e| {
                format!(
                    "cannot make a self-signed certificate for /metrics ({e}); mount one and pass --metrics-cert-path, or --metrics-secure=false"
                )
            })?;
        let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
            .map_err(|e| format!("cannot use the self-signed certificate's key: {e}"))?;
        let self_signed = certified(vec![made.cert.der().clone()], &key)?;
        let certs = Certs { files, self_signed: Arc::new(self_signed), state: Mutex::default() };
        // The first look at start, so a bad file is told at once rather than at the first scrape.
        certs.current();
        Ok(certs)
    }

    /// The certificate to serve now.
    fn current(&self) -> Arc<CertifiedKey> {
        let Some(files) = &self.files else { return self.self_signed.clone() };
        let mut st = lock(&self.state);
        let due = st.checked.is_none_or(|c| c.elapsed() >= CERT_RECHECK);
        if due {
            st.checked = Some(Instant::now());
            match load(files, st.seen) {
                Ok(Some((seen, key))) => {
                    tracing::info!(dir = %files.dir.display(), "serving /metrics with the certificate in --metrics-cert-path");
                    st.seen = Some(seen);
                    st.current = Some(Arc::new(key));
                    st.warned = None;
                }
                Ok(None) => {}
                Err(e) => {
                    if st.warned.as_deref() != Some(e.as_str()) {
                        let keeps = if st.current.is_some() {
                            "the certificate read before"
                        } else {
                            "a self-signed certificate"
                        };
                        tracing::warn!("{e}; /metrics is served with {keeps}");
                        st.warned = Some(e);
                    }
                    // Looked at again when the files change (a Secret being rotated in).
                    st.seen = None;
                }
            }
        }
        st.current.clone().unwrap_or_else(|| self.self_signed.clone())
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The modification times of the certificate and the key.
type Stamps = (SystemTime, SystemTime);

/// The files' key pair when they changed since `seen` (`Ok(None)`: unchanged).
fn load(files: &CertFiles, seen: Option<Stamps>) -> Result<Option<(Stamps, CertifiedKey)>, String> {
    let cert_path = files.dir.join(&files.cert);
    let key_path = files.dir.join(&files.key);
    let modified = |p: &Path| {
        std::fs::metadata(p).and_then(|m| m.modified()).map_err(|e| {
            format!(
                "--metrics-cert-path {}: {}: {e} (mount the Secret with tls.crt and tls.key there, or name the files with --metrics-cert-name and --metrics-cert-key)",
                files.dir.display(),
                p.display()
            )
        })
    };
    let now = (modified(&cert_path)?, modified(&key_path)?);
    if seen == Some(now) {
        return Ok(None);
    }
    let read = |p: &Path| {
        edpm_io::files::read_bounded(p, CERT_FILE_CAP, false).map_err(|e| format!("{}: {e}", p.display()))
    };
    let (cert_pem, key_pem) = (read(&cert_path)?, read(&key_path)?);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: not a PEM certificate chain ({e})", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: holds no -----BEGIN CERTIFICATE----- block", cert_path.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| format!("{}: not a PEM private key ({e})", key_path.display()))?;
    let pair = certified(chain, &key).map_err(|e| format!("{}: {e}", files.dir.display()))?;
    Ok(Some((now, pair)))
}

/// A certificate chain with its key, checked to belong together.
fn certified(chain: Vec<CertificateDer<'static>>, key: &PrivateKeyDer<'_>) -> Result<CertifiedKey, String> {
    let signer = rustls::crypto::ring::sign::any_supported_type(key)
        .map_err(|e| format!("the private key is not one rustls can sign with ({e})"))?;
    let pair = CertifiedKey::new(chain, signer);
    pair.keys_match().map_err(|e| format!("the certificate and the key do not belong together ({e})"))?;
    Ok(pair)
}

/// The TLS side of the metrics server: HTTP/1.1 only, TLS 1.2 and 1.3.
pub(crate) fn acceptor(certs: Arc<Certs>) -> Result<tokio_rustls::TlsAcceptor, String> {
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS for /metrics: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// What a request's `Authorization` header earns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    /// 401: no bearer token, or one the API server does not know.
    Unauthenticated(&'static str),
    /// 403: the user may not `get /metrics`.
    Forbidden(String),
    /// 429: too many tokens not known here are being tried; not asked, not kept.
    Throttled,
}

impl Verdict {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Verdict::Allowed => StatusCode::OK,
            Verdict::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Verdict::Forbidden(_) => StatusCode::FORBIDDEN,
            Verdict::Throttled => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The `Retry-After` header's seconds: a 429 says when a review is free again (the
    /// bucket gains one in 1/[`UNKNOWN_PER_SECOND`] s; whole seconds, rounded up).
    pub(crate) fn retry_after(&self) -> Option<u64> {
        match self {
            Verdict::Throttled => Some((1.0 / UNKNOWN_PER_SECOND).ceil() as u64),
            _ => None,
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Verdict::Allowed => "ok\n".into(),
            Verdict::Unauthenticated(why) => format!("Unauthorized: {why}\n"),
            Verdict::Forbidden(user) => format!(
                "Forbidden: user {user:?} may not get /metrics (bind the ClusterRole edpm-agent-metrics-reader to it)\n"
            ),
            Verdict::Throttled => format!(
                "Too many requests: tokens not seen before are reviewed at most {UNKNOWN_PER_SECOND} a second; try again\n"
            ),
        }
    }
}

/// The bearer token of an `Authorization` header value (scheme case-insensitive, as Go's
/// bearer-token authenticator reads it).
pub(crate) fn bearer(header: Option<&[u8]>) -> Result<&str, &'static str> {
    let Some(raw) = header else {
        return Err("no Authorization header (send Authorization: Bearer <token>)");
    };
    let text = std::str::from_utf8(raw).map_err(|_| "the Authorization header is not text")?;
    let (scheme, token) =
        text.trim().split_once(' ').ok_or("the Authorization header is not \"Bearer <token>\"")?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err("the Authorization header is not \"Bearer <token>\"");
    }
    Ok(token)
}

/// How long one request's check may take, waiting for a free review included: under
/// Prometheus's default scrape timeout (10 s), so that a hanging API server makes the scrape
/// a 500 it can read, not a timeout of its own (the client's request timeout, 15 s and a retry,
/// would be 30 s).
pub(crate) const REVIEW_BUDGET: Duration = Duration::from_secs(5);
/// At most this many reviews (a TokenReview, then a SubjectAccessReview) are asked at once;
/// the others wait for one to end, within the budget.
const REVIEWS_IN_FLIGHT: usize = 4;
/// Tokens the API server has not authenticated here before are reviewed at most this many at
/// once after a quiet while, then [`UNKNOWN_PER_SECOND`]: a flood of made-up tokens costs the
/// API server a few reviews a second, not one per request. Answered 429 past it.
const UNKNOWN_BURST: f64 = 10.0;
const UNKNOWN_PER_SECOND: f64 = 2.0;
/// How long "the API server does not authenticate this token" is kept: longer than a verdict
/// on a real token (a made-up or revoked token does not become valid), as long as the API
/// server's own webhook token cache keeps one by default.
pub(crate) const NEGATIVE_TTL: Duration = Duration::from_secs(60);
/// At most this many negative verdicts are kept (the oldest goes first).
const NEGATIVES_MAX: usize = 4096;
/// How long a token the API server authenticated stays known (not rate-limited as unknown).
const KNOWN_TTL: Duration = Duration::from_secs(3600);

/// A token's identity in the caches: its SHA-256, never the token.
type Id = [u8; 32];
/// One review under way, shared by every request with its token.
type Review = futures::future::Shared<futures::future::BoxFuture<'static, Result<Verdict, String>>>;
/// What asks the API server about a token.
pub(crate) type Reviewer =
    Arc<dyn Fn(String) -> futures::future::BoxFuture<'static, Result<Verdict, String>> + Send + Sync>;

/// Checks `/metrics` requests against the API server, keeping verdicts a while: one review per
/// token at a time (requests with a token under review wait for its verdict), at most
/// [`REVIEWS_IN_FLIGHT`] at once, tokens not known rate-limited, each within [`REVIEW_BUDGET`].
pub(crate) struct Gate {
    reviewer: Reviewer,
    permits: Arc<tokio::sync::Semaphore>,
    budget: Duration,
    state: Arc<Mutex<GateState>>,
}

struct GateState {
    /// Verdicts on tokens the API server authenticated (allowed or forbidden).
    verdicts: HashMap<Id, (tokio::time::Instant, Verdict)>,
    /// Tokens the API server does not authenticate, when it said so.
    negatives: HashMap<Id, tokio::time::Instant>,
    /// Tokens the API server authenticated, when it last did.
    known: HashMap<Id, tokio::time::Instant>,
    in_flight: HashMap<Id, Review>,
    /// The reviews of unknown tokens left to spend, and when it was counted.
    bucket: (f64, tokio::time::Instant),
}

/// The oldest entry of `map` by the time `at` gives, removed.
fn evict_oldest<V>(map: &mut HashMap<Id, V>, at: impl Fn(&V) -> tokio::time::Instant) {
    if let Some(oldest) = map.iter().min_by_key(|(_, v)| at(v)).map(|(k, _)| *k) {
        map.remove(&oldest);
    }
}

impl Gate {
    /// A gate asking the API server through `client`.
    pub(crate) fn new(client: Client) -> Gate {
        let reviewer: Reviewer = Arc::new(move |token: String| {
            let client = client.clone();
            Box::pin(async move { review_token(&client, &token).await })
        });
        Gate::with_reviewer(reviewer, REVIEW_BUDGET)
    }

    pub(crate) fn with_reviewer(reviewer: Reviewer, budget: Duration) -> Gate {
        Gate {
            reviewer,
            permits: Arc::new(tokio::sync::Semaphore::new(REVIEWS_IN_FLIGHT)),
            budget,
            state: Arc::new(Mutex::new(GateState {
                verdicts: HashMap::new(),
                negatives: HashMap::new(),
                known: HashMap::new(),
                in_flight: HashMap::new(),
                bucket: (UNKNOWN_BURST, tokio::time::Instant::now()),
            })),
        }
    }

    /// The verdict for a request with this `Authorization` header; `Err` (told, answered 500)
    /// when the API server cannot be asked, or does not answer within the budget.
    pub(crate) async fn check(&self, header: Option<&[u8]>) -> Result<Verdict, String> {
        let token = match bearer(header) {
            Ok(t) => t,
            Err(why) => return Ok(Verdict::Unauthenticated(why)),
        };
        let id = edpm_core::staging::sha256(token.as_bytes());
        let review = {
            let mut st = lock(&self.state);
            let now = tokio::time::Instant::now();
            if let Some((at, v)) = st.verdicts.get(&id)
                && now.duration_since(*at) < VERDICT_TTL
            {
                return Ok(v.clone());
            }
            if let Some(at) = st.negatives.get(&id)
                && now.duration_since(*at) < NEGATIVE_TTL
            {
                return Ok(Verdict::Unauthenticated(NOT_AUTHENTICATED));
            }
            match st.in_flight.get(&id) {
                Some(r) => r.clone(),
                None => {
                    let known = st.known.get(&id).is_some_and(|at| now.duration_since(*at) < KNOWN_TTL);
                    if !known && !take(&mut st.bucket, now) {
                        return Ok(Verdict::Throttled);
                    }
                    let review = self.review(id, token.to_string());
                    st.in_flight.insert(id, review.clone());
                    review
                }
            }
        };
        review.await
    }

    /// The review of `token`, within the budget: waiting for a free review, then asking; its
    /// verdict is kept and it leaves `in_flight` when it ends. It runs on a task of its own, so
    /// that it ends (and is kept) even when every request waiting for it has gone.
    fn review(&self, id: Id, token: String) -> Review {
        use futures::FutureExt;
        let (permits, reviewer, budget) = (self.permits.clone(), self.reviewer.clone(), self.budget);
        let state = self.state.clone();
        let review = async move {
            let asked = async {
                let _permit =
                    permits.acquire_owned().await.map_err(|_| "the metrics server is stopping".to_string())?;
                reviewer(token).await
            };
            let result = tokio::time::timeout(budget, asked).await.unwrap_or_else(|_| {
                Err(format!(
                    "the API server did not answer the token's review within {budget:?} (under Prometheus's 10 s scrape timeout)"
                ))
            });
            let mut st = lock(&state);
            st.in_flight.remove(&id);
            match &result {
                Ok(v) => st.keep(id, v),
                // Told once per review, however many requests waited on it.
                Err(e) => tracing::warn!(error = %e, "cannot check a /metrics request's token with the API server"),
            }
            result
        }
        .boxed()
        .shared();
        tokio::spawn(review.clone());
        review
    }
}

impl GateState {
    fn keep(&mut self, id: Id, verdict: &Verdict) {
        let now = tokio::time::Instant::now();
        match verdict {
            Verdict::Unauthenticated(_) => {
                if self.negatives.len() >= NEGATIVES_MAX {
                    self.negatives.retain(|_, at| now.duration_since(*at) < NEGATIVE_TTL);
                    if self.negatives.len() >= NEGATIVES_MAX {
                        evict_oldest(&mut self.negatives, |at| *at);
                    }
                }
                self.negatives.insert(id, now);
            }
            Verdict::Allowed | Verdict::Forbidden(_) => {
                if self.verdicts.len() >= VERDICTS_MAX {
                    self.verdicts.retain(|_, (at, _)| now.duration_since(*at) < VERDICT_TTL);
                    if self.verdicts.len() >= VERDICTS_MAX {
                        evict_oldest(&mut self.verdicts, |(at, _)| *at);
                    }
                }
                self.verdicts.insert(id, (now, verdict.clone()));
                if self.known.len() >= VERDICTS_MAX {
                    self.known.retain(|_, at| now.duration_since(*at) < KNOWN_TTL);
                    if self.known.len() >= VERDICTS_MAX {
                        evict_oldest(&mut self.known, |at| *at);
                    }
                }
                self.known.insert(id, now);
            }
            Verdict::Throttled => {}
        }
    }
}

/// Takes one review of an unknown token from the bucket, refilled at [`UNKNOWN_PER_SECOND`].
fn take(bucket: &mut (f64, tokio::time::Instant), now: tokio::time::Instant) -> bool {
    let (left, at) = bucket;
    *left = (*left + now.duration_since(*at).as_secs_f64() * UNKNOWN_PER_SECOND).min(UNKNOWN_BURST);
    *at = now;
    if *left >= 1.0 {
        *left -= 1.0;
        true
    } else {
        false
    }
}

const NOT_AUTHENTICATED: &str = "the API server does not authenticate this token";

/// Who `token` is and whether that user may `get /metrics`, as the API server says.
async fn review_token(client: &Client, token: &str) -> Result<Verdict, String> {
    Ok(match review::authenticate(client, token).await.map_err(|e| e.to_string())? {
        None => Verdict::Unauthenticated(NOT_AUTHENTICATED),
        Some(user) => {
            if review::authorize(client, &user, "/metrics", "get").await.map_err(|e| e.to_string())? {
                Verdict::Allowed
            } else {
                Verdict::Forbidden(edpm_core::excerpt::printable(&user.name).to_string())
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and read their fixtures directly")]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_read_as_go_reads_them() {
        assert_eq!(bearer(Some(b"Bearer abc")), Ok("abc"));
        assert_eq!(bearer(Some(b"bearer  abc ")), Ok("abc"));
        assert!(bearer(None).unwrap_err().contains("no Authorization header"));
        assert!(bearer(Some(b"Basic dXNlcjpwYXNz")).is_err());
        assert!(bearer(Some(b"Bearer ")).is_err());
        assert!(bearer(Some(b"Bearer")).is_err());
        assert!(bearer(Some(&[0xff, 0xfe])).is_err());
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tls").join(name)
    }

    #[test]
    fn certificate_files_are_served_and_reloaded_when_they_change() {
        let dir = tempfile::tempdir().unwrap();
        let files =
            CertFiles { dir: dir.path().to_path_buf(), cert: "tls.crt".into(), key: "tls.key".into() };
        // Absent at start (an optional Secret not made yet): self-signed.
        let certs = Certs::new(Some(files.clone())).unwrap();
        let first = certs.current();
        assert!(Arc::ptr_eq(&first, &certs.self_signed));
        std::fs::copy(fixture("server.pem"), dir.path().join("tls.crt")).unwrap();
        std::fs::copy(fixture("server.key"), dir.path().join("tls.key")).unwrap();
        lock(&certs.state).checked = None;
        let loaded = certs.current();
        assert!(!Arc::ptr_eq(&loaded, &certs.self_signed));
        let served = std::fs::read(fixture("server.pem")).unwrap();
        let want = CertificateDer::pem_slice_iter(&served).next().unwrap().unwrap();
        assert_eq!(loaded.cert[0], want);
        // A broken rotation keeps the certificate read before.
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("tls.key"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        lock(&certs.state).checked = None;
        assert!(Arc::ptr_eq(&certs.current(), &loaded));
        assert!(lock(&certs.state).warned.as_deref().unwrap().contains("tls.key: not a PEM private key"));
    }

    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A reviewer that counts its reviews and those under way at once (the most seen), each
    /// taking `takes` and answering `verdict` (made from the token).
    struct Counting {
        asked: AtomicUsize,
        now: AtomicUsize,
        most: AtomicUsize,
    }

    fn counting(takes: Option<Duration>, verdict: fn(&str) -> Verdict) -> (Arc<Counting>, Reviewer) {
        let c = Arc::new(Counting {
            asked: AtomicUsize::new(0),
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        });
        let c2 = c.clone();
        let reviewer: Reviewer = Arc::new(move |token: String| {
            let c = c2.clone();
            Box::pin(async move {
                c.asked.fetch_add(1, Ordering::SeqCst);
                let now = c.now.fetch_add(1, Ordering::SeqCst) + 1;
                c.most.fetch_max(now, Ordering::SeqCst);
                match takes {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending::<()>().await,
                }
                c.now.fetch_sub(1, Ordering::SeqCst);
                Ok(verdict(&token))
            })
        });
        (c, reviewer)
    }

    fn header(token: &str) -> Vec<u8> {
        format!("Bearer {token}").into_bytes()
    }

    fn nobody(_: &str) -> Verdict {
        Verdict::Unauthenticated(NOT_AUTHENTICATED)
    }

    /// 200 requests at once with one made-up token cost one review; its negative verdict is
    /// kept, so asking again costs nothing until [`NEGATIVE_TTL`] has passed.
    #[tokio::test(start_paused = true)]
    async fn one_token_from_many_requests_at_once_is_reviewed_once() {
        let (c, reviewer) = counting(Some(Duration::from_millis(500)), nobody);
        let gate = Gate::with_reviewer(reviewer, REVIEW_BUDGET);
        let h = header("made-up");
        let answers = futures::future::join_all((0..200).map(|_| gate.check(Some(&h)))).await;
        assert!(answers.iter().all(|a| a == &Ok(Verdict::Unauthenticated(NOT_AUTHENTICATED))), "{answers:?}");
        assert_eq!(c.asked.load(Ordering::SeqCst), 1);
        tokio::time::advance(NEGATIVE_TTL - Duration::from_secs(2)).await;
        assert!(gate.check(Some(&h)).await.is_ok());
        assert_eq!(c.asked.load(Ordering::SeqCst), 1, "the negative verdict was kept");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(gate.check(Some(&h)).await.is_ok());
        assert_eq!(c.asked.load(Ordering::SeqCst), 2, "asked again once it expired");
    }

    /// 2,000 made-up tokens at once: a burst is reviewed, at most [`REVIEWS_IN_FLIGHT`] at a
    /// time, and the rest are answered 429 without asking; a token the API server authenticated
    /// before is still reviewed while unknown ones are throttled.
    #[tokio::test(start_paused = true)]
    async fn many_made_up_tokens_are_rate_limited_and_bounded_in_flight() {
        fn by_name(token: &str) -> Verdict {
            if token == "prom" { Verdict::Allowed } else { Verdict::Unauthenticated(NOT_AUTHENTICATED) }
        }
        let (c, reviewer) = counting(Some(Duration::from_millis(200)), by_name);
        let gate = Gate::with_reviewer(reviewer, REVIEW_BUDGET);
        assert_eq!(gate.check(Some(&header("prom"))).await, Ok(Verdict::Allowed));
        tokio::time::advance(Duration::from_secs(60)).await;
        let headers: Vec<Vec<u8>> = (0..2000).map(|i| header(&format!("made-up-{i}"))).collect();
        let answers = futures::future::join_all(headers.iter().map(|h| gate.check(Some(h)))).await;
        let asked = c.asked.load(Ordering::SeqCst);
        assert!(asked <= 1 + UNKNOWN_BURST as usize + 1, "{asked} reviews for 2,000 made-up tokens");
        assert!(
            c.most.load(Ordering::SeqCst) <= REVIEWS_IN_FLIGHT,
            "{} at once",
            c.most.load(Ordering::SeqCst)
        );
        let throttled = answers.iter().filter(|a| **a == Ok(Verdict::Throttled)).count();
        assert!(throttled >= 2000 - UNKNOWN_BURST as usize - 1, "{throttled} throttled");
        assert_eq!(Verdict::Throttled.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(Verdict::Throttled.retry_after(), Some(1));
        assert_eq!(Verdict::Unauthenticated("x").retry_after(), None);
        // With the bucket empty, a token the API server authenticated before (its verdict
        // expired) is still asked.
        lock(&gate.state).bucket = (0.0, tokio::time::Instant::now());
        assert_eq!(gate.check(Some(&header("made-up-x"))).await, Ok(Verdict::Throttled));
        assert_eq!(gate.check(Some(&header("prom"))).await, Ok(Verdict::Allowed));
        // The bucket fills again with time.
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            gate.check(Some(&header("made-up-x"))).await,
            Ok(Verdict::Unauthenticated(NOT_AUTHENTICATED))
        );
    }

    /// A review that never ends is answered `Err` (500) at the budget, for every request
    /// waiting on it, and nothing is kept: the next request asks again.
    #[tokio::test(start_paused = true)]
    async fn a_hanging_review_ends_at_the_budget() {
        let (c, reviewer) = counting(None, nobody);
        let gate = Gate::with_reviewer(reviewer, REVIEW_BUDGET);
        let started = tokio::time::Instant::now();
        let h = header("prom");
        let answers = futures::future::join_all((0..5).map(|_| gate.check(Some(&h)))).await;
        assert_eq!(started.elapsed(), REVIEW_BUDGET);
        assert!(REVIEW_BUDGET < Duration::from_secs(10), "under Prometheus's default scrape timeout");
        for a in &answers {
            assert!(a.as_ref().unwrap_err().contains("did not answer"), "{a:?}");
        }
        assert_eq!(c.asked.load(Ordering::SeqCst), 1);
        assert!(gate.check(Some(&h)).await.is_err());
        assert_eq!(c.asked.load(Ordering::SeqCst), 2);
        assert!(lock(&gate.state).in_flight.is_empty());
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let other = rcgen::generate_simple_self_signed(vec!["x".to_string()]).unwrap();
        let key = PrivateKeyDer::try_from(other.signing_key.serialize_der()).unwrap();
        let served = std::fs::read(fixture("server.pem")).unwrap();
        let chain = vec![CertificateDer::pem_slice_iter(&served).next().unwrap().unwrap()];
        assert!(certified(chain, &key).unwrap_err().contains("do not belong together"));
    }
}
