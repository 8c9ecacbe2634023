//! The marks a waiter's refused attempts leave in Redis beside a lock (a mutex's queue
//! of waiting clients, a waiting writer's hold on new readers), recorded before each
//! attempt and taken down when the client's last waiter of the lock is gone; and an
//! owner's place in Redisson's fair queue, left as each wait ends without the lock.

use std::sync::Arc;

use fred::interfaces::ClientLike;

use super::{Room, Ticket, Waiting};
use crate::scripts::LockNames;

/// What a waiter's refused attempt leaves in Redis that outlives its wait unless it
/// is taken down (see [`Ticket::marking`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A mutex's refused waiter queues its client (see `hand_off.rs`): `ZREM` it from
    /// `<key>:clients`.
    ClientQueued,
    /// A read-write lock's refused writer keeps new readers out for a while (the field
    /// `writer_waits`, see `lua/rw_acquire.lua`): `lua/rw_unmark.lua` takes it down.
    /// Writers of other clients still waiting put it back when they next ask.
    WriterWaits,
}

impl Mark {
    /// The mark a refused waiting attempt on the lock `names` leaves, if any (a
    /// mutex in Redisson's layout has no queue of clients).
    pub(crate) fn left_by(names: &LockNames) -> Option<Self> {
        if names.queues_clients() {
            Some(Self::ClientQueued)
        } else if names.kind.marks_waiting_writers() {
            Some(Self::WriterWaits)
        } else {
            None
        }
    }
}

impl Ticket<'_> {
    /// Records, before this waiter (the head: one attempt at a time) sends an attempt,
    /// that a refusal would leave `mark` in Redis: the room takes it down when it is
    /// forgotten (no waiter of this client left), also if the attempt is cancelled in
    /// flight. A grant that leaves no mark undoes the record ([`Marking::granted`]), so
    /// a lock taken at once costs nothing more.
    pub(crate) fn marking(&self, mark: Option<Mark>) -> Marking<'_> {
        let mut current = self.room.line.mark.lock();
        let set = match (mark, *current) {
            (Some(mark), None) => {
                *current = Some(mark);
                true
            }
            _ => false,
        };
        Marking {
            room: &self.room,
            set,
        }
    }
}

/// An attempt that may leave a [`Mark`] (see [`Ticket::marking`]).
#[derive(Debug)]
pub(crate) struct Marking<'t> {
    room: &'t Room,
    /// Whether this attempt recorded the mark (no earlier one had).
    set: bool,
}

impl Marking<'_> {
    /// The attempt was granted; `marks` if the grant left the mark itself (a client
    /// queued again for its other waiters).
    pub(crate) fn granted(self, marks: bool) {
        if self.set && !marks {
            *self.room.line.mark.lock() = None;
        }
    }
}

impl Waiting {
    /// Takes down the [`Mark`] the waits of `room` left at `key`, now that `room` is
    /// forgotten: a client named with none of its waiters left would only hold up the
    /// next hand-off, a writer's mark would keep readers out for nobody, and a clean
    /// shutdown leaves neither behind. In the background, counted as a chore.
    pub(super) fn take_down_mark(self: &Arc<Self>, key: &str, room: &Arc<Room>) {
        let Some(mark) = room.line.mark.lock().take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (redis, chore) = (self.redis.clone(), self.chores.begin());
        let client = self.client.to_string();
        let (waiting, key) = (Arc::downgrade(self), key.to_owned());
        runtime.spawn(async move {
            use fred::types::{ClusterHash, CustomCommand};
            let done: fred::prelude::FredResult<i64> = match mark {
                Mark::ClientQueued => {
                    let zrem = CustomCommand::new_static("ZREM", ClusterHash::FirstKey, false);
                    let queue = crate::keys::clients_key(&key);
                    redis.custom(zrem, vec![queue, client]).await
                }
                Mark::WriterWaits => {
                    crate::scripts::RW_UNMARK
                        .evalsha_with_reload(&redis, key.as_str(), ())
                        .await
                }
            };
            if let Err(error) = done {
                tracing::debug!(%error, %key, ?mark, "taking down a waiter's mark failed");
            }
            // A waiter that came meanwhile may have been queued just before: its head
            // asks again, which queues the client again.
            if let Some(waiting) = waiting.upgrade() {
                if let Some(room) = waiting.rooms.lock().get(key.as_str()) {
                    room.wake_everyone();
                }
            }
            drop(chore);
        });
    }
}

impl Ticket<'_> {
    /// Takes `owner` out of the Redisson fair queue of the lock `names` (see
    /// `lua/redisson/fair_leave.lua`), as its wait ends without the lock: in the
    /// background, counted as a chore. A later wait in this room asks only after it
    /// is done ([`after_leaving`](Self::after_leaving)), so that it is queued afresh,
    /// at the tail, and never taken out by an earlier wait's leaving.
    /// `wait_ms` is the wait the wait's attempts gave (see `ResolvedOptions::fair_wait_ms`):
    /// the deadlines behind it move that much earlier.
    pub(crate) fn leave_owner_queue(&self, names: &LockNames, owner: &str, wait_ms: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        *self.room.line.leaving.count.lock() += 1;
        let (redis, sharded) = (self.waiting.redis.clone(), self.waiting.sharded);
        let leave = crate::scripts::leave_fair_queue(redis, names, owner, wait_ms, sharded);
        let chore = self.waiting.chores.begin();
        let room = Arc::clone(&self.room);
        let (waiting, key) = (Arc::downgrade(&self.waiting), self.key.to_owned());
        runtime.spawn(async move {
            if let Err(error) = leave.await {
                tracing::debug!(%error, "leaving a Redisson fair queue failed");
            }
            *room.line.leaving.count.lock() -= 1;
            room.line.leaving.done.notify_waiters();
            // An empty room was kept for this (see `Waiting::forget_if_empty`); one
            // still subscribed is forgotten once its channel is let go.
            let unsubscribed = room
                .channel
                .state
                .try_lock()
                .is_ok_and(|channel| !channel.sent);
            if let Some(waiting) = waiting.upgrade().filter(|_| unsubscribed) {
                waiting.forget_if_empty(&key, &room);
            }
            drop(chore);
        });
    }

    /// Returns once no earlier wait in this room is still leaving its queue (see
    /// [`leave_owner_queue`](Self::leave_owner_queue)).
    pub(crate) async fn after_leaving(&self) {
        loop {
            let left = self.room.line.leaving.done.notified();
            if !self.room.is_leaving() {
                return;
            }
            left.await;
        }
    }
}

/// The waits that ended in a room and are still leaving a Redisson fair queue (see
/// [`Ticket::leave_owner_queue`]): the room is kept, and a later wait in it asks, only
/// once they are done.
#[derive(Debug, Default)]
pub(super) struct Leaving {
    count: parking_lot::Mutex<usize>,
    done: tokio::sync::Notify,
}

impl Room {
    /// Whether a wait that ended here is still leaving its queue.
    pub(super) fn is_leaving(&self) -> bool {
        *self.line.leaving.count.lock() > 0
    }
}
