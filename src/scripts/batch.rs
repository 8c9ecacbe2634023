//! The scripts that take, renew or release many holds in one call
//! (`lua/acquire_many.lua`, `lua/renew_many.lua`, `lua/release_many.lua`): the
//! mutexes' acquisitions and releases of many tasks, the watchdog's renewals, and the
//! background releases of dropped guards, that fall due together. Each declares only
//! its first hold's keys; on a cluster a call carries the holds of one node, of any of
//! its slots, as the callers group them ([`Placement`]).

use fred::bytes::{Bytes, BytesMut};
use fred::bytes_utils::Str;
use fred::clients::Client;
use fred::interfaces::{ClientLike, ClusterInterface};
use fred::types::Value;
use fred::types::cluster::ClusterRouting;
use fred::types::config::Server;
use fred::util::redis_keyslot;

use super::{Delivery, ScriptKey, Scripts, decimal, integer, protocol};
use super::{Kind, LockNames};
use crate::error::{LockError, Result};
use crate::keys::LEASES;

script!(
    RENEW_MANY = "leases.lua",
    "redisson/layout.lua",
    "renew_many.lua"
);
script!(ACQUIRE_MANY = "acquire_many.lua");
script!(RELEASE_MANY = "release_hold.lua", "release_many.lua");

/// What one renewal in a batch found (see `lua/renew_many.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// The lease was extended.
    Extended,
    /// The holder holds nothing.
    Gone,
    /// The lock's keys hold another kind of value: nothing was written for it.
    WrongType,
    /// The node the call went to does not serve the hold's keys (its slot moved):
    /// nothing was written for it, and it is to be renewed alone, where its slot is now.
    Elsewhere,
}

/// One hold of a batch of renewals (see [`RenewalCall`]): what the watchdog
/// keeps of it, so that sending it reads nothing else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HoldToRenew<'a> {
    /// The lock's key (its hash), as bytes: copied into the call, never read as text.
    pub(crate) key: &'a [u8],
    pub(crate) kind: Kind,
    pub(crate) owner: &'a Str,
    pub(crate) lease_ms: u64,
}

impl HoldToRenew<'_> {
    /// Whether the lock's keys expire as a whole (mutex, fair lock), or each holder on
    /// its own (see `lua/leases.lua`).
    fn expires_whole(&self) -> bool {
        self.kind.expires_whole()
    }

    /// How many keys the hold has: its lock's hash, and its leases if it renews there.
    fn key_count(&self) -> usize {
        1 + usize::from(self.kind.renews_in_leases())
    }

    /// The holder's field in the lock's hash.
    fn field(&self) -> Str {
        self.kind.shared_field(self.owner)
    }
}

/// The keys and arguments of one `renew_many.lua` call, made from the holds it renews
/// without holding on to them (the watchdog reads them under a lock it does not keep
/// across the call). The keys go out copied into one buffer (see [`PackedKeys`]), as
/// arguments (the call declares only its first hold's keys, which route it: on a
/// cluster it may carry one node's holds of any of its slots), and the owners as shared
/// bytes; in the usual batch each run of holds of one owner names its owner once, so
/// callers put them together.
#[derive(Debug)]
pub(crate) struct RenewalCall {
    keys: PackedKeys,
    /// How many of `keys` the first hold has (declared).
    first: usize,
    args: Vec<Value>,
    holds: usize,
}

