//! [`HoldClaim`]: a guard's duty to release one hold, handed over by value.

use std::sync::Arc;

use super::Engine;
use crate::hold::Hold;

/// A guard's claim on one hold of a lock: the duty to release it, exactly once.
///
/// Made by the engine as it raises the count, with the owner's operation lock held.
/// [`Engine::release`] takes it by value and hands it over as the release is sent;
/// dropped anywhere else (a dropped guard, a cancelled `unlock()`), it releases the
/// hold in the background. While a hold has holds but no claims, it is being released:
/// the owner's next call waits for that and takes a new hold (see
/// [`Engine::local_holder`]).
#[derive(Debug)]
#[must_use = "dropping a claim releases its hold"]
pub(crate) struct HoldClaim {
    engine: Arc<Engine>,
    hold: Arc<Hold>,
    /// Set only by [`discharge`](Self::discharge), which consumes the claim.
    discharged: bool,
}

impl HoldClaim {
    /// Claims one hold of `hold`; call with its operation lock held.
    pub(super) fn new(engine: &Arc<Engine>, hold: Arc<Hold>) -> Self {
        hold.add_claim();
        Self {
            engine: Arc::clone(engine),
            hold,
            discharged: false,
        }
    }

    /// The hold claimed.
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// The engine the hold belongs to.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Ends the claim without a release of its own: the release is in flight (and
    /// answered for by the call), or nothing is owed (the hold is gone).
    pub(super) fn discharge(mut self) {
        self.discharged = true;
        self.hold.drop_claim();
    }
}

impl Drop for HoldClaim {
    fn drop(&mut self) {
        if self.discharged {
            return;
        }
        // The count of claims drops first, so that the owner's next call, which may
        // run before the release task, sees the hold as being released.
        self.hold.drop_claim();
        self.engine.release_in_background(Arc::clone(&self.hold));
    }
}
