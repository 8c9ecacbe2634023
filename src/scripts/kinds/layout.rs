//! The layouts of locks in Redis ([`Layout`]): the keys and channels beside a lock's
//! hash, and the operator scripts that read and break it, holdlock's and Redisson's.
//! Each is written in full; a kind's descriptor names its layout.

use super::names::{names_of, redisson_names};
use super::{Kind, LockNames, Script};
use crate::compat::{self, Compat};
use crate::error::Result;
use crate::keys;
use crate::scripts::operator::{FORCE_UNLOCK, INSPECT};
use crate::scripts::redisson::{
    REDISSON_FAIR_FORCE, REDISSON_FAIR_INSPECT, REDISSON_RW_INSPECT, REDISSON_SEM_FORCE,
    REDISSON_SEM_INSPECT,
};

/// The names beside a lock's hash, by layout.
pub(super) struct Layout {
    /// Whose layout it is: holdlock's own or Redisson's (see `compat.rs`).
    pub(super) compat: Compat,
    /// The key of the last fencing token issued for the lock at a key.
    pub(super) token_key: fn(&str) -> String,
    /// The channel its releases are told on.
    pub(super) release_channel: fn(&str) -> String,
    /// A key of its own beside it, in its Cluster slot.
    pub(super) beside: fn(&str, &str) -> String,
    /// What its force-unlock tells its channel, in order, beside telling the holders'
    /// clients: Redisson's waiters wait for its unlock messages. Empty: the channel
    /// of holdlock's layout is told its own message.
    pub(super) forced_messages: &'static [&'static str],
    /// Whether the hash keeps fields beside its holders (`data:<owner>`, and a fenced
    /// hold's token in the field `token`): Redisson's keeps nothing else, and its
    /// token is its counter's own key.
    pub(super) keeps_fields: bool,
    /// The names of the lock of a kind called `name`, after the client's prefix, with
    /// the kind's suffix (holdlock's `<prefix>{<name>}<suffix>`; Redisson's key is
    /// `<prefix><name>`, braces and all, whatever the kind).
    pub(super) names: fn(&str, &str, &str, Kind) -> Result<LockNames>,
    /// The keys the operator scripts take after a lock's own, by its key: a fair queue,
    /// leases, a Redisson semaphore's permit deadlines, or none.
    pub(super) operator_keys: fn(&str) -> Vec<String>,
    /// The script that reads a lock in this layout for the operator, answering as
    /// `lua/inspect.lua` does.
    pub(super) inspect: &'static Script,
    /// The script that breaks a lock in this layout, taking `lua/force_unlock.lua`'s
    /// arguments.
    pub(super) force: &'static Script,
    /// Whether `force` breaks every kind of this layout as a mutex (the hash alone).
    pub(super) forced_as_mutex: bool,
    /// Whether a lock's key is the prefix and its name alone (Redisson's), so that
    /// nothing in the key tells it from an application's: a listing reads the keys
    /// its pattern matches to find such locks.
    pub(super) at_the_name: bool,
}

/// holdlock's own layout (the mutex): `<key>:token`, `<key>:released`,
/// `<key>:<suffix>`.
pub(super) static HOLDLOCK: Layout = Layout {
    compat: Compat::Holdlock,
    token_key: holdlock_token_key,
    release_channel: keys::release_channel,
    beside: holdlock_beside,
    forced_messages: &[],
    keeps_fields: true,
    names: names_of,
    operator_keys: no_keys,
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: false,
    at_the_name: false,
};

/// holdlock's fair lock: holdlock's layout, with the queue and its waiters' liveness
/// beside the hash.
pub(super) static HOLDLOCK_FAIR: Layout = Layout {
    compat: Compat::Holdlock,
    token_key: holdlock_token_key,
    release_channel: keys::release_channel,
    beside: holdlock_beside,
    forced_messages: &[],
    keeps_fields: true,
    names: names_of,
    operator_keys: |key| keys::queue_keys_of(key).to_vec(),
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: false,
    at_the_name: false,
};

