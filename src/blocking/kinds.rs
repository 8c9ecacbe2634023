//! The other kinds of the blocking client: fair, read-write, multi-lock and semaphore.

use std::time::Duration;

use super::{LockClient, LockGuard, MultiGuard, ReadGuard, Semaphore, WriteGuard};
use crate::error::Result;
use crate::options::LockOptions;

impl LockClient {
    /// Takes the fair lock, first come, first served across clients.
    ///
    /// # Errors
    /// As [`LockClient::fair_lock`](crate::LockClient::fair_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.fair_lock("queue:7")?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Result<LockGuard> {
        self.block(self.client().fair_lock(name))
            .map(|held| self.guard(held))
    }

    /// Takes the fair lock if it is free and nobody queues for it; `None` if not.
    ///
    /// # Errors
    /// As [`LockClient::try_fair_lock`](crate::LockClient::try_fair_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.try_fair_lock("queue:7")?;
    /// # Ok(()) }
    /// ```
    pub fn try_fair_lock(&self, name: &str) -> Result<Option<LockGuard>> {
        self.block(self.client().try_fair_lock(name))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the fair lock, waiting in the queue at most `wait`.
    ///
    /// # Errors
    /// As [`LockClient::fair_lock_timeout`](crate::LockClient::fair_lock_timeout);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.fair_lock_timeout("queue:7", std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock_timeout(&self, name: &str, wait: Duration) -> Result<Option<LockGuard>> {
        self.block(self.client().fair_lock_timeout(name, wait))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the fair lock with per-call [`LockOptions`].
    ///
    /// # Errors
    /// As [`LockClient::fair_lock_with`](crate::LockClient::fair_lock_with);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.fair_lock_with("queue:7", holdlock::LockOptions::fenced())?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock_with(&self, name: &str, options: LockOptions) -> Result<Option<LockGuard>> {
        self.block(self.client().fair_lock_with(name, options))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the read side of the read-write lock, shared with other readers.
    ///
    /// # Errors
    /// As [`LockClient::read_lock`](crate::LockClient::read_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.read_lock("balance:7")?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self, name: &str) -> Result<ReadGuard> {
        self.block(self.client().read_lock(name))
            .map(|held| self.guard(held))
    }

    /// Takes the read side if no writer holds or waits for the lock; `None` if not.
    ///
    /// # Errors
    /// As [`LockClient::try_read_lock`](crate::LockClient::try_read_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.try_read_lock("balance:7")?;
    /// # Ok(()) }
    /// ```
    pub fn try_read_lock(&self, name: &str) -> Result<Option<ReadGuard>> {
        self.block(self.client().try_read_lock(name))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the read side, waiting at most `wait`.
    ///
    /// # Errors
    /// As [`LockClient::read_lock_timeout`](crate::LockClient::read_lock_timeout);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.read_lock_timeout("balance:7", std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock_timeout(&self, name: &str, wait: Duration) -> Result<Option<ReadGuard>> {
        self.block(self.client().read_lock_timeout(name, wait))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the read side with per-call [`LockOptions`].
    ///
    /// # Errors
    /// As [`LockClient::read_lock_with`](crate::LockClient::read_lock_with);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.read_lock_with("balance:7", holdlock::LockOptions::new())?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock_with(&self, name: &str, options: LockOptions) -> Result<Option<ReadGuard>> {
        self.block(self.client().read_lock_with(name, options))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the write side of the read-write lock, alone.
    ///
    /// # Errors
    /// As [`LockClient::write_lock`](crate::LockClient::write_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.write_lock("balance:7")?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self, name: &str) -> Result<WriteGuard> {
        self.block(self.client().write_lock(name))
            .map(|held| self.guard(held))
    }

    /// Takes the write side if the lock is free; `None` if not.
    ///
    /// # Errors
    /// As [`LockClient::try_write_lock`](crate::LockClient::try_write_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.try_write_lock("balance:7")?;
    /// # Ok(()) }
    /// ```
    pub fn try_write_lock(&self, name: &str) -> Result<Option<WriteGuard>> {
        self.block(self.client().try_write_lock(name))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the write side, waiting at most `wait`.
    ///
    /// # Errors
    /// As [`LockClient::write_lock_timeout`](crate::LockClient::write_lock_timeout);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.write_lock_timeout("balance:7", std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock_timeout(&self, name: &str, wait: Duration) -> Result<Option<WriteGuard>> {
        self.block(self.client().write_lock_timeout(name, wait))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the write side with per-call [`LockOptions`].
    ///
    /// # Errors
    /// As [`LockClient::write_lock_with`](crate::LockClient::write_lock_with);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.write_lock_with("balance:7", holdlock::LockOptions::fenced())?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock_with(&self, name: &str, options: LockOptions) -> Result<Option<WriteGuard>> {
        self.block(self.client().write_lock_with(name, options))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes every lock of `names`, all or nothing, in one global order (never deadlocking callers whose sets overlap).
    ///
    /// # Errors
    /// As [`LockClient::lock_all`](crate::LockClient::lock_all);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all(["account:1", "account:2"])?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I>(&self, names: I) -> Result<MultiGuard>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.block(self.client().lock_all(names))
            .map(|held| self.guard(held))
    }

    /// Takes every lock of `names` if all are free now; `None` if not (nothing is held then).
    ///
    /// # Errors
    /// As [`LockClient::try_lock_all`](crate::LockClient::try_lock_all);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let both = client.try_lock_all(["account:1", "account:2"])?;
    /// # Ok(()) }
    /// ```
    pub fn try_lock_all<I>(&self, names: I) -> Result<Option<MultiGuard>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.block(self.client().try_lock_all(names))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes every lock of `names`, waiting at most `wait` in all.
    ///
    /// # Errors
    /// As [`LockClient::lock_all_timeout`](crate::LockClient::lock_all_timeout);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all_timeout(["account:1", "account:2"], std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all_timeout<I>(&self, names: I, wait: Duration) -> Result<Option<MultiGuard>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.block(self.client().lock_all_timeout(names, wait))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes every lock of `names` with per-call [`LockOptions`].
    ///
    /// # Errors
    /// As [`LockClient::lock_all_with`](crate::LockClient::lock_all_with);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all_with(["account:1", "account:2"], holdlock::LockOptions::new())?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all_with<I>(&self, names: I, options: LockOptions) -> Result<Option<MultiGuard>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.block(self.client().lock_all_with(names, options))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// A semaphore of `permits` permits named `name` (see
    /// [`LockClient::semaphore`](crate::LockClient::semaphore)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("exports", 5).acquire()?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore::new(self.client().semaphore(name, permits), &self.shared)
    }
}
