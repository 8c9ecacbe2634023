//! Waiters woken only by release messages that name them: a fair lock's waits (see
//! `lua/fair_queue.lua`), and what a client's refresh of its places checks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::places::Places;
use super::{Room, Ticket};

/// What a release message naming a fair waiter's owner says (see
/// `lua/fair_queue.lua`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Handed {
    /// The wait the lock was handed to, if the message names one.
    pub(crate) wait: Option<u64>,
    /// When Redis handed it over, in milliseconds by the server's clock, if the
    /// message says.
    pub(crate) server_ms: Option<u64>,
}

/// A room's waiters woken only by a message that names them, and their shared
/// schedule of attempts in a fair lock's queue.
#[derive(Debug, Default)]
pub(super) struct Queue {
    named: Mutex<Vec<Arc<Named>>>,
    pub(super) places: Places,
}

impl Queue {
    /// Hands a message naming `owner` to each of its waits here (each checks whether
    /// it names it); returns whether there was one.
    pub(super) fn hand(&self, owner: &[u8], handed: Handed) -> bool {
        let mut named = false;
        for waiter in self.named.lock().iter().filter(|n| n.owner() == owner) {
            waiter.hand(handed);
            named = true;
        }
        named
    }

    /// Wakes every named waiter to try again.
    pub(super) fn wake_all(&self) {
        self.named.lock().iter().for_each(|named| named.wake());
    }
}

impl Ticket<'_> {
    /// The schedule of attempts shared by this client's named waiters (see
    /// [`Places`]).
    pub(crate) fn places(&self) -> &Places {
        &self.room.queue.places
    }

    /// Has release messages that name `owner` wake the returned waiter (and no waiter
    /// of another owner), until it is dropped; `wait` is its wait's number.
    pub(crate) fn named(&self, owner: &str, wait: u64) -> NamedWaiter {
        NamedWaiter::register(&self.room, owner, wait)
    }
}

/// What a named waiter has heard: the wake-up, and the last message naming it.
#[derive(Debug, Default)]
pub(super) struct Named {
    /// Its wait's entry in the fair lock's queue, `<owner id> <wait>`.
    entry: String,
    /// When its last answered attempt ran and left it queued, in milliseconds by the
    /// server's clock (plus one, so that 0 can mean "not queued").
    queued_at: AtomicU64,
    notify: Notify,
    handed: Mutex<Option<Handed>>,
}

impl Named {
    /// The owner id its entry names, as release messages name it.
    fn owner(&self) -> &[u8] {
        let entry = self.entry.as_bytes();
        let space = entry.iter().rposition(|&byte| byte == b' ');
        &entry[..space.unwrap_or(entry.len())]
    }

    fn hand(&self, handed: Handed) {
        *self.handed.lock() = Some(handed);
        self.notify.notify_one();
    }

    /// Wakes the waiter to try again, keeping a message it has not read yet.
    pub(super) fn wake(&self) {
        self.notify.notify_one();
    }
}

/// A waiter woken by release messages that name it (see [`Ticket::named`](super::Ticket::named)).
#[derive(Debug)]
pub(crate) struct NamedWaiter {
    room: Arc<Room>,
    named: Arc<Named>,
}

impl NamedWaiter {
    /// Registers a waiter for `owner`'s wait `wait` in `room`.
    pub(super) fn register(room: &Arc<Room>, owner: &str, wait: u64) -> Self {
        let named = Arc::new(Named {
            entry: format!("{owner} {wait}"),
            ..Named::default()
        });
        room.queue.named.lock().push(Arc::clone(&named));
        Self {
            room: Arc::clone(room),
            named,
        }
    }

    /// Resolves after a message naming the waiter's owner (at once for one that came
    /// before), with what it says; `None` when woken to try again without one (the
    /// subscriber reconnected, or another wait of this client found their places gone).
    pub(crate) async fn named(&self) -> Option<Handed> {
        self.named.notify.notified().await;
        self.named.handed.lock().take()
    }

    /// Records that the waiter's last answered attempt left it queued; it ran when the
    /// server's clock read `server_ms`.
    pub(crate) fn queued(&self, server_ms: u64) {
        let at = server_ms.saturating_add(1);
        self.named.queued_at.store(at, Ordering::Release);
    }

    /// The other named waiters of the room that believe they are queued, for a refresh
    /// of the client's places to check (see `lua/fair_acquire.lua`, `ARGV[9..]`).
    pub(crate) fn others_to_check(&self) -> PlacesCheck {
        let mut waiters = Vec::new();
        self.for_others(|named| {
            if named.queued_at.load(Ordering::Acquire) != 0 {
                waiters.push(Arc::clone(named));
            }
        });
        let entries = waiters.iter().map(|named| named.entry.clone()).collect();
        PlacesCheck { entries, waiters }
    }

    /// Wakes the other named waiters of the room to try again: an attempt that ran
    /// when the server's clock read `server_ms` found the client's places dropped. Only
    /// those queued by an earlier attempt had a place to lose: places are dropped when
    /// no attempt of the client ran for a place window, so a wait whose attempt ran
    /// later (or is still to be answered, as in a burst of waits) is queued, and its own
    /// answer says so. (Should an answer come a place window late, the next refresh
    /// finds its place gone: see [`others_to_check`](Self::others_to_check).)
    pub(crate) fn wake_others(&self, server_ms: u64) {
        self.for_others(|named| {
            let queued_at = named.queued_at.load(Ordering::Acquire);
            if queued_at != 0 && queued_at <= server_ms {
                named.wake();
            }
        });
    }

    /// Calls `each` with every other named waiter of the room.
    fn for_others(&self, mut each: impl FnMut(&Arc<Named>)) {
        let named = self.room.queue.named.lock();
        named
            .iter()
            .filter(|named| !Arc::ptr_eq(named, &self.named))
            .for_each(&mut each);
    }
}

/// The queue entries a refresh of a client's places checks, and their waiters.
#[derive(Debug)]
pub(crate) struct PlacesCheck {
    /// `<owner id> <wait>` of each waiter, in order.
    pub(crate) entries: Arc<[String]>,
    waiters: Vec<Arc<Named>>,
}

impl PlacesCheck {
    /// Wakes the waiters at `positions` (in [`entries`](Self::entries)) to queue again:
    /// the refresh found them no longer queued (handed the lock, which a message will
    /// tell, or passed over, or dropped).
    pub(crate) fn wake(&self, positions: &[usize]) {
        for named in positions.iter().filter_map(|&at| self.waiters.get(at)) {
            named.queued_at.store(0, Ordering::Release);
            named.wake();
        }
    }
}

impl Drop for NamedWaiter {
    fn drop(&mut self) {
        self.room
            .queue
            .named
            .lock()
            .retain(|named| !Arc::ptr_eq(named, &self.named));
    }
}
