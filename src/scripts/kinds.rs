//! The kinds of lock as data: one [`KindSpec`] per kind and layout, saying everything
//! the engine, the protocol, the watchdog and the scripts need to know about it — its
//! names, what it excludes, its hash field, how its holds are filed, renewed and
//! batched, whether it takes part in deadlock checks, the keys kept beside it, and the
//! scripts that take, release and renew it. Nothing outside these files decides by the
//! kind or the layout: they read the descriptor a lock's [`LockNames`] carries, or the
//! one [`Kind::of_public`] finds for a public [`LockKind`].
//!
//! The descriptors are written in full, one `static` per kind and layout, in
//! `kinds/table.rs`; the layouts they name, in `kinds/layout.rs`. Adding a kind (or a
//! layout of one, as Redisson's is of the mutex) is one `static` there, its name
//! builder, and its Lua.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use fred::bytes_utils::Str;
use fred::clients::Client;

use super::{Acquire, Asking, Scripts};
use crate::compat::Compat;
use crate::error::Result;
use crate::keys::LockKind;
use crate::options::ResolvedOptions;

mod layout;
mod names;
mod table;

use layout::Layout;
pub(crate) use names::{LockNames, election_names, fair_names, rw_names, semaphore_names};

/// A script call of a kind's, boxed so that the descriptor can name it.
pub(crate) type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Takes the lock `names` afresh for `owner` (the read-write lock: or re-enters it).
type AcquireFn = for<'a> fn(
    &'a Scripts,
    &'a Client,
    &'a LockNames,
    &'a str,
    (&'a ResolvedOptions, &'a Asking),
) -> Call<'a, Acquire>;
/// Drops one of `owner`'s `held` holds: the count left, or `None` if it held none.
type ReleaseFn =
    for<'a> fn(&'a Scripts, &'a Client, &'a LockNames, &'a str, u32) -> Call<'a, Option<u32>>;
/// Extends `owner`'s lease to `lease_ms`; whether it still held.
type RenewFn = for<'a> fn(&'a Scripts, &'a Client, &'a LockNames, &'a str, u64) -> Call<'a, bool>;

/// One kind of lock in one layout. See the module docs; every descriptor spells out
/// every field (`kinds/table.rs`), so a kind is read in one place.
pub(crate) struct KindSpec {
    /// The kind in one word, as spans label it: `mutex`, `fair`, `read`, `write`,
    /// `semaphore`.
    label: &'static str,
    /// The kind as the docs and errors name it: `lock`, `fair lock`, ...
    describe: &'static str,
    /// The kind as operators name it.
    public: LockKind,
    /// Whether a hold excludes every other holder, so that a fencing token can stand
    /// for it (a read hold and a semaphore permit are shared).
    exclusive: bool,
    /// Whether two holds of this kind by different owners on one key exclude each
    /// other (two readers do not).
    excludes_itself: bool,
    /// What follows the owner id in the hash field counting its holds (`:w` for the
    /// write side, which a writer may hold beside a read hold).
    field_suffix: &'static str,
    /// Whether the client's registry files holds by the lock's name (the mutex: a
    /// re-entry finds its hold before any key is built) or by its key.
    filed_by_name: bool,
    /// How a hold's lease is kept in Redis, so how `renew_many.lua` renews it.
    renewal: Renewal,
    /// Whether a hold can draw a fencing token (an exclusive kind whose layout keeps a
    /// counter for it).
    draws_tokens: bool,
    /// The other side of a read-write lock, which an owner's hold of this side may
    /// let in (a writer reading) or refuse (a reader asking to write).
    other_side: Option<&'static KindSpec>,
    /// Where a holder's count is kept, which settles an acquisition whose reply was
    /// lost.
    counted: Counted,
    /// How many holds a semaphore has now (`None` for the other kinds).
    held: Option<HeldCount>,
    /// Whether acquisitions of a free lock and releases of its holds may go out
    /// together, many locks to a call (`lua/acquire_many.lua`,
    /// `lua/release_many.lua`).
    batches: bool,
    /// Whether a re-entry is `lua/reenter.lua` (the read-write lock re-enters with its
    /// acquire script, which knows the other side).
    reenters_apart: bool,
    /// Whether its waiting clients queue in Redis beside the hash (holdlock's mutex,
    /// see `lua/acquire.lua`).
    queues_clients: bool,
    /// Whether a refused waiting attempt keeps new readers out for a while (the write
    /// side's `writer_waits`, see `lua/rw_acquire.lua`).
    marks_waiting_writers: bool,
    /// Whether a force-unlock hands the lock on to a waiter (the fair lock), so that it
    /// must not run twice.
    hands_on_when_forced: bool,
    /// Whether its waiters ask alongside each other at every release (holds of it are
    /// shared), rather than in line, the head of the client's waiters asking.
    waits_alongside: bool,
    /// Whether each waiting owner is told on a channel of its own, and queued in Redis
    /// until it leaves (Redisson's fair lock), rather than on the lock's channel.
    waits_on_own_channel: bool,
    /// Whether every wait queues in Redis as an entry of its own and is handed the lock
    /// by name (holdlock's fair lock: the policy in `engine/queue.rs`).
    queues_each_wait: bool,
    /// Whether each hold is an owner of its own, so that nothing re-enters (a
    /// semaphore's permits: two permits of one task are two holds).
    owner_per_hold: bool,
    /// Whether its waits and holds are edges of the deadlock checks' wait-for graph
    /// (see `deadlock.rs`): a waiter waits for each of its holders to leave, so
    /// a cycle of waits through it is a deadlock. A semaphore's waiter waits for any
    /// one permit, so a cycle through it need not be one: it takes no part.
    in_deadlock_checks: bool,
    /// Whether every holder of its lock is named by an owner id (`<client
    /// uuid>:...`), whoever took it, so that a hash at a lock's bare name whose holders
    /// do not read as owner ids is an application's (see `inspect/mod.rs`). A
    /// semaphore's holders are permits, whose ids Redisson's own clients draw at
    /// random.
    holders_are_owner_ids: bool,
    /// The key and channel names beside the hash, by layout.
    layout: &'static Layout,
    acquire: AcquireFn,
    release: ReleaseFn,
    renew: RenewFn,
}

