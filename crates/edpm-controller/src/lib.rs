//! `status controller`: `status report` kept live. This crate is the controller's shell: the
//! loop, its evaluations (`evaluate`), its HTTP endpoints (`probes`) and its Nova poller
//! (`nova`); what it alone asks of the API server is its `k8s` (`watch`, `leader`, `events`,
//! `review`), what it shares with the other programs `edpm_io::k8s`'s (`read`, `status`), and
//! its decisions are the pure `edpm_core::controller`: which NodeSets a change can move
//! (`touch`) and when to evaluate what (`schedule`). The CLI (`edpm-agent status controller`)
//! turns the flags into [`Options`] and calls [`run`].
//!
//! The loop (`control`) is one stream of triggers into the pure schedule and one evaluation
//! at a time, in controller-rs's shape: every trigger (a watched change, a Lease expiring,
//! Nova's answer, an input moving, leadership won or lost, a tick, SIGTERM) is a variant of
//! `schedule::Trigger`, `Schedule::on` says what to do next, and `evaluate::reconcile` does it
//! (a failure's retry is the loop's error policy).
//!
//! The cluster's evidence is watched (`k8s::watch`, one watch and store per kind of
//! `edpm_core::kinds`); each change names the NodeSets it can move; a burst of changes is
//! gathered (`--debounce-ms`, at most a second) into one evaluation of just those NodeSets
//! (10 at a time), by the same snapshot, model, `readiness` and `report::plan` as `status
//! report`, and only what changed is written (server-side apply, `k8s::status`). A node
//! agent's Lease expiring re-evaluates its NodeSet at that instant, with no event to say so.
//!
//! With `--leader-elect`, only the replica holding the leader Lease writes; the others
//! evaluate (so their metrics are current) and take over when it goes. A failed write keeps
//! what it touched and retries with a jittered backoff (1 s to 30 s); the next evaluation
//! works from the evidence, so nothing is lost.
//!
//! SIGTERM (or SIGINT) stops the loop: an evaluation in flight may go on for the grace period
//! (`--grace-period`: its writes are current), and is abandoned when it runs out (the writes
//! are idempotent applies, and the next leader evaluates everything); the leader Lease is then
//! released within what is left of the grace period, at least a second, and the process
//! exits 0. So it ends within the grace period and a second, however the API server behaves.
//!
//! `/healthz` says the loop is live, not that a sync is done: it is fed while the loop waits
//! (every second) and, during an evaluation, by every watch event that arrives (the loop keeps
//! taking them in, so a long first sync on a slow API, whose own writes come back as events,
//! keeps it healthy), every write begun and every batch done. A loop that makes none of these
//! for four request timeouts (`probes::STALE_SECS`, 60 s by default) fails it.

mod control;
mod error;
mod evaluate;
pub mod identities;
mod inputs;
pub mod k8s;
mod nova;
mod probes;
mod secure;

pub use error::Error;
pub use secure::CertFiles;

use std::sync::Arc;
use std::time::Duration;

use edpm_core::readiness::PhaseMap;
use edpm_core::settings::{Settings, SourceSpec};
use k8s::Client;
use probes::Metrics;

pub struct Options {
    pub metrics: Option<std::net::SocketAddr>,
    pub probes: Option<std::net::SocketAddr>,
    /// `/metrics` over TLS behind the API server's authentication and authorization
    /// (`--metrics-secure`, the default), or plain HTTP to anyone (`--metrics-secure=false`).
    pub metrics_security: MetricsSecurity,
    pub leader_elect: bool,
    pub leader_election_id: String,
    /// `--leader-elect-lease-duration`, `-renew-deadline`, `-retry-period`.
    pub leader_timings: k8s::leader::Timings,
    pub debounce: Duration,
    pub grace: Duration,
    pub crd_recheck: Duration,
    /// Ask Nova about the computes (`NovaComputeReady`), unless `--no-nova`.
    pub nova: Option<NovaPolling>,
    /// How often the delivered Secrets and ConfigMaps are rechecked (`--inputs-interval`;
    /// `None`: never).
    pub inputs_interval: Option<Duration>,
    /// Keep the node agents' identities of every NodeSet (`--node-identities`).
    pub identities: Option<identities::IdentityOptions>,
}

pub enum MetricsSecurity {
    Plain,
    /// With the certificate in these files, or a self-signed one (`None`).
    Secure(Option<CertFiles>),
}

pub struct NovaPolling {
    pub interval: Duration,
    pub timeout: Duration,
    /// `--nova-credentials`: a Secret to log in with instead of the cells' users.
    pub credentials: Option<String>,
}

