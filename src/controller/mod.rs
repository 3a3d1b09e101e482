//! `status controller`: `status report` kept live. The cluster's evidence is watched
//! (`k8s::watch`, one watch and store per kind); each change names the NodeSets it can move
//! (`readiness::touch`); a burst of changes is gathered (`--debounce-ms`, at most a second)
//! into one evaluation of just those NodeSets (10 at a time), by the same snapshot, model, `readiness` and
//! `report::plan` as `status report`, and only what changed is written (server-side apply,
//! `k8s::status`). A node agent's Lease expiring re-evaluates its NodeSet at that instant,
//! with no event to say so.
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

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::output::write_out;
use super::{AppError, Context};
use crate::shell::exit::Exit;
use crate::shell::k8s::watch::{self, WatchEvent};
use crate::shell::k8s::{self, Client};
use crate::shell::probes::{self, Metrics};
use edpm_core::condition::Time;
use edpm_core::readiness::touch::{self, Touch};
use edpm_core::readiness::{self, PhaseMap};
use edpm_core::settings::SourceSpec;

pub(crate) struct Options {
    pub(crate) metrics: Option<std::net::SocketAddr>,
    pub(crate) probes: Option<std::net::SocketAddr>,
    pub(crate) leader_elect: bool,
    pub(crate) leader_election_id: String,
    pub(crate) debounce: Duration,
    pub(crate) grace: Duration,
    pub(crate) crd_recheck: Duration,
    /// Ask Nova about the computes (`NovaComputeReady`), unless `--no-nova`.
    pub(crate) nova: Option<NovaPolling>,
}

pub(crate) struct NovaPolling {
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
    /// `--nova-credentials`: a Secret to log in with instead of the cells' users.
    pub(crate) credentials: Option<String>,
}

/// The longest a change waits for the burst it belongs to to end.
const MAX_GATHER: Duration = Duration::from_secs(1);
/// Events sent per evaluation at most: a data plane failing at once is one story, not 10,000
/// Events (the status objects hold every node's conditions).
const EVENTS_PER_EVALUATION: usize = 50;
/// What the leader Lease's release gets at least at shutdown, even when the evaluation in
/// flight used the whole grace period.
const RELEASE_MIN: Duration = Duration::from_secs(1);
/// Backoff after a failed evaluation or write.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

pub(super) fn run(cx: &Context, opts: Options, out: &mut dyn Write) -> Result<Exit, AppError> {
    let s = cx.settings;
    if !s.sources.contains(&SourceSpec::Kube) || s.sources.len() != 1 {
        return Err(AppError::usage(
            "status controller watches the cluster: give --source kube (and no directory source)",
        ));
    }
    let settings = cx.k8s_settings();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AppError::failure(format!("cannot start the async runtime: {e}")))?;
    let phases = PhaseMap { overrides: s.service_phases.clone() };
    let metrics = Arc::new(Metrics::new());
    metrics.stale_after(settings.timeout);
    let stopped = rt.block_on(async {
        serve_probes(&opts, metrics.clone()).await?;
        let client = Client::connect_watching(&settings).await?;
        control(&client, s.selector.as_ref().map(|s| s.as_str()), &opts, &phases, &metrics).await
    });
    // Tasks still waiting on the API (watches, an abandoned request) must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(200));
    let stopped = stopped?;
    write_out(out, &format!("edpm-agent status controller: stopped ({stopped})\n"))?;
    Ok(Exit::Success)
}

/// Binds the metrics and probe listeners (one server when they share an address).
async fn serve_probes(opts: &Options, metrics: Arc<Metrics>) -> Result<(), AppError> {
    const ALL: &[&str] = &["/metrics", "/healthz", "/readyz"];
    const METRICS: &[&str] = &["/metrics"];
    const PROBES: &[&str] = &["/healthz", "/readyz"];
    let plan: Vec<(std::net::SocketAddr, &'static [&'static str])> = match (opts.metrics, opts.probes) {
        (Some(m), Some(p)) if m == p => vec![(m, ALL)],
        (m, p) => m.map(|m| (m, METRICS)).into_iter().chain(p.map(|p| (p, PROBES))).collect(),
    };
    for (addr, paths) in plan {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            AppError::failure(format!("cannot listen on {addr} for {}: {e}", paths.join(", ")))
        })?;
        tracing::info!(%addr, paths = %paths.join(" "), "serving");
        tokio::spawn(probes::serve(listener, metrics.clone(), paths));
    }
    Ok(())
}

