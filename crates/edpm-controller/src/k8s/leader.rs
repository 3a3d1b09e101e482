//! Leader election over a `coordination.k8s.io` Lease, so that of several replicas of the
//! controller only one writes. It follows client-go's `leaderelection` (the protocol every
//! Kubernetes controller speaks), in a small loop of our own:
//!
//! - Every retry period ([`Timings::retry`]) the Lease is read. Each time its record (the `spec`) differs from the one
//!   seen last, this replica notes *when it saw it*, by its own monotonic clock. A Lease held by
//!   another replica is taken over once the record has stayed the same for the lease duration since
//!   then, whatever its `renewTime` says: a holder whose clock is wrong (a `renewTime` in
//!   2099, or one that does not parse) can neither keep the Lease forever nor lose it early,
//!   and an unreadable `renewTime` is no reason to stop (it is named in a warning).
//! - The holder renews every retry period with a merge patch carrying the `resourceVersion` it
//!   read (the API server refuses it, 409, if the Lease changed in between), and creates the
//!   Lease when there is none.
//! - This replica writes only while its last successful renewal is recent: [`Leadership::leads`]
//!   turns false the renew deadline after the last renewal *was sent*, before any other
//!   replica could see the record unchanged for the lease duration (it saw it after it was
//!   sent).
//!   A replica cut off from the API stops writing on its own.
//! - On shutdown the holder clears `holderIdentity`, so that another takes over at once.
//!
//! Why not kube-lease-manager (used before): it judges a holder by `renewTime` +
//! `leaseDurationSeconds` on its own clock, so a Lease "renewed in 2099" is never taken over,
//! and a Lease whose `renewTime` does not parse fails its typed read (which was reported as an
//! RBAC problem). Its state is private and its expiry rule built into its lock, so neither a
//! wrapper nor a contribution on top can change the rule; the loop here is as small.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{Client, Error};
use edpm_core::excerpt::printable;

/// The election's three times, as client-go's `LeaderElectionConfig` names them and
/// kubebuilder's `--leader-elect-lease-duration`, `--leader-elect-renew-deadline` and
/// `--leader-elect-retry-period` set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a record must stay the same before another replica takes the Lease over (and
    /// the `leaseDurationSeconds` this replica writes, in whole seconds).
    pub lease_duration: Duration,
    /// How long after its last successful renewal (as sent) the holder stops writing; within
    /// the lease duration, since a write takes time.
    pub renew_deadline: Duration,
    /// How often the Lease is read, and renewed while held.
    pub retry: Duration,
}

impl Default for Timings {
    /// client-go's defaults (15 s, 10 s, 2 s).
    fn default() -> Timings {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        }
    }
}

impl Timings {
    /// The times, if they keep client-go's order (`NewLeaderElector` refuses the others): the
    /// lease duration longer than the renew deadline, which is longer than 1.2 retry periods
    /// (client-go's jitter), each at least a second's worth where it is written in seconds.
    pub fn checked(self) -> Result<Timings, String> {
        let secs = |d: Duration| format!("{:.1}s", d.as_secs_f64());
        if self.lease_duration < Duration::from_secs(1) {
            return Err(format!(
                "--leader-elect-lease-duration {}: give at least 1s (the Lease holds it in whole seconds)",
                secs(self.lease_duration)
            ));
        }
        if self.retry.is_zero() {
            return Err("--leader-elect-retry-period 0: give a period above zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "--leader-elect-lease-duration {} must be longer than --leader-elect-renew-deadline {} (a holder must stop writing before others may take over)",
                secs(self.lease_duration),
                secs(self.renew_deadline)
            ));
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry.as_secs_f64() {
            return Err(format!(
                "--leader-elect-renew-deadline {} must be longer than 1.2 × --leader-elect-retry-period {} (client-go's rule: a renewal must fit in before the deadline)",
                secs(self.renew_deadline),
                secs(self.retry)
            ));
        }
        Ok(self)
    }

    /// `leaseDurationSeconds`: the lease duration in whole seconds, rounded up so that other
    /// replicas never wait less than this one judges by.
    fn lease_seconds(&self) -> u64 {
        let d = self.lease_duration;
        d.as_secs() + u64::from(d.subsec_nanos() > 0)
    }
}

/// The field manager of this replica's Lease writes.
const FIELD_MANAGER: &str = "edpm-agent-leader";

