//! The error type of every fallible operation in this crate. How a Redis or fred
//! error reads as one is in `error/classify.rs`.

use std::time::Duration;

mod classify;

pub(crate) use classify::{Cause, classify};

/// A `Result` whose error defaults to [`LockError`].
pub type Result<T, E = LockError> = std::result::Result<T, E>;

/// Everything that can go wrong when taking, renewing or releasing a lock.
///
/// Contention is not an error: the bounded modes of [`Acquire`](crate::Acquire)
/// (`try_now`, `timeout`, `options`) return `Ok(None)` when the lock is held by someone
/// else.
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
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// A Redis command or the connection failed.
    #[error("redis error: {0}")]
    Redis(#[source] fred::error::Error),

    /// Redis refused a command under its ACL rules, whether holdlock sent it
    /// (`NOPERM`) or one of its scripts called it: the user may not run the command, or
    /// touch the key or channel. See `docs/deployments.md` for the rule a holdlock user
    /// needs.
    #[error("redis refused the command (ACL): {detail}")]
    PermissionDenied {
        /// Redis's explanation, e.g. "this user has no permissions to access one of
        /// the keys used as arguments" (Valkey: "No permissions to access a key");
        /// for a command a script called, also the
        /// command and the script's line ("The user executing the script can't run
        /// this command or subcommand: 'zadd' (line 172 of script 373c…)").
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

    /// The first connection to Redis failed: refused, reset, or a host that does not
    /// resolve. Said with the address tried (passwords hidden) and the operating
    /// system's reason.
    #[error("could not connect to redis at {url}: {reason}")]
    Connect {
        /// The URL tried, passwords replaced by `***` (or fred's server list, for a
        /// client built from a fred configuration).
        url: String,
        /// Why, e.g. "Connection refused (os error 111)".
        reason: String,
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

    /// The lock was lost while a critical section ran under it (see
    /// [`Acquire::run`](crate::Acquire::run)): the section was stopped
    /// at its next await, and its work must be taken as not done under the lock.
    #[error("lock `{name}` was lost while the critical section ran; the section was stopped")]
    Lost {
        /// The lock name (for a multi-lock, the member that was lost).
        name: String,
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

    /// This call's wait closed a cycle of waits across owners (each waits for a lock
    /// that the next one holds, and the last for one this owner holds): none of them
    /// could ever be granted, and the watchdog would renew their holds forever. Of
    /// the waiters in the cycle, exactly one gets this error: the one whose wait began
    /// last. It stops waiting and keeps its holds; the others go on waiting, and are
    /// granted once it lets go. Drop (unlock) what this owner holds and retry, or
    /// give up. With detection on (the default): see
    /// [`LockClientBuilder::deadlock_check`](crate::LockClientBuilder::deadlock_check).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let first = client.lock("account:1").await?;
    /// match client.lock("account:2").await {
    ///     Err(holdlock::LockError::Deadlock { cycle }) => {
    ///         for wait in &cycle {
    ///             eprintln!("{wait}");
    ///         }
    ///         first.unlock().await?; // let the others go, then retry
    ///     }
    ///     other => drop(other?),
    /// }
    /// # Ok(()) }
    /// ```
    #[error("deadlock: {}", DisplayCycle(cycle))]
    Deadlock {
        /// The cycle, starting with this call's wait: each owner waits for the lock
        /// named, which the next owner in the list holds (the last's, the first owner).
        cycle: Vec<WaitFor>,
    },

    /// The client was shut down with [`LockClient::shutdown`](crate::LockClient::shutdown).
    #[error("the lock client has been shut down")]
    Shutdown,

    /// A call of the blocking API (`holdlock::blocking`) was made where a tokio runtime
    /// is current (in async code; also in `spawn_blocking`, which a library cannot tell
    /// apart from it): blocking there could stall the runtime's thread. Use the async
    /// [`LockClient`](crate::LockClient) there (the blocking client lends its own
    /// through `as_async`), or call from a thread of your own.
    #[cfg(feature = "blocking")]
    #[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
    #[error(
        "holdlock::blocking was called inside a tokio runtime, where blocking could stall it; \
         use the async LockClient there"
    )]
    BlockingInRuntime,

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
            LockError::Redis(_)
                | LockError::Connect { .. }
                | LockError::ConnectTimeout { .. }
                | LockError::Tls { .. }
        )
    }
}

/// One wait of a deadlock's cycle (see [`LockError::Deadlock`]): `owner` waits for the
/// lock `name` of `kind`.
///
/// # Examples
/// ```
/// # fn dox(cycle: &[holdlock::WaitFor]) {
/// for wait in cycle {
///     println!("{} waits for the {} `{}`", wait.owner, wait.kind, wait.name);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WaitFor {
    /// The waiting owner's id, `<client-uuid>:<task>`.
    pub owner: String,
    /// The kind of the lock it waits for.
    pub kind: crate::lock_kind::LockKind,
    /// The name of the lock it waits for (without prefix).
    pub name: String,
}

impl WaitFor {
    /// `owner` waits for the lock `name` of `kind`.
    pub(crate) fn new(owner: String, kind: crate::lock_kind::LockKind, name: String) -> Self {
        Self { owner, kind, name }
    }
}

impl std::fmt::Display for WaitFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} waits for {} `{}`", self.owner, self.kind, self.name)
    }
}

/// A deadlock's cycle as one line: `a waits for mutex `x`, held by b; b waits for ...`.
struct DisplayCycle<'c>(&'c [WaitFor]);

impl std::fmt::Display for DisplayCycle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waits = self.0;
        for (i, wait) in waits.iter().enumerate() {
            let holder = &waits[(i + 1) % waits.len()].owner;
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{wait}, held by {holder}")?;
        }
        Ok(())
    }
}
