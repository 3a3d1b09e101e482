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
//!   scrape; an API error is answered 500 and not kept.

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
}

impl Verdict {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Verdict::Allowed => StatusCode::OK,
            Verdict::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Verdict::Forbidden(_) => StatusCode::FORBIDDEN,
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Verdict::Allowed => "ok\n".into(),
            Verdict::Unauthenticated(why) => format!("Unauthorized: {why}\n"),
            Verdict::Forbidden(user) => format!(
                "Forbidden: user {user:?} may not get /metrics (bind the ClusterRole edpm-agent-metrics-reader to it)\n"
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

/// Checks `/metrics` requests against the API server, keeping verdicts a while.
pub(crate) struct Gate {
    client: Client,
    verdicts: Mutex<HashMap<[u8; 32], (Instant, Verdict)>>,
}

impl Gate {
    pub(crate) fn new(client: Client) -> Gate {
        Gate { client, verdicts: Mutex::default() }
    }

    /// The verdict for a request with this `Authorization` header; `Err` (told, answered 500)
    /// when the API server cannot be asked.
    pub(crate) async fn check(&self, header: Option<&[u8]>) -> Result<Verdict, String> {
        let token = match bearer(header) {
            Ok(t) => t,
            Err(why) => return Ok(Verdict::Unauthenticated(why)),
        };
        let id = edpm_core::staging::sha256(token.as_bytes());
        if let Some((at, v)) = lock(&self.verdicts).get(&id)
            && at.elapsed() < VERDICT_TTL
        {
            return Ok(v.clone());
        }
        let verdict = match review::authenticate(&self.client, token).await.map_err(|e| e.to_string())? {
            None => Verdict::Unauthenticated("the API server does not authenticate this token"),
            Some(user) => {
                if review::authorize(&self.client, &user, "/metrics", "get")
                    .await
                    .map_err(|e| e.to_string())?
                {
                    Verdict::Allowed
                } else {
                    Verdict::Forbidden(edpm_core::excerpt::printable(&user.name).to_string())
                }
            }
        };
        let mut kept = lock(&self.verdicts);
        if kept.len() >= VERDICTS_MAX {
            kept.retain(|_, (at, _)| at.elapsed() < VERDICT_TTL);
            if kept.len() >= VERDICTS_MAX {
                kept.clear();
            }
        }
        kept.insert(id, (Instant::now(), verdict.clone()));
        Ok(verdict)
    }
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

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let other = rcgen::generate_simple_self_signed(vec!["x".to_string()]).unwrap();
        let key = PrivateKeyDer::try_from(other.signing_key.serialize_der()).unwrap();
        let served = std::fs::read(fixture("server.pem")).unwrap();
        let chain = vec![CertificateDer::pem_slice_iter(&served).next().unwrap().unwrap()];
        assert!(certified(chain, &key).unwrap_err().contains("do not belong together"));
    }
}
