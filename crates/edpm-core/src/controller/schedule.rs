//! When the controller evaluates what: the scheduling state of its loop, pure. The loop (the
//! `edpm-controller` crate) hands it every [`Trigger`], one at a time, with the time on the
//! loop's own monotonic clock as a [`Duration`] since the loop began; [`Schedule::on`] says
//! what to do [`Next`], and [`Schedule::wake`] when to wake if nothing else happens. It reads
//! no clock itself, so every rule is a unit test.
//!
//! - A change is gathered with the changes that follow it: it is evaluated `debounce` after
//!   the last of them, and never more than [`MAX_GATHER`] after the first.
//! - A node agent's Lease expiring moves its NodeSet with no event to say so: the NodeSet is
//!   evaluated at that instant.
//! - Becoming the leader, Nova's answer changing and a Lease expiring want an evaluation now;
//!   a relist (which may have missed deletions) wants everything, debounced.
//! - A failed evaluation keeps what it touched and retries after a backoff that doubles from
//!   [`RETRY_MIN`] to [`RETRY_MAX`] (jittered by the caller); a success resets it.
//! - Writes left out for want of leadership end the leadership as far as the loop knows, so
//!   leading again looks at everything.
//! - One evaluation at a time: while one is in flight the loop does not wake for the gathered
//!   changes, and leadership as the election says it is taken when the evaluation ends.

use std::collections::BTreeMap;
use std::time::Duration;

use super::touch::Touch;

/// The longest a change waits for the burst it belongs to to end.
pub const MAX_GATHER: Duration = Duration::from_secs(1);
/// Backoff after a failed evaluation or write.
pub const RETRY_MIN: Duration = Duration::from_secs(1);
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// Everything that moves the controller's loop, one variant per kind of trigger: each is handed
/// to [`Schedule::on`] as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// A watched object changed: the NodeSets it touches.
    Changed(Touch),
    /// A watched kind was listed (again): a relist may have missed deletions.
    Listed,
    /// The loop's wake time ([`Schedule::wake`]) came: the gathered changes are due, or a node
    /// agent's Lease expired. `synced`: every watched kind has been listed completely.
    Timer { synced: bool },
    /// Nova's answer changed: the NodeSets that run nova.
    NovaAnswered(Touch),
    /// A delivered Secret or ConfigMap moved: the NodeSets it was delivered to.
    InputsMoved(Touch),
    /// Leadership won or lost, as the election says it now.
    Leadership(bool),
    /// The loop's second, with leadership as its guard says it now (a leader that could not
    /// renew stops leading with no election event).
    Tick { leads: bool },
    /// SIGTERM or SIGINT, or the watches or the election ended: why.
    Stop(&'static str),
    /// The evaluation in flight ended.
    Evaluated(Evaluation),
}

/// How an evaluation ([`Next::Evaluate`]) ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evaluation {
    /// Each batch done, in order (a failure stops at its batch).
    pub batches: Vec<Batch>,
    /// It failed: what it touched is evaluated again after this wait (the error policy's,
    /// from [`Schedule::backoff`]).
    pub retry_in: Option<Duration>,
    /// Some of its writes were left out for want of leadership.
    pub writes_skipped: bool,
}

/// One batch of an evaluation, done.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub nodesets: Touch,
    /// When, from `at`, each NodeSet's first node agent Lease expires.
    pub expiries: BTreeMap<String, Duration>,
    /// When the batch ended.
    pub at: Duration,
}

/// What the loop does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing now: wait for the next trigger, or until [`Schedule::wake`].
    Wait,
    /// Evaluate these NodeSets; no other evaluation starts until [`Trigger::Evaluated`].
    Evaluate(Touch),
    /// Stop, for this reason: the evaluation in flight may finish within the grace period.
    Stop(&'static str),
}

/// The controller loop's scheduling state. Times are the loop's monotonic clock: durations
/// since it began.
#[derive(Debug, Clone)]
pub struct Schedule {
    debounce: Duration,
    /// What the next evaluation covers.
    pending: Touch,
    /// A gathering under way: (its first change, when it is due).
    gather: Option<(Duration, Duration)>,
    /// NodeSet → when its first node agent Lease expires (`""`: a Lease naming no NodeSet).
    expiries: BTreeMap<String, Duration>,
    backoff: Duration,
    /// Whether this replica leads, as far as the loop knows.
    leads: bool,
    /// What the evaluation in flight covers.
    evaluating: Option<Touch>,
    /// Leadership as last said while an evaluation was in flight: taken when it ends.
    deferred_leads: Option<bool>,
}

