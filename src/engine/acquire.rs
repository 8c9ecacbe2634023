//! Taking a hold: one attempt ([`Engine::attempt`]) and the loop that makes it again
//! after a reply lost in transit or a hold that vanished ([`Engine::acquire`]).
//!
//! A mutex's acquisition asking for nothing but the lock (no token, data, hand-off
//! hints or replicas) goes alone while its client has fewer than
//! [`ALONE`](super::coalesce::ALONE) such calls in flight, and otherwise joins the next
//! `acquire_many.lua` batch
//! ([`Engine::acquire_in_batch`]), which takes each free lock nobody queues for; a lock
//! it leaves is asked for alone at once (`acquire.lua` then refuses it, marking it for
//! a waiter). Its in-flight call moves into the batch and comes back with the answer,
//! so a dropped caller's call is settled exactly as an unbatched one.

use std::sync::Arc;

use fred::bytes_utils::Str;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::background::BATCH;
use super::coalesce::{Coalesce, batch_ended};
use super::in_flight::{InFlight, Op};
use super::{Attempt, Engine, HoldClaim};
use crate::error::{LockError, Result};
use crate::hold::HoldUse;
use crate::lease::renewal_period;
use crate::options::ResolvedOptions;
use crate::protocol::CallFailed;
use crate::scripts::{Acquire, Asking, LockNames, key_slot};

/// The acquire calls in flight, and the acquisitions waiting to go out together.
pub(super) type Pending = Coalesce<Joined>;

/// An acquisition waiting in a batch: its lock, owner and lease, its in-flight call,
/// and where the call comes back with what the batch found (taken or not).
pub(super) struct Joined {
    names: Arc<LockNames>,
    /// The hold's shared owner id (no copy per call).
    owner: Str,
    lease_ms: u64,
    in_flight: InFlight,
    told: oneshot::Sender<Answered>,
}

/// A batched acquisition's in-flight call with what the batch found: whether it took
/// the lock.
type Answered = (InFlight, Result<bool, CallFailed>);

impl Joined {
    /// Hands the call back with what the batch found. Heard by nobody (the caller is
    /// gone), the call comes back dropped: it settles, undoing a grant.
    fn answer(self, found: Result<bool, CallFailed>) {
        let _ = self.told.send((self.in_flight, found));
    }
}

/// What [`Engine::acquire`]'s loop does after one attempt.
enum Step {
    /// The call's answer.
    Done(Attempt),
    /// Attempt again, entering the owner's hold afresh.
    Again,
    /// The call failed; nothing is left to settle.
    Failed(LockError),
    /// The reply was lost: settle the call, then attempt again while there is time.
    LostInTransit(InFlight, LockError),
}

