//! The snapshots the operator calls return: [`LockInfo`] and the facts of each kind.

use std::time::Duration;

#[cfg(doc)]
use crate::LockClient;
use crate::error::WaitFor;
use crate::keys::LockKind;

/// A snapshot of one lock, from [`LockClient::inspect`], [`LockClient::inspect_kind`]
/// or [`LockClient::list`].
///
/// `owners`, `ttl`, `fencing_token` and `waiting` mean the same for every kind; the
/// facts of a kind other than the mutex are in the field named after it (`fair`,
/// `read_write`, `semaphore`), which is `None` for every other kind (and left out of
/// the serialized form).
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let info = client.inspect("job:nightly").await?.expect("held");
/// assert_eq!(info.kind, holdlock::LockKind::Mutex);
/// assert_eq!(info.owners.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock name (without prefix).
    pub name: String,
    /// The kind of lock (serialized as `mutex`, `fair`, `rw` or `semaphore`; read as
    /// `mutex` when absent).
    #[cfg_attr(feature = "serde", serde(default))]
    pub kind: LockKind,
    /// Who holds it, and how many times: one entry per owner id. For a read-write
    /// lock, its read and write holds together; for a semaphore, how many permits
    /// it holds. A fair lock handed to a waiter that has not claimed it yet lists that
    /// waiter (see [`FairInfo::grant`]); one with waiters and no holder lists nobody.
    pub owners: Vec<LockOwner>,
    /// The remaining lease; `None` if the key has no expiry (not set by this crate) or,
    /// for a fair lock only waited for, there is no hold. For a read-write lock or a
    /// semaphore, the longest lease of its holders (each holder's own is in
    /// `read_write` or `semaphore`). Serialized as `ttl_ms`, whole milliseconds.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "ttl_ms", with = "crate::serde_millis")
    )]
    pub ttl: Option<Duration>,
    /// The fencing token of the current hold (for a read-write lock, of the write
    /// hold), if it was taken with fencing.
    pub fencing_token: Option<u64>,
    /// Whether someone waits for it: a waiting call was refused while the current hold
    /// had it (single tries do not count), so the release will wake them; for a fair
    /// lock, whether anyone is queued.
    #[cfg_attr(feature = "serde", serde(default))]
    pub waiting: bool,
    /// A fair lock's queue and pending hand-off; `None` for other kinds.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub fair: Option<FairInfo>,
    /// A read-write lock's writer and readers; `None` for other kinds. Serialized as
    /// `rw`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "rw", default, skip_serializing_if = "Option::is_none")
    )]
    pub read_write: Option<ReadWriteInfo>,
    /// A semaphore's permits; `None` for other kinds.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub semaphore: Option<SemaphoreInfo>,
}

/// One owner of a lock, in a [`LockInfo`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// for owner in client.inspect("a").await?.map(|i| i.owners).unwrap_or_default() {
///     println!("{} x{}", owner.id, owner.hold_count);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LockOwner {
    /// The owner id, `<client-uuid>:<task>`.
    pub id: String,
    /// How many nested holds it has (for a semaphore: how many permits).
    pub hold_count: u32,
    /// The data its hold was taken with ([`LockOptions::data`](crate::LockOptions::data)),
    /// if any (for a read-write lock, the write hold's first; for a semaphore, its
    /// first permit's).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub data: Option<String>,
}

/// A fair lock's queue and pending hand-off, in [`LockInfo::fair`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// if let Some(fair) = client.inspect_kind(LockKind::Fair, "printer").await?.and_then(|i| i.fair) {
///     if let Some(grant) = &fair.grant {
///         println!("handed to {}, {:?} left to claim it", grant.owner, grant.claim_window);
///     }
///     println!("{} queued", fair.queue.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FairInfo {
    /// The live waits, first come first: the lock goes to the first when it is freed.
    pub queue: Vec<FairWaiter>,
    /// The wait a release (or a force-unlock) handed the lock to, while the hand-off
    /// stands: until an attempt of that wait claims the lock afresh (a waiter that
    /// took the hand-off on its message holds the lock under it, and is among the
    /// owners). `None` when no hand-off stands.
    #[cfg_attr(feature = "serde", serde(default))]
    pub grant: Option<FairGrant>,
}

/// One wait in a fair lock's queue, in [`FairInfo::queue`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// let info = client.inspect_kind(LockKind::Fair, "printer").await?;
/// for (place, waiter) in info.and_then(|i| i.fair).map(|f| f.queue).unwrap_or_default().iter().enumerate() {
///     println!("{place}: {} (wait {:?}) for {:?}", waiter.owner, waiter.wait, waiter.waited);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FairWaiter {
    /// The waiting owner id, `<client-uuid>:<task>`.
    pub owner: String,
    /// Which of the owner's waits this is (its client numbers them); `None` if the
    /// client gave none.
    pub wait: Option<u64>,
    /// When the wait began (its first refused attempt), in microseconds since the
    /// Unix epoch by the Redis server's clock: its place in the queue. 0 in Redisson's
    /// layout, which does not record it (the queue's order is the order waited in).
    pub since_us: u64,
    /// How long it has waited, by the Redis server's clock (zero when `since_us` is
    /// 0). Serialized as `waited_ms`, whole milliseconds.
    #[cfg_attr(feature = "serde", serde(rename = "waited_ms", with = "whole_millis"))]
    pub waited: Duration,
}