/// The loop; returns why it stopped.
async fn control(
    client: &Client,
    selector: Option<&str>,
    opts: &Options,
    phases: &PhaseMap,
    metrics: &Metrics,
) -> Result<&'static str, AppError> {
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let stores = watch::start(client, selector, opts.crd_recheck, tx).await?;
    tracing::info!(namespace = client.namespace(), kinds = %stores.kinds().join(" "), "watching");
    let identity = identity();
    let recorder = k8s::events::Events::new(client, &identity);
    let mut leadership = if opts.leader_elect {
        k8s::leader::elect(client, &opts.leader_election_id, &identity).await?
    } else {
        k8s::leader::Leadership::always()
    };
    let mut led = leadership.leads();
    metrics.set_leader(led);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| AppError::failure(format!("cannot watch for SIGTERM: {e}")))?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| AppError::failure(format!("cannot watch for SIGINT: {e}")))?;

    // Nova's answers, polled (`shell::app::nova`); a change that could move a verdict
    // re-evaluates the NodeSets that run nova.
    let (nova_tx, mut nova_changed) = tokio::sync::mpsc::unbounded_channel();
    let nova = opts
        .nova
        .as_ref()
        .map(|p| super::nova::Poller::start(p.interval, p.timeout, p.credentials.clone(), nova_tx));
    let mut pending = Touch::none();
    let mut gather: Option<(Instant, Instant)> = None; // (first change, due)
    // NodeSet → when its first node agent Lease expires ("": a Lease naming no NodeSet).
    let mut expiries: BTreeMap<String, Instant> = BTreeMap::new();
    let mut backoff = RETRY_MIN;
    // The heartbeat of /healthz, and the leadership guard's verdict (see k8s::leader).
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // When a signal asked to stop: the grace period ends then.
    let mut stopping: Option<Instant> = None;
    let reason = loop {
        let due = gather.map(|(_, d)| d);
        let expiry = expiries.values().min().copied();
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break "the watches ended" };
                on_event(ev, &stores, &mut pending, &mut gather, metrics, opts.debounce);
            }
            _ = sleep_until(due), if due.is_some() => {
                gather = None;
                if !stores.synced() {
                    continue; // the last Synced schedules everything
                }
                let touched = std::mem::replace(&mut pending, Touch::none());
                let skipped = std::cell::Cell::new(false);
                let cx = Cx {
                    client,
                    events: &recorder,
                    stores: &stores,
                    phases,
                    metrics,
                    leadership: &leadership,
                    skipped: &skipped,
                    nova: nova.as_ref(),
                };
                // While it runs, the watches' events are still taken in (they are progress, and
                // what they touch is evaluated next), and a signal is heard at once.
                let finished = {
                    let mut eval = std::pin::pin!(evaluate_in_batches(&cx, &touched, &mut expiries));
                    let mut watching = true;
                    let signal = loop {
                        tokio::select! {
                            r = &mut eval => break Ok(r),
                            ev = events.recv(), if watching => match ev {
                                Some(ev) => on_event(ev, &stores, &mut pending, &mut gather, metrics, opts.debounce),
                                None => watching = false,
                            },
                            _ = term.recv() => break Err("SIGTERM"),
                            _ = int.recv() => break Err("SIGINT"),
                        }
                    };
                    if signal.is_err() {
                        let deadline = Instant::now() + opts.grace;
                        stopping = Some(deadline);
                        if tokio::time::timeout_at(deadline, &mut eval).await.is_err() {
                            tracing::warn!(
                                grace = ?opts.grace,
                                "the evaluation in flight did not finish within the grace period; abandoned (the next leader evaluates everything)"
                            );
                        }
                    }
                    signal
                };
                let result = match finished {
                    Ok(r) => r,
                    Err(signal) => break signal,
                };
                if skipped.get() && led {
                    // Writes were left out while leadership was unconfirmed, perhaps only for a
                    // moment: as not leading, so that leading again looks at everything.
                    led = false;
                    metrics.set_leader(false);
                }
                match result {
                    Ok(()) => backoff = RETRY_MIN,
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?backoff, "evaluation failed; retrying");
                        pending.add(touched);
                        let now = Instant::now();
                        gather = Some((now, now + k8s::jitter(backoff)));
                        backoff = (backoff * 2).min(RETRY_MAX);
                    }
                }
            }
            _ = sleep_until(expiry), if expiry.is_some() => {
                let now = Instant::now();
                let expired: Vec<String> =
                    expiries.iter().filter(|(_, t)| **t <= now).map(|(s, _)| s.clone()).collect();
                for set in expired {
                    expiries.remove(&set);
                    pending.add(if set.is_empty() { Touch::All } else { Touch::NodeSets([set].into()) });
                }
                gather = Some(schedule(gather, Duration::ZERO));
            }
            changed = leadership.changed() => {
                if changed.is_err() {
                    break "leader election ended";
                }
                if leadership_moved(&leadership, &mut led, metrics, &identity) {
                    pending.add(Touch::All);
                    gather = Some(schedule(gather, Duration::ZERO));
                }
            }
            Some(()) = nova_changed.recv() => {
                let sets = nova.as_ref().map(super::nova::Poller::nodesets).unwrap_or_default();
                tracing::debug!(nodesets = sets.len(), "Nova's answer changed");
                if !sets.is_empty() {
                    pending.add(Touch::NodeSets(sets.into_iter().collect()));
                    gather = Some(schedule(gather, Duration::ZERO));
                }
            }
            _ = term.recv() => break "SIGTERM",
            _ = int.recv() => break "SIGINT",
            _ = tick.tick() => {
                // The loop is waiting, not stuck.
                metrics.tick();
                if leadership_moved(&leadership, &mut led, metrics, &identity) {
                    pending.add(Touch::All);
                    gather = Some(schedule(gather, Duration::ZERO));
                }
            }
        }
    };
    tracing::info!(reason, "stopping");
    metrics.set_leader(false);
    let deadline = stopping.unwrap_or_else(|| Instant::now() + opts.grace);
    let left = deadline.saturating_duration_since(Instant::now()).max(RELEASE_MIN);
    if opts.leader_elect && !leadership.release(left).await {
        tracing::warn!(
            "the leader Lease was not released within the grace period; it is taken over after its duration"
        );
    }
    Ok(reason)
}

