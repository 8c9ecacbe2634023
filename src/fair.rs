//! The fair lock: the mutex served first come, first served across every client, with
//! the lock handed by the release straight to the first waiter.
//!
//! A fair lock is a kind on the shared engine: the mutex's hash and re-entry, plus a
//! queue in Redis (`lua/fair_queue.lua`). Every wait, of every client, queues itself
//! with its first refused attempt, as an entry of its own (`<owner id> <wait>`: two
//! waits of one owner never share an entry); a release hands the lock to the first
//! live wait (its owner's field is set, with a claim window as TTL) and tells that
//! entry, with Redis's time of the hand-off, on the channel of the wait's client
//! alone, which wakes exactly that waiter (see `Ticket::named`). The waiter takes the
//! lock on the message, with no round trip, and its watchdog extends it to its lease;
//! a fenced or fixed-lease waiter (or one whose message came late) claims it with its
//! next attempt instead. Liveness is per client: one attempt of any of a client's
//! waits keeps all their places for the place window (6 s), and the client makes one
//! every third of it unless one of its waits did meanwhile (`waiting::Places`), or
//! sooner, when the hold runs out: a holder that died or let a fixed lease run out
//! publishes nothing, so the next waiter's client learns each hold's end as it is
//! taken. A client that died drops out of the queue within the window, and a lock
//! handed to it passes on within the claim window. A wait that gives up or is cancelled leaves
//! the queue at once, touching nothing of a later wait of the same owner.

use std::sync::Arc;

use crate::client::LockClient;
use crate::engine::Lock;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::options::ResolvedOptions;
use crate::scripts::{Kind, fair_names};
use crate::waiting::GiveUp;

impl LockClient {
    /// Takes the fair lock `name` (the descriptor `kind`) for the current owner, queueing until `give_up` (the
    /// fair lock's step of the front door, `acquire.rs`). Its wait is the queue of
    /// `engine/queue.rs`, or, in Redisson's layout, the in-line wait, each waiter told on
    /// a channel of its own.
    pub(crate) async fn take_fair<D: GiveUp>(
        &self,
        name: &str,
        kind: Kind,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<LockGuard, D::GaveUp>> {
        let names = fair_names(&self.engine().config().prefix, name, kind)?;
        let taken = self
            .engine()
            .take(Lock::At(Arc::new(names)), options, give_up);
        Ok(taken.await?.map(LockGuard::new))
    }
}
