//! `status controller`: `status report` kept live. This crate is the controller's shell: the
//! loop, its evaluations (`evaluate`), its HTTP endpoints (`probes`) and its Nova poller
//! (`nova`); what it alone asks of the API server is its `k8s` (`watch`, `leader`, `events`,
//! `review`), what it shares with the other programs `edpm_io::k8s`'s (`read`, `status`), and
//! its decisions are the pure `edpm_core::controller`: which NodeSets a change can move
//! (`touch`) and when to evaluate what (`schedule`). The CLI (`edpm-agent status controller`)
//! turns the flags into [`Options`] and calls [`run`].
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
//! released within what is left of the grace period, at least [`RELEASE_MIN`], and the process
//! exits 0. So it ends within the grace period and a second, however the API server behaves.
//!
//! `/healthz` says the loop is live, not that a sync is done: it is fed while the loop waits
//! (every second) and, during an evaluation, by every watch event that arrives (the loop keeps
//! taking them in, so a long first sync on a slow API, whose own writes come back as events,
//! keeps it healthy), every write begun and every batch done. A loop that makes none of these
//! for four request timeouts (`probes::STALE_SECS`, 60 s by default) fails it.

mod error;
mod evaluate;
mod inputs;
pub mod k8s;
mod nova;
mod probes;
mod secure;

pub use error::Error;
pub use secure::CertFiles;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use edpm_core::controller::schedule::Schedule;
use edpm_core::controller::touch::Touch;
use edpm_core::readiness::PhaseMap;
use edpm_core::settings::{Settings, SourceSpec};
use evaluate::{Batches, Cx};
use k8s::Client;
use k8s::watch::{self, WatchEvent};
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

/// What the leader Lease's release gets at least at shutdown, even when the evaluation in
/// flight used the whole grace period.
const RELEASE_MIN: Duration = Duration::from_secs(1);

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
    let metrics = Arc::new(Metrics::new());
    metrics.stale_after(settings.timeout);
    let stopped = rt.block_on(async {
        serve_probes(&opts, metrics.clone()).await?;
        let client = Client::connect_watching(&settings).await?;
        serve_secure_metrics(&opts, &settings, metrics.clone()).await?;
        control(&client, s.selector.as_ref().map(|s| s.as_str()), &opts, &phases, &metrics).await
    });
    // Tasks still waiting on the API (watches, an abandoned request) must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(200));
    stopped
}

/// Binds the probe listener and, unless it is served over TLS, the metrics one (one server when
/// they share an address).
async fn serve_probes(opts: &Options, metrics: Arc<Metrics>) -> Result<(), Error> {
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
        tokio::spawn(probes::serve(listener, metrics.clone(), paths, None));
    }
    Ok(())
}

/// Binds `/metrics` over TLS (`--metrics-secure`), its requests checked with the API server
/// by a client of its own (bounded requests; the watching client has no read timeout).
async fn serve_secure_metrics(
    opts: &Options,
    settings: &edpm_io::k8s::Settings,
    metrics: Arc<Metrics>,
) -> Result<(), Error> {
    let (Some(addr), MetricsSecurity::Secure(files)) = (opts.metrics, &opts.metrics_security) else {
        return Ok(());
    };
    let certs = secure::Certs::new(files.clone()).map_err(Error::failure)?;
    let acceptor = secure::acceptor(Arc::new(certs)).map_err(Error::failure)?;
    let gate = secure::Gate::new(Client::connect(settings).await?);
    let listener = bind(addr, &["/metrics"]).await?;
    let secure = Arc::new(probes::Secure { acceptor, gate });
    tokio::spawn(probes::serve(listener, metrics, &["/metrics"], Some(secure)));
    Ok(())
}

async fn bind(addr: std::net::SocketAddr, paths: &[&str]) -> Result<tokio::net::TcpListener, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::failure(format!("cannot listen on {addr} for {}: {e}", paths.join(", "))))?;
    tracing::info!(%addr, paths = %paths.join(" "), "serving");
    Ok(listener)
}

/// The loop's clock for the schedule: time since the loop began.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn at(&self, t: Option<Duration>) -> Option<Instant> {
        t.map(|t| self.0 + t)
    }
}

/// SIGTERM and SIGINT, either of which stops the loop.
struct Stop {
    term: Signal,
    int: Signal,
}

impl Stop {
    fn new() -> Result<Stop, Error> {
        let listen = |kind: SignalKind, name: &str| {
            tokio::signal::unix::signal(kind)
                .map_err(|e| Error::failure(format!("cannot watch for {name}: {e}")))
        };
        Ok(Stop {
            term: listen(SignalKind::terminate(), "SIGTERM")?,
            int: listen(SignalKind::interrupt(), "SIGINT")?,
        })
    }

