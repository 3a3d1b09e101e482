//! The node agent's main loop, modelled on the kubelet's node status and Lease and on
//! node-problem-detector:
//!
//! - it checks every `check_interval` and keeps the latest conditions (transition times carry
//!   over between checks);
//! - it sends its conditions only when they changed (apart from times), or as a heartbeat every
//!   `heartbeat` (5 min), and renews its Lease every `lease_interval` (10 s, for 40 s);
//! - while the API is unreachable it keeps checking and keeping its latest state, retries with
//!   jittered exponential backoff (never faster than every second, never slower than a
//!   minute), and sends the latest state when the API returns;
//! - `READY=1` after the first complete check, `WATCHDOG=1` from this loop at half the
//!   watchdog interval, `STOPPING=1` on shutdown, which every wait in the loop also listens
//!   for, so it ends within a second.
//!
//! The shutdown signal, the clock, the facts and the API client are arguments, so tests
//! drive the loop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::collect::Collect;
use super::notify::Notify;
use crate::api::AgentApi;
use edpm_core::condition::{Conditions, Time};
use edpm_core::node::{self, Expect};

/// Wall-clock time for condition and Lease times (the loop's own timing is tokio's).
pub trait Clock: Send + Sync {
    fn now(&self) -> Time;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        edpm_io::clock::now()
    }
}

#[derive(Debug, Clone)]
pub struct Intervals {
    pub check: Duration,
    pub lease: Duration,
    pub lease_duration: Duration,
    pub heartbeat: Duration,
    pub watchdog: Option<Duration>,
}

/// What the loop did, for logs, tests and the benchmark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub checks: u64,
    pub status_writes: u64,
    pub lease_renewals: u64,
    pub failed_requests: u64,
    pub watchdogs: u64,
}

/// How often the images deployed to the node are asked of the API (they move with a
/// Deployment, minutes apart at best): one small read per node that often, not per check.
const IMAGES_REFRESH: Duration = Duration::from_secs(300);

// The requests as the log names them when they fail.
const IMAGES: &str = "cannot read the images deployed to this node";
const SEND: &str = "cannot send status; keeping the latest state";
const RENEW: &str = "cannot renew the Lease";

const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// `now + d`, or a year from now when `d` is past what an `Instant` holds: the settings are
/// checked (`node::config`), this keeps any other duration from panicking the loop.
fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or_else(|| now + Duration::from_secs(365 * 86_400))
}

/// Between half and all of `d`.
fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let frac = (std::collections::hash_map::RandomState::new().build_hasher().finish() % 1000) as u32;
    d / 2 + d / 2 * frac / 1000
}

/// Exponential backoff state for one kind of request.
#[derive(Default)]
struct Backoff {
    delay: Option<Duration>,
}

impl Backoff {
    fn failed(&mut self) -> Duration {
        let next = self.delay.map_or(MIN_BACKOFF, |d| (d * 2).min(MAX_BACKOFF));
        self.delay = Some(next);
        jitter(next).max(MIN_BACKOFF / 2)
    }

    fn succeeded(&mut self) {
        self.delay = None;
    }
}

/// What the loop last said about each kind of request that failed: the same failure again is
/// not said again (a refused credential would otherwise fill the journal with one line a
/// retry), and the first success after a failure is said once.
#[derive(Default)]
struct Told {
    last: std::collections::HashMap<&'static str, String>,
}

impl Told {
    fn failed(&mut self, what: &'static str, e: &edpm_io::k8s::Error, retry_in: Option<Duration>) {
        let text = e.to_string();
        if self.last.get(what) == Some(&text) {
            tracing::debug!(error = %text, ?retry_in, "{what} (the same failure again)");
            return;
        }
        tracing::warn!(error = %text, ?retry_in, "{what}");
        self.last.insert(what, text);
    }

    fn succeeded(&mut self, what: &'static str, again: &str) {
        if self.last.remove(what).is_some() {
            tracing::info!("{again}");
        }
    }
}

