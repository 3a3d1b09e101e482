//! The controller's loop, as one stream of events (controller-rs's shape: a stream of triggers
//! into `reconcile`, with an error policy).
//!
//! Every trigger is a variant of the pure `schedule::Trigger`, from one of the sources merged
//! into one stream ([`triggers`]): the watches (`Changed`, `Listed`), the election
//! (`Leadership`), the Nova poller (`NovaAnswered`), the recheck of delivered inputs
//! (`InputsMoved`), the loop's second (`Tick`), SIGTERM and SIGINT (`Stop`). The loop's one
//! `select!` takes the next of them, or the wake time the schedule asks for (`Timer`: the
//! gathered changes are due, or a node agent's Lease expires), or the end of the evaluation in
//! flight (`Evaluated`). Each goes to `Schedule::on`, whose `Next` says what to do: wait,
//! [`reconcile`] these NodeSets (one evaluation at a time), or stop.
//!
//! What the loop itself keeps: `/healthz`'s heartbeat (each watch event, each idle second),
//! the leader gauge, and the logs.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::stream::{self, LocalBoxStream, StreamExt};
use tokio::signal::unix::SignalKind;
use tokio::time::Instant;

use super::evaluate::{Cx, Reconciled, reconcile};
use super::{Error, Options, inputs, nova, probes::Metrics};
use crate::k8s::{self, Client};
use crate::k8s::{WatchEvent, watch};
use edpm_core::controller::schedule::{Batch, Evaluation, Next, Schedule, Trigger};
use edpm_core::controller::touch::Touch;
use edpm_core::readiness::PhaseMap;

/// What the leader Lease's release gets at least at shutdown, even when the evaluation in
/// flight used the whole grace period.
const RELEASE_MIN: Duration = Duration::from_secs(1);

/// The evaluation in flight.
type InFlight<'a> = Pin<Box<dyn Future<Output = Reconciled> + 'a>>;

/// The loop's clock for the schedule: time since the loop began.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn at(&self, t: Option<Duration>) -> Option<Instant> {
        t.map(|t| self.0 + t)
    }

    fn since(&self, t: Instant) -> Duration {
        t.duration_since(self.0)
    }
}

/// The loop; returns why it stopped.
pub(super) async fn control(
    client: &Client,
    selector: Option<&str>,
    opts: &Options,
    phases: &PhaseMap,
    metrics: &Metrics,
    mut signals: LocalBoxStream<'static, Trigger>,
) -> Result<&'static str, Error> {
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    let stores =
        match unless_stopped(&mut signals, watch::start(client, selector, opts.crd_recheck, tx)).await? {
            Ok(stores) => stores,
            Err(reason) => return Ok(reason),
        };
    tracing::info!(namespace = client.namespace(), kinds = %stores.kinds().join(" "), "watching");
    let identity = identity();
    let recorder = k8s::events::Events::new(client, &identity);
    let leadership = lead(client, opts, &identity).await?;
    let mut schedule = Schedule::new(opts.debounce, leadership.leads());
    metrics.set_leader(schedule.leads());
    let (nova, nova_changed) = nova::Poller::start_polling(opts.nova.as_ref());
    let clock = Clock(Instant::now());
    let identities = opts.identities.clone().map(crate::identities::Identities::new);
    let cx = Cx {
        identities: identities.as_ref(),
        client,
        events: &recorder,
        stores: &stores,
        phases,
        metrics,
        leadership: &leadership,
        nova: nova.as_ref(),
        inputs: &inputs::Inputs::default(),
    };
    let sources = Sources { events, nova_changed, signals, inputs_interval: opts.inputs_interval };
    let mut triggers = triggers(sources, &cx);
    let mut in_flight: Option<InFlight> = None;
    let reason = loop {
        let wake = clock.at(schedule.wake());
        // The one wait: the next trigger, the wake time, or the end of the evaluation in flight.
        let trigger = tokio::select! {
            t = triggers.next() => t.unwrap_or(Trigger::Stop("every source of triggers ended")),
            () = sleep_until(wake), if wake.is_some() => Trigger::Timer { synced: stores.synced() },
            done = finish(&mut in_flight), if in_flight.is_some() => {
                in_flight = None;
                evaluated(done, &schedule, &clock)
            }
        };
        if matches!(trigger, Trigger::Tick { .. }) && !schedule.evaluating() {
            // The loop is waiting, not stuck.
            metrics.tick();
        }
        match step(&mut schedule, trigger, clock.now(), metrics, &identity) {
            Next::Wait => {}
            Next::Evaluate(touched) => in_flight = Some(Box::pin(reconcile(&cx, touched))),
            Next::Stop(why) => break why,
        }
    };
    tracing::info!(reason, "stopping");
    metrics.set_leader(false);
    let deadline = wind_down(in_flight, opts.grace).await;
    // What borrows the leadership goes before it is released.
    drop(triggers);
    release(leadership, opts, deadline).await;
    Ok(reason)
}

