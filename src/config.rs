//! Options for a client and for a single lock, and the key layout they imply.

use std::time::Duration;

use crate::error::{LockError, Result};

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

/// The longest duration accepted anywhere (a lease, a wait, a timeout, a period):
/// ten years. Redis takes milliseconds as a signed 64-bit integer, and ten years is far
/// beyond any sensible lease or wait.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// let wait = Duration::from_secs(4000 * 86_400);
/// assert!(wait > holdlock::MAX_DURATION); // `lock_with` would refuse this wait
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Settings shared by every lock of one [`LockClient`](crate::LockClient).
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    pub(crate) prefix: String,
    /// Whole milliseconds once [`validate`](Self::validate) has run, as Redis keeps it.
    pub(crate) lease: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) fencing: bool,
    pub(crate) min_replicas: Option<MinReplicas>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_owned(),
            lease: DEFAULT_LEASE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            fencing: false,
            min_replicas: None,
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
        if let Some(min) = self.min_replicas {
            min.validate()?;
        }
        Ok(())
    }

    /// The keys and channel of the lock called `name`, or an error if `name` is unusable.
    pub(crate) fn names(&self, name: &str) -> Result<LockNames> {
        validate_name(name)?;
        // Built on every lock call: plain appends, not `format!`.
        let mut key = String::with_capacity(self.prefix.len() + name.len() + 2);
        key.push_str(&self.prefix);
        key.push('{');
        key.push_str(name);
        key.push('}');
        Ok(LockNames {
            name: name.to_owned(),
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
/// so they live in one Redis Cluster slot. (A held lock keeps one of these: the
/// names used less often are built when needed.)
#[derive(Debug, Clone)]
pub(crate) struct LockNames {
    pub(crate) name: String,
    /// `<prefix>{<name>}`: the lock's hash.
    pub(crate) key: String,
}

impl LockNames {
    /// The key of the last fencing token issued for this lock (see `lua/acquire.lua`).
    pub(crate) fn token_key(&self) -> String {
        [self.key.as_str(), ":token"].concat()
    }
}

/// What follows a lock's key in its release channel.
const RELEASED: &str = ":released";

/// The channel told when the lock at `key` is released to waiters (`lua/release.lua`
/// derives the same name).
pub(crate) fn release_channel(key: &str) -> String {
    [key, RELEASED].concat()
}

/// The lock key whose release channel is `channel`.
pub(crate) fn key_of_channel(channel: &str) -> &str {
    channel.strip_suffix(RELEASED).unwrap_or(channel)
}

/// The URL schemes a client accepts, and whether each one means TLS. These are the
/// schemes fred's `Config::from_url` knows, less its Unix-socket ones (`redis+unix`,
/// `valkey+unix`), which need a fred feature this crate does not enable. fred reads
/// any other scheme as `redis://`, and a TLS scheme without a TLS feature as
/// plaintext, so [`check_url`] refuses both before fred sees the URL.
const SCHEMES: [(&str, bool); 12] = [
    ("redis", false),
    ("redis-cluster", false),
    ("redis-sentinel", false),
    ("valkey", false),
    ("valkey-cluster", false),
    ("valkey-sentinel", false),
    ("rediss", true),
    ("rediss-cluster", true),
    ("rediss-sentinel", true),
    ("valkeys", true),
    ("valkeys-cluster", true),
    ("valkeys-sentinel", true),
];

/// Checks the scheme of a client URL before anything connects: it must be one of
/// [`SCHEMES`], and a TLS one only if the crate was built with TLS (`tls_built`, which
/// is `cfg!(feature = "tls-rustls")` outside tests).
pub(crate) fn check_url(url: &str, tls_built: bool) -> Result<()> {
    let invalid = |reason: String| LockError::InvalidOption {
        option: "url",
        reason,
    };
    let expected = "expected redis://, rediss://, redis-cluster://, rediss-cluster://, \
                    redis-sentinel://, rediss-sentinel:// or their valkey equivalents";
    let Some(scheme) = scheme_of(url) else {
        return Err(invalid(format!(
            "the URL has no scheme ({expected}, e.g. redis://127.0.0.1:6379)"
        )));
    };
    let known = SCHEMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(scheme));
    match known {
        Some((_, false)) => Ok(()),
        Some((_, true)) if tls_built => Ok(()),
        Some((name, true)) => Err(invalid(format!(
            "`{name}://` needs TLS, and holdlock was built without its `tls-rustls` \
             feature: enable that feature (or use a `redis://` URL to connect without TLS)"
        ))),
        None if scheme.to_ascii_lowercase().ends_with("+unix") => Err(invalid(format!(
            "`{scheme}://`: Unix sockets are not supported (holdlock does not enable \
             fred's `unix-sockets` feature); connect over TCP"
        ))),
        None => Err(invalid(format!("unknown scheme `{scheme}`; {expected}"))),
    }
}

/// The scheme of `url` as a URL parser reads it (the `url` crate, under fred, first
/// trims leading spaces and control characters); `None` if it has none.
fn scheme_of(url: &str) -> Option<&str> {
    let (scheme, _) = url.trim_start_matches(|c| c <= ' ').split_once(':')?;
    is_scheme(scheme).then_some(scheme)
}

/// Whether `text` is a URL scheme: a letter, then letters, digits, `+`, `-` or `.`.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `url` with the passwords in it replaced by `***`: how this crate shows a URL in
/// `Debug` output, and how to put one in a log or an error message of your own.
///
/// Hidden are the password of the user information (`user:password@host`, the user
/// name is kept) and the value of every query parameter whose name contains
/// `password` in any case, percent-encoded or not (fred's `sentinelPassword`). An
/// unencoded `/`, `?` or `#` in a password makes the end of the user information
/// ambiguous: when an `@` follows any of them, everything from `://` (or from the
/// start, without a scheme) to the last `@` is hidden, user name and host included,
/// so that no password shows whatever characters it holds. A parameter value runs to
/// the next `&`; following parts without a `=` are taken as more of the password.
///
/// # Examples
/// ```
/// assert_eq!(
///     holdlock::redact_url("redis://app:s3cret@10.0.0.7:6379/0"),
///     "redis://app:***@10.0.0.7:6379/0"
/// );
/// // Is `/ss@10.0.0.7:6379` a path, or part of the password? Either way, it is hidden.
/// assert_eq!(
///     holdlock::redact_url("redis://app:s3/ss@10.0.0.7:6379"),
///     "redis://***@10.0.0.7:6379"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let mut hidden = Vec::new();
    hide_password_parameters(url, &mut hidden);
    hide_userinfo_password(url, &mut hidden);
    hidden.sort_by_key(|range| range.start);
    let mut merged: Hidden = Vec::with_capacity(hidden.len());
    for range in hidden {
        match merged.last_mut() {
            // Overlapping or touching ranges show as one `***`.
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    let mut redacted = String::with_capacity(url.len());
    let mut shown_from = 0;
    for range in merged {
        redacted.push_str(&url[shown_from..range.start]);
        redacted.push_str("***");
        shown_from = range.end;
    }
    redacted.push_str(&url[shown_from..]);
    redacted
}

/// Byte ranges of `url` that [`redact_url`] replaces; every bound is at an ASCII
/// character or an end of `url`, so on a character boundary.
type Hidden = Vec<std::ops::Range<usize>>;

/// Hides the password of the user information: the part after its first `:`, or,
/// where the user information cannot be told apart from what follows it, all of it.
fn hide_userinfo_password(url: &str, hidden: &mut Hidden) {
    // After `<scheme>://`, or from the start if the URL does not begin with a scheme.
    let start = url
        .find("://")
        .filter(|&at| is_scheme(url[..at].trim_start_matches(|c| c <= ' ')))
        .map_or(0, |at| at + 3);
    let rest = &url[start..];
    let Some(at) = rest.rfind('@') else {
        return; // no user information
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if at < authority_end {
        // Every `@` is in the authority, so the last one ends the user information
        // (as the `url` crate under fred reads it); the first `:` ends the user name.
        if let Some(colon) = rest[..at].find(':') {
            hidden.push(start + colon + 1..start + at);
        }
    } else {
        // An `@` after a `/`, `?` or `#`: any of them may be part of the password.
        hidden.push(start..start + at);
    }
}

/// Hides the value of every query parameter whose name contains `password`. Any `?`
/// or `&` may start a parameter (a `?` in a password of the user information may be
/// taken for the start of the query), and a value runs to the next `&`, taking in
/// following parts without a `=` (an unencoded `&` in the password).
fn hide_password_parameters(url: &str, hidden: &mut Hidden) {
    for (at, _) in url.match_indices(['?', '&']) {
        let param_start = at + 1;
        let param_end = url[param_start..]
            .find('&')
            .map_or(url.len(), |end| param_start + end);
        let Some((name, _)) = url[param_start..param_end].split_once('=') else {
            continue;
        };
        if !percent_decoded(name).to_lowercase().contains("password") {
            continue;
        }
        let value_start = param_start + name.len() + 1;
        let mut value_end = param_end;
        while value_end < url.len() {
            let next_start = value_end + 1;
            let next_end = url[next_start..]
                .find('&')
                .map_or(url.len(), |end| next_start + end);
            if url[next_start..next_end].contains('=') {
                break;
            }
            value_end = next_end;
        }
        if value_start < value_end {
            hidden.push(value_start..value_end);
        }
    }
}

/// `text` with `%XX` escapes decoded and `+` read as a space, as in a query.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (b'+', None) => {
                decoded.push(b' ');
                i += 1;
            }
            (byte, None) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Checks that `name` can name a lock, by the rules every call that takes a name
/// applies: it must not be empty, and must not contain a brace (the library puts the
/// Redis Cluster hash tag `{name}` around it). Useful to refuse a bad name before
/// connecting.
///
/// # Errors
/// [`LockError::InvalidName`] with the reason.
///
/// # Examples
/// ```
/// assert!(holdlock::validate_name("account:42").is_ok());
/// assert!(holdlock::validate_name("").is_err());
/// assert!(holdlock::validate_name("a{b}").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<()> {
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
    /// `None`: the client's setting; `Some(None)`: off for this call.
    pub(crate) min_replicas: Option<Option<MinReplicas>>,
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
        // Both from the same whole milliseconds: local deadlines count the lease Redis
        // keeps, never the fraction of a millisecond it drops.
        let lease_ms = lease_millis("lease", lease)?;
        Ok(ResolvedOptions {
            wait,
            lease: whole_millis(lease_ms),
            lease_ms,
            watchdog,
            fenced: self.fenced || client.fencing,
            min_replicas: match self.min_replicas {
                Some(Some(min)) => Some(min.validate()?),
                Some(None) => None,
                None => client.min_replicas,
            },
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ResolvedOptions {
    pub(crate) wait: Option<Duration>,
    /// `lease_ms` as a `Duration`, for local deadlines (built from it in `resolve`).
    pub(crate) lease: Duration,
    /// The lease in whole milliseconds, as Redis keeps it.
    pub(crate) lease_ms: u64,
    pub(crate) watchdog: bool,
    pub(crate) fenced: bool,
    pub(crate) min_replicas: Option<MinReplicas>,
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
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let names = ClientConfig::default().names("account:42").unwrap();
        assert_eq!(names.key, "holdlock:{account:42}");
        assert_eq!(names.token_key(), "holdlock:{account:42}:token");
        assert_eq!(
            release_channel(&names.key),
            "holdlock:{account:42}:released"
        );
        assert_eq!(key_of_channel("holdlock:{account:42}:released"), names.key);
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
    fn leases_below_the_minimum_are_rejected() {
        let config = ClientConfig::default();
        for short in [
            Duration::from_millis(3),
            Duration::from_micros(3_990),
            Duration::from_millis(10),
            MIN_LEASE - Duration::from_nanos(1),
        ] {
            let Err(LockError::InvalidOption { option, reason }) =
                LockOptions::new().lease(short).resolve(&config)
            else {
                panic!("{short:?} accepted");
            };
            assert_eq!(option, "lease");
            assert!(reason.contains("minimum of 100ms"), "{reason}");
            let mut client = ClientConfig {
                lease: short,
                ..ClientConfig::default()
            };
            assert!(client.validate().is_err(), "{short:?}");
        }
        let shortest = LockOptions::new().lease(MIN_LEASE).resolve(&config);
        assert_eq!(shortest.unwrap().lease_ms, 100);
    }

    #[test]
    fn leases_are_whole_milliseconds_here_as_in_redis() {
        let client = ClientConfig::default();
        for (given, millis) in [
            (Duration::from_micros(23_900), None), // below the minimum
            (Duration::from_micros(100_999), Some(100)),
            (Duration::from_nanos(123_999_999), Some(123)),
            (Duration::from_secs(30), Some(30_000)),
            (Duration::from_micros(30_000_500), Some(30_000)),
        ] {
            let fixed = LockOptions::new().lease(given).resolve(&client);
            let Some(millis) = millis else {
                assert!(fixed.is_err());
                continue;
            };
            let fixed = fixed.unwrap();
            assert_eq!(fixed.lease_ms, millis, "{given:?}");
            assert_eq!(fixed.lease, Duration::from_millis(millis), "{given:?}");
            assert!(!fixed.watchdog);

            // A client's lease (the watchdog's) is rounded when the client is built.
            let mut config = ClientConfig {
                lease: given,
                ..ClientConfig::default()
            };
            config.validate().unwrap();
            assert_eq!(config.lease, Duration::from_millis(millis), "{given:?}");
            let renewed = LockOptions::new().resolve(&config).unwrap();
            assert_eq!(renewed.lease_ms, millis);
            assert_eq!(renewed.lease, Duration::from_millis(millis));
            assert!(renewed.watchdog);
        }
    }

    /// The reason `check_url` gives for `url`, or `None` if it accepts it.
    fn url_refusal(url: &str, tls_built: bool) -> Option<String> {
        match check_url(url, tls_built) {
            Ok(()) => None,
            Err(LockError::InvalidOption {
                option: "url",
                reason,
            }) => Some(reason),
            Err(other) => panic!("{url}: unexpected error {other:?}"),
        }
    }

    #[test]
    fn plaintext_schemes_are_accepted_with_or_without_tls() {
        for tls_built in [false, true] {
            for url in [
                "redis://127.0.0.1:6379",
                "redis://:pw@h:1/0",
                "REDIS://h:1",
                " redis://h:1",
                "redis-cluster://h:1?node=h:2",
                "redis-sentinel://h:26379?sentinelServiceName=m",
                "valkey://h:1",
                "valkey-cluster://h:1",
                "valkey-sentinel://h:1?sentinelServiceName=m",
            ] {
                assert_eq!(url_refusal(url, tls_built), None, "{url}");
            }
        }
    }

    #[test]
    fn tls_schemes_need_the_tls_feature() {
        for url in [
            "rediss://:pw@h:6380",
            "RedisS://h:1",
            "rediss-cluster://h:1?node=h:2",
            "rediss-sentinel://h:1?sentinelServiceName=m",
            "valkeys://h:1",
            "valkeys-cluster://h:1",
            "valkeys-sentinel://h:1?sentinelServiceName=m",
        ] {
            assert_eq!(url_refusal(url, true), None, "{url}");
            let reason = url_refusal(url, false).unwrap_or_else(|| panic!("{url} accepted"));
            assert!(
                reason.contains("tls-rustls") && reason.contains("needs TLS"),
                "{url}: {reason}"
            );
            assert!(!reason.contains("pw"), "{reason}");
        }
    }

    #[test]
    fn unknown_schemes_and_urls_without_one_are_refused() {
        for tls_built in [false, true] {
            for (url, says) in [
                ("foo://127.0.0.1:6379", "unknown scheme `foo`"),
                ("http://127.0.0.1:6379", "unknown scheme `http`"),
                ("https://127.0.0.1:6379", "unknown scheme `https`"),
                ("redis-sentinal://h:1", "unknown scheme `redis-sentinal`"),
                ("redis-clustre://h:1", "unknown scheme `redis-clustre`"),
                ("rediss-foo://h:1", "unknown scheme `rediss-foo`"),
                ("redis+tls://h:1", "unknown scheme `redis+tls`"),
                ("localhost:6379", "unknown scheme `localhost`"),
                (
                    "redis+unix:///tmp/redis.sock",
                    "Unix sockets are not supported",
                ),
                (
                    "valkey+unix:///tmp/redis.sock",
                    "Unix sockets are not supported",
                ),
                ("127.0.0.1:6379", "no scheme"),
                ("//127.0.0.1:6379", "no scheme"),
                ("", "no scheme"),
                ("not a url at all", "no scheme"),
                ("s3cret@h:1", "no scheme"),
                ("re\tdis://h:1", "no scheme"),
                ("://h:1", "no scheme"),
            ] {
                let reason =
                    url_refusal(url, tls_built).unwrap_or_else(|| panic!("{url} accepted"));
                assert!(reason.contains(says), "{url}: {reason}");
                assert!(!reason.contains("s3cret"), "{reason}");
            }
        }
    }

    #[test]
    fn passwords_are_redacted_from_urls() {
        for (url, expected) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://:s3cret@h:1/2", "redis://:***@h:1/2"),
            ("rediss://app:s3cret@h:1", "rediss://app:***@h:1"),
            ("redis://app@h:1", "redis://app@h:1"),
            ("redis://a:p@ss@h:1?x=1", "redis://a:***@h:1?x=1"),
            (
                "redis-sentinel://u:pw@h:26379/0?sentinelServiceName=m&sentinelPassword=pw2&node=h:2",
                "redis-sentinel://u:***@h:26379/0?sentinelServiceName=m&sentinelPassword=***&node=h:2",
            ),
            ("not a url at all", "not a url at all"),
        ] {
            assert_eq!(redact_url(url), expected);
        }
    }

    /// URLs whose passwords hold characters that delimit parts of a URL, with the
    /// password(s) in each, and how they show.
    const TRICKY_URLS: [(&str, &[&str], &str); 27] = [
        // `/`, `?`, `#` in the password: the user information cannot be delimited.
        (
            "redis://user:pa/ss@host:6379",
            &["pa/ss"],
            "redis://***@host:6379",
        ),
        ("redis://:p?w@h:1", &["p?w"], "redis://***@h:1"),
        ("redis://:p#w@h:1", &["p#w"], "redis://***@h:1"),
        ("redis://u:a/b?c#d@h:1/0", &["a/b?c#d"], "redis://***@h:1/0"),
        ("redis://:p?x=1@h:1", &["p?x=1"], "redis://***@h:1"),
        ("redis://:p/w@h:1/0?x=1", &["p/w"], "redis://***@h:1/0?x=1"),
        // `@` and `:` in the password: the last `@` and the first `:` delimit it.
        ("redis://:p@w@h:1", &["p@w"], "redis://:***@h:1"),
        ("redis://u:p:w@h:1", &["p:w"], "redis://u:***@h:1"),
        ("redis://u:@:@@h:1/0", &["@:@"], "redis://u:***@h:1/0"),
        // Percent-encoded passwords.
        (
            "redis://u:p%2Fw%40x@h:1",
            &["p%2Fw%40x"],
            "redis://u:***@h:1",
        ),
        ("redis://u:%3F%23@h:1", &["%3F%23"], "redis://u:***@h:1"),
        // A user name alone is not hidden; one holding a `/` cannot be delimited.
        ("redis://app@h:1/0", &[], "redis://app@h:1/0"),
        ("redis://a/pp@h:1", &[], "redis://***@h:1"),
        // Sentinel URLs with both passwords.
        (
            "redis-sentinel://u:pw1@h:26379/0?sentinelServiceName=m&sentinelUsername=su&sentinelPassword=pw2",
            &["pw1", "pw2"],
            "redis-sentinel://u:***@h:26379/0?sentinelServiceName=m&sentinelUsername=su&sentinelPassword=***",
        ),
        (
            "redis-sentinel://u:p/1@h:1?sentinelServiceName=m&sentinelPassword=p@2&node=h:2",
            &["p/1", "p@2"],
            "redis-sentinel://***&node=h:2",
        ),
        (
            "redis-sentinel://h:1?sentinelPassword=a#b&node=h:2",
            &["a#b"],
            "redis-sentinel://h:1?sentinelPassword=***&node=h:2",
        ),
        (
            "redis-sentinel://h:1?sentinelPassword=a&b&&c&node=h:2",
            &["a&b&&c"],
            "redis-sentinel://h:1?sentinelPassword=***&node=h:2",
        ),
        (
            "redis-sentinel://h:1?SENTINEL_PASSWORD=x1&sentinel%50assword=x2&a+password=x3",
            &["x1", "x2", "x3"],
            "redis-sentinel://h:1?SENTINEL_PASSWORD=***&sentinel%50assword=***&a+password=***",
        ),
        (
            "redis://h:1?sentinelPassword=",
            &[],
            "redis://h:1?sentinelPassword=",
        ),
        // Other `@`s after the authority: everything up to the last one is hidden.
        ("redis://:pw@h:1/0#x@y", &["pw"], "redis://***@y"),
        (
            "redis://h:1?sentinelPassword=se@cret",
            &["se@cret"],
            "redis://***",
        ),
        // No scheme (or not one before the first `://`): the user information starts
        // at the start.
        ("user:pw@h:1", &["pw"], "user:***@h:1"),
        (":p/w@h:1", &["p/w"], "***@h:1"),
        (
            "u:pw@h:1?next=redis://x",
            &["pw"],
            "u:***@h:1?next=redis://x",
        ),
        ("redis:/u:pw@h:1", &["pw"], "***@h:1"),
        (" redis://u:p/w@h:1", &["p/w"], " redis://***@h:1"),
        ("REDISS://U:PW@H:1", &["PW"], "REDISS://U:***@H:1"),
    ];

    #[test]
    fn passwords_with_any_characters_are_redacted() {
        for (url, passwords, expected) in TRICKY_URLS {
            let redacted = redact_url(url);
            assert_eq!(redacted, expected, "{url}");
            for password in passwords {
                assert!(!redacted.contains(password), "{url}: {redacted}");
            }
        }
    }

    #[test]
    fn min_replicas_are_checked() {
        let config = ClientConfig::default();
        assert!(MinReplicas::new(0, Duration::from_secs(1)).is_none());
        let resolved = LockOptions::new()
            .min_replicas(2, Duration::from_millis(5))
            .resolve(&config)
            .unwrap();
        assert_eq!(resolved.min_replicas.map(|m| m.replicas), Some(2));
        let off = ClientConfig {
            min_replicas: MinReplicas::new(1, Duration::from_secs(1)),
            ..ClientConfig::default()
        };
        let resolved = LockOptions::new()
            .min_replicas(0, Duration::ZERO)
            .resolve(&off)
            .unwrap();
        assert_eq!(resolved.min_replicas, None, "zero replicas turns it off");
        for bad in [Duration::ZERO, Duration::from_micros(500), Duration::MAX] {
            let options = LockOptions::new().min_replicas(1, bad);
            assert!(matches!(
                options.resolve(&config),
                Err(LockError::InvalidOption {
                    option: "min_replicas timeout",
                    ..
                })
            ));
        }
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
        let mut config = ClientConfig {
            prefix: "{app}:".into(),
            ..ClientConfig::default()
        };
        assert!(config.validate().is_err());
    }
}
