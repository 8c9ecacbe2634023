//! [`LockClientBuilder`]: the async builder's settings, connected from blocking code.

use std::sync::Arc;
use std::time::Duration;

use fred::types::config::{Config, ReconnectPolicy};

use super::runtime::Runtime;
use super::{LockClient, Shared};
use crate::error::Result;

/// Builds a blocking [`LockClient`] with settings other than the defaults: every
/// setting is the async [`holdlock::LockClientBuilder`](crate::LockClientBuilder)'s.
///
/// # Examples
/// ```no_run
/// # fn dox() -> holdlock::Result<()> {
/// use std::time::Duration;
/// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
///     .prefix("shop:")
///     .lease(Duration::from_secs(10))
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LockClientBuilder(crate::LockClientBuilder);

impl LockClientBuilder {
    pub(crate) fn over(builder: crate::LockClientBuilder) -> Self {
        Self(builder)
    }

    /// See [`LockClientBuilder::prefix`](crate::LockClientBuilder::prefix).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379").prefix("shop:").build()?;
    /// # Ok(()) }
    /// ```
    pub fn prefix(self, prefix: impl Into<String>) -> Self {
        Self(self.0.prefix(prefix))
    }

    /// See [`LockClientBuilder::compat`](crate::LockClientBuilder::compat).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .compat(holdlock::Compat::Redisson)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn compat(self, compat: crate::Compat) -> Self {
        Self(self.0.compat(compat))
    }

    /// See [`LockClientBuilder::deadlock_check`](crate::LockClientBuilder::deadlock_check):
    /// how long a wait lasts before it looks for a deadlock; `None` turns detection off.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .deadlock_check(std::time::Duration::from_millis(200))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn deadlock_check(self, check: impl Into<Option<Duration>>) -> Self {
        Self(self.0.deadlock_check(check))
    }

    /// See [`LockClientBuilder::fair_wait_timeout`](crate::LockClientBuilder::fair_wait_timeout):
    /// Redisson's `fairLockWaitTimeout`, for fair locks in
    /// [`Compat::Redisson`](crate::Compat::Redisson).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .compat(holdlock::Compat::Redisson)
    ///     .fair_wait_timeout(std::time::Duration::from_secs(10))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn fair_wait_timeout(self, timeout: Duration) -> Self {
        Self(self.0.fair_wait_timeout(timeout))
    }

    /// See [`LockClientBuilder::lease`](crate::LockClientBuilder::lease).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .lease(std::time::Duration::from_secs(10))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn lease(self, lease: Duration) -> Self {
        Self(self.0.lease(lease))
    }

    /// See [`LockClientBuilder::connect_timeout`](crate::LockClientBuilder::connect_timeout).
    /// It also bounds how long the last client or guard to go waits for releases still
    /// in flight.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .connect_timeout(std::time::Duration::from_secs(1))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        Self(self.0.connect_timeout(timeout))
    }

    /// See [`LockClientBuilder::fred_clients`](crate::LockClientBuilder::fred_clients).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(redis: holdlock::fred::clients::Client) -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://unused")
    ///     .fred_clients(redis, None)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn fred_clients(
        self,
        redis: fred::clients::Client,
        subscriber: Option<fred::clients::SubscriberClient>,
    ) -> Self {
        Self(self.0.fred_clients(redis, subscriber))
    }

    /// See [`LockClientBuilder::at_risk_share`](crate::LockClientBuilder::at_risk_share).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379").at_risk_share(0.5).build()?;
    /// # Ok(()) }
    /// ```
    pub fn at_risk_share(self, share: f64) -> Self {
        Self(self.0.at_risk_share(share))
    }

    /// See [`LockClientBuilder::hold_spans`](crate::LockClientBuilder::hold_spans).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379").hold_spans(true).build()?;
    /// # Ok(()) }
    /// ```
    pub fn hold_spans(self, on: bool) -> Self {
        Self(self.0.hold_spans(on))
    }

    /// See [`LockClientBuilder::max_hold`](crate::LockClientBuilder::max_hold).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .max_hold(std::time::Duration::from_secs(3600))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn max_hold(self, max_hold: Duration) -> Self {
        Self(self.0.max_hold(max_hold))
    }

    /// See [`LockClientBuilder::reconnect_policy`](crate::LockClientBuilder::reconnect_policy).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// use holdlock::fred::types::config::ReconnectPolicy;
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379")
    ///     .reconnect_policy(ReconnectPolicy::new_constant(0, 100))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn reconnect_policy(self, policy: ReconnectPolicy) -> Self {
        Self(self.0.reconnect_policy(policy))
    }

    /// See [`LockClientBuilder::fencing`](crate::LockClientBuilder::fencing).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379").fencing(true).build()?;
    /// assert!(client.lock("stock:7").block()?.fencing_token().is_some());
    /// # Ok(()) }
    /// ```
    pub fn fencing(self, fencing: bool) -> Self {
        Self(self.0.fencing(fencing))
    }

    /// See [`LockClientBuilder::min_replicas`](crate::LockClientBuilder::min_replicas).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis-sentinel://127.0.0.1:26379?sentinelServiceName=locks")
    ///     .min_replicas(1, std::time::Duration::from_millis(100))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn min_replicas(self, replicas: u32, timeout: Duration) -> Self {
        Self(self.0.min_replicas(replicas, timeout))
    }

    /// See [`LockClientBuilder::tls_ca_pem`](crate::LockClientBuilder::tls_ca_pem).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let ca = std::fs::read("/etc/redis/ca.crt").unwrap();
    /// let client = holdlock::blocking::LockClient::builder("rediss://redis.internal:6380").tls_ca_pem(ca).build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls-rustls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls-rustls")))]
    pub fn tls_ca_pem(self, pem: impl Into<Vec<u8>>) -> Self {
        Self(self.0.tls_ca_pem(pem))
    }

    /// See [`LockClientBuilder::tls_connector`](crate::LockClientBuilder::tls_connector).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(connector: holdlock::fred::types::config::TlsConnector) -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("rediss://redis.internal:6380")
    ///     .tls_connector(connector)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls-rustls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls-rustls")))]
    pub fn tls_connector(self, connector: fred::types::config::TlsConnector) -> Self {
        Self(self.0.tls_connector(connector))
    }

    /// Starts the client's runtime thread, and validates the settings and connects on
    /// it.
    ///
    /// # Errors
    /// As [`LockClientBuilder::build`](crate::LockClientBuilder::build);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// let client = holdlock::blocking::LockClient::builder("redis://127.0.0.1:6379").build()?;
    /// # Ok(()) }
    /// ```
    pub fn build(self) -> Result<LockClient> {
        let runtime = Runtime::start()?;
        // Built on the runtime, the async client keeps its handle: guards dropped on
        // any thread release there.
        let client = runtime.block(self.0.background_on_own_runtime().build())??;
        Ok(LockClient::over(Arc::new(Shared { client, runtime })))
    }
}

impl LockClient {
    /// A builder over a fred [`Config`] (see
    /// [`LockClient::builder_from_config`](crate::LockClient::builder_from_config)).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox() -> holdlock::Result<()> {
    /// use holdlock::fred::types::config::Config;
    /// let config = Config::from_url("redis://127.0.0.1:6379").expect("a valid URL");
    /// let client = holdlock::blocking::LockClient::builder_from_config(config).build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder_from_config(config: Config) -> LockClientBuilder {
        LockClientBuilder(crate::LockClient::builder_from_config(config))
    }
}
