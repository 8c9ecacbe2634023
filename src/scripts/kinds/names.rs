//! The names of a lock ([`LockNames`]): its keys and channels, built for each kind
//! and layout, and what they say of the lock, read from its kind's descriptor.

use std::borrow::Cow;

use fred::bytes_utils::Str;
use fred::clients::Client;
use fred::types::Value;

use super::{Call, Counted, Kind, Script};
use crate::compat;
use crate::error::{LockError, Result};
use crate::keys::{self, LockKind, validate_name};
use crate::options::{ClientConfig, LockOptions, ResolvedOptions};
use crate::scripts::{Acquire, Asking, Scripts};

/// Every Redis name belonging to one lock, and its kind. All keys share the hash tag
/// `{name}`, so they live in one Redis Cluster slot. (A held lock keeps one of these:
/// the names used less often are built when needed.)
#[derive(Debug, Clone)]
pub(crate) struct LockNames {
    pub(crate) name: String,
    /// `<prefix>{<name>}`: the lock's hash (with a suffix for kinds other than the
    /// mutex). Shared bytes, cloned without a copy (an election keeps it); the batch
    /// scripts copy it into one buffer per call instead (see `scripts::batch`).
    pub(crate) key: Str,
    pub(crate) kind: Kind,
    /// A semaphore's number of permits (0 for other kinds, and for the operator calls,
    /// which do not know it).
    pub(crate) permits: u32,
}

