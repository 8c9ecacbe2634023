//! [`InFlight`]: a script sent with the owner's operation lock held, and how it ends.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use super::{Backoff, Engine, HoldClaim};
use crate::error::LockError;
use crate::hold::HoldUse;

/// Which script an [`InFlight`] call sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// An acquisition; `acknowledged` if it went over the acknowledging connection.
    Acquire {
        acknowledged: bool,
    },
    Release,
}

/// A script in flight with the owner's operation lock held. It ends in one of three
/// ways, each named: [`land`](Self::land) (answered), [`refused`](Self::refused)
/// (a definite error: nothing changed) or [`unresolved`](Self::unresolved) (the reply
/// was lost); dropped otherwise (its caller's future was dropped), it is settled in the
/// background like an unresolved call.
#[must_use = "an in-flight call ends through land, refused or unresolved; dropped, it is settled in the background"]
pub(super) struct InFlight {
    engine: Arc<Engine>,
    op: Op,
    /// How long settling may try to read the outcome: a lease (after which Redis has
    /// expired whatever the script left) and the connect timeout.
    give_up_after: Duration,
    state: Option<(HoldUse, OwnedMutexGuard<u32>)>,
}

impl InFlight {
    /// The script of `op` is about to be sent for `entry`, with the owner's operation
    /// lock (`count`) held. A release takes the guard's `claim` (if any) here: from now
    /// on the call, or its settlement, answers for the release.
    pub(super) fn new(
        engine: &Arc<Engine>,
        op: Op,
        entry: HoldUse,
        count: OwnedMutexGuard<u32>,
        lease: Duration,
        claim: Option<HoldClaim>,
    ) -> Self {
        if let Some(claim) = claim {
            claim.discharge();
        }
        Self {
            engine: Arc::clone(engine),
            op,
            give_up_after: lease + engine.config.connect_timeout,
            state: Some((entry, count)),
        }
    }

    /// Redis refused the call (a definite error): nothing changed, nothing to settle.
    pub(super) fn refused(self) {
        drop(self.land());
    }

    /// The call's outcome is unknown (`error` says why): it is settled in the
    /// background, as for a dropped caller. Returns `error`.
    pub(super) fn unresolved(self, error: LockError) -> LockError {
        drop(self);
        error
    }

    /// The call was answered: hand the state back to it.
    pub(super) fn land(mut self) -> (HoldUse, OwnedMutexGuard<u32>) {
        match self.state.take() {
            Some(state) => state,
            // `land` consumes the call, and only `Drop` takes the state otherwise.
            None => unreachable!("an in-flight call landed twice"),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some((entry, count)) = self.state.take() else {
            return;
        };
        let engine = Arc::clone(&self.engine);
        let runtime = engine.background_runtime();
        let give_up = Instant::now() + self.give_up_after;
        let chore = engine.begin_chore();
        let settle = engine.settle(self.op, entry, count, give_up);
        drop(runtime.spawn(async move {
            settle.await;
            drop(chore);
        }));
    }
}

impl Engine {
    /// Settles a script whose caller went away mid-flight, or whose reply was lost,
    /// with the owner's operation lock still held: Redis's count for the owner tells
    /// whether it ran. An acquire that ran is undone, and a release that did not run
    /// is completed, here; if Redis refuses that release, it is owed and paid by a
    /// background release (see [`release_in_background`](Self::release_in_background)).
    ///
    /// Reading the count is retried until it succeeds, the hold is lost, the client
    /// shuts down, or `give_up` passes; in the last case the hold is given up as lost
    /// (no longer renewed), so that Redis expires whatever it has within a lease.
    async fn settle(
        self: Arc<Self>,
        op: Op,
        entry: HoldUse,
        mut count: OwnedMutexGuard<u32>,
        give_up: Instant,
    ) {
        let hold = &entry.hold;
        let held = *count;
        tracing::debug!(lock = %hold.names.name, ?op, held, "settling a call whose caller went away or whose reply was lost");
        let mut backoff = Backoff::default();
        let owed = loop {
            let acknowledged = matches!(op, Op::Acquire { acknowledged: true });
            let read = self.protocol.count(&hold.names, &hold.owner, acknowledged);
            let now = match read.await {
                Ok(now) => now,
                Err(error) => {
                    tracing::debug!(lock = %hold.names.name, %error, "settling a cancelled call: reading its count failed");
                    let hopeless = hold.is_lost() || self.check_running().is_err();
                    if hopeless || Instant::now() + backoff.next() >= give_up {
                        hold.set_count(&mut count, 0);
                        hold.mark_lost("could not tell whether a cancelled call ran");
                        break false;
                    }
                    backoff.wait().await;
                    continue;
                }
            };
            // An acquire that ran is undone, a release that did not run is completed:
            // either way one release of the `now` holds Redis has.
            let settled = match op {
                Op::Acquire { .. } => now == held,
                Op::Release => now + 1 == held,
            };
            let undone = match op {
                Op::Acquire { .. } => now == held + 1,
                Op::Release => now == held,
            };
            if settled {
                hold.set_count(&mut count, now);
                break false;
            }
            if !undone {
                hold.set_count(&mut count, 0);
                hold.mark_gone("redis disagrees with the local hold count");
                break false;
            }
            // Released here, with the operation lock still held, so that no other call
            // of this owner sees the hold in between.
            match self.protocol.release(&hold.names, &hold.owner, now).await {
                Ok(Some(remaining)) => {
                    hold.set_count(&mut count, remaining);
                    break false;
                }
                Ok(None) => {
                    // Gone meanwhile (expired or force-unlocked).
                    hold.set_count(&mut count, 0);
                    if held > 0 {
                        hold.mark_gone("the hold vanished from redis (expired or force-unlocked)");
                    }
                    break false;
                }
                // Lost again: find out again.
                Err(error) if error.outcome_unknown() => {}
                Err(error) => {
                    // Refused: still owed, and paid by a background release.
                    tracing::debug!(lock = %hold.names.name, %error, "settling a cancelled call: release refused; will retry");
                    hold.set_count(&mut count, now);
                    break true;
                }
            }
        };
        if hold.count() == 0 {
            hold.stop_watchdog();
        }
        drop(count);
        if owed {
            self.release_in_background(Arc::clone(hold));
        }
    }
}
