//! [`LockClientBuilder`]: a client's settings, and connecting it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fred::clients::{Client, SubscriberClient};
use fred::interfaces::ClientLike;
use fred::types::Builder;
use fred::types::config::{Config, ReconnectPolicy};

use crate::chores::Chores;
use crate::client::LockClient;
use crate::compat::Compat;
use crate::connection::{self, Ownership, close_if_opened};
use crate::deadlock::Detector;
use crate::engine::Engine;
use crate::error::{LockError, Result};
use crate::hold::Holds;
use crate::options::{ClientConfig, MinReplicas};
use crate::protocol::Protocol;
use crate::url::redact_url;
use crate::waiting::Waiting;

impl LockClient {
    /// A builder over a fred [`Config`] you already have (servers, credentials, TLS,
    /// its own settings), instead of a URL. The lock client still sets the connection
    /// and command timeouts from [`connect_timeout`](LockClientBuilder::connect_timeout)
    /// and its reconnect policy (see [`reconnect_policy`](LockClientBuilder::reconnect_policy)),
    /// because the exactly-once protocol relies on both.
    ///
    /// A `LockClient` opens two connections from it (commands, and a subscriber for
    /// release messages), and a third only for [`min_replicas`](LockClientBuilder::min_replicas)
    /// (so that `WAIT` never stalls other commands); on a cluster, one of each per
    /// primary it talks to.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// use holdlock::fred::types::config::Config;
    /// let config = Config::from_url("redis://127.0.0.1:6379").expect("a valid URL");
    /// let client = holdlock::LockClient::builder_from_config(config).build().await?;
    /// # Ok(()) }
    /// ```
    pub fn builder_from_config(config: Config) -> LockClientBuilder {
        let mut builder = LockClientBuilder::new(String::new());
        builder.fred = Some(config);
        builder
    }

    /// Connects with the default settings (prefix `holdlock:`, 30 s lease, 5 s
    /// connect timeout). The URL is `redis://`, `redis-cluster://` or
    /// `redis-sentinel://` (or their `valkey` names), or with the `tls-rustls` feature
    /// `rediss://` and the other TLS schemes; any other scheme, and any query parameter
    /// fred would ignore (such as `?db=2`: the database is the path, `/2`), is refused
    /// before anything connects.
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
        LockClientBuilder::new(url.into())
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
    /// A fred configuration to use instead of the URL's.
    fred: Option<Config>,
    /// The reconnect policy; `None`: exponential from 50 ms to 2 s, forever.
    reconnect: Option<ReconnectPolicy>,
    /// The application's own command client, and maybe its subscriber, to use instead
    /// of opening connections (see [`fred_clients`](Self::fred_clients)).
    lent: Option<(Client, Option<SubscriberClient>)>,
    config: ClientConfig,
    /// Whether [`prefix`](Self::prefix) was called (else Redisson's layout has none).
    prefix_given: bool,
    #[cfg(feature = "tls-rustls")]
    tls: Option<crate::tls::TlsSetting>,
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
    /// A builder for `url` with the default settings.
    pub(crate) fn new(url: String) -> Self {
        Self {
            url,
            fred: None,
            reconnect: None,
            lent: None,
            config: ClientConfig::default(),
            prefix_given: false,
            #[cfg(feature = "tls-rustls")]
            tls: None,
        }
    }