/// Runs until `shutdown` completes.
#[allow(
    clippy::too_many_lines,
    reason = "the agent's select! loop: check, report, renew and shutdown share its timers"
)]
pub async fn run<A: AgentApi>(
    expect: &Expect,
    iv: &Intervals,
    collector: Arc<dyn Collect>,
    api: &A,
    clock: &dyn Clock,
    notify: &dyn Notify,
    shutdown: impl Future<Output = ()>,
) -> Stats {
    tokio::pin!(shutdown);
    let mut stats = Stats::default();
    let mut current: Option<Conditions> = None;
    let mut sent: Option<Conditions> = None;
    let start = Instant::now();
    let (mut next_check, mut next_lease, mut next_send) = (start, start, start);
    let mut next_heartbeat = after(start, iv.heartbeat);
    let mut next_watchdog = iv.watchdog.map(|w| after(start, w));
    // The images last deployed here, as the cluster says (`ImageMismatch`); unknown until read.
    let (mut deployed_images, mut next_images): (Option<Vec<String>>, Instant) = (None, start);
    let (mut send_backoff, mut lease_backoff) = (Backoff::default(), Backoff::default());
    let mut told = Told::default();
    macro_rules! or_stop {
        ($fut:expr) => {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                r = $fut => r,
            }
        };
    }
    loop {
        let mut wake = next_check.min(next_lease);
        if let Some(c) = &current {
            let changed = sent.as_ref().is_none_or(|s| !s.same_apart_from_times(c));
            wake = wake.min(if changed { next_send } else { next_heartbeat.max(next_send) });
        }
        if let Some(w) = next_watchdog {
            wake = wake.min(w);
        }
        or_stop!(tokio::time::sleep_until(wake));
        let now = Instant::now();

        if let Some(w) = next_watchdog
            && now >= w
        {
            notify.watchdog();
            stats.watchdogs += 1;
            next_watchdog = iv.watchdog.map(|d| after(now, d));
        }

        if now >= next_check {
            if now >= next_images {
                match or_stop!(api.deployed_images()) {
                    Ok(images) => {
                        deployed_images = Some(images);
                        told.succeeded(IMAGES, "the images deployed to this node are read again");
                    }
                    // Kept as last read: a missed read is no reason to stop comparing.
                    Err(e) => told.failed(IMAGES, &e, None),
                }
                next_images = after(now, IMAGES_REFRESH);
            }
            let c = collector.clone();
            let facts = or_stop!(tokio::task::spawn_blocking(move || c.collect()));
            match facts {
                Ok(mut facts) => {
                    facts.deployed_images = deployed_images.clone();
                    let mut fresh = node::evaluate(&facts, expect);
                    // The agent's own credential, renewed when due (`AgentCredentialExpiring`).
                    if let Some(c) = or_stop!(api.credential(clock.now())) {
                        fresh.push(c);
                    }
                    let previous = current.take().unwrap_or_default();
                    current = Some(Conditions::carry_times(fresh, &previous, clock.now()));
                    stats.checks += 1;
                    if stats.checks == 1 {
                        let summary = current
                            .as_ref()
                            .and_then(|c| c.get(edpm_core::condition::types::NODE_AGENT))
                            .map(|c| c.reason.clone());
                        notify.ready(&format!("first check done: {}", summary.unwrap_or_default()));
                        tracing::info!("first check done");
                    }
                }
                Err(e) => tracing::error!(error = %e, "the check did not complete"),
            }
            next_check = after(now, iv.check);
        }

        if let Some(conds) = &current {
            let changed = sent.as_ref().is_none_or(|s| !s.same_apart_from_times(conds));
            if (changed || now >= next_heartbeat) && now >= next_send {
                match or_stop!(api.apply_status(&conds.0)) {
                    Ok(()) => {
                        stats.status_writes += 1;
                        if changed {
                            tracing::info!(conditions = conds.0.len(), "status sent");
                        }
                        sent = Some(conds.clone());
                        next_heartbeat = after(now, iv.heartbeat);
                        send_backoff.succeeded();
                        told.succeeded(SEND, "status is sent again");
                        next_send = now;
                    }
                    Err(e) => {
                        stats.failed_requests += 1;
                        let wait = send_backoff.failed();
                        told.failed(SEND, &e, Some(wait));
                        next_send = after(now, wait);
                    }
                }
            }
        }

        if now >= next_lease {
            match or_stop!(api.renew_lease(clock.now(), iv.lease_duration)) {
                Ok(()) => {
                    stats.lease_renewals += 1;
                    lease_backoff.succeeded();
                    told.succeeded(RENEW, "the Lease is renewed again");
                    next_lease = after(now, iv.lease);
                }
                Err(e) => {
                    stats.failed_requests += 1;
                    let wait = lease_backoff.failed().min(iv.lease.max(MIN_BACKOFF).saturating_mul(6));
                    told.failed(RENEW, &e, Some(wait));
                    next_lease = after(now, wait);
                }
            }
        }
    }
    notify.stopping();
    tracing::info!(?stats, "stopping");
    stats
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use super::*;
    use edpm_core::condition::Condition;
    use edpm_core::node::facts::Facts;
    use edpm_io::k8s::Error;

    struct FixedFacts(Mutex<Facts>);

    impl Collect for FixedFacts {
        fn collect(&self) -> Facts {
            self.0.lock().unwrap().clone()
        }
    }

    fn facts(hostname: &str) -> Facts {
        Facts {
            hostname: Ok(hostname.into()),
            addresses: Ok(vec![]),
            os: Ok("CentOS Stream 9".into()),
            network: None,
            runtime: Ok("/usr/bin/podman".into()),
            staged: Ok((0, vec![])),
            deployed: None,
            units: Ok(Default::default()),
            quadlet_hashes: Default::default(),
            containers: Ok(Default::default()),
            deployed_images: None,
        }
    }

    #[derive(Default)]
    struct FakeApi {
        down: AtomicBool,
        statuses: Mutex<Vec<Vec<Condition>>>,
        leases: AtomicU64,
        attempts: AtomicU64,
    }

    impl AgentApi for FakeApi {
        async fn apply_status(&self, c: &[Condition]) -> Result<(), Error> {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                return Err(Error::Request {
                    action: "apply".into(),
                    message: "connection refused".into(),
                    hint: String::new(),
                    code: None,
                });
            }
            self.statuses.lock().unwrap().push(c.to_vec());
            Ok(())
        }

        async fn deployed_images(&self) -> Result<Vec<String>, Error> {
            Ok(Vec::new())
        }

        async fn renew_lease(&self, _: Time, _: Duration) -> Result<(), Error> {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                return Err(Error::Request {
                    action: "lease".into(),
                    message: "connection refused".into(),
                    hint: String::new(),
                    code: None,
                });
            }
            self.leases.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    struct Clock0;
    impl Clock for Clock0 {
        fn now(&self) -> Time {
            Time::from_unix(1_795_435_200)
        }
    }

    #[derive(Default)]
    struct Notes(Mutex<Vec<String>>);
    impl Notify for Notes {
        fn ready(&self, _: &str) {
            self.0.lock().unwrap().push("READY".into());
        }
        fn watchdog(&self) {
            self.0.lock().unwrap().push("WATCHDOG".into());
        }
        fn stopping(&self) {
            self.0.lock().unwrap().push("STOPPING".into());
        }
    }

    fn intervals() -> Intervals {
        Intervals {
            check: Duration::from_secs(10),
            lease: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            heartbeat: Duration::from_secs(300),
            watchdog: Some(Duration::from_secs(15)),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sends_on_change_and_heartbeat_renews_the_lease_and_stops() {
        let api = FakeApi::default();
        let collector = Arc::new(FixedFacts(Mutex::new(facts("c0"))));
        let notes = Notes::default();
        let expect = Expect { hostname: Some("c0".into()), ..Default::default() };
        let c2 = collector.clone();
        // An hour of quiet, then a change, then the shutdown.
        let stop = async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            *c2.0.lock().unwrap() = facts("somewhere-else");
            tokio::time::sleep(Duration::from_secs(30)).await;
        };
        let stats = run(&expect, &intervals(), collector, &api, &Clock0, &notes, stop).await;
        let statuses = api.statuses.lock().unwrap();
        // One first report, a heartbeat every 5 minutes (11 up to 55 min), then at 60 min the
        // change (which also serves as that heartbeat).
        assert_eq!(statuses.len(), 1 + 11 + 1, "{stats:?}");
        assert_eq!(statuses.last().unwrap()[0].reason, "HostnameMismatch");
        // A renewal every 10 s for the hour and a half minute: the Lease is the steady traffic.
        assert!((360..=365).contains(&api.leases.load(Ordering::SeqCst)), "{stats:?}");
        let notes = notes.0.lock().unwrap();
        assert_eq!(notes.first().map(String::as_str), Some("READY"));
        assert_eq!(notes.last().map(String::as_str), Some("STOPPING"));
        assert!(notes.iter().filter(|n| *n == "WATCHDOG").count() >= 240, "every 15 s from the loop");
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_keeps_checking_backs_off_and_sends_the_latest_state_after() {
        let api = Arc::new(FakeApi::default());
        api.down.store(true, Ordering::SeqCst);
        let collector = Arc::new(FixedFacts(Mutex::new(facts("c0"))));
        let expect = Expect { hostname: Some("c0".into()), ..Default::default() };
        let (c2, a2) = (collector.clone(), api.clone());
        let stop = async {
            tokio::time::sleep(Duration::from_secs(600)).await;
            // The node changes while the API is down; then the API returns.
            *c2.0.lock().unwrap() = facts("renamed");
            tokio::time::sleep(Duration::from_secs(300)).await;
            a2.down.store(false, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(120)).await;
        };
        let stats =
            run(&expect, &intervals(), collector, api.as_ref(), &Clock0, &Notes::default(), stop).await;
        // 15 minutes down: with backoff capped at a minute, a few dozen attempts, not thousands.
        assert!(api.attempts.load(Ordering::SeqCst) < 200, "{stats:?}");
        assert!(stats.checks >= 100, "kept checking: {stats:?}");
        let statuses = api.statuses.lock().unwrap();
        assert_eq!(
            statuses.first().unwrap()[0].reason,
            "HostnameMismatch",
            "the latest state, not the first"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn durations_past_what_an_instant_holds_do_not_panic() {
        let api = FakeApi::default();
        let iv = Intervals {
            check: Duration::MAX,
            lease: Duration::MAX,
            lease_duration: Duration::MAX,
            heartbeat: Duration::MAX,
            watchdog: Some(Duration::MAX),
        };
        let stop = async { tokio::time::sleep(Duration::from_secs(60)).await };
        let collector = Arc::new(FixedFacts(Mutex::new(facts("c0"))));
        let stats = run(&Expect::default(), &iv, collector, &api, &Clock0, &Notes::default(), stop).await;
        assert_eq!((stats.checks, stats.status_writes, stats.lease_renewals), (1, 1, 1), "{stats:?}");
    }

    #[tokio::test]
    async fn shutdown_interrupts_a_slow_check() {
        struct Slow;
        impl Collect for Slow {
            fn collect(&self) -> Facts {
                std::thread::sleep(Duration::from_millis(300));
                facts("c0")
            }
        }
        let api = FakeApi::default();
        let notes = Notes::default();
        let stop = async { tokio::time::sleep(Duration::from_millis(20)).await };
        let started = std::time::Instant::now();
        let stats = run(&Expect::default(), &intervals(), Arc::new(Slow), &api, &Clock0, &notes, stop).await;
        assert!(started.elapsed() < Duration::from_millis(250), "did not wait for the check");
        assert_eq!(stats.checks, 0);
        assert_eq!(notes.0.lock().unwrap().last().map(String::as_str), Some("STOPPING"));
    }
}
