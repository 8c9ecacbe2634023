//! [`LockClient`]: connections, acquiring and releasing, and looking at locks.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fred::clients::Client;
use fred::error::ErrorKind;
use fred::interfaces::{ClientLike, HashesInterface, KeysInterface};
use fred::types::config::{Config, ReconnectPolicy};
use fred::types::scan::ScanType;
use fred::types::{Builder, Value};
use futures::StreamExt;
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;
use uuid::Uuid;

use crate::config::{
    ClientConfig, LockNames, LockOptions, MinReplicas, ResolvedOptions, redact_url,
};
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::hold::{Hold, HoldUse, Holds, LocalHolder};
use crate::owner::local_owner;
use crate::replicas::Acknowledging;
use crate::scripts::{Acquire, AcquireCall, Scripts, TOKEN_FIELD};
use crate::waiting::Waiting;
use crate::watchdog;

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
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    id: Uuid,
    /// `<client-uuid>:`, the start of every owner id of this client.
    owner_prefix: String,
    pub(crate) config: ClientConfig,
    pub(crate) redis: Client,
    pub(crate) scripts: Scripts,
    /// The connection for replica-acknowledged acquisitions (see `replicas.rs`).
    pub(crate) acknowledging: Acknowledging,
    waiting: Arc<Waiting>,
    holds: Arc<Holds>,
    /// Watchdogs booked and not yet started; see `watchdog.rs`.
    pub(crate) watchdogs: watchdog::Bookings,
    /// Bounds the renewals in flight at once; see `watchdog.rs`.
    pub(crate) renewal_slots: watchdog::RenewalSlots,
    /// The task that starts booked watchdogs.
    starter: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    runtime: tokio::runtime::Handle,
    shut_down: AtomicBool,
    /// Releases started by dropped guards and not yet finished; `shutdown` waits for them.
    background: AtomicUsize,
    background_done: Notify,
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("id", &self.inner.id)
            .field("prefix", &self.inner.config.prefix)
            .field("lease", &self.inner.config.lease)
            .finish_non_exhaustive()
    }
}

/// Builds a [`LockClient`] with settings other than the defaults.
///
/// # Examples
/// ```no_run
/// # async fn dox() -> holdlock::Result<()> {
/// use std::time::Duration;
///
/// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
///     .prefix("shop:")
///     .lease(Duration::from_secs(10))
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is awaited"]
pub struct LockClientBuilder {
    url: String,
    config: ClientConfig,
    #[cfg(feature = "tls-rustls")]
    pub(crate) tls: Option<crate::tls::TlsSetting>,
}

