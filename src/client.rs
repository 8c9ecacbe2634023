//! [`LockClient`]: taking locks (and waiting for them), looking at them, shutting down.

use std::fmt;
use std::sync::Arc;

use fred::clients::Client;

use crate::engine::{Engine, Lock};
#[cfg(doc)]
use crate::error::LockError;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::options::ResolvedOptions;
use crate::scripts::Kind;
use crate::waiting::GiveUp;

/// A handle to Redis for taking reentrant, self-renewing locks.
///
/// One client holds two connections (commands, and a subscriber for release
/// messages) and is cheap to clone: clones share them. Build one per process and
/// pass clones around.
///
/// Locks are reentrant per *owner*: the current tokio task, or an
/// [`owner_scope`](crate::owner_scope), or (outside any task) the thread. The same
/// owner locking the same name again succeeds at once and raises the hold count.
///
/// # When not to use this
/// - To protect memory inside one process, use `tokio::sync::Mutex`: it is a
///   thousand times faster and cannot expire.
/// - A lease lock cannot stop a holder that pauses past its lease from acting on
///   stale beliefs; where that matters, check a fencing token at the resource
///   (see `docs/guarantees.md`).
///
/// # Examples
/// ```no_run
/// # async fn dox() -> holdlock::Result<()> {
/// let client = holdlock::LockClient::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("account:42").await?;
/// // ... move money ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    engine: Arc<Engine>,
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("id", &self.engine.id())
            .field("prefix", &self.engine.config().prefix)
            .field("lease", &self.engine.config().lease)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// The owner id that locks taken here and now would have:
    /// `<client-uuid>:<task>`, where the task part names the current tokio task,
    /// [`owner_scope`](crate::owner_scope) or thread.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) {
    /// let guard = client.lock("a").await.unwrap();
    /// assert_eq!(guard.owner(), client.owner_id());
    /// # }
    /// ```
    pub fn owner_id(&self) -> String {
        self.engine.owner_id()
    }

    /// The layout and protocol this client's mutex speaks (see
    /// [`LockClientBuilder::compat`](crate::LockClientBuilder::compat)).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) {
    /// assert_eq!(client.compat(), holdlock::Compat::Holdlock);
    /// # }
    /// ```
    pub fn compat(&self) -> crate::Compat {
        self.engine.config().compat
    }

    /// Takes the mutex `name` (the descriptor `kind`, the client's layout's) for the
    /// current owner, waiting until `give_up` (the mutex's step of the front door,
    /// `acquire.rs`).
    pub(crate) async fn take_mutex<D: GiveUp>(
        &self,
        name: &str,
        kind: Kind,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<LockGuard, D::GaveUp>> {
        let taken = self.engine.take(Lock::Named(name, kind), options, give_up);
        Ok(taken.await?.map(LockGuard::new))
    }

    /// Stops every watchdog and closes the connections. Releases nothing that is still
    /// held: such locks expire within their lease, and their guards report themselves
    /// lost. Calls waiting for a lock return [`LockError::Shutdown`](crate::LockError::Shutdown) at once, and every
    /// later call fails with it.
    ///
    /// What this client still owes Redis is given up to the connect timeout to finish
    /// first, so that a clean shutdown leaves nothing of its own behind: releases
    /// started by dropped guards, the settling of calls cancelled in flight (a grant
    /// that reached a cancelled wait is released), and every ended wait's leaving of
    /// its queues (a fair lock's queue entry, handing on a hand-off it did not claim;
    /// a mutex's queue of waiting clients; a waiting writer's mark). A connection
    /// already lost (Redis unreachable) is closed without waiting for Redis.
    ///
    /// A guard is held until it is dropped. A task stopped with
    /// [`JoinHandle::abort`](tokio::task::JoinHandle::abort) drops its guards only when
    /// the runtime next gets to it, so one aborted just before `shutdown` may still
    /// hold its guards when the shutdown begins: await the aborted task's handle first
    /// when its holds should be released.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) {
    /// client.shutdown().await;
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        self.engine.shut_down().await;
    }

    /// The underlying fred client, for commands of your own on the same connection.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use fred::interfaces::KeysInterface;
    /// let stock: Option<i64> = client.redis().get("stock:7").await?;
    /// # Ok(()) }
    /// ```
    pub fn redis(&self) -> &Client {
        self.engine.protocol().redis()
    }

    /// The client a guard was taken from.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("a").await?;
    /// let same = holdlock::LockClient::of(&guard);
    /// # Ok(()) }
    /// ```
    pub fn of(guard: &LockGuard) -> LockClient {
        LockClient {
            engine: Arc::clone(guard.engine()),
        }
    }

    /// The client over `engine` (for the builder).
    pub(crate) fn over(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    /// The engine, for the other parts of the API (cron claims, fencing).
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
}
