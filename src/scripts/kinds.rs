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
use fred::types::Value;

use super::leases::SEM_AVAILABLE;
use super::operator::{FORCE_UNLOCK, INSPECT};
use super::redisson::{
    REDISSON_RW_INSPECT, REDISSON_SEM_FORCE, REDISSON_SEM_HELD, REDISSON_SEM_INSPECT,
};
use super::{
    ACQUIRE, Acquire, AcquireCall, Asking, HoldToRenew, REDISSON_ACQUIRE, REDISSON_RELEASE,
    RELEASE, RenewalCall, Renewed, Scripts,
};
use crate::compat::{self, Compat};
use crate::error::{LockError, Result};
use crate::keys::{self, LockKind, validate_name};
use crate::options::{ClientConfig, LockOptions, ResolvedOptions};

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
    /// What its force-unlock tells its channel, beside telling the holders' clients:
    /// Redisson's waiters wait for its unlock message.
    forced_message: Option<&'static str>,
    /// Whether the hash keeps fields beside its holders (`data:<owner>`, and a fenced
    /// hold's token in the field `token`): Redisson's keeps nothing else, and its
    /// token is its counter's own key.
    keeps_fields: bool,
    /// The names of the lock of a kind called `name`, after the client's prefix, with
    /// the kind's suffix (holdlock's `<prefix>{<name>}<suffix>`; Redisson's key is
    /// `<prefix><name>`, braces and all, whatever the kind).
    names: fn(&str, &str, &str, Kind) -> Result<LockNames>,
    /// The keys the operator scripts take after a lock's own, by the key and the kind:
    /// holdlock's fair queue or leases; none for Redisson's mutex and read-write lock,
    /// the permits' deadlines for its semaphore.
    operator_keys: fn(&str, LockKind) -> Vec<String>,
    /// The script that reads a lock in this layout for the operator, answering as
    /// `lua/inspect.lua` does.
    inspect: &'static Script,
    /// The script that breaks a lock in this layout, taking `lua/force_unlock.lua`'s
    /// arguments.
    force: &'static Script,
    /// Whether `force` breaks every kind of this layout as a mutex (the hash alone).
    forced_as_mutex: bool,
}

/// holdlock's own layout: `<key>:token`, `<key>:released`, `<key>:<suffix>`.
static HOLDLOCK: Layout = Layout {
    token_key: |key| [key, ":token"].concat(),
    release_channel: keys::release_channel,
    beside: |key, suffix| [key, ":", suffix].concat(),
    forced_message: None,
    keeps_fields: true,
    names: names_of,
    operator_keys: keys::companions,
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: false,
};

/// Redisson's layout (see `compat.rs`).
static REDISSON: Layout = Layout {
    token_key: compat::token_key,
    release_channel: compat::channel,
    beside: compat::beside,
    forced_message: Some(compat::UNLOCK_MESSAGE),
    keeps_fields: false,
    names: |prefix, name, _, kind| redisson_names(prefix, name, kind),
    operator_keys: |_, _| Vec::new(),
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: true,
};

/// The layout of Redisson's `RReadWriteLock` (see `compat.rs`): its own channel, and
/// its force-unlock message wakes every waiter.
static REDISSON_RW: Layout = Layout {
    release_channel: compat::rw_channel,
    forced_message: Some(compat::READ_UNLOCK_MESSAGE),
    inspect: &REDISSON_RW_INSPECT,
    ..REDISSON
};

/// The layout of Redisson's `RPermitExpirableSemaphore` (see `compat.rs`): the key
/// holds the number of permits free, the permits' deadlines are the sorted set
/// `{<key>}:timeout`, and its channel is told the number free.
static REDISSON_SEM: Layout = Layout {
    release_channel: compat::sem_channel,
    forced_message: None,
    operator_keys: |key, _| vec![compat::beside(key, "timeout")],
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
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.fair_acquire(client, names, owner, options))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.fair_release(client, names, owner))
    },
    ..MUTEX
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
    pub(crate) const MUTEX: Kind = Kind(&MUTEX);
    pub(crate) const FAIR: Kind = Kind(&FAIR);
    pub(crate) const WRITE: Kind = Kind(&WRITE);
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

    /// Whether the hash keeps data beside its holders.
    pub(crate) fn keeps_data(self) -> bool {
        self.0.layout.keeps_fields
    }
}

/// Every Redis name belonging to one lock, and its kind. All keys share the hash tag
/// `{name}`, so they live in one Redis Cluster slot. (A held lock keeps one of these:
/// the names used less often are built when needed.)
#[derive(Debug, Clone)]
pub(crate) struct LockNames {
    pub(crate) name: String,
    /// `<prefix>{<name>}`: the lock's hash (with a suffix for kinds other than the
    /// mutex). Shared bytes, cloned without a copy (an election keeps it); the batch
    /// scripts copy it into one buffer per call instead (see `scripts::batch`).
    pub(crate) key: Str,
    pub(crate) kind: Kind,
    /// A semaphore's number of permits (0 for other kinds, and for the operator calls,
    /// which do not know it).
    pub(crate) permits: u32,
}