impl RenewalCall {
    pub(crate) fn new(holds: &[HoldToRenew<'_>]) -> Self {
        let mut keys = PackingKeys::with_capacity(holds.len());
        for hold in holds {
            keys.push(hold.key);
            if hold.kind.renews_in_leases() {
                keys.push_joined(hold.key, LEASES.as_bytes());
            }
        }
        let keys = keys.finish();
        let first = holds.first().map_or(0, HoldToRenew::key_count);
        let args = renewal_args(holds, &keys);
        Self {
            keys,
            first,
            args,
            holds: holds.len(),
        }
    }
}

/// The arguments of the `renew_many.lua` call of `holds`, whose keys `keys` are (see
/// the script's header for its two forms).
fn renewal_args(holds: &[HoldToRenew<'_>], keys: &PackedKeys) -> Vec<Value> {
    let mut packed = keys.iter().map(|key| key.to_value());
    // The usual batch (every key expiring whole, one lease) names the lease once and
    // each run of holds with one holder once: the keys are nearly all it sends.
    let uniform = holds.first().and_then(|first| {
        holds
            .iter()
            .all(|hold| hold.expires_whole() && hold.lease_ms == first.lease_ms)
            .then_some(first.lease_ms)
    });
    match uniform {
        Some(lease_ms) => {
            let mut args = Vec::with_capacity(holds.len() + 4);
            args.extend([Value::from_static_str("*h"), decimal(lease_ms)]);
            // Runs of one field: the callers put the holds of one owner together.
            for run in holds.chunk_by(|a, b| a.kind == b.kind && same_bytes(a.owner, b.owner)) {
                args.push(Value::String(run[0].field()));
                args.push(decimal(run.len() as u64));
                args.extend(packed.by_ref().take(run.len()));
            }
            args
        }
        None => {
            let mut args = Vec::with_capacity(holds.len() * 5);
            for hold in holds {
                args.push(Value::from_static_str(hold.kind.renewal_layout()));
                args.push(Value::String(hold.field()));
                args.push(decimal(hold.lease_ms));
                args.extend(packed.by_ref().take(hold.key_count()));
            }
            args
        }
    }
}

/// What one release in a batch found (see `lua/release_many.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The owner's remaining hold count.
    Remaining(u32),
    /// The owner held nothing.
    NotHeld,
    /// The key holds another kind of value: nothing was written for it.
    WrongType,
    /// The node the call went to does not serve the key (its slot moved): nothing was
    /// written for it, and it is to be released alone, where its slot is now.
    Elsewhere,
}

impl Scripts {
    /// Extends the lease of each hold of `call`, in one call; says per hold what it
    /// found, in order. Idempotent, so sent with retries.
    pub(crate) async fn renew_many(
        &self,
        client: &Client,
        call: &RenewalCall,
    ) -> Result<Vec<Renewed>> {
        let args = || call.args.clone();
        // Only the first hold's keys are declared: the others go in `args`.
        let first: Vec<PackedKey<'_>> = call.keys.iter().take(call.first).collect();
        let reply = self
            .eval(client, &RENEW_MANY, &first, &args, Delivery::Retried)
            .await?;
        // One character per hold.
        let bytes = match &reply {
            Value::String(text) => text.as_bytes(),
            Value::Bytes(bytes) => bytes,
            _ => &[],
        };
        if bytes.len() != call.holds {
            return Err(not_one_each(call.holds, &reply));
        }
        bytes
            .iter()
            .map(|byte| match byte {
                b'1' => Ok(Renewed::Extended),
                b'0' => Ok(Renewed::Gone),
                b'x' => Ok(Renewed::WrongType),
                b'm' => Ok(Renewed::Elsewhere),
                _ => Err(protocol(&reply)),
            })
            .collect()
    }

    /// Takes each `(names, owner)` mutex (holdlock's layout) that is free and queued
    /// for by nobody, with the lease `lease_ms`, in one call (`lua/acquire_many.lua`);
    /// says per lock whether it was taken (hold count 1, no token). On a cluster the
    /// locks are one node's (see [`Placement`]); one its node no longer serves is not
    /// taken. Not idempotent: sent at most once, and a failure in transit is for the
    /// caller to settle lock by lock.
    pub(crate) async fn acquire_many(
        &self,
        client: &Client,
        lease_ms: u64,
        locks: &[(&LockNames, &str)],
    ) -> Result<Vec<bool>> {
        let keys = lock_keys(locks.iter().map(|(names, _)| *names));
        let keys = keys.keys();
        let args = || {
            let mut args = Vec::with_capacity(locks.len() * 2 + 1);
            args.push(decimal(lease_ms));
            for (key, (_, owner)) in each_lock(&keys).zip(locks) {
                args.push(key.to_value());
                args.push((*owner).into());
            }
            args
        };
        let reply = self
            .eval(
                client,
                &ACQUIRE_MANY,
                first_lock(&keys),
                &args,
                Delivery::Acquisition,
            )
            .await?;
        each(&reply, locks.len(), |n| match n {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        })
    }

