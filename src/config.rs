//! Options for a client and for a single lock, and the key layout they imply.

use std::time::Duration;

use crate::error::{LockError, Result};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "holdlock:";
/// The default lease: how long a hold survives its holder without renewal.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default limit on connecting to Redis.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest duration accepted anywhere: Redis takes milliseconds as a signed 64-bit
/// integer, and ten years is far beyond any sensible lease or wait.
const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Settings shared by every lock of one [`LockClient`](crate::LockClient).
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    pub(crate) prefix: String,
    pub(crate) lease: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) fencing: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_owned(),
            lease: DEFAULT_LEASE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            fencing: false,
        }
    }
}

impl ClientConfig {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.prefix.contains(['{', '}']) {
            return Err(LockError::InvalidOption {
                option: "prefix",
                reason: format!(
                    "{:?} contains a brace; braces are reserved for the hash tag around the name",
                    self.prefix
                ),
            });
        }
        lease_millis("lease", self.lease)?;
        positive("connect_timeout", self.connect_timeout)?;
        Ok(())
    }

    /// The keys and channel of the lock called `name`, or an error if `name` is unusable.
    pub(crate) fn names(&self, name: &str) -> Result<LockNames> {
        validate_name(name)?;
        let key = format!("{}{{{}}}", self.prefix, name);
        Ok(LockNames {
            name: name.to_owned(),
            token_key: format!("{key}:token"),
            channel: format!("{key}:released"),
            key,
        })
    }

    /// The lock name inside a lock key built by [`names`](Self::names), if `key` is one.
    pub(crate) fn name_of_key<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix('{')?
            .strip_suffix('}')
            .filter(|name| !name.contains(['{', '}']))
    }

    /// A SCAN pattern matching the lock keys whose names match the glob `pattern`.
    pub(crate) fn scan_pattern(&self, pattern: &str) -> String {
        let mut escaped = String::with_capacity(self.prefix.len() + pattern.len() + 2);
        for c in self.prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        format!("{escaped}{{{pattern}}}")
    }
}

/// Every Redis name belonging to one lock. All keys share the hash tag `{name}`,
/// so they live in one Redis Cluster slot.
#[derive(Debug, Clone)]
pub(crate) struct LockNames {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) token_key: String,
    pub(crate) channel: String,
}

fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "the name is empty"
    } else if name.contains(['{', '}']) {
        "the name contains a brace; the library puts the hash tag around it"
    } else {
        return Ok(());
    };
    Err(LockError::InvalidName {
        name: name.to_owned(),
        reason,
    })
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

/// A lease in whole milliseconds, as Redis takes it.
pub(crate) fn lease_millis(option: &'static str, lease: Duration) -> Result<u64> {
    let millis = positive(option, lease)?.as_millis();
    if millis < 3 {
        return Err(LockError::InvalidOption {
            option,
            reason: format!("{lease:?} is shorter than the minimum of 3 ms"),
        });
    }
    // MAX_DURATION keeps this far below u64::MAX.
    Ok(millis as u64)
}

/// How long to wait for a lock, and how long to hold it, for one call of
/// [`LockClient::lock_with`](crate::LockClient::lock_with).
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
/// if let Some(guard) = client.lock_with("report", options).await? {
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
    /// released first. Its guard reports itself lost once the lease has run out.
    ///
    /// # Examples
    /// ```
    /// let options = holdlock::LockOptions::new().lease(std::time::Duration::from_secs(10));
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Draw a fencing token on a fresh acquisition (see [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)).
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
        Ok(ResolvedOptions {
            wait,
            lease,
            lease_ms: lease_millis("lease", lease)?,
            watchdog,
            fenced: self.fenced || client.fencing,
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ResolvedOptions {
    pub(crate) wait: Option<Duration>,
    pub(crate) lease: Duration,
    pub(crate) lease_ms: u64,
    pub(crate) watchdog: bool,
    pub(crate) fenced: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let names = ClientConfig::default().names("account:42").unwrap();
        assert_eq!(names.key, "holdlock:{account:42}");
        assert_eq!(names.token_key, "holdlock:{account:42}:token");
        assert_eq!(names.channel, "holdlock:{account:42}:released");
    }

    #[test]
    fn key_round_trips_to_name() {
        let config = ClientConfig::default();
        assert_eq!(config.name_of_key("holdlock:{a:b}"), Some("a:b"));
        assert_eq!(config.name_of_key("holdlock:{a}:token"), None);
        assert_eq!(config.name_of_key("other:{a}"), None);
    }

    #[test]
    fn bad_names_and_durations_are_rejected() {
        let config = ClientConfig::default();
        assert!(matches!(
            config.names(""),
            Err(LockError::InvalidName { .. })
        ));
        assert!(matches!(
            config.names("a}b"),
            Err(LockError::InvalidName { .. })
        ));
        assert!(lease_millis("lease", Duration::ZERO).is_err());
        assert!(lease_millis("lease", Duration::MAX).is_err());
        assert!(lease_millis("lease", Duration::from_micros(500)).is_err());
        let options = LockOptions::new().wait(Duration::MAX);
        assert!(options.resolve(&config).is_err());
    }

    #[test]
    fn scan_pattern_escapes_the_prefix() {
        let config = ClientConfig {
            prefix: "a*b:".into(),
            ..ClientConfig::default()
        };
        assert_eq!(config.scan_pattern("job:*"), "a\\*b:{job:*}");
    }

    #[test]
    fn braces_in_prefix_are_rejected() {
        let config = ClientConfig {
            prefix: "{app}:".into(),
            ..ClientConfig::default()
        };
        assert!(config.validate().is_err());
    }
}
