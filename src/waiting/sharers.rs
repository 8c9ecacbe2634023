//! The waiters who share the lock (the readers of a read-write lock): they do not line
//! up, and every release message wakes them all, each to ask again.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Ticket;

/// A room's waiters who share the lock.
#[derive(Debug, Default)]
pub(super) struct Sharers {
    /// Woken, all at once, by every release message ([`Ticket::any_release`]).
    woken: Notify,
    /// Until when a sharer refused since the last release message sleeps (a sharer that
    /// comes meanwhile need not ask, see [`Ticket::sharers_refused`]), and how many
    /// messages have come (a refusal that was answered before the last one is stale).
    refused: Mutex<(u64, Option<Instant>)>,
}

impl Sharers {
    /// A release message heard now: every sharer asks again, or, when it lets in only a
    /// writer (`writers_only`: for so long), sleeps on until then.
    pub(super) fn heard(&self, writers_only: Option<Duration>) {
        let until = writers_only.map(|wait| Instant::now() + wait);
        let mut refused = self.refused.lock();
        *refused = (refused.0 + 1, until);
        drop(refused);
        self.woken.notify_waiters();
    }

    /// Wakes every sharer, to ask again.
    pub(super) fn wake(&self) {
        self.heard(None);
    }
}

impl Ticket<'_> {
    /// Resolves at the next release message of the lock (or reconnection), for a waiter
    /// who shares the lock and so does not wait for its turn: every such waiter is woken
    /// by every message. Call it before the attempt whose refusal it waits after: a
    /// message that comes between the two is not missed.
    pub(crate) fn any_release(&self) -> tokio::sync::futures::Notified<'_> {
        self.room.sharers.woken.notified()
    }

    /// Until when the sharers refused since the last release message that woke them
    /// sleep, if it is later than now: a sharer that comes meanwhile would be refused
    /// as well, and can sleep without asking (woken with them).
    /// Also the count of messages so far, to hand to
    /// [`sharer_refused`](Self::sharer_refused) after an attempt made now.
    pub(crate) fn sharers_refused(&self) -> (u64, Option<Instant>) {
        let (messages, until) = *self.room.sharers.refused.lock();
        (messages, until.filter(|until| *until > Instant::now()))
    }

    /// Records that a subscribed sharer was refused and sleeps until `until` at the
    /// latest (see [`sharers_refused`](Self::sharers_refused)), unless a release message
    /// came since the attempt (the `messages` count read before it): the refusal may
    /// be stale then.
    pub(crate) fn sharer_refused(&self, messages: u64, until: Instant) {
        let mut refused = self.room.sharers.refused.lock();
        if refused.0 == messages {
            refused.1 = Some(refused.1.map_or(until, |earlier| earlier.min(until)));
        }
    }
}
