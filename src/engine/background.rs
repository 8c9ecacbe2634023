//! Background releases (guards dropped without `unlock()`, refused or cancelled
//! releases), with those pending together sent together: the mutex holds among them
//! go out in `release_many.lua` calls of up to [`BATCH`] holds (on a cluster, one call
//! per node, see [`Placement`](crate::scripts::Placement)), so that a million dropped guards free their keys in seconds, not in a
//! million calls. Each hold's release is still exactly once: it is sent at most once
//! with the owner's operation lock held, and a batch whose reply is lost is settled
//! hold by hold (see [`InFlight`]). Holds of other kinds, holds whose operation lock
//! is busy, late releases of lost holds and releases Redis refused take the one-by-one
//! path ([`Engine::release_one_in_background`]).
//!
//! An `unlock()` of a mutex joins the next batch too, but only when
//! [`ALONE`](super::coalesce::ALONE) release calls of its client are in flight already
//! (else it is sent at once, alone: a lone release waits for nobody). Its in-flight
//! call moves into the batch with it, so the batch answers for it even if the
//! `unlock()` is dropped meanwhile; what the batch found comes back to the `unlock()`
//! on a channel ([`Engine::release_in_batch`]).

use std::sync::Arc;

use fred::bytes_utils::Str;
use tokio::sync::{OwnedMutexGuard, oneshot};

use super::coalesce::{BATCHES, Coalesce, batch_ended};
use super::in_flight::{InFlight, Op};
use super::{Backoff, Engine, Unreleased};
use crate::error::LockError;
use crate::hold::{Hold, HoldUse};
use crate::scripts::{LockNames, Released, key_slot};

/// The most holds released in one script call.
pub(super) const BATCH: usize = 256;

/// The release calls in flight, and the releases waiting to go out together.
pub(super) type Pending = Coalesce<Queued>;

/// A release waiting to go out.
pub(super) enum Queued {
    /// A background release: a hold whose release is owed.
    Owed(Arc<Hold>),
    /// An `unlock()` that found every call in flight taken, with its call made.
    Joined(Ready),
}

/// Where an `unlock()` that joined a batch hears what its release came to.
type Told = oneshot::Sender<Result<(), Unreleased>>;

/// A mutex hold's release ready to go out in a batch: its use and operation lock
/// held, its count known; `told` if an `unlock()` waits for it.
pub(super) struct Ready {
    hold: Arc<Hold>,
    in_flight: InFlight,
    held: u32,
    told: Option<Told>,
}

impl Ready {
    fn key(&self) -> &str {
        &self.hold.names.key
    }
}

