//! The controller's HTTP endpoints: `/metrics` (OpenMetrics text, prometheus-client) on the
//! metrics address, `/healthz` and `/readyz` on the probe address (one server when both are
//! the same), served with hyper.
//!
//! The metrics follow kube-state-metrics' shape for conditions: one series per node,
//! condition type and possible status, 1 for the current status and 0 for the others, so an
//! alert can match `status="False"` without knowing what the other values were.
//!
//! The per-node series are not kept as prometheus-client metrics (a label set of five strings
//! per series: at 10,000 nodes that was 600,000 series and most of the process's memory, and
//! setting a NodeSet's series anew was most of an evaluation's time); the last evaluation of
//! each NodeSet is kept compactly and encoded at scrape time, through the library's
//! [`Collector`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use edpm_core::condition::types::{TYPES, Type, counted};
use edpm_core::condition::{Severity, Status};
use edpm_core::readiness::NodeView;
use edpm_core::readiness::api::NodeCounts;

type Labels = Vec<(String, String)>;

/// Everything `/metrics` shows, and what `/healthz` and `/readyz` answer.
pub(crate) struct Metrics {
    registry: Registry,
    nodes: Arc<NodeSeries>,
    reconciles: Family<Labels, Counter>,
    reconcile_seconds: Histogram,
    watch_restarts: Family<Labels, Counter>,
    api_errors: Family<Labels, Counter>,
    skipped: Family<Labels, Counter>,
    leader: Gauge,
    /// When the loop last made progress (unix seconds): it waited, took in a watch event,
    /// began a write or finished a batch ([`Metrics::tick`]).
    pub(crate) heartbeat: AtomicU64,
    /// How long the loop may make no progress before `/healthz` fails, in seconds.
    stale: AtomicU64,
    /// Every watched kind was listed completely.
    pub(crate) synced: AtomicBool,
}

/// The phases of `edpm_nodeset_nodes` (the types table's, `Ready` with them), with the
/// condition each reads.
fn phases() -> impl Iterator<Item = (&'static str, &'static str)> {
    TYPES.iter().filter_map(|t| Some((t.phase?.label, t.node?)))
}

/// The types with a per-node gauge of their own (`node_version_current`, …).
fn gauged() -> impl Iterator<Item = &'static Type> {
    TYPES.iter().filter(|t| t.gauge.is_some())
}

/// How many phases and gauges the types table has: a node's line holds one state each, inline.
const PHASES: usize = count_rows(true);
const GAUGES: usize = count_rows(false);