impl Schedule {
    /// A loop that gathers changes for `debounce`, leading or not at its start.
    pub fn new(debounce: Duration, leads: bool) -> Schedule {
        Schedule {
            debounce,
            pending: Touch::none(),
            gather: None,
            expiries: BTreeMap::new(),
            backoff: RETRY_MIN,
            leads,
            evaluating: None,
            deferred_leads: None,
        }
    }

    /// The one step of the loop: what `trigger`, at `now`, changes, and what to do next.
    pub fn on(&mut self, trigger: Trigger, now: Duration) -> Next {
        match trigger {
            Trigger::Changed(touched) => self.changed(touched, now),
            Trigger::Listed => self.relisted(now),
            Trigger::NovaAnswered(touched) | Trigger::InputsMoved(touched) => self.now(touched, now),
            Trigger::Leadership(leads) | Trigger::Tick { leads } if self.evaluating.is_some() => {
                self.deferred_leads = Some(leads);
            }
            Trigger::Leadership(leads) | Trigger::Tick { leads } => {
                self.leadership(leads, now);
            }
            Trigger::Timer { synced } => return self.timer(synced, now),
            Trigger::Stop(why) => return Next::Stop(why),
            Trigger::Evaluated(e) => self.ended(e, now),
        }
        Next::Wait
    }

    /// When the loop wakes with [`Trigger::Timer`] if nothing else happens first: the
    /// gathering's due time or the first Lease expiry; never while an evaluation is in flight.
    pub fn wake(&self) -> Option<Duration> {
        if self.evaluating.is_some() {
            return None;
        }
        self.due().into_iter().chain(self.next_expiry()).min()
    }

    /// Whether an evaluation is in flight.
    pub fn evaluating(&self) -> bool {
        self.evaluating.is_some()
    }

    /// The backoff the next failure waits, before the error policy's jitter.
    pub fn backoff(&self) -> Duration {
        self.backoff
    }

    /// The wake time came: expired Leases join the gathering; a gathering due before every
    /// kind was listed waits for the last listing (which wants everything anyway).
    fn timer(&mut self, synced: bool, now: Duration) -> Next {
        if self.evaluating.is_some() {
            return Next::Wait;
        }
        self.expire(now);
        if self.due().is_none_or(|due| due > now) {
            return Next::Wait;
        }
        if !synced {
            self.wait_for_sync();
            return Next::Wait;
        }
        match self.take_due(now) {
            Some(touched) => {
                self.evaluating = Some(touched.clone());
                Next::Evaluate(touched)
            }
            None => Next::Wait,
        }
    }

    /// The evaluation in flight ended: its batches' Lease expiries are known, a failure is
    /// retried after its wait, writes left out end the leadership, and leadership as said
    /// meanwhile is taken.
    fn ended(&mut self, e: Evaluation, now: Duration) {
        let touched = self.evaluating.take().unwrap_or_else(Touch::none);
        for b in e.batches {
            self.evaluated(&b.nodesets, b.expiries, b.at);
        }
        match e.retry_in {
            None => self.succeeded(),
            Some(wait) => {
                self.failed(touched, now, |_| wait);
            }
        }
        if e.writes_skipped {
            self.writes_skipped();
        }
        if let Some(leads) = self.deferred_leads.take() {
            self.leadership(leads, now);
        }
    }

    /// When the gathered changes are due, if any are.
    pub fn due(&self) -> Option<Duration> {
        self.gather.map(|(_, due)| due)
    }

    /// When the first node agent Lease known expires, if one is known.
    pub fn next_expiry(&self) -> Option<Duration> {
        self.expiries.values().min().copied()
    }

    /// Whether this replica leads, as far as the loop knows.
    pub fn leads(&self) -> bool {
        self.leads
    }

    /// An object changed: what it touches is evaluated with the changes around it.
    pub fn changed(&mut self, touched: Touch, now: Duration) {
        if !touched.is_empty() {
            self.pending.add(touched);
            self.gather_for(now, self.debounce);
        }
    }

    /// A kind was listed (again): a relist may have missed deletions' events, so everything
    /// is evaluated, with the changes around it.
    pub fn relisted(&mut self, now: Duration) {
        self.pending.add(Touch::All);
        self.gather_for(now, self.debounce);
    }