impl Engine {
    /// One acquire attempt: runs `acquire.lua` (or, for a re-entry, whose hold
    /// `entered` is already in use, `reenter.lua`) exactly once for `owner` and records
    /// a granted hold (starting its watchdog) before the guard exists. Not cut short by
    /// the caller's deadline (the command timeout bounds it), so a zero wait still gets
    /// one answer.
    ///
    /// A grant whose reply came later than a third of the lease (a slow or restarting
    /// server) has its lease set again from now before it is handed out, so a guard is
    /// never handed out already lost; if that fails, the grant is undone.
    ///
    /// Cancel safe without a task per call: while the script is in flight, an
    /// [`InFlight`] holds the owner's operation lock; if this future is dropped (or the
    /// reply is lost for good), it settles the outcome in the background (releasing a
    /// hold that was granted after all) before any other call of this owner on this
    /// lock can run.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        names: &Arc<LockNames>,
        owner: &Str,
        (options, asking): (&ResolvedOptions, &Asking),
        mut entered: Option<HoldUse>,
    ) -> Result<Attempt> {
        // A reply lost in transit is settled, then the attempt is made again, while the
        // call is younger than the connect timeout (one that waited that long for a
        // reply does not wait that long again).
        let retry_until = Instant::now() + self.config.connect_timeout;
        loop {
            let entry = match entered.take() {
                Some(entry) => entry,
                None => self.holds.enter(names, owner),
            };
            match self.attempt(names, owner, (options, asking), entry).await {
                Step::Done(attempt) => return Ok(attempt),
                Step::Again => {}
                Step::Failed(error) => return Err(error),
                Step::LostInTransit(in_flight, error) => {
                    // Settling finds out whether it ran, and undoes it.
                    let error = in_flight.unresolved(error);
                    if Instant::now() >= retry_until {
                        return Err(error);
                    }
                    tracing::debug!(lock = %names.name, %error, "reply lost in transit; trying again once it is settled");
                }
            }
        }
    }

    /// One attempt of [`acquire`](Self::acquire) on the hold `entry` of `owner`: its
    /// answer, or the step the loop takes next.
    async fn attempt(
        self: &Arc<Self>,
        names: &Arc<LockNames>,
        owner: &Str,
        (options, asking): (&ResolvedOptions, &Asking),
        entry: HoldUse,
    ) -> Step {
        let hold = Arc::clone(&entry.hold);
        let count = hold.lock_ops().await;
        if hold.is_lost() {
            // Lost while we queued behind another call: enter the fresh hold instead.
            return Step::Again;
        }
        if hold.is_being_released() {
            // Every guard let go and the releases have not landed yet: a new call is a
            // new hold, taken once they have.
            drop((count, entry));
            hold.settled().await;
            return Step::Again;
        }
        let held = *count;
        // A watchdog that already renews the hold keeps its lease: a re-entry leaves it
        // alone (one that wants a watchdog need not set it again, and a fixed lease must
        // not cut short the lease the watchdog counts on).
        let keep_lease = held > 0 && hold.has_watchdog();
        let acknowledged = crate::protocol::acknowledged(options, held).is_some();
        let op = Op::Acquire { acknowledged };
        let in_flight = InFlight::new(self, op, entry, count, options.lease(), None);
        let mut sent_at = Instant::now();
        let batches = held == 0 && joins_batches(names, options, asking);
        // A call before its wait joins a batch however few calls are in flight: it
        // was made only because the client is busy (see `wait_for`).
        let call = match batches && asking.before_waiting {
            true => Some(None),
            false => batches.then(|| self.acquisitions.alone_now()),
        };
        let (in_flight, mut reply) = match call {
            Some(None) => match self
                .acquire_in_batch(names, &hold.owner, options, in_flight)
                .await
            {
                Some((in_flight, Ok(true))) => {
                    (in_flight, Ok(Acquire::Granted { count: 1, token: 0 }))
                }
                Some((in_flight, Ok(false)))
                    if asking.before_waiting || self.refused_here(names, owner, options) =>
                {
                    // Not free, and answered busy without asking alone: before a wait,
                    // which asks again in line (where a refusal queues the client); or a
                    // try that another owner here holds (one of a burst won in this
                    // batch), refused as it is before asking.
                    let busy = Acquire::Busy {
                        pttl: None,
                        queued: None,
                    };
                    (in_flight, Ok(busy))
                }
                Some((in_flight, Ok(false))) => {
                    // Not free: asked alone, which refuses it as a lone call would.
                    let options = (options, asking);
                    let reply = self
                        .protocol
                        .acquire(names, owner, options, held, keep_lease);
                    (in_flight, reply.await)
                }
                Some((in_flight, Err(failed))) => (in_flight, Err(failed)),
                None => return Step::Failed(batch_ended()),
            },
            _ => {
                let reply = self
                    .protocol
                    .acquire(names, owner, (options, asking), held, keep_lease)
                    .await;
                drop(call);
                (in_flight, reply)
            }
        };
        if matches!(reply, Ok(Acquire::Granted { .. }))
            && !keep_lease
            && sent_at.elapsed() > renewal_period(options.lease())
        {
            match self
                .protocol
                .confirm_late_grant(names, owner, options)
                .await
            {
                Ok(Some(renewed_at)) => sent_at = renewed_at,
                Ok(None) => reply = Ok(Acquire::Vanished),
                // Maybe renewed, maybe not: settling undoes the grant.
                Err(error) => return Step::LostInTransit(in_flight, error),
            }
        }
        let reply = match reply {
            Ok(reply) => reply,
            Err(CallFailed {
                error,
                maybe_ran: true,
            }) => return Step::LostInTransit(in_flight, error),
            Err(CallFailed { error, .. }) => {
                in_flight.refused();
                return Step::Failed(error);
            }
        };
        let (entry, mut count) = in_flight.land();
        let (granted, token) = match reply {
            Acquire::Busy { pttl, queued } => return Step::Done(Attempt::Busy { pttl, queued }),
            Acquire::Granted { count, token } => (count, token),
            Acquire::Vanished if held == 0 => return Step::Again, // a late grant expired
            Acquire::Vanished => {
                // Expired or force-unlocked: old guards must not touch what comes next,
                // so the next round enters a fresh hold and takes it afresh.
                hold.set_count(&mut count, 0);
                drop(count);
                hold.mark_gone("the hold vanished from redis (expired or force-unlocked)");
                return Step::Again;
            }
        };
        let entry = if granted == held + 1 {
            hold.set_count(&mut count, granted);
            #[cfg(feature = "metrics")]
            if held > 0 {
                crate::observe::metrics::reentered();
            }
            entry
        } else {
            // Redis disagrees with our count: the hold we knew vanished (expired or
            // force-unlocked) and this is a new one. Old guards must not touch it.
            tracing::debug!(lock = %names.name, held, granted, "redis disagrees with the local count");
            hold.set_count(&mut count, 0);
            self.holds.replace(&hold, granted)
        };
        // Claimed before the operation lock is let go, so that no other call of this
        // owner sees the raised count unclaimed.
        let claim = HoldClaim::new(self, Arc::clone(&entry.hold));
        drop(count);
        self.record_grant(&entry, options, token, sent_at);
        Step::Done(Attempt::Granted(claim))
    }
}