const fn count_rows(phases: bool) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < TYPES.len() {
        let t = &TYPES[i];
        if (phases && t.phase.is_some()) || (!phases && t.gauge.is_some()) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The first `N` of `items`, inline (the rest of the array `empty`).
fn inline<T: Copy, const N: usize>(mut items: impl Iterator<Item = T>, empty: T) -> [T; N] {
    std::array::from_fn(|_| items.next().unwrap_or(empty))
}
const STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// The nodes of each NodeSet as last evaluated: `edpm_node_condition` and
/// `edpm_nodeset_nodes`, encoded when scraped.
#[derive(Debug, Default)]
struct NodeSeries {
    /// (namespace, NodeSet) → its nodes.
    sets: Mutex<BTreeMap<(String, String), NodeSetLines>>,
    /// Condition types, each held once (a few dozen, shared by every node).
    types: Mutex<BTreeSet<Arc<str>>>,
}

/// A NodeSet's nodes, and its counts as its EDPMNodeSetStatus has them.
#[derive(Debug)]
struct NodeSetLines {
    nodes: Vec<NodeLine>,
    counts: NodeCounts,
}

#[derive(Debug)]
struct NodeLine {
    node: String,
    conditions: Vec<(Arc<str>, &'static str)>,
    /// The state of each of [`phases`], in order.
    phases: [&'static str; PHASES],
    /// Each of [`gauged`], in order: 1 True, 0 False, no series while Unknown.
    current: [Option<bool>; GAUGES],
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code holding these locks panics; a poisoned one still holds consistent data.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NodeSeries {
    fn intern(&self, ty: &str) -> Arc<str> {
        let mut types = lock(&self.types);
        if let Some(t) = types.get(ty) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(ty);
        types.insert(t.clone());
        t
    }
}

impl Collector for NodeSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sets = lock(&self.sets);
        {
            let mut m = encoder.encode_descriptor(
                "node_condition",
                "A node's condition: 1 for its current status, 0 for the others",
                None,
                MetricType::Gauge,
            )?;
            for ((ns, set), lines) in sets.iter() {
                for n in &lines.nodes {
                    for (ty, current) in &n.conditions {
                        for s in STATUSES {
                            let labels = [
                                ("namespace", ns.as_str()),
                                ("nodeset", set.as_str()),
                                ("node", n.node.as_str()),
                                ("type", &**ty),
                                ("status", s),
                            ];
                            ConstGauge::new(i64::from(*current == s)).encode(m.encode_family(&labels)?)?;
                        }
                    }
                }
            }
        }
        for (i, gauge) in gauged().filter_map(|t| t.gauge).enumerate() {
            let mut m = encoder.encode_descriptor(gauge.name, gauge.help, None, MetricType::Gauge)?;
            for ((ns, set), lines) in sets.iter() {
                for n in &lines.nodes {
                    let Some(current) = n.current[i] else { continue };
                    let labels =
                        [("namespace", ns.as_str()), ("nodeset", set.as_str()), ("node", n.node.as_str())];
                    ConstGauge::new(i64::from(current)).encode(m.encode_family(&labels)?)?;
                }
            }
        }
        let mut m = encoder.encode_descriptor(
            "nodeset_nodes",
            "Nodes of a NodeSet per phase (-1, 0, 1, ready) and state (ready, in_progress, failed, unknown)",
            None,
            MetricType::Gauge,
        )?;
        for ((ns, set), lines) in sets.iter() {
            for (i, (phase, _)) in phases().enumerate() {
                for st in STATES {
                    let count = lines.nodes.iter().filter(|n| n.phases[i] == st).count();
                    let labels = [
                        ("namespace", ns.as_str()),
                        ("nodeset", set.as_str()),
                        ("phase", phase),
                        ("state", st),
                    ];
                    ConstGauge::new(count as i64).encode(m.encode_family(&labels)?)?;
                }
            }
        }
        encode_counts(&mut encoder, &sets)
    }
}

/// `edpm_nodeset_node_count`: each NodeSet's counts, as its EDPMNodeSetStatus has them.
fn encode_counts(
    encoder: &mut DescriptorEncoder,
    sets: &BTreeMap<(String, String), NodeSetLines>,
) -> Result<(), std::fmt::Error> {
    let held: String = counted().map(|(ty, c)| format!(", {} ({ty} True)", c.label)).collect();
    let help = format!(
        "Nodes of a NodeSet, as its EDPMNodeSetStatus counts them: total, ready{held}, degraded (Ready False with severity Error)"
    );
    let mut m = encoder.encode_descriptor("nodeset_node_count", &help, None, MetricType::Gauge)?;
    for ((ns, set), lines) in sets.iter() {
        for (count, n) in lines.counts.labelled() {
            let labels = [("namespace", ns.as_str()), ("nodeset", set.as_str()), ("count", count)];
            ConstGauge::new(i64::from(n)).encode(m.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("edpm");
        let nodes = Arc::new(NodeSeries::default());
        registry.register_collector(Box::new(nodes.clone()));
        let reconciles = Family::<Labels, Counter>::default();
        registry.register("reconcile", "Evaluations of readiness, by result (ok, error)", reconciles.clone());
        // Up to two minutes, as controller-runtime's reconcile histogram goes past ten seconds:
        // at 10,000 nodes on a real API server an evaluation that writes a batch of NodeSets
        // takes tens of seconds (BENCHMARKS.md), which a top bucket of 10 s could only call +Inf.
        let reconcile_seconds = Histogram::new([
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
        ]);
        registry.register(
            "reconcile_duration_seconds",
            "Time of one evaluation: snapshot, readiness and writes",
            reconcile_seconds.clone(),
        );
        let watch_restarts = Family::<Labels, Counter>::default();
        registry.register(
            "watch_restarts",
            "Watches that failed and restarted (resumed or relisted), by kind",
            watch_restarts.clone(),
        );
        let api_errors = Family::<Labels, Counter>::default();
        registry.register(
            "api_request_errors",
            "API requests that failed, by verb and code",
            api_errors.clone(),
        );
        let skipped = Family::<Labels, Counter>::default();
        registry.register(
            "skipped_objects",
            "edpm-agent's own status objects that could not be decoded and were skipped, by kind (once per evaluation that met one)",
            skipped.clone(),
        );
        let leader = Gauge::default();
        registry.register("leader", "1 while this replica leads (writes), else 0", leader.clone());
        // Series that exist from the start at 0, so that a dashboard shows 0, not "No data",
        // and `rate()` sees the first increase (prometheus-client leaves out a family with no
        // label set yet).
        for result in ["ok", "error"] {
            let _ = reconciles.get_or_create(&vec![("result".into(), result.into())]);
        }
        for kind in edpm_core::kinds::KINDS.iter().filter(|k| k.is_listed()) {
            let _ = watch_restarts.get_or_create(&vec![("kind".into(), kind.kind.into())]);
        }
        for kind in ["EDPMNodeStatus", "EDPMNodeSetStatus"] {
            let _ = skipped.get_or_create(&vec![("kind".into(), kind.into())]);
        }
        Metrics {
            registry,
            nodes,
            reconciles,
            reconcile_seconds,
            watch_restarts,
            api_errors,
            skipped,
            leader,
            heartbeat: AtomicU64::new(now_secs()),
            stale: AtomicU64::new(STALE_SECS),
            synced: AtomicBool::new(false),
        }
    }

    /// The nodes of `nodeset` as just evaluated (all its nodes): they replace its series, so
    /// a condition that changed status or a node that left keeps no old series.
    pub(crate) fn set_nodeset(&self, namespace: &str, nodeset: &str, nodes: &[&NodeView]) {
        let lines: Vec<NodeLine> = nodes
            .iter()
            .map(|n| NodeLine {
                node: n.node.clone(),
                conditions: n
                    .conditions
                    .iter()
                    .map(|c| (self.nodes.intern(&c.type_), c.status_word()))
                    .collect(),
                phases: inline(phases().map(|(_, ty)| state(n.conditions.get(ty))), "unknown"),
                current: inline(
                    gauged().map(|t| match t.node.and_then(|ty| n.conditions.get(ty)).map(|c| c.status) {
                        Some(Status::True) => Some(true),
                        Some(Status::False) => Some(false),
                        _ => None,
                    }),
                    None,
                ),
            })
            .collect();
        let counts = edpm_core::readiness::node_counts(nodes.iter().copied());
        lock(&self.nodes.sets)
            .insert((namespace.to_string(), nodeset.to_string()), NodeSetLines { nodes: lines, counts });
    }

    /// Drops the series of the NodeSets `gone` accepts (deleted since their last evaluation).
    pub(crate) fn forget_nodesets(&self, namespace: &str, gone: impl Fn(&str) -> bool) {
        lock(&self.nodes.sets).retain(|(ns, set), _| ns != namespace || !gone(set));
    }

    pub(crate) fn reconciled(&self, ok: bool, seconds: f64) {
        let result = if ok { "ok" } else { "error" };
        self.reconciles.get_or_create(&vec![("result".into(), result.into())]).inc();
        self.reconcile_seconds.observe(seconds);
    }

    pub(crate) fn watch_restarted(&self, kind: &str) {
        self.watch_restarts.get_or_create(&vec![("kind".into(), kind.into())]).inc();
    }

    pub(crate) fn api_error(&self, verb: &str, code: Option<u16>) {
        let code = code.map_or_else(|| "none".to_string(), |c| c.to_string());
        self.api_errors.get_or_create(&vec![("verb".into(), verb.into()), ("code".into(), code)]).inc();
    }

    pub(crate) fn skipped(&self, kind: &str) {
        self.skipped.get_or_create(&vec![("kind".into(), kind.into())]).inc();
    }

    pub(crate) fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The loop made progress.
    pub(crate) fn tick(&self) {
        self.heartbeat.store(now_secs(), Ordering::Release);
    }

    /// `/healthz` fails after `request_timeout` × [`STALE_REQUESTS`] without progress (at least
    /// [`STALE_MIN`]): one request may honestly take twice the request timeout, retries
    /// included (`Client::within_time`), so a slow API whose every answer is slow is never
    /// called stuck, and a timeout raised for a slow API raises this with it.
    pub(crate) fn stale_after(&self, request_timeout: std::time::Duration) {
        let secs = request_timeout.as_secs().saturating_mul(STALE_REQUESTS).max(STALE_MIN);
        self.stale.store(secs, Ordering::Release);
    }

    /// `/healthz`'s answer at `now` (unix seconds): healthy, and what it says.
    fn health(&self, now: u64) -> (bool, String) {
        let age = now.saturating_sub(self.heartbeat.load(Ordering::Acquire));
        let limit = self.stale.load(Ordering::Acquire);
        if age <= limit {
            (true, format!("ok: the loop made progress {age} s ago (limit {limit} s)\n"))
        } else {
            (false, format!("the loop has made no progress for {age} s (limit {limit} s)\n"))
        }
    }

    fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

const STATES: [&str; 4] = ["ready", "in_progress", "failed", "unknown"];

fn state(c: Option<&edpm_core::condition::Condition>) -> &'static str {
    match c {
        Some(c) if c.is_true() => "ready",
        Some(c) if c.status == Status::Unknown => "unknown",
        Some(c) if c.severity == Severity::Error => "failed",
        Some(_) => "in_progress",
        None => "unknown",
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How long the loop may make no progress before `/healthz` fails, by default (four times the
/// default request timeout of 15 s).
pub(crate) const STALE_SECS: u64 = 60;
/// The limit in request timeouts: two requests' worth of their longest (see
/// [`Metrics::stale_after`]).
const STALE_REQUESTS: u64 = 4;
/// The least limit: the loop's own wait ticks every second.
const STALE_MIN: u64 = 5;

/// `/metrics` over TLS, behind the API server's authentication and authorization.
pub(crate) struct Secure {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    pub(crate) gate: super::secure::Gate,
}

/// How long a client has for its TLS handshake and for its request's headers: a connection
/// that trickles is closed, not kept.
const SLOW_CLIENT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long the accept loop rests when the process is out of file descriptors (or the kernel
/// of memory for sockets): the connection waits in the backlog rather than the loop spinning
/// on the same error.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

/// The connections each server may hold at once, given the process's limit of open files: a
/// quarter of it for `/metrics` (at most 512), a sixteenth for the probes (at most 64), so
/// that idle or slow clients can take neither the files the watches and the API client need
/// nor the probes' own. A connection past it is closed at once.
pub(crate) fn connection_caps(open_files: u64) -> (usize, usize) {
    let cap =
        |share: u64, min: u64, max: u64| usize::try_from((open_files / share).clamp(min, max)).unwrap_or(8);
    (cap(4, 8, 512), cap(16, 4, 64))
}

/// Whether an accept error is the process or the system running out of something (files,
/// socket buffers), which retrying at once cannot cure.
fn exhausted(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

/// Serves `paths` (of `/metrics`, `/healthz`, `/readyz`) on `listener` until the task ends,
/// holding at most `cap` connections; with `secure`, over TLS and `/metrics` only to whom the
/// gate lets in.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    paths: &'static [&'static str],
    secure: Option<Arc<Secure>>,
    cap: usize,
) {
    let held = Arc::new(tokio::sync::Semaphore::new(cap));
    let mut told_full = false;
    let mut told_exhausted = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) if exhausted(&e) => {
                if !std::mem::replace(&mut told_exhausted, true) {
                    tracing::warn!(error = %e, paths = %paths.join(" "), "cannot accept a connection (out of files or memory); backing off");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
            // The client gave up before it was accepted (ECONNABORTED), and the like.
            Err(_) => continue,
        };
        told_exhausted = false;
        let Ok(permit) = held.clone().try_acquire_owned() else {
            if !std::mem::replace(&mut told_full, true) {
                tracing::warn!(cap, paths = %paths.join(" "), "holding as many connections as allowed; closing new ones until some end");
            }
            drop(stream);
            continue;
        };
        told_full = false;
        let metrics = metrics.clone();
        let secure = secure.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match secure {
                None => http(hyper_util::rt::TokioIo::new(stream), metrics, paths, None).await,
                Some(s) => {
                    let Ok(Ok(tls)) = tokio::time::timeout(SLOW_CLIENT, s.acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    http(hyper_util::rt::TokioIo::new(tls), metrics, paths, Some(s)).await;
                }
            }
        });
    }
}

/// HTTP/1.1 on one connection.
async fn http<I>(io: I, metrics: Arc<Metrics>, paths: &'static [&'static str], secure: Option<Arc<Secure>>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let metrics = metrics.clone();
        let secure = secure.clone();
        async move {
            let path = req.uri().path();
            if let Some(s) = secure.as_deref()
                && path == "/metrics"
                && paths.contains(&path)
            {
                let header = req.headers().get(hyper::header::AUTHORIZATION).map(|v| v.as_bytes());
                match s.gate.check(header).await {
                    Ok(super::secure::Verdict::Allowed) => {}
                    Ok(v) => {
                        let mut r = reply(v.status(), "text/plain", v.message());
                        // A 429 says when to come back (RFC 9110 §10.2.3).
                        if let Some(secs) = v.retry_after() {
                            r.headers_mut().insert(hyper::header::RETRY_AFTER, secs.into());
                        }
                        return Ok::<_, std::convert::Infallible>(r);
                    }
                    Err(e) => {
                        // The review told it (once for every request that shared it).
                        tracing::debug!(error = %e, "a /metrics request answered 500");
                        return Ok(reply(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "text/plain",
                            "the request's token cannot be checked now (the API server did not answer); try again\n".into(),
                        ));
                    }
                }
            }
            Ok(answer(&metrics, paths, path))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(SLOW_CLIENT)
        .serve_connection(io, service)
        .await;
}

fn reply(code: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn answer(metrics: &Metrics, paths: &[&str], path: &str) -> Response<Full<Bytes>> {
    if !paths.contains(&path) {
        return reply(StatusCode::NOT_FOUND, "text/plain", format!("{path}: not served here\n"));
    }
    match path {
        "/metrics" => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" => match metrics.health(now_secs()) {
            (true, text) => reply(StatusCode::OK, "text/plain", text),
            (false, text) => reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", text),
        },
        _ => {
            if metrics.synced.load(Ordering::Acquire) {
                reply(StatusCode::OK, "text/plain", "ok\n".into())
            } else {
                reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "the watches have not listed everything yet\n".into(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_a_share_of_the_open_files_and_exhaustion_is_told_apart() {
        assert_eq!(connection_caps(1024), (256, 64));
        assert_eq!(connection_caps(256), (64, 16));
        assert_eq!(connection_caps(1 << 20), (512, 64), "at most 512 and 64");
        assert_eq!(connection_caps(16), (8, 4), "at least 8 and 4");
        assert_eq!(connection_caps(u64::MAX), (512, 64));
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            assert!(exhausted(&std::io::Error::from_raw_os_error(errno)));
        }
        assert!(!exhausted(&std::io::Error::from_raw_os_error(libc::ECONNABORTED)));
    }

    #[test]
    fn health_fails_only_after_the_limit_without_progress() {
        let m = Metrics::new();
        let t = m.heartbeat.load(Ordering::Acquire);
        assert_eq!(m.health(t + 60), (true, "ok: the loop made progress 60 s ago (limit 60 s)\n".into()));
        assert!(!m.health(t + 61).0, "stuck for longer than the default limit");
        // A slow API's longer request timeout raises the limit with it.
        m.stale_after(std::time::Duration::from_secs(30));
        assert!(m.health(t + 119).0);
        assert!(!m.health(t + 121).0);
        m.stale_after(std::time::Duration::from_secs(1));
        assert!(m.health(t + 5).0, "never below the loop's own pace");
        assert!(!m.health(t + 6).0);
        m.stale_after(std::time::Duration::MAX);
        assert!(m.health(u64::MAX).0, "no overflow");
        // Progress resets it.
        m.stale_after(std::time::Duration::from_secs(15));
        m.heartbeat.store(t + 100, Ordering::Release);
        assert!(m.health(t + 150).0);
    }
}
