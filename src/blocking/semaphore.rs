//! [`Semaphore`]: at most N holders, for blocking code.

use std::fmt;
use std::sync::Arc;

use super::Shared;
use crate::error::Result;

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
/// let permit = exports.acquire().block()?; // one of 5, cluster-wide
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

impl super::LockClient {
    /// A semaphore of `permits` permits named `name` (see
    /// [`LockClient::semaphore`](crate::LockClient::semaphore)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("exports", 5).acquire().block()?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore::new(self.as_async().semaphore(name, permits), self.shared())
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

    /// What the semaphore shares with its client.
    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}