impl LockNames {
    /// Takes the lock afresh for `owner` with its kind's script (the read-write lock:
    /// or re-enters it), sent at most once.
    pub(crate) fn acquire<'a>(
        &'a self,
        scripts: &'a Scripts,
        client: &'a Client,
        owner: &'a str,
        options: (&'a ResolvedOptions, &'a Asking),
    ) -> Call<'a, Acquire> {
        (self.kind.0.acquire)(scripts, client, self, owner, options)
    }

    /// Drops one of `owner`'s `held` holds with its kind's script, sent at most once:
    /// the count left, or `None` if it held none.
    pub(crate) fn release<'a>(
        &'a self,
        scripts: &'a Scripts,
        client: &'a Client,
        owner: &'a str,
        held: u32,
    ) -> Call<'a, Option<u32>> {
        (self.kind.0.release)(scripts, client, self, owner, held)
    }

    /// Extends `owner`'s lease to `lease_ms` with its kind's script; whether it still
    /// held.
    pub(crate) fn renew<'a>(
        &'a self,
        scripts: &'a Scripts,
        client: &'a Client,
        owner: &'a str,
        lease_ms: u64,
    ) -> Call<'a, bool> {
        (self.kind.0.renew)(scripts, client, self, owner, lease_ms)
    }

    /// The hash field counting `owner`'s holds.
    pub(crate) fn field<'o>(&self, owner: &'o str) -> Cow<'o, str> {
        self.kind.field(owner)
    }

    /// The sorted set of the holders' deadlines, for kinds whose holders expire one
    /// by one (the semaphore, the read-write lock).
    pub(crate) fn leases_key(&self) -> String {
        keys::leases_key_of(&self.key)
    }

    /// A fair lock's queue and its waiters' liveness (see `lua/fair_queue.lua`).
    pub(crate) fn queue_keys(&self) -> [String; 2] {
        keys::queue_keys_of(&self.key)
    }

    /// What this client's registry of holds files the lock under: the name for the
    /// mutex (so that a re-entry finds its hold before any key is built), the key for
    /// other kinds (keys contain braces, names cannot: the two never collide).
    pub(crate) fn registry_key(&self) -> &str {
        match self.kind.0.filed_by_name {
            true => &self.name,
            false => &self.key,
        }
    }

    /// Whether the lock's waiting clients queue in Redis (holdlock's mutex, see
    /// `lua/acquire.lua`; Redisson's layout has no queue: every release wakes each
    /// client's head).
    pub(crate) fn queues_clients(&self) -> bool {
        self.kind.0.queues_clients
    }

    /// The mutex's queue of waiting clients (see `lua/acquire.lua`).
    pub(crate) fn clients_key(&self) -> String {
        keys::clients_key(&self.key)
    }

    /// The key of the last fencing token issued for this lock (see `lua/acquire.lua`;
    /// in Redisson's layout, `RFencedLock`'s counter).
    pub(crate) fn token_key(&self) -> String {
        (self.kind.0.layout.token_key)(&self.key)
    }

    /// Where a fenced hold's token is read: `HGET <key> <field>`, or `GET <token key>`
    /// where the counter is a key of its own.
    pub(crate) fn token_read(&self) -> (&'static str, Cow<'_, str>, Option<&'static str>) {
        match self.kind.0.layout.keeps_fields {
            true => ("HGET", Cow::Borrowed(&*self.key), Some(super::TOKEN_FIELD)),
            false => ("GET", Cow::Owned(self.token_key()), None),
        }
    }

    /// The channel this lock's releases are told on.
    pub(crate) fn release_channel(&self) -> String {
        (self.kind.0.layout.release_channel)(&self.key)
    }

    /// What a force-unlock publishes on [`release_channel`](Self::release_channel)
    /// beside telling the holders' clients, in layouts whose waiters wait for it.
    pub(crate) fn forced_message(&self) -> Option<&'static str> {
        self.kind.0.layout.forced_message
    }

    /// The channel on which the fair lock at this key hands itself to the waits of
    /// `client` (see `lua/fair_queue.lua`): `<key>:released:<client id>`, in the
    /// lock's Cluster slot. A hand-off reaches the one client it names, however many
    /// clients wait.
    pub(crate) fn hand_off_channel(&self, client: impl std::fmt::Display) -> String {
        keys::hand_off_channel(&self.key, client)
    }

    /// A key of this lock's own beside its hash, in its Cluster slot:
    /// `<key>:<suffix>`.
    pub(crate) fn beside(&self, suffix: &str) -> String {
        (self.kind.0.layout.beside)(&self.key, suffix)
    }

    /// The keys kept beside the hash that the operator scripts (`lua/inspect.lua`,
    /// `lua/force_unlock.lua`) take after it: none for the mutex, the queue and the
    /// waiters' liveness for the fair lock, the leases for the read-write lock and the
    /// semaphore.
    pub(crate) fn operator_keys(&self) -> Vec<String> {
        (self.kind.0.layout.operator_keys)(&self.key, self.kind.public())
    }

    /// How `lua/force_unlock.lua` breaks the lock: as its kind says, or, in Redisson's
    /// layouts that keep nothing beside the hash, as a mutex (the hash alone).
    pub(crate) fn forced_as(&self) -> &'static str {
        match self.kind.0.layout.forced_as_mutex {
            false => self.kind.public().as_str(),
            true => LockKind::Mutex.as_str(),
        }
    }

    /// The script that breaks the lock (see `scripts/operator.rs`).
    pub(crate) fn force_script(&self) -> &'static Script {
        self.kind.0.layout.force
    }

    /// Where `owner`'s count of holds is read: the command, its key and its argument
    /// (`HGET` of the holder's field, or a permit's `ZSCORE` in Redisson's semaphore
    /// layout); [`hold_count`](Self::hold_count) reads the reply.
    pub(crate) fn count_read<'o>(
        &self,
        owner: &'o str,
    ) -> (&'static str, Cow<'_, str>, Cow<'o, str>) {
        match self.kind.0.counted {
            Counted::HashField => ("HGET", Cow::Borrowed(&*self.key), self.field(owner)),
            Counted::Deadline => (
                "ZSCORE",
                Cow::Owned(self.beside("timeout")),
                Cow::Borrowed(owner),
            ),
        }
    }

    /// The count of holds in the reply of [`count_read`](Self::count_read); `None` if
    /// the reply is not one.
    pub(crate) fn hold_count(&self, reply: &Value) -> Option<u32> {
        match (reply, self.kind.0.counted) {
            (Value::Null, _) => Some(0),
            (_, Counted::Deadline) => Some(1),
            (other, Counted::HashField) => other.as_u64().and_then(|n| u32::try_from(n).ok()),
        }
    }

    /// How a semaphore's holds are counted now: the script and its key (`None` for
    /// other kinds).
    pub(crate) fn held_count(&self) -> Option<(&'static Script, String)> {
        let held = self.kind.0.held.as_ref()?;
        Some((held.script, (held.key)(self)))
    }

    /// The script that reads the lock for the operator (see `scripts/operator.rs`).
    pub(crate) fn inspect_script(&self) -> &'static Script {
        self.kind.0.layout.inspect
    }

    /// What ends the hash field counting an owner's holds of the write side of this
    /// read-write lock (`:w`, or Redisson's `:write`; nothing for other kinds).
    pub(crate) fn write_suffix(&self) -> &'static str {
        let spec = self.kind.0;
        let write = if spec.exclusive {
            Some(spec)
        } else {
            spec.other_side
        };
        write.map_or("", |write| write.field_suffix)
    }
}

