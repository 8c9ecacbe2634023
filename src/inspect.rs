//! Looking at locks of every kind without taking them: [`LockClient::inspect`],
//! [`inspect_kind`], [`list`], [`list_report`], [`is_locked`], [`force_unlock`] and
//! [`force_unlock_kind`], and the snapshots they return.
//!
//! Each kind is read from its keys by one script (`lua/inspect.lua`), which returns
//! them as Redis keeps them; what the fields mean for each kind is read here (see
//! `docs/design.md`, "Data model").
//!
//! [`inspect_kind`]: LockClient::inspect_kind
//! [`list`]: LockClient::list
//! [`list_report`]: LockClient::list_report
//! [`is_locked`]: LockClient::is_locked
//! [`force_unlock`]: LockClient::force_unlock
//! [`force_unlock_kind`]: LockClient::force_unlock_kind

#[cfg(feature = "serde")]
use std::fmt;
use std::time::Duration;

use fred::interfaces::{ClientLike, KeysInterface};
use futures::StreamExt;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::keys::{self, LockKind};
use crate::scripts::Snapshot;

impl LockClient {
    /// Looks at a lock (the mutex of [`lock`](Self::lock)): its owners and their
    /// hold counts, its remaining TTL and its fencing token (if it was taken with
    /// one). `None` if nobody holds it. The same as
    /// [`inspect_kind`](Self::inspect_kind)`(LockKind::Mutex, name)`.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`], [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// if let Some(info) = client.inspect("job:nightly").await? {
    ///     println!("{} held by {:?}, {:?} left", info.name, info.owners, info.ttl);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self, name: &str) -> Result<Option<LockInfo>> {
        self.inspect_kind(LockKind::Mutex, name).await
    }

    /// Looks at the lock `name` of `kind`: its owners, TTL, token and whether someone
    /// waits, as [`inspect`](Self::inspect) gives them for the mutex, and the facts of
    /// its kind ([`LockInfo::fair`], [`LockInfo::read_write`],
    /// [`LockInfo::semaphore`]). `None` if nobody holds it (and, for a fair lock,
    /// nobody is queued for it). Each kind has keys of its own: a fair lock, a
    /// read-write lock and a semaphore may share a name with a mutex without meeting.
    ///
    /// One read-only script; holders and waiters whose lease has run out are left
    /// out (the next call that changes the lock drops them).
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`] (a key of the lock holds
    /// another type), [`LockError::Protocol`] (a key holds a hash this crate did not
    /// write), [`LockError::Redis`], [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use holdlock::LockKind;
    ///
    /// if let Some(info) = client.inspect_kind(LockKind::ReadWrite, "catalog").await? {
    ///     let rw = info.read_write.expect("a read-write lock's facts");
    ///     if let Some(writer) = &rw.writer {
    ///         println!("written by {} ({} holds)", writer.owner, writer.hold_count);
    ///     }
    ///     for reader in &rw.readers {
    ///         println!("read by {}, {:?} left", reader.owner, reader.lease);
    ///     }
    /// }
    /// if let Some(info) = client.inspect_kind(LockKind::Fair, "printer").await? {
    ///     for waiter in info.fair.map(|fair| fair.queue).unwrap_or_default() {
    ///         println!("{} has waited {:?}", waiter.owner, waiter.waited);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn inspect_kind(&self, kind: LockKind, name: &str) -> Result<Option<LockInfo>> {
        self.engine().check_running()?;
        let names = keys::kind_names(&self.engine().config().prefix, name, kind)?;
        match self.engine().protocol().inspect(&names.key).await? {
            Some(snapshot) => read_snapshot(names.name, &snapshot),
            None => Ok(None),
        }
    }

    /// Every held lock, of every kind, whose name matches the glob `pattern` (`*` for
    /// all), found with `SCAN` (on every primary of a cluster), never `KEYS`. A fair
    /// lock that nobody holds but someone is queued for is listed too.
    ///
    /// A key under the prefix that cannot be read as a lock (a value of another type, a
    /// hash written by someone else) is left out with a `tracing` warning; use
    /// [`list_report`](Self::list_report) to learn which keys those are.
    ///
    /// # Errors
    /// [`LockError::Redis`] (the connection failed, or Redis refused the scan), and
    /// [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// for info in client.list("account:*").await? {
    ///     println!("{} ({}): {:?}", info.name, info.kind, info.owners);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        let listing = self.list_report(pattern).await?;
        for unreadable in &listing.unreadable {
            tracing::warn!(
                key = %unreadable.key,
                error = %unreadable.error,
                "left a key that is not a readable lock out of the list"
            );
        }
        Ok(listing.locks)
    }

    /// Like [`list`](Self::list), and also reports each key under the prefix whose
    /// name matches `pattern` but that cannot be read as a lock, with the reason: a
    /// value of another type ([`LockError::WrongType`]), a hash this crate did not
    /// write ([`LockError::Protocol`]), or a name no lock can have
    /// ([`LockError::InvalidName`]). Such a key does not stop the listing. Locks come
    /// sorted by name, then kind (in the order of [`LockKind::ALL`]); unreadable keys
    /// by key.
    ///
    /// # Errors
    /// Only failures that concern the whole listing: [`LockError::Redis`] (the
    /// connection failed, or Redis refused the scan), and [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let listing = client.list_report("*").await?;
    /// for info in &listing.locks {
    ///     println!("{} ({}): {:?}", info.name, info.kind, info.owners);
    /// }
    /// for bad in &listing.unreadable {
    ///     eprintln!("{} is not a lock: {}", bad.key, bad.error);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_report(&self, pattern: &str) -> Result<LockListing> {
        self.engine().check_running()?;
        let config = self.engine().config();
        let scan_pattern = keys::every_kind(config.scan_pattern(pattern));
        let redis = self.redis();
        // No TYPE filter: a lock key holding a value of another type is reported too.
        let mut scanned = if redis.is_clustered() {
            redis
                .scan_cluster_buffered(scan_pattern, Some(200), None)
                .boxed()
        } else {
            redis.scan_buffered(scan_pattern, Some(200), None).boxed()
        };
        // (name, kind, key): a lock's hash, or a fair lock's queue.
        let mut found = Vec::new();
        while let Some(key) = scanned.next().await {
            let Some(key) = key?.into_string() else {
                continue;
            };
            let lock = keys::kind_of_key(&key)
                .and_then(|(base, kind)| Some((config.name_of_key(base)?.to_owned(), kind)));
            if let Some((name, kind)) = lock {
                found.push((name, kind, key));
            }
        }
        // A fair lock's hash sorts before its queue: the hash is the key reported.
        found.sort();
        found.dedup_by(|later, first| (&later.0, later.1) == (&first.0, first.1));
        let mut listing = LockListing {
            locks: Vec::with_capacity(found.len()),
            unreadable: Vec::new(),
        };
        for (name, kind, key) in found {
            // A lock released since the scan is simply left out.
            match self.inspect_kind(kind, &name).await {
                Ok(Some(info)) => listing.locks.push(info),
                Ok(None) => {}
                Err(
                    error @ (LockError::WrongType { .. }
                    | LockError::Protocol(_)
                    | LockError::InvalidName { .. }),
                ) => listing.unreadable.push(UnreadableLock { key, name, error }),
                Err(error) => return Err(error),
            }
        }
        listing.unreadable.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(listing)
    }

    /// Deletes the lock (the mutex of [`lock`](Self::lock)) whoever holds it, and
    /// wakes its waiters. The former holder's guard reports itself lost at its next
    /// renewal. Returns whether there was a lock. The same as
    /// [`force_unlock_kind`](Self::force_unlock_kind)`(LockKind::Mutex, name)`.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`], [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let was_locked = client.force_unlock("job:stuck").await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        self.force_unlock_kind(LockKind::Mutex, name).await
    }

    /// Breaks the lock `name` of `kind` whoever holds it, and wakes its waiters:
    /// - [`LockKind::Mutex`]: as [`force_unlock`](Self::force_unlock).
    /// - [`LockKind::Fair`]: the hold (or a hand-off not yet claimed) is deleted and
    ///   the lock is handed to the first live waiter in the queue, as a release would
    ///   (a queue whose lock is gone is handed on too); the queue keeps its order.
    /// - [`LockKind::ReadWrite`]: every reader and the writer are let go; every
    ///   waiting client is woken.
    /// - [`LockKind::Semaphore`]: every permit is freed; every waiting client is woken.
    ///
    /// Each former holder's guard (or permit) reports itself lost at its next
    /// renewal, which finds its hold gone; its release then finds nothing to release.
    /// Returns whether anyone held the lock.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`] (a key of the lock holds
    /// another type), [`LockError::Redis`], [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use holdlock::LockKind;
    ///
    /// // Every permit of the semaphore "exports" is free again.
    /// let was_held = client.force_unlock_kind(LockKind::Semaphore, "exports").await?;
    /// // The fair lock "printer" goes to whoever has waited longest.
    /// client.force_unlock_kind(LockKind::Fair, "printer").await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock_kind(&self, kind: LockKind, name: &str) -> Result<bool> {
        self.engine().check_running()?;
        let names = keys::kind_names(&self.engine().config().prefix, name, kind)?;
        self.engine().protocol().force_unlock(&names.key).await
    }

    /// Whether anyone holds the lock right now.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let busy = client.is_locked("job:nightly").await?;
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self, name: &str) -> Result<bool> {
        self.engine().check_running()?;
        let names = self.engine().config().names(name)?;
        let exists: i64 = self.redis().exists(names.key.as_str()).await?;
        Ok(exists == 1)
    }
}

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
    /// Unix epoch by the Redis server's clock: its place in the queue.
    pub since_us: u64,
    /// How long it has waited, by the Redis server's clock. Serialized as
    /// `waited_ms`, whole milliseconds.
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