impl LockNames {
    /// Takes the lock afresh for `owner` with its kind's script (the read-write lock:
    /// or re-enters it), sent at most once.
    pub(crate) fn acquire<'a>(
        &'a self,
        scripts: &'a Scripts,
        client: &'a Client,
        owner: &'a str,
        options: (&'a ResolvedOptions, &'a Asking),
    ) -> Call<'a, Acquire> {
        (self.kind.0.acquire)(scripts, client, self, owner, options)
    }

    /// Drops one of `owner`'s `held` holds with its kind's script, sent at most once:
    /// the count left, or `None` if it held none.
    pub(crate) fn release<'a>(
        &'a self,
        scripts: &'a Scripts,
        client: &'a Client,
        owner: &'a str,
        held: u32,
    ) -> Call<'a, Option<u32>> {
        (self.kind.0.release)(scripts, client, self, owner, held)
    }

    /// Extends `owner`'s lease to `lease_ms` with its kind's script; whether it still
    /// held.
    pub(crate) fn renew<'a>(
        &'a self,
        scripts: &'a Scripts,
        client: &'a Client,
        owner: &'a str,
        lease_ms: u64,
    ) -> Call<'a, bool> {
        (self.kind.0.renew)(scripts, client, self, owner, lease_ms)
    }

    /// The hash field counting `owner`'s holds.
    pub(crate) fn field<'o>(&self, owner: &'o str) -> Cow<'o, str> {
        self.kind.field(owner)
    }

    /// The sorted set of the holders' deadlines, for kinds whose holders expire one
    /// by one (the semaphore, the read-write lock).
    pub(crate) fn leases_key(&self) -> String {
        keys::leases_key_of(&self.key)
    }

    /// A fair lock's queue and its waiters' liveness (see `lua/fair_queue.lua`).
    pub(crate) fn queue_keys(&self) -> [String; 2] {
        keys::queue_keys_of(&self.key)
    }

    /// What this client's registry of holds files the lock under: the name for the
    /// mutex (so that a re-entry finds its hold before any key is built), the key for
    /// other kinds (keys contain braces, names cannot: the two never collide).
    pub(crate) fn registry_key(&self) -> &str {
        match self.kind.0.filed_by_name {
            true => &self.name,
            false => &self.key,
        }
    }

    /// Whether the lock's waiting clients queue in Redis (holdlock's mutex, see
    /// `lua/acquire.lua`; Redisson's layout has no queue: every release wakes each
    /// client's head).
    pub(crate) fn queues_clients(&self) -> bool {
        self.kind.0.queues_clients
    }

    /// The mutex's queue of waiting clients (see `lua/acquire.lua`).
    pub(crate) fn clients_key(&self) -> String {
        keys::clients_key(&self.key)
    }

    /// The key of the last fencing token issued for this lock (see `lua/acquire.lua`;
    /// in Redisson's layout, `RFencedLock`'s counter).
    pub(crate) fn token_key(&self) -> String {
        (self.kind.0.layout.token_key)(&self.key)
    }

    /// Where a fenced hold's token is read: `HGET <key> <field>`, or `GET <token key>`
    /// where the counter is a key of its own.
    pub(crate) fn token_read(&self) -> (&'static str, Cow<'_, str>, Option<&'static str>) {
        match self.kind.0.layout.keeps_fields {
            true => (
                "HGET",
                Cow::Borrowed(&*self.key),
                Some(crate::scripts::TOKEN_FIELD),
            ),
            false => ("GET", Cow::Owned(self.token_key()), None),
        }
    }

    /// The channel this lock's releases are told on.
    pub(crate) fn release_channel(&self) -> String {
        (self.kind.0.layout.release_channel)(&self.key)
    }

    /// What a force-unlock publishes on [`release_channel`](Self::release_channel),
    /// in order, beside telling the holders' clients, in layouts whose waiters wait
    /// for it (empty: the force script tells holdlock's channel its own message).
    pub(crate) fn forced_messages(&self) -> &'static [&'static str] {
        self.kind.0.layout.forced_messages
    }

    /// The channel on which `owner`, waiting for this lock, is told it may take it,
    /// where each waiter has its own (Redisson's fair lock): `None` where waiters
    /// listen on the lock's [`release_channel`](Self::release_channel).
    pub(crate) fn own_channel(&self, owner: &str) -> Option<String> {
        self.kind
            .waits_on_own_channel()
            .then(|| compat::fair_waiter_channel(&self.key, owner))
    }

    /// The channel on which the fair lock at this key hands itself to the waits of
    /// `client` (see `lua/fair_queue.lua`): `<key>:released:<client id>`, in the
    /// lock's Cluster slot. A hand-off reaches the one client it names, however many
    /// clients wait.
    pub(crate) fn hand_off_channel(&self, client: impl std::fmt::Display) -> String {
        keys::hand_off_channel(&self.key, client)
    }

    /// A key of this lock's own beside its hash, in its Cluster slot:
    /// `<key>:<suffix>`.
    pub(crate) fn beside(&self, suffix: &str) -> String {
        (self.kind.0.layout.beside)(&self.key, suffix)
    }

    /// The keys kept beside the hash that the operator scripts (`lua/inspect.lua`,
    /// `lua/force_unlock.lua`) take after it: none for the mutex, the queue and the
    /// waiters' liveness for the fair lock, the leases for the read-write lock and the
    /// semaphore.
    pub(crate) fn operator_keys(&self) -> Vec<String> {
        (self.kind.0.layout.operator_keys)(&self.key)
    }

    /// How `lua/force_unlock.lua` breaks the lock: as its kind says, or, in Redisson's
    /// layouts that keep nothing beside the hash, as a mutex (the hash alone).
    pub(crate) fn forced_as(&self) -> &'static str {
        match self.kind.0.layout.forced_as_mutex {
            false => self.kind.public().as_str(),
            true => LockKind::Mutex.as_str(),
        }
    }

    /// The script that breaks the lock (see `scripts/operator.rs`).
    pub(crate) fn force_script(&self) -> &'static Script {
        self.kind.0.layout.force
    }

    /// Where `owner`'s count of holds is read: the command, its key and its argument
    /// (`HGET` of the holder's field, or a permit's `ZSCORE` in Redisson's semaphore
    /// layout); [`hold_count`](Self::hold_count) reads the reply.
    pub(crate) fn count_read<'o>(
        &self,
        owner: &'o str,
    ) -> (&'static str, Cow<'_, str>, Cow<'o, str>) {
        match self.kind.0.counted {
            Counted::HashField => ("HGET", Cow::Borrowed(&*self.key), self.field(owner)),
            Counted::Deadline => (
                "ZSCORE",
                Cow::Owned(self.beside("timeout")),
                Cow::Borrowed(owner),
            ),
        }
    }

    /// The count of holds in the reply of [`count_read`](Self::count_read); `None` if
    /// the reply is not one.
    pub(crate) fn hold_count(&self, reply: &Value) -> Option<u32> {
        match (reply, self.kind.0.counted) {
            (Value::Null, _) => Some(0),
            (_, Counted::Deadline) => Some(1),
            (other, Counted::HashField) => other.as_u64().and_then(|n| u32::try_from(n).ok()),
        }
    }

    /// How a semaphore's holds are counted now: the script and its key (`None` for
    /// other kinds).
    pub(crate) fn held_count(&self) -> Option<(&'static Script, String)> {
        let held = self.kind.0.held.as_ref()?;
        Some((held.script, (held.key)(self)))
    }

    /// The script that reads the lock for the operator (see `scripts/operator.rs`).
    pub(crate) fn inspect_script(&self) -> &'static Script {
        self.kind.0.layout.inspect
    }

    /// What ends the hash field counting an owner's holds of the write side of this
    /// read-write lock (`:w`, or Redisson's `:write`; nothing for other kinds).
    pub(crate) fn write_suffix(&self) -> &'static str {
        let spec = self.kind.0;
        let write = if spec.exclusive {
            Some(spec)
        } else {
            spec.other_side
        };
        write.map_or("", |write| write.field_suffix)
    }
}

/// The names of the lock of `kind` called `name`, whose hash is `P{N}` and `suffix`.
pub(super) fn names_of(prefix: &str, name: &str, suffix: &str, kind: Kind) -> Result<LockNames> {
    validate_name(name)?;
    Ok(LockNames {
        name: name.to_owned(),
        key: keys::lock_key(prefix, name, suffix).into(),
        kind,
        permits: 0,
    })
}

