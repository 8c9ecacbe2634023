//! Taking a hold: one attempt ([`Engine::attempt`]) and the loop that makes it again
//! after a reply lost in transit or a hold that vanished ([`Engine::acquire`]).

use std::sync::Arc;

use tokio::time::Instant;

use super::in_flight::{InFlight, Op};
use super::{Attempt, Engine, HoldClaim};
use crate::error::{LockError, Result};
use crate::hold::HoldUse;
use crate::lease::renewal_period;
use crate::options::ResolvedOptions;
use crate::protocol::CallFailed;
use crate::scripts::{Acquire, Asking, LockNames};

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
        owner: &str,
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
        owner: &str,
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
        let mut reply = self
            .protocol
            .acquire(names, owner, (options, asking), held, keep_lease)
            .await;
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
