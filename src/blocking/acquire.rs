//! The blocking front door: [`Acquire`], the async [`holdlock::Acquire`](crate::Acquire)
//! with terminal calls that block instead of a future.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::guards::{Guard, critical_section};
use super::{LockClient, Semaphore, Shared};
use crate::acquire::{
    Acquirable, All, Bounded, Fair, Forever, Mode, Mutex, Read, SemaphorePermit, Write,
};
use crate::error::Result;
use crate::options::LockOptions;

/// A request to take a lock of kind `K` from blocking code, made by `client.lock(name)`
/// and the other kinds' calls: nothing is sent until a terminal call,
/// [`block`](Self::block) or [`run`](Self::run). The modes are the async
/// [`Acquire`](crate::Acquire)'s.
///
/// | call | output |
/// |---|---|
/// | `client.lock(name).block()` | `Result<LockGuard>`: waits as long as it takes |
/// | `client.lock(name).timeout(wait).block()` | `Result<Option<LockGuard>>`: `None` if not free within `wait` |
/// | `client.lock(name).try_now().block()` | `Result<Option<LockGuard>>`: one try, no waiting |
/// | `client.lock(name).options(options).block()` | `Result<Option<LockGuard>>`: per-call [`LockOptions`] |
/// | `client.lock(name).run(body)` | `Result<T>`: `body`'s value, run under the lock |
/// | `client.lock(name).timeout(wait).run(body)` | `Result<Option<T>>`: `None` (and `body` not run) if not free within `wait` |
///
/// # Errors
/// As the async [`Acquire`](crate::Acquire);
/// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
/// tokio runtime.
///
/// # Examples
/// ```no_run
/// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
/// use std::time::Duration;
/// let guard = client.lock("account:42").block()?;
/// guard.unlock()?;
/// if let Some(guard) = client.read_lock("balance:7").timeout(Duration::from_secs(1)).block()? {
///     guard.unlock()?;
/// }
/// let balance = client.lock("account:42").run(|_guard| 100)?;
/// # Ok(()) }
/// ```
#[must_use = "a blocking Acquire does nothing until `block` or `run`"]
pub struct Acquire<K: Acquirable, M: Mode = Forever> {
    shared: Arc<Shared>,
    request: crate::Acquire<K, M>,
}

impl<K: Acquirable + fmt::Debug, M: Mode> fmt::Debug for Acquire<K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.request.fmt(f)
    }
}

impl<K: Acquirable, M: Mode> Acquire<K, M> {
    /// The same request, changed by `change`.
    fn map<N: Mode>(
        self,
        change: impl FnOnce(crate::Acquire<K, M>) -> crate::Acquire<K, N>,
    ) -> Acquire<K, N> {
        Acquire {
            shared: self.shared,
            request: change(self.request),
        }
    }

    /// Waits at most `wait` (see [`Acquire::timeout`](crate::Acquire::timeout)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").timeout(std::time::Duration::from_millis(500)).block()?;
    /// # Ok(()) }
    /// ```
    pub fn timeout(self, wait: Duration) -> Acquire<K, Bounded> {
        self.map(|request| request.timeout(wait))
    }

    /// Tries once, without waiting (see [`Acquire::try_now`](crate::Acquire::try_now)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// if let Some(guard) = client.lock("job:nightly").try_now().block()? { guard.unlock()?; }
    /// # Ok(()) }
    /// ```
    pub fn try_now(self) -> Acquire<K, Bounded> {
        self.map(crate::Acquire::try_now)
    }

    /// Per-call [`LockOptions`] (see [`Acquire::options`](crate::Acquire::options)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").options(holdlock::LockOptions::fenced()).block()?;
    /// # Ok(()) }
    /// ```
    pub fn options(self, options: LockOptions) -> Acquire<K, Bounded> {
        self.map(|request| request.options(options))
    }
}

impl<K: Acquirable> Acquire<K> {
    /// Takes the lock, blocking the calling thread as long as it takes.
    ///
    /// # Errors
    /// As [`Acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("account:42").block()?;
    /// # Ok(()) }
    /// ```
    pub fn block(self) -> Result<Guard<K::Guard>> {
        let held = self.shared.block(self.request)?;
        Ok(Guard::new(held, &self.shared))
    }

