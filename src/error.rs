//! The error type of every fallible operation in this crate.

use std::time::Duration;

/// A `Result` whose error defaults to [`LockError`].
pub type Result<T, E = LockError> = std::result::Result<T, E>;

/// Everything that can go wrong when taking, renewing or releasing a lock.
///
/// Contention is not an error: [`LockClient::try_lock`](crate::LockClient::try_lock) and
/// friends return `Ok(None)` when the lock is held by someone else.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) {
/// match client.lock("").await {
///     Err(holdlock::LockError::InvalidName { reason, .. }) => eprintln!("bad name: {reason}"),
///     other => drop(other),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// A Redis command or the connection failed.
    #[error("redis error: {0}")]
    Redis(#[source] fred::error::Error),

    /// Redis refused a command under its ACL rules (`NOPERM`): the user may not run
    /// the command, or touch the key or channel. See `docs/deployments.md` for the rule
    /// a holdlock user needs.
    #[error("redis refused the command (ACL): {detail}")]
    PermissionDenied {
        /// Redis's explanation, e.g. "this user has no permissions to access one of
        /// the keys used as arguments".
        detail: String,
    },

    /// The TLS handshake failed: most often the server's certificate is not signed by
    /// a trusted CA, or does not name the host in the URL.
    #[error("TLS handshake with redis failed (is the right CA trusted?): {detail}")]
    Tls {
        /// What rustls reported, e.g. `InvalidCertificate(UnknownIssuer)`.
        detail: String,
    },

    /// A fresh acquisition was not acknowledged by enough replicas within the
    /// `min_replicas` timeout; it was released again (or, if that failed too, expires
    /// within its lease).
    #[error("lock `{name}`: {acked} of {wanted} replicas acknowledged the acquisition")]
    NotReplicated {
        /// The lock name.
        name: String,
        /// Replicas known to have acknowledged (0 when the answer was lost).
        acked: u32,
        /// Replicas required.
        wanted: u32,
    },

    /// Connecting did not succeed within the connect timeout.
    #[error("could not connect to redis within {timeout:?}")]
    ConnectTimeout {
        /// The connect timeout that ran out.
        timeout: Duration,
    },

    /// The lock name is not usable (empty, or contains a brace).
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// An option or configuration value is out of range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option's name, e.g. `lease`.
        option: &'static str,
        /// Why it was rejected.
        reason: String,
    },

    /// The lock's key exists but holds something other than a lock hash.
    #[error("key `{key}` holds a value of the wrong type for a lock (WRONGTYPE)")]
    WrongType {
        /// The Redis key.
        key: String,
    },

    /// The hold being released is not held (any more) by this owner: the lease
    /// expired, the lock was force-unlocked, or the guard was already released.
    #[error("lock `{name}` is not held by {owner}")]
    NotHeld {
        /// The lock name.
        name: String,
        /// The owner id that tried to release it.
        owner: String,
    },

    /// An owner that holds only the read side of a read-write lock asked for its write
    /// side: it would wait for itself forever (the write side waits for every reader
    /// to leave). Release the read hold first, or take the write side first (a writer
    /// may also take the read side).
    #[error(
        "lock `{name}`: the owner holds the read lock, so taking the write lock would wait forever"
    )]
    WouldDeadlock {
        /// The lock name.
        name: String,
    },

    /// The client was shut down with [`LockClient::shutdown`](crate::LockClient::shutdown).
    #[error("the lock client has been shut down")]
    Shutdown,

    /// A fenced write presented a token older than one the resource has already seen.
    #[error("stale fencing token {presented}: the resource has seen {newest}")]
    StaleToken {
        /// The token the writer presented.
        presented: u64,
        /// The newest token the resource has accepted.
        newest: u64,
    },

    /// Redis answered with something this crate does not understand.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
}

impl LockError {
    /// True if the error came from the connection or a Redis command.
    ///
    /// # Examples
    /// ```
    /// assert!(!holdlock::LockError::Shutdown.is_redis());
    /// ```
    pub fn is_redis(&self) -> bool {
        matches!(
            self,
            LockError::Redis(_) | LockError::ConnectTimeout { .. } | LockError::Tls { .. }
        )
    }

    /// Maps a Redis error, recognising WRONGTYPE for `key`.
    pub(crate) fn from_redis(error: fred::error::Error, key: &str) -> Self {
        Self::from_script(error, &[key])
    }

