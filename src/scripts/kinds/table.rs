//! The descriptors: one [`KindSpec`] per kind and layout, every field spelled out, so
//! that a kind is read here in one place and a field added to one kind reaches no
//! other. The script calls they name follow them. `kinds/tests.rs` prints the whole
//! table and compares it with a snapshot.

use fred::bytes_utils::Str;
use fred::clients::Client;

use super::layout;
use super::{
    AcquireFn, Call, Counted, HeldCount, KindSpec, LockNames, ReleaseFn, RenewFn, Renewal, Script,
};
use crate::error::LockError;
use crate::keys::LockKind;
use crate::scripts::leases::SEM_AVAILABLE;
use crate::scripts::redisson::REDISSON_SEM_HELD;
use crate::scripts::{
    ACQUIRE, AcquireCall, HoldToRenew, REDISSON_ACQUIRE, REDISSON_RELEASE, RELEASE, RenewalCall,
    Renewed, Scripts,
};

/// The reentrant mutex: a hash of owner -> hold count (`lua/acquire.lua`).
pub(super) static MUTEX: KindSpec = KindSpec {
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
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::HOLDLOCK,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.acquire(client, &ACQUIRE, AcquireCall::of(names, owner, options)))
    },
    // Hands the lock to the first of the clients queued beside it.
    release: |scripts, client, names, owner, held| {
        let call = (scripts, client, names, owner, held);
        release_mutex(call, &RELEASE, names.clients_key())
    },
    renew: RENEW_WHOLE,
};

/// The mutex in the layout of Redisson's `RLock` (see `compat.rs`): its acquire and
/// release are Redisson's, its re-entry and renewal holdlock's (they change the hash
/// as Redisson's do). Its releases go one by one, and its waiting clients do not
/// queue in Redis.
pub(super) static REDISSON_MUTEX: KindSpec = KindSpec {
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
    batches: false,
    reenters_apart: true,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::REDISSON,
    acquire: |scripts, client, names, owner, options| {
        let call = AcquireCall::of(names, owner, options);
        Box::pin(scripts.acquire(client, &REDISSON_ACQUIRE, call))
    },
    // Told its channel, as Redisson's own unlock is.
    release: |scripts, client, names, owner, held| {
        let call = (scripts, client, names, owner, held);
        release_mutex(call, &REDISSON_RELEASE, names.release_channel())
    },
    renew: RENEW_WHOLE,
};

/// The fair lock: the mutex's hash, served first come first served from a queue
/// (`lua/fair_queue.lua`); a force-unlock hands it to the head of the queue.
pub(super) static FAIR: KindSpec = KindSpec {
    label: "fair",
    describe: "fair lock",
    public: LockKind::Fair,
    exclusive: true,
    excludes_itself: true,
    field_suffix: "",
    filed_by_name: false,
    renewal: Renewal::Whole,
    draws_tokens: true,
    other_side: None,
    counted: Counted::HashField,
    held: None,
    batches: false,
    reenters_apart: true,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: true,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: true,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::HOLDLOCK_FAIR,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.fair_acquire(client, names, owner, options))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.fair_release(client, names, owner))
    },
    renew: RENEW_WHOLE,
};

/// The fair lock in the layout of Redisson's `RFairLock` (see `compat.rs`,
/// `lua/redisson/fair_acquire.lua`): `RLock`'s hash, renewed and re-entered as the
/// mutex's in that layout, with Redisson's queue beside it; each waiter is told on a
/// channel of its own. It draws no fencing token (Redisson keeps no counter for it).
pub(super) static REDISSON_FAIR: KindSpec = KindSpec {
    label: "fair",
    describe: "fair lock",
    public: LockKind::Fair,
    exclusive: true,
    excludes_itself: true,
    field_suffix: "",
    filed_by_name: false,
    renewal: Renewal::Whole,
    draws_tokens: false,
    other_side: None,
    counted: Counted::HashField,
    held: None,
    batches: false,
    reenters_apart: true,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: true,
    queues_each_wait: false,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::REDISSON_FAIR,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.redisson_fair_acquire(client, names, owner, options))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.redisson_fair_release(client, names, owner))
    },
    renew: RENEW_WHOLE,
};

