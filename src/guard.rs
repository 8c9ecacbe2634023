//! [`LockGuard`]: one held hold of a lock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::KeysInterface;

use crate::engine::{Engine, HoldClaim};
#[cfg(doc)]
use crate::error::LockError;
use crate::error::Result;
use crate::hold::Hold;

/// One hold of a lock. Dropping it releases the hold in the background;
/// [`unlock`](Self::unlock) releases it and reports errors.
///
/// Nested guards of one owner share the hold: the count goes up with each, the lock
/// stays held until the last is released (in any order), and one watchdog renews it.
/// A guard remembers its owner, so it may be moved to and released from another task.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let outer = client.lock("account:42").await?;
/// let inner = client.lock("account:42").await?; // same task: re-entry
/// assert_eq!(inner.hold_count(), 2);
/// outer.unlock().await?; // any order
/// inner.unlock().await?; // the key is deleted now
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    /// The guard's claim on its hold: dropped with the guard, it releases the hold in
    /// the background; [`unlock`](Self::unlock) hands it to the engine.
    claim: HoldClaim,
}

impl LockGuard {
    /// The engine the guard's hold belongs to.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        self.claim.engine()
    }

    pub(crate) fn new(claim: HoldClaim) -> Self {
        Self { claim }
    }

    /// The one hold of the guard, which [`Held`]'s signals read.
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        self.claim.hold()
    }

    /// The lock name.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// assert_eq!(client.lock("a").await?.name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.hold().names.name
    }

    /// The owner id this hold belongs to, `<client-uuid>:<task>`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// assert!(guard.owner().starts_with(&client.owner_id()[..36]));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.hold().owner
    }

    /// How many holds the owner has on this lock now (shared by nested guards).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// assert_eq!(guard.hold_count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> u32 {
        self.hold().count()
    }

    /// The time left on the lock's lease in Redis; `None` if the lock no longer exists.
    ///
    /// # Errors
    /// [`LockError::Redis`], [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// let left = guard.remaining_ttl().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.engine().check_running()?;
        let redis = self.engine().protocol().redis();
        let pttl: i64 = redis.pttl(&*self.hold().names.key).await?;
        Ok(u64::try_from(pttl).ok().map(Duration::from_millis))
    }

    /// Releases this hold now: the body of [`unlock`](Self::unlock) (which
    /// [`Held`](crate::Held) gives every guard, in held.rs, so that this module does
    /// not import that one).
    pub(crate) async fn release_hold(self) -> Result<()> {
        let Self { claim } = self;
        Arc::clone(claim.engine()).release(claim).await
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name())
            .field("owner", &self.owner())
            .field("hold_count", &self.hold_count())
            .field("lost", &self.is_lost())
            .finish()
    }
}