    /// Maps the error of a script called with `keys`, recognising WRONGTYPE: for the
    /// key a script names in its own error (`WRONGTYPE KEYS[n] ...`, see `lua/`), else
    /// for the first key (every other key is checked by the scripts themselves).
    pub(crate) fn from_script(error: fred::error::Error, keys: &[&str]) -> Self {
        if classify(&error) != Cause::WrongType {
            return LockError::from(error);
        }
        let details = error.details();
        let at = details.find("WRONGTYPE").unwrap_or(0);
        let named = details[at..]
            .strip_prefix("WRONGTYPE KEYS[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(index, _)| index.parse::<usize>().ok())
            .and_then(|index| keys.get(index.checked_sub(1)?));
        match named.or(keys.first()) {
            Some(key) => LockError::WrongType {
                key: (*key).to_owned(),
            },
            None => LockError::from(error),
        }
    }
}

impl From<fred::error::Error> for LockError {
    /// Wraps a Redis error, recognising ACL refusals (`NOPERM`) and failed TLS
    /// handshakes.
    fn from(error: fred::error::Error) -> Self {
        let details = error.details();
        match classify(&error) {
            Cause::NoPerm => {
                let at = details.find("NOPERM").map_or(0, |at| at + "NOPERM".len());
                LockError::PermissionDenied {
                    detail: details[at..].trim().to_owned(),
                }
            }
            Cause::Tls => {
                let detail = match details.find("InvalidCertificate") {
                    Some(at) => details[at..].trim_end_matches([' ', '}']).to_owned(),
                    None => details.to_string(),
                };
                LockError::Tls { detail }
            }
            _ => LockError::Redis(error),
        }
    }
}

/// What a Redis error means for the command that got it. Every reading of Redis's or
/// fred's error text happens here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Lost in transit (connection closed or not routable, timed out, cancelled, out of
    /// attempts): the command may or may not have run. The only cause that may have
    /// changed anything.
    InTransit,
    /// `NOSCRIPT`: the script is not loaded on the server, and did not run.
    NoScript,
    /// `WRONGTYPE`: a key holds another kind of value.
    WrongType,
    /// `NOPERM`: refused by the ACL.
    NoPerm,
    /// The TLS handshake failed.
    Tls,
    /// Any other reply of Redis's (`NOREPLICAS`, `OOM`, `ERR ...`): nothing was done.
    Refused,
}

/// Reads what `error` means (see [`Cause`]).
pub(crate) fn classify(error: &fred::error::Error) -> Cause {
    use fred::error::ErrorKind;
    let details = error.details();
    if details.starts_with("NOSCRIPT") {
        return Cause::NoScript;
    }
    if details.contains("WRONGTYPE") {
        return Cause::WrongType;
    }
    if details.contains("NOPERM") {
        return Cause::NoPerm;
    }
    #[cfg(feature = "tls-rustls")]
    if *error.kind() == ErrorKind::Tls {
        return Cause::Tls;
    }
    if details.contains("InvalidCertificate") {
        return Cause::Tls;
    }
    let in_transit = matches!(
        error.kind(),
        ErrorKind::IO
            | ErrorKind::Canceled
            | ErrorKind::Timeout
            | ErrorKind::Routing
            | ErrorKind::Backpressure
    ) || details.contains("attempts")
        || details.contains("route")
        || details.contains("onnection");
    if in_transit {
        Cause::InTransit
    } else {
        Cause::Refused
    }
}

impl LockError {
    /// Whether the call that failed may have run: its reply was lost in transit. Every
    /// other error (one Redis replied with, or found before sending) means nothing was
    /// done.
    pub(crate) fn outcome_unknown(&self) -> bool {
        matches!(self, LockError::Redis(error) if classify(error) == Cause::InTransit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fred::error::{Error, ErrorKind};

    fn wrong_type(details: &str, keys: &[&str]) -> Option<String> {
        match LockError::from_script(
            Error::new(ErrorKind::InvalidArgument, details.to_owned()),
            keys,
        ) {
            LockError::WrongType { key } => Some(key),
            _ => None,
        }
    }

    #[test]
    fn wrongtype_names_the_key_the_script_named() {
        let keys = ["p:{a}", "p:{a}:token"];
        let named = "WRONGTYPE KEYS[2] p:{a}:token holds the wrong kind of value";
        assert_eq!(wrong_type(named, &keys).as_deref(), Some("p:{a}:token"));
        let plain = "WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(wrong_type(plain, &keys).as_deref(), Some("p:{a}"));
        // An index the call did not have falls back to the first key.
        let beyond = "WRONGTYPE KEYS[3] x holds the wrong kind of value";
        assert_eq!(wrong_type(beyond, &keys).as_deref(), Some("p:{a}"));
        assert_eq!(
            wrong_type("WRONGTYPE KEYS[0] x", &keys).as_deref(),
            Some("p:{a}")
        );
        assert_eq!(wrong_type("ERR something else", &keys), None);
    }
}