/// One trigger into the schedule, saying a change of leadership (the gauge and the log).
fn step(schedule: &mut Schedule, trigger: Trigger, now: Duration, metrics: &Metrics, identity: &str) -> Next {
    let led = schedule.leads();
    let next = schedule.on(trigger, now);
    if schedule.leads() != led {
        metrics.set_leader(schedule.leads());
        tracing::info!(leading = schedule.leads(), identity, "leadership changed");
    }
    next
}

/// The evaluation in flight, if any, given the grace period to finish: its writes are current.
/// It is abandoned after it (the writes are idempotent applies, and the next leader evaluates
/// everything). Returns when the grace period ends.
async fn wind_down(in_flight: Option<InFlight<'_>>, grace: Duration) -> Instant {
    let deadline = Instant::now() + grace;
    if let Some(eval) = in_flight
        && tokio::time::timeout_at(deadline, eval).await.is_err()
    {
        tracing::warn!(
            ?grace,
            "the evaluation in flight did not finish within the grace period; abandoned (the next leader evaluates everything)"
        );
    }
    deadline
}

/// What the trigger stream is made of, besides what the loop's context lends it.
struct Sources {
    events: tokio::sync::mpsc::UnboundedReceiver<WatchEvent>,
    nova_changed: tokio::sync::mpsc::UnboundedReceiver<()>,
    signals: LocalBoxStream<'static, Trigger>,
    inputs_interval: Option<Duration>,
}

/// Every source of triggers, merged into one stream: the watches, the election, Nova's poller,
/// the recheck of delivered inputs, the loop's second and the signals.
fn triggers<'a>(s: Sources, cx: &'a Cx<'a>) -> LocalBoxStream<'a, Trigger> {
    let Cx { stores, metrics, leadership, nova, client, inputs, .. } = *cx;
    let watches = receiver(s.events)
        .filter_map(move |ev| std::future::ready(observed(ev, stores, metrics)))
        .chain(stream::once(async { Trigger::Stop("the watches ended") }));
    let election = leadership
        .changes()
        .map(Trigger::Leadership)
        .chain(stream::once(async { Trigger::Stop("leader election ended") }));
    let nova = receiver(s.nova_changed).map(move |()| {
        let sets = nova.map(nova::Poller::nodesets).unwrap_or_default();
        tracing::debug!(nodesets = sets.len(), "Nova's answer changed");
        Trigger::NovaAnswered(Touch::NodeSets(sets))
    });
    let inputs = inputs::moves(s.inputs_interval, client, stores, inputs, metrics).map(|moved| {
        tracing::info!(nodesets = moved.len(), "a delivered Secret or ConfigMap changed");
        Trigger::InputsMoved(Touch::NodeSets(moved))
    });
    // The heartbeat of /healthz, and the leadership guard's verdict (see k8s::leader).
    let ticks = stream::unfold(tokio::time::interval(Duration::from_secs(1)), move |mut tick| async move {
        tick.tick().await;
        Some((Trigger::Tick { leads: leadership.leads() }, tick))
    });
    stream::select_all([
        watches.boxed_local(),
        election.boxed_local(),
        nova.boxed_local(),
        inputs.boxed_local(),
        ticks.boxed_local(),
        s.signals,
    ])
    .boxed_local()
}

