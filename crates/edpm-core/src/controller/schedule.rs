//! When the controller evaluates what: the scheduling state of its loop, pure. The loop (the
//! product's `controller`) hands it what happened and the time, on the loop's own monotonic
//! clock as a [`Duration`] since the loop began, and asks it when to wake and what to
//! evaluate; it reads no clock itself, so every rule is a unit test.
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

use std::collections::BTreeMap;
use std::time::Duration;

use super::touch::Touch;

/// The longest a change waits for the burst it belongs to to end.
pub const MAX_GATHER: Duration = Duration::from_secs(1);
/// Backoff after a failed evaluation or write.
pub const RETRY_MIN: Duration = Duration::from_secs(1);
pub const RETRY_MAX: Duration = Duration::from_secs(30);

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
    fn a_gathering_due_before_the_first_sync_waits_for_it() {
        let mut s = Schedule::new(ms(100), false);
        s.changed(sets(&["a"]), ms(0));
        s.wait_for_sync();
        assert_eq!(s.due(), None);
        s.relisted(ms(500));
        assert_eq!(s.take_due(ms(600)), Some(Touch::All));
    }
}