/// Shows the URL with its passwords replaced by `***`.
impl fmt::Debug for LockClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClientBuilder")
            .field("url", &redact_url(&self.url))
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LockClientBuilder {
    /// The prefix of every key and channel. Must not contain braces.
    /// Default: `holdlock:`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379").prefix("shop:").build().await?;
    /// # Ok(()) }
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.prefix = prefix.into();
        self
    }

    /// How long a hold survives without renewal; the watchdog renews every third of
    /// it, so a crashed holder frees the lock within one lease. At least 3 ms.
    /// Default: 30 s.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .lease(std::time::Duration::from_secs(10))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// How long [`build`](Self::build) may take to connect, and how long an
    /// unanswered acquire or release is retried. Default: 5 s.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .connect_timeout(std::time::Duration::from_secs(1))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Draw a fencing token on every fresh acquisition. Default: `false`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379").fencing(true).build().await?;
    /// let token = client.lock("stock:7").await?.fencing_token();
    /// assert!(token.is_some());
    /// # Ok(()) }
    /// ```
    pub fn fencing(mut self, fencing: bool) -> Self {
        self.config.fencing = fencing;
        self
    }

    /// Require `replicas` replicas to acknowledge every fresh acquisition within
    /// `timeout` (Redis `WAIT`, on a connection of its own). A fresh hold that too few
    /// replicas acknowledged is released again and the call fails with
    /// [`LockError::NotReplicated`]. Re-entries are not checked; per call,
    /// [`LockOptions::min_replicas`] overrides this. `replicas = 0` turns it off
    /// (the default).
    ///
    /// This narrows, but does not close, the window in which a failover loses a hold:
    /// see `docs/deployments.md`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis-sentinel://127.0.0.1:26379?sentinelServiceName=locks")
    ///     .min_replicas(1, std::time::Duration::from_millis(100))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn min_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.config.min_replicas = MinReplicas::new(replicas, timeout);
        self
    }

    /// Validates the settings and connects.
    ///
    /// # Errors
    /// [`LockError::InvalidOption`] for a bad URL (also an unknown scheme, or a TLS one
    /// such as `rediss://` without the `tls-rustls` feature), prefix, lease or timeout;
    /// [`LockError::ConnectTimeout`] or [`LockError::Redis`] if Redis cannot be reached
    /// within the connect timeout (a refused password or TLS certificate is a
    /// [`LockError::Redis`] that says so); [`LockError::PermissionDenied`] if the
    /// user may not subscribe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379").build().await?;
    /// # Ok(()) }
    /// ```
    pub async fn build(self) -> Result<LockClient> {
        crate::config::check_url(&self.url, cfg!(feature = "tls-rustls"))?;
        self.config.validate()?;
        #[allow(unused_mut)]
        let mut fred_config =
            Config::from_url(&self.url).map_err(|error| LockError::InvalidOption {
                option: "url",
                reason: error.details().to_string(),
            })?;
        #[cfg(feature = "tls-rustls")]
        crate::tls::apply(self.tls.as_ref(), &mut fred_config)?;
        let timeout = self.config.connect_timeout;
        let mut builder = Builder::from_config(fred_config);
        builder
            .with_connection_config(|connection| {
                connection.connection_timeout = timeout;
                connection.internal_command_timeout = timeout;
            })
            .with_performance_config(|performance| performance.default_command_timeout = timeout)
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
        let redis = builder.build()?;
        let subscriber = builder.build_subscriber_client()?;
        let connecting = async {
            redis.init().await?;
            subscriber.init().await?;
            Ok::<_, fred::error::Error>(())
        };
        match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok(())) => {}
            failed => {
                let _ = redis.quit().await;
                let _ = subscriber.quit().await;
                return Err(match failed {
                    Ok(Err(error)) => LockError::from(error),
                    _ => LockError::ConnectTimeout { timeout },
                });
            }
        }
        let _resubscriber = subscriber.manage_subscriptions();
        // Release messages go over shard channels from Redis 7.0 on (see `waiting.rs`);
        // a server that hides its version (INFO refused by the ACL) is taken to be 7+.
        let sharded = redis
            .server_version()
            .is_none_or(|version| version.major >= 7);
        let lease = self.config.lease;
        let id = Uuid::new_v4();
        let inner = Arc::new(Inner {
            id,
            owner_prefix: format!("{id}:"),
            config: self.config,
            redis,
            scripts: Scripts::new(sharded),
            acknowledging: Acknowledging::default(),
            waiting: Waiting::start(subscriber, sharded),
            holds: Arc::default(),
            watchdogs: watchdog::Bookings::default(),
            renewal_slots: watchdog::RenewalSlots::default(),
            starter: parking_lot::Mutex::new(None),
            runtime: tokio::runtime::Handle::current(),
            shut_down: AtomicBool::new(false),
            background: AtomicUsize::new(0),
            background_done: Notify::new(),
        });
        *inner.starter.lock() = Some(watchdog::spawn_starter(Arc::downgrade(&inner), lease));
        Ok(LockClient { inner })
    }
}

/// What one acquire attempt came to.
enum Attempt {
    Granted(LockGuard),
    Busy(Option<Duration>),
}

impl Attempt {
    /// The guard, if the lock was granted.
    fn granted(self) -> Option<LockGuard> {
        match self {
            Self::Granted(guard) => Some(guard),
            Self::Busy(_) => None,
        }
    }
}