/// A channel's messages as a stream.
fn receiver<T: 'static>(rx: tokio::sync::mpsc::UnboundedReceiver<T>) -> impl futures::Stream<Item = T> {
    stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) })
}

/// `start`'s result, unless SIGTERM or SIGINT comes first (`Err`: which one, told): what the
/// controller does before its loop (connecting, listing what it watches) waits on an API
/// server that may not answer yet, and a signal then stops it as one in the loop does.
pub(super) async fn unless_stopped<T, E>(
    signals: &mut LocalBoxStream<'static, Trigger>,
    start: impl Future<Output = Result<T, E>>,
) -> Result<Result<T, &'static str>, E> {
    tokio::select! {
        started = start => started.map(Ok),
        signal = signals.next() => {
            let reason = match signal {
                Some(Trigger::Stop(why)) => why,
                _ => "every source of triggers ended",
            };
            tracing::info!(reason, "stopping while starting");
            Ok(Err(reason))
        }
    }
}

/// SIGTERM and SIGINT, either of which stops the loop, as triggers; installed before anything
/// else, so that a signal that comes while the controller starts is not lost.
pub(super) fn signals() -> Result<LocalBoxStream<'static, Trigger>, Error> {
    let listen = |kind: SignalKind, name: &'static str| {
        let signal = tokio::signal::unix::signal(kind)
            .map_err(|e| Error::failure(format!("cannot watch for {name}: {e}")))?;
        Ok::<_, Error>(stream::unfold(signal, move |mut s| async move {
            s.recv().await.map(|()| (Trigger::Stop(name), s))
        }))
    };
    let term = listen(SignalKind::terminate(), "SIGTERM")?;
    let int = listen(SignalKind::interrupt(), "SIGINT")?;
    Ok(stream::select(term, int).boxed_local())
}

/// Takes in one watch event: what it touches, for the schedule. Every event is the watches and
/// this loop at work (during an evaluation too).
fn observed(ev: WatchEvent, stores: &watch::Stores, metrics: &Metrics) -> Option<Trigger> {
    metrics.tick();
    match ev {
        WatchEvent::Changed { kind, reach } => {
            let t = reach.touch(stores);
            tracing::trace!(kind, touched = ?t, "changed");
            Some(Trigger::Changed(t))
        }
        WatchEvent::Synced { kind } => {
            tracing::debug!(kind, "listed");
            if stores.synced() && !metrics.synced.swap(true, Ordering::AcqRel) {
                tracing::info!("every watched kind listed: evaluating everything");
            }
            Some(Trigger::Listed)
        }
        WatchEvent::Failed { kind, code, error } => {
            metrics.watch_restarted(kind);
            metrics.api_error("watch", code);
            tracing::warn!(kind, error = %error, "watch failed; it backs off and resumes or lists again");
            None
        }
    }
}

/// The end of the evaluation in flight; never, when none is.
async fn finish(in_flight: &mut Option<InFlight<'_>>) -> Reconciled {
    match in_flight {
        Some(eval) => eval.await,
        None => std::future::pending().await,
    }
}

/// An evaluation's end as the schedule takes it: its batches on the loop's clock, and a
/// failure's retry as the error policy says.
fn evaluated(done: Reconciled, schedule: &Schedule, clock: &Clock) -> Trigger {
    let batches = done
        .batches
        .into_iter()
        .map(|(nodesets, expiries, at)| Batch { nodesets, expiries, at: clock.since(at) })
        .collect();
    let retry_in = done.result.err().map(|e| error_policy(&e, schedule));
    Trigger::Evaluated(Evaluation { batches, retry_in, writes_skipped: done.writes_skipped })
}

/// A failed evaluation is retried after the schedule's backoff, jittered so that replicas and
/// restarts do not retry in step; what it touched is kept, and the next evaluation works from
/// the evidence, so nothing is lost.
fn error_policy(e: &Error, schedule: &Schedule) -> Duration {
    let wait = k8s::jitter(schedule.backoff());
    tracing::warn!(error = %e, retry_in = ?wait, "evaluation failed; retrying");
    wait
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
