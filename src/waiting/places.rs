//! A client's places in a fair lock's queue, kept together.
//!
//! A fair lock's queue keeps each waiting *client* alive, not each wait (see
//! `lua/fair_queue.lua`): any attempt of any of the client's waits keeps all their
//! places for [`PLACE_WINDOW_MS`](crate::lease::PLACE_WINDOW_MS). So the waits of one
//! client on one lock share a schedule: one attempt is due per
//! [`PLACE_REFRESH`] (or when the lock's hold runs out, if sooner), and whichever of
//! them wakes first makes it. An attempt for another reason (a message woke its wait)
//! counts as well.
//!
//! The attempt made when the hold runs out is what passes on a lock whose holder died
//! or let a fixed lease run out (an expiry publishes nothing). So the hold's end is
//! learned whenever the lock changes hands, not only from the attempts' PTTL: from a
//! grant to one of the waits ([`Places::granted`]), or from a message telling the
//! client that one of its waits is next ([`Places::told`]). Learned from attempts
//! alone, a hold taken after the last of them ran out unnoticed until the next refresh.
//!
//! The same attempts sample the server's clock: a hand-off's message says when Redis
//! handed the lock over by that clock, and the latest sample tells how early that
//! could have been by this process's clock (see [`Places::local_time_of`]).

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

use crate::lease::PLACE_REFRESH;

/// The schedule and clock sample shared by the waits of one client on one fair lock.
#[derive(Debug, Default)]
pub(crate) struct Places {
    state: Mutex<State>,
    /// Woken when the next attempt falls due sooner than the waits were told.
    sooner: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// When the next attempt is due to keep the places: a refresh period after the
    /// last attempt answered (or taken).
    refresh: Option<Instant>,
    /// When the lock's current hold (or hand-off) runs out, as last learned: an expiry
    /// publishes nothing, so an attempt is due then, to pass the lock on.
    lease_end: Option<LeaseEnd>,
    /// The latest attempt answered: when it was sent, and the server's clock (in
    /// milliseconds) when it ran.
    clock: Option<(Instant, u64)>,
}

/// When the lock's hold runs out, and when that was learned: what was learned later
/// wins (the lock may have changed hands in between).
#[derive(Debug, Clone, Copy)]
struct LeaseEnd {
    at: Instant,
    learned: Instant,
}

impl State {
    fn due(&self) -> Option<Instant> {
        let lease_end = self.lease_end.map(|end| end.at);
        match (self.refresh, lease_end) {
            (Some(refresh), Some(end)) => Some(refresh.min(end)),
            (due, None) | (None, due) => due,
        }
    }

    /// Records that the lock's hold runs out `at`, as learned at `learned`, unless
    /// something was learned later.
    fn lease_ends(&mut self, at: Option<Instant>, learned: Instant) {
        if self.lease_end.is_none_or(|end| end.learned <= learned) {
            self.lease_end = at.map(|at| LeaseEnd { at, learned });
        }
    }
}

impl Places {
    /// Records the answer of an attempt sent at `sent_at` that left its wait queued:
    /// the server's clock read `server_ms` when it ran, and the lock's hold had `pttl`
    /// left (`None`: no expiry). The next attempt is due a refresh period on, or when
    /// that hold runs out if sooner. An answer older than one already recorded changes
    /// nothing, and one sent before a grant or message that told this client of a new
    /// hold leaves that hold's end alone.
    pub(crate) fn answered(&self, sent_at: Instant, server_ms: u64, pttl: Option<Duration>) {
        self.update(|state| {
            if state.clock.is_some_and(|(latest, _)| latest > sent_at) {
                return;
            }
            state.clock = Some((sent_at, server_ms));
            state.refresh = Some(sent_at + PLACE_REFRESH);
            state.lease_ends(pttl.map(|pttl| sent_at + pttl), sent_at);
        });
    }

