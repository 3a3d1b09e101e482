//! The Kubernetes client both binaries use: [`Client`], built once per process from
//! [`Settings`] (kubeconfig or in-cluster configuration, per-request timeouts, a command's
//! deadline, one retry layer ([`retry`]) for every request, the credential plugin run bounded
//! ([`exec`])), and [`Cluster`], which owns a client and the one current-thread tokio runtime a
//! synchronous command runs it on. What more than one program asks of the API server is here
//! too: [`read`] (a snapshot, a Secret by name, resource versions), [`status`] (our status
//! objects, the node agents' Leases), [`apply`] (NovaExternalComputes). What one program asks
//! alone is its own: the controller's watches, Lease, Events and reviews
//! (`edpm_controller::k8s`), the node agent's own conditions and Lease (`edpm_node::api`).

pub mod apply;
pub mod exec;
pub mod identity;
pub mod read;
mod retry;
pub mod status;
pub use retry::jitter;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace to work in; `None` means the kubeconfig context's (or the pod's) namespace.
    pub namespace: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// The time one logical request may take, retries included.
    pub timeout: Duration,
    /// Attempts per request, including the first.
    pub attempts: u32,
    /// Where the node agents' Leases are read and created (`--lease-namespace`, default
    /// `edpm-node-lease`); the controller's own leader Lease stays in `namespace`.
    pub lease_namespace: String,
    /// When the whole command must be done (`status report --timeout`): every request, its
    /// retries and the credential plugin end by then, and retries use all of it.
    pub deadline: Option<std::time::Instant>,
}

/// The command's own time (`--timeout`) ran out: no request is sent or waited for past it.
#[derive(Debug, thiserror::Error)]
#[error("the command's --timeout ran out")]
pub struct DeadlinePassed;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot load Kubernetes client configuration: {message}; set KUBECONFIG, pass --kubeconfig, or run in a pod with a service account"
    )]
    Config { message: String },
    /// The configuration is there, but no client can be built from it (TLS set-up): the
    /// message says what is missing, not "set KUBECONFIG".
    #[error("cannot build a client for {url}: {message}")]
    Client { url: String, message: String },
    /// `code`: the API server's status code, when the failure was its answer.
    #[error("{action}: {message}{hint}")]
    Request { action: String, message: String, hint: String, code: Option<u16> },
}

impl Error {
    /// The API server's status code, when the failure was its answer.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Request { code, .. } => *code,
            _ => None,
        }
    }
}

/// A connected API client: the kube client, the namespace it works in, and its settings.
#[derive(Clone)]
pub struct Client {
    kube: kube::Client,
    namespace: String,
    settings: Settings,
    /// The server's URL and the CA the client trusts (DER), as its configuration gave them:
    /// what the node agents' kubeconfigs default to.
    server: String,
    ca: Option<Vec<Vec<u8>>>,
}

impl Client {
    /// Builds the client. Must run inside a tokio runtime (the retry layer's buffer spawns
    /// its worker there).
    pub async fn connect(settings: &Settings) -> Result<Client, Error> {
        Client::connect_with(settings, false).await
    }

    /// A client for long-running watches: no read timeout (a watch is quiet between events
    /// and bookmarks; the server ends it at its own timeout), the connect and write timeouts
    /// kept.
    pub async fn connect_watching(settings: &Settings) -> Result<Client, Error> {
        Client::connect_with(settings, true).await
    }