    /// The prefix of every key and channel. Must not contain braces.
    /// Default: `holdlock:`, or none in [`Compat::Redisson`] (Redisson puts none
    /// before a lock's name: give the one your Java services' name mapper adds).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379").prefix("shop:").build().await?;
    /// # Ok(()) }
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.prefix = prefix.into();
        self.prefix_given = true;
        self
    }

    /// The layout and protocol of the mutex: holdlock's own (the default), or
    /// [`Compat::Redisson`] to share locks with Java services that use Redisson's
    /// `RLock` on the same Redis (see [`Compat`] and docs/deployments.md, "Sharing
    /// locks with Redisson"). In Redisson's layout the prefix defaults to none.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .compat(holdlock::Compat::Redisson)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn compat(mut self, compat: Compat) -> Self {
        self.config.compat = compat;
        self
    }

    /// How long a hold survives without renewal; the watchdog renews every third of
    /// it, so a crashed holder frees the lock within one lease. Default: 30 s.
    ///
    /// At least [`MIN_LEASE`](crate::MIN_LEASE), 100 ms: with shorter leases the
    /// watchdog lost its locks to ordinary scheduling delays (measured on a loaded
    /// 2-core machine). Redis keeps leases in whole milliseconds: the rest is dropped.
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
    /// On a Redis Cluster, `build` keeps trying while a node is not ready (a primary
    /// restarting or failing over, a slot uncovered for a moment) until this timeout;
    /// a single server that refuses the connection fails it at once.
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

    /// Use the application's own fred clients instead of opening connections: `redis`
    /// for every command and script (take one client of a `fred::clients::Pool` with
    /// `pool.next().clone()`), and `subscriber` for release messages. The URL, the
    /// fred configuration, TLS and the reconnect policy given to this builder are then
    /// not used: the clients keep theirs. Clients not yet connected are connected by
    /// `build`; `shutdown` leaves lent clients open (they are the application's).
    ///
    /// holdlock still opens, beside the lent command client and with its settings:
    /// - a subscriber connection, if `subscriber` is `None` (pub/sub takes a
    ///   connection to itself: subscribed, it can send nothing else);
    /// - a connection for replica acknowledgement, on first use of `min_replicas`
    ///   (`WAIT` blocks its connection until the replicas answer);
    /// - on a Redis Cluster, a client for holdlock's scripts, which follows no
    ///   redirection by itself (docs/deployments.md, "Slots that move").
    ///
    /// Scripts are sent with fred's per-command options (at most once, and with the
    /// connect timeout as their timeout), so the lent client's `max_command_attempts`
    /// cannot send a hold twice.
    ///
    /// On a Redis Cluster, consider `disable_cluster_health_check` in the lent
    /// client's connection settings, as every connection holdlock opens has it: with
    /// fred's check, a restarted node makes every command of the client wait out its
    /// rejoin delay (docs/deployments.md, "Topology changes").
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// use fred::prelude::*;
    /// let config = Config::from_url("redis://127.0.0.1:6379").unwrap();
    /// let pool = Builder::from_config(config).build_pool(4).unwrap();
    /// pool.init().await.unwrap();
    /// let client = holdlock::LockClient::builder("redis://unused")
    ///     .fred_clients(pool.next().clone(), None)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn fred_clients(
        mut self,
        redis: fred::clients::Client,
        subscriber: Option<fred::clients::SubscriberClient>,
    ) -> Self {
        self.lent = Some((redis, subscriber));
        self
    }

    /// Warn that a hold is at risk of being lost when a renewal lands with less than
    /// `share` of its lease left (default one third: a renewal, due every third of the
    /// lease, that came a whole period late), or when a renewal fails. The guards'
    /// `at_risk()` futures resolve and a `tracing` warning names the lock; the margin
    /// of every renewal goes to the `holdlock_renewal_margin_seconds` histogram
    /// (feature `metrics`). `share` must lie strictly between 0 and 1.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .at_risk_share(0.5)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn at_risk_share(mut self, share: f64) -> Self {
        self.config.at_risk_share = share;
        self
    }

    /// Give every hold a `tracing` span of its own, `holdlock.hold` (level `INFO`),
    /// open from the grant to the release that lets it go (or to its loss): the time
    /// a lock is held, per lock, kind and owner, as a span an OpenTelemetry backend
    /// shows beside the request that took it (through `tracing-opentelemetry`; its
    /// fields and their mapping are in docs/design.md, "Observability"). Nested holds
    /// of one owner share their outer hold's span. Off by default: a span per hold
    /// costs the uncontended path a span's creation.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .hold_spans(true)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn hold_spans(mut self, on: bool) -> Self {
        self.config.hold_spans = on;
        self
    }

    /// Stop renewing any hold of this client once it is `max_hold` old (see
    /// [`LockOptions::max_hold`](crate::LockOptions::max_hold), which overrides it per
    /// call). Default: none, renew as long as the lock is held.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .max_hold(Duration::from_secs(3600))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.config.max_hold = Some(max_hold);
        self
    }

    /// Deadlock detection: a wait that lasts longer than `check` records
    /// which lock its owner waits for (a wait-for edge beside the holders each lock
    /// records) and follows the edges from there; a cycle back to it is a deadlock,
    /// and exactly one of its waiters, the one whose wait began last, fails with
    /// [`LockError::Deadlock`](crate::LockError::Deadlock) (see `docs/design.md`,
    /// "Deadlocks"). A shorter wait, and a lock taken at once, send nothing for it.
    /// `None` turns detection off.
    ///
    /// Default: [`DEFAULT_DEADLOCK_CHECK`](crate::DEFAULT_DEADLOCK_CHECK) (1 s,
    /// PostgreSQL's `deadlock_timeout`).
    ///
    /// # Errors
    /// `build` fails with [`LockError::InvalidOption`](crate::LockError::InvalidOption)
    /// for a check shorter than a millisecond or longer than ten years.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// let off = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .deadlock_check(None)
    ///     .build()
    ///     .await?;
    /// let faster = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .deadlock_check(Duration::from_millis(200))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn deadlock_check(mut self, check: impl Into<Option<Duration>>) -> Self {
        self.config.deadlock_check = check.into();
        self
    }

    /// How long a waiter of a fair lock in [`Compat::Redisson`](crate::Compat::Redisson)
    /// keeps its place at the head of Redisson's queue without asking: Redisson's
    /// `fairLockWaitTimeout` (set it to your Java services' value). It also spaces the
    /// waiters' deadlines, so a waiter that died at the head holds the queue up for
    /// this long. A call with a wait (`.timeout(..)`) uses its wait instead, as
    /// Redisson's `tryLock(waitTime, ..)` does. Unused in holdlock's own layout.
    ///
    /// Default: [`DEFAULT_FAIR_WAIT`](crate::DEFAULT_FAIR_WAIT) (5 minutes, Redisson
    /// 4.7's default).
    ///
    /// # Errors
    /// `build` fails with [`LockError::InvalidOption`](crate::LockError::InvalidOption)
    /// for a timeout shorter than a millisecond or longer than ten years.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .compat(holdlock::Compat::Redisson)
    ///     .fair_wait_timeout(Duration::from_secs(10))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_wait_timeout(mut self, timeout: Duration) -> Self {
        self.config.fair_wait = timeout;
        self
    }

    /// How the connections are re-established after they drop. Default: exponential
    /// back-off from 50 ms to 2 s, retrying forever (a lock client must get back to
    /// renew its holds). A policy that gives up leaves the client unable to renew or
    /// release until it is built again.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// use holdlock::fred::types::config::ReconnectPolicy;
    /// let client = holdlock::LockClient::builder("redis://127.0.0.1:6379")
    ///     .reconnect_policy(ReconnectPolicy::new_constant(0, 100))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn reconnect_policy(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = Some(policy);
        self
    }

    /// Draw a fencing token on every fresh exclusive acquisition: locks, fair locks and
    /// write locks (read holds and semaphore permits are shared, so they draw none).
    /// Default: `false`.
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
    /// [`LockOptions::min_replicas`](crate::LockOptions::min_replicas) overrides this. `replicas = 0` turns it off
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

    /// Runs the client's background work (a dropped guard's release) on its own runtime
    /// even where another runtime is current (for the blocking client).
    #[cfg(feature = "blocking")]
    pub(crate) fn background_on_own_runtime(mut self) -> Self {
        self.config.background_on_own_runtime = true;
        self
    }

    /// Validates the settings and connects.
    ///
    /// # Errors
    /// [`LockError::InvalidOption`] for a bad URL (also an unknown scheme, a TLS one
    /// such as `rediss://` without the `tls-rustls` feature, or a query parameter or
    /// fragment fred would ignore), prefix, lease or timeout;
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
    pub async fn build(mut self) -> Result<LockClient> {
        if !self.config.compat.prefixes_by_default() && !self.prefix_given {
            self.config.prefix.clear();
        }
        self.config.validate()?;
        let timeout = self.config.connect_timeout;
        let ((redis, opened), (subscriber, subscriber_opened)) = match self.lent.take() {
            Some((redis, subscriber)) => {
                let subscriber = match subscriber {
                    Some(subscriber) => (subscriber, Ownership::Lent),
                    None => (subscriber_beside(&redis, timeout)?, Ownership::Opened),
                };
                ((redis, Ownership::Lent), subscriber)
            }
            None => {
                let (redis, subscriber) = self.open_clients()?;
                ((redis, Ownership::Opened), (subscriber, Ownership::Opened))
            }
        };
        // On a cluster, scripts go over a client of their own (see `Protocol::scripting`).
        let scripting = match redis.is_clustered() {
            true => Some(scripting_beside(&redis, timeout)?),
            false => None,
        };
        let give_up = tokio::time::Instant::now() + timeout;
        let connecting = async {
            // A lent client may be connected already; holdlock connects what is not.
            if !redis.is_connected() {
                connection::connect(&redis, give_up).await?;
            }
            if !subscriber.is_connected() {
                connection::connect(&subscriber, give_up).await?;
            }
            if let Some(scripting) = &scripting {
                connection::connect(scripting, give_up).await?;
            }
            Ok::<_, fred::error::Error>(())
        };
        match tokio::time::timeout_at(give_up, connecting).await {
            Ok(Ok(())) => {}
            failed => {
                close_if_opened(&redis, opened).await;
                close_if_opened(&subscriber, subscriber_opened).await;
                if let Some(scripting) = &scripting {
                    connection::close(scripting).await;
                }
                return Err(match failed {
                    Ok(Err(error)) => self.connect_error(&redis, error),
                    _ => LockError::ConnectTimeout { timeout },
                });
            }
        }
        // Not `subscriber.manage_subscriptions()`: the waiting rooms subscribe again
        // themselves after a reconnection (see `waiting.rs`).
        // Release messages go over shard channels from Redis 7.0 on (see `waiting.rs`);
        // a server that hides its version (INFO refused by the ACL, as the documented
        // rule does) is asked with a script whether it has SPUBLISH (Redis 6.2 has not).
        // Redisson's layout publishes as Redisson does: on shard channels only on a
        // cluster (its `shardedSubscriptionMode` AUTO), so that its waiters hear us.
        let wants_shards = self.config.compat.shards_single_servers() || redis.is_clustered();
        let sharded = wants_shards
            && match redis.server_version() {
                Some(version) => version.major >= 7,
                None => crate::scripts::has_shard_channels(&redis).await,
            };
        let protocol = Protocol::new((redis, opened), scripting, sharded, timeout);
        let id = uuid::Uuid::new_v4();
        let chores = Arc::<Chores>::default();
        let holds = Arc::<Holds>::default();
        let waiting = Waiting::start(
            (subscriber, subscriber_opened),
            protocol.scripting().clone(),
            sharded,
            id,
            Arc::clone(&chores),
        );
        let deadlocks = Detector::new(
            &self.config,
            protocol.scripting().clone(),
            Arc::clone(&chores),
            Arc::clone(&holds),
        );
        let engine = Engine::start(
            id,
            self.config,
            Arc::new(protocol),
            (waiting, holds, deadlocks),
            chores,
        )
        .await;
        Ok(LockClient::over(engine))
    }

    /// The error of a first connection of `redis` that failed with `error` (see
    /// `LockError::of_connecting`), naming this builder's URL (its passwords hidden),
    /// or the hosts of a fred configuration.
    fn connect_error(&self, redis: &Client, error: fred::error::Error) -> LockError {
        let address = match self.url.is_empty() {
            true => connection::hosts(redis),
            false => redact_url(&self.url),
        };
        LockError::of_connecting(error, address)
    }

    /// The command and subscriber clients of the URL (or fred configuration), not yet
    /// connected.
    fn open_clients(&mut self) -> Result<(Client, SubscriberClient)> {
        #[allow(unused_mut)]
        let mut fred_config = match self.fred.take() {
            Some(config) => {
                crate::url::check_cluster_config(&config)?;
                config
            }
            None => {
                crate::url::check_url(&self.url, cfg!(feature = "tls-rustls"))?;
                Config::from_url(&self.url).map_err(|error| LockError::InvalidOption {
                    option: "url",
                    reason: error.details().to_string(),
                })?
            }
        };
        #[cfg(feature = "tls-rustls")]
        crate::tls::apply(self.tls.as_ref(), &mut fred_config)?;
        let timeout = self.config.connect_timeout;
        let mut builder = Builder::from_config(fred_config);
        builder
            .with_connection_config(|connection| connection::own_settings(connection, timeout))
            .with_performance_config(|performance| performance.default_command_timeout = timeout)
            .set_policy(
                self.reconnect
                    .take()
                    .unwrap_or_else(|| ReconnectPolicy::new_exponential(0, 50, 2_000, 2)),
            );
        let redis = builder.build()?;
        let subscriber = builder.build_subscriber_client()?;
        Ok((redis, subscriber))
    }
}

