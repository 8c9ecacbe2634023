//! A synchronous API, for code without an async runtime (feature `blocking`).
//!
//! [`LockClient`] has the async [`holdlock::LockClient`](crate::LockClient)'s calls with
//! the same names and arguments, minus `async`: each blocks the calling thread until
//! the async call is done. The client runs its connections, watchdogs and background
//! releases on a private tokio runtime with one worker thread (`holdlock-blocking`),
//! started by [`LockClientBuilder::build`] and stopped when the client, its clones and
//! every guard taken from it are gone (the last to go first waits, up to the connect
//! timeout, for releases still in flight, and closes the connections).
//!
//! # Owners and reentrancy
//! The owner of a lock taken here is the calling OS thread (owner id
//! `<client-uuid>:thread-<n>`): one thread taking a lock again re-enters it, and two
//! threads exclude each other. A guard may be moved to, released from and dropped on
//! any thread, and dropped after its client is.
//!
//! # Errors
//! Every call fails with [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime)
//! where a tokio runtime is current, instead of stalling (or, as tokio would, panicking)
//! that runtime: in async code (`#[tokio::main]` included), and also in
//! `spawn_blocking` and `block_in_place` closures and under `Runtime::enter`, which a
//! library cannot tell apart from async code. Use the async client there
//! ([`LockClient::as_async`]; in `spawn_blocking`,
//! `Handle::current().block_on(client.as_async().lock(name))`), or call from a thread
//! of your own. Dropping a guard or a client works everywhere. Otherwise each call
//! fails as its async counterpart does.
//!
//! # Critical sections
//! The `with_*` calls take plain closures, run on the calling thread: the lock is
//! taken, the body runs to its end and the lock is released before its value is
//! returned. A body cannot be stopped midway: if the lock was lost while it ran, its
//! value is dropped and the call fails with [`LockError::Lost`](crate::LockError::Lost).
//! Bodies may call the client again (a nested `with_lock` of the same name re-enters).
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//! use holdlock::blocking::LockClient;
//!
//! fn main() -> holdlock::Result<()> {
//!     let client = LockClient::builder("redis://127.0.0.1:6379")
//!         .lease(Duration::from_secs(10))
//!         .build()?;
//!
//!     // One lock, released explicitly (a dropped guard releases in the background).
//!     let guard = client.lock("account:42")?;
//!     let again = client.lock("account:42")?; // same thread: re-entry
//!     assert_eq!(again.hold_count(), 2);
//!     drop(again);
//!     guard.unlock()?;
//!
//!     // Four threads, one at a time in the critical section.
//!     std::thread::scope(|threads| {
//!         for _ in 0..4 {
//!             threads.spawn(|| client.with_lock("stock:7", |_guard| { /* sell one */ }));
//!         }
//!     });
//!
//!     // Mixing with async code: the same client, its async face.
//!     let async_client: &holdlock::LockClient = client.as_async();
//!     println!("{async_client:?}");
//!     Ok(())
//! }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::inspect::LockInfo;
use crate::keys::LockKind;
use crate::options::LockOptions;

mod builder;
mod guards;
mod runtime;
mod semaphore;

pub use builder::LockClientBuilder;
pub use guards::{Guard, LockGuard, MultiGuard, Permit, ReadGuard, WriteGuard};
pub use semaphore::Semaphore;

use guards::critical_section;
use runtime::Runtime;

/// What a blocking client, its clones, guards and semaphores share: the async client
/// and the runtime it runs on.
pub(crate) struct Shared {
    /// Dropped before the runtime, which it needs to close its connections.
    client: crate::LockClient,
    runtime: Runtime,
}

impl Shared {
    /// `call` (a fallible async call) run to its end on the calling thread, as that
    /// thread's owner (see [`Runtime::block`]).
    pub(crate) fn block<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        self.runtime.block(call)?
    }
}

impl Drop for Shared {
    /// The last client or guard gone: waits (up to the connect timeout) for releases in
    /// flight, then closes the connections and stops the runtime (see
    /// [`Runtime::close`]).
    fn drop(&mut self) {
        self.runtime.close(self.client.clone());
    }
}