    /// Records that one of the waits took the lock for a lease of `lease` with an
    /// attempt sent at `sent_at`: the others' next attempt is due when that lease runs
    /// out, if sooner than their refresh (the grant itself keeps no place).
    pub(crate) fn granted(&self, sent_at: Instant, lease: Duration) {
        let learned = Instant::now();
        self.update(|state| state.lease_ends(Some(sent_at + lease), learned));
    }

    /// Records a message saying that a hold taken when the server's clock read
    /// `server_ms` runs out `lease_ms` later (see `lua/fair_queue.lua`,
    /// `fair.tell_next`): the hold of another client's wait, while one of these waits
    /// is next in line.
    pub(crate) fn told(&self, server_ms: u64, lease_ms: u64) {
        let now = Instant::now();
        let lease = Duration::from_millis(lease_ms);
        let at = self
            .local_time_of(server_ms.saturating_add(lease_ms))
            .unwrap_or(now + lease);
        self.update(|state| state.lease_ends(Some(at), now));
    }

    /// Changes the state with `change`, and wakes the waits if the next attempt is due
    /// sooner than before.
    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.state.lock();
        let before = state.due();
        change(&mut state);
        let sooner = match (before, state.due()) {
            (Some(before), Some(after)) => after < before,
            (None, after) => after.is_some(),
            (Some(_), None) => false,
        };
        drop(state);
        if sooner {
            self.sooner.notify_waiters();
        }
    }

    /// When the next attempt is due, if any attempt was answered (or a hold's end
    /// learned).
    pub(crate) fn due(&self) -> Option<Instant> {
        self.state.lock().due()
    }

    /// Whether the caller is to make the attempt due by `now`: true for one caller per
    /// due time (the next is then put a refresh period on, and a hold's end that has
    /// passed is forgotten, until the attempt's answer sets them).
    pub(crate) fn take_due(&self, now: Instant) -> bool {
        let mut state = self.state.lock();
        if state.due().is_none_or(|due| due > now) {
            return false;
        }
        state.refresh = Some(now + PLACE_REFRESH);
        if state.lease_end.is_some_and(|end| end.at <= now) {
            state.lease_end = None;
        }
        true
    }

    /// Resolves when the next attempt falls due sooner than [`due`](Self::due) said.
    /// Enable it before reading [`due`](Self::due), so that no change is missed.
    pub(crate) fn sooner(&self) -> Notified<'_> {
        self.sooner.notified()
    }

    /// The earliest instant, by this process's clock, at which the server's clock can
    /// have read `server_ms`, by the latest sample (`None` before the first): the
    /// sample's attempt ran after it was sent, so the server's clock is at most the
    /// sample's reading ahead of ours as it stood then. This assumes both clocks run at
    /// the same rate (lease arithmetic keeps a tenth of margin for drift).
    pub(crate) fn local_time_of(&self, server_ms: u64) -> Option<Instant> {
        let (sent_at, sampled_ms) = self.state.lock().clock?;
        let after = Duration::from_millis(server_ms.saturating_sub(sampled_ms));
        let before = Duration::from_millis(sampled_ms.saturating_sub(server_ms));
        (sent_at + after).checked_sub(before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn one_waiter_takes_each_due_attempt() {
        let places = Places::default();
        assert!(!places.take_due(Instant::now()), "nothing answered yet");
        let sent = Instant::now();
        places.answered(sent, 1_000, Some(Duration::ZERO));
        assert!(places.take_due(sent));
        assert!(!places.take_due(sent), "taken twice");
        assert_eq!(places.due(), Some(sent + PLACE_REFRESH));
    }

    #[test]
    fn an_attempt_is_due_at_the_refresh_or_the_leases_end() {
        let places = Places::default();
        let sent = Instant::now();
        places.answered(sent, 1_000, Some(300 * MS));
        assert_eq!(places.due(), Some(sent + 300 * MS));
        let later = sent + MS;
        places.answered(later, 1_001, Some(Duration::from_secs(30)));
        assert_eq!(places.due(), Some(later + PLACE_REFRESH));
        let last = later + MS;
        places.answered(last, 1_002, None);
        assert_eq!(places.due(), Some(last + PLACE_REFRESH), "no expiry");
    }

    #[test]
    fn an_older_answer_changes_nothing() {
        let places = Places::default();
        let early = Instant::now();
        let late = early + 5 * MS;
        places.answered(late, 2_000, Some(Duration::from_secs(2)));
        places.answered(early, 1_995, Some(10 * MS));
        assert_eq!(places.due(), Some(late + Duration::from_secs(2)));
        assert_eq!(places.local_time_of(2_000), Some(late));
    }

    /// A wait of the client takes the lock with a 1 s lease after an attempt that
    /// handed it over (a claim window left): the others try again when the lease runs
    /// out, not at their refresh, even if that attempt's answer is read after the
    /// grant.
    #[tokio::test]
    async fn a_grant_brings_the_next_attempt_to_its_lease_end() {
        let places = Places::default();
        let handing = Instant::now() - 10 * MS;
        places.answered(handing, 1_000, Some(Duration::from_secs(2)));
        let sooner = places.sooner();
        tokio::pin!(sooner);
        sooner.as_mut().enable();
        let claim = handing + MS;
        places.granted(claim, Duration::from_secs(1));
        assert_eq!(places.due(), Some(claim + Duration::from_secs(1)));
        tokio::time::timeout(Duration::from_secs(1), sooner)
            .await
            .expect("woken");
        // An attempt sent before the grant was read, answered after it: its pttl
        // is of the lock as handed over, not the new hold.
        let stale = handing + 5 * MS;
        places.answered(stale, 1_005, Some(Duration::from_secs(2)));
        assert_eq!(places.due(), Some(claim + Duration::from_secs(1)));
        // One sent after it knows better.
        let fresh = Instant::now() + MS;
        places.answered(fresh, 1_020, Some(700 * MS));
        assert_eq!(places.due(), Some(fresh + 700 * MS));
    }

    #[test]
    fn a_told_lease_end_is_mapped_by_the_clock_sample() {
        let places = Places::default();
        let sent = Instant::now() - 10 * MS;
        places.answered(sent, 10_000, Some(Duration::from_secs(2)));
        places.told(10_500, 300);
        assert_eq!(places.due(), Some(sent + 800 * MS));
        let unsampled = Places::default();
        let before = Instant::now();
        unsampled.told(10_500, 300);
        let due = unsampled.due().expect("due when the lease runs out");
        assert!(due >= before + 300 * MS && due <= Instant::now() + 300 * MS);
    }

    #[test]
    fn a_lease_end_taken_is_forgotten() {
        let places = Places::default();
        let sent = Instant::now();
        places.answered(sent, 1_000, Some(300 * MS));
        let now = sent + 300 * MS;
        assert!(places.take_due(now));
        assert_eq!(places.due(), Some(now + PLACE_REFRESH));
        assert!(!places.take_due(now + MS));
    }

    #[test]
    fn a_server_time_maps_to_no_later_than_it_can_have_been_here() {
        let places = Places::default();
        assert_eq!(places.local_time_of(5), None);
        let sent = Instant::now() + Duration::from_secs(10);
        places.answered(sent, 50_000, None);
        assert_eq!(places.local_time_of(50_700), Some(sent + 700 * MS));
        assert_eq!(
            places.local_time_of(49_000),
            Some(sent - Duration::from_secs(1))
        );
    }

    #[tokio::test]
    async fn a_sooner_attempt_wakes_the_sleepers() {
        let places = Places::default();
        let now = Instant::now();
        places.answered(now, 1, Some(Duration::from_secs(2)));
        let sooner = places.sooner();
        tokio::pin!(sooner);
        sooner.as_mut().enable();
        let later = now + MS;
        places.answered(later, 2, Some(100 * MS));
        tokio::time::timeout(Duration::from_secs(1), sooner)
            .await
            .expect("woken");
    }
}
