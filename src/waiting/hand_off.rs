//! Handing a mutex to another client: the queue of waiting clients, what a release
//! message names, and when each client's head asks after one.
//!
//! A mutex's waiting *clients*, not its waiters, queue in Redis (the sorted set beside
//! the lock, see `lua/acquire.lua`): a client whose head is refused is queued once,
//! at the back, however many of its tasks wait. A release takes the first client off
//! the queue and names it in its message, followed by the next two as backups
//! (`lua/release.lua`). Every client subscribed hears the message, but only the
//! named client's head asks at once; the others keep sleeping:
//!
//! - the first backup asks after a *step*, the second after two, in case the named
//!   client is gone or no longer waits (a client is queued until it is named, even if
//!   its waiters give up meanwhile);
//! - a client the message does not name asks after [`FALLBACK`] and four steps, in
//!   case all three named are gone.
//!
//! The step is twice the usual time between two release messages of the lock (the
//! hold and the hand-off; a moving average kept by each room), at least
//! [`BACKUP_DELAY`] and at most [`MAX_STEP`]: a backup that asked before the named
//! client's hold was over would only be refused.
//!
//! A newer message replaces the delays of an older one (the lock changed hands
//! meanwhile, so the older one was answered), except a wake-up that is due already;
//! one that is due stays until the head takes it. A backup that asks while the named
//! client holds the lock is refused (it stays queued) and sleeps again, so a hold
//! longer than those delays costs a refused attempt per backup, and per waiting
//! client once it outlasts [`FALLBACK`]: never more than one per waiting client, as
//! every release did before clients were queued.
//!
//! A waiter's attempts after its first say what the client knows ([`HandOff`]). A
//! client granted the lock while more of its waiters wait is queued again at the back
//! in the same script, and its next head then waits for its name without asking
//! first: a hand-off costs the grant and the release, two scripts, however many
//! clients wait. A client granted the lock with no more waiters is taken off the
//! queue (it may have been granted without being named, by a backup's or a
//! fallback's attempt: left queued, it would be named with nobody waiting, and each
//! such release would wait for a backup). A client named by a release but beaten to
//! the lock (a caller that was not waiting asked in between) is queued at the front,
//! so that it is named by the next release.
//!
//! Messages that name nobody (an empty queue, `force_unlock`, a reconnection, or a
//! release of another kind of lock) wake every client's head at once.
//!
//! A waiting room that empties keeps its subscription for [`LINGER`](super::LINGER) (200 ms) before
//! it unsubscribes, so that a task that comes back between two critical sections
//! finds it subscribed and, once refused, sleeps without asking again.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::line::Line;

/// The shortest step: how long after a release message the head of a client named as
/// its first backup asks at the soonest (the second backup twice as long), in case
/// the named client does not take the lock (see the module docs).
const BACKUP_DELAY: Duration = Duration::from_millis(10);

/// The longest step (also the longest gap the average counts: a backup's own delay
/// must not lengthen the next step without bound).
const MAX_STEP: Duration = Duration::from_millis(100);

/// How long after a release message (plus four steps) the head of a client the
/// message does not name asks, in case none of the clients it names takes the lock.
const FALLBACK: Duration = Duration::from_millis(250);

impl Line {
    /// Records a release message heard `now`, and returns the backups' step: twice
    /// the average time between two messages (an eighth of each new gap), within
    /// [`BACKUP_DELAY`] and [`MAX_STEP`].
    pub(super) fn step(&self, now: Instant) -> Duration {
        let mut pace = self.pace.lock();
        let average = match *pace {
            Some((last, average)) => {
                let gap = now.saturating_duration_since(last).min(MAX_STEP);
                average - average / 8 + gap / 8
            }
            None => Duration::ZERO,
        };
        *pace = Some((now, average));
        (average * 2).clamp(BACKUP_DELAY, MAX_STEP)
    }
}

/// When a room's head should ask again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Due {
    /// No release heard since the head last asked.
    #[default]
    Idle,
    /// At once; `named`: the release named this client first.
    Now { named: bool },
    /// At this time, unless a newer message says otherwise.
    At(Instant),
}

impl Due {
    /// What is due after `self` when a newer message says `newer`: a wake-up due at
    /// once stays; a later one gives way to the newer message.
    pub(super) fn merge(self, newer: Due) -> Due {
        match (self, newer) {
            (Due::Now { named }, Due::Now { named: also }) => Due::Now {
                named: named || also,
            },
            (now @ Due::Now { .. }, _) => now,
            (_, newer) => newer,
        }
    }

    /// What a release message `text` (`lua/release.lua`: client ids, comma-separated,
    /// the first to hand the lock to, then its backups) means for `client`.
    pub(super) fn of_message(text: &[u8], client: Uuid, now: Instant, step: Duration) -> Due {
        let mut rank = 0u32;
        for part in text.split(|&byte| byte == b',') {
            match Uuid::try_parse_ascii(part) {
                Ok(id) if id == client => {
                    return match rank {
                        0 => Due::Now { named: true },
                        rank => Due::At(now + step * rank),
                    };
                }
                Ok(_) => rank += 1,
                // Not a list of clients (a message naming nobody): everyone asks.
                Err(_) => return Due::Now { named: false },
            }
        }
        Due::At(now + FALLBACK + step * 4)
    }
}
