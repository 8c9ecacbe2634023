//! Options for a client and for a single lock, and the checks they get.

use std::sync::Arc;
use std::time::Duration;

use crate::compat::Compat;
use crate::error::{LockError, Result};
use crate::keys;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "holdlock:";
/// The default lease: how long a hold survives its holder without renewal.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default limit on connecting to Redis.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The shortest lease accepted, for a client ([`LockClientBuilder::lease`]) and for one
/// lock ([`LockOptions::lease`]).
///
/// The watchdog renews every third of the lease, gives each renewal until the next is
/// due, and takes the hold as lost a tenth of the lease before Redis could expire it,
/// on timers that count whole milliseconds: one renewal must get through within about
/// half the lease. On the shared 2-core machine this crate is tested on (Redis on
/// loopback, other builds running, the process at times stalled for 30 to 100 ms), the
/// watchdog lost every one of 16 locks with a 10 or 20 ms lease within 10 s (with
/// 10 ms, about a millisecond after the grant), and most with 30 or 50 ms; with 100 ms
/// it lost none in most runs. Below this a guard would be lost almost at once; near it,
/// a loaded machine can still lose a lock, so prefer leases of seconds.
///
/// [`LockClientBuilder::lease`]: crate::LockClientBuilder::lease
///
/// # Examples
/// ```
/// let options = holdlock::LockOptions::new().lease(holdlock::MIN_LEASE);
/// ```
pub const MIN_LEASE: Duration = Duration::from_millis(100);

/// The longest [`LockOptions::data`] kept with a hold, in bytes.
///
/// # Examples
/// ```
/// assert_eq!(holdlock::MAX_DATA_LEN, 1024);
/// ```
pub const MAX_DATA_LEN: usize = 1024;

/// The longest duration accepted anywhere (a lease, a wait, a timeout, a period):
/// ten years. Redis takes milliseconds as a signed 64-bit integer, and ten years is far
/// beyond any sensible lease or wait.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// let wait = Duration::from_secs(4000 * 86_400);
/// assert!(wait > holdlock::MAX_DURATION); // `.options(..)` would refuse this wait
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Settings shared by every lock of one [`LockClient`](crate::LockClient). The names
/// of its locks (`names`, `kind_names`, `kinds_at_the_name`) are built from the kind
/// descriptors, in `scripts/kinds/names.rs`: this layer cannot import them.
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    pub(crate) prefix: String,
    /// The mutex's layout and protocol: holdlock's or Redisson's.
    pub(crate) compat: Compat,
    /// Whole milliseconds once [`validate`](Self::validate) has run, as Redis keeps it.
    pub(crate) lease: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) fencing: bool,
    pub(crate) min_replicas: Option<MinReplicas>,
    /// How long the watchdog renews a hold at most; `None`: as long as it is held.
    pub(crate) max_hold: Option<Duration>,
    /// A renewal that lands with less than this share of the lease left warns that the
    /// hold is at risk (see `LockGuard::at_risk`).
    pub(crate) at_risk_share: f64,
    /// Whether each hold gets a `holdlock.hold` span, from its grant to its release
    /// or loss (see `LockClientBuilder::hold_spans`).
    pub(crate) hold_spans: bool,
    /// How long a wait lasts before it is made visible as a wait-for edge and checked
    /// for a deadlock (see `deadlock.rs`); `None`: never.
    pub(crate) deadlock_check: Option<Duration>,
    /// How long a waiter of a fair lock in Redisson's layout keeps its place at the
    /// head of the queue without asking (Redisson's `fairLockWaitTimeout`).
    pub(crate) fair_wait: Duration,
    /// Background work always runs on the client's own runtime, never on the one
    /// current where a guard is dropped: a blocking client's runtime is the only one
    /// sure to run (see `blocking::runtime`).
    #[cfg(feature = "blocking")]
    pub(crate) background_on_own_runtime: bool,
}

/// The default of
/// [`LockClientBuilder::deadlock_check`](crate::LockClientBuilder::deadlock_check): one
/// second, PostgreSQL's `deadlock_timeout`.
pub const DEFAULT_DEADLOCK_CHECK: Duration = Duration::from_secs(1);