/// A script named by a descriptor.
type Script = std::sync::LazyLock<fred::types::scripts::Script>;

/// How a kind keeps its holds' leases in Redis (each is a layout of
/// `lua/renew_many.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewal {
    /// The lock's keys expire as a whole: its hash's expiry is the lease (`h`).
    Whole,
    /// Each holder expires on its own, its deadline in a sorted set beside the hash
    /// (`l`, see `lua/leases.lua`).
    PerHolder,
    /// A reader in the layout of Redisson's `RReadWriteLock`: each read hold has a key
    /// of its own that expires, and the hash lives as long as the longest (`r`, see
    /// `lua/redisson/rw_acquire.lua`).
    RedissonReader,
    /// A permit in the layout of Redisson's `RPermitExpirableSemaphore`: its deadline
    /// in the sorted set beside the semaphore (`p`, see `lua/redisson/sem_acquire.lua`).
    RedissonPermit,
}

/// Where a holder's count of holds is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// In the holder's field of the lock's hash.
    HashField,
    /// Nowhere: a permit in Redisson's semaphore layout is held once, while its id has
    /// a deadline in the sorted set beside the semaphore.
    Deadline,
}

/// How a semaphore's holds are counted: a script, given one key of the semaphore's.
#[derive(Clone, Copy)]
struct HeldCount {
    script: &'static Script,
    key: fn(&LockNames) -> String,
}

/// A kind of lock: a descriptor, compared by identity.
#[derive(Clone, Copy)]
pub(crate) struct Kind(&'static KindSpec);

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Kind {}

/// The kind's label and its layout's family (`Kind("read", Holdlock)`): the
/// descriptor itself names its other side, which names it back.
impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Kind")
            .field(&self.0.label)
            .field(&self.0.layout.compat)
            .finish()
    }
}

impl Kind {
    /// The fair lock in holdlock's layout (an election's lock).
    pub(crate) const FAIR: Kind = Kind(&table::FAIR);

    /// The kind whose descriptor is `holdlock`'s in holdlock's layout and `redisson`'s
    /// in Redisson's, in the layout of `compat`.
    fn in_layout(compat: Compat, holdlock: &'static KindSpec, redisson: &'static KindSpec) -> Kind {
        match compat {
            Compat::Holdlock => Kind(holdlock),
            Compat::Redisson => Kind(redisson),
        }
    }

    /// The mutex in the layout of `compat`.
    pub(crate) fn mutex(compat: Compat) -> Kind {
        Kind::in_layout(compat, &table::MUTEX, &table::REDISSON_MUTEX)
    }

    /// The fair lock in the layout of `compat`.
    pub(crate) fn fair(compat: Compat) -> Kind {
        Kind::in_layout(compat, &table::FAIR, &table::REDISSON_FAIR)
    }

    /// The read side of a read-write lock in the layout of `compat`.
    pub(crate) fn read(compat: Compat) -> Kind {
        Kind::in_layout(compat, &table::READ, &table::REDISSON_READ)
    }

    /// The write side of a read-write lock in the layout of `compat`.
    pub(crate) fn write(compat: Compat) -> Kind {
        Kind::in_layout(compat, &table::WRITE, &table::REDISSON_WRITE)
    }

    /// The semaphore in the layout of `compat`.
    pub(crate) fn semaphore(compat: Compat) -> Kind {
        Kind::in_layout(compat, &table::SEMAPHORE, &table::REDISSON_SEMAPHORE)
    }

    /// The descriptor of the public kind `public` in the layout of `compat`, as the
    /// operator calls and the deadlock checks name a lock by its public kind (a
    /// read-write lock: its write side, whose names and facts are the lock's). The one
    /// mapping from [`LockKind`] to descriptors.
    pub(crate) fn of_public(public: LockKind, compat: Compat) -> Kind {
        match public {
            LockKind::Mutex => Kind::mutex(compat),
            LockKind::Fair => Kind::fair(compat),
            LockKind::ReadWrite => Kind::write(compat),
            LockKind::Semaphore => Kind::semaphore(compat),
        }
    }