/// A subscriber client beside the application's command client `redis` (see
/// [`builder_beside`]). Not yet connected.
fn subscriber_beside(redis: &Client, timeout: Duration) -> Result<SubscriberClient> {
    Ok(builder_beside(redis, timeout).build_subscriber_client()?)
}

/// The client holdlock's scripts go over on a cluster, beside the command client
/// `redis` (see [`builder_beside`]): it follows no redirection (see
/// `connection::scripting_settings`). Not yet connected.
fn scripting_beside(redis: &Client, timeout: Duration) -> Result<Client> {
    let mut builder = builder_beside(redis, timeout);
    builder.with_connection_config(connection::scripting_settings);
    Ok(builder.build()?)
}

/// A client of the same server, settings and reconnect policy as `redis`, with
/// holdlock's timeouts.
fn builder_beside(redis: &Client, timeout: Duration) -> Builder {
    let mut builder = Builder::from_config(redis.client_config());
    builder
        .set_performance_config(redis.perf_config())
        .set_connection_config(redis.connection_config().clone())
        .with_connection_config(|connection| connection::own_settings(connection, timeout));
    if let Some(policy) = redis.client_reconnect_policy() {
        builder.set_policy(policy);
    }
    builder
}

/// TLS settings (feature `tls-rustls`).
#[cfg(feature = "tls-rustls")]
impl LockClientBuilder {
    /// Connect with TLS, trusting only the CA certificates in `pem` (one or more
    /// `-----BEGIN CERTIFICATE-----` blocks) instead of the system's roots. Turns TLS
    /// on even for a `redis://` URL. The server's certificate must name the host
    /// of the URL (for `127.0.0.1`, an IP address entry).
    ///
    /// Requires the `tls-rustls` feature.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let ca = std::fs::read("/etc/redis/ca.crt").unwrap();
    /// let client = holdlock::LockClient::builder("rediss://redis.internal:6380")
    ///     .tls_ca_pem(ca)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls = Some(crate::tls::TlsSetting::CaPem(pem.into()));
        self
    }

    /// Connect with TLS through `connector` (for client certificates or other rustls
    /// settings), instead of the system's roots. Turns TLS on even for a `redis://` URL.
    ///
    /// Requires the `tls-rustls` feature.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(rustls_config: rustls::ClientConfig) -> holdlock::Result<()> {
    /// use holdlock::fred::types::config::TlsConnector;
    /// let client = holdlock::LockClient::builder("rediss://redis.internal:6380")
    ///     .tls_connector(TlsConnector::from(rustls_config))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_connector(mut self, connector: fred::types::config::TlsConnector) -> Self {
        self.tls = Some(crate::tls::TlsSetting::Connector(connector));
        self
    }
}