/// The keys and channel of the lock of `kind` called `name` in Redisson's layout (see
/// `compat.rs`): the hash is `<prefix><name>`, braces and all.
pub(super) fn redisson_names(prefix: &str, name: &str, kind: Kind) -> Result<LockNames> {
    if name.is_empty() {
        return Err(LockError::InvalidName {
            name: String::new(),
            reason: "the name is empty",
        });
    }
    Ok(LockNames {
        name: name.to_owned(),
        key: [prefix, name].concat().into(),
        kind,
        permits: 0,
    })
}

/// The names of the lock of `kind` called `name` in the layout of its descriptor, its
/// hash named with its public kind's suffix (see `keys.rs`): every builder below.
fn in_layout(prefix: &str, name: &str, kind: Kind) -> Result<LockNames> {
    (kind.0.layout.names)(prefix, name, kind.public().suffix(), kind)
}

/// The keys and channel of the semaphore called `name` with `permits` permits: its
/// hash is `P{N}:sem`, beside the mutex `P{N}` of the same name but never the same
/// key, and its holders' deadlines are the sorted set `P{N}:sem:leases`.
pub(crate) fn semaphore_names(
    prefix: &str,
    name: &str,
    permits: u32,
    kind: Kind,
) -> Result<LockNames> {
    let names = in_layout(prefix, name, kind)?;
    Ok(LockNames { permits, ..names })
}

/// The keys and channel of the fair lock called `name`: its hash is `P{N}:fair`
/// (beside the mutex `P{N}`, never the same key), its queue `P{N}:fair:queue` and its
/// waiters' liveness `P{N}:fair:alive`.
pub(crate) fn fair_names(prefix: &str, name: &str, kind: Kind) -> Result<LockNames> {
    in_layout(prefix, name, kind)
}

/// The keys and channel of the read or write side (`side`) of the read-write lock
/// `name`: one hash `P{N}:rw` (beside the mutex `P{N}`, never the same key) for both
/// sides, and the holders' deadlines in `P{N}:rw:leases`; in Redisson's layout, the
/// hash `<prefix><name>`.
pub(crate) fn rw_names(prefix: &str, name: &str, side: Kind) -> Result<LockNames> {
    in_layout(prefix, name, side)
}

/// The keys and channel of the fair lock of the election called `name`: its hash is
/// `P{N}:election` (beside the fair lock `P{N}:fair`, never the same key), which also
/// keeps the leader's record, with the fair lock's queue, liveness and token floor
/// after it (`P{N}:election:queue`, ...).
pub(crate) fn election_names(prefix: &str, name: &str) -> Result<LockNames> {
    names_of(prefix, name, keys::ELECTION, Kind::FAIR)
}

// `ClientConfig` and `LockOptions` are ground types (`options.rs`); what they do with
// the descriptors is here, in the redis layer, which the ground may not import.

impl ClientConfig {
    /// The names of the mutex `name` in this client's layout.
    pub(crate) fn names(&self, name: &str) -> Result<LockNames> {
        in_layout(&self.prefix, name, Kind::mutex(self.compat))
    }

    /// The public kinds whose locks this client keeps at their bare names (the prefix
    /// and the name: Redisson's layout), for a listing to look for (see
    /// `Layout::at_the_name`).
    pub(crate) fn kinds_at_the_name(&self) -> Vec<LockKind> {
        LockKind::ALL
            .into_iter()
            .filter(|kind| Kind::of_public(*kind, self.compat).0.layout.at_the_name)
            .collect()
    }

    /// The names of the lock `name` of `kind`, for the operator calls, in this
    /// client's layout (a semaphore's number of permits is not known there: 0; a
    /// read-write lock's are its write side's, see [`Kind::of_public`]).
    pub(crate) fn kind_names(&self, name: &str, kind: LockKind) -> Result<LockNames> {
        in_layout(&self.prefix, name, Kind::of_public(kind, self.compat))
    }
}

impl LockOptions {
    /// The options of a call taking a hold of `kind`, checked against what it can
    /// honour (see [`resolve_as`](Self::resolve_as)).
    pub(crate) fn resolve_for(&self, client: &ClientConfig, kind: Kind) -> Result<ResolvedOptions> {
        let mut resolved = self.resolve_as(client, kind.is_exclusive(), kind.describe())?;
        if kind.is_exclusive() && !kind.draws_tokens() {
            if self.fenced {
                return Err(LockError::InvalidOption {
                    option: "fenced",
                    reason: format!(
                        "a {} in Redisson's layout draws no fencing token: Redisson keeps \
                         no counter for it",
                        kind.describe()
                    ),
                });
            }
            resolved.fenced = false;
        }
        Ok(resolved)
    }
}
