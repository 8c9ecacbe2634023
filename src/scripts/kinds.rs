//! The kinds of lock as data: one [`KindSpec`] per kind and layout, saying everything
//! the engine, the protocol, the watchdog and the scripts need to know about it — its
//! names, what it excludes, its hash field, how its holds are filed, renewed and
//! batched, the keys kept beside it, and the scripts that take, release and renew it.
//! Nothing outside this file decides by the kind or the layout: they read the
//! descriptor a lock's [`LockNames`] carries.
//!
//! Adding a kind (or a layout of one, as Redisson's is of the mutex) is one `static`
//! here, its name builder, and its Lua.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use fred::bytes_utils::Str;
use fred::clients::Client;

use super::leases::SEM_AVAILABLE;
use super::operator::{FORCE_UNLOCK, INSPECT};
use super::redisson::{
    REDISSON_FAIR_FORCE, REDISSON_FAIR_INSPECT, REDISSON_RW_INSPECT, REDISSON_SEM_FORCE,
    REDISSON_SEM_HELD, REDISSON_SEM_INSPECT,
};
use super::{
    ACQUIRE, Acquire, AcquireCall, Asking, HoldToRenew, REDISSON_ACQUIRE, REDISSON_RELEASE,
    RELEASE, RenewalCall, Renewed, Scripts,
};
use crate::compat::{self, Compat};
use crate::error::{LockError, Result};
use crate::keys::{self, LockKind};
use crate::options::ResolvedOptions;

mod names;

pub(crate) use names::{LockNames, election_names, fair_names, rw_names, semaphore_names};
use names::{names_of, redisson_names};

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

/// One kind of lock in one layout. See the module docs.
#[derive(Debug)]
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
#[derive(Debug, Clone, Copy)]
struct HeldCount {
    script: &'static Script,
    key: fn(&LockNames) -> String,
}

/// The names beside a lock's hash, by layout.
#[derive(Debug)]
struct Layout {
    /// The key of the last fencing token issued for the lock at a key.
    token_key: fn(&str) -> String,
    /// The channel its releases are told on.
    release_channel: fn(&str) -> String,
    /// A key of its own beside it, in its Cluster slot.
    beside: fn(&str, &str) -> String,
    /// What its force-unlock tells its channel, in order, beside telling the holders'
    /// clients: Redisson's waiters wait for its unlock messages. Empty: the channel
    /// of holdlock's layout is told its own message.
    forced_messages: &'static [&'static str],
    /// Whether the hash keeps fields beside its holders (`data:<owner>`, and a fenced
    /// hold's token in the field `token`): Redisson's keeps nothing else, and its
    /// token is its counter's own key.
    keeps_fields: bool,
    /// The names of the lock of a kind called `name`, after the client's prefix, with
    /// the kind's suffix (holdlock's `<prefix>{<name>}<suffix>`; Redisson's key is
    /// `<prefix><name>`, braces and all, whatever the kind).
    names: fn(&str, &str, &str, Kind) -> Result<LockNames>,
    /// The keys the operator scripts take after a lock's own, by its key: a fair queue,
    /// leases, a Redisson semaphore's permit deadlines, or none.
    operator_keys: fn(&str) -> Vec<String>,
    /// The script that reads a lock in this layout for the operator, answering as
    /// `lua/inspect.lua` does.
    inspect: &'static Script,
    /// The script that breaks a lock in this layout, taking `lua/force_unlock.lua`'s
    /// arguments.
    force: &'static Script,
    /// Whether `force` breaks every kind of this layout as a mutex (the hash alone).
    forced_as_mutex: bool,
    /// Whether a lock's key is the prefix and its name alone (Redisson's), so that
    /// nothing in the key tells it from an application's: a listing reads the keys
    /// its pattern matches to find such locks.
    at_the_name: bool,
}

/// holdlock's own layout: `<key>:token`, `<key>:released`, `<key>:<suffix>`.
static HOLDLOCK: Layout = Layout {
    token_key: |key| [key, ":token"].concat(),
    release_channel: keys::release_channel,
    beside: |key, suffix| [key, ":", suffix].concat(),
    forced_messages: &[],
    keeps_fields: true,
    names: names_of,
    operator_keys: |_| Vec::new(),
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: false,
    at_the_name: false,
};

