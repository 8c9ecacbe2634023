//! The critical section, ready-made: `with_lock` and its siblings take a lock of any
//! kind, run a body under it, stop the body if the lock is lost, and release. Each is
//! sugar over one implementation, [`critical_section`].

use std::time::Duration;

use crate::client::LockClient;
#[cfg(doc)]
use crate::error::LockError;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::held::critical_section;
use crate::multi::MultiGuard;
use crate::options::LockOptions;
use crate::rw::{ReadGuard, WriteGuard};
use crate::semaphore::{Permit, Semaphore};

impl LockClient {
    /// Takes the lock `name` (waiting as long as it takes, as [`lock`](Self::lock)),
    /// runs `body` with the guard, and releases the lock: the safe shape of a critical
    /// section, written once. If the lock is lost while `body` runs, `body`'s future is
    /// dropped at once (it stops at its next await) and the call fails with
    /// [`LockError::Lost`]; once `body` finishes, the lock is released (and awaited)
    /// before its value is returned.
    ///
    /// `body` gets the guard, so it can read [`LockGuard::fencing_token`] or take the
    /// same lock again (a nested critical section re-enters).
    ///
    /// # Errors
    /// As [`lock`](Self::lock); [`LockError::Lost`] if the lock was lost while `body`
    /// ran; an error of the release (as [`LockGuard::unlock`]), which is returned, not
    /// swallowed: `body`'s value is then dropped.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting, nothing is held; dropped while `body` runs,
    /// `body` is dropped and the lock released in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let balance = client
    ///     .with_lock("account:42", async |guard| {
    ///         // ... exclusive across every process; `guard.fencing_token()` if fenced ...
    ///         100
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T>(
        &self,
        name: &str,
        body: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<T> {
        critical_section(self.lock(name).await?, body).await
    }

    /// [`with_lock`](Self::with_lock) if the lock is free (or this owner holds it), as
    /// [`try_lock`](Self::try_lock): `None` if it is busy, and then `body` is not run.
    ///
    /// # Errors
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// match client.try_with_lock("report", async |_| "ran").await? {
    ///     Some(outcome) => println!("{outcome}"),
    ///     None => println!("someone else is on it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_with_lock<T>(
        &self,
        name: &str,
        body: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<Option<T>> {
        let options = LockOptions::new().wait(Duration::ZERO);
        self.with_lock_with(name, options, body).await
    }

    /// [`with_lock`](Self::with_lock) with per-call [`LockOptions`], as
    /// [`lock_with`](Self::lock_with): `None` if the lock was not free within the
    /// wait, and then `body` is not run.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with) and [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// let options = holdlock::LockOptions::fenced().wait(Duration::from_secs(1));
    /// let written = client
    ///     .with_lock_with("stock:7", options, async |guard| guard.fencing_token())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock_with<T>(
        &self,
        name: &str,
        options: LockOptions,
        body: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<Option<T>> {
        match self.lock_with(name, options).await? {
            Some(guard) => critical_section(guard, body).await.map(Some),
            None => Ok(None),
        }
    }

    /// [`with_lock`](Self::with_lock) for the fair lock `name` (see
    /// [`fair_lock`](Self::fair_lock)).
    ///
    /// # Errors
    /// As [`fair_lock`](Self::fair_lock) and [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// client.with_fair_lock("queue:7", async |_| { /* served in turn */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_fair_lock<T>(
        &self,
        name: &str,
        body: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<T> {
        critical_section(self.fair_lock(name).await?, body).await
    }

    /// [`with_lock`](Self::with_lock) for the read side of the read-write lock `name`
    /// (see [`read_lock`](Self::read_lock)).
    ///
    /// # Errors
    /// As [`read_lock`](Self::read_lock) and [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let seen = client.with_read_lock("balance:7", async |_| 42).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_read_lock<T>(
        &self,
        name: &str,
        body: impl AsyncFnOnce(&ReadGuard) -> T,
    ) -> Result<T> {
        critical_section(self.read_lock(name).await?, body).await
    }

    /// [`with_lock`](Self::with_lock) for the write side of the read-write lock `name`
    /// (see [`write_lock`](Self::write_lock)).
    ///
    /// # Errors
    /// As [`write_lock`](Self::write_lock) and [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// client.with_write_lock("balance:7", async |_| { /* readers wait */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_write_lock<T>(
        &self,
        name: &str,
        body: impl AsyncFnOnce(&WriteGuard) -> T,
    ) -> Result<T> {
        critical_section(self.write_lock(name).await?, body).await
    }

    /// [`with_lock`](Self::with_lock) for every lock of `names` at once (see
    /// [`lock_all`](Self::lock_all)); [`LockError::Lost`] names the member that was
    /// lost.
    ///
    /// # Errors
    /// As [`lock_all`](Self::lock_all) and [`with_lock`](Self::with_lock).
    ///
    /// # Cancel safety
    /// As [`with_lock`](Self::with_lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// client
    ///     .with_lock_all(["account:1", "account:2"], async |_| { /* transfer */ })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock_all<I, T>(
        &self,
        names: I,
        body: impl AsyncFnOnce(&MultiGuard) -> T,
    ) -> Result<T>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        critical_section(self.lock_all(names).await?, body).await
    }
}

impl Semaphore {
    /// Takes a permit (waiting as long as it takes, as [`acquire`](Self::acquire)), runs
    /// `body` with it and gives it back, as [`LockClient::with_lock`] does with a lock.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire) and [`LockClient::with_lock`].
    ///
    /// # Cancel safety
    /// As [`LockClient::with_lock`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let exports = client.semaphore("exports", 5);
    /// exports.with_permit(async |_| { /* at most 5 at once, cluster-wide */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_permit<T>(&self, body: impl AsyncFnOnce(&Permit) -> T) -> Result<T> {
        critical_section(self.acquire().await?, body).await
    }
}