impl LockClient {
    /// Connects with the default settings (prefix `holdlock:`, 30 s lease, 5 s
    /// connect timeout). Any fred URL works: `redis://`, `rediss://` (with a TLS
    /// feature of fred), `redis-cluster://`, `redis-sentinel://`, `redis+unix://`.
    ///
    /// # Errors
    /// As [`LockClientBuilder::build`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).build().await
    }

    /// Starts building a client for `url`; see [`LockClientBuilder`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379").prefix("app:").build().await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: impl Into<String>) -> LockClientBuilder {
        LockClientBuilder {
            url: url.into(),
            config: ClientConfig::default(),
            #[cfg(feature = "tls-rustls")]
            tls: None,
        }
    }

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
        use std::fmt::Write;
        // Built on every lock call: the client's part is formatted once, at connect.
        let prefix = &self.inner.owner_prefix;
        let mut id = String::with_capacity(prefix.len() + 24);
        id.push_str(prefix);
        let _ = write!(id, "{}", local_owner());
        id
    }

    /// Takes the lock, waiting as long as it takes. Re-entry by the same owner returns
    /// at once with the hold count raised.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`] if the key holds something
    /// else, [`LockError::Redis`] on connection failure, [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point leaves no hold behind. If the
    /// acquire script had already been sent, its reply is awaited in the background
    /// and a granted hold is released at once. A cancelled waiter gives up its place
    /// in the queue.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("account:42").await?;
    /// let nested = client.lock("account:42").await?; // same task: re-entry
    /// assert_eq!(nested.hold_count(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self, name: &str) -> Result<LockGuard> {
        let guard = self
            .lock_with(name, LockOptions::new().wait_forever())
            .await?;
        guard.ok_or_else(|| LockError::Protocol("an unbounded wait ended without the lock".into()))
    }

    /// Takes the lock if it is free (or already held by this owner), without waiting.
    ///
    /// One round trip; none at all when another owner in this process holds the lock
    /// (a burst of tries in one process costs Redis only the tries that can win).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// match client.try_lock("job:nightly").await? {
    ///     Some(guard) => { /* run the job */ guard.unlock().await? }
    ///     None => println!("another instance is running it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>> {
        self.lock_with(name, LockOptions::new().wait(Duration::ZERO))
            .await
    }

    /// Takes the lock, waiting at most `wait`; `None` if it did not come free.
    ///
    /// # Errors
    /// As [`lock`](Self::lock), and [`LockError::InvalidOption`] for a wait longer than
    /// ten years.
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// if let Some(guard) = client.lock_timeout("account:42", Duration::from_millis(500)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, name: &str, wait: Duration) -> Result<Option<LockGuard>> {
        self.lock_with(name, LockOptions::new().wait(wait)).await
    }

    /// Takes the lock with per-call [`LockOptions`]: how long to wait, a fixed lease
    /// instead of the watchdog, a fencing token.
    ///
    /// # Errors
    /// As [`lock_timeout`](Self::lock_timeout), and [`LockError::InvalidOption`] for a
    /// zero or overlong lease.
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// use holdlock::LockOptions;
    /// let options = LockOptions::new().wait(Duration::from_secs(1)).lease(Duration::from_secs(5));
    /// let guard = client.lock_with("x", options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_with(&self, name: &str, options: LockOptions) -> Result<Option<LockGuard>> {
        self.inner.check_running()?;
        let options = options.resolve(&self.inner.config)?;
        let deadline =
            match options.wait {
                None => None,
                Some(wait) => Some(Instant::now().checked_add(wait).ok_or_else(|| {
                    LockError::InvalidOption {
                        option: "wait",
                        reason: format!("{wait:?} overflows the clock"),
                    }
                })?),
            };
        let owner = self.owner_id();

        // Re-entry goes straight to Redis, with the names its hold keeps (the name was
        // checked when the lock was taken).
        let holder = match self.inner.holds.local_holder(name, &owner) {
            LocalHolder::Owner(entry) => {
                let names = Arc::clone(&entry.hold.names);
                let attempt = self.inner.acquire(&names, &owner, options, Some(entry));
                return Ok(attempt.await?.granted());
            }
            other => other,
        };
        let names = Arc::new(self.inner.config.names(name)?);

        // A single try never waits in line, and is refused at once if another owner in
        // this process holds the lock.
        if options.wait == Some(Duration::ZERO) {
            return Ok(match holder {
                LocalHolder::Other => None,
                _ => self
                    .inner
                    .acquire(&names, &owner, options, None)
                    .await?
                    .granted(),
            });
        }

        // Queue behind the local callers already here (FIFO): only the head talks to
        // Redis, so many callers arriving at once send one attempt, not one each. With
        // nobody ahead, the turn is ours at once.
        let ticket = self.inner.waiting.join(&names.key);
        let _turn = match ticket.try_turn() {
            Some(turn) => turn,
            None => match until(deadline, ticket.turn()).await {
                Some(turn) => turn,
                None => return Ok(None),
            },
        };
        loop {
            let pttl = match self.inner.acquire(&names, &owner, options, None).await? {
                Attempt::Granted(guard) => return Ok(Some(guard)),
                Attempt::Busy(pttl) => pttl,
            };
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Ok(None);
            }
            // Subscribe before sleeping; a release between our attempt and the
            // subscription would be missed, so a fresh subscription tries again first.
            match until(deadline, ticket.subscribe()).await {
                Some(Ok(true)) => continue,
                Some(Ok(false)) => {}
                Some(Err(error)) => return Err(error),
                None => return Ok(None),
            }
            let holder_expires =
                Instant::now() + pttl.unwrap_or(options.lease).max(Duration::from_millis(1));
            let wake = deadline.map_or(holder_expires, |deadline| deadline.min(holder_expires));
            tokio::select! {
                () = ticket.released() => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Looks at a lock: its owners and their hold counts, its remaining TTL and its
    /// fencing token (if it was taken with one). `None` if nobody holds it.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`], [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// if let Some(info) = client.inspect("job:nightly").await? {
    ///     println!("{} held by {:?}, {:?} left", info.name, info.owners, info.ttl);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self, name: &str) -> Result<Option<LockInfo>> {
        self.inner.check_running()?;
        let names = self.inner.config.names(name)?;
        let snapshot = self
            .inner
            .scripts
            .inspect(&self.inner.redis, &names.key)
            .await?;
        Ok(snapshot.map(|snapshot| LockInfo {
            name: names.name,
            owners: snapshot
                .owners
                .into_iter()
                .map(|(id, hold_count)| LockOwner { id, hold_count })
                .collect(),
            ttl: snapshot.ttl,
            fencing_token: snapshot.token,
        }))
    }

    /// Every held lock whose name matches the glob `pattern` (`*` for all), found with
    /// `SCAN` (on every primary of a cluster), never `KEYS`.
    ///
    /// # Errors
    /// [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// for info in client.list("account:*").await? {
    ///     println!("{}: {:?}", info.name, info.owners);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        self.inner.check_running()?;
        let scan_pattern = self.inner.config.scan_pattern(pattern);
        let redis = &self.inner.redis;
        let mut keys = if redis.is_clustered() {
            redis
                .scan_cluster_buffered(scan_pattern, Some(200), Some(ScanType::Hash))
                .boxed()
        } else {
            redis
                .scan_buffered(scan_pattern, Some(200), Some(ScanType::Hash))
                .boxed()
        };
        let mut names = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key?;
            if let Some(name) = key
                .as_str()
                .and_then(|key| self.inner.config.name_of_key(key))
            {
                names.push(name.to_owned());
            }
        }
        names.sort();
        names.dedup();
        let mut locks = Vec::with_capacity(names.len());
        for name in names {
            // A lock released since the scan is simply left out.
            if let Some(info) = self.inspect(&name).await? {
                locks.push(info);
            }
        }
        Ok(locks)
    }

    /// Deletes the lock whoever holds it, and wakes its waiters. The former holder's
    /// guard reports itself lost at its next renewal. Returns whether there was a lock.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`], [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let was_locked = client.force_unlock("job:stuck").await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        self.inner.check_running()?;
        let names = self.inner.config.names(name)?;
        self.inner
            .scripts
            .force_unlock(&self.inner.redis, &names.key)
            .await
    }

    /// Whether anyone holds the lock right now.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let busy = client.is_locked("job:nightly").await?;
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self, name: &str) -> Result<bool> {
        self.inner.check_running()?;
        let names = self.inner.config.names(name)?;
        let exists: i64 = self.inner.redis.exists(names.key.as_str()).await?;
        Ok(exists == 1)
    }

    /// Stops every watchdog and closes the connections. Releases nothing that is still
    /// held: such locks expire within their lease, and their guards report themselves
    /// lost. Releases already started by dropped guards are given up to the connect
    /// timeout to finish first. Every later call fails with [`LockError::Shutdown`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) {
    /// client.shutdown().await;
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        let flushed = async {
            while self.inner.background.load(Ordering::Acquire) > 0 {
                let idle = self.inner.background_done.notified();
                if self.inner.background.load(Ordering::Acquire) == 0 {
                    break;
                }
                idle.await;
            }
        };
        let _ = tokio::time::timeout(self.inner.config.connect_timeout, flushed).await;
        if self.inner.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.holds.drain("the client was shut down");
        if let Some(starter) = self.inner.starter.lock().take() {
            starter.abort();
        }
        self.inner.waiting.quit().await;
        self.inner.acknowledging.quit().await;
        let _ = self.inner.redis.quit().await;
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
        &self.inner.redis
    }
}