/// Runs the controller until a signal or the end of its watches; returns why it stopped.
pub fn run(s: &Settings, settings: edpm_io::k8s::Settings, opts: Options) -> Result<&'static str, Error> {
    if !s.sources.contains(&SourceSpec::Kube) || s.sources.len() != 1 {
        return Err(Error::Usage(
            "status controller watches the cluster: give --source kube (and no directory source)".into(),
        ));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::failure(format!("cannot start the async runtime: {e}")))?;
    let phases = PhaseMap { overrides: s.service_phases.clone() };
    let caps = probes::connection_caps(raise_open_files());
    let metrics = Arc::new(Metrics::new());
    metrics.stale_after(settings.timeout);
    let stopped = rt.block_on(async {
        // SIGTERM and SIGINT are taken from here on: one that comes while the controller starts
        // (an API server not answering yet) stops it as one in the loop does, exit 0.
        let mut signals = control::signals()?;
        let started = control::unless_stopped(&mut signals, async {
            serve_probes(&opts, metrics.clone(), caps).await?;
            let client = Client::connect_watching(&settings).await?;
            serve_secure_metrics(&opts, &settings, metrics.clone(), caps.0).await?;
            Ok::<_, Error>(client)
        })
        .await?;
        let client = match started {
            Ok(client) => client,
            Err(reason) => return Ok(reason),
        };
        let selector = s.selector.as_ref().map(|s| s.as_str());
        control::control(&client, selector, &opts, &phases, &metrics, signals).await
    });
    // Tasks still waiting on the API (watches, an abandoned request) must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(200));
    stopped
}

/// Binds the probe listener and, unless it is served over TLS, the metrics one (one server when
/// they share an address).
async fn serve_probes(opts: &Options, metrics: Arc<Metrics>, caps: (usize, usize)) -> Result<(), Error> {
    const ALL: &[&str] = &["/metrics", "/healthz", "/readyz"];
    const METRICS: &[&str] = &["/metrics"];
    const PROBES: &[&str] = &["/healthz", "/readyz"];
    let plain_metrics = match opts.metrics_security {
        MetricsSecurity::Plain => opts.metrics,
        MetricsSecurity::Secure(_) => None,
    };
    let plan: Vec<(std::net::SocketAddr, &'static [&'static str])> = match (plain_metrics, opts.probes) {
        (Some(m), Some(p)) if m == p => vec![(m, ALL)],
        (m, p) => m.map(|m| (m, METRICS)).into_iter().chain(p.map(|p| (p, PROBES))).collect(),
    };
    for (addr, paths) in plan {
        let listener = bind(addr, paths).await?;
        // A server with `/metrics` on it holds as many as the metrics server; the probes' own,
        // fewer (the kubelet opens one at a time).
        let cap = if paths.contains(&"/metrics") { caps.0 } else { caps.1 };
        tokio::spawn(probes::serve(listener, metrics.clone(), paths, None, cap));
    }
    Ok(())
}

/// Binds `/metrics` over TLS (`--metrics-secure`), its requests checked with the API server
/// by a client of its own (bounded requests; the watching client has no read timeout).
async fn serve_secure_metrics(
    opts: &Options,
    settings: &edpm_io::k8s::Settings,
    metrics: Arc<Metrics>,
    cap: usize,
) -> Result<(), Error> {
    let (Some(addr), MetricsSecurity::Secure(files)) = (opts.metrics, &opts.metrics_security) else {
        return Ok(());
    };
    let certs = secure::Certs::new(files.clone()).map_err(Error::failure)?;
    let acceptor = secure::acceptor(Arc::new(certs)).map_err(Error::failure)?;
    let gate = secure::Gate::new(Client::connect(settings).await?);
    let listener = bind(addr, &["/metrics"]).await?;
    let secure = Arc::new(probes::Secure { acceptor, gate });
    tokio::spawn(probes::serve(listener, metrics, &["/metrics"], Some(secure), cap));
    Ok(())
}

async fn bind(addr: std::net::SocketAddr, paths: &[&str]) -> Result<tokio::net::TcpListener, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::failure(format!("cannot listen on {addr} for {}: {e}", paths.join(", "))))?;
    tracing::info!(%addr, paths = %paths.join(" "), "serving");
    Ok(listener)
}

/// Raises the soft limit of open files to the hard one (as Go programs do at start: the usual
/// soft limit of 1,024 is a relic of `select(2)`, which nothing here uses); returns the limit
/// now in force. The connections the HTTP servers hold are bounded by it
/// (`probes::connection_caps`).
fn raise_open_files() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) } != 0 {
        return 1024;
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        // SAFETY: setrlimit reads the struct it is given; raising the soft limit up to the
        // hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
            tracing::debug!(
                from = before,
                to = lim.rlim_cur,
                "raised the limit of open files to the hard limit"
            );
        } else {
            tracing::warn!(
                limit = before,
                error = %std::io::Error::last_os_error(),
                "cannot raise the limit of open files; the HTTP servers hold fewer connections"
            );
        }
    }
    lim.rlim_cur
}
