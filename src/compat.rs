//! Which layout and protocol the mutex, the fair lock, the read-write lock and the
//! semaphore speak: holdlock's own, or Redisson's, so that Rust services and Java
//! services using Redisson's `RLock`, `RFairLock`, `RReadWriteLock` or
//! `RPermitExpirableSemaphore` exclude each other on the same names.
//!
//! Everything that differs between the two dialects is named here: the key of a
//! lock, its release channel and message, its fencing counter, the keys kept beside
//! it, and the local part of owner ids. The scripts of each dialect are in `lua/` and
//! `lua/redisson/`, chosen once when the client is built (see `scripts/mod.rs`); the
//! engine, watchdog, waiting, holds and guards are shared.
//!
//! The Redisson layout follows Redisson 4.7.0 (`RedissonLock`, `RedissonBaseLock`,
//! `RedissonFencedLock`, `LockPubSub`, `RedissonObject::prefixName`):
//!
//! | | holdlock | Redisson |
//! |---|---|---|
//! | lock key | `<prefix>{<name>}` | `<prefix><name>` (no prefix by default) |
//! | hash fields | owners, and `token`, `waiting`, `data:<owner>` | owners only |
//! | owner id | `<uuid>:task-<id>` | `<uuid>:<integer>` |
//! | release channel | `<key>:released` | `redisson_lock__channel:{<key>}` |
//! | release message | the client to hand to, sent if someone waits | `0`, always |
//! | fencing counter | `<key>:token` (clock-based) | `redisson_lock_token:{<key>}` (`INCR`) |
//!
//! The read-write lock in Redisson's layout (`RedissonReadLock`, `RedissonWriteLock`,
//! `ReadLockTask`): the hash at the key has a `mode` field (`read` or `write`), one
//! field per reader and `<owner>:write` for the writer; each read hold has a timeout
//! key `{<key>}:<owner>:rwlock_timeout:<n>`; releases are told on
//! `redisson_rwlock:{<key>}` (`0` after a reader, `1` then `0` after a writer).
//!
//! The fair lock in Redisson's layout (`RedissonFairLock`): `RLock`'s hash at the key,
//! the queue of waiting owners `redisson_lock_queue:{<key>}` (a list) and their
//! deadlines `redisson_lock_timeout:{<key>}` (a sorted set); a release tells the head
//! of the queue alone, `0` on `redisson_lock__channel:{<key>}:<owner>`.
//!
//! The semaphore in Redisson's layout (`RedissonPermitExpirableSemaphore`): the key
//! holds the number of permits free, the sorted set `{<key>}:timeout` each permit's
//! deadline, and `redisson_sc:{<key>}` is told the number free when permits come
//! back.

use std::borrow::Cow;

use crate::owner::LocalOwner;

/// The layout and protocol of the mutex: holdlock's own, or that of Redisson's `RLock`
/// (Java), chosen with [`LockClientBuilder::compat`](crate::LockClientBuilder::compat).
///
/// In [`Compat::Redisson`] the mutex ([`lock`](crate::LockClient::lock) in every mode
/// of [`Acquire`](crate::Acquire), [`lock_all`](crate::LockClient::lock_all)
/// and every other way to take it) keeps its locks exactly as Redisson 4.7 does, so
/// that a Java service's `redisson.getLock("account:42")` and a Rust service's
/// `client.lock("account:42")` exclude each other; so do the read-write lock, in the
/// layout of Redisson's `RReadWriteLock`, the fair lock, in the layout of its
/// `RFairLock`, and the semaphore, in the layout of its `RPermitExpirableSemaphore`.
/// Elections keep holdlock's own layout in both modes.
/// docs/deployments.md, "Sharing locks with Redisson", says what is compatible.
///
/// # Examples
/// ```no_run
/// # async fn dox() -> holdlock::Result<()> {
/// use holdlock::{Compat, LockClient};
///
/// let client = LockClient::builder("redis://127.0.0.1:6379")
///     .compat(Compat::Redisson)
///     .build()
///     .await?;
/// // The hash `account:42`, as a Java `RLock` of that name would keep it.
/// let guard = client.lock("account:42").await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compat {
    /// holdlock's own layout: keys `<prefix>{<name>}`, release messages that name the
    /// client to hand the lock to, clock-based fencing tokens.
    #[default]
    Holdlock,
    /// The layout and protocol of Redisson's `RLock`, `RFencedLock`, `RReadWriteLock`,
    /// `RFairLock` and `RPermitExpirableSemaphore` (Redisson 4.7).
    Redisson,
}

