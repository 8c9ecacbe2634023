//! The watchdogs booked at a grant and not yet started: a hold joins the scheduler's
//! timers only if it lives until near its first renewal.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::hold::Hold;
use crate::lease::renewal_period;

/// Watchdogs booked and not yet started, in the order they fall due.
#[derive(Debug, Default)]
pub(super) struct Bookings {
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    entries: VecDeque<Booking>,
    /// Sweep out cancelled bookings once the queue grows past this.
    sweep_at: usize,
}

#[derive(Debug)]
pub(super) struct Booking {
    /// When the scheduler must file the hold's first renewal (half a renewal period
    /// after the grant, so that the scheduler's own period of half a renewal period
    /// never makes the first renewal late).
    start_by: Instant,
    pub(super) hold: Weak<Hold>,
    pub(super) lease: Duration,
    pub(super) granted_at: Instant,
}

impl Booking {
    fn is_cancelled(&self) -> bool {
        self.hold
            .upgrade()
            .is_none_or(|hold| !hold.is_watchdog_booked())
    }
}

impl Bookings {
    /// Books a watchdog for `hold`, granted at `granted_at`, unless it has one.
    pub(super) fn book(&self, hold: &Arc<Hold>, lease: Duration, granted_at: Instant) {
        if !hold.book_watchdog() {
            return;
        }
        let booking = Booking {
            start_by: granted_at + renewal_period(lease) / 2,
            hold: Arc::downgrade(hold),
            lease,
            granted_at,
        };
        let mut queue = self.queue.lock();
        while queue.entries.front().is_some_and(Booking::is_cancelled) {
            queue.entries.pop_front();
        }
        queue.entries.push_back(booking);
        if queue.entries.len() > queue.sweep_at {
            queue.entries.retain(|booking| !booking.is_cancelled());
            queue.sweep_at = (queue.entries.len() * 2).max(1_024);
        }
    }

    /// Takes the bookings due by `now`, and says when the next one is.
    pub(super) fn take_due(&self, now: Instant) -> (Vec<Booking>, Option<Instant>) {
        let mut queue = self.queue.lock();
        let mut due = Vec::new();
        while queue
            .entries
            .front()
            .is_some_and(|booking| booking.start_by <= now)
        {
            due.extend(queue.entries.pop_front());
        }
        let next = queue.entries.front().map(|booking| booking.start_by);
        (due, next)
    }

    /// After a reconnection: takes every booking, due or not.
    pub(super) fn take_all(&self) -> Vec<Booking> {
        let mut queue = self.queue.lock();
        queue.entries.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::Holds;
    use crate::options::ClientConfig;

    #[test]
    fn bookings_fall_due_half_a_period_after_the_grant_unless_cancelled() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let bookings = Bookings::default();
        let lease = Duration::from_secs(3);
        let granted = Instant::now();

        let first = holds.enter(&names, &fred::bytes_utils::Str::from("o:1"));
        bookings.book(&first.hold, lease, granted);
        bookings.book(&first.hold, lease, granted);
        assert_eq!(bookings.queue.lock().entries.len(), 1, "booked once");
        let (due, next) = bookings.take_due(granted);
        assert!(due.is_empty());
        assert_eq!(next, Some(granted + Duration::from_millis(500)));

        // Released before its first renewal: the booking is cancelled and swept.
        first.hold.stop_watchdog();
        let second = holds.enter(&names, &fred::bytes_utils::Str::from("o:2"));
        bookings.book(&second.hold, lease, granted);
        assert_eq!(
            bookings.queue.lock().entries.len(),
            1,
            "cancelled one swept"
        );
        let (due, next) = bookings.take_due(granted + lease);
        assert_eq!(due.len(), 1);
        assert!(Arc::ptr_eq(&due[0].hold.upgrade().unwrap(), &second.hold));
        assert_eq!(next, None);
    }
}