/// A handle to Redis for taking reentrant, self-renewing locks from blocking code: the
/// async [`holdlock::LockClient`](crate::LockClient), run on a private runtime, with
/// calls that block the calling thread. The owner of a lock is the calling thread (see
/// [the module](self)). Cheap to clone: clones share the connections and the runtime.
///
/// # Examples
/// ```no_run
/// # fn dox() -> holdlock::Result<()> {
/// let client = holdlock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let guard = client.lock("account:42")?;
/// // ... exclusive across every process using the same Redis ...
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    shared: Arc<Shared>,
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.client().fmt(f)
    }
}

impl LockClient {
    pub(crate) fn over(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    fn client(&self) -> &crate::LockClient {
        &self.shared.client
    }

    fn block<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        self.shared.block(call)
    }

    fn guard<G: crate::Held>(&self, held: G) -> Guard<G> {
        Guard::new(held, &self.shared)
    }

    /// Connects with the default settings (see
    /// [`LockClient::connect`](crate::LockClient::connect)).
    ///
    /// # Errors
    /// As [`LockClientBuilder::build`].
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// # Ok(()) }
    /// ```
    pub fn connect(url: &str) -> Result<Self> {
        Self::builder(url).build()
    }

    /// Starts building a client for `url`; see [`LockClientBuilder`].
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379").prefix("app:").build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: impl Into<String>) -> LockClientBuilder {
        LockClientBuilder::over(crate::LockClient::builder(url))
    }

    /// The async client underneath, for async code in the same program. It shares this
    /// client's connections and holds, but its owners are tasks, not threads; it works
    /// while this client or one of its guards lives (the last of them shuts it down).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.as_async().lock("a").await?;
    /// # Ok(()) }
    /// ```
    pub fn as_async(&self) -> &crate::LockClient {
        self.client()
    }

    /// The owner id of locks the calling thread takes: `<client-uuid>:thread-<n>`.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// assert_eq!(client.lock("a")?.owner(), client.owner_id());
    /// # Ok(()) }
    /// ```
    pub fn owner_id(&self) -> String {
        self.client().owner_id()
    }

    /// Takes the lock, waiting as long as it takes; the same thread taking it again re-enters (the hold count goes up).
    ///
    /// # Errors
    /// As [`LockClient::lock`](crate::LockClient::lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("account:42")?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Result<LockGuard> {
        self.block(self.client().lock(name))
            .map(|held| self.guard(held))
    }

    /// Takes the lock if it is free (or this thread holds it); `None` if it is busy.
    ///
    /// # Errors
    /// As [`LockClient::try_lock`](crate::LockClient::try_lock);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// if let Some(guard) = client.try_lock("job:nightly")? { guard.unlock()?; }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self, name: &str) -> Result<Option<LockGuard>> {
        self.block(self.client().try_lock(name))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the lock, waiting at most `wait`; `None` if it did not come free.
    ///
    /// # Errors
    /// As [`LockClient::lock_timeout`](crate::LockClient::lock_timeout);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock_timeout("a", std::time::Duration::from_millis(500))?;
    /// # Ok(()) }
    /// ```
    pub fn lock_timeout(&self, name: &str, wait: Duration) -> Result<Option<LockGuard>> {
        self.block(self.client().lock_timeout(name, wait))
            .map(|held| held.map(|held| self.guard(held)))
    }

    /// Takes the lock with per-call [`LockOptions`]; `None` if it was not free within the wait.
    ///
    /// # Errors
    /// As [`LockClient::lock_with`](crate::LockClient::lock_with);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock_with("a", holdlock::LockOptions::fenced())?;
    /// # Ok(()) }
    /// ```
    pub fn lock_with(&self, name: &str, options: LockOptions) -> Result<Option<LockGuard>> {
        self.block(self.client().lock_with(name, options))
            .map(|held| held.map(|held| self.guard(held)))
    }

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

    /// Takes the lock (as [`lock`](Self::lock)), runs `body` with the guard on the
    /// calling thread, and releases the lock before returning `body`'s value (see
    /// [Critical sections](self#critical-sections)).
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

    /// Shuts the client down for every clone and guard (see
    /// [`LockClient::shutdown`](crate::LockClient::shutdown)): locks still held are not
    /// released but expire within their lease. Dropping the last client and guard does
    /// this by itself.
    ///
    /// # Errors
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// client.shutdown()?;
    /// # Ok(()) }
    /// ```
    pub fn shutdown(&self) -> Result<()> {
        self.shared.runtime.block(self.client().shutdown())
    }
}