/// holdlock's fair lock: the queue and its waiters' liveness beside the hash.
static HOLDLOCK_FAIR: Layout = Layout {
    operator_keys: |key| keys::queue_keys_of(key).to_vec(),
    ..HOLDLOCK
};

/// holdlock's kinds with leases (read-write lock, semaphore): the leases beside it.
static HOLDLOCK_LEASES: Layout = Layout {
    operator_keys: |key| vec![keys::leases_key_of(key)],
    ..HOLDLOCK
};

/// Redisson's layout (see `compat.rs`).
static REDISSON: Layout = Layout {
    token_key: compat::token_key,
    release_channel: compat::channel,
    beside: compat::beside,
    forced_messages: &[compat::UNLOCK_MESSAGE],
    keeps_fields: false,
    names: |prefix, name, _, kind| redisson_names(prefix, name, kind),
    operator_keys: |_| Vec::new(),
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: true,
    at_the_name: true,
};

/// The layout of Redisson's `RReadWriteLock` (see `compat.rs`): its own channel, and
/// its force-unlock tells what a writer's last release tells.
static REDISSON_RW: Layout = Layout {
    release_channel: compat::rw_channel,
    forced_messages: compat::WRITE_UNLOCK_MESSAGES,
    inspect: &REDISSON_RW_INSPECT,
    ..REDISSON
};

/// The layout of Redisson's `RFairLock` (see `compat.rs`): `RLock`'s hash and
/// channel, with the queue and its waiters' deadlines beside it. Its hash is `RLock`'s,
/// so a listing finds it as a mutex.
static REDISSON_FAIR_LAYOUT: Layout = Layout {
    forced_messages: &[],
    operator_keys: |key| compat::fair_queue_keys(key).to_vec(),
    inspect: &REDISSON_FAIR_INSPECT,
    force: &REDISSON_FAIR_FORCE,
    at_the_name: false,
    ..REDISSON
};

/// The layout of Redisson's `RPermitExpirableSemaphore` (see `compat.rs`): the key
/// holds the number of permits free, the permits' deadlines are the sorted set
/// `{<key>}:timeout`, and its channel is told the number free.
static REDISSON_SEM: Layout = Layout {
    release_channel: compat::sem_channel,
    forced_messages: &[],
    operator_keys: |key| vec![compat::beside(key, "timeout")],
    inspect: &REDISSON_SEM_INSPECT,
    force: &REDISSON_SEM_FORCE,
    ..REDISSON
};

/// The reentrant mutex: a hash of owner -> hold count (`lua/acquire.lua`).
pub(crate) static MUTEX: KindSpec = KindSpec {
    label: "mutex",
    describe: "lock",
    public: LockKind::Mutex,
    exclusive: true,
    excludes_itself: true,
    field_suffix: "",
    filed_by_name: true,
    renewal: Renewal::Whole,
    draws_tokens: true,
    other_side: None,
    counted: Counted::HashField,
    held: None,
    batches: true,
    reenters_apart: true,
    queues_clients: true,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: false,
    layout: &HOLDLOCK,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.acquire(client, &ACQUIRE, AcquireCall::of(names, owner, options)))
    },
    // Hands the lock to the first of the clients queued beside it.
    release: |scripts, client, names, owner, held| {
        let call = (scripts, client, names, owner, held);
        release_mutex(call, &RELEASE, names.clients_key())
    },
    // Its keys expire as a whole (`lua/renew.lua`).
    renew: |scripts, client, names, owner, lease_ms| {
        Box::pin(scripts.renew(client, &names.key, owner, lease_ms))
    },
};

/// The mutex in the layout of Redisson's `RLock` (see `compat.rs`): its acquire and
/// release are Redisson's, its re-entry and renewal holdlock's (they change the hash
/// as Redisson's do). Its releases go one by one.
pub(crate) static REDISSON_MUTEX: KindSpec = KindSpec {
    batches: false,
    queues_clients: false,
    layout: &REDISSON,
    acquire: |scripts, client, names, owner, options| {
        let call = AcquireCall::of(names, owner, options);
        Box::pin(scripts.acquire(client, &REDISSON_ACQUIRE, call))
    },
    // Told its channel, as Redisson's own unlock is.
    release: |scripts, client, names, owner, held| {
        let call = (scripts, client, names, owner, held);
        release_mutex(call, &REDISSON_RELEASE, names.release_channel())
    },
    ..MUTEX
};

