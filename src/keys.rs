//! The key layout: every Redis name of a lock, built and read back here and nowhere
//! else (the Lua scripts derive the release channel the same way).
//!
//! A lock named `N` under the prefix `P` is the hash `P{N}`; its fencing token floor
//! is `P{N}:token`, its release channel `P{N}:released`. The braces are a Redis Cluster
//! hash tag, so every name of one lock is in one slot.

use fred::bytes_utils::Str;

use crate::compat::{self, Compat};
use crate::error::{LockError, Result};

/// The keys and channel of the lock called `name`, or an error if `name` is unusable.
pub(crate) fn lock_names(prefix: &str, name: &str) -> Result<LockNames> {
    names_of(prefix, name, "", Kind::Mutex)
}

/// The names of the lock of `kind` called `name`, whose hash is `P{N}` and `suffix`.
fn names_of(prefix: &str, name: &str, suffix: &str, kind: Kind) -> Result<LockNames> {
    validate_name(name)?;
    // Built on every lock call: plain appends, not `format!`.
    let mut key = String::with_capacity(prefix.len() + name.len() + 2 + suffix.len());
    key.push_str(prefix);
    key.push('{');
    key.push_str(name);
    key.push('}');
    key.push_str(suffix);
    Ok(LockNames {
        name: name.to_owned(),
        key: key.into(),
        kind,
        compat: Compat::Holdlock,
    })
}

/// The keys and channel of the mutex called `name` in Redisson's layout (see
/// `compat.rs`): the hash is `<prefix><name>`, braces and all.
pub(crate) fn redisson_names(prefix: &str, name: &str) -> Result<LockNames> {
    if name.is_empty() {
        return Err(LockError::InvalidName {
            name: String::new(),
            reason: "the name is empty",
        });
    }
    Ok(LockNames {
        name: name.to_owned(),
        key: [prefix, name].concat().into(),
        kind: Kind::Mutex,
        compat: Compat::Redisson,
    })
}

/// The keys and channel of the semaphore called `name` with `permits` permits: its
/// hash is `P{N}:sem`, beside the mutex `P{N}` of the same name but never the same
/// key, and its holders' deadlines are the sorted set `P{N}:sem:leases`.
pub(crate) fn semaphore_names(prefix: &str, name: &str, permits: u32) -> Result<LockNames> {
    names_of(prefix, name, SEMAPHORE, Kind::Semaphore { permits })
}

/// What follows a semaphore's name in its key.
const SEMAPHORE: &str = ":sem";

/// The keys and channel of the fair lock called `name`: its hash is `P{N}:fair`
/// (beside the mutex `P{N}`, never the same key), its queue `P{N}:fair:queue` and its
/// waiters' liveness `P{N}:fair:alive`.
pub(crate) fn fair_names(prefix: &str, name: &str) -> Result<LockNames> {
    names_of(prefix, name, FAIR, Kind::Fair)
}

/// What follows a fair lock's name in its key.
const FAIR: &str = ":fair";

/// The keys and channel of the read or write side of the read-write lock `name`: one
/// hash `P{N}:rw` (beside the mutex `P{N}`, never the same key) for both sides, and
/// the holders' deadlines in `P{N}:rw:leases`.
pub(crate) fn rw_names(prefix: &str, name: &str, kind: Kind) -> Result<LockNames> {
    names_of(prefix, name, READ_WRITE, kind)
}

/// What follows a read-write lock's name in its key.
const READ_WRITE: &str = ":rw";

/// The keys and channel of the fair lock of the election called `name`: its hash is
/// `P{N}:election` (beside the fair lock `P{N}:fair`, never the same key), which also
/// keeps the leader's record, with the fair lock's queue, liveness and token floor
/// after it (`P{N}:election:queue`, ...).
pub(crate) fn election_names(prefix: &str, name: &str) -> Result<LockNames> {
    names_of(prefix, name, ELECTION, Kind::Fair)
}

/// What follows an election's name in its key.
const ELECTION: &str = ":election";

/// The channel on which the leader changes of the election whose hash is `key` are
/// published: `P{N}:election:leader` (see `lua/election_elect.lua`).
pub(crate) fn leader_channel(key: &str) -> String {
    [key, ":leader"].concat()
}

/// A client's own channel, `<prefix>client:<client id>`, on which a force-unlock tells
/// it that it broke its holds (see `waiting.rs` and `lua/force_unlock.lua`). Lock keys
/// and their channels all have a `{` after the prefix: this one never does.
pub(crate) fn client_channel(prefix: &str, client: uuid::Uuid) -> String {
    format!("{prefix}{CLIENT_CHANNEL}{client}")
}