    async fn connect_with(settings: &Settings, watching: bool) -> Result<Client, Error> {
        let config_error = |message: String| Error::Config { message };
        let options = KubeConfigOptions { context: settings.context.clone(), ..Default::default() };
        let mut config = match &settings.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| config_error(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| config_error(e.to_string()))?
            }
            None if settings.context.is_some() => {
                kube::Config::from_kubeconfig(&options).await.map_err(|e| config_error(e.to_string()))?
            }
            None => kube::Config::infer().await.map_err(|e| config_error(e.to_string()))?,
        };
        // A CA that is no certificate is a configuration error, named here: used, it fails the
        // handshake with a riddle; over http it would pass unnoticed.
        if let Some(certs) = &config.root_cert {
            let place = match &settings.kubeconfig {
                Some(p) => format!(
                    "kubeconfig {}: the cluster's certificate-authority(-data){}",
                    p.display(),
                    settings.context.as_deref().map(|c| format!(" (context {c})")).unwrap_or_default()
                ),
                None => {
                    "the kubeconfig's (or the service account's) cluster certificate authority".to_string()
                }
            };
            crate::tls::check_der(certs.iter().map(Vec::as_slice), &place).map_err(config_error)?;
        }
        // The credential plugin runs bounded, in our words when it fails (`exec`).
        if let Some(exec) = config.auth_info.exec.as_mut() {
            let bound = settings.deadline.map_or(settings.timeout, |d| {
                d.saturating_duration_since(std::time::Instant::now()).min(settings.timeout)
            });
            exec::wrap(exec, bound.max(Duration::from_millis(100))).map_err(config_error)?;
        }
        config.connect_timeout = Some(settings.timeout);
        config.read_timeout = if watching { None } else { Some(settings.timeout) };
        config.write_timeout = Some(settings.timeout);
        // Retries happen in one place, ours (`retry`): kube's own layer would multiply them.
        config.default_retry = false;
        // Plain HTTP verifies no certificate: an empty trust store keeps kube from asking the
        // system for roots a minimal host (no ca-certificates) does not have. A kubeconfig
        // with its own certificate-authority-data never asks either.
        if config.cluster_url.scheme_str() == Some("http") && config.root_cert.is_none() {
            config.root_cert = Some(Vec::new());
        }
        let namespace = settings.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let url = config.cluster_url.to_string();
        let ca = config.root_cert.clone().filter(|c| !c.is_empty());
        // kube runs the credential plugin while it builds the client: its failure in our words.
        let kube = retry::client(config, settings).map_err(|e| match exec::message_of(&e) {
            Some(message) => Error::Client { url: url.clone(), message },
            None => client_error(&url, &e.to_string()),
        })?;
        Ok(Client {
            kube,
            namespace,
            settings: settings.clone(),
            server: url.trim_end_matches('/').to_string(),
            ca,
        })
    }

    pub fn kube(&self) -> kube::Client {
        self.kube.clone()
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The API server's URL, as the configuration gave it.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The CA certificates (DER) the configuration trusts, when it names any.
    pub fn ca(&self) -> Option<&[Vec<u8>]> {
        self.ca.as_deref()
    }

    /// The namespace of the node agents' Leases.
    pub fn lease_namespace(&self) -> &str {
        &self.settings.lease_namespace
    }

    /// Runs one logical request within the configured time. The retry layer below retries
    /// throttling, server errors and transport failures and stops before this bound, so a
    /// server that keeps answering 503 is reported by its own answer; this bound catches a
    /// server that trickles or never answers.
    pub async fn within_time<T>(
        &self,
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        // The layer's budget is the timeout; one more attempt's worth of slack keeps its own
        // last answer in view. A command deadline cuts it shorter.
        // With a command deadline the retries may use all of it (each attempt is still cut
        // by the connect/read/write timeouts), so the deadline is the bound.
        let bound = self.settings.timeout * 2;
        match self.left() {
            Some(left) if left.is_zero() => Err(kube::Error::Service(Box::new(DeadlinePassed))),
            Some(left) => match tokio::time::timeout(left, fut).await {
                Ok(r) => r,
                Err(_) => Err(kube::Error::Service(Box::new(DeadlinePassed))),
            },
            None => match tokio::time::timeout(bound, fut).await {
                Ok(r) => r,
                Err(_) => Err(kube::Error::Service(format!("no response within {:?}", bound).into())),
            },
        }
    }

    /// What is left of the command's time, when it has a deadline.
    pub fn left(&self) -> Option<Duration> {
        self.settings.deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()))
    }

    /// The error for a failed request, naming the request and what to do.
    pub fn error(&self, action: impl Into<String>, e: &kube::Error) -> Error {
        request_error(action.into(), e)
    }
}

/// Why no client could be built, in words that say what to do: a missing system trust store is
/// the usual cause on a minimal host.
fn client_error(url: &str, message: &str) -> Error {
    let message = if message.contains("No CA certificates were loaded from the system") {
        "the kubeconfig gives no certificate-authority for this https server and the system has no CA certificates to verify it with; put the cluster's CA in the kubeconfig (certificate-authority-data) or install the system's CA certificates (ca-certificates)".to_string()
    } else {
        message.to_string()
    };
    Error::Client { url: url.to_string(), message }
}

/// A client for synchronous callers: owns the current-thread runtime it runs on.
pub struct Cluster {
    /// Taken out only by `drop`, to shut it down without waiting.
    rt: std::mem::ManuallyDrop<tokio::runtime::Runtime>,
    client: Client,
}

impl Drop for Cluster {
    /// A request still on a blocking thread (a credential plugin being run) is not waited
    /// for: the command is over, and edpm-agent's exit reaches the plugin's runner (its
    /// parent-death signal), which kills the plugin with its process group.
    fn drop(&mut self) {
        // SAFETY: `rt` is taken once, here, and never used again.
        let rt = unsafe { std::mem::ManuallyDrop::take(&mut self.rt) };
        rt.shutdown_background();
    }
}

impl Cluster {
    pub fn connect(settings: &Settings) -> Result<Cluster, Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Config { message: format!("cannot start the async runtime: {e}") })?;
        let client = rt.block_on(Client::connect(settings))?;
        Ok(Cluster { rt: std::mem::ManuallyDrop::new(rt), client })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.rt.block_on(fut)
    }
}

fn request_error(action: String, e: &kube::Error) -> Error {
    if let Some(message) = exec::message_of(e) {
        let hint =
            "; check the plugin's command in the kubeconfig (users[].user.exec) and that it works on its own"
                .to_string();
        return Error::Request { action, message, hint, code: None };
    }
    let (message, hint) = match e {
        kube::Error::Api(s) => {
            let hint = match s.code {
                401 => "; the credentials were rejected: refresh the kubeconfig token",
                403 => {
                    "; RBAC does not let this account do it: grant the verb and resource the answer names in a Role bound to the account, or use the account meant for it"
                }
                429 | 500..=599 => "; the API server kept failing after retries: try again later",
                _ => "",
            };
            (format!("API server answered {} {}: {}", s.code, s.reason, s.message), hint)
        }
        kube::Error::Service(s) if s.downcast_ref::<DeadlinePassed>().is_some() => (
            "the command's --timeout ran out before it was answered".to_string(),
            "; give a longer --timeout, or check why the API server is slow",
        ),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            (error_chain(e), "; check that the API server is reachable and the kubeconfig points at it")
        }
        _ => (error_chain(e), ""),
    };
    let code = if let kube::Error::Api(s) = e { Some(s.code) } else { None };
    Error::Request { action, message, hint: hint.to_string(), code }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}