    /// Drops one hold of each `(names, owner)` mutex hold (holdlock's layout), in one
    /// call, publishing each release as `release.lua` does; says per hold what it
    /// found, in order. On a cluster the holds are one node's (see [`Placement`]).
    /// Not idempotent: sent at most once, and a failure in transit is for the caller
    /// to settle hold by hold.
    pub(crate) async fn release_many(
        &self,
        client: &Client,
        holds: &[(&LockNames, &Str)],
    ) -> Result<Vec<Released>> {
        let keys = lock_keys(holds.iter().map(|(names, _)| *names));
        let keys = keys.keys();
        let args = || {
            let mut args = Vec::with_capacity(holds.len() * 2 + 1);
            args.push(Value::from_static_str(self.publish));
            for (key, (_, owner)) in each_lock(&keys).zip(holds) {
                args.push(key.to_value());
                args.push(Value::String((*owner).clone()));
            }
            args
        };
        let reply = self
            .eval(
                client,
                &RELEASE_MANY,
                first_lock(&keys),
                &args,
                Delivery::AtMostOnce,
            )
            .await?;
        each(&reply, holds.len(), |n| match n {
            -1 => Some(Released::NotHeld),
            -2 => Some(Released::WrongType),
            -3 => Some(Released::Elsewhere),
            n => u32::try_from(n).ok().map(Released::Remaining),
        })
    }
}

/// The keys of a batch of mutexes, packed: the first lock's key and its queue of
/// waiting clients (declared, they route the call), then every other lock's key. The
/// scripts name each lock's queue from its key (see `lua/acquire_many.lua`): each
/// argument costs the server about a third of a command.
fn lock_keys<'a>(mut locks: impl ExactSizeIterator<Item = &'a LockNames>) -> PackedKeys {
    let mut keys = PackingKeys::with_capacity(locks.len() + 1);
    if let Some(first) = locks.next() {
        keys.push(first.key.as_bytes());
        keys.push(first.clients_key().as_bytes());
    }
    for names in locks {
        keys.push(names.key.as_bytes());
    }
    keys.finish()
}

/// The keys a batch call declares: its first lock's key and queue, which route it
/// (the locks go as arguments, see `lua/acquire_many.lua`).
fn first_lock<'k, 'b>(keys: &'k [PackedKey<'b>]) -> &'k [PackedKey<'b>] {
    &keys[..keys.len().min(2)]
}

/// Each lock's key of [`lock_keys`], in order (the first lock's queue left out).
fn each_lock<'k, 'b>(keys: &'k [PackedKey<'b>]) -> impl Iterator<Item = &'k PackedKey<'b>> {
    keys.iter().take(1).chain(keys.iter().skip(2))
}

/// The keys of one batch call, copied into one buffer as they are named. Each key goes
/// out as a slice of that buffer: the command shares one buffer, where a reference to
/// each lock's own key bytes would touch two places in memory per key (its bytes and
/// their reference count) and update a count at each end of the call. With a million
/// held locks those are cache misses; one read of each key's bytes here is not more
/// than the command's encoding would have read anyway. Each key's slice counts once
/// on the buffer (see [`keys`](Self::keys)), and once more per send of a command
/// that carries it.
#[derive(Debug)]
struct PackedKeys {
    buffer: Bytes,
    /// Where each key ends in `buffer`.
    ends: Vec<usize>,
}

impl PackedKeys {
    /// The keys, each to be cut from the buffer as the command is made.
    fn keys(&self) -> Vec<PackedKey<'_>> {
        self.iter().collect()
    }

    /// The keys in order, as [`keys`](Self::keys) gives them.
    fn iter(&self) -> impl Iterator<Item = PackedKey<'_>> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| PackedKey {
            buffer: &self.buffer,
            start,
            end,
        })
    }
}

/// [`PackedKeys`] as they are named.
struct PackingKeys {
    buffer: BytesMut,
    ends: Vec<usize>,
}

impl PackingKeys {
    fn with_capacity(keys: usize) -> Self {
        Self {
            // Lock keys are short: most batches fit without growing.
            buffer: BytesMut::with_capacity(keys * 32),
            ends: Vec::with_capacity(keys),
        }
    }

    fn push(&mut self, key: &[u8]) {
        self.push_joined(key, &[]);
    }