    /// Something that wants an evaluation at once (Nova's answer changed for these NodeSets).
    pub fn now(&mut self, touched: Touch, now: Duration) {
        if !touched.is_empty() {
            self.pending.add(touched);
            self.gather_for(now, Duration::ZERO);
        }
    }

    /// Leadership as the election says it now; true when this replica has just become the
    /// leader, which then evaluates everything at once.
    pub fn leadership(&mut self, leads: bool, now: Duration) -> bool {
        if leads == self.leads {
            return false;
        }
        self.leads = leads;
        if leads {
            self.now(Touch::All, now);
        }
        leads
    }

    /// An evaluation left its writes out because leadership was unconfirmed, perhaps only for
    /// a moment: the loop no longer counts itself the leader, so that leading again looks at
    /// everything. True when that ended the leadership.
    pub fn writes_skipped(&mut self) -> bool {
        std::mem::replace(&mut self.leads, false)
    }

    /// The Leases that have expired by `now`: their NodeSets are evaluated at once.
    pub fn expire(&mut self, now: Duration) {
        let expired: Vec<String> =
            self.expiries.iter().filter(|(_, t)| **t <= now).map(|(s, _)| s.clone()).collect();
        if expired.is_empty() {
            return;
        }
        for set in expired {
            self.expiries.remove(&set);
            self.pending.add(if set.is_empty() { Touch::All } else { Touch::NodeSets([set].into()) });
        }
        self.gather_for(now, Duration::ZERO);
    }

    /// When the gathering is due (`now` or later): what to evaluate. `None` before it is due,
    /// or when nothing is pending. An evaluation of everything forgets the Lease expiries
    /// known: it finds them all again.
    pub fn take_due(&mut self, now: Duration) -> Option<Touch> {
        if self.due().is_none_or(|due| due > now) {
            return None;
        }
        self.gather = None;
        let touched = std::mem::replace(&mut self.pending, Touch::none());
        if touched == Touch::All {
            self.expiries.clear();
        }
        (!touched.is_empty()).then_some(touched)
    }

    /// The gathering came due before every kind was listed: the evaluation waits for the last
    /// listing, which wants everything anyway.
    pub fn wait_for_sync(&mut self) {
        self.gather = None;
    }

    /// One batch of an evaluation is done: its NodeSets' Lease expiries are now `expiries`
    /// (when, from `now`, each NodeSet's first Lease expires).
    pub fn evaluated(&mut self, batch: &Touch, expiries: BTreeMap<String, Duration>, now: Duration) {
        self.expiries.retain(|set, _| set.is_empty() || !batch.includes(set));
        for (set, after) in expiries {
            let at = now + after;
            let slot = self.expiries.entry(set).or_insert(at);
            *slot = (*slot).min(at);
        }
    }

    /// The evaluation succeeded: the backoff starts over.
    pub fn succeeded(&mut self) {
        self.backoff = RETRY_MIN;
    }

    /// The evaluation of `touched` failed: it is tried again after the backoff, which
    /// `jitter` spreads and which doubles for the next failure. Returns the wait.
    pub fn failed(
        &mut self,
        touched: Touch,
        now: Duration,
        jitter: impl Fn(Duration) -> Duration,
    ) -> Duration {
        let wait = jitter(self.backoff);
        self.pending.add(touched);
        self.gather = Some((now, now + wait));
        self.backoff = (self.backoff * 2).min(RETRY_MAX);
        wait
    }