    /// The name of the first of the two to arrive.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// The loop; returns why it stopped.
async fn control(
    client: &Client,
    selector: Option<&str>,
    opts: &Options,
    phases: &PhaseMap,
    metrics: &Metrics,
) -> Result<&'static str, Error> {
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let stores = watch::start(client, selector, opts.crd_recheck, tx).await?;
    tracing::info!(namespace = client.namespace(), kinds = %stores.kinds().join(" "), "watching");
    let identity = identity();
    let recorder = k8s::events::Events::new(client, &identity);
    let mut leadership = lead(client, opts, &identity).await?;
    let mut schedule = Schedule::new(opts.debounce, leadership.leads());
    metrics.set_leader(schedule.leads());
    let mut stop = Stop::new()?;
    // Nova's answers, polled; a change that could move a verdict re-evaluates the NodeSets
    // that run nova.
    let (nova, mut nova_changed) = nova::Poller::start_polling(opts.nova.as_ref());
    let clock = Clock(Instant::now());
    let mut recheck = inputs::Recheck::new(opts.inputs_interval);
    // The heartbeat of /healthz, and the leadership guard's verdict (see k8s::leader).
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // When a signal asked to stop: the grace period ends then.
    let mut stopping: Option<Instant> = None;
    let reason = loop {
        let (due, expiry) = (clock.at(schedule.due()), clock.at(schedule.next_expiry()));
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break "the watches ended" };
                on_event(ev, &stores, &mut schedule, metrics, clock.now());
            }
            () = sleep_until(due), if due.is_some() => {
                if !stores.synced() {
                    schedule.wait_for_sync(); // the last Synced schedules everything
                    continue;
                }
                let Some(touched) = schedule.take_due(clock.now()) else { continue };
                let skipped = std::cell::Cell::new(false);
                let cx = Cx { client, events: &recorder, stores: &stores, phases, metrics, leadership: &leadership, skipped: &skipped, nova: nova.as_ref() };
                let run = Run { cx: &cx, events: &mut events, schedule: &mut schedule, clock: &clock, grace: opts.grace };
                if let Err((signal, deadline)) = run.evaluate(&touched, &mut stop).await {
                    stopping = Some(deadline);
                    break signal;
                }
                if skipped.get() && schedule.writes_skipped() {
                    metrics.set_leader(false);
                }
            }
            () = sleep_until(expiry), if expiry.is_some() => schedule.expire(clock.now()),
            changed = leadership.changed() => {
                if changed.is_err() {
                    break "leader election ended";
                }
                leadership_moved(&leadership, &mut schedule, metrics, &identity, clock.now());
            }
            Some(()) = nova_changed.recv() => nova_answered(nova.as_ref(), &mut schedule, clock.now()),
            signal = stop.recv() => break signal,
            _ = tick.tick() => {
                // The loop is waiting, not stuck.
                metrics.tick();
                leadership_moved(&leadership, &mut schedule, metrics, &identity, clock.now());
                inputs_rechecked(&mut recheck, client, &stores, &mut schedule, clock.now()).await;
            }
        }
    };
    tracing::info!(reason, "stopping");
    metrics.set_leader(false);
    release(leadership, opts, stopping.unwrap_or_else(|| Instant::now() + opts.grace)).await;
    Ok(reason)
}

/// Nova's answer changed: the NodeSets that run nova are evaluated now.
/// The recheck of delivered inputs (`inputs`): a changed Secret or ConfigMap evaluates the
/// NodeSets it was delivered to now.
async fn inputs_rechecked(
    recheck: &mut inputs::Recheck,
    client: &Client,
    stores: &watch::Stores,
    schedule: &mut Schedule,
    now: Duration,
) {
    let moved = recheck.tick(client, || stores.delivered_inputs()).await;
    if !moved.is_empty() {
        tracing::info!(nodesets = moved.len(), "a delivered Secret or ConfigMap changed");
        schedule.now(Touch::NodeSets(moved), now);
    }
}

fn nova_answered(nova: Option<&nova::Poller>, schedule: &mut Schedule, now: Duration) {
    let sets = nova.map(nova::Poller::nodesets).unwrap_or_default();
    tracing::debug!(nodesets = sets.len(), "Nova's answer changed");
    schedule.now(Touch::NodeSets(sets), now);
}

/// With `--leader-elect`, the leader election under way; else a leadership always held.
async fn lead(client: &Client, opts: &Options, identity: &str) -> Result<k8s::leader::Leadership, Error> {
    Ok(if opts.leader_elect {
        k8s::leader::elect(client, &opts.leader_election_id, identity, opts.leader_timings).await?
    } else {
        k8s::leader::Leadership::always()
    })
}

