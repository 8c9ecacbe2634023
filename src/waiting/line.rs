//! The waiters in line (the mutex, the write side, the semaphore, Redisson's fair
//! lock): local waiters of one lock line up in FIFO order and only the head talks to
//! Redis, so a release never sets off a stampede. What a release message says to the
//! line, and when its head asks after one, is `hand_off.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::Ticket;
use super::hand_off::Due;
use super::mark::{Leaving, Mark};

/// A room's line of waiters.
#[derive(Debug, Default)]
pub(super) struct Line {
    /// FIFO order among local waiters (tokio's mutex is fair).
    turn: tokio::sync::Mutex<()>,
    /// Woken by a release message (stores one permit if nobody waits yet).
    released: Notify,
    /// When the head should ask again, after the release messages heard so far.
    due: Mutex<Due>,
    /// The last release message's arrival, and the moving average of the gaps
    /// ([`Line::step`]).
    pub(super) pace: Mutex<Option<(Instant, Duration)>>,
    /// Set by a grant that queued this client again for its next waiter
    /// (`HandOff::Waited`'s `requeue`): the next head waits for its name without asking.
    queued: AtomicBool,
    /// What a refused attempt of a waiter here left in Redis for this client's waits
    /// (see [`Mark`]): taken down when the room is forgotten.
    pub(super) mark: Mutex<Option<Mark>>,
    /// The waits that ended here still leaving a Redisson fair queue.
    pub(super) leaving: Leaving,
}

impl Line {
    /// Has the head waiter (or the next to become head) ask when `due` says (see
    /// [`Ticket::released`]).
    pub(super) fn wake(&self, due: Due) {
        {
            let mut current = self.due.lock();
            *current = current.merge(due);
        }
        self.released.notify_one();
    }

    /// A release message `text` heard now, as it concerns this client's line (see
    /// [`Due::of_message`]).
    pub(super) fn heard(&self, text: &[u8], client: Uuid) {
        let now = Instant::now();
        let step = self.step(now);
        self.wake(Due::of_message(text, client, now, step));
    }
}

impl Ticket<'_> {
    /// Waits for this waiter's turn to talk to Redis (FIFO among local waiters).
    pub(crate) async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.room.line.turn.lock().await
    }

    /// This waiter's turn, if nobody is ahead of it.
    pub(crate) fn try_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.room.line.turn.try_lock().ok()
    }

    /// Resolves when this waiter should ask again after the release messages heard
    /// (at once for one heard before): at once if a message named this client first,
    /// or nobody in particular; after a delay if it named this client as a backup, or
    /// named other clients only, unless a newer message says otherwise (see
    /// `hand_off.rs`). Returns whether a message named this client first.
    ///
    /// # Cancel safety
    /// What is due stays with the room until a call returns it, so a waiter dropped
    /// here leaves it to the next head.
    pub(crate) async fn released(&self) -> bool {
        let line = &self.room.line;
        loop {
            let notified = line.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let at = {
                let mut due = line.due.lock();
                match *due {
                    Due::Now { named } => {
                        *due = Due::Idle;
                        return named;
                    }
                    Due::At(at) if at <= Instant::now() => {
                        *due = Due::Idle;
                        return false;
                    }
                    Due::At(at) => Some(at),
                    Due::Idle => None,
                }
            };
            match at {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = &mut notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Forgets the release messages heard so far: the head is about to ask, and its
    /// answer covers them.
    pub(crate) fn asking(&self) {
        *self.room.line.due.lock() = Due::Idle;
    }

    /// Records that a grant queued this client again for its other waiters.
    pub(crate) fn queued_again(&self) {
        self.room.line.queued.store(true, Ordering::Release);
    }

    /// Whether a grant queued this client again since the last call: the head then
    /// waits for its name without asking first.
    pub(crate) fn take_queued(&self) -> bool {
        self.room.line.queued.swap(false, Ordering::AcqRel)
    }
}