/// What the field keeping a holder's data starts with: `data:<holder field>` (see
/// `LockOptions::data` and `lua/acquire.lua`).
const DATA: &str = "data:";

/// The data kept with the holder `field`, if any.
fn data_of(snapshot: &Snapshot, field: &str) -> Option<String> {
    snapshot.field(&[DATA, field].concat()).map(str::to_owned)
}

/// The fields of a lock's hash that are not holders: a fenced hold's token, the mark
/// that someone waits, the fair lock's pending hand-off, the read-write lock's mode,
/// writer and writer's wait, and the semaphore's number of permits (see `lua/`).
const TOKEN: &str = "token";
const WAITING: &str = "waiting";
const CLAIM: &str = "claim";
const MODE: &str = "mode";
const WRITER: &str = "writer";
const WRITER_WAITS: &str = "writer_waits";
const PERMITS: &str = "permits";

/// What a field of a lock's hash ends with when it counts write holds
/// (`lua/rw_acquire.lua`).
const WRITE_HOLDS: &str = ":w";

/// What `snapshot` says of the lock `name`: `None` if nobody holds it and nobody
/// waits in its queue.
fn read_snapshot(name: String, snapshot: &Snapshot) -> Result<Option<LockInfo>> {
    let mut info = LockInfo {
        name,
        kind: snapshot.kind,
        owners: Vec::new(),
        ttl: snapshot.ttl,
        fencing_token: snapshot
            .field(TOKEN)
            .map(|token| number(TOKEN, token))
            .transpose()?,
        waiting: snapshot.field(WAITING).is_some(),
        fair: None,
        read_write: None,
        semaphore: None,
    };
    let found = match snapshot.kind {
        LockKind::Mutex => {
            info.owners = counted(snapshot, &[TOKEN, WAITING])?;
            !info.owners.is_empty()
        }
        LockKind::Fair => {
            let fair = read_fair(snapshot)?;
            info.owners = counted(snapshot, &[TOKEN, WAITING, CLAIM])?;
            info.waiting |= !fair.queue.is_empty();
            let found = !info.owners.is_empty() || !fair.queue.is_empty();
            info.fair = Some(fair);
            found
        }
        LockKind::ReadWrite => {
            let rw = read_write(snapshot)?;
            info.owners = merge_owners(rw.writer.iter().chain(&rw.readers).map(|holder| {
                (
                    holder.owner.as_str(),
                    holder.hold_count,
                    holder.data.as_ref(),
                )
            }));
            info.waiting |= rw.writer_waiting;
            info.read_write = Some(rw);
            !info.owners.is_empty()
        }
        LockKind::Semaphore => {
            let semaphore = read_semaphore(snapshot)?;
            info.owners = merge_owners(
                semaphore
                    .held
                    .iter()
                    .map(|permit| (permit.owner.as_str(), 1, permit.data.as_ref())),
            );
            info.semaphore = Some(semaphore);
            !info.owners.is_empty()
        }
    };
    Ok(found.then_some(info))
}