    /// Adds the key that is `key` followed by `suffix`.
    fn push_joined(&mut self, key: &[u8], suffix: &[u8]) {
        self.buffer.extend_from_slice(key);
        self.buffer.extend_from_slice(suffix);
        self.ends.push(self.buffer.len());
    }

    fn finish(self) -> PackedKeys {
        PackedKeys {
            buffer: self.buffer.freeze(),
            ends: self.ends,
        }
    }
}

/// One key of [`PackedKeys`], copied from a `&str`.
#[derive(Debug)]
struct PackedKey<'a> {
    buffer: &'a Bytes,
    start: usize,
    end: usize,
}

impl ScriptKey for PackedKey<'_> {
    fn as_str(&self) -> &str {
        // Copied whole from a `&str`, so always UTF-8.
        std::str::from_utf8(&self.buffer[self.start..self.end]).unwrap_or_default()
    }

    fn to_value(&self) -> Value {
        Value::Bytes(self.buffer.slice(self.start..self.end))
    }
}

/// Whether `a` and `b` hold the same bytes: at once when they share them (the holds of
/// one owner share its id), else by comparing them.
fn same_bytes(a: &Str, b: &Str) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// The cluster slot of `key`.
pub(crate) fn key_slot(key: impl AsRef<[u8]>) -> u16 {
    redis_keyslot(key.as_ref())
}

/// Which primary serves each slot of a cluster, as a client last learned it (fred's
/// routing table, read once per batch): the mutexes' batch calls carry the locks of
/// one node, of any of its slots (see `lua/acquire_many.lua`). What the table has
/// wrong (a slot moved since) costs the locks concerned a call of their own: the node
/// refuses them, untouched.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    clustered: bool,
    routing: Option<ClusterRouting>,
    /// The primaries of `routing`, each once: a node's group is its place here.
    nodes: Vec<Server>,
}

impl Placement {
    /// `client`'s table, if it is a cluster's and known.
    pub(crate) fn of(client: &Client) -> Self {
        if !client.is_clustered() {
            return Self::default();
        }
        let Some(routing) = client.cached_cluster_state() else {
            return Self {
                clustered: true,
                ..Self::default()
            };
        };
        let mut nodes: Vec<Server> = Vec::new();
        for range in routing.slots() {
            if !nodes.iter().any(|node| same_server(node, &range.primary)) {
                nodes.push(range.primary.clone());
            }
        }
        Self {
            clustered: true,
            routing: Some(routing),
            nodes,
        }
    }

    /// Splits the batch `items` (each in the slot `slot_of` says, see [`key_slot`])
    /// into calls of at most `size`, one node's to a call (see [`into_calls`]).
    pub(crate) fn calls<T>(
        &self,
        items: Vec<T>,
        slot_of: impl Fn(&T) -> u16,
        size: usize,
    ) -> Vec<Vec<T>> {
        into_calls(
            items,
            |item| self.group(slot_of(item)),
            self.clustered,
            size,
        )
    }

    /// The group of a lock in `slot`: its node's place, or past every node, its
    /// slot's when the table does not say (a slot nobody serves).
    fn group(&self, slot: u16) -> u32 {
        let node = self.routing.as_ref().and_then(|routing| {
            let server = routing.get_server(slot)?;
            self.nodes.iter().position(|node| same_server(node, server))
        });
        match node {
            Some(node) => u32::try_from(node).unwrap_or(u32::MAX),
            None => 0x1_0000 + u32::from(slot),
        }
    }
}

fn same_server(a: &Server, b: &Server) -> bool {
    a.port == b.port && a.host == b.host
}

/// Splits `items` into the calls of a batch script: at most `size` to a call and, on a
/// cluster, the keys of one group to a call; `group_of` says an item's group, and is
/// asked only on a cluster. A script that declares its keys cannot span slots: its
/// group is the slot (see [`key_slot`]). The mutexes' batches name only their first
/// lock's keys, and may span the slots of one node: their group is the node (see
/// [`Placement`]).
fn into_calls<T>(
    items: Vec<T>,
    group_of: impl Fn(&T) -> u32,
    clustered: bool,
    size: usize,
) -> Vec<Vec<T>> {
    if !clustered {
        // One server: the items in order.
        let all = items.len();
        return cut(items.into_iter(), &[all], size);
    }
    let mut items: Vec<(u32, T)> = items
        .into_iter()
        .map(|item| (group_of(&item), item))
        .collect();
    // Stable: within a group, the order the items came in.
    items.sort_by_key(|&(group, _)| group);
    let runs: Vec<usize> = items.chunk_by(|a, b| a.0 == b.0).map(<[_]>::len).collect();
    cut(items.into_iter().map(|(_, item)| item), &runs, size)
}