    /// The kind as the docs and errors name it.
    pub(crate) fn describe(self) -> &'static str {
        self.0.describe
    }

    /// The kind in one word, as spans label it.
    pub(crate) fn label(self) -> &'static str {
        self.0.label
    }

    /// The kind as operators name it.
    pub(crate) fn public(self) -> LockKind {
        self.0.public
    }

    /// Whether a hold of this kind excludes every other holder, so that a fencing token
    /// can stand for it.
    pub(crate) fn is_exclusive(self) -> bool {
        self.0.exclusive
    }

    /// Whether a hold of this kind and one of `other` on the same key, by different
    /// owners, exclude each other (only two shared holds of one kind do not).
    pub(crate) fn excludes(self, other: Kind) -> bool {
        self != other || self.0.excludes_itself
    }

    /// The hash field that counts `owner`'s holds of this kind.
    pub(crate) fn field<'o>(self, owner: &'o str) -> Cow<'o, str> {
        match self.0.field_suffix {
            "" => Cow::Borrowed(owner),
            suffix => Cow::Owned([owner, suffix].concat()),
        }
    }

    /// [`field`](Self::field) for an owner id kept as shared bytes: the same bytes
    /// where the field is the owner id, without a copy.
    pub(crate) fn shared_field(self, owner: &Str) -> Str {
        match self.field(owner) {
            Cow::Borrowed(_) => owner.clone(),
            Cow::Owned(field) => field.into(),
        }
    }

    /// Whether each holder's deadline is kept in a sorted set beside the lock's hash
    /// (see `lua/leases.lua`), which its renewals name after the hash.
    pub(crate) fn renews_in_leases(self) -> bool {
        self.0.renewal == Renewal::PerHolder
    }

    /// Whether the lock's keys expire as a whole (its hash's expiry is the lease).
    pub(crate) fn expires_whole(self) -> bool {
        self.0.renewal == Renewal::Whole
    }

    /// How `renew_many.lua` renews a hold of this kind: its layout letter.
    pub(crate) fn renewal_layout(self) -> &'static str {
        match self.0.renewal {
            Renewal::Whole => "h",
            Renewal::PerHolder => "l",
            Renewal::RedissonReader => "r",
            Renewal::RedissonPermit => "p",
        }
    }

    /// Whether a hold of this kind can draw a fencing token.
    pub(crate) fn draws_tokens(self) -> bool {
        self.0.draws_tokens
    }

    /// The other side of a read-write lock, for a side of one.
    pub(crate) fn other_side(self) -> Option<Kind> {
        self.0.other_side.map(Kind)
    }

    /// Whether acquisitions and releases may go out together, many locks to a call.
    pub(crate) fn batches(self) -> bool {
        self.0.batches
    }

    /// Whether a re-entry is `lua/reenter.lua` rather than the acquire script.
    pub(crate) fn reenters_apart(self) -> bool {
        self.0.reenters_apart
    }

    /// Whether a refused waiting attempt keeps new readers out for a while.
    pub(crate) fn marks_waiting_writers(self) -> bool {
        self.0.marks_waiting_writers
    }

    /// Whether a force-unlock hands the lock on to a waiter (and so is sent at most
    /// once).
    pub(crate) fn hands_on_when_forced(self) -> bool {
        self.0.hands_on_when_forced
    }

    /// Whether its waiters ask alongside each other rather than in line.
    pub(crate) fn waits_alongside(self) -> bool {
        self.0.waits_alongside
    }

    /// Whether each waiting owner is told on a channel of its own and stays queued in
    /// Redis until it leaves (see [`LockNames::own_channel`]).
    pub(crate) fn waits_on_own_channel(self) -> bool {
        self.0.waits_on_own_channel
    }

    /// Whether every wait queues in Redis as an entry of its own, handed the lock by
    /// name (the fair lock's queue, `engine/queue.rs`).
    pub(crate) fn queues_each_wait(self) -> bool {
        self.0.queues_each_wait
    }

    /// Whether each hold is an owner of its own, never re-entered (a semaphore's
    /// permits).
    pub(crate) fn owner_per_hold(self) -> bool {
        self.0.owner_per_hold
    }

    /// Whether waits for and holds of this kind are edges of the deadlock checks (a
    /// waiter waits for each holder; not a semaphore's, which waits for any one).
    pub(crate) fn takes_part_in_deadlock_checks(self) -> bool {
        self.0.in_deadlock_checks
    }

    /// Whether every holder of a lock of this kind is named by an owner id, whoever
    /// took it (not a semaphore's permits), so that a lock found at its bare name whose
    /// holders are not is an application's key.
    pub(crate) fn holders_are_owner_ids(self) -> bool {
        self.0.holders_are_owner_ids
    }

    /// Whether the hash keeps data beside its holders.
    pub(crate) fn keeps_data(self) -> bool {
        self.0.layout.keeps_fields
    }
}

#[cfg(test)]
mod tests;