/// The owners of a hash whose fields other than `reserved` are owner id -> hold count.
fn counted(snapshot: &Snapshot, reserved: &[&str]) -> Result<Vec<LockOwner>> {
    snapshot
        .fields
        .iter()
        .filter(|(field, _)| !reserved.contains(&field.as_str()) && !field.starts_with(DATA))
        .map(|(id, count)| {
            Ok(LockOwner {
                id: id.clone(),
                hold_count: number(id, count)?,
                data: data_of(snapshot, id),
            })
        })
        .collect()
}

/// One entry per owner id, in the order first met, with the holds of each summed and
/// the first data met.
fn merge_owners<'a>(
    holds: impl Iterator<Item = (&'a str, u32, Option<&'a String>)>,
) -> Vec<LockOwner> {
    let mut owners: Vec<LockOwner> = Vec::new();
    for (id, count, data) in holds {
        match owners.iter_mut().find(|owner| owner.id == id) {
            Some(owner) => {
                owner.hold_count = owner.hold_count.saturating_add(count);
                if owner.data.is_none() {
                    owner.data = data.cloned();
                }
            }
            None => owners.push(LockOwner {
                id: id.to_owned(),
                hold_count: count,
                data: data.cloned(),
            }),
        }
    }
    owners
}

/// The fair lock's queue (its first set; its second gives each wait's liveness
/// deadline, and a wait past it is left out) and pending hand-off.
fn read_fair(snapshot: &Snapshot) -> Result<FairInfo> {
    let now_ms = snapshot.now_ms as f64;
    let alive = snapshot.set(1);
    let live = |member: &str| {
        !alive
            .iter()
            .any(|(waiter, deadline)| waiter == member && *deadline <= now_ms)
    };
    let now_us = snapshot.now_ms.saturating_mul(1000);
    let queue = snapshot
        .set(0)
        .iter()
        .filter(|(member, _)| live(member))
        .map(|(member, since)| {
            let (owner, wait) = split_wait(member);
            let since_us = whole(*since);
            FairWaiter {
                owner: owner.to_owned(),
                wait,
                since_us,
                waited: Duration::from_micros(now_us.saturating_sub(since_us)),
            }
        })
        .collect();
    let grant = snapshot.field(CLAIM).map(|claim| {
        let (owner, wait) = split_wait(claim);
        FairGrant {
            owner: owner.to_owned(),
            wait,
            claim_window: snapshot.ttl,
        }
    });
    Ok(FairInfo { queue, grant })
}

