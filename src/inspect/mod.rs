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

use fred::interfaces::{ClientLike, HashesInterface, KeysInterface};
use futures::StreamExt;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::keys::{self, LockKind};
use crate::scripts::Kind;

mod read;
mod snapshot;

use read::read_snapshot;
pub use snapshot::{
    FairGrant, FairInfo, FairWaiter, LockInfo, LockOwner, LongWait, PermitHolder, ReadWriteInfo,
    RwHolder, SemaphoreInfo, WaitGraph,
};

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
        let names = self.engine().config().kind_names(name, kind)?;
        match self.engine().protocol().inspect(&names).await? {
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
    /// In Redisson's layout ([`Compat::Redisson`](crate::Compat::Redisson)) a lock's key
    /// is its bare name, so every hash and string the pattern matches is read to tell
    /// the locks (Java's too) from the application's keys, which are left out: give a
    /// narrow pattern on a large keyspace.
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
        // No TYPE filter: a lock key holding a value of another type is reported too.
        // (name, kind, key): a lock's hash, or a fair lock's queue.
        let mut found = Vec::new();
        for key in self.scan(scan_pattern).await? {
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
        self.list_at_the_name(pattern, &mut listing.locks).await?;
        listing
            .locks
            .sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
        listing.unreadable.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(listing)
    }

    /// Adds to `locks` the held locks of the kinds this client keeps at their bare
    /// names (Redisson's layout), whose names match `pattern`. Nothing in such a key
    /// tells it from an application's, so each hash and string the pattern matches is
    /// read: a hash with a `mode` field as a read-write lock, another hash as a mutex, a
    /// string as a semaphore. A key that reads as none of them, or whose holders are
    /// not owner ids (`<uuid>:...`), is the application's and left out, not reported.
    async fn list_at_the_name(&self, pattern: &str, locks: &mut Vec<LockInfo>) -> Result<()> {
        let config = self.engine().config();
        let kinds = config.kinds_at_the_name();
        if kinds.is_empty() {
            return Ok(());
        }
        let mut found = self
            .scan(keys::bare_scan_pattern(&config.prefix, pattern))
            .await?;
        found.sort();
        found.dedup();
        let redis = self.redis();
        for key in found {
            let Some(name) = key.strip_prefix(config.prefix.as_str()) else {
                continue;
            };
            // A key of holdlock's own layout, listed above.
            if keys::kind_of_key(&key).is_some_and(|(base, _)| config.name_of_key(base).is_some()) {
                continue;
            }
            let kind = match redis.r#type::<String, _>(key.as_str()).await?.as_str() {
                "hash" => match redis.hexists::<bool, _, _>(key.as_str(), "mode").await? {
                    true => LockKind::ReadWrite,
                    false => LockKind::Mutex,
                },
                "string" => LockKind::Semaphore,
                _ => continue,
            };
            if !kinds.contains(&kind) {
                continue;
            }
            // A hash's holders must read as owner ids. A semaphore's permits need not
            // (Redisson's clients draw their ids), but they are its own sorted set's
            // members, each with a deadline: nothing an application's string has.
            let by_owners = Kind::of_public(kind, config.compat).holders_are_owner_ids();
            let owned = |info: &LockInfo| {
                !by_owners || info.owners.iter().all(|owner| is_owner_id(&owner.id))
            };
            match self.inspect_kind(kind, name).await {
                Ok(Some(info)) if owned(&info) => locks.push(info),
                Ok(_) => {}
                Err(LockError::WrongType { .. } | LockError::Protocol(_)) => {}
                Err(LockError::InvalidName { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Who waits for what: every wait (of any client under this prefix) that has
    /// lasted past its client's deadlock check (see
    /// [`LockClientBuilder::deadlock_check`](crate::LockClientBuilder::deadlock_check))
    /// and still lasts, and the deadlocks among them, each confirmed by a second look
    /// and named as the wait that will be told of it sees it. A deadlock is broken by
    /// its victim's own check within a check delay; one listed here for longer means
    /// its victim's client has the check off (or cannot reach Redis).
    ///
    /// The waits are found with `SCAN` (on every primary of a cluster), never `KEYS`; a
    /// semaphore's waits are not recorded (see [`LockError::Deadlock`]).
    ///
    /// # Errors
    /// [`LockError::Redis`] (the connection failed, or Redis refused the scan), and
    /// [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let graph = client.waits().await?;
    /// for wait in &graph.waits {
    ///     println!("{} ({:?})", wait.wait, wait.waited);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn waits(&self) -> Result<WaitGraph> {
        self.engine().check_running()?;
        let config = self.engine().config();
        let mut found = self.scan(keys::waits_scan_pattern(&config.prefix)).await?;
        found.sort();
        found.dedup();
        let protocol = self.engine().protocol();
        let walker = crate::deadlock::Walker {
            config,
            redis: protocol.scripting(),
        };
        let check = config
            .deadlock_check
            .unwrap_or(crate::options::DEFAULT_DEADLOCK_CHECK);
        let (waits, deadlocks) = walker
            .graph(&found, crate::deadlock::second_look(check))
            .await?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |now| now.as_millis() as u64);
        let mut waits: Vec<LongWait> = waits
            .into_iter()
            .map(|(wait, since_ms)| LongWait {
                wait,
                waited: std::time::Duration::from_millis(now_ms.saturating_sub(since_ms)),
            })
            .collect();
        waits.sort_by(|a, b| {
            b.waited
                .cmp(&a.waited)
                .then_with(|| a.wait.owner.cmp(&b.wait.owner))
        });
        Ok(WaitGraph { waits, deadlocks })
    }

    /// Every key matching the glob `pattern`, found with `SCAN` (on every primary of a
    /// cluster, so a key may come twice), never `KEYS`.
    async fn scan(&self, pattern: String) -> Result<Vec<String>> {
        let redis = self.redis();
        let mut scanned = if redis.is_clustered() {
            redis
                .scan_cluster_buffered(pattern, Some(200), None)
                .boxed()
        } else {
            redis.scan_buffered(pattern, Some(200), None).boxed()
        };
        let mut found = Vec::new();
        while let Some(key) = scanned.next().await {
            if let Some(key) = key?.into_string() {
                found.push(key);
            }
        }
        Ok(found)
    }

    /// Deletes the lock (the mutex of [`lock`](Self::lock)) whoever holds it, and
    /// wakes its waiters. The former holder's client is told at once, and its guard
    /// reports itself lost within a round trip (see
    /// [`force_unlock_kind`](Self::force_unlock_kind)). Returns whether there was a
    /// lock. The same as
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
    /// Each former holder's client is told on its own channel, checks that its hold
    /// is gone (one read), and its guard (or permit) reports itself
    /// [lost](crate::LockGuard::lost) within a round trip of the force-unlock; a
    /// client that misses the message (its subscriber reconnecting, or an older
    /// holdlock) finds out at its next renewal instead. Its release then finds nothing
    /// to release. Returns whether anyone held the lock.
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
        let names = self.engine().config().kind_names(name, kind)?;
        let prefix = &self.engine().config().prefix;
        self.engine().protocol().force_unlock(&names, prefix).await
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
        let exists: i64 = self.redis().exists(&*names.key).await?;
        Ok(exists == 1)
    }
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

/// Whether `id` reads as an owner id: a client's UUID, a colon, and more (holdlock's
/// task, or a Java thread's number).
fn is_owner_id(id: &str) -> bool {
    id.split_once(':')
        .is_some_and(|(client, rest)| !rest.is_empty() && uuid::Uuid::try_parse(client).is_ok())
}