/// The read side of a read-write lock (`lua/rw_acquire.lua`): shared among readers,
/// each reader's lease its own.
pub(super) static READ: KindSpec = KindSpec {
    label: "read",
    describe: "read lock",
    public: LockKind::ReadWrite,
    exclusive: false,
    excludes_itself: false,
    field_suffix: "",
    filed_by_name: false,
    renewal: Renewal::PerHolder,
    draws_tokens: false,
    other_side: Some(&WRITE),
    counted: Counted::HashField,
    held: None,
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: true,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::HOLDLOCK_LEASES,
    acquire: ACQUIRE_RW,
    release: RELEASE_RW,
    renew: RENEW_IN_LEASES,
};

/// The write side of a read-write lock: its holder's field is `<owner>:w`, and a
/// writer that waits keeps new readers out for a while.
pub(super) static WRITE: KindSpec = KindSpec {
    label: "write",
    describe: "write lock",
    public: LockKind::ReadWrite,
    exclusive: true,
    excludes_itself: true,
    field_suffix: ":w",
    filed_by_name: false,
    renewal: Renewal::PerHolder,
    draws_tokens: true,
    other_side: Some(&READ),
    counted: Counted::HashField,
    held: None,
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    marks_waiting_writers: true,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::HOLDLOCK_LEASES,
    acquire: ACQUIRE_RW,
    release: RELEASE_RW,
    renew: RENEW_IN_LEASES,
};

/// The read side of a read-write lock in the layout of Redisson's `RReadWriteLock`
/// (see `compat.rs`, `lua/redisson/rw_acquire.lua`): shared among readers, each read
/// hold's lease a key of its own.
pub(super) static REDISSON_READ: KindSpec = KindSpec {
    label: "read",
    describe: "read lock",
    public: LockKind::ReadWrite,
    exclusive: false,
    excludes_itself: false,
    field_suffix: "",
    filed_by_name: false,
    renewal: Renewal::RedissonReader,
    draws_tokens: false,
    other_side: Some(&REDISSON_WRITE),
    counted: Counted::HashField,
    held: None,
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: true,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::REDISSON_RW,
    acquire: ACQUIRE_REDISSON_RW,
    release: RELEASE_REDISSON_RW,
    renew: renew_alone,
};

/// The write side of a read-write lock in the layout of Redisson's `RReadWriteLock`:
/// its holder's field is `<owner>:write`, and its lease the hash's. It draws no fencing
/// token (Redisson keeps no counter for it) and keeps no readers out while it waits
/// (Redisson's writers do not).
pub(super) static REDISSON_WRITE: KindSpec = KindSpec {
    label: "write",
    describe: "write lock",
    public: LockKind::ReadWrite,
    exclusive: true,
    excludes_itself: true,
    field_suffix: ":write",
    filed_by_name: false,
    renewal: Renewal::Whole,
    draws_tokens: false,
    other_side: Some(&REDISSON_READ),
    counted: Counted::HashField,
    held: None,
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: false,
    in_deadlock_checks: true,
    holders_are_owner_ids: true,
    layout: &layout::REDISSON_RW,
    acquire: ACQUIRE_REDISSON_RW,
    release: RELEASE_REDISSON_RW,
    renew: renew_alone,
};