/// Tells the `unlock()` waiting for a batched release (if any, and if it still waits)
/// what the release came to; `outcome` is made only then.
fn tell(told: Option<Told>, outcome: impl FnOnce() -> Result<(), Unreleased>) {
    if let Some(told) = told {
        let _ = told.send(outcome());
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
        self.enqueue(Queued::Owed(hold));
    }

    /// Sends the release `in_flight` of one of `held` holds of `hold` in the next
    /// batch, and returns what it came to, as `release_once` would have.
    ///
    /// Cancel safe: the batch answers for the release (`in_flight` moved into it);
    /// dropped, this only stops listening.
    pub(super) async fn release_in_batch(
        self: &Arc<Self>,
        hold: &Arc<Hold>,
        in_flight: InFlight,
        held: u32,
    ) -> Result<(), Unreleased> {
        let (told, outcome) = oneshot::channel();
        let ready = Ready {
            hold: Arc::clone(hold),
            in_flight,
            held,
            told: Some(told),
        };
        self.chores.add();
        self.enqueue(Queued::Joined(ready));
        // Dropped untold only with the task that sent it (its runtime shut down): the
        // in-flight call was dropped with it, and is being settled.
        outcome
            .await
            .unwrap_or_else(|_| Err(Unreleased::Settling(batch_ended(), held)))
    }

    /// Queues a release, and starts a task sending the queue unless one runs.
    fn enqueue(self: &Arc<Self>, queued: Queued) {
        if self.pending.push(queued) {
            let engine = Arc::clone(self);
            drop(self.background_runtime().spawn(engine.send_pending()));
        }
    }

    /// Sends the pending releases, in batches, until none is left. A batch takes what
    /// is queued when a call may go out, so releases that waited for a call in flight
    /// to end go out together.
    async fn send_pending(self: Arc<Self>) {
        while let Some((first_call, queued)) = self.pending.next(BATCH * BATCHES).await {
            let mut ready = Vec::with_capacity(queued.len());
            for queued in queued {
                match queued {
                    Queued::Joined(joined) => ready.push(joined),
                    Queued::Owed(hold) => match self.ready_to_batch(&hold) {
                        Some(batched) => ready.push(batched),
                        None => {
                            self.release_one_in_background(hold);
                            self.background_finished();
                        }
                    },
                }
            }
            let placement = self.protocol.placement();
            let batches = placement.calls(ready, |ready| key_slot(ready.key().as_bytes()), BATCH);
            let send = |batch| Arc::clone(&self).release_batch(batch);
            self.pending.send_each(first_call, batches, send).await;
        }
    }

    /// Prepares the release of `hold` for a batch, if it can go in one: a mutex hold,
    /// not lost, held, whose operation lock is free now.
    fn ready_to_batch(self: &Arc<Self>, hold: &Arc<Hold>) -> Option<Ready> {
        if !hold.names.kind.batches() || hold.is_lost() || self.check_running().is_err() {
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
            told: None,
        })
    }

    /// Sends the releases of `batch` (one node's) in one call, and records each.
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
                tracing::debug!(%error, "batched release refused; releasing one by one");
                for ready in batch {
                    self.owed(ready.hold, ready.in_flight, ready.told, || error.clone());
                }
            }
            other => {
                // Maybe ran: each hold's count tells, hold by hold (the in-flight calls
                // settle when dropped).
                tracing::debug!(reply = ?other.as_ref().map(Vec::len), "batched release unanswered; settling each");
                let error = match other {
                    Err(error) => error,
                    Ok(replies) => LockError::Protocol(format!(
                        "{} replies to a release of {} holds",
                        replies.len(),
                        batch.len()
                    )),
                };
                for Ready {
                    in_flight,
                    held,
                    told,
                    ..
                } in batch
                {
                    drop(in_flight);
                    tell(told, || Err(Unreleased::Settling(error.clone(), held)));
                    self.background_finished();
                }
            }
        }
    }

    /// A batched release Redis refused (`error`): nothing changed, and the release is
    /// still owed. A background release goes one by one; an `unlock()` hears `error`,
    /// and owes it in the background itself.
    fn owed(
        self: &Arc<Self>,
        hold: Arc<Hold>,
        in_flight: InFlight,
        told: Option<Told>,
        error: impl FnOnce() -> LockError,
    ) {
        in_flight.refused();
        hold.end_last_release();
        match told {
            Some(told) => tell(Some(told), || Err(Unreleased::Owed(error()))),
            None => self.release_one_in_background(hold),
        }
        self.background_finished();
    }

    /// Records what one batched release found, as `release_once` does.
    fn record_batched(self: &Arc<Self>, ready: Ready, released: Released) {
        let Ready {
            hold,
            in_flight,
            held,
            told,
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
                tell(told, || Ok(()));
            }
            Released::NotHeld => {
                let (_entry, mut count) = in_flight.land();
                hold.set_count(&mut count, 0);
                drop(count);
                hold.mark_gone("released a hold that redis no longer had");
                tell(told, || Err(Unreleased::Final(hold.not_held())));
            }
            Released::Elsewhere => {
                // The node it went to does not serve its slot any more: nothing
                // changed, and it goes again alone, routed to where its slot is now.
                in_flight.refused();
                hold.end_last_release();
                let engine = Arc::clone(self);
                drop(self.background_runtime().spawn(async move {
                    let released = engine.release_once(&hold, None, false).await;
                    match told {
                        Some(told) => tell(Some(told), || released),
                        None if matches!(released, Err(Unreleased::Owed(_))) => {
                            engine.release_one_in_background(hold);
                        }
                        None => {}
                    }
                    engine.background_finished();
                }));
                return;
            }
            Released::WrongType => {
                let key = hold.names.key.to_string();
                // Counts itself finished.
                return self.owed(hold, in_flight, told, || LockError::WrongType { key });
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
                match engine.release_once(&hold, None, true).await {
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
