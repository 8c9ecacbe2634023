//! Background releases (guards dropped without `unlock()`, refused or cancelled
//! releases), with those pending together sent together: the mutex holds among them
//! go out in `release_many.lua` calls of up to [`BATCH`] holds (on a cluster, one call
//! per slot), so that a million dropped guards free their keys in seconds, not in a
//! million calls. Each hold's release is still exactly once: it is sent at most once
//! with the owner's operation lock held, and a batch whose reply is lost is settled
//! hold by hold (see [`InFlight`]). Holds of other kinds, holds whose operation lock
//! is busy, late releases of lost holds and releases Redis refused take the one-by-one
//! path ([`Engine::release_one_in_background`]).

use std::sync::Arc;

use fred::bytes_utils::Str;
use fred::interfaces::ClientLike;
use parking_lot::Mutex;
use tokio::sync::{OwnedMutexGuard, Semaphore};

use super::in_flight::{InFlight, Op};
use super::{Backoff, Engine, Unreleased};
use crate::hold::{Hold, HoldUse};
use crate::scripts::LockNames;
use crate::scripts::{Released, into_calls, key_slot};

/// The most holds released in one script call.
const BATCH: usize = 256;

/// How many release calls of one client may be in flight at once.
const CALLS_IN_FLIGHT: usize = 16;

/// The background releases waiting to be sent, and whether a task sends them.
#[derive(Debug)]
pub(super) struct Pending {
    queue: Mutex<(Vec<Arc<Hold>>, bool)>,
    calls: Arc<Semaphore>,
}

impl Default for Pending {
    fn default() -> Self {
        Self {
            queue: Mutex::default(),
            calls: Arc::new(Semaphore::new(CALLS_IN_FLIGHT)),
        }
    }
}

/// A mutex hold's release ready to go out in a batch: its use and operation lock
/// held, its count known.
struct Ready {
    hold: Arc<Hold>,
    in_flight: InFlight,
    held: u32,
}

impl Ready {
    fn key(&self) -> &str {
        &self.hold.names.key
    }
}

impl Engine {
    /// Releases one hold of `hold` in the background: for a dropped guard, a
    /// cancelled `unlock()`, and a release Redis refused (nothing changed, so the hold
    /// is still owed). Releases pending together are sent together (see the module
    /// docs); each is retried, with a growing pause, until it succeeds, the hold is
    /// lost, or the client shuts down; one whose reply is lost is settled instead (see
    /// `settle`).
    pub(super) fn release_in_background(self: &Arc<Self>, hold: Arc<Hold>) {
        self.chores.add();
        let start = {
            let mut queue = self.pending.queue.lock();
            queue.0.push(hold);
            !std::mem::replace(&mut queue.1, true)
        };
        if start {
            let engine = Arc::clone(self);
            drop(self.background_runtime().spawn(engine.send_pending()));
        }
    }

    /// Sends the pending background releases, in batches, until none is left.
    async fn send_pending(self: Arc<Self>) {
        loop {
            let taken = {
                let mut queue = self.pending.queue.lock();
                if queue.0.is_empty() {
                    queue.1 = false;
                    return;
                }
                let keep = queue.0.len().saturating_sub(BATCH * CALLS_IN_FLIGHT);
                queue.0.split_off(keep)
            };
            let clustered = self.protocol.redis().is_clustered();
            let mut ready = Vec::with_capacity(taken.len());
            for hold in taken {
                match self.ready_to_batch(&hold) {
                    Some(batched) => ready.push(batched),
                    None => {
                        self.release_one_in_background(hold);
                        self.background_finished();
                    }
                }
            }
            for batch in into_calls(ready, |ready| key_slot(ready.key()), clustered, BATCH) {
                let Ok(call) = Arc::clone(&self.pending.calls).acquire_owned().await else {
                    return;
                };
                let engine = Arc::clone(&self);
                drop(tokio::spawn(async move {
                    engine.release_batch(batch).await;
                    drop(call);
                }));
            }
        }
    }