/// What follows the prefix in a client's own channel (see [`client_channel`]).
pub(crate) const CLIENT_CHANNEL: &str = "client:";

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

    /// The kind in one word, as spans label it: `mutex`, `fair`, `read`, `write`,
    /// `semaphore`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Semaphore { .. } => "semaphore",
            Kind::Fair => "fair",
            Kind::Read => "read",
            Kind::Write => "write",
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

    /// [`field`](Self::field) for an owner id kept as shared bytes: the same bytes
    /// where the field is the owner id, without a copy.
    pub(crate) fn shared_field(self, owner: &Str) -> Str {
        match self.field(owner) {
            std::borrow::Cow::Borrowed(_) => owner.clone(),
            std::borrow::Cow::Owned(field) => field.into(),
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
    /// mutex). Shared bytes, cloned without a copy (an election keeps it); the batch
    /// scripts copy it into one buffer per call instead (see `scripts::batch`).
    pub(crate) key: Str,
    pub(crate) kind: Kind,
    /// The layout the key is in: holdlock's, or (a mutex only) Redisson's.
    pub(crate) compat: Compat,
}

impl LockNames {
    /// The sorted set of the holders' deadlines, for kinds whose holders expire one
    /// by one (the semaphore, the read-write lock).
    pub(crate) fn leases_key(&self) -> String {
        leases_key_of(&self.key)
    }

    /// A fair lock's queue and its waiters' liveness (see `lua/fair_queue.lua`).
    pub(crate) fn queue_keys(&self) -> [String; 2] {
        queue_keys_of(&self.key)
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

    /// Whether the lock's waiting clients queue in Redis (holdlock's mutex, see
    /// `lua/acquire.lua`; Redisson's layout has no queue: every release wakes each
    /// client's head).
    pub(crate) fn queues_clients(&self) -> bool {
        self.kind == Kind::Mutex && self.compat == Compat::Holdlock
    }

    /// The mutex's queue of waiting clients (see `lua/acquire.lua`).
    pub(crate) fn clients_key(&self) -> String {
        clients_key(&self.key)
    }

    /// The key of the last fencing token issued for this lock (see `lua/acquire.lua`;
    /// in Redisson's layout, `RFencedLock`'s counter).
    pub(crate) fn token_key(&self) -> String {
        match self.compat {
            Compat::Holdlock => [&*self.key, ":token"].concat(),
            Compat::Redisson => compat::token_key(&self.key),
        }
    }

    /// The channel this lock's releases are told on.
    pub(crate) fn release_channel(&self) -> String {
        match self.compat {
            Compat::Holdlock => release_channel(&self.key),
            Compat::Redisson => compat::channel(&self.key),
        }
    }

    /// The channel on which the fair lock at this key hands itself to the waits of
    /// `client` (see `lua/fair_queue.lua`): `<key>:released:<client id>`, in the
    /// lock's Cluster slot. A hand-off reaches the one client it names, however many
    /// clients wait.
    pub(crate) fn hand_off_channel(&self, client: impl std::fmt::Display) -> String {
        format!("{}{RELEASED}:{client}", self.key)
    }

    /// A key of this lock's own beside its hash, in its Cluster slot:
    /// `<key>:<suffix>`.
    pub(crate) fn beside(&self, suffix: &str) -> String {
        match self.compat {
            Compat::Holdlock => [&*self.key, ":", suffix].concat(),
            Compat::Redisson => compat::beside(&self.key, suffix),
        }
    }
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
fn queue_keys_of(key: &str) -> [String; 2] {
    [[key, QUEUE].concat(), [key, ALIVE].concat()]
}

/// What follows a hash's key in the names of its holders' leases, a fair lock's queue
/// and its waiters' liveness, and a mutex's queue of waiting clients.
pub(crate) const LEASES: &str = ":leases";
const QUEUE: &str = ":queue";
const ALIVE: &str = ":alive";
const CLIENTS: &str = ":clients";

/// The kinds of lock, as the operator calls take them
/// ([`LockClient::inspect_kind`](crate::LockClient::inspect_kind),
/// [`LockClient::force_unlock_kind`](crate::LockClient::force_unlock_kind)) and a
/// [`LockInfo`](crate::LockInfo) names them. Each kind keeps its own keys, so a
/// mutex, a fair lock, a read-write lock and a semaphore may share a name without
/// meeting. Written (`Display`, `FromStr`, serde) as `mutex`, `fair`, `rw` and
/// `semaphore`.
///
/// # Examples
/// ```
/// use holdlock::LockKind;
///
/// let kind: LockKind = "rw".parse()?;
/// assert_eq!(kind, LockKind::ReadWrite);
/// assert_eq!(kind.to_string(), "rw");
/// assert_eq!(LockKind::default(), LockKind::Mutex);
/// assert_eq!(LockKind::ALL.len(), 4);
/// assert!("rwlock".parse::<LockKind>().is_err());
/// # Ok::<(), holdlock::LockError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum LockKind {
    /// The reentrant lock of [`LockClient::lock`](crate::LockClient::lock), hash
    /// `P{N}`.
    #[default]
    #[cfg_attr(feature = "serde", serde(rename = "mutex"))]
    Mutex,
    /// The first-come-first-served lock of
    /// [`LockClient::fair_lock`](crate::LockClient::fair_lock), hash `P{N}:fair`
    /// with its queue.
    #[cfg_attr(feature = "serde", serde(rename = "fair"))]
    Fair,
    /// The read-write lock of [`LockClient::read_lock`](crate::LockClient::read_lock)
    /// and [`write_lock`](crate::LockClient::write_lock), hash `P{N}:rw`.
    #[cfg_attr(feature = "serde", serde(rename = "rw"))]
    ReadWrite,
    /// The semaphore of [`LockClient::semaphore`](crate::LockClient::semaphore), hash
    /// `P{N}:sem`.
    #[cfg_attr(feature = "serde", serde(rename = "semaphore"))]
    Semaphore,
}

impl LockKind {
    /// Every kind, in the order listings sort them.
    ///
    /// # Examples
    /// ```
    /// let names: Vec<&str> = holdlock::LockKind::ALL.iter().map(|k| k.as_str()).collect();
    /// assert_eq!(names, ["mutex", "fair", "rw", "semaphore"]);
    /// ```
    pub const ALL: [LockKind; 4] = [
        LockKind::Mutex,
        LockKind::Fair,
        LockKind::ReadWrite,
        LockKind::Semaphore,
    ];

    /// The kind's name: `mutex`, `fair`, `rw` or `semaphore` (the CLI's `--kind`, the
    /// JSON's `kind`).
    ///
    /// # Examples
    /// ```
    /// assert_eq!(holdlock::LockKind::Semaphore.as_str(), "semaphore");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Fair => "fair",
            LockKind::ReadWrite => "rw",
            LockKind::Semaphore => "semaphore",
        }
    }

    /// What follows `P{N}` in the hash of a lock of this kind.
    fn suffix(self) -> &'static str {
        match self {
            LockKind::Mutex => "",
            LockKind::Fair => FAIR,
            LockKind::ReadWrite => READ_WRITE,
            LockKind::Semaphore => SEMAPHORE,
        }
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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

/// The names of the lock `name` of `kind`, for the operator calls (a semaphore's
/// number of permits is not known there: 0).
pub(crate) fn kind_names(prefix: &str, name: &str, kind: LockKind) -> Result<LockNames> {
    match kind {
        LockKind::Mutex => lock_names(prefix, name),
        LockKind::Fair => fair_names(prefix, name),
        LockKind::ReadWrite => rw_names(prefix, name, Kind::Write),
        LockKind::Semaphore => semaphore_names(prefix, name, 0),
    }
}

/// The kind of lock whose hash is `key` (told by what follows the name's closing
/// brace), and the sorted sets beside it that the operator scripts (`lua/inspect.lua`,
/// `lua/force_unlock.lua`) take after it: none for the mutex, the queue and the
/// waiters' liveness for the fair lock, the leases for the read-write lock and the
/// semaphore. `None` if `key` is no lock's hash.
pub(crate) fn operator_keys(key: &str) -> Option<(LockKind, Vec<String>)> {
    let kind = LockKind::ALL.into_iter().find(|kind| {
        key.strip_suffix(kind.suffix())
            .is_some_and(|hash| hash.ends_with('}'))
    })?;
    let companions = match kind {
        LockKind::Mutex => Vec::new(),
        LockKind::Fair => queue_keys_of(key).to_vec(),
        LockKind::ReadWrite | LockKind::Semaphore => vec![leases_key_of(key)],
    };
    Some((kind, companions))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_told_by_its_key() {
        for kind in LockKind::ALL {
            let names = kind_names("p:", "a:b", kind).unwrap();
            assert_eq!(kind_of_key(&names.key), Some(("p:{a:b}", kind)));
            let (found, companions) = operator_keys(&names.key).unwrap();
            assert_eq!(found, kind);
            let expected: Vec<String> = match kind {
                LockKind::Mutex => vec![],
                LockKind::Fair => names.queue_keys().to_vec(),
                _ => vec![names.leases_key()],
            };
            assert_eq!(companions, expected);
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
        assert!(operator_keys("p:{a}:fair:queue").is_none());
        assert!("lock".parse::<LockKind>().is_err());
    }
}