/// The default of
/// [`LockClientBuilder::fair_wait_timeout`](crate::LockClientBuilder::fair_wait_timeout):
/// five minutes, Redisson 4.7's `fairLockWaitTimeout`.
pub const DEFAULT_FAIR_WAIT: Duration = Duration::from_secs(5 * 60);

/// The default share of the lease left below which a renewal warns that its hold is at
/// risk: a third, so a renewal (due every third of the lease) that came a whole period
/// late warns.
pub(crate) const DEFAULT_AT_RISK_SHARE: f64 = 1.0 / 3.0;

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_owned(),
            compat: Compat::Holdlock,
            lease: DEFAULT_LEASE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            fencing: false,
            min_replicas: None,
            max_hold: None,
            at_risk_share: DEFAULT_AT_RISK_SHARE,
            hold_spans: false,
            deadlock_check: Some(DEFAULT_DEADLOCK_CHECK),
            fair_wait: DEFAULT_FAIR_WAIT,
            #[cfg(feature = "blocking")]
            background_on_own_runtime: false,
        }
    }
}

impl ClientConfig {
    /// Checks the settings, and rounds the lease down to whole milliseconds (see
    /// [`whole_millis`]), so that the watchdog's deadlines count the lease Redis keeps.
    pub(crate) fn validate(&mut self) -> Result<()> {
        if self.prefix.contains(['{', '}']) {
            return Err(LockError::InvalidOption {
                option: "prefix",
                reason: format!(
                    "{:?} contains a brace; braces are reserved for the hash tag around the name",
                    self.prefix
                ),
            });
        }
        self.lease = whole_millis(lease_millis("lease", self.lease)?);
        positive("connect_timeout", self.connect_timeout)?;
        if let Some(max_hold) = self.max_hold {
            positive("max_hold", max_hold)?;
        }
        let fair_wait_ms = u64::try_from(self.fair_wait.as_millis()).unwrap_or(u64::MAX);
        if fair_wait_ms == 0 || self.fair_wait > MAX_DURATION {
            return Err(LockError::InvalidOption {
                option: "fair_wait_timeout",
                reason: format!("{:?} is not between 1 ms and ten years", self.fair_wait),
            });
        }
        self.fair_wait = whole_millis(fair_wait_ms);
        if let Some(min) = self.min_replicas {
            min.validate()?;
        }
        if let Some(check) = self.deadlock_check {
            if check.as_millis() == 0 || check > MAX_DURATION {
                return Err(LockError::InvalidOption {
                    option: "deadlock_check",
                    reason: format!(
                        "{check:?} is not between 1 ms and ten years (`None` turns detection off)"
                    ),
                });
            }
        }
        if !(self.at_risk_share > 0.0 && self.at_risk_share < 1.0) {
            return Err(LockError::InvalidOption {
                option: "at_risk_share",
                reason: format!(
                    "{} is not a share of the lease between 0 and 1",
                    self.at_risk_share
                ),
            });
        }
        Ok(())
    }

    /// Checks that `name` can name a mutex of this client (see [`names`](Self::names)).
    pub(crate) fn check_name(&self, name: &str) -> Result<()> {
        self.names(name).map(drop)
    }

    /// The lock name inside a lock key built by [`names`](Self::names), if `key` is one.
    pub(crate) fn name_of_key<'k>(&self, key: &'k str) -> Option<&'k str> {
        keys::name_of_key(&self.prefix, key)
    }

    /// A SCAN pattern matching the lock keys whose names match the glob `pattern`.
    pub(crate) fn scan_pattern(&self, pattern: &str) -> String {
        keys::scan_pattern(&self.prefix, pattern)
    }
}

fn positive(option: &'static str, value: Duration) -> Result<Duration> {
    if value.is_zero() {
        return Err(LockError::InvalidOption {
            option,
            reason: "must be greater than zero".to_owned(),
        });
    }
    if value > MAX_DURATION {
        return Err(LockError::InvalidOption {
            option,
            reason: format!("{value:?} is longer than the maximum of ten years"),
        });
    }
    Ok(value)
}