/// The names of the lock of `kind` called `name`, whose hash is `P{N}` and `suffix`.
fn names_of(prefix: &str, name: &str, suffix: &str, kind: Kind) -> Result<LockNames> {
    validate_name(name)?;
    Ok(LockNames {
        name: name.to_owned(),
        key: keys::lock_key(prefix, name, suffix).into(),
        kind,
        permits: 0,
    })
}

/// The keys and channel of the lock of `kind` called `name` in Redisson's layout (see
/// `compat.rs`): the hash is `<prefix><name>`, braces and all.
fn redisson_names(prefix: &str, name: &str, kind: Kind) -> Result<LockNames> {
    if name.is_empty() {
        return Err(LockError::InvalidName {
            name: String::new(),
            reason: "the name is empty",
        });
    }
    Ok(LockNames {
        name: name.to_owned(),
        key: [prefix, name].concat().into(),
        kind,
        permits: 0,
    })
}

/// The keys and channel of the semaphore called `name` with `permits` permits: its
/// hash is `P{N}:sem`, beside the mutex `P{N}` of the same name but never the same
/// key, and its holders' deadlines are the sorted set `P{N}:sem:leases`.
pub(crate) fn semaphore_names(
    prefix: &str,
    name: &str,
    permits: u32,
    kind: Kind,
) -> Result<LockNames> {
    let suffix = LockKind::Semaphore.suffix();
    let names = (kind.0.layout.names)(prefix, name, suffix, kind)?;
    Ok(LockNames { permits, ..names })
}