/// A fair queue's member `"<owner id> <wait>"` as the owner id and the wait.
fn split_wait(member: &str) -> (&str, Option<u64>) {
    match member.rsplit_once(' ') {
        Some((owner, wait)) => (owner, wait.parse().ok()),
        None => (member, None),
    }
}

/// A read-write lock's holders: `<owner>` counts read holds, `<owner>:w` write holds,
/// each with its deadline in the lock's leases; a holder past its deadline is left
/// out.
fn read_write(snapshot: &Snapshot) -> Result<ReadWriteInfo> {
    let reserved = [TOKEN, WAITING, MODE, WRITER, WRITER_WAITS];
    let mut writer = None;
    let mut readers = Vec::new();
    for (field, count) in &snapshot.fields {
        if reserved.contains(&field.as_str()) || field.starts_with(DATA) {
            continue;
        }
        let Some(lease) = lease_left(snapshot, field) else {
            continue;
        };
        let hold_count = number(field, count)?;
        match field.strip_suffix(WRITE_HOLDS) {
            Some(owner) => {
                writer = Some(RwHolder {
                    owner: owner.to_owned(),
                    hold_count,
                    lease,
                    data: data_of(snapshot, field),
                });
            }
            None => readers.push(RwHolder {
                owner: field.clone(),
                hold_count,
                lease,
                data: data_of(snapshot, field),
            }),
        }
    }
    readers.sort_by(|a, b| a.owner.cmp(&b.owner));
    let writer_waits = snapshot
        .field(WRITER_WAITS)
        .map(|until| number::<u64>(WRITER_WAITS, until))
        .transpose()?;
    Ok(ReadWriteInfo {
        writer,
        readers,
        writer_waiting: writer_waits.is_some_and(|until| until > snapshot.now_ms),
    })
}