/// Releases the leader Lease (with `--leader-elect`) by the grace period's `deadline`, giving
/// it at least [`RELEASE_MIN`].
async fn release(leadership: k8s::leader::Leadership, opts: &Options, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now()).max(RELEASE_MIN);
    if opts.leader_elect && !leadership.release(left).await {
        tracing::warn!(
            "the leader Lease was not released within the grace period; it is taken over after its duration"
        );
    }
}

/// One evaluation under way, and what the loop keeps doing meanwhile.
struct Run<'r, 'c> {
    cx: &'r Cx<'c>,
    events: &'r mut UnboundedReceiver<WatchEvent>,
    schedule: &'r mut Schedule,
    clock: &'r Clock,
    grace: Duration,
}

impl Run<'_, '_> {
    /// Evaluates `touched`. While it runs, the watches' events are still taken in (they are
    /// progress, and what they touch is evaluated next), and a signal is heard at once: the
    /// evaluation then gets the grace period to finish (its writes are current) and is
    /// abandoned after it (the writes are idempotent applies, and the next leader evaluates
    /// everything). `Err`: the signal that stopped the loop, and when its grace period ends.
    async fn evaluate(self, touched: &Touch, stop: &mut Stop) -> Result<(), (&'static str, Instant)> {
        let Run { cx, events, schedule, clock, grace } = self;
        let mut done: Batches = Vec::new();
        let result = {
            let mut eval = std::pin::pin!(evaluate::in_batches(cx, touched, &mut done));
            let mut watching = true;
            let signal = loop {
                tokio::select! {
                    r = &mut eval => break Ok(r),
                    ev = events.recv(), if watching => match ev {
                        Some(ev) => on_event(ev, cx.stores, schedule, cx.metrics, clock.now()),
                        None => watching = false,
                    },
                    signal = stop.recv() => break Err(signal),
                }
            };
            match signal {
                Ok(result) => result,
                Err(signal) => {
                    let deadline = Instant::now() + grace;
                    if tokio::time::timeout_at(deadline, &mut eval).await.is_err() {
                        tracing::warn!(
                            ?grace,
                            "the evaluation in flight did not finish within the grace period; abandoned (the next leader evaluates everything)"
                        );
                    }
                    return Err((signal, deadline));
                }
            }
        };
        for (batch, expiries, at) in done {
            schedule.evaluated(&batch, expiries, at.duration_since(clock.0));
        }
        match result {
            Ok(()) => schedule.succeeded(),
            Err(e) => {
                let wait = schedule.failed(touched.clone(), clock.now(), k8s::jitter);
                tracing::warn!(error = %e, retry_in = ?wait, "evaluation failed; retrying");
            }
        }
        Ok(())
    }
}

/// Takes in one watch event: what it touches is gathered for the next evaluation.
fn on_event(
    ev: WatchEvent,
    stores: &watch::Stores,
    schedule: &mut Schedule,
    metrics: &Metrics,
    now: Duration,
) {
    // An event is the watches and this loop at work (during an evaluation too).
    metrics.tick();
    match ev {
        WatchEvent::Changed { kind, reach } => {
            let t = reach.touch(stores);
            tracing::trace!(kind, touched = ?t, "changed");
            schedule.changed(t, now);
        }
        WatchEvent::Synced { kind } => {
            tracing::debug!(kind, "listed");
            if stores.synced() && !metrics.synced.swap(true, Ordering::AcqRel) {
                tracing::info!("every watched kind listed: evaluating everything");
            }
            schedule.relisted(now);
        }
        WatchEvent::Failed { kind, code, error } => {
            metrics.watch_restarted(kind);
            metrics.api_error("watch", code);
            tracing::warn!(kind, error = %error, "watch failed; it backs off and resumes or lists again");
        }
    }
}

/// Notes this replica's leadership as the manager or the guard says it now.
fn leadership_moved(
    leadership: &k8s::leader::Leadership,
    schedule: &mut Schedule,
    metrics: &Metrics,
    identity: &str,
    now: Duration,
) {
    let leads = leadership.leads();
    if leads == schedule.leads() {
        return;
    }
    schedule.leadership(leads, now);
    metrics.set_leader(leads);
    tracing::info!(leading = leads, identity, "leadership changed");
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// This replica's name in the leader Lease: the host name (a pod's name), with the process id.
fn identity() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let host = if ok { String::from_utf8_lossy(&buf[..end]).into_owned() } else { String::new() };
    format!("{}-{}", if host.is_empty() { "edpm-agent" } else { &host }, std::process::id())
}