    /// Due `delay` after now, but never more than [`MAX_GATHER`] after the gathering's first
    /// change.
    fn gather_for(&mut self, now: Duration, delay: Duration) {
        let first = self.gather.map_or(now, |(first, _)| first);
        self.gather = Some((first, (now + delay).min(first + MAX_GATHER)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn sets(names: &[&str]) -> Touch {
        Touch::NodeSets(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn a_burst_of_changes_is_one_evaluation_debounced_and_capped() {
        let mut s = Schedule::new(ms(200), false);
        s.changed(sets(&["a"]), ms(0));
        assert_eq!(s.due(), Some(ms(200)));
        // Each change pushes the evaluation back, never past a second after the first.
        s.changed(sets(&["b"]), ms(150));
        assert_eq!(s.due(), Some(ms(350)));
        for t in (300..2000).step_by(150) {
            s.changed(sets(&["c"]), ms(t));
        }
        assert_eq!(s.due(), Some(MAX_GATHER));
        assert_eq!(s.take_due(ms(999)), None, "not yet due");
        assert_eq!(s.take_due(ms(1000)), Some(sets(&["a", "b", "c"])));
        assert_eq!(s.due(), None);
        assert_eq!(s.take_due(ms(5000)), None, "nothing pending");
    }

    #[test]
    fn a_change_that_touches_nothing_schedules_nothing() {
        let mut s = Schedule::new(ms(200), false);
        s.changed(Touch::none(), ms(0));
        assert_eq!(s.due(), None);
    }

    #[test]
    fn a_relist_evaluates_everything_and_forgets_the_expiries() {
        let mut s = Schedule::new(ms(100), false);
        s.evaluated(&sets(&["a"]), [("a".to_string(), ms(40_000))].into(), ms(0));
        assert_eq!(s.next_expiry(), Some(ms(40_000)));
        s.changed(sets(&["a"]), ms(10));
        s.relisted(ms(20));
        assert_eq!(s.take_due(ms(120)), Some(Touch::All));
        assert_eq!(s.next_expiry(), None, "the evaluation of everything finds them again");
    }

    #[test]
    fn a_lease_expiring_evaluates_its_nodeset_at_that_instant() {
        let mut s = Schedule::new(ms(500), false);
        let batch = sets(&["a", "b"]);
        s.evaluated(&batch, [("a".to_string(), ms(30_000)), ("b".to_string(), ms(40_000))].into(), ms(1000));
        assert_eq!(s.next_expiry(), Some(ms(31_000)));
        s.expire(ms(30_999));
        assert_eq!(s.due(), None, "not yet");
        s.expire(ms(31_000));
        assert_eq!(s.due(), Some(ms(31_000)), "no debounce: the clock alone moved it");
        assert_eq!(s.take_due(ms(31_000)), Some(sets(&["a"])));
        assert_eq!(s.next_expiry(), Some(ms(41_000)), "b's still counts");
        // A Lease that names no NodeSet can move any of them.
        s.evaluated(&sets(&["c"]), [(String::new(), ms(5))].into(), ms(41_000));
        s.expire(ms(41_005));
        assert_eq!(s.take_due(ms(41_005)), Some(Touch::All));
    }

    #[test]
    fn a_batch_replaces_only_its_own_nodesets_expiries_and_keeps_the_earliest() {
        let mut s = Schedule::new(ms(0), false);
        s.evaluated(&sets(&["a", "b"]), [("a".to_string(), ms(10)), ("b".to_string(), ms(20))].into(), ms(0));
        // a re-evaluated: its Lease was renewed.
        s.evaluated(&sets(&["a"]), [("a".to_string(), ms(50))].into(), ms(0));
        assert_eq!(s.next_expiry(), Some(ms(20)));
        s.evaluated(&sets(&["b"]), BTreeMap::new(), ms(0));
        assert_eq!(s.next_expiry(), Some(ms(50)), "b has no live Lease now");
    }

    #[test]
    fn failures_back_off_doubling_to_the_cap_and_a_success_resets() {
        let mut s = Schedule::new(ms(100), false);
        let no_jitter = |d: Duration| d;
        let mut waits = Vec::new();
        for _ in 0..7 {
            waits.push(s.failed(sets(&["a"]), ms(0), no_jitter).as_secs());
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(s.take_due(ms(29_999)), None);
        assert_eq!(s.take_due(ms(30_000)), Some(sets(&["a"])), "what failed is kept");
        s.succeeded();
        assert_eq!(s.failed(sets(&["a"]), ms(0), |d| d / 2), ms(500), "jittered by the caller");
    }

    #[test]
    fn a_failure_keeps_what_arrived_meanwhile() {
        let mut s = Schedule::new(ms(100), false);
        s.changed(sets(&["b"]), ms(10));
        s.failed(sets(&["a"]), ms(20), |d| d);
        assert_eq!(s.take_due(ms(1020)), Some(sets(&["a", "b"])));
    }

    #[test]
    fn becoming_the_leader_evaluates_everything_at_once() {
        let mut s = Schedule::new(ms(500), false);
        assert!(!s.leadership(false, ms(0)), "no change");
        assert!(s.leadership(true, ms(10)));
        assert_eq!(s.take_due(ms(10)), Some(Touch::All));
        assert!(!s.leadership(true, ms(20)), "still leading: nothing new");
        assert_eq!(s.due(), None);
        assert!(!s.leadership(false, ms(30)), "losing it evaluates nothing");
        assert_eq!(s.due(), None);
    }

    #[test]
    fn skipped_writes_end_the_leadership_so_leading_again_looks_at_everything() {
        let mut s = Schedule::new(ms(500), true);
        assert!(s.writes_skipped());
        assert!(!s.leads());
        assert!(!s.writes_skipped(), "already not leading");
        assert!(s.leadership(true, ms(100)));
        assert_eq!(s.take_due(ms(100)), Some(Touch::All));
    }

    #[test]
    fn one_evaluation_at_a_time_and_what_comes_meanwhile_is_gathered_for_the_next() {
        let mut s = Schedule::new(ms(100), false);
        assert_eq!(s.on(Trigger::Changed(sets(&["a"])), ms(0)), Next::Wait);
        assert_eq!(s.wake(), Some(ms(100)));
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(100)), Next::Evaluate(sets(&["a"])));
        assert!(s.evaluating());
        // Meanwhile: a change, Nova's answer and an input moving are gathered; no wake.
        s.on(Trigger::Changed(sets(&["b"])), ms(150));
        s.on(Trigger::NovaAnswered(sets(&["n"])), ms(160));
        s.on(Trigger::InputsMoved(sets(&["i"])), ms(170));
        assert_eq!(s.wake(), None, "not while an evaluation is in flight");
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(300)), Next::Wait);
        let batch =
            Batch { nodesets: sets(&["a"]), expiries: [("a".to_string(), ms(30_000))].into(), at: ms(400) };
        s.on(Trigger::Evaluated(Evaluation { batches: vec![batch], ..Evaluation::default() }), ms(400));
        assert!(!s.evaluating());
        assert_eq!(s.next_expiry(), Some(ms(30_400)));
        assert_eq!(s.wake(), Some(ms(170)), "due at once: the input that moved wanted it now");
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(400)), Next::Evaluate(sets(&["b", "i", "n"])));
    }