/// A fair lock handed to a wait that has not claimed it yet, in [`FairInfo::grant`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// let info = client.inspect_kind(LockKind::Fair, "printer").await?;
/// if let Some(grant) = info.and_then(|i| i.fair).and_then(|f| f.grant) {
///     println!("{} has {:?} to claim it", grant.owner, grant.claim_window);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FairGrant {
    /// The owner id the lock was handed to.
    pub owner: String,
    /// Which of the owner's waits it was handed to; `None` if the client gave none.
    pub wait: Option<u64>,
    /// How long the grant lasts unclaimed: the lock is free again (for the next
    /// waiter) after it. `None` if the key has no expiry. Serialized as
    /// `claim_window_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "claim_window_ms", with = "crate::serde_millis")
    )]
    pub claim_window: Option<Duration>,
}

/// A read-write lock's holders, in [`LockInfo::read_write`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// if let Some(rw) = client.inspect_kind(LockKind::ReadWrite, "catalog").await?.and_then(|i| i.read_write) {
///     println!("{} readers, writer {:?}", rw.readers.len(), rw.writer.map(|w| w.owner));
///     if rw.writer_waiting {
///         println!("a writer waits: new readers are kept out");
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ReadWriteInfo {
    /// The holder of the write lock, with its write holds.
    #[cfg_attr(feature = "serde", serde(default))]
    pub writer: Option<RwHolder>,
    /// The holders of the read lock (the writer too, if it also reads), sorted by
    /// owner id, each with its read holds.
    pub readers: Vec<RwHolder>,
    /// Whether a writer was refused and still asks: new readers are kept out until it
    /// gets in (or stops asking).
    #[cfg_attr(feature = "serde", serde(default))]
    pub writer_waiting: bool,
}

/// A holder of one side of a read-write lock, in [`ReadWriteInfo`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// let info = client.inspect_kind(LockKind::ReadWrite, "catalog").await?;
/// for reader in info.and_then(|i| i.read_write).map(|rw| rw.readers).unwrap_or_default() {
///     println!("{} x{}, {:?} left", reader.owner, reader.hold_count, reader.lease);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RwHolder {
    /// The owner id, `<client-uuid>:<task>`.
    pub owner: String,
    /// Its holds of this side.
    pub hold_count: u32,
    /// Its own lease left (holders of a read-write lock expire one by one); `None` if
    /// Redis keeps no deadline for it. Serialized as `lease_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_ms", with = "crate::serde_millis")
    )]
    pub lease: Option<Duration>,
    /// The data this hold was taken with, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub data: Option<String>,
}

/// A semaphore's permits, in [`LockInfo::semaphore`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// if let Some(sem) = client.inspect_kind(LockKind::Semaphore, "exports").await?.and_then(|i| i.semaphore) {
///     println!("{} of {} permits held", sem.held.len(), sem.permits);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// How many permits the semaphore has (as its holders took it).
    pub permits: u32,
    /// The permits held, sorted by permit id.
    pub held: Vec<PermitHolder>,
}

/// One held permit of a semaphore, in [`SemaphoreInfo::held`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::LockKind;
///
/// let info = client.inspect_kind(LockKind::Semaphore, "exports").await?;
/// for permit in info.and_then(|i| i.semaphore).map(|s| s.held).unwrap_or_default() {
///     println!("{} held by {}, {:?} left", permit.id, permit.owner, permit.lease);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PermitHolder {
    /// The permit id, `<owner id>:p<n>` (see [`Permit::id`](crate::Permit::id)).
    pub id: String,
    /// The owner id holding it, `<client-uuid>:<task>`.
    pub owner: String,
    /// Its lease left; `None` if Redis keeps no deadline for it. Serialized as
    /// `lease_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_ms", with = "crate::serde_millis")
    )]
    pub lease: Option<Duration>,
    /// The data the permit was taken with, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub data: Option<String>,
}

/// A [`Duration`] as whole milliseconds in serialized data (see `serde_millis.rs`).
#[cfg(feature = "serde")]
mod whole_millis {
    use std::time::Duration;

    pub(super) fn serialize<S: serde::Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        crate::serde_millis::serialize(&Some(*duration), serializer)
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        Ok(crate::serde_millis::deserialize(deserializer)?.unwrap_or_default())
    }
}

/// The waits that have lasted past their client's deadlock check and still last, and
/// the deadlocks among them, from [`LockClient::waits`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let graph = client.waits().await?;
/// for wait in &graph.waits {
///     println!("{} for {:?}", wait.wait, wait.waited);
/// }
/// for cycle in &graph.deadlocks {
///     println!("deadlock of {} waits", cycle.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WaitGraph {
    /// Each long wait, longest first.
    pub waits: Vec<LongWait>,
    /// Each cycle of waits found (and still there on a second look), from the wait
    /// that will be told of it (the one that began last) on, as
    /// [`LockError::Deadlock`](crate::LockError::Deadlock) names it.
    pub deadlocks: Vec<Vec<WaitFor>>,
}

/// One wait that has lasted past its client's deadlock check, in a [`WaitGraph`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// for wait in client.waits().await?.waits {
///     println!("{} waits for `{}` ({:?})", wait.wait.owner, wait.wait.name, wait.waited);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LongWait {
    /// Who waits, for which lock.
    pub wait: WaitFor,
    /// How long it has waited, by the waiter's clock against this one's. Serialized
    /// as `waited_ms`, whole milliseconds.
    #[cfg_attr(feature = "serde", serde(rename = "waited_ms", with = "whole_millis"))]
    pub waited: Duration,
}