/// The keys and channel of the fair lock called `name`: its hash is `P{N}:fair`
/// (beside the mutex `P{N}`, never the same key), its queue `P{N}:fair:queue` and its
/// waiters' liveness `P{N}:fair:alive`.
pub(crate) fn fair_names(prefix: &str, name: &str) -> Result<LockNames> {
    names_of(prefix, name, LockKind::Fair.suffix(), Kind::FAIR)
}

/// The keys and channel of the read or write side (`side`) of the read-write lock
/// `name`: one hash `P{N}:rw` (beside the mutex `P{N}`, never the same key) for both
/// sides, and the holders' deadlines in `P{N}:rw:leases`; in Redisson's layout, the
/// hash `<prefix><name>`.
pub(crate) fn rw_names(prefix: &str, name: &str, side: Kind) -> Result<LockNames> {
    (side.0.layout.names)(prefix, name, LockKind::ReadWrite.suffix(), side)
}

/// The keys and channel of the fair lock of the election called `name`: its hash is
/// `P{N}:election` (beside the fair lock `P{N}:fair`, never the same key), which also
/// keeps the leader's record, with the fair lock's queue, liveness and token floor
/// after it (`P{N}:election:queue`, ...).
pub(crate) fn election_names(prefix: &str, name: &str) -> Result<LockNames> {
    names_of(prefix, name, keys::ELECTION, Kind::FAIR)
}

/// The names of the lock `name` of the public `kind`, for the operator calls (a
/// semaphore's number of permits is not known there: 0; a read-write lock's are its
/// write side's).
fn kind_names(prefix: &str, name: &str, kind: LockKind) -> Result<LockNames> {
    let kind = match kind {
        LockKind::Mutex => Kind::MUTEX,
        LockKind::Fair => Kind::FAIR,
        LockKind::ReadWrite => Kind::WRITE,
        LockKind::Semaphore => Kind::SEMAPHORE,
    };
    names_of(prefix, name, kind.public().suffix(), kind)
}

impl ClientConfig {
    /// The names of the mutex `name` in this client's layout.
    pub(crate) fn names(&self, name: &str) -> Result<LockNames> {
        let mutex = Kind::mutex(self.compat);
        (mutex.0.layout.names)(&self.prefix, name, "", mutex)
    }

    /// The names of the lock `name` of `kind`, for the operator calls (the mutex's in
    /// this client's layout).
    pub(crate) fn kind_names(&self, name: &str, kind: LockKind) -> Result<LockNames> {
        match kind {
            LockKind::Mutex => self.names(name),
            LockKind::ReadWrite => rw_names(&self.prefix, name, Kind::write(self.compat)),
            LockKind::Semaphore => {
                semaphore_names(&self.prefix, name, 0, Kind::semaphore(self.compat))
            }
            other => kind_names(&self.prefix, name, other),
        }
    }
}

impl LockOptions {
    /// The options of a call taking a hold of `kind`, checked against what it can
    /// honour (see [`resolve_as`](Self::resolve_as)).
    pub(crate) fn resolve_for(&self, client: &ClientConfig, kind: Kind) -> Result<ResolvedOptions> {
        let mut resolved = self.resolve_as(client, kind.is_exclusive(), kind.describe())?;
        if kind.is_exclusive() && !kind.draws_tokens() {
            if self.fenced {
                return Err(LockError::InvalidOption {
                    option: "fenced",
                    reason: format!(
                        "a {} in Redisson's layout draws no fencing token: Redisson keeps \
                         no counter for it",
                        kind.describe()
                    ),
                });
            }
            resolved.fenced = false;
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_told_by_its_key() {
        for kind in LockKind::ALL {
            let names = kind_names("p:", "a:b", kind).unwrap();
            assert_eq!(names.kind.public(), kind);
            assert_eq!(keys::kind_of_key(&names.key), Some(("p:{a:b}", kind)));
            let expected: Vec<String> = match kind {
                LockKind::Mutex => vec![],
                LockKind::Fair => names.queue_keys().to_vec(),
                _ => vec![names.leases_key()],
            };
            assert_eq!(names.operator_keys(), expected);
        }
    }

    #[test]
    fn kinds_exclude_as_the_read_write_lock_says() {
        let read = Kind::read(Compat::Holdlock);
        assert!(Kind::WRITE.excludes(read));
        assert!(read.excludes(Kind::WRITE));
        assert!(Kind::WRITE.excludes(Kind::WRITE));
        assert!(!read.excludes(read));
        assert!(Kind::MUTEX.excludes(Kind::MUTEX));
        assert_eq!(Kind::WRITE.field("o:1"), "o:1:w");
        assert_eq!(read.field("o:1"), "o:1");
        assert_ne!(Kind::mutex(Compat::Redisson), Kind::MUTEX);
        assert_eq!(Kind::mutex(Compat::Holdlock), Kind::MUTEX);
    }
}