    /// Prepares the release of `hold` for a batch, if it can go in one: a mutex hold,
    /// not lost, held, whose operation lock is free now.
    fn ready_to_batch(self: &Arc<Self>, hold: &Arc<Hold>) -> Option<Ready> {
        if !hold.names.kind.batch_releases() || hold.is_lost() || self.check_running().is_err() {
            return None;
        }
        let entry: HoldUse = self.holds.reenter(hold);
        let count: OwnedMutexGuard<u32> = Arc::clone(&hold.ops).try_lock_owned().ok()?;
        let held = *count;
        if held == 0 || hold.is_gone() || hold.is_lost() {
            return None;
        }
        if held == 1 {
            // The renewals are stopped once the answer is in.
            hold.begin_last_release();
        }
        let in_flight = InFlight::new(self, Op::Release, entry, count, self.config.lease, None);
        Some(Ready {
            hold: Arc::clone(hold),
            in_flight,
            held,
        })
    }

    /// Sends the releases of `batch` (one slot) in one call, and records each.
    async fn release_batch(self: Arc<Self>, batch: Vec<Ready>) {
        let holds: Vec<(&LockNames, &Str)> = batch
            .iter()
            .map(|ready| (&*ready.hold.names, &ready.hold.owner))
            .collect();
        let replies = self.protocol.release_many(&holds).await;
        drop(holds);
        match replies {
            Ok(replies) if replies.len() == batch.len() => {
                for (ready, released) in batch.into_iter().zip(replies) {
                    self.record_batched(ready, released);
                }
            }
            Err(error) if !error.outcome_unknown() => {
                // Refused: nothing changed, each is still owed.
                tracing::debug!(%error, "batched background release refused; releasing one by one");
                for ready in batch {
                    ready.in_flight.refused();
                    ready.hold.end_last_release();
                    self.release_one_in_background(ready.hold);
                    self.background_finished();
                }
            }
            other => {
                // Maybe ran: each hold's count tells, hold by hold (the in-flight calls
                // settle when dropped).
                tracing::debug!(reply = ?other.map(|replies| replies.len()), "batched background release unanswered; settling each");
                for ready in batch {
                    drop(ready.in_flight);
                    self.background_finished();
                }
            }
        }
    }

    /// Records what one batched release found, as `release_once` does.
    fn record_batched(self: &Arc<Self>, ready: Ready, released: Released) {
        let Ready {
            hold,
            in_flight,
            held,
        } = ready;
        match released {
            Released::Remaining(remaining) => {
                let (_entry, mut count) = in_flight.land();
                if remaining + 1 != held {
                    tracing::debug!(lock = %hold.names.name, held, remaining, "redis disagrees with the local count");
                }
                hold.set_count(&mut count, remaining);
                if remaining == 0 {
                    hold.stop_watchdog();
                    #[cfg(feature = "metrics")]
                    crate::observe::metrics::released();
                    tracing::debug!(lock = %hold.names.name, owner = %hold.owner, "released");
                }
            }
            Released::NotHeld => {
                let (_entry, mut count) = in_flight.land();
                hold.set_count(&mut count, 0);
                drop(count);
                hold.mark_gone("released a hold that redis no longer had");
            }
            Released::WrongType => {
                in_flight.refused();
                hold.end_last_release();
                self.release_one_in_background(hold);
            }
        }
        self.background_finished();
    }

    /// One background release finished (or was handed to another that counts itself).
    fn background_finished(&self) {
        self.chores.finish();
    }

    /// Releases one hold of `hold` in a task of its own, retried with a growing pause
    /// until it succeeds, the hold is lost, or the client shuts down.
    fn release_one_in_background(self: &Arc<Self>, hold: Arc<Hold>) {
        let engine = Arc::clone(self);
        let runtime = self.background_runtime();
        self.chores.add();
        drop(runtime.spawn(async move {
            let mut backoff = Backoff::default();
            loop {
                match engine.release_once(&hold, None).await {
                    Ok(()) | Err(Unreleased::Final(_) | Unreleased::Settling(..)) => break,
                    Err(Unreleased::Owed(error)) => {
                        tracing::debug!(lock = %hold.names.name, %error, "background release refused; will retry");
                        if hold.is_lost() || engine.check_running().is_err() {
                            break;
                        }
                        backoff.wait().await;
                    }
                }
            }
            engine.background_finished();
        }));
    }
}