/// Whether this replica may write.
pub struct Leadership {
    /// The election loop's view: it holds the Lease (always true without election).
    leading: watch::Receiver<bool>,
    /// Until when the last renewal lets this replica write; `None` without election (no
    /// deadline).
    confirmed_until: Option<Arc<Mutex<Option<Instant>>>>,
    /// Tells the loop to release the Lease and end.
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// Keeps the channel of a replica without election open.
    _always: Option<watch::Sender<bool>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing holding this lock panics; a poisoned one still holds an instant.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Leadership {
    /// A replica without election: it always leads.
    pub fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        Leadership { leading: rx, confirmed_until: None, stop: None, task: None, _always: Some(tx) }
    }

    /// Whether this replica leads now: it holds the Lease and renewed it recently enough.
    pub fn leads(&self) -> bool {
        *self.leading.borrow() && self.confirmed(Instant::now())
    }

    fn confirmed(&self, now: Instant) -> bool {
        self.confirmed_until.as_ref().is_none_or(|c| lock(c).is_some_and(|until| now < until))
    }

    /// Each change of the election loop's view, as [`Leadership::leads`] says it then; the
    /// stream ends when the election ended.
    pub fn changes(&self) -> impl futures::Stream<Item = bool> + '_ {
        futures::stream::unfold(self.leading.clone(), move |mut leading| async move {
            leading.changed().await.ok().map(|()| (self.leads(), leading))
        })
    }

    /// Stops taking part and releases the Lease (if held), waiting up to `grace` for it;
    /// false when it was not released in time (it then expires on its own).
    pub async fn release(self, grace: Duration) -> bool {
        let Leadership { stop, task, .. } = self;
        if let Some(s) = stop {
            let _ = s.send(());
        }
        let Some(mut t) = task else { return true };
        match tokio::time::timeout(grace, &mut t).await {
            Ok(_) => true,
            Err(_) => {
                t.abort();
                false
            }
        }
    }
}

/// Takes part in the election on Lease `name` in the client's namespace as `identity`: the
/// loop runs in a task of its own, and the first round is at once.
pub async fn elect(
    client: &Client,
    name: &str,
    identity: &str,
    timings: Timings,
) -> Result<Leadership, Error> {
    let (tx, rx) = watch::channel(false);
    let until = Arc::new(Mutex::new(None));
    let (stop_tx, stop_rx) = oneshot::channel();
    let elector = Elector {
        client: client.clone(),
        api: Api::namespaced_with(client.kube(), client.namespace(), &lease_resource()),
        name: name.to_string(),
        identity: identity.to_string(),
        timings,
        observed: None,
        holding: false,
        warned: None,
    };
    let task = tokio::spawn(elector.run(tx, until.clone(), stop_rx));
    Ok(Leadership {
        leading: rx,
        confirmed_until: Some(until),
        stop: Some(stop_tx),
        task: Some(task),
        _always: None,
    })
}

fn lease_resource() -> ApiResource {
    super::read::resource(super::read::named("Lease"))
}

/// A record as this replica last saw it change, and when (its own clock).
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    record: Value,
    at: Instant,
}

/// What to do with the Lease as read.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Nobody holds it, or its holder's record has not moved for a lease duration: take it.
    Take,
    /// It is ours: renew it.
    Renew,
    /// Another holds it and its record moved within a lease duration.
    Wait,
}

/// Who holds a record: `None` when nobody (no or an empty `holderIdentity`); a holder of
/// another type than a string is somebody unknown, not nobody.
fn holder(spec: &Value) -> Option<String> {
    match &spec["holderIdentity"] {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        other => Some(format!("(unreadable holderIdentity {other})")),
    }
}

/// client-go's rule: `spec` (the Lease's record) is noted with `now` in `observed` when it
/// differs from the one seen last; a record held by another is taken over once it has stayed
/// the same for `duration` since then.
fn judge(
    spec: &Value,
    identity: &str,
    observed: &mut Option<Observed>,
    now: Instant,
    duration: Duration,
) -> Verdict {
    if observed.as_ref().is_none_or(|o| o.record != *spec) {
        *observed = Some(Observed { record: spec.clone(), at: now });
    }
    let seen = observed.as_ref().map_or(now, |o| o.at);
    match holder(spec) {
        None => Verdict::Take,
        Some(h) if h == identity => Verdict::Renew,
        // `checked_add`: a duration no Instant can hold is a record never taken over.
        Some(_) if seen.checked_add(duration).is_some_and(|end| now >= end) => Verdict::Take,
        Some(_) => Verdict::Wait,
    }
}

