//! Looking at locks without taking them: [`LockClient::inspect`], [`list`],
//! [`list_report`], [`is_locked`] and [`force_unlock`], and the snapshots they return.
//!
//! [`list`]: LockClient::list
//! [`list_report`]: LockClient::list_report
//! [`is_locked`]: LockClient::is_locked
//! [`force_unlock`]: LockClient::force_unlock

#[cfg(feature = "serde")]
use std::fmt;
use std::time::Duration;

use fred::interfaces::{ClientLike, KeysInterface};
use futures::StreamExt;

use crate::client::LockClient;
use crate::error::{LockError, Result};

impl LockClient {
    /// Looks at a lock: its owners and their hold counts, its remaining TTL and its
    /// fencing token (if it was taken with one). `None` if nobody holds it.
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
        self.engine().check_running()?;
        let names = self.engine().config().names(name)?;
        let snapshot = self.engine().protocol().inspect(&names.key).await?;
        Ok(snapshot.map(|snapshot| LockInfo {
            name: names.name,
            owners: snapshot
                .owners
                .into_iter()
                .map(|(id, hold_count)| LockOwner { id, hold_count })
                .collect(),
            ttl: snapshot.ttl,
            fencing_token: snapshot.token,
            waiting: snapshot.waiting,
        }))
    }

    /// Every held lock whose name matches the glob `pattern` (`*` for all), found with
    /// `SCAN` (on every primary of a cluster), never `KEYS`.
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
    ///     println!("{}: {:?}", info.name, info.owners);
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
    /// sorted by name, unreadable keys by key.
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
    ///     println!("{}: {:?}", info.name, info.owners);
    /// }
    /// for bad in &listing.unreadable {
    ///     eprintln!("{} is not a lock: {}", bad.key, bad.error);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_report(&self, pattern: &str) -> Result<LockListing> {
        self.engine().check_running()?;
        let scan_pattern = self.engine().config().scan_pattern(pattern);
        let redis = self.redis();
        // No TYPE filter: a lock key holding a value of another type is reported too.
        let mut keys = if redis.is_clustered() {
            redis
                .scan_cluster_buffered(scan_pattern, Some(200), None)
                .boxed()
        } else {
            redis.scan_buffered(scan_pattern, Some(200), None).boxed()
        };
        let mut found = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key?;
            if let Some(key) = key.into_string() {
                if self.engine().config().name_of_key(&key).is_some() {
                    found.push(key);
                }
            }
        }
        found.sort();
        found.dedup();
        let mut listing = LockListing {
            locks: Vec::with_capacity(found.len()),
            unreadable: Vec::new(),
        };
        for key in found {
            let Some(name) = self.engine().config().name_of_key(&key) else {
                continue;
            };
            // A lock released since the scan is simply left out.
            match self.inspect(name).await {
                Ok(Some(info)) => listing.locks.push(info),
                Ok(None) => {}
                Err(
                    error @ (LockError::WrongType { .. }
                    | LockError::Protocol(_)
                    | LockError::InvalidName { .. }),
                ) => {
                    let name = name.to_owned();
                    listing.unreadable.push(UnreadableLock { key, name, error });
                }
                Err(error) => return Err(error),
            }
        }
        Ok(listing)
    }

    /// Deletes the lock whoever holds it, and wakes its waiters. The former holder's
    /// guard reports itself lost at its next renewal. Returns whether there was a lock.
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
        self.engine().check_running()?;
        let names = self.engine().config().names(name)?;
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

/// A snapshot of one lock, from [`LockClient::inspect`] or [`LockClient::list`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let info = client.inspect("job:nightly").await?.expect("held");
/// assert_eq!(info.owners.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock name (without prefix).
    pub name: String,
    /// Who holds it, and how many times.
    pub owners: Vec<LockOwner>,
    /// The remaining lease; `None` if the key has no expiry (not set by this crate).
    /// Serialized as `ttl_ms`, whole milliseconds.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "ttl_ms", with = "crate::serde_millis")
    )]
    pub ttl: Option<Duration>,
    /// The fencing token of the current hold, if it was taken with fencing.
    pub fencing_token: Option<u64>,
    /// Whether someone was refused the lock while the current hold had it (a waiting
    /// call; single tries do not count): the release will wake them.
    #[cfg_attr(feature = "serde", serde(default))]
    pub waiting: bool,
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
    /// How many nested holds it has.
    pub hold_count: u32,
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