/// The fair lock: the mutex's hash, served first come first served from a queue
/// (`lua/fair_queue.lua`).
pub(crate) static FAIR: KindSpec = KindSpec {
    label: "fair",
    describe: "fair lock",
    public: LockKind::Fair,
    filed_by_name: false,
    batches: false,
    queues_clients: false,
    hands_on_when_forced: true,
    queues_each_wait: true,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.fair_acquire(client, names, owner, options))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.fair_release(client, names, owner))
    },
    layout: &HOLDLOCK_FAIR,
    ..MUTEX
};

/// The fair lock in the layout of Redisson's `RFairLock` (see `compat.rs`,
/// `lua/redisson/fair_acquire.lua`): `RLock`'s hash, renewed and re-entered as the
/// mutex's in that layout, with Redisson's queue beside it; each waiter is told on a
/// channel of its own. It draws no fencing token (Redisson keeps no counter for it).
pub(crate) static REDISSON_FAIR: KindSpec = KindSpec {
    label: "fair",
    describe: "fair lock",
    public: LockKind::Fair,
    filed_by_name: false,
    draws_tokens: false,
    waits_on_own_channel: true,
    layout: &REDISSON_FAIR_LAYOUT,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.redisson_fair_acquire(client, names, owner, options))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.redisson_fair_release(client, names, owner))
    },
    ..REDISSON_MUTEX
};

/// The read side of a read-write lock (`lua/rw_acquire.lua`): shared among readers,
/// each reader's lease its own.
pub(crate) static READ: KindSpec = KindSpec {
    label: "read",
    describe: "read lock",
    public: LockKind::ReadWrite,
    exclusive: false,
    excludes_itself: false,
    filed_by_name: false,
    renewal: Renewal::PerHolder,
    draws_tokens: false,
    other_side: Some(&WRITE),
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    waits_alongside: true,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.rw_acquire(client, names, owner, options.0))
    },
    release: |scripts, client, names, owner, _| Box::pin(scripts.rw_release(client, names, owner)),
    // Each holder expires on its own (`lua/lease_renew.lua`).
    renew: |scripts, client, names, owner, lease_ms| {
        Box::pin(scripts.lease_renew(client, names, owner, lease_ms))
    },
    layout: &HOLDLOCK_LEASES,
    ..MUTEX
};

/// The write side of a read-write lock: its holder's field is `<owner>:w`.
pub(crate) static WRITE: KindSpec = KindSpec {
    label: "write",
    describe: "write lock",
    exclusive: true,
    excludes_itself: true,
    field_suffix: ":w",
    draws_tokens: true,
    other_side: Some(&READ),
    marks_waiting_writers: true,
    waits_alongside: false,
    ..READ
};

/// The read side of a read-write lock in the layout of Redisson's `RReadWriteLock`
/// (see `compat.rs`, `lua/redisson/rw_acquire.lua`): shared among readers, each read
/// hold's lease a key of its own.
pub(crate) static REDISSON_READ: KindSpec = KindSpec {
    renewal: Renewal::RedissonReader,
    other_side: Some(&REDISSON_WRITE),
    layout: &REDISSON_RW,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.redisson_rw_acquire(client, names, owner, options.0))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.redisson_rw_release(client, names, owner))
    },
    renew: renew_alone,
    ..READ
};

/// The write side of a read-write lock in the layout of Redisson's `RReadWriteLock`:
/// its holder's field is `<owner>:write`, and its lease the hash's. It draws no fencing
/// token (Redisson keeps no counter for it) and keeps no readers out while it waits
/// (Redisson's writers do not).
pub(crate) static REDISSON_WRITE: KindSpec = KindSpec {
    exclusive: true,
    excludes_itself: true,
    label: "write",
    describe: "write lock",
    field_suffix: ":write",
    renewal: Renewal::Whole,
    draws_tokens: false,
    other_side: Some(&REDISSON_READ),
    waits_alongside: false,
    ..REDISSON_READ
};

/// A semaphore: a hash of permit -> 1, with each permit's deadline in a sorted set
/// (`lua/sem_acquire.lua`). A permit is never re-entered.
pub(crate) static SEMAPHORE: KindSpec = KindSpec {
    label: "semaphore",
    describe: "semaphore permit",
    public: LockKind::Semaphore,
    exclusive: false,
    excludes_itself: true,
    other_side: None,
    held: Some(HeldCount {
        script: &SEM_AVAILABLE,
        key: LockNames::leases_key,
    }),
    waits_alongside: false,
    owner_per_hold: true,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.sem_acquire(client, names, owner, options.0))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(async move {
            let held = scripts.sem_release(client, names, owner).await?;
            Ok(held.then_some(0))
        })
    },
    ..READ
};