/// holdlock's kinds with leases (read-write lock, semaphore): holdlock's layout, with
/// the holders' leases beside the hash.
pub(super) static HOLDLOCK_LEASES: Layout = Layout {
    compat: Compat::Holdlock,
    token_key: holdlock_token_key,
    release_channel: keys::release_channel,
    beside: holdlock_beside,
    forced_messages: &[],
    keeps_fields: true,
    names: names_of,
    operator_keys: |key| vec![keys::leases_key_of(key)],
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: false,
    at_the_name: false,
};

/// Redisson's layout of `RLock` (see `compat.rs`).
pub(super) static REDISSON: Layout = Layout {
    compat: Compat::Redisson,
    token_key: compat::token_key,
    release_channel: compat::channel,
    beside: compat::beside,
    forced_messages: &[compat::UNLOCK_MESSAGE],
    keeps_fields: false,
    names: redisson_layout_names,
    operator_keys: no_keys,
    inspect: &INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: true,
    at_the_name: true,
};

/// The layout of Redisson's `RReadWriteLock` (see `compat.rs`): `RLock`'s, with a
/// channel of its own, and its force-unlock tells what a writer's last release tells.
pub(super) static REDISSON_RW: Layout = Layout {
    compat: Compat::Redisson,
    token_key: compat::token_key,
    release_channel: compat::rw_channel,
    beside: compat::beside,
    forced_messages: compat::WRITE_UNLOCK_MESSAGES,
    keeps_fields: false,
    names: redisson_layout_names,
    operator_keys: no_keys,
    inspect: &REDISSON_RW_INSPECT,
    force: &FORCE_UNLOCK,
    forced_as_mutex: true,
    at_the_name: true,
};

/// The layout of Redisson's `RFairLock` (see `compat.rs`): `RLock`'s hash and
/// channel, with the queue and its waiters' deadlines beside it. Its hash is `RLock`'s,
/// so a listing finds it as a mutex.
pub(super) static REDISSON_FAIR: Layout = Layout {
    compat: Compat::Redisson,
    token_key: compat::token_key,
    release_channel: compat::channel,
    beside: compat::beside,
    forced_messages: &[],
    keeps_fields: false,
    names: redisson_layout_names,
    operator_keys: |key| compat::fair_queue_keys(key).to_vec(),
    inspect: &REDISSON_FAIR_INSPECT,
    force: &REDISSON_FAIR_FORCE,
    forced_as_mutex: true,
    at_the_name: false,
};

/// The layout of Redisson's `RPermitExpirableSemaphore` (see `compat.rs`): the key
/// holds the number of permits free, the permits' deadlines are the sorted set
/// `{<key>}:timeout`, and its channel is told the number free.
pub(super) static REDISSON_SEM: Layout = Layout {
    compat: Compat::Redisson,
    token_key: compat::token_key,
    release_channel: compat::sem_channel,
    beside: compat::beside,
    forced_messages: &[],
    keeps_fields: false,
    names: redisson_layout_names,
    operator_keys: |key| vec![compat::beside(key, "timeout")],
    inspect: &REDISSON_SEM_INSPECT,
    force: &REDISSON_SEM_FORCE,
    forced_as_mutex: true,
    at_the_name: true,
};

/// The token key of holdlock's layout: `<key>:token`.
fn holdlock_token_key(key: &str) -> String {
    [key, ":token"].concat()
}

/// A key beside a lock in holdlock's layout: `<key>:<suffix>`.
fn holdlock_beside(key: &str, suffix: &str) -> String {
    [key, ":", suffix].concat()
}

/// No keys beside the hash for the operator scripts.
fn no_keys(_: &str) -> Vec<String> {
    Vec::new()
}

/// The names in Redisson's layouts, where the kind's suffix is no part of the key.
fn redisson_layout_names(prefix: &str, name: &str, _suffix: &str, kind: Kind) -> Result<LockNames> {
    redisson_names(prefix, name, kind)
}
