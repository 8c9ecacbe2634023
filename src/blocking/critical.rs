//! Critical sections of the blocking client: the `with_*` calls over plain closures.

use super::guards::critical_section;
use super::{LockClient, LockGuard, MultiGuard, ReadGuard, WriteGuard};
use crate::error::Result;
use crate::options::LockOptions;

impl LockClient {
    /// Takes the lock (as [`lock`](Self::lock)), runs `body` with the guard on the
    /// calling thread, and releases the lock before returning `body`'s value (see
    /// [Critical sections](crate::blocking#critical-sections)).
    ///
    /// # Errors
    /// As [`lock`](Self::lock); [`LockError::Lost`](crate::LockError::Lost) if the lock
    /// was lost while `body` ran; an error of the release.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let balance = client.with_lock("account:42", |_guard| 100)?;
    /// # Ok(()) }
    /// ```
    pub fn with_lock<T>(&self, name: &str, body: impl FnOnce(&LockGuard) -> T) -> Result<T> {
        critical_section(self.lock(name)?, body)
    }

    /// [`with_lock`](Self::with_lock) if the lock is free (or this thread holds it):
    /// `None` if it is busy, and then `body` is not run.
    ///
    /// # Errors
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let ran = client.try_with_lock("report", |_| "ran")?;
    /// # Ok(()) }
    /// ```
    pub fn try_with_lock<T>(
        &self,
        name: &str,
        body: impl FnOnce(&LockGuard) -> T,
    ) -> Result<Option<T>> {
        self.try_lock(name)?
            .map(|guard| critical_section(guard, body))
            .transpose()
    }

    /// [`with_lock`](Self::with_lock) with per-call [`LockOptions`]: `None` if the lock
    /// was not free within the wait, and then `body` is not run.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with) and [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let token = client.with_lock_with("stock:7", holdlock::LockOptions::fenced(), |guard| guard.fencing_token())?;
    /// # Ok(()) }
    /// ```
    pub fn with_lock_with<T>(
        &self,
        name: &str,
        options: LockOptions,
        body: impl FnOnce(&LockGuard) -> T,
    ) -> Result<Option<T>> {
        self.lock_with(name, options)?
            .map(|guard| critical_section(guard, body))
            .transpose()
    }

    /// [`with_lock`](Self::with_lock) for the fair lock `name`.
    ///
    /// # Errors
    /// As [`fair_lock`](Self::fair_lock) and [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.with_fair_lock("queue:7", |_| { /* served in turn */ })?;
    /// # Ok(()) }
    /// ```
    pub fn with_fair_lock<T>(&self, name: &str, body: impl FnOnce(&LockGuard) -> T) -> Result<T> {
        critical_section(self.fair_lock(name)?, body)
    }

    /// [`with_lock`](Self::with_lock) for the read side of the read-write lock `name`.
    ///
    /// # Errors
    /// As [`read_lock`](Self::read_lock) and [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let seen = client.with_read_lock("balance:7", |_| 42)?;
    /// # Ok(()) }
    /// ```
    pub fn with_read_lock<T>(&self, name: &str, body: impl FnOnce(&ReadGuard) -> T) -> Result<T> {
        critical_section(self.read_lock(name)?, body)
    }

    /// [`with_lock`](Self::with_lock) for the write side of the read-write lock `name`.
    ///
    /// # Errors
    /// As [`write_lock`](Self::write_lock) and [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.with_write_lock("balance:7", |_| { /* readers wait */ })?;
    /// # Ok(()) }
    /// ```
    pub fn with_write_lock<T>(&self, name: &str, body: impl FnOnce(&WriteGuard) -> T) -> Result<T> {
        critical_section(self.write_lock(name)?, body)
    }

    /// [`with_lock`](Self::with_lock) for every lock of `names` at once (see
    /// [`lock_all`](Self::lock_all)).
    ///
    /// # Errors
    /// As [`lock_all`](Self::lock_all) and [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.with_lock_all(["account:1", "account:2"], |_| { /* transfer */ })?;
    /// # Ok(()) }
    /// ```
    pub fn with_lock_all<I, T>(&self, names: I, body: impl FnOnce(&MultiGuard) -> T) -> Result<T>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        critical_section(self.lock_all(names)?, body)
    }
}
