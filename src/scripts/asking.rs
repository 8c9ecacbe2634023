//! What one attempt of a waiting call tells its kind's acquire script beyond the
//! call's options: set per attempt by the wait, never by the caller.

use std::sync::Arc;

/// The per-attempt state of a wait (the default, for a call's first attempt, says
/// nothing).
#[derive(Debug, Clone, Default)]
pub(crate) struct Asking {
    /// A mutex wait's attempt: what its client knows of the hand-off (see
    /// `waiting/hand_off.rs`).
    pub(crate) hand_off: HandOff,
    /// A fair lock's call: its wait, a number no other wait of this client has. The
    /// wait queues as an entry of its own and claims only a lock handed to it; a hold
    /// of its owner found under any other grant was given up (as lost, or by an
    /// earlier wait) and is passed on to the first waiter (see `lua/fair_acquire.lua`).
    pub(crate) fair_wait: Option<u64>,
    /// A fair wait's attempt that refreshes its client's places: the queue entries of
    /// the client's other waits, to learn which are no longer queued.
    pub(crate) fair_check: Option<Arc<[String]>>,
    /// A later attempt of a wait in line (its first was sent): a waiter of Redisson's
    /// fair queue found no longer queued was dropped as a stale head while it waited,
    /// and takes the head back (see `lua/redisson/fair_acquire.lua`).
    pub(crate) again: bool,
    /// A mutex call's attempt before its wait, made in a batch while its client is
    /// busy and no waiter of the lock is here (see `Engine::wait_for`): not free, it
    /// is answered busy without asking alone, and the wait asks in line.
    pub(crate) before_waiting: bool,
}

/// What a mutex waiter's attempt tells `lua/acquire.lua` about the hand-off (its
/// `ARGV[5]`; see `waiting/hand_off.rs`). The default, for a first attempt, says nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum HandOff {
    /// A first attempt: the client is not known to be queued.
    #[default]
    First,
    /// A waiter's later attempt: a grant queues the client again (at the back) if
    /// `requeue` (more of its waiters wait), else takes it off the queue; if `front`
    /// (the last release named this client), a refusal queues it at the front.
    Waited { requeue: bool, front: bool },
}

impl HandOff {
    /// The hints as `lua/acquire.lua` reads them (empty for none).
    pub(crate) fn hints(self) -> &'static str {
        match self {
            HandOff::First => "",
            HandOff::Waited {
                requeue: true,
                front: false,
            } => "q",
            HandOff::Waited {
                requeue: false,
                front: false,
            } => "d",
            HandOff::Waited {
                requeue: true,
                front: true,
            } => "qf",
            HandOff::Waited {
                requeue: false,
                front: true,
            } => "df",
        }
    }

    /// Whether a grant queues the client again.
    pub(crate) fn requeues(self) -> bool {
        matches!(self, HandOff::Waited { requeue: true, .. })
    }
}