    #[test]
    fn a_failed_evaluation_is_retried_after_the_error_policys_wait() {
        let mut s = Schedule::new(ms(100), false);
        s.on(Trigger::Listed, ms(0));
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(100)), Next::Evaluate(Touch::All));
        assert_eq!(s.backoff(), RETRY_MIN);
        let failed = Evaluation { retry_in: Some(ms(700)), ..Evaluation::default() };
        s.on(Trigger::Evaluated(failed), ms(200));
        assert_eq!(s.backoff(), RETRY_MIN * 2, "doubled for the next failure");
        assert_eq!(s.wake(), Some(ms(900)));
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(900)), Next::Evaluate(Touch::All));
        s.on(Trigger::Evaluated(Evaluation::default()), ms(950));
        assert_eq!(s.backoff(), RETRY_MIN, "a success starts it over");
    }

    #[test]
    fn leadership_said_during_an_evaluation_is_taken_when_it_ends() {
        let mut s = Schedule::new(ms(100), true);
        s.on(Trigger::Changed(sets(&["a"])), ms(0));
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(100)), Next::Evaluate(sets(&["a"])));
        s.on(Trigger::Tick { leads: false }, ms(150));
        assert!(s.leads(), "not yet");
        s.on(Trigger::Leadership(true), ms(160));
        s.on(Trigger::Evaluated(Evaluation { writes_skipped: true, ..Evaluation::default() }), ms(200));
        assert!(s.leads(), "the election's last word: leading again, which looks at everything");
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(200)), Next::Evaluate(Touch::All));
    }

    #[test]
    fn the_timer_expires_leases_and_waits_for_the_first_sync() {
        let mut s = Schedule::new(ms(100), false);
        s.evaluated(&sets(&["a"]), [("a".to_string(), ms(50))].into(), ms(0));
        assert_eq!(s.wake(), Some(ms(50)));
        assert_eq!(s.on(Trigger::Timer { synced: false }, ms(50)), Next::Wait, "not before the first sync");
        assert_eq!(s.wake(), None);
        s.on(Trigger::Listed, ms(60));
        assert_eq!(s.on(Trigger::Timer { synced: true }, ms(160)), Next::Evaluate(Touch::All));
        assert_eq!(s.on(Trigger::Stop("SIGTERM"), ms(170)), Next::Stop("SIGTERM"));
    }

    #[test]
    fn a_gathering_due_before_the_first_sync_waits_for_it() {
        let mut s = Schedule::new(ms(100), false);
        s.changed(sets(&["a"]), ms(0));
        s.wait_for_sync();
        assert_eq!(s.due(), None);
        s.relisted(ms(500));
        assert_eq!(s.take_due(ms(600)), Some(Touch::All));
    }
}