/// What is wrong with a record's times, if anything, for a warning: they are not used to
/// judge it, but a holder whose clock or writer is broken should be known.
fn odd_times(spec: &Value) -> Option<String> {
    let renew = &spec["renewTime"];
    match renew {
        Value::Null => None,
        Value::String(s) => match s.parse::<jiff::Timestamp>() {
            Err(_) => Some(format!("spec.renewTime {:?} is not a time", printable(s))),
            Ok(t) if t.duration_since(jiff::Timestamp::now()) > jiff::SignedDuration::from_secs(60) => {
                Some(format!("spec.renewTime {s} is in the future (the holder's clock is wrong)"))
            }
            Ok(_) => None,
        },
        other => Some(format!("spec.renewTime {} is not a time", printable(&other.to_string()))),
    }
}

/// A MicroTime, as client-go writes it.
fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

struct Elector {
    client: Client,
    api: Api<DynamicObject>,
    name: String,
    identity: String,
    timings: Timings,
    observed: Option<Observed>,
    /// The Lease names this replica, as last read or written.
    holding: bool,
    /// The last problem warned about (each is told once, not every round).
    warned: Option<String>,
}

/// One round's outcome.
enum Round {
    /// This replica holds the Lease, renewed with a request sent at that instant.
    Held(Instant),
    /// Another holds it.
    Other,
    /// The round failed (told in the log); nothing changes but the age of the last renewal.
    Failed,
}

impl Elector {
    async fn run(
        mut self,
        tx: watch::Sender<bool>,
        until: Arc<Mutex<Option<Instant>>>,
        mut stop: oneshot::Receiver<()>,
    ) {
        loop {
            let sent = Instant::now();
            // A round may not outlast the renew deadline: a hung request must not keep the
            // loop from trying again (the last renewal ages out meanwhile).
            let round = tokio::select! {
                r = tokio::time::timeout(self.timings.renew_deadline, self.round(sent)) => r,
                _ = &mut stop => break,
            };
            let round = round.unwrap_or_else(|_| {
                self.warn(format!(
                    "the leader Lease was not read and renewed within {:?}; trying again",
                    self.timings.renew_deadline
                ));
                Round::Failed
            });
            match round {
                Round::Held(at) => {
                    *lock(&until) = Some(at + self.timings.renew_deadline);
                    tx.send_if_modified(|l| !std::mem::replace(l, true));
                }
                Round::Other => {
                    *lock(&until) = None;
                    tx.send_if_modified(|l| std::mem::replace(l, false));
                }
                Round::Failed => {}
            }
            tokio::select! {
                () = tokio::time::sleep_until(sent + self.timings.retry) => {}
                _ = &mut stop => break,
            }
        }
        *lock(&until) = None;
        tx.send_if_modified(|l| std::mem::replace(l, false));
        if self.holding {
            self.release().await;
        }
    }

    fn warn(&mut self, message: String) {
        if self.warned.as_deref() != Some(message.as_str()) {
            tracing::warn!(lease = %self.name, "{message}");
            self.warned = Some(message);
        }
    }