/// A semaphore in the layout of Redisson's `RPermitExpirableSemaphore` (see
/// `compat.rs`, `lua/redisson/sem_acquire.lua`): each permit an id in the sorted set of
/// deadlines, renewed there.
pub(crate) static REDISSON_SEMAPHORE: KindSpec = KindSpec {
    renewal: Renewal::RedissonPermit,
    counted: Counted::Deadline,
    held: Some(HeldCount {
        script: &REDISSON_SEM_HELD,
        key: |names| names.beside("timeout"),
    }),
    layout: &REDISSON_SEM,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.redisson_sem_acquire(client, names, owner, options.0))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.redisson_sem_release(client, names, owner))
    },
    renew: renew_alone,
    ..SEMAPHORE
};

/// Renews one hold with `renew_many.lua`, as the watchdog's batches do (the one place
/// that knows a kind's [`Renewal`] in Redis).
fn renew_alone<'a>(
    scripts: &'a Scripts,
    client: &'a Client,
    names: &'a LockNames,
    owner: &'a str,
    lease_ms: u64,
) -> Call<'a, bool> {
    Box::pin(async move {
        let owner = Str::from(owner);
        let hold = HoldToRenew {
            key: names.key.as_bytes(),
            kind: names.kind,
            owner: &owner,
            lease_ms,
        };
        let call = RenewalCall::new(&[hold]);
        match scripts.renew_many(client, &call).await?.first() {
            Some(Renewed::Extended) => Ok(true),
            Some(Renewed::Gone) => Ok(false),
            Some(Renewed::WrongType) => Err(LockError::WrongType {
                key: names.key.to_string(),
            }),
            // Never for a call of one hold: it names its keys, so the node that ran it
            // serves them.
            Some(Renewed::Elsewhere) => Err(LockError::Protocol(
                "a renewal answered by a node that does not serve its slot".into(),
            )),
            None => Err(LockError::Protocol("an empty renewal reply".into())),
        }
    })
}

/// A mutex's release with `script` (holdlock's or Redisson's), which takes `second`
/// as its second key.
fn release_mutex<'a>(
    (scripts, client, names, owner, held): (&'a Scripts, &'a Client, &'a LockNames, &'a str, u32),
    script: &'static Script,
    second: String,
) -> Call<'a, Option<u32>> {
    Box::pin(async move {
        let release = scripts.release(client, script, names, &second, owner, held);
        release.await
    })
}

/// A kind of lock: a descriptor, compared by identity.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind(&'static KindSpec);

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Kind {}

impl Kind {
    #[cfg(test)]
    pub(crate) const MUTEX: Kind = Kind(&MUTEX);
    pub(crate) const FAIR: Kind = Kind(&FAIR);
    #[cfg(test)]
    pub(crate) const WRITE: Kind = Kind(&WRITE);
    #[cfg(test)]
    pub(crate) const SEMAPHORE: Kind = Kind(&SEMAPHORE);

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
        Kind::in_layout(compat, &MUTEX, &REDISSON_MUTEX)
    }

    /// The fair lock in the layout of `compat`.
    pub(crate) fn fair(compat: Compat) -> Kind {
        Kind::in_layout(compat, &FAIR, &REDISSON_FAIR)
    }

    /// The read side of a read-write lock in the layout of `compat`.
    pub(crate) fn read(compat: Compat) -> Kind {
        Kind::in_layout(compat, &READ, &REDISSON_READ)
    }

    /// The write side of a read-write lock in the layout of `compat`.
    pub(crate) fn write(compat: Compat) -> Kind {
        Kind::in_layout(compat, &WRITE, &REDISSON_WRITE)
    }

    /// The semaphore in the layout of `compat`.
    pub(crate) fn semaphore(compat: Compat) -> Kind {
        Kind::in_layout(compat, &SEMAPHORE, &REDISSON_SEMAPHORE)
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

    /// Whether the hash keeps data beside its holders.
    pub(crate) fn keeps_data(self) -> bool {
        self.0.layout.keeps_fields
    }
}

#[cfg(test)]
mod tests;
