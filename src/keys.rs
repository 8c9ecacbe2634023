//! The key layout: every Redis name of a lock, built and read back here and nowhere
//! else (the Lua scripts derive the release channel the same way).
//!
//! A lock named `N` under the prefix `P` is the hash `P{N}`; its fencing token floor
//! is `P{N}:token`, its release channel `P{N}:released`. The braces are a Redis Cluster
//! hash tag, so every name of one lock is in one slot.

use crate::error::{LockError, Result};

/// The keys and channel of the lock called `name`, or an error if `name` is unusable.
pub(crate) fn lock_names(prefix: &str, name: &str) -> Result<LockNames> {
    validate_name(name)?;
    // Built on every lock call: plain appends, not `format!`.
    let mut key = String::with_capacity(prefix.len() + name.len() + 2);
    key.push_str(prefix);
    key.push('{');
    key.push_str(name);
    key.push('}');
    Ok(LockNames {
        name: name.to_owned(),
        key,
        kind: Kind::Mutex,
    })
}

/// The keys and channel of the semaphore called `name` with `permits` permits: its
/// hash is `P{N}:sem`, beside the mutex `P{N}` of the same name but never the same
/// key, and its holders' deadlines are the sorted set `P{N}:sem:leases`.
pub(crate) fn semaphore_names(prefix: &str, name: &str, permits: u32) -> Result<LockNames> {
    let mut names = lock_names(prefix, name)?;
    names.key.push_str(SEMAPHORE);
    names.kind = Kind::Semaphore { permits };
    Ok(names)
}

/// What follows a semaphore's name in its key.
const SEMAPHORE: &str = ":sem";

/// The keys and channel of the fair lock called `name`: its hash is `P{N}:fair`
/// (beside the mutex `P{N}`, never the same key), its queue `P{N}:fair:queue` and its
/// waiters' liveness `P{N}:fair:alive`.
pub(crate) fn fair_names(prefix: &str, name: &str) -> Result<LockNames> {
    let mut names = lock_names(prefix, name)?;
    names.key.push_str(FAIR);
    names.kind = Kind::Fair;
    Ok(names)
}

/// What follows a fair lock's name in its key.
const FAIR: &str = ":fair";

/// The keys and channel of the read or write side of the read-write lock `name`: one
/// hash `P{N}:rw` (beside the mutex `P{N}`, never the same key) for both sides, and
/// the holders' deadlines in `P{N}:rw:leases`.
pub(crate) fn rw_names(prefix: &str, name: &str, kind: Kind) -> Result<LockNames> {
    let mut names = lock_names(prefix, name)?;
    names.key.push_str(READ_WRITE);
    names.kind = kind;
    Ok(names)
}

/// What follows a read-write lock's name in its key.
const READ_WRITE: &str = ":rw";

/// What kind of lock a key is, which says which scripts change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The reentrant mutex: a hash of owner -> hold count (`lua/acquire.lua`).
    Mutex,
    /// A semaphore of `permits` permits: a hash of permit -> 1, with each permit's
    /// deadline in a sorted set (`lua/sem_acquire.lua`).
    Semaphore { permits: u32 },
    /// The fair lock: the mutex's hash, served first come first served from a queue
    /// (`lua/fair_queue.lua`).
    Fair,
    /// The read side of a read-write lock (`lua/rw_acquire.lua`).
    Read,
    /// The write side of a read-write lock.
    Write,
}

impl Kind {
    /// The kind as the docs and errors name it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Mutex => "lock",
            Kind::Semaphore { .. } => "semaphore permit",
            Kind::Fair => "fair lock",
            Kind::Read => "read lock",
            Kind::Write => "write lock",
        }
    }

    /// Whether a hold of this kind excludes every other holder, so that a fencing token
    /// can stand for it (a read hold and a semaphore permit are shared).
    pub(crate) fn is_exclusive(self) -> bool {
        matches!(self, Kind::Mutex | Kind::Fair | Kind::Write)
    }

    /// Whether a hold of this kind and one of `other` on the same key, by different
    /// owners, exclude each other (only two readers do not).
    pub(crate) fn excludes(self, other: Kind) -> bool {
        !(self == Kind::Read && other == Kind::Read)
    }

    /// The hash field that counts `owner`'s holds of this kind: the owner id, or for
    /// the write side of a read-write lock the owner id and `:w` (a writer may also
    /// hold the read side, counted apart).
    pub(crate) fn field<'o>(self, owner: &'o str) -> std::borrow::Cow<'o, str> {
        match self {
            Kind::Write => std::borrow::Cow::Owned([owner, ":w"].concat()),
            _ => std::borrow::Cow::Borrowed(owner),
        }
    }
}

/// The lock name inside a lock key built by [`lock_names`], if `key` is one.
pub(crate) fn name_of_key<'k>(prefix: &str, key: &'k str) -> Option<&'k str> {
    key.strip_prefix(prefix)?
        .strip_prefix('{')?
        .strip_suffix('}')
        .filter(|name| !name.contains(['{', '}']))
}

/// A SCAN pattern matching the lock keys whose names match the glob `pattern`.
pub(crate) fn scan_pattern(prefix: &str, pattern: &str) -> String {
    let mut escaped = String::with_capacity(prefix.len() + pattern.len() + 2);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!("{escaped}{{{pattern}}}")
}

/// Every Redis name belonging to one lock. All keys share the hash tag `{name}`,
/// so they live in one Redis Cluster slot. (A held lock keeps one of these: the
/// names used less often are built when needed.)
#[derive(Debug, Clone)]
pub(crate) struct LockNames {
    pub(crate) name: String,
    /// `<prefix>{<name>}`: the lock's hash (with a suffix for kinds other than the
    /// mutex).
    pub(crate) key: String,
    pub(crate) kind: Kind,
}

impl LockNames {
    /// The sorted set of the holders' deadlines, for kinds whose holders expire one
    /// by one (the semaphore, the read-write lock).
    pub(crate) fn leases_key(&self) -> String {
        [self.key.as_str(), ":leases"].concat()
    }

    /// A fair lock's queue and its waiters' liveness (see `lua/fair_queue.lua`).
    pub(crate) fn queue_keys(&self) -> [String; 2] {
        [
            [self.key.as_str(), ":queue"].concat(),
            [self.key.as_str(), ":alive"].concat(),
        ]
    }

    /// What this client's registry of holds files the lock under: the name for the
    /// mutex (so that a re-entry finds its hold before any key is built), the key for
    /// other kinds (keys contain braces, names cannot: the two never collide).
    pub(crate) fn registry_key(&self) -> &str {
        match self.kind {
            Kind::Mutex => &self.name,
            Kind::Semaphore { .. } | Kind::Fair | Kind::Read | Kind::Write => &self.key,
        }
    }

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