/// Cuts `items` into calls: each run of `runs` (the numbers of items of one slot, in
/// order) into calls of at most `size`, each made to its length.
fn cut<T>(mut items: impl Iterator<Item = T>, runs: &[usize], size: usize) -> Vec<Vec<T>> {
    let size = size.max(1);
    let mut calls = Vec::with_capacity(runs.iter().map(|run| run.div_ceil(size)).sum());
    for &run in runs {
        let mut left = run;
        while left > 0 {
            let call = left.min(size);
            calls.push(items.by_ref().take(call).collect());
            left -= call;
        }
    }
    calls
}

/// Reads a reply of `len` numbers, each read by `read`.
fn each<T>(reply: &Value, len: usize, read: impl Fn(i64) -> Option<T>) -> Result<Vec<T>> {
    match reply {
        Value::Array(items) if items.len() == len => items
            .iter()
            .map(|item| read(integer(item)?).ok_or_else(|| protocol(reply)))
            .collect(),
        // An empty Lua table comes back as an empty array (or nil).
        Value::Null if len == 0 => Ok(Vec::new()),
        _ => Err(not_one_each(len, reply)),
    }
}

/// A batch's reply that does not answer each of its `len` holds.
fn not_one_each(len: usize, reply: &Value) -> LockError {
    LockError::Protocol(format!("expected {len} replies, got {reply:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch scripts name each lock's queue from its key, as `keys::clients_key`
    /// does: were the two to differ, a batch would check a queue nobody uses.
    #[test]
    fn the_batch_scripts_name_a_locks_queue_as_the_client_does() {
        let queue = crate::keys::clients_key("");
        let named = format!("key .. '{queue}'");
        for script in [
            include_str!("../../lua/acquire_many.lua"),
            include_str!("../../lua/release_hold.lua"),
        ] {
            assert!(script.contains(&named), "{named} not in {script}");
        }
    }

    #[test]
    fn calls_hold_at_most_their_size_in_order() {
        let keys: Vec<String> = (0..600).map(|i| format!("k{{{i}}}")).collect();
        let calls = into_calls(keys.clone(), |key| key_slot(key).into(), false, 256);
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        assert_eq!(sizes, [256, 256, 88]);
        assert_eq!(calls.concat(), keys, "nothing lost, nothing reordered");
        assert!(into_calls(Vec::<String>::new(), |key| key_slot(key).into(), true, 256).is_empty());
    }

    #[test]
    fn on_a_cluster_each_call_is_one_slot() {
        // Three hash tags, interleaved: each call must hold keys of one slot only.
        let keys: Vec<String> = (0..30).map(|i| format!("x{{{}}}:{i}", i % 3)).collect();
        let calls = into_calls(keys.clone(), |key| key_slot(key).into(), true, 4);
        let slot = |key: &String| redis_keyslot(key.as_bytes());
        for call in &calls {
            assert!(call.len() <= 4);
            // Made to its length, not to the size of a full call: a cluster's calls
            // are often of one or two keys.
            assert!(call.capacity() < 2 * call.len(), "{call:?}");
            assert!(
                call.iter().all(|key| slot(key) == slot(&call[0])),
                "{call:?}"
            );
        }
        assert_eq!(calls.iter().map(Vec::len).sum::<usize>(), 30);
        // Within a slot, the order the items came in.
        for tag in 0..3 {
            let wanted: Vec<&String> = keys
                .iter()
                .filter(|key| key.starts_with(&format!("x{{{tag}}}")))
                .collect();
            let got: Vec<&String> = calls
                .iter()
                .flatten()
                .filter(|key| key.starts_with(&format!("x{{{tag}}}")))
                .collect();
            assert_eq!(got, wanted);
        }
    }
}
