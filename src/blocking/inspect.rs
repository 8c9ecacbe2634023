//! Operator calls of the blocking client: inspect, list, the long waits, force-unlock.

use super::LockClient;
use crate::error::Result;
use crate::inspect::{LockInfo, LockListing, WaitGraph};
use crate::keys::LockKind;

impl LockClient {
    /// Who holds the lock `name` now (see [`LockClient::inspect`](crate::LockClient::inspect)).
    ///
    /// # Errors
    /// As [`LockClient::inspect`](crate::LockClient::inspect);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// if let Some(info) = client.inspect("account:42")? {
    ///     println!("{info:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn inspect(&self, name: &str) -> Result<Option<LockInfo>> {
        self.block(self.client().inspect(name))
    }

    /// Who holds the lock of `kind` named `name` now (see
    /// [`LockClient::inspect_kind`](crate::LockClient::inspect_kind)).
    ///
    /// # Errors
    /// As [`LockClient::inspect_kind`](crate::LockClient::inspect_kind);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let queue = client.inspect_kind(holdlock::LockKind::Fair, "queue:7")?;
    /// # Ok(()) }
    /// ```
    pub fn inspect_kind(&self, kind: LockKind, name: &str) -> Result<Option<LockInfo>> {
        self.block(self.client().inspect_kind(kind, name))
    }

    /// The locks whose names match the glob `pattern` (see
    /// [`LockClient::list`](crate::LockClient::list)).
    ///
    /// # Errors
    /// As [`LockClient::list`](crate::LockClient::list);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let accounts = client.list("account:*")?;
    /// # Ok(()) }
    /// ```
    pub fn list(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        self.block(self.client().list(pattern))
    }

    /// The locks of every kind whose names match the glob `pattern`, and the keys
    /// under the prefix that are not readable locks (see
    /// [`LockClient::list_report`](crate::LockClient::list_report)).
    ///
    /// # Errors
    /// As [`LockClient::list_report`](crate::LockClient::list_report);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let listing = client.list_report("*")?;
    /// for bad in &listing.unreadable {
    ///     eprintln!("{} is not a lock: {}", bad.key, bad.error);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list_report(&self, pattern: &str) -> Result<LockListing> {
        self.block(self.client().list_report(pattern))
    }

    /// Whether anyone holds the lock `name` (see
    /// [`LockClient::is_locked`](crate::LockClient::is_locked)).
    ///
    /// # Errors
    /// As [`LockClient::is_locked`](crate::LockClient::is_locked);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let busy = client.is_locked("account:42")?;
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self, name: &str) -> Result<bool> {
        self.block(self.client().is_locked(name))
    }

    /// The waits that have lasted the deadlock check's delay, and the deadlocks among
    /// them, across every client of the prefix (see
    /// [`LockClient::waits`](crate::LockClient::waits)).
    ///
    /// # Errors
    /// As [`LockClient::waits`](crate::LockClient::waits);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let graph = client.waits()?;
    /// for long in &graph.waits {
    ///     println!("{} waited {:?} for {}", long.wait.owner, long.waited, long.wait.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn waits(&self) -> Result<WaitGraph> {
        self.block(self.client().waits())
    }

    /// Deletes the lock `name` whoever holds it, an operator's last resort (see
    /// [`LockClient::force_unlock`](crate::LockClient::force_unlock)).
    ///
    /// # Errors
    /// As [`LockClient::force_unlock`](crate::LockClient::force_unlock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let existed = client.force_unlock("account:42")?;
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self, name: &str) -> Result<bool> {
        self.block(self.client().force_unlock(name))
    }

    /// Breaks the lock `name` of `kind` whoever holds it, and wakes its waiters (see
    /// [`LockClient::force_unlock_kind`](crate::LockClient::force_unlock_kind)).
    ///
    /// # Errors
    /// As [`LockClient::force_unlock_kind`](crate::LockClient::force_unlock_kind);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// // Every permit of the semaphore "exports" is free again.
    /// let was_held = client.force_unlock_kind(holdlock::LockKind::Semaphore, "exports")?;
    /// # Ok(()) }
    /// ```
    pub fn force_unlock_kind(&self, kind: LockKind, name: &str) -> Result<bool> {
        self.block(self.client().force_unlock_kind(kind, name))
    }
}