/// Whether a fresh acquisition of `names` with `options`, `asking` this, may join an
/// `acquire_many.lua` batch: a mutex's, asking for nothing but the lock (no token,
/// data, replicas or hand-off hints).
pub(super) fn joins_batches(names: &LockNames, options: &ResolvedOptions, asking: &Asking) -> bool {
    names.kind.batches()
        && crate::protocol::acknowledged(options, 0).is_none()
        && !options.fenced
        && options.data.is_none()
        && asking.hand_off.hints().is_empty()
}

impl Engine {
    /// Whether a single try of `names` for `owner` that a batch found not free is
    /// refused without asking again, as before it asked
    /// ([`LocalHolder::refuses_a_try`](crate::hold::LocalHolder::refuses_a_try)).
    /// A burst of tries in one process then costs Redis one batch, not a script more
    /// for each try it refused.
    fn refused_here(&self, names: &LockNames, owner: &str, options: &ResolvedOptions) -> bool {
        options.is_single_try()
            && self
                .holds_here(names.registry_key(), owner, names.kind)
                .refuses_a_try()
    }

    /// Sends the acquisition `in_flight` of the free mutex `names` for `owner` in the
    /// next batch, and returns the call with what the batch found (`None` if the
    /// batch's task ended without an answer).
    ///
    /// Cancel safe: the batch holds the call while it is queued and in flight; dropped,
    /// this lets the call come back to nobody, which settles it (undoing a grant).
    async fn acquire_in_batch(
        self: &Arc<Self>,
        names: &Arc<LockNames>,
        owner: &Str,
        options: &ResolvedOptions,
        in_flight: InFlight,
    ) -> Option<Answered> {
        let (told, answer) = oneshot::channel();
        let joined = Joined {
            names: Arc::clone(names),
            owner: owner.clone(),
            lease_ms: options.lease_ms,
            in_flight,
            told,
        };
        if self.acquisitions.push(joined) {
            let engine = Arc::clone(self);
            drop(self.background_runtime().spawn(engine.send_acquisitions()));
        }
        answer.await.ok()
    }

    /// Sends the queued acquisitions, in batches, until none is left (as
    /// `send_pending` sends releases).
    async fn send_acquisitions(self: Arc<Self>) {
        while let Some((first_call, joined)) = self.acquisitions.next(BATCH).await {
            // A caller gone before its batch left: its call settles (nothing ran).
            let joined: Vec<Joined> = joined
                .into_iter()
                .filter(|joined| !joined.told.is_closed())
                .collect();
            let placement = self.protocol.placement();
            let slot = |joined: &Joined| key_slot(joined.names.key.as_bytes());
            let batches: Vec<Vec<Joined>> = by_lease(joined)
                .into_iter()
                .flat_map(|run| placement.calls(run, slot, BATCH))
                .collect();
            let send = |batch| Arc::clone(&self).acquire_batch(batch);
            self.acquisitions.send_each(first_call, batches, send).await;
        }
    }

    /// Sends the acquisitions of `batch` (one node's, of one lease: see [`by_lease`])
    /// in one call, and hands each call back with its answer. A failure is each
    /// call's: a reply lost in transit, for each, maybe ran.
    async fn acquire_batch(self: Arc<Self>, batch: Vec<Joined>) {
        let Some(lease_ms) = batch.first().map(|joined| joined.lease_ms) else {
            return;
        };
        let locks: Vec<(&LockNames, &str)> = batch
            .iter()
            .map(|joined| (&*joined.names, &*joined.owner))
            .collect();
        let replies = self.protocol.acquire_many(lease_ms, &locks).await;
        drop(locks);
        // `acquire_many` answers for every lock of the batch, or fails as a whole.
        match replies {
            Ok(taken) => {
                for (joined, taken) in batch.into_iter().zip(taken) {
                    joined.answer(Ok(taken));
                }
            }
            Err(error) => {
                for joined in batch {
                    joined.answer(Err(CallFailed::from(error.clone())));
                }
            }
        }
    }
}

/// The queued acquisitions `joined` cut into runs of one lease (`acquire_many.lua`
/// names the lease once per call), each in the order they came: nearly always one run.
fn by_lease(mut joined: Vec<Joined>) -> Vec<Vec<Joined>> {
    // Stable: within a lease, the order they came in.
    joined.sort_by_key(|joined| joined.lease_ms);
    let mut runs = Vec::new();
    while let Some(lease_ms) = joined.last().map(|joined| joined.lease_ms) {
        let first = joined.partition_point(|joined| joined.lease_ms < lease_ms);
        // The usual single lease moves the whole queue, uncopied.
        runs.push(match first {
            0 => std::mem::take(&mut joined),
            _ => joined.split_off(first),
        });
    }
    runs
}