    /// Takes the lock, runs `body` with the guard on the calling thread, and releases
    /// the lock before returning `body`'s value (see
    /// [Critical sections](crate::blocking#critical-sections)).
    ///
    /// # Errors
    /// As [`block`](Self::block); [`LockError::Lost`](crate::LockError::Lost) if the
    /// lock was lost while `body` ran; an error of the release.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let balance = client.lock("account:42").run(|_guard| 100)?;
    /// # Ok(()) }
    /// ```
    pub fn run<T>(self, body: impl FnOnce(&Guard<K::Guard>) -> T) -> Result<T> {
        critical_section(self.block()?, body)
    }
}

impl<K: Acquirable> Acquire<K, Bounded> {
    /// Takes the lock within the wait, blocking the calling thread; `None` if it
    /// could not be had in time.
    ///
    /// # Errors
    /// As [`Acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("account:42").try_now().block()?;
    /// # Ok(()) }
    /// ```
    pub fn block(self) -> Result<Option<Guard<K::Guard>>> {
        let held = self.shared.block(self.request)?;
        Ok(held.map(|held| Guard::new(held, &self.shared)))
    }

    /// [`run`](Acquire::run) within the wait: `None` if the lock could not be had in
    /// time, and then `body` is not run.
    ///
    /// # Errors
    /// As [`Acquire::run`].
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let ran = client.lock("report").try_now().run(|_| "ran")?;
    /// # Ok(()) }
    /// ```
    pub fn run<T>(self, body: impl FnOnce(&Guard<K::Guard>) -> T) -> Result<Option<T>> {
        self.block()?
            .map(|guard| critical_section(guard, body))
            .transpose()
    }
}

impl LockClient {
    /// Takes the lock `name` (see [`holdlock::LockClient::lock`](crate::LockClient::lock));
    /// the same thread taking it again re-enters (the hold count goes up).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("account:42").block()?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: impl AsRef<str>) -> Acquire<Mutex> {
        self.acquire(|client| client.lock(name))
    }

    /// Takes the fair lock `name`, first come, first served across clients (see
    /// [`holdlock::LockClient::fair_lock`](crate::LockClient::fair_lock)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.fair_lock("queue:7").block()?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: impl AsRef<str>) -> Acquire<Fair> {
        self.acquire(|client| client.fair_lock(name))
    }

    /// Takes the read side of the read-write lock `name`, shared with other readers
    /// (see [`holdlock::LockClient::read_lock`](crate::LockClient::read_lock)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.read_lock("balance:7").block()?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self, name: impl AsRef<str>) -> Acquire<Read> {
        self.acquire(|client| client.read_lock(name))
    }

    /// Takes the write side of the read-write lock `name` (see
    /// [`holdlock::LockClient::write_lock`](crate::LockClient::write_lock)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.write_lock("balance:7").block()?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self, name: impl AsRef<str>) -> Acquire<Write> {
        self.acquire(|client| client.write_lock(name))
    }

    /// Takes every lock in `names`, all or nothing, without deadlock (see
    /// [`holdlock::LockClient::lock_all`](crate::LockClient::lock_all)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all(["account:1", "account:2"]).block()?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I>(&self, names: I) -> Acquire<All>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.acquire(|client| client.lock_all(names))
    }

    /// The blocking request of the async one `request` makes.
    fn acquire<K: Acquirable>(
        &self,
        request: impl FnOnce(&crate::LockClient) -> crate::Acquire<K>,
    ) -> Acquire<K> {
        Acquire {
            shared: Arc::clone(&self.shared),
            request: request(&self.shared.client),
        }
    }
}

impl Semaphore {
    /// Takes a permit (see [`holdlock::Semaphore::acquire`](crate::Semaphore::acquire)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("partner-api", 3).acquire().block()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Acquire<SemaphorePermit> {
        Acquire {
            shared: Arc::clone(self.shared()),
            request: self.as_async().acquire(),
        }
    }
}
