//! [`Guard`]: a held lock of any kind, for blocking code; and the critical section of
//! the blocking `Acquire::run`.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::error::Result;
use crate::held::{Held, end_section};

/// A held lock for blocking code: the async guard `G` ([`holdlock::LockGuard`](crate::LockGuard),
/// [`ReadGuard`](crate::ReadGuard), ...) with methods that block instead of returning
/// futures. It dereferences to `G` for the plain accessors (`name()`, `owner()`,
/// `hold_count()`, `fencing_token()`, ...).
///
/// Dropping it releases the lock in the background, on the client's own runtime, from
/// any thread and even after the client is dropped (the guard keeps the runtime alive;
/// the last guard or client to go waits, up to the connect timeout, for the releases
/// to land). [`unlock`](Self::unlock) releases it and reports errors.
///
/// # Examples
/// ```no_run
/// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
/// let guard = client.lock("account:42").block()?;
/// println!("{} held {} time(s)", guard.name(), guard.hold_count());
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct Guard<G> {
    /// Dropped first: its release is spawned on the runtime `shared` keeps alive.
    held: G,
    shared: Arc<Shared>,
}

/// A held lock or fair lock (see [`LockClient::lock`](super::LockClient::lock)).
pub type LockGuard = Guard<crate::LockGuard>;
/// A held read side of a read-write lock (see [`LockClient::read_lock`](super::LockClient::read_lock)).
pub type ReadGuard = Guard<crate::ReadGuard>;
/// A held write side of a read-write lock (see [`LockClient::write_lock`](super::LockClient::write_lock)).
pub type WriteGuard = Guard<crate::WriteGuard>;
/// Several locks held together (see [`LockClient::lock_all`](super::LockClient::lock_all)).
pub type MultiGuard = Guard<crate::MultiGuard>;
/// A semaphore permit (see [`Semaphore::acquire`](super::Semaphore::acquire)).
pub type Permit = Guard<crate::Permit>;

impl<G: Held> Guard<G> {
    pub(crate) fn new(held: G, shared: &Arc<Shared>) -> Self {
        Self {
            held,
            shared: Arc::clone(shared),
        }
    }

    /// The async guard underneath, for its accessors (also reached through `Deref`).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").block()?;
    /// let owner: &str = guard.as_async().owner();
    /// # Ok(()) }
    /// ```
    pub fn as_async(&self) -> &G {
        &self.held
    }

    /// Releases the lock (for a permit, gives it back), waiting for Redis's answer.
    ///
    /// # Errors
    /// As the async guard's `unlock` ([`LockGuard::unlock`](crate::LockGuard::unlock));
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime (the guard is then released in the background).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.lock("a").block()?.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn unlock(self) -> Result<()> {
        let Self { held, shared } = self;
        shared.block(held.unlock())
    }

    /// Whether a hold of the guard is known to be lost (see
    /// [`LockGuard::is_lost`](crate::LockGuard::is_lost)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").block()?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        Held::is_lost(&self.held)
    }

    /// Waits up to `timeout` for a hold of the guard to be lost; `true` if it was.
    ///
    /// # Errors
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("job").block()?;
    /// if guard.wait_lost(std::time::Duration::from_secs(1))? {
    ///     eprintln!("lost the lock; stopping");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        self.shared.block(async {
            Ok(tokio::time::timeout(timeout, self.held.lost())
                .await
                .is_ok())
        })
    }

    /// Whether a hold of the guard has been warned at risk of being lost (see
    /// [`LockGuard::is_at_risk`](crate::LockGuard::is_at_risk)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").block()?;
    /// assert!(!guard.is_at_risk());
    /// # Ok(()) }
    /// ```
    pub fn is_at_risk(&self) -> bool {
        Held::is_at_risk(&self.held)
    }

    /// The smallest lease left when the holds' last renewals landed (see
    /// [`LockGuard::renewal_margin`](crate::LockGuard::renewal_margin)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").block()?;
    /// let margin: Option<std::time::Duration> = guard.renewal_margin();
    /// # Ok(()) }
    /// ```
    pub fn renewal_margin(&self) -> Option<Duration> {
        Held::renewal_margin(&self.held)
    }

    /// Sets the fixed lease of every hold of the guard to `lease` from now (see
    /// [`LockGuard::extend`](crate::LockGuard::extend)).
    ///
    /// # Errors
    /// As [`LockGuard::extend`](crate::LockGuard::extend);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// let options = holdlock::LockOptions::new().lease(Duration::from_secs(10));
    /// let guard = client.lock("report").options(options).block()?.expect("waits forever");
    /// guard.extend(Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.shared.block(self.held.extend(lease))
    }
}

impl Guard<crate::LockGuard> {
    /// The time left on the lock's lease in Redis (see
    /// [`LockGuard::remaining_ttl`](crate::LockGuard::remaining_ttl)).
    ///
    /// # Errors
    /// As [`LockGuard::remaining_ttl`](crate::LockGuard::remaining_ttl);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let ttl = client.lock("a").block()?.remaining_ttl()?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block(self.held.remaining_ttl())
    }
}

impl Guard<crate::Permit> {
    /// Gives the permit back: [`unlock`](Self::unlock) under the semaphore's word.
    ///
    /// # Errors
    /// As [`unlock`](Self::unlock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.semaphore("exports", 5).acquire().block()?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(self) -> Result<()> {
        self.unlock()
    }
}

/// The async guard's accessors.
impl<G> Deref for Guard<G> {
    type Target = G;

    fn deref(&self) -> &G {
        &self.held
    }
}

/// As the async guard's.
impl<G: fmt::Debug> fmt::Debug for Guard<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.held.fmt(f)
    }
}

/// Runs `body` under `guard` and releases it, the critical section of every blocking
/// `Acquire::run`. The body runs on the calling thread to its end (it cannot be
/// stopped): if a hold was lost meanwhile its value is dropped and the call fails with
/// [`LockError::Lost`](crate::LockError::Lost), as the async section does.
pub(crate) fn critical_section<G: Held, T>(
    guard: Guard<G>,
    body: impl FnOnce(&Guard<G>) -> T,
) -> Result<T> {
    let value = body(&guard);
    let Guard { held, shared } = guard;
    let finished = (!Held::is_lost(&held)).then_some(value);
    shared.block(end_section(held, finished))
}