impl Compat {
    /// Writes the local part of an owner id for `owner` (after the client's uuid and a
    /// colon): holdlock's `task-<id>`, `scope-<n>` or `thread-<n>`, or Redisson's
    /// integer (see [`owner_number`]).
    pub(crate) fn write_owner(self, id: &mut String, owner: LocalOwner) {
        use std::fmt::Write;
        let _ = match self {
            Compat::Holdlock => write!(id, "{owner}"),
            Compat::Redisson => write!(id, "{}", owner_number(owner)),
        };
    }

    /// Whether names have the client's default prefix (`holdlock:`) when none is
    /// given: Redisson puts none before its names.
    pub(crate) fn prefixes_by_default(self) -> bool {
        self == Compat::Holdlock
    }

    /// Whether release messages go over shard channels on a single server too (where
    /// the server has them): Redisson's `shardedSubscriptionMode` AUTO uses them only
    /// on a cluster, so its waiters listen there.
    pub(crate) fn shards_single_servers(self) -> bool {
        self == Compat::Holdlock
    }
}

/// What Redisson puts before a lock's name in its release channel.
const CHANNEL: &str = "redisson_lock__channel";
/// What Redisson puts before a read-write lock's name in its release channel.
const RW_CHANNEL: &str = "redisson_rwlock";
/// What Redisson puts before a semaphore's name in its channel.
const SEM_CHANNEL: &str = "redisson_sc";
/// What Redisson puts before a fair lock's name in its queue's key.
const FAIR_QUEUE: &str = "redisson_lock_queue";
/// What Redisson puts before a fair lock's name in its waiters' deadlines' key.
const FAIR_TIMEOUT: &str = "redisson_lock_timeout";
/// What Redisson puts before a fenced lock's name in its token counter's key.
const TOKEN: &str = "redisson_lock_token";
/// The message Redisson's unlock publishes (`LockPubSub.UNLOCK_MESSAGE`).
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// What a write lock's last release (and a read-write lock's force-unlock) tells
/// Redisson's waiters: `1` (`LockPubSub.READ_UNLOCK_MESSAGE`, Redisson's own), which
/// wakes every waiter then waiting, then `0` (`UNLOCK_MESSAGE`), which leaves a permit
/// for a waiter between its attempt and its wait: Redisson gives `1` only to threads
/// already queued, and one that misses it sleeps for the lease (see
/// `lua/redisson/rw_release.lua`).
pub(crate) const WRITE_UNLOCK_MESSAGES: &[&str] = &["1", UNLOCK_MESSAGE];

/// `<prefix>:<name>`, with braces around the name unless it has one, so that the
/// result is in the name's Cluster slot (Redisson's `prefixName`).
fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        [prefix, ":", name].concat()
    } else {
        [prefix, ":{", name, "}"].concat()
    }
}

/// The release channel of the Redisson lock at `key`.
pub(crate) fn channel(key: &str) -> String {
    prefix_name(CHANNEL, key)
}

/// The release channel of the Redisson read-write lock at `key`.
pub(crate) fn rw_channel(key: &str) -> String {
    prefix_name(RW_CHANNEL, key)
}

/// The channel of the Redisson semaphore at `key`.
pub(crate) fn sem_channel(key: &str) -> String {
    prefix_name(SEM_CHANNEL, key)
}

/// The queue of waiting owners of the Redisson fair lock at `key` (`RFairLock`'s
/// `redisson_lock_queue:{<key>}`, a list) and the sorted set of their deadlines
/// (`redisson_lock_timeout:{<key>}`).
pub(crate) fn fair_queue_keys(key: &str) -> [String; 2] {
    [prefix_name(FAIR_QUEUE, key), prefix_name(FAIR_TIMEOUT, key)]
}

/// The channel on which the Redisson fair lock at `key` tells `owner` that it may
/// take the lock (`RFairLock`'s per-thread channel: the lock's channel, a colon and
/// the owner id; in the key's slot).
pub(crate) fn fair_waiter_channel(key: &str, owner: &str) -> String {
    [channel(key).as_str(), ":", owner].concat()
}

