//! The take step under every kind ([`Engine::take`]): who takes, what this client's
//! registry knows of the lock, a re-entry, the rules between a read-write lock's sides,
//! then the wait its descriptor picks. A kind's step of the front door builds its names
//! and wraps the hold in its guard, nothing else.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fred::bytes_utils::Str;

use super::{Attempt, Engine, HoldClaim};
use crate::error::{LockError, Result};
use crate::hold::LocalHolder;
use crate::observe;
use crate::options::ResolvedOptions;
use crate::scripts::{Asking, Kind, LockNames};
use crate::waiting::GiveUp;

/// A lock to take, as a kind's step names it.
pub(crate) enum Lock<'a> {
    /// The lock `name` of a kind filed by its name (the mutex): a re-entry finds its
    /// hold, with the names it keeps (checked when the lock was taken), before any key
    /// is built.
    Named(&'a str, Kind),
    /// The lock of these names.
    At(Arc<LockNames>),
}

/// The holds taken as owners of their own (see [`Kind::owner_per_hold`]), numbered:
/// `<owner id>:p<number>` names each apart from every other of its task.
static OWN_HOLDS: AtomicU64 = AtomicU64::new(0);

/// The waits of this process, numbered: a wait's number with its owner id names its
/// entry in a fair lock's queue (see `lua/fair_queue.lua`), so no two waits share one.
static WAITS: AtomicU64 = AtomicU64::new(1);

impl Engine {
    /// Takes `lock` for the current owner (or, for a kind whose holds are owners of
    /// their own, for a fresh owner id), waiting until `give_up`: the hold, or what
    /// giving up yields. The client is running and `options` are the kind's, checked.
    ///
    /// A re-entry goes straight to Redis. If the hold went away before the attempt could
    /// enter it (a release of it was in flight), the attempt was a fresh one: a busy
    /// lock is then waited for like by any other caller.
    pub(crate) async fn take<D: GiveUp>(
        self: &Arc<Self>,
        lock: Lock<'_>,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<HoldClaim, D::GaveUp>> {
        let (names, owner, holder) = self.taker(lock).await?;
        observe::record_owner(&owner);
        let kind = names.kind;
        // Every attempt of a wait that queues names the wait: it queues as an entry of
        // its own and claims only a lock handed to it.
        let wait = kind
            .queues_each_wait()
            .then(|| WAITS.fetch_add(1, Ordering::Relaxed));
        let asking = Asking {
            fair_wait: wait,
            ..Asking::default()
        };
        // A single try is refused without asking when another owner here holds the
        // lock (its answer could only be "busy"), or when the attempt made here was it.
        let refuses_a_try = holder.refuses_a_try();
        // Whether the owner holds the read-write lock's other side here (looked up once).
        let holds_other_side = !matches!(holder, LocalHolder::Owner(_))
            && kind.other_side().is_some_and(|other| {
                let here = self.holds_here(names.registry_key(), &owner, other);
                matches!(here, LocalHolder::Owner(_))
            });
        let direct = match holder {
            LocalHolder::Owner(entry) => Some(Some(entry)),
            // Reading inside one's own write hold: granted at once, and it must not
            // queue behind local waiters (who wait for this very writer).
            _ if holds_other_side && !kind.is_exclusive() => Some(None),
            _ if holds_other_side => {
                return Err(LockError::WouldDeadlock {
                    name: names.name.clone(),
                });
            }
            _ => None,
        };
        let first_try = direct.is_none() && !refuses_a_try;
        if let Some(entry) = direct {
            let attempt = self.acquire(&names, &owner, (&options, &asking), entry);
            if let Attempt::Granted(claim) = attempt.await? {
                return Ok(Ok(claim));
            }
        }
        match wait {
            // Boxed: the queue's wait is the fair lock's alone, and inline it would
            // make every kind's call future (which every task that takes a lock
            // carries) as large as the largest wait.
            Some(wait) => {
                let queued = self.queue_for(names, owner, options, give_up, (wait, asking));
                Box::pin(queued).await
            }
            None => {
                self.wait_for(&names, &owner, options, give_up, first_try)
                    .await
            }
        }
    }

    /// Who takes `lock`, and what this client's registry knows of it (once the owner's
    /// own releases of it have landed, see [`local_holder`](Self::local_holder)).
    async fn taker(&self, lock: Lock<'_>) -> Result<(Arc<LockNames>, Str, LocalHolder)> {
        Ok(match lock {
            Lock::Named(name, kind) => {
                let owner = self.owner();
                let holder = self.local_holder(name, &owner, kind).await;
                let names = match &holder {
                    LocalHolder::Owner(entry) => Arc::clone(&entry.hold.names),
                    _ => Arc::new(self.config().names(name)?),
                };
                (names, owner, holder)
            }
            Lock::At(names) if names.kind.owner_per_hold() => {
                // Holds this owner gave back are counted free before this one is asked.
                let taker = self.owner_id();
                self.own_releases_landed(names.registry_key(), &taker).await;
                let number = OWN_HOLDS.fetch_add(1, Ordering::Relaxed);
                let owner = Str::from(format!("{taker}:p{number}"));
                (names, owner, LocalHolder::Nobody)
            }
            Lock::At(names) => {
                let owner = self.owner();
                let registry = names.registry_key();
                let holder = self.local_holder(registry, &owner, names.kind).await;
                (names, owner, holder)
            }
        })
    }
}
