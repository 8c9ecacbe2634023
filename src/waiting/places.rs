//! A client's places in a fair lock's queue, kept together.
//!
//! A fair lock's queue keeps each waiting *client* alive, not each wait (see
//! `lua/fair_queue.lua`): any attempt of any of the client's waits keeps all their
//! places for [`PLACE_WINDOW_MS`](crate::lease::PLACE_WINDOW_MS). So the waits of one
//! client on one lock share a schedule: one attempt is due per
//! [`PLACE_REFRESH`] (or when the lock's lease runs out, if sooner), and whichever of
//! them wakes first makes it. An attempt for another reason (a message woke its wait)
//! counts as well.
//!
//! The same attempts sample the server's clock: a hand-off's message says when Redis
//! handed the lock over by that clock, and the latest sample tells how early that
//! could have been by this process's clock (see [`Places::local_time_of`]).

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
    /// When the next attempt of any of the waits is due.
    due: Option<Instant>,
    /// The latest attempt answered: when it was sent, and the server's clock (in
    /// milliseconds) when it ran.
    clock: Option<(Instant, u64)>,
}

impl Places {
    /// Records the answer of an attempt sent at `sent_at` that left its wait queued:
    /// the server's clock read `server_ms` when it ran, and the next attempt is due at
    /// `next`. An answer older than one already recorded changes nothing.
    pub(crate) fn answered(&self, sent_at: Instant, server_ms: u64, next: Instant) {
        let mut state = self.state.lock();
        if state.clock.is_some_and(|(latest, _)| latest > sent_at) {
            return;
        }
        state.clock = Some((sent_at, server_ms));
        let sooner = state.due.is_none_or(|due| next < due);
        state.due = Some(next);
        drop(state);
        if sooner {
            self.sooner.notify_waiters();
        }
    }

    /// When the next attempt is due, if any attempt was answered.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.state.lock().due
    }

    /// Whether the caller is to make the attempt due by `now`: true for one caller per
    /// due time (the next is then put a refresh period on, until the attempt's answer
    /// sets it).
    pub(crate) fn take_due(&self, now: Instant) -> bool {
        let mut state = self.state.lock();
        match state.due {
            Some(due) if due <= now => {
                state.due = Some(now + PLACE_REFRESH);
                true
            }
            _ => false,
        }
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
        let after = std::time::Duration::from_millis(server_ms.saturating_sub(sampled_ms));
        let before = std::time::Duration::from_millis(sampled_ms.saturating_sub(server_ms));
        (sent_at + after).checked_sub(before)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn one_waiter_takes_each_due_attempt() {
        let places = Places::default();
        assert!(!places.take_due(Instant::now()), "nothing answered yet");
        let sent = Instant::now();
        places.answered(sent, 1_000, sent);
        assert!(places.take_due(sent));
        assert!(!places.take_due(sent), "taken twice");
        assert_eq!(places.due(), Some(sent + PLACE_REFRESH));
    }

    #[test]
    fn an_older_answer_changes_nothing() {
        let places = Places::default();
        let early = Instant::now();
        let late = early + Duration::from_millis(5);
        places.answered(late, 2_000, late + Duration::from_secs(2));
        places.answered(early, 1_995, early + Duration::from_millis(10));
        assert_eq!(places.due(), Some(late + Duration::from_secs(2)));
        assert_eq!(places.local_time_of(2_000), Some(late));
    }

    #[test]
    fn a_server_time_maps_to_no_later_than_it_can_have_been_here() {
        let places = Places::default();
        assert_eq!(places.local_time_of(5), None);
        let sent = Instant::now() + Duration::from_secs(10);
        places.answered(sent, 50_000, sent);
        assert_eq!(
            places.local_time_of(50_700),
            Some(sent + Duration::from_millis(700))
        );
        assert_eq!(
            places.local_time_of(49_000),
            Some(sent - Duration::from_secs(1))
        );
    }

    #[tokio::test]
    async fn a_sooner_attempt_wakes_the_sleepers() {
        let places = Places::default();
        let now = Instant::now();
        places.answered(now, 1, now + Duration::from_secs(2));
        let sooner = places.sooner();
        tokio::pin!(sooner);
        sooner.as_mut().enable();
        let later = now + Duration::from_millis(1);
        places.answered(later, 2, later + Duration::from_millis(100));
        tokio::time::timeout(Duration::from_secs(1), sooner)
            .await
            .expect("woken");
    }
}
