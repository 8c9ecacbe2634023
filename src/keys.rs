//! The key layout: every Redis name of a lock, built and read back here and nowhere
//! else (the Lua scripts derive the release channel the same way).
//!
//! A lock named `N` under the prefix `P` is the hash `P{N}`; its fencing token floor
//! is `P{N}:token`, its release channel `P{N}:released`. The braces are a Redis Cluster
//! hash tag, so every name of one lock is in one slot.

use crate::compat;
use crate::error::{LockError, Result};
pub use crate::lock_kind::LockKind;

/// `<prefix>{<name>}<suffix>`: the hash of the lock of a kind (told by `suffix`)
/// called `name`.
pub(crate) fn lock_key(prefix: &str, name: &str, suffix: &str) -> String {
    // Built on every lock call: plain appends, not `format!`.
    let mut key = String::with_capacity(prefix.len() + name.len() + 2 + suffix.len());
    key.push_str(prefix);
    key.push('{');
    key.push_str(name);
    key.push('}');
    key.push_str(suffix);
    key
}

/// What follows a semaphore's name in its key.
const SEMAPHORE: &str = ":sem";
/// What follows a fair lock's name in its key.
const FAIR: &str = ":fair";
/// What follows a read-write lock's name in its key.
const READ_WRITE: &str = ":rw";

/// What follows an election's name in its key.
pub(crate) const ELECTION: &str = ":election";

/// The channel on which the leader changes of the election whose hash is `key`, in
/// the database `database` (`None`: 0), are published: `P{N}:election:leader`, or
/// `P{N}:election:leader:db<n>` in database `n` > 0 (see `lua/election_elect.lua`).
/// Pub/sub ignores databases: without the number, an observer would hear the leaders
/// of the election of the same name in every other database of its server.
pub(crate) fn leader_channel(key: &str, database: Option<u8>) -> String {
    match database {
        None | Some(0) => [key, ":leader"].concat(),
        Some(database) => format!("{key}:leader:db{database}"),
    }
}

/// A client's own channel, `<prefix>client:<client id>`, on which a force-unlock tells
/// it that it broke its holds (see `waiting.rs` and `lua/force_unlock.lua`). Lock keys
/// and their channels all have a `{` after the prefix: this one never does.
pub(crate) fn client_channel(prefix: &str, client: uuid::Uuid) -> String {
    format!("{prefix}{CLIENT_CHANNEL}{client}")
}

/// The wait-for edge of `owner`, `<prefix>waits:<owner>` (see `deadlock.rs`):
/// like [`client_channel`], it has no `{` after the prefix, so it is never a lock's key.
pub(crate) fn wait_key(prefix: &str, owner: &str) -> String {
    [prefix, WAITS, owner].concat()
}

/// What follows the prefix in a wait-for edge's key (see [`wait_key`]).
pub(crate) const WAITS: &str = "waits:";

/// What follows the prefix in a client's own channel (see [`client_channel`]).
pub(crate) const CLIENT_CHANNEL: &str = "client:";

/// The lock name inside a lock key built by [`lock_key`], if `key` is one.
pub(crate) fn name_of_key<'k>(prefix: &str, key: &'k str) -> Option<&'k str> {
    key.strip_prefix(prefix)?
        .strip_prefix('{')?
        .strip_suffix('}')
        .filter(|name| !name.contains(['{', '}']))
}

/// A SCAN pattern matching the lock keys whose names match the glob `pattern`.
pub(crate) fn scan_pattern(prefix: &str, pattern: &str) -> String {
    format!("{}{{{pattern}}}", glob_escaped(prefix))
}

/// A SCAN pattern matching the keys of locks kept at their bare names (the prefix and
/// the name: Redisson's layout) whose names match the glob `pattern`.
pub(crate) fn bare_scan_pattern(prefix: &str, pattern: &str) -> String {
    [&glob_escaped(prefix), pattern].concat()
}

/// A SCAN pattern matching every wait-for edge's key (see [`wait_key`]).
pub(crate) fn waits_scan_pattern(prefix: &str) -> String {
    [&glob_escaped(prefix), WAITS, "*"].concat()
}

/// `text` with the characters a glob gives meaning to escaped.
fn glob_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The channel on which the fair lock at `key` hands itself to the waits of
/// `client` (see `lua/fair_queue.lua`): `<key>:released:<client id>`.
pub(crate) fn hand_off_channel(key: &str, client: impl std::fmt::Display) -> String {
    format!("{key}{RELEASED}:{client}")
}

/// The sorted set of the holders' deadlines beside the hash `key` (see `lua/leases.lua`).
pub(crate) fn leases_key_of(key: &str) -> String {
    [key, LEASES].concat()
}

/// The queue of waiting clients beside the mutex's hash `key` (see `lua/acquire.lua`).
pub(crate) fn clients_key(key: &str) -> String {
    [key, CLIENTS].concat()
}

