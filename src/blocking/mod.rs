//! A synchronous API, for code without an async runtime (feature `blocking`).
//!
//! [`LockClient`] has the async [`holdlock::LockClient`](crate::LockClient)'s calls with
//! the same names and arguments, minus `async`. Taking a lock returns a request,
//! [`Acquire`], with the async [`Acquire`](crate::Acquire)'s modes (`timeout`,
//! `try_now`, `options`) and a terminal call instead of `.await`: [`block`](Acquire::block)
//! (`client.lock(name).block()?`, where async code writes `client.lock(name).await?`)
//! or [`run`](Acquire::run) for a critical section. Each blocks the calling thread
//! until the async call is done. Three are left out: [`election`](crate::LockClient::election)
//! (a campaign and its leadership are async through and through) and
//! [`redis`](crate::LockClient::redis) (fred's commands are async), which
//! [`LockClient::as_async`] reaches, and [`of`](crate::LockClient::of) (a blocking
//! guard's client is the one that took it). The client runs its connections, watchdogs and background
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
//! [`Acquire::run`] takes a plain closure, run on the calling thread: the lock is
//! taken, the body runs to its end and the lock is released before its value is
//! returned. A body cannot be stopped midway: if the lock was lost while it ran, its
//! value is dropped and the call fails with [`LockError::Lost`](crate::LockError::Lost).
//! Bodies may call the client again (a nested `run` of the same lock re-enters).
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
//!     let guard = client.lock("account:42").block()?;
//!     let again = client.lock("account:42").block()?; // same thread: re-entry
//!     assert_eq!(again.hold_count(), 2);
//!     drop(again);
//!     guard.unlock()?;
//!
//!     // Four threads, one at a time in the critical section.
//!     std::thread::scope(|threads| {
//!         for _ in 0..4 {
//!             threads.spawn(|| client.lock("stock:7").run(|_guard| { /* sell one */ }));
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

use crate::error::Result;

mod acquire;
mod builder;
mod guards;
mod inspect;
mod once;
mod runtime;
mod semaphore;

pub use acquire::Acquire;
pub use builder::LockClientBuilder;
pub use guards::{Guard, LockGuard, MultiGuard, Permit, ReadGuard, WriteGuard};
pub use once::{Claim, PeriodClaim};
pub use semaphore::Semaphore;

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
/// let guard = client.lock("account:42").block()?;
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

    /// What the client shares with its clones, guards and semaphores.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
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
    /// assert_eq!(client.lock("a").block()?.owner(), client.owner_id());
    /// # Ok(()) }
    /// ```
    pub fn owner_id(&self) -> String {
        self.client().owner_id()
    }

    /// The layout and protocol this client's mutex speaks (see
    /// [`LockClientBuilder::compat`]).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) {
    /// assert_eq!(client.compat(), holdlock::Compat::Holdlock);
    /// # }
    /// ```
    pub fn compat(&self) -> crate::Compat {
        self.client().compat()
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