/// The fencing counter of the Redisson lock at `key` (`RFencedLock`'s token).
pub(crate) fn token_key(key: &str) -> String {
    prefix_name(TOKEN, key)
}

/// A key beside the Redisson lock at `key`, in its Cluster slot (Redisson's
/// `suffixName`): `{<key>}:<suffix>`, or `<key>:<suffix>` if the key has a brace.
pub(crate) fn beside(key: &str, suffix: &str) -> String {
    if key.contains('{') {
        [key, ":", suffix].concat()
    } else {
        ["{", key, "}:", suffix].concat()
    }
}

/// The keys of the Redisson locks (or read-write locks) whose release channel is
/// `channel`, if it is one: Redisson gives `x` and `{x}` the same channel, so a channel
/// may stand for two.
pub(crate) fn keys_of_channel(channel: &str) -> Option<[Option<Cow<'_, str>>; 2]> {
    let rest = [CHANNEL, RW_CHANNEL, SEM_CHANNEL]
        .iter()
        .find_map(|prefix| channel.strip_prefix(prefix)?.strip_prefix(':'))?;
    let braced = rest
        .strip_prefix('{')
        .and_then(|inner| inner.strip_suffix('}'))
        .filter(|inner| !inner.contains(['{', '}']));
    Some(match braced {
        Some(inner) => [Some(Cow::Borrowed(inner)), Some(Cow::Borrowed(rest))],
        None => [Some(Cow::Borrowed(rest)), None],
    })
}

/// The part of a Redisson owner id after the client's uuid: an integer, as Java's
/// thread ids are. A task is its tokio task id; a scope or thread (numbered from one
/// counter, so never the same) is above 2^62, where task ids never reach.
pub(crate) fn owner_number(owner: LocalOwner) -> u64 {
    const SCOPES_AND_THREADS: u64 = 1 << 62;
    match owner {
        LocalOwner::Task(id) => id.to_string().parse().unwrap_or(SCOPES_AND_THREADS - 1),
        LocalOwner::Scope(n) | LocalOwner::Thread(n) => SCOPES_AND_THREADS | n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redissons_prefix_and_suffix_rules() {
        assert_eq!(channel("account:42"), "redisson_lock__channel:{account:42}");
        assert_eq!(channel("{user}:42"), "redisson_lock__channel:{user}:42");
        assert_eq!(rw_channel("account:42"), "redisson_rwlock:{account:42}");
        assert_eq!(sem_channel("exports"), "redisson_sc:{exports}");
        assert_eq!(token_key("a"), "redisson_lock_token:{a}");
        assert_eq!(
            fair_queue_keys("a"),
            ["redisson_lock_queue:{a}", "redisson_lock_timeout:{a}"]
        );
        let waiter = fair_waiter_channel("{user}:42", "u:7");
        assert_eq!(waiter, "redisson_lock__channel:{user}:42:u:7");
        assert_eq!(beside("a", "period:3"), "{a}:period:3");
        assert_eq!(beside("{a}:b", "period:3"), "{a}:b:period:3");
    }

    #[test]
    fn a_channel_names_the_keys_that_publish_on_it() {
        fn keys(channel: &str) -> Option<Vec<String>> {
            keys_of_channel(channel)
                .map(|keys| keys.into_iter().flatten().map(Cow::into_owned).collect())
        }
        assert_eq!(
            keys(&channel("a:1")),
            Some(vec!["a:1".into(), "{a:1}".into()])
        );
        assert_eq!(keys(&channel("{u}:1")), Some(vec!["{u}:1".into()]));
        assert_eq!(
            keys(&rw_channel("a:1")),
            Some(vec!["a:1".into(), "{a:1}".into()])
        );
        assert_eq!(keys("holdlock:{a}:released"), None);
        for key in ["a", "{a}", "{u}:1", "x{y}z"] {
            let found = keys(&channel(key)).unwrap();
            assert!(found.contains(&key.to_owned()), "{key}: {found:?}");
        }
    }

    #[test]
    fn owner_numbers_are_integers_apart_for_tasks_scopes_and_threads() {
        assert_eq!(owner_number(LocalOwner::Scope(7)), (1 << 62) | 7);
        assert_eq!(owner_number(LocalOwner::Thread(8)), (1 << 62) | 8);
        assert!(owner_number(LocalOwner::Scope(7)) <= i64::MAX as u64);
    }
}