/// Takes in one watch event: what it touches is gathered for the next evaluation.
fn on_event(
    ev: WatchEvent,
    stores: &watch::Stores,
    pending: &mut Touch,
    gather: &mut Option<(Instant, Instant)>,
    metrics: &Metrics,
    debounce: Duration,
) {
    // An event is the watches and this loop at work (during an evaluation too).
    metrics.tick();
    match ev {
        WatchEvent::Changed { kind, reach } => {
            let t = reach.touch(stores);
            tracing::trace!(kind, touched = ?t, "changed");
            if !t.is_empty() {
                pending.add(t);
                *gather = Some(schedule(*gather, debounce));
            }
        }
        WatchEvent::Synced { kind } => {
            tracing::debug!(kind, "listed");
            if stores.synced() && !metrics.synced.swap(true, Ordering::AcqRel) {
                tracing::info!("every watched kind listed: evaluating everything");
            }
            // A relist may have missed deletions' events: look at everything.
            pending.add(Touch::All);
            *gather = Some(schedule(*gather, debounce));
        }
        WatchEvent::Failed { kind, code, error } => {
            metrics.watch_restarted(kind);
            metrics.api_error("watch", code);
            tracing::warn!(kind, error = %error, "watch failed; it backs off and resumes or lists again");
        }
    }
}

/// Notes a change of this replica's leadership (the manager's or the guard's); true when it
/// has just become the leader, which must then look at everything.
fn leadership_moved(
    leadership: &k8s::leader::Leadership,
    led: &mut bool,
    metrics: &Metrics,
    identity: &str,
) -> bool {
    let now = leadership.leads();
    if now == *led {
        return false;
    }
    *led = now;
    metrics.set_leader(now);
    tracing::info!(leading = now, identity, "leadership changed");
    now
}

/// When a gathering that saw a change now ends: `debounce` after the last change, but never
/// more than [`MAX_GATHER`] after the first.
fn schedule(gather: Option<(Instant, Instant)>, debounce: Duration) -> (Instant, Instant) {
    let now = Instant::now();
    let first = gather.map_or(now, |(f, _)| f);
    (first, (now + debounce).min(first + MAX_GATHER))
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

/// What every evaluation works with.
struct Cx<'a> {
    client: &'a Client,
    events: &'a k8s::events::Events,
    stores: &'a watch::Stores,
    phases: &'a PhaseMap,
    metrics: &'a Metrics,
    /// Checked before every write: a replica that may have lost the Lease stops at once.
    leadership: &'a k8s::leader::Leadership,
    /// Set when an evaluation left its writes out for want of leadership.
    skipped: &'a std::cell::Cell<bool>,
    nova: Option<&'a super::nova::Poller>,
}

/// NodeSets evaluated at once, when many are touched (the first sync, a relist, a new leader,
/// a second of changes all over the data plane): an evaluation's memory grows with its nodes,
/// and at 10,000 nodes one evaluation of all more than doubled the process's resident memory,
/// which the allocator then keeps.
const BATCH: usize = 10;