/// The queue and the waiters' liveness beside the fair lock's hash `key`.
pub(crate) fn queue_keys_of(key: &str) -> [String; 2] {
    [[key, QUEUE].concat(), [key, ALIVE].concat()]
}

/// What follows a hash's key in the names of its holders' leases, a fair lock's queue
/// and its waiters' liveness, and a mutex's queue of waiting clients.
pub(crate) const LEASES: &str = ":leases";
const QUEUE: &str = ":queue";
const ALIVE: &str = ":alive";
const CLIENTS: &str = ":clients";

impl LockKind {
    /// What follows `P{N}` in the hash of a lock of this kind.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            LockKind::Mutex => "",
            LockKind::Fair => FAIR,
            LockKind::ReadWrite => READ_WRITE,
            LockKind::Semaphore => SEMAPHORE,
        }
    }
}

impl std::str::FromStr for LockKind {
    type Err = LockError;

    /// Reads a kind's [name](LockKind::as_str).
    ///
    /// # Errors
    /// [`LockError::InvalidOption`] (option `kind`) for any other text.
    fn from_str(text: &str) -> Result<Self> {
        LockKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| LockError::InvalidOption {
                option: "kind",
                reason: format!("{text:?} is no kind of lock: use mutex, fair, rw or semaphore"),
            })
    }
}

/// A SCAN pattern from [`scan_pattern`] widened to every key of those locks, of
/// every kind ([`kind_of_key`] picks out the ones to read).
pub(crate) fn every_kind(mut scan_pattern: String) -> String {
    scan_pattern.push('*');
    scan_pattern
}

/// For a key found under the prefix: the key the mutex of the same name has (for
/// [`name_of_key`]) and the kind of lock the key is the hash of, or the fair lock
/// whose queue it is (a fair lock may have waiters and no hash, when a hand-off
/// expired unclaimed). `None` for every other key of a lock (token floors, leases,
/// period markers, ...).
pub(crate) fn kind_of_key(key: &str) -> Option<(&str, LockKind)> {
    let base = &key[..key.rfind('}')? + 1];
    let suffix = &key[base.len()..];
    if suffix.strip_suffix(QUEUE) == Some(FAIR) {
        return Some((base, LockKind::Fair));
    }
    let kind = LockKind::ALL
        .into_iter()
        .find(|kind| kind.suffix() == suffix)?;
    Some((base, kind))
}

/// What follows a lock's key in its release channel.
const RELEASED: &str = ":released";

/// The channel told when the lock at `key` is released to waiters (`lua/release.lua`
/// derives the same name).
pub(crate) fn release_channel(key: &str) -> String {
    [key, RELEASED].concat()
}

/// The lock key whose release channel (or a client's hand-off channel, see
/// [`LockNames::hand_off_channel`]) is `channel`.
pub(crate) fn key_of_channel(channel: &str) -> &str {
    if let Some(key) = channel.strip_suffix(RELEASED) {
        return key;
    }
    match channel.rsplit_once(":released:") {
        // A client id has no colon, and no brace (a name's hash tag ends before it).
        Some((key, client)) if !client.contains([':', '{', '}']) => key,
        _ => channel,
    }
}

/// The keys of the locks whose releases are told on `channel` (Redisson's layout
/// gives two names one channel; see `compat.rs`).
pub(crate) fn keys_of_channel(channel: &str) -> [Option<std::borrow::Cow<'_, str>>; 2] {
    compat::keys_of_channel(channel).unwrap_or([
        Some(std::borrow::Cow::Borrowed(key_of_channel(channel))),
        None,
    ])
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
    // Checked on every lock call: braces are ASCII, so a scan of the bytes finds them
    // (at a fifth of the cost of matching a set of chars).
    let reason = if name.is_empty() {
        "the name is empty"
    } else if name.bytes().any(|byte| byte == b'{' || byte == b'}') {
        "the name contains a brace; the library puts the hash tag around it"
    } else {
        return Ok(());
    };
    Err(LockError::InvalidName {
        name: name.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_told_by_its_key() {
        for kind in LockKind::ALL {
            let key = lock_key("p:", "a:b", kind.suffix());
            assert_eq!(kind_of_key(&key), Some(("p:{a:b}", kind)));
            assert_eq!(kind.as_str().parse::<LockKind>().unwrap(), kind);
        }
        // A fair lock's queue stands for the fair lock; other keys of a lock for none.
        assert_eq!(
            kind_of_key("p:{a}:fair:queue"),
            Some(("p:{a}", LockKind::Fair))
        );
        for other in [
            "p:{a}:token",
            "p:{a}:fair:alive",
            "p:{a}:rw:leases",
            "p:{a}:sem:leases",
            "p:{a}:period:3",
            "p:{a}:rw:token",
            "p:a",
        ] {
            assert_eq!(kind_of_key(other), None, "{other}");
        }
        assert!("lock".parse::<LockKind>().is_err());
    }
}