/// Awaits `future` until `deadline`; `None` if the deadline came first.
async fn until<F: Future>(deadline: Option<Instant>, future: F) -> Option<F::Output> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, future).await.ok(),
        None => Some(future.await),
    }
}

/// Whether a script failed in transit (not sent, or its reply lost), so that it may
/// or may not have run. Errors that Redis itself replied with are final.
fn outcome_unknown(error: &LockError) -> bool {
    let LockError::Redis(error) = error else {
        return false;
    };
    let details = error.details();
    matches!(
        error.kind(),
        ErrorKind::IO
            | ErrorKind::Canceled
            | ErrorKind::Timeout
            | ErrorKind::Routing
            | ErrorKind::Backpressure
    ) || details.contains("attempts")
        || details.contains("route")
        || details.contains("onnection")
}

impl Inner {
    pub(crate) fn check_running(&self) -> Result<()> {
        if self.shut_down.load(Ordering::Acquire) {
            Err(LockError::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Releases `hold` in a background task (for a dropped guard).
    pub(crate) fn release_in_background(self: &Arc<Self>, hold: Arc<Hold>) {
        let inner = Arc::clone(self);
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        self.background.fetch_add(1, Ordering::AcqRel);
        drop(runtime.spawn(async move {
            match inner.release(&hold).await {
                Ok(()) | Err(LockError::Shutdown) => {}
                Err(error) => {
                    tracing::debug!(lock = %hold.names.name, %error, "background release failed")
                }
            }
            if inner.background.fetch_sub(1, Ordering::AcqRel) == 1 {
                inner.background_done.notify_waiters();
            }
        }));
    }

    /// One acquire attempt: runs `acquire.lua` (or, for a re-entry, whose hold
    /// `entered` is already in use, `reenter.lua`) exactly once for `owner` and records
    /// a granted hold (starting its watchdog) before the guard exists. Not cut short by
    /// the caller's deadline (the command timeout bounds it), so a zero wait still gets
    /// one answer.
    ///
    /// Cancel safe without a task per call: while the script is in flight, an
    /// [`InFlight`] holds the owner's operation lock; if this future is
    /// dropped, it settles the outcome in the background (releasing a hold that was
    /// granted after all) before any other call of this owner on this lock can run.
    async fn acquire(
        self: &Arc<Self>,
        names: &Arc<LockNames>,
        owner: &str,
        options: ResolvedOptions,
        mut entered: Option<HoldUse>,
    ) -> Result<Attempt> {
        loop {
            let entry = match entered.take() {
                Some(entry) => entry,
                None => self.holds.enter(names, owner),
            };
            let hold = Arc::clone(&entry.hold);
            let count = hold.lock_ops().await;
            if hold.is_lost() {
                // Lost while we queued behind another call: enter the fresh hold instead.
                continue;
            }
            let held = *count;
            // A watchdog that already renews the hold keeps its lease: a re-entry leaves
            // it alone (one that wants a watchdog need not set it again, and a fixed
            // lease must not cut short the lease the watchdog counts on).
            let keep_lease = held > 0 && hold.has_watchdog();
            let mut in_flight = InFlight::new(self, Op::Acquire, entry, count);
            let sent_at = Instant::now();
            let reply = self
                .acquire_exactly_once(names, owner, options, held, keep_lease)
                .await;
            let (entry, mut count) = in_flight.land()?;
            let (granted, token) = match reply? {
                Acquire::Busy { pttl } => return Ok(Attempt::Busy(pttl)),
                Acquire::Granted { count, token } => (count, token),
                Acquire::Vanished => {
                    // Expired or force-unlocked: old guards must not touch what comes
                    // next, so the next round enters a fresh hold and takes it afresh.
                    hold.set_count(&mut count, 0);
                    drop(count);
                    hold.mark_lost("the hold vanished from redis (expired or force-unlocked)");
                    continue;
                }
            };
            let entry = if granted == held + 1 {
                hold.set_count(&mut count, granted);
                entry
            } else {
                // Redis disagrees with our count: the hold we knew vanished (expired or
                // force-unlocked) and this is a new one. Old guards must not touch it.
                hold.set_count(&mut count, 0);
                self.holds.replace(&hold, granted)
            };
            drop(count);
            self.record_grant(&entry, options, token, sent_at);
            return Ok(Attempt::Granted(LockGuard::new(
                self,
                Arc::clone(&entry.hold),
            )));
        }
    }

    /// Sets the token, the expiry and the watchdog of a freshly granted hold.
    fn record_grant(
        self: &Arc<Self>,
        entry: &HoldUse,
        options: ResolvedOptions,
        token: u64,
        sent_at: Instant,
    ) {
        let hold = &entry.hold;
        hold.set_token(token);
        if options.watchdog {
            hold.set_expiry(sent_at, None);
            self.watchdogs.book(hold, options.lease, sent_at);
        } else if !hold.has_watchdog() {
            hold.set_expiry(sent_at, Some(options.lease));
        }
    }

    /// `acquire.lua`, written at most once per try. When a reply is lost, the owner's
    /// field tells whether the script ran: `held` + 1 means it did.
    async fn acquire_exactly_once(
        &self,
        names: &LockNames,
        owner: &str,
        options: ResolvedOptions,
        held: u32,
        keep_lease: bool,
    ) -> Result<Acquire> {
        let give_up = Instant::now() + self.config.connect_timeout;
        // Replicas acknowledge fresh acquisitions only (see `replicas.rs`).
        let acknowledged = options.min_replicas.filter(|_| held == 0);
        loop {
            let reply = match acknowledged {
                Some(min) => self.acquire_acknowledged(names, owner, options, min).await,
                None if held > 0 => {
                    let lease_ms = (!keep_lease).then_some(options.lease_ms);
                    let reenter = self
                        .scripts
                        .reenter(&self.redis, &names.key, owner, lease_ms);
                    reenter.await
                }
                None => {
                    let call = AcquireCall::of(names, owner, &options);
                    self.scripts.acquire(&self.redis, &call).await
                }
            };
            let error = match reply {
                Err(error) if outcome_unknown(&error) => error,
                done => return done,
            };
            tracing::debug!(lock = %names.name, %error, "acquire reply lost; checking whether it ran");
            match self.field(names, owner).await {
                Ok(count) if count == held + 1 => {
                    if let Some(min) = acknowledged {
                        // It ran, but nobody counted the replicas that have it.
                        return Err(self.undo_unacknowledged(names, owner, 0, min).await);
                    }
                    if held == 0 {
                        // A fresh hold's field may also be one this owner gave up as
                        // lost, its lease about to run out, if the script did not run:
                        // set the lease from now, so that Redis keeps the hold at least
                        // as long as the watchdog will assume.
                        let lease_ms = options.lease_ms;
                        let renewal = self.scripts.renew(&self.redis, &names.key, owner, lease_ms);
                        if !Box::pin(renewal).await? {
                            continue; // gone meanwhile: not ours after all
                        }
                    }
                    let token = if options.fenced && count == 1 {
                        Box::pin(
                            self.redis
                                .hget::<Option<u64>, _, _>(names.key.as_str(), TOKEN_FIELD),
                        )
                        .await?
                        .unwrap_or(0)
                    } else {
                        0
                    };
                    return Ok(Acquire::Granted { count, token });
                }
                Ok(_) | Err(_) if Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => return Err(error),
            }
        }
    }

    /// `release.lua`, written at most once per try. When a reply is lost, the owner's
    /// field tells whether the script ran: `held` - 1 means it did.
    pub(crate) async fn release_exactly_once(
        &self,
        names: &LockNames,
        owner: &str,
        held: u32,
    ) -> Result<Option<u32>> {
        let give_up = Instant::now() + self.config.connect_timeout;
        loop {
            let error = match self
                .scripts
                .release(&self.redis, &names.key, owner, held)
                .await
            {
                Err(error) if outcome_unknown(&error) => error,
                done => return done,
            };
            tracing::debug!(lock = %names.name, %error, "release reply lost; checking whether it ran");
            match self.field(names, owner).await {
                Ok(count) if count + 1 == held => return Ok(Some(count)),
                Ok(count) if count != held => return Ok(None),
                Ok(_) | Err(_) if Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => return Err(error),
            }
        }
    }

    /// [`release_exactly_once`](Self::release_exactly_once) for one of `hold`'s holds.
    async fn release_hold(&self, hold: &Hold, held: u32) -> Result<Option<u32>> {
        self.release_exactly_once(&hold.names, &hold.owner, held)
            .await
    }

    /// The owner's hold count as Redis has it (0 if none).
    async fn field(&self, names: &LockNames, owner: &str) -> Result<u32> {
        let value: Value = Box::pin(self.redis.hget(names.key.as_str(), owner))
            .await
            .map_err(|error| LockError::from_redis(error, &names.key))?;
        match value {
            Value::Null => Ok(0),
            other => other
                .as_u64()
                .and_then(|count| u32::try_from(count).ok())
                .ok_or_else(|| LockError::Protocol(format!("hold count {other:?}"))),
        }
    }

    /// Releases one hold of `hold`. Stops the watchdog before the last release is sent.
    ///
    /// Cancel safe like [`acquire`](Self::acquire): a release abandoned in flight is
    /// settled (and completed) in the background.
    pub(crate) async fn release(self: &Arc<Self>, hold: &Arc<Hold>) -> Result<()> {
        self.check_running()?;
        let not_held = || LockError::NotHeld {
            name: hold.names.name.clone(),
            owner: hold.owner.clone(),
        };
        let entry = self.holds.reenter(hold);
        let count = hold.lock_ops().await;
        if hold.is_lost() || *count == 0 {
            return Err(not_held());
        }
        let held = *count;
        if held == 1 {
            // The watchdog is stopped once the answer is in (below, or by `settle`), so
            // that the release is written without waiting on the task's cancellation.
            hold.begin_last_release();
        }
        let mut in_flight = InFlight::new(self, Op::Release, entry, count);
        let reply = self.release_hold(hold, held).await;
        let (_entry, mut count) = in_flight.land()?;
        if held == 1 {
            hold.stop_watchdog();
        }
        match reply {
            Ok(Some(remaining)) => {
                hold.set_count(&mut count, remaining);
                Ok(())
            }
            Ok(None) => {
                hold.set_count(&mut count, 0);
                drop(count);
                hold.mark_lost("released a hold that redis no longer had");
                Err(not_held())
            }
            Err(error) => {
                // Unknown outcome: forget the hold locally; Redis expires it within a lease.
                hold.set_count(&mut count, held - 1);
                Err(error)
            }
        }
    }

    /// Settles a script whose caller went away mid-flight, with the owner's operation
    /// lock still held: Redis's count for the owner tells whether it ran. An abandoned
    /// acquire that ran is undone; an abandoned release that did not run is completed.
    async fn settle(self: Arc<Self>, op: Op, entry: HoldUse, mut count: OwnedMutexGuard<u32>) {
        let hold = &entry.hold;
        let held = *count;
        let give_up = Instant::now() + self.config.connect_timeout;
        let now = loop {
            match self.field(&hold.names, &hold.owner).await {
                Ok(now) => break now,
                Err(_) if Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(error) => {
                    tracing::debug!(lock = %hold.names.name, %error, "could not settle a cancelled call");
                    return;
                }
            }
        };
        let undo = match op {
            Op::Acquire if now == held + 1 => Some(now),
            Op::Acquire if now == held => None,
            Op::Release if now + 1 == held => {
                hold.set_count(&mut count, now);
                None
            }
            Op::Release if now == held => Some(held),
            _ => {
                hold.set_count(&mut count, 0);
                hold.mark_lost("redis disagrees with the local hold count");
                None
            }
        };
        if let Some(in_redis) = undo {
            match self.release_hold(hold, in_redis).await {
                Ok(Some(remaining)) if op == Op::Release => hold.set_count(&mut count, remaining),
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(lock = %hold.names.name, %error, "could not settle a cancelled call")
                }
            }
        }
        if hold.count() == 0 {
            hold.stop_watchdog();
        }
    }
}

/// Which script an [`InFlight`] call sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Acquire,
    Release,
}

/// A script in flight with the owner's operation lock held. If the call's future is
/// dropped before [`land`](Self::land), the outcome is settled in the background.
struct InFlight {
    inner: Arc<Inner>,
    op: Op,
    state: Option<(HoldUse, OwnedMutexGuard<u32>)>,
}

impl InFlight {
    fn new(inner: &Arc<Inner>, op: Op, entry: HoldUse, count: OwnedMutexGuard<u32>) -> Self {
        Self {
            inner: Arc::clone(inner),
            op,
            state: Some((entry, count)),
        }
    }