    /// Reads the Lease and takes, renews or leaves it.
    #[allow(
        clippy::too_many_lines,
        reason = "one round of client-go's leader election: read, then take, renew or leave, each with its outcome"
    )]
    async fn round(&mut self, sent: Instant) -> Round {
        let lease = match self.client.within_time(self.api.get_opt(&self.name)).await {
            Ok(l) => l,
            Err(e) => {
                let e = self.client.error(format!("reading the leader Lease {}", self.name), &e);
                self.warn(format!(
                    "{e}; this replica stops writing {:?} after its last renewal",
                    self.timings.renew_deadline
                ));
                return Round::Failed;
            }
        };
        let Some(lease) = lease else { return self.create(sent).await };
        let spec = lease.data.get("spec").cloned().unwrap_or(Value::Null);
        let spec = if spec.is_object() { spec } else { json!({}) };
        if let Some(odd) = odd_times(&spec) {
            self.warn(format!(
                "Lease {}: {odd}; it is judged by when this replica saw its record change",
                self.name
            ));
        }
        let verdict =
            judge(&spec, &self.identity, &mut self.observed, Instant::now(), self.timings.lease_duration);
        let now = micro_time(jiff::Timestamp::now());
        let patch = match verdict {
            Verdict::Wait => {
                self.holding = false;
                return Round::Other;
            }
            Verdict::Renew => json!({"spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.timings.lease_seconds(),
                "renewTime": now,
            }}),
            Verdict::Take => {
                if let Some(h) = holder(&spec) {
                    tracing::info!(lease = %self.name, holder = %printable(&h), "taking the leader Lease over: its record has not changed for the lease duration");
                }
                let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0).saturating_add(1);
                json!({"spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": self.timings.lease_seconds(),
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": transitions,
                }})
            }
        };
        let mut patch = patch;
        // Optimistic concurrency: refused (409) if another replica wrote in between.
        patch["metadata"] = json!({"resourceVersion": lease.metadata.resource_version});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match self.client.within_time(self.api.patch(&self.name, &params, &Patch::Merge(&patch))).await {
            Ok(written) => {
                self.seen_own(&written);
                self.warned = None;
                Round::Held(sent)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Another replica wrote first: the next round reads who.
                Round::Failed
            }
            Err(e) => {
                let e = self.client.error(format!("renewing the leader Lease {}", self.name), &e);
                self.warn(format!(
                    "{e}; this replica stops writing {:?} after its last renewal",
                    self.timings.renew_deadline
                ));
                Round::Failed
            }
        }
    }

    /// Notes the record this replica just wrote, so that its own renewal is not mistaken for
    /// another's.
    fn seen_own(&mut self, written: &DynamicObject) {
        self.holding = true;
        let spec = written.data.get("spec").cloned().unwrap_or(Value::Null);
        self.observed = Some(Observed { record: spec, at: Instant::now() });
    }

    async fn create(&mut self, sent: Instant) -> Round {
        let now = micro_time(jiff::Timestamp::now());
        let lease: DynamicObject = match serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.client.namespace()},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.timings.lease_seconds(),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        })) {
            Ok(l) => l,
            Err(_) => return Round::Failed, // a literal object always decodes
        };
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match self.client.within_time(self.api.create(&params, &lease)).await {
            Ok(written) => {
                self.seen_own(&written);
                self.warned = None;
                Round::Held(sent)
            }
            // Another replica created it first: the next round reads it.
            Err(kube::Error::Api(s)) if s.code == 409 => Round::Failed,
            Err(e) => {
                let e = self.client.error(
                    format!(
                        "creating the leader Lease {} in namespace {}",
                        self.name,
                        self.client.namespace()
                    ),
                    &e,
                );
                self.warn(e.to_string());
                Round::Failed
            }
        }
    }

    /// Clears the holder, so that another replica takes over at once (only if the Lease still
    /// names this replica).
    async fn release(&mut self) {
        let Ok(Some(lease)) = self.client.within_time(self.api.get_opt(&self.name)).await else { return };
        let spec = lease.data.get("spec").cloned().unwrap_or(Value::Null);
        if holder(&spec).as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null, "leaseDurationSeconds": null},
        });
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match self.client.within_time(self.api.patch(&self.name, &params, &Patch::Merge(&patch))).await {
            Ok(_) => tracing::info!(lease = %self.name, "released the leader Lease"),
            Err(e) => {
                tracing::warn!(lease = %self.name, error = %self.client.error("releasing the leader Lease", &e), "the leader Lease was not released; it is taken over after its duration")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_keep_client_gos_order() {
        let t = |l: u64, r: u64, p: u64| Timings {
            lease_duration: Duration::from_millis(l),
            renew_deadline: Duration::from_millis(r),
            retry: Duration::from_millis(p),
        };
        assert_eq!(Timings::default().checked(), Ok(Timings::default()));
        assert!(t(60_000, 40_000, 5_000).checked().is_ok());
        let e = t(10_000, 10_000, 2_000).checked().unwrap_err();
        assert!(e.contains("--leader-elect-lease-duration 10.0s must be longer"), "{e}");
        let e = t(15_000, 2_400, 2_000).checked().unwrap_err();
        assert!(e.contains("1.2 × --leader-elect-retry-period 2.0s"), "{e}");
        assert!(t(500, 400, 100).checked().unwrap_err().contains("at least 1s"));
        assert!(t(15_000, 10_000, 0).checked().unwrap_err().contains("above zero"));
        // Written in whole seconds, rounded up: others never wait less than this replica judges.
        assert_eq!(t(15_000, 1, 1).lease_seconds(), 15);
        assert_eq!(t(15_001, 1, 1).lease_seconds(), 16);
    }

    fn spec(holder: &str, renewed: &str) -> Value {
        json!({"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 15})
    }

    #[test]
    fn a_record_that_does_not_move_is_taken_over_a_lease_duration_after_it_was_first_seen() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        let mut seen = None;
        // Renewed "in 2099": the time it says does not matter, only when it was seen.
        let s = spec("dead", "2099-01-01T00:00:00.000000Z");
        assert_eq!(judge(&s, "me", &mut seen, t0, d), Verdict::Wait);
        assert_eq!(judge(&s, "me", &mut seen, t0 + Duration::from_secs(14), d), Verdict::Wait);
        assert_eq!(judge(&s, "me", &mut seen, t0 + d, d), Verdict::Take);
    }

    #[test]
    fn a_record_that_moves_keeps_its_holder() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        let mut seen = None;
        assert_eq!(judge(&spec("other", "2020-01-01T00:00:00Z"), "me", &mut seen, t0, d), Verdict::Wait);
        // Renewed (even with a clock far behind): seen anew, so the wait starts again.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(judge(&spec("other", "2020-01-01T00:00:02Z"), "me", &mut seen, later, d), Verdict::Wait);
        assert_eq!(
            judge(&spec("other", "2020-01-01T00:00:02Z"), "me", &mut seen, t0 + Duration::from_secs(20), d),
            Verdict::Wait,
            "15 s after it was last seen to move, not after the first sighting"
        );
        assert_eq!(
            judge(&spec("other", "2020-01-01T00:00:02Z"), "me", &mut seen, later + d, d),
            Verdict::Take
        );
    }

    #[test]
    fn a_garbage_renew_time_is_a_record_like_any_other() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        let mut seen = None;
        let s = spec("other", "not a time at all");
        assert_eq!(judge(&s, "me", &mut seen, t0, d), Verdict::Wait);
        assert_eq!(judge(&s, "me", &mut seen, t0 + d, d), Verdict::Take);
        assert_eq!(odd_times(&s).unwrap(), r#"spec.renewTime "not a time at all" is not a time"#);
        assert!(odd_times(&json!({"renewTime": 12})).unwrap().contains("12 is not a time"));
        assert!(odd_times(&spec("x", "2099-01-01T00:00:00Z")).unwrap().contains("in the future"));
        assert_eq!(odd_times(&spec("x", &micro_time(jiff::Timestamp::now()))), None);
    }

    #[test]
    fn nobody_holds_a_free_lease_and_ours_is_renewed() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        for free in [json!({}), json!({"holderIdentity": ""}), json!({"holderIdentity": null})] {
            assert_eq!(judge(&free, "me", &mut None, t0, d), Verdict::Take, "{free}");
        }
        assert_eq!(judge(&spec("me", "2099-01-01T00:00:00Z"), "me", &mut None, t0, d), Verdict::Renew);
        // A holder that is not a string is somebody, not nobody.
        assert_eq!(judge(&json!({"holderIdentity": 7}), "me", &mut None, t0, d), Verdict::Wait);
        assert_eq!(judge(&spec("other", "x"), "me", &mut None, t0, Duration::MAX), Verdict::Wait);
    }

    #[test]
    fn without_a_recent_renewal_the_replica_does_not_lead() {
        let (tx, rx) = watch::channel(true);
        let now = Instant::now();
        let until = Arc::new(Mutex::new(Some(now + Duration::from_secs(1))));
        let l = Leadership {
            leading: rx,
            confirmed_until: Some(until.clone()),
            stop: None,
            task: None,
            _always: Some(tx),
        };
        assert!(l.confirmed(now));
        assert!(!l.confirmed(now + Duration::from_secs(1)), "the last renewal is too old");
        *lock(&until) = None;
        assert!(!l.confirmed(now), "never renewed");
        assert!(Leadership::always().leads());
    }
}
