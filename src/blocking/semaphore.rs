//! [`Semaphore`]: at most N holders, for blocking code.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::guards::{Guard, Permit, critical_section};
use crate::error::Result;
use crate::options::LockOptions;

/// A semaphore of a blocking [`LockClient`](super::LockClient): the async
/// [`holdlock::Semaphore`](crate::Semaphore) with calls that block. Cheap to clone.
///
/// Permits are not reentrant: a second `acquire` by the same thread takes a second
/// permit.
///
/// # Examples
/// ```no_run
/// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
/// let exports = client.semaphore("exports", 5);
/// let permit = exports.acquire()?; // one of 5, cluster-wide
/// permit.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    semaphore: crate::Semaphore,
    shared: Arc<Shared>,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.semaphore.fmt(f)
    }
}

impl Semaphore {
    pub(crate) fn new(semaphore: crate::Semaphore, shared: &Arc<Shared>) -> Self {
        Self {
            semaphore,
            shared: Arc::clone(shared),
        }
    }

    /// The async semaphore underneath.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) {
    /// let exports: &holdlock::Semaphore = client.semaphore("exports", 5).as_async();
    /// # }
    /// ```
    pub fn as_async(&self) -> &crate::Semaphore {
        &self.semaphore
    }

    /// The semaphore's name.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) {
    /// assert_eq!(client.semaphore("exports", 5).name(), "exports");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    /// How many permits it has.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) {
    /// assert_eq!(client.semaphore("exports", 5).permits(), 5);
    /// # }
    /// ```
    pub fn permits(&self) -> u32 {
        self.semaphore.permits()
    }

    /// Takes a permit, waiting as long as it takes.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`](crate::Semaphore::acquire);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("partner-api", 3).acquire()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<Permit> {
        let permit = self.shared.block(self.semaphore.acquire())?;
        Ok(Guard::new(permit, &self.shared))
    }

    /// Takes a permit if one is free now; `None` if not.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// if let Some(permit) = client.semaphore("exports", 5).try_acquire()? {
    ///     permit.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<Permit>> {
        let permit = self.shared.block(self.semaphore.try_acquire())?;
        Ok(permit.map(|permit| Guard::new(permit, &self.shared)))
    }

    /// Takes a permit, waiting at most `wait`; `None` if none came free.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_timeout`](crate::Semaphore::acquire_timeout) and
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("exports", 5).acquire_timeout(std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, wait: Duration) -> Result<Option<Permit>> {
        let permit = self.shared.block(self.semaphore.acquire_timeout(wait))?;
        Ok(permit.map(|permit| Guard::new(permit, &self.shared)))
    }

    /// Takes a permit with per-call [`LockOptions`]; `None` if none came free within
    /// the wait.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_with`](crate::Semaphore::acquire_with) and
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let options = holdlock::LockOptions::new().wait(std::time::Duration::from_secs(1));
    /// let permit = client.semaphore("exports", 5).acquire_with(options)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire_with(&self, options: LockOptions) -> Result<Option<Permit>> {
        let permit = self.shared.block(self.semaphore.acquire_with(options))?;
        Ok(permit.map(|permit| Guard::new(permit, &self.shared)))
    }

    /// How many permits are free now.
    ///
    /// # Errors
    /// As [`Semaphore::available`](crate::Semaphore::available);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let free = client.semaphore("exports", 5).available()?;
    /// # Ok(()) }
    /// ```
    pub fn available(&self) -> Result<u32> {
        self.shared.block(self.semaphore.available())
    }

    /// Takes a permit (waiting as long as it takes), runs `body` with it on the calling
    /// thread and gives it back, as [`LockClient::with_lock`](super::LockClient::with_lock)
    /// does with a lock.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire) and [`LockClient::with_lock`](super::LockClient::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.semaphore("exports", 5).with_permit(|_| { /* at most 5 at once */ })?;
    /// # Ok(()) }
    /// ```
    pub fn with_permit<T>(&self, body: impl FnOnce(&Permit) -> T) -> Result<T> {
        critical_section(self.acquire()?, body)
    }
}