    /// The call completed: hand the state back to it.
    fn land(&mut self) -> Result<(HoldUse, OwnedMutexGuard<u32>)> {
        self.state
            .take()
            .ok_or_else(|| LockError::Protocol("an in-flight call landed twice".into()))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some((entry, count)) = self.state.take() else {
            return;
        };
        let inner = Arc::clone(&self.inner);
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        drop(runtime.spawn(inner.settle(self.op, entry, count)));
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.shut_down.load(Ordering::Acquire) {
            return;
        }
        self.holds.drain("the client was dropped");
        if let Some(starter) = self.starter.lock().take() {
            starter.abort();
        }
        let redis = self.redis.clone();
        let waiting = Arc::clone(&self.waiting);
        let acknowledging = std::mem::take(&mut self.acknowledging);
        // Closing politely needs the runtime; if it is gone, so are the connections.
        drop(self.runtime.spawn(async move {
            waiting.quit().await;
            acknowledging.quit().await;
            let _ = redis.quit().await;
        }));
    }
}

/// A snapshot of one lock, from [`LockClient::inspect`] or [`LockClient::list`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let info = client.inspect("job:nightly").await?.expect("held");
/// assert_eq!(info.owners.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock name (without prefix).
    pub name: String,
    /// Who holds it, and how many times.
    pub owners: Vec<LockOwner>,
    /// The remaining lease; `None` if the key has no expiry (not set by this crate).
    pub ttl: Option<Duration>,
    /// The fencing token of the current hold, if it was taken with fencing.
    pub fencing_token: Option<u64>,
}

/// One owner of a lock, in a [`LockInfo`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// for owner in client.inspect("a").await?.map(|i| i.owners).unwrap_or_default() {
///     println!("{} x{}", owner.id, owner.hold_count);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOwner {
    /// The owner id, `<client-uuid>:<task>`.
    pub id: String,
    /// How many nested holds it has.
    pub hold_count: u32,
}