/// A lease in whole milliseconds, as Redis takes it: the rest is dropped, so that a
/// deadline computed here from [`whole_millis`] of it is never later than Redis's.
pub(crate) fn lease_millis(option: &'static str, lease: Duration) -> Result<u64> {
    if lease < MIN_LEASE {
        return Err(LockError::InvalidOption {
            option,
            reason: format!(
                "{lease:?} is shorter than the minimum of {MIN_LEASE:?} \
                 (holdlock::MIN_LEASE): a watchdog cannot keep a shorter lease through \
                 ordinary scheduling delays, and a guard with one is lost almost at once"
            ),
        });
    }
    // MAX_DURATION keeps this far below u64::MAX.
    Ok(positive(option, lease)?.as_millis() as u64)
}

/// A lease of `millis` whole milliseconds, the one `Duration` for the lease Redis keeps.
pub(crate) fn whole_millis(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// How long to wait for a lock, and how long to hold it, for one call of
/// [`Acquire::options`](crate::Acquire::options) (`client.lock(name).options(..)`).
///
/// The defaults wait forever and hold with the client's lease, renewed by the watchdog.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use std::time::Duration;
/// use holdlock::LockOptions;
///
/// let options = LockOptions::new()
///     .wait(Duration::from_secs(1))   // give up after a second
///     .lease(Duration::from_secs(5)); // no watchdog: the hold expires after 5 s
/// if let Some(guard) = client.lock("report").options(options).await? {
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct LockOptions {
    pub(crate) wait: Option<Duration>,
    pub(crate) lease: Option<Duration>,
    pub(crate) fenced: bool,
    /// `None`: the client's setting; `Some(None)`: off for this call.
    pub(crate) min_replicas: Option<Option<MinReplicas>>,
    /// `None`: the client's setting.
    pub(crate) max_hold: Option<Duration>,
    /// Kept with the hold in Redis and shown by the operator tools.
    pub(crate) data: Option<Arc<str>>,
}

impl LockOptions {
    /// Wait forever, hold with the client's lease and watchdog, no fencing token
    /// unless the client draws one for every lock.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Give up (and return `None`) when the lock is not free within `wait`.
    /// `Duration::ZERO` tries once and never waits.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().wait(std::time::Duration::from_millis(250));
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Wait as long as it takes (the default).
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().wait_forever();
    /// ```
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// Hold for a fixed `lease` with no watchdog: the hold simply expires unless it is
    /// released first. Its guard reports itself lost a tenth of the lease before Redis
    /// can expire it.
    ///
    /// At least [`MIN_LEASE`] (100 ms; shorter, the guard would be lost almost at once).
    /// Redis keeps leases in whole milliseconds: the rest is dropped, here too.
    ///
    /// Nested holds share one lease. A fixed lease nested inside a hold that a watchdog
    /// renews leaves that lease alone: the watchdog keeps the lock until the last hold
    /// is released.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().lease(std::time::Duration::from_secs(10));
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Draw a fencing token on a fresh acquisition (see [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)):
    /// for a lock, a fair lock or a write lock. A read lock or a semaphore permit,
    /// shared with other holders, refuses it with [`LockError::InvalidOption`].
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::fenced();
    /// ```
    pub fn fenced() -> Self {
        Self::new().with_fencing()
    }

    /// Like [`fenced`](Self::fenced), on an existing set of options.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().wait(std::time::Duration::ZERO).with_fencing();
    /// ```
    pub fn with_fencing(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// Require `replicas` replicas to acknowledge a fresh acquisition within `timeout`
    /// (Redis `WAIT`), overriding the client's
    /// [`min_replicas`](crate::LockClientBuilder::min_replicas); `replicas = 0` turns the
    /// check off for this call. A fresh acquisition that too few replicas acknowledge is
    /// released again and fails with [`LockError::NotReplicated`]. Re-entries are not
    /// checked: the first hold was.
    ///
    /// See `docs/deployments.md` for what this does and does not guarantee.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// let options = holdlock::LockOptions::new().min_replicas(1, Duration::from_millis(100));
    /// ```
    pub fn min_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.min_replicas = Some(MinReplicas::new(replicas, timeout));
        self
    }

    /// Keep `data` with the hold in Redis, for operators: `inspect`, `list`, `top`
    /// and their JSON (field `data`) show it beside the holder, for every kind. A short
    /// UTF-8 text, at most [`MAX_DATA_LEN`] bytes (checked when the options are used:
    /// [`LockError::InvalidOption`] past that), such as which host and job hold the lock.
    /// Written with a fresh hold (a re-entry keeps the first hold's data) and gone with
    /// it; it costs a call with no data nothing.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().data("web-3 pid 4121: nightly export");
    /// ```
    pub fn data(mut self, data: impl Into<String>) -> Self {
        self.data = Some(Arc::from(data.into()));
        self
    }

    /// Stop renewing the hold once it is `max_hold` old, overriding the client's
    /// [`max_hold`](crate::LockClientBuilder::max_hold): a holder stuck in an endless
    /// loop then loses the lock (its [`lost`](crate::LockGuard::lost) signal fires
    /// before the lease runs out, and a `tracing` warning names the lock) instead of
    /// keeping it forever. Counted from the first hold; nested holds share it. Only the
    /// watchdog is capped: a fixed lease ends by itself.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().max_hold(std::time::Duration::from_secs(600));
    /// ```
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// [`resolve`](Self::resolve) for a hold of a kind (named `kind`) that is
    /// `exclusive` or not: the one place that knows what each kind can honour. A
    /// fencing token asked for a hold that others share (a read hold, a semaphore
    /// permit) is refused with [`LockError::InvalidOption`] naming the option and the
    /// kind, never dropped; the client's default fencing (see
    /// `LockClientBuilder::fencing`) applies to the kinds that can draw tokens. Every
    /// other option works for every kind. Calls take it through `resolve_for`, which
    /// reads the kind's descriptor (`scripts/kinds/names.rs`: above this layer).
    pub(crate) fn resolve_as(
        &self,
        client: &ClientConfig,
        exclusive: bool,
        kind: &str,
    ) -> Result<ResolvedOptions> {
        let mut resolved = self.resolve(client)?;
        if !exclusive {
            if self.fenced {
                return Err(LockError::InvalidOption {
                    option: "fenced",
                    reason: format!(
                        "a {} is shared with other holders, so no fencing token can \
                         stand for it (fence the write side, or use a lock)",
                        kind
                    ),
                });
            }
            resolved.fenced = false;
        }
        Ok(resolved)
    }

    /// Checks the options against the client's, returning the wait and lease to use.
    pub(crate) fn resolve(&self, client: &ClientConfig) -> Result<ResolvedOptions> {
        let wait = match self.wait {
            Some(wait) if wait > MAX_DURATION => {
                return Err(LockError::InvalidOption {
                    option: "wait",
                    reason: format!("{wait:?} is longer than the maximum of ten years"),
                });
            }
            other => other,
        };
        let (lease, watchdog) = match self.lease {
            Some(lease) => (lease, false),
            None => (client.lease, true),
        };
        let fair_wait = wait
            .filter(|wait| wait.as_millis() > 0)
            .unwrap_or(client.fair_wait);
        Ok(ResolvedOptions {
            wait,
            fair_wait_ms: u64::try_from(fair_wait.as_millis()).unwrap_or(u64::MAX),
            lease_ms: lease_millis("lease", lease)?,
            watchdog,
            fenced: self.fenced || client.fencing,
            min_replicas: match self.min_replicas {
                Some(Some(min)) => Some(min.validate()?),
                Some(None) => None,
                None => client.min_replicas,
            },
            max_hold: match self.max_hold {
                Some(max_hold) => Some(positive("max_hold", max_hold)?),
                None => client.max_hold,
            },
            data: match &self.data {
                Some(data) if data.len() > MAX_DATA_LEN => {
                    return Err(LockError::InvalidOption {
                        option: "data",
                        reason: format!(
                            "{} bytes is longer than the maximum of {MAX_DATA_LEN}",
                            data.len()
                        ),
                    });
                }
                Some(data) if data.is_empty() => None,
                data => data.clone(),
            },
        })
    }
}

/// [`LockOptions`] checked against the client's (see `LockOptions::resolve`): what a
/// call asks of Redis. Nominally public, in a private module, so that the front door's
/// sealed trait (`acquire.rs`) may name it; nothing outside the crate can.
#[derive(Debug, Clone)]
pub struct ResolvedOptions {
    pub(crate) wait: Option<Duration>,
    /// The lease in whole milliseconds, as Redis keeps it.
    pub(crate) lease_ms: u64,
    pub(crate) watchdog: bool,
    pub(crate) fenced: bool,
    pub(crate) min_replicas: Option<MinReplicas>,
    pub(crate) max_hold: Option<Duration>,
    /// Data to keep with a fresh hold (see [`LockOptions::data`]).
    pub(crate) data: Option<Arc<str>>,
    /// How long, in whole milliseconds, a waiter of a fair lock in Redisson's layout
    /// keeps its place at the head of the queue without asking: the wait, if it has
    /// one (as Redisson's `tryLock(waitTime, ..)`), else the client's
    /// `fair_wait_timeout`.
    pub(crate) fair_wait_ms: u64,
}

/// How long past its wait a call with a wait may take to return when Redis does not
/// answer (it is unreachable, paused or reconnecting): the time one round trip may
/// reasonably take. Without it, such a call would wait out the command timeout and the
/// reconnection window (10 s with the defaults) whatever its wait.
pub(crate) const ANSWER_GRACE: Duration = Duration::from_millis(250);

impl ResolvedOptions {
    /// When a call that gives up waiting at `deadline` must have returned: one round
    /// trip's grace later ([`ANSWER_GRACE`]), and the replicas' time to acknowledge if
    /// it asks for them.
    pub(crate) fn answer_by(&self, deadline: tokio::time::Instant) -> tokio::time::Instant {
        let replicas = self.min_replicas.map_or(Duration::ZERO, |min| min.timeout);
        deadline + ANSWER_GRACE + replicas
    }

    /// Whether the call is a single try (a zero wait): it never waits, and a refusal
    /// need not have the next release tell it.
    pub(crate) fn is_single_try(&self) -> bool {
        self.wait == Some(Duration::ZERO)
    }

    /// The lease for local deadlines: the same whole milliseconds Redis keeps, never
    /// the fraction of a millisecond it drops.
    pub(crate) fn lease(&self) -> Duration {
        whole_millis(self.lease_ms)
    }

    /// When a call that starts now gives up waiting: `None` for never.
    pub(crate) fn deadline(&self) -> Result<Option<tokio::time::Instant>> {
        let Some(wait) = self.wait else {
            return Ok(None);
        };
        tokio::time::Instant::now()
            .checked_add(wait)
            .map(Some)
            .ok_or_else(|| LockError::InvalidOption {
                option: "wait",
                reason: format!("{wait:?} overflows the clock"),
            })
    }
}

/// How many replicas must acknowledge a fresh acquisition, and how long to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MinReplicas {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

impl MinReplicas {
    /// `None` for zero replicas: no acknowledgement wanted.
    pub(crate) fn new(replicas: u32, timeout: Duration) -> Option<Self> {
        (replicas > 0).then_some(Self { replicas, timeout })
    }

    /// Checks the timeout; `WAIT` takes whole milliseconds and reads 0 as "forever".
    pub(crate) fn validate(self) -> Result<Self> {
        let millis = positive("min_replicas timeout", self.timeout)?.as_millis();
        if millis == 0 {
            return Err(LockError::InvalidOption {
                option: "min_replicas timeout",
                reason: format!("{:?} is shorter than the minimum of 1 ms", self.timeout),
            });
        }
        Ok(self)
    }

    /// The timeout in whole milliseconds, as `WAIT` takes it.
    pub(crate) fn timeout_ms(self) -> u64 {
        // validate() bounds the timeout far below u64::MAX milliseconds.
        self.timeout.as_millis() as u64
    }
}

#[cfg(test)]
mod tests;