/// A semaphore: a hash of permit -> 1, with each permit's deadline in a sorted set
/// (`lua/sem_acquire.lua`). A permit is never re-entered; a waiter waits for any one
/// permit, so the semaphore takes no part in deadlock checks.
pub(super) static SEMAPHORE: KindSpec = KindSpec {
    label: "semaphore",
    describe: "semaphore permit",
    public: LockKind::Semaphore,
    exclusive: false,
    excludes_itself: true,
    field_suffix: "",
    filed_by_name: false,
    renewal: Renewal::PerHolder,
    draws_tokens: false,
    other_side: None,
    counted: Counted::HashField,
    held: Some(HeldCount {
        script: &SEM_AVAILABLE,
        key: LockNames::leases_key,
    }),
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: true,
    in_deadlock_checks: false,
    holders_are_owner_ids: false,
    layout: &layout::HOLDLOCK_LEASES,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.sem_acquire(client, names, owner, options.0))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(async move {
            let held = scripts.sem_release(client, names, owner).await?;
            Ok(held.then_some(0))
        })
    },
    renew: RENEW_IN_LEASES,
};

/// A semaphore in the layout of Redisson's `RPermitExpirableSemaphore` (see
/// `compat.rs`, `lua/redisson/sem_acquire.lua`): each permit an id in the sorted set of
/// deadlines, renewed there.
pub(super) static REDISSON_SEMAPHORE: KindSpec = KindSpec {
    label: "semaphore",
    describe: "semaphore permit",
    public: LockKind::Semaphore,
    exclusive: false,
    excludes_itself: true,
    field_suffix: "",
    filed_by_name: false,
    renewal: Renewal::RedissonPermit,
    draws_tokens: false,
    other_side: None,
    counted: Counted::Deadline,
    held: Some(HeldCount {
        script: &REDISSON_SEM_HELD,
        key: |names| names.beside("timeout"),
    }),
    batches: false,
    reenters_apart: false,
    queues_clients: false,
    marks_waiting_writers: false,
    hands_on_when_forced: false,
    waits_alongside: false,
    waits_on_own_channel: false,
    queues_each_wait: false,
    owner_per_hold: true,
    in_deadlock_checks: false,
    holders_are_owner_ids: false,
    layout: &layout::REDISSON_SEM,
    acquire: |scripts, client, names, owner, options| {
        Box::pin(scripts.redisson_sem_acquire(client, names, owner, options.0))
    },
    release: |scripts, client, names, owner, _| {
        Box::pin(scripts.redisson_sem_release(client, names, owner))
    },
    renew: renew_alone,
};

/// Takes or re-enters a side of holdlock's read-write lock (`lua/rw_acquire.lua`).
const ACQUIRE_RW: AcquireFn = |scripts, client, names, owner, options| {
    Box::pin(scripts.rw_acquire(client, names, owner, options.0))
};

/// Drops a hold of a side of holdlock's read-write lock (`lua/rw_release.lua`).
const RELEASE_RW: ReleaseFn =
    |scripts, client, names, owner, _| Box::pin(scripts.rw_release(client, names, owner));

/// Takes or re-enters a side of a read-write lock in Redisson's layout
/// (`lua/redisson/rw_acquire.lua`).
const ACQUIRE_REDISSON_RW: AcquireFn = |scripts, client, names, owner, options| {
    Box::pin(scripts.redisson_rw_acquire(client, names, owner, options.0))
};

/// Drops a hold of a side of a read-write lock in Redisson's layout
/// (`lua/redisson/rw_release.lua`).
const RELEASE_REDISSON_RW: ReleaseFn =
    |scripts, client, names, owner, _| Box::pin(scripts.redisson_rw_release(client, names, owner));

/// Renews a hold of a lock whose keys expire as a whole (`lua/renew.lua`).
const RENEW_WHOLE: RenewFn = |scripts, client, names, owner, lease_ms| {
    Box::pin(scripts.renew(client, &names.key, owner, lease_ms))
};

/// Renews a hold whose holder expires on its own, its deadline among the lock's
/// leases (`lua/lease_renew.lua`).
const RENEW_IN_LEASES: RenewFn = |scripts, client, names, owner, lease_ms| {
    Box::pin(scripts.lease_renew(client, names, owner, lease_ms))
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