/// A semaphore's permits: every field but `permits` and `waiting` is a permit id,
/// with its deadline in the leases; a permit past its deadline is left out.
fn read_semaphore(snapshot: &Snapshot) -> Result<SemaphoreInfo> {
    let mut held = Vec::new();
    for (id, _) in &snapshot.fields {
        if [PERMITS, WAITING, TOKEN].contains(&id.as_str()) || id.starts_with(DATA) {
            continue;
        }
        let Some(lease) = lease_left(snapshot, id) else {
            continue;
        };
        // `<owner id>:p<n>` (see `semaphore.rs`).
        let owner = id
            .rsplit_once(":p")
            .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .map_or(id.as_str(), |(owner, _)| owner);
        held.push(PermitHolder {
            id: id.clone(),
            owner: owner.to_owned(),
            lease,
            data: data_of(snapshot, id),
        });
    }
    held.sort_by(|a, b| a.id.cmp(&b.id));
    let permits = match snapshot.field(PERMITS) {
        Some(permits) => number(PERMITS, permits)?,
        None if held.is_empty() => 0,
        None => {
            return Err(LockError::Protocol(
                "a semaphore with permits held but no `permits` field".into(),
            ));
        }
    };
    Ok(SemaphoreInfo { permits, held })
}

/// The lease left of the holder `field` of a kind whose holders expire one by one
/// (its deadline in the first set): `None` if it has expired (it no longer holds),
/// `Some(None)` if no deadline is kept for it.
fn lease_left(snapshot: &Snapshot, field: &str) -> Option<Option<Duration>> {
    let Some((_, deadline)) = snapshot.set(0).iter().find(|(holder, _)| holder == field) else {
        return Some(None);
    };
    let left = whole(*deadline).checked_sub(snapshot.now_ms)?;
    (left > 0).then(|| Some(Duration::from_millis(left)))
}

/// A score as a whole number (scores here are times, whole and positive).
fn whole(score: f64) -> u64 {
    if score.is_finite() && score > 0.0 {
        score as u64
    } else {
        0
    }
}

/// The number in the field `field`'s `value`, or [`LockError::Protocol`] (a hash this
/// crate did not write).
fn number<T: std::str::FromStr>(field: &str, value: &str) -> Result<T> {
    value.parse().map_err(|_| {
        LockError::Protocol(format!(
            "field {field:?} holds {value:?}, not a number: a hash this crate did not write"
        ))
    })
}

/// What [`LockClient::list_report`] found: the locks it could read, and the keys it
/// could not read as a lock.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let listing = client.list_report("job:*").await?;
/// if !listing.unreadable.is_empty() {
///     eprintln!("{} keys under the prefix are not locks", listing.unreadable.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LockListing {
    /// The locks read, sorted by name.
    pub locks: Vec<LockInfo>,
    /// The keys that could not be read as a lock, sorted by key.
    pub unreadable: Vec<UnreadableLock>,
}

/// A key where a lock would be that could not be read as one, in a [`LockListing`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// for bad in client.list_report("*").await?.unreadable {
///     eprintln!("{} (lock {:?}): {}", bad.key, bad.name, bad.error);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct UnreadableLock {
    /// The Redis key.
    pub key: String,
    /// The lock name the key belongs to (it may be one no lock can have, e.g. empty).
    pub name: String,
    /// Why it could not be read: [`LockError::WrongType`], [`LockError::Protocol`] or
    /// [`LockError::InvalidName`]. Serialized as its message.
    #[cfg_attr(feature = "serde", serde(serialize_with = "serialize_display"))]
    pub error: LockError,
}

/// Serializes a value as its `Display` text (an error in a [`LockListing`]).
#[cfg(feature = "serde")]
fn serialize_display<T: fmt::Display, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.collect_str(value)
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
