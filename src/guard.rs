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
#[cfg(doc)]
use crate::options::LockOptions;

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

    fn hold(&self) -> &Arc<Hold> {
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

    /// The fencing token of this hold, if it was taken with fencing: strictly greater
    /// than every token handed to earlier holders of the same name. Nested holds share
    /// the token of the first.
    ///
    /// A token is the Redis server's clock in microseconds, or one more than the last
    /// token if that is larger, so tokens keep increasing across Redis restarts and
    /// failovers as long as the servers' clocks are roughly in sync and never stepped
    /// back by more than the outage lasted (see `docs/guarantees.md`). Tokens are
    /// sparse: compare them, do not count on consecutive values.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock_with("a", holdlock::LockOptions::fenced()).await?.unwrap();
    /// let token: u64 = guard.fencing_token().expect("fenced");
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.hold().token()
    }

    /// Whether the hold is known to be lost: its key or field vanished, renewals failed
    /// until the lease was about to run out, a fixed lease (nearly) ran out, or the
    /// client was shut down.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.hold().is_lost()
    }

    /// Resolves when the hold is lost; never while it is held. Select on it to stop
    /// work that must not continue without the lock.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient, work: impl std::future::Future<Output = ()>) -> holdlock::Result<()> {
    /// let guard = client.lock("job").await?;
    /// tokio::select! {
    ///     () = work => guard.unlock().await?,
    ///     () = guard.lost() => eprintln!("lock lost; work abandoned"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        loop {
            if self.hold().is_lost() {
                return;
            }
            match self.hold().expires_at() {
                Some(at) => {
                    tokio::select! {
                        () = self.hold().marked_lost() => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => self.hold().marked_lost().await,
            }
        }
    }

    /// Whether the hold has been warned at risk of being lost: a renewal landed with
    /// less than the client's at-risk share of the lease left (a third by default, see
    /// [`LockClientBuilder::at_risk_share`](crate::LockClientBuilder::at_risk_share)),
    /// or a renewal failed, while the hold was not lost. The warning stays.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// assert!(!guard.is_at_risk());
    /// # Ok(()) }
    /// ```
    pub fn is_at_risk(&self) -> bool {
        self.hold().is_at_risk()
    }

    /// Resolves when the hold is [at risk](Self::is_at_risk): an early warning, before
    /// [`lost`](Self::lost), that the holder's runtime or Redis is too slow for the
    /// lease (a starved tokio worker, a paused server). Stop taking new work and
    /// checkpoint; the lock may still be kept (`lost()` fires later, or never). A hold
    /// with a fixed lease has no renewals and is never warned.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("job").await?;
    /// tokio::select! {
    ///     () = guard.at_risk() => eprintln!("renewals are late: checkpoint now"),
    ///     () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn at_risk(&self) {
        self.hold().warned_at_risk().await;
    }

    /// The lease that was left in Redis when the last renewal landed (the margin the
    /// watchdog had); `None` before the first renewal and for a fixed lease.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// if let Some(margin) = guard.renewal_margin() {
    ///     println!("the last renewal landed with {margin:?} to spare");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn renewal_margin(&self) -> Option<Duration> {
        self.hold().margin()
    }

    /// Sets the lease of a hold taken with a fixed lease ([`LockOptions::lease`]) to
    /// `lease` from now, if it is still held. No watchdog is started. Nested holds share
    /// the lease, so this sets theirs too.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] if the hold was lost (its lease ran out, or it was
    /// force-unlocked); [`LockError::InvalidOption`] for a zero or overlong lease, or
    /// for a hold the watchdog renews; [`LockError::Redis`], [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while the renewal is in flight, Redis may keep the longer
    /// lease while the guard counts the shorter one, so the guard reports the hold lost
    /// early, never late.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// use holdlock::LockOptions;
    /// let options = LockOptions::new().lease(Duration::from_secs(10));
    /// let guard = client.lock_with("report", options).await?.expect("waits forever");
    /// // ... the job needs longer than planned ...
    /// guard.extend(Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.engine().extend(self.hold(), lease).await
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

    /// Releases this hold now. The lock is deleted (and its waiters woken) when the
    /// owner's last hold is released.
    ///
    /// A hold the guard has given up as [lost](Self::is_lost) may still be in Redis (a
    /// fixed lease past nine tenths, renewals that kept failing): it is released all
    /// the same, checked against the owner, so a job that overran its planned lease
    /// frees the lock at once instead of leaving it held until the lease runs out.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] if the hold was gone from Redis (expired, force-unlocked,
    /// or replaced by a newer hold of the same owner); [`LockError::Redis`] if Redis
    /// could not be reached (the hold then expires within its lease);
    /// [`LockError::Shutdown`].
    ///
    /// If Redis refuses the release (it changed nothing, e.g. `NOREPLICAS` or `OOM`),
    /// the error is returned and the hold is released in the background, as a dropped
    /// guard's is: retried until it succeeds, the hold is lost or the client shuts
    /// down. Nested guards of the same hold are not affected: the hold count in Redis
    /// and here stay equal.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point releases the hold all the same.
    /// Dropped before the release was sent (it may wait behind another call of the
    /// same owner on the same lock), the guard is dropped with it and releases in the
    /// background; dropped after, the outcome is read from Redis in the background and
    /// the release completed if it did not run.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// client.lock("a").await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(self) -> Result<()> {
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