/// Evaluates the touched NodeSets, [`BATCH`] at a time, and records when each one's first
/// node agent Lease expires.
async fn evaluate_in_batches(
    cx: &Cx<'_>,
    touched: &Touch,
    expiries: &mut BTreeMap<String, Instant>,
) -> Result<(), AppError> {
    let names: Vec<String> = match touched {
        Touch::All => {
            let names = cx.stores.group_names();
            let ns = cx.client.namespace();
            cx.metrics.forget_nodesets(ns, |set| names.binary_search_by(|n| n.as_str().cmp(set)).is_err());
            // A NodeSet deleted while the watch was down has no event of its own.
            if let Some(p) = cx.nova {
                p.retain(&names);
            }
            expiries.clear();
            names
        }
        Touch::NodeSets(sets) => sets.iter().cloned().collect(),
    };
    let batches: Vec<Touch> =
        names.chunks(BATCH).map(|c| Touch::NodeSets(c.iter().cloned().collect())).collect();
    for batch in &batches {
        let next = evaluate(cx, batch).await?;
        cx.metrics.tick();
        expiries.retain(|set, _| set.is_empty() || !batch.includes(set));
        for (set, t) in next {
            let slot = expiries.entry(set).or_insert(t);
            *slot = (*slot).min(t);
        }
    }
    Ok(())
}

/// One evaluation of the touched NodeSets (timed and counted); writes when leading.
async fn evaluate(cx: &Cx<'_>, touched: &Touch) -> Result<BTreeMap<String, Instant>, AppError> {
    let started = std::time::Instant::now();
    let result = evaluate_once(cx, touched).await;
    cx.metrics.reconciled(result.is_ok(), started.elapsed().as_secs_f64());
    result
}

/// Returns when each touched NodeSet's first node agent Lease expires.
async fn evaluate_once(cx: &Cx<'_>, touched: &Touch) -> Result<BTreeMap<String, Instant>, AppError> {
    let Cx { client, events, stores, phases, metrics, leadership, skipped, nova } = *cx;
    // Only what the touched NodeSets need: their objects, and the kinds any NodeSet needs.
    let mut snap = stores.snapshot(client, touched).await.map_err(|e| AppError::failure(e.to_string()))?;
    for u in &snap.evidence.unreadable {
        tracing::warn!("{}", super::pipeline::unreadable_warning(u));
        metrics.skipped(&u.id.kind);
    }
    let mut model = edpm_core::model::resolve(&snap)?;
    model.groups.retain(|g| touched.includes(&g.name));
    if let Some(poller) = nova {
        snap.evidence.nova = poller.for_evaluation(client, &snap, &model, touched).await?;
    }
    let now = clock();
    let r = readiness::evaluate_spread(
        &snap,
        &model,
        phases,
        readiness::Options { evidence: false },
        now,
        &edpm_io::parallel::spread,
    );
    let ns = client.namespace().to_string();
    for set in &r.nodesets {
        let nodes: Vec<&readiness::NodeView> = r.nodes.iter().filter(|n| n.nodeset == set.name).collect();
        metrics.set_nodeset(&ns, &set.name, &nodes);
    }
    metrics.forget_nodesets(&ns, |set| touched.includes(set) && !r.nodesets.iter().any(|s| s.name == set));
    if leadership.leads() {
        let writes = readiness::report::plan(&r, &snap.evidence, &ns);
        let may_write = || {
            // Each write begun is progress (a first sync of thousands of nodes is many writes).
            metrics.tick();
            leadership.leads()
        };
        let outcome = k8s::status::apply(client, writes, Duration::from_secs(60), &may_write)
            .await
            .inspect_err(|e| {
                metrics.api_error("patch", e.code());
            })?;
        let missing = readiness::report::missing_leases(&r, &snap.evidence);
        if !missing.is_empty() && may_write() {
            k8s::status::ensure_leases(client, missing, Duration::from_secs(60)).await.inspect_err(|e| {
                metrics.api_error("patch", e.code());
            })?;
        }
        let (told, dropped) = readiness::report::transitions(&r, &snap.evidence, EVENTS_PER_EVALUATION);
        if dropped > 0 {
            tracing::info!(
                dropped,
                "more transitions than Events sent at once; the status objects say them all"
            );
        }
        if !snap.evidence.unreadable.is_empty() && may_write() {
            let failed = events.unreadable(client, &snap.evidence.unreadable).await;
            for _ in 0..failed {
                metrics.api_error("create", None);
            }
        }
        if !told.is_empty() && may_write() {
            let failed = events.publish(client, &told).await;
            for _ in 0..failed {
                metrics.api_error("create", None);
            }
        }
        if !outcome.created.is_empty() || !outcome.updated.is_empty() {
            tracing::info!(
                nodesets = r.nodesets.len(),
                created = outcome.created.len(),
                updated = outcome.updated.len(),
                requests = outcome.requests,
                "wrote"
            );
        }
    } else {
        skipped.set(true);
    }
    let at = |t: Time| {
        // One second after: the evaluation must see the Lease as expired.
        let secs = u64::try_from(t.0 - now.0).unwrap_or(0) + 1;
        Instant::now() + Duration::from_secs(secs)
    };
    Ok(touch::next_expiries(&snap.evidence, now).into_iter().map(|(set, t)| (set, at(t))).collect())
}

fn clock() -> Time {
    use edpm_node::agent_loop::Clock;
    edpm_node::agent_loop::SystemClock.now()
}
