//! The operator's scripts, for every kind of lock: reading one without taking it
//! (`lua/inspect.lua`) and breaking it (`lua/force_unlock.lua`). Each takes the lock's
//! hash and the sorted sets its kind keeps beside it ([`LockNames::operator_keys`]).

use std::time::Duration;

use fred::clients::Client;
use fred::types::Value;

use super::{Delivery, LockNames, Scripts, integer, protocol};
use crate::error::Result;
use crate::keys::{CLIENT_CHANNEL, LockKind};
use crate::lease::CLAIM_WINDOW_MS;

script!(pub(crate) INSPECT = "leases.lua", "inspect.lua");
script!(
    pub(crate) FORCE_UNLOCK = "fair_queue.lua",
    "leases.lua",
    "force_unlock.lua"
);

/// Whether the hash field `field` is a holder's: not one of the kinds' own fields,
/// nor a holder's data.
fn is_holder(field: &str) -> bool {
    !NOT_HOLDERS.contains(&field) && !field.starts_with(DATA)
}

/// The owners a waiter for the lock `names` whose hash has the fields `fields` waits
/// for, for the wait-for graph (see `deadlock.rs`): its holders, a write
/// hold's field without its suffix (`:w`, or Redisson's `:write`: see
/// [`LockNames::write_suffix`]). None for a semaphore: a waiter for a permit waits for
/// any one of its holders, not for each, so a cycle through it need not be a
/// deadlock.
pub(crate) fn owners_waited_for<'f>(
    names: &LockNames,
    fields: impl Iterator<Item = &'f str>,
) -> Vec<&'f str> {
    if !names.kind.takes_part_in_deadlock_checks() {
        return Vec::new();
    }
    let write_suffix = names.write_suffix();
    let mut owners: Vec<&str> = fields
        .filter(|field| is_holder(field))
        .map(|field| match write_suffix {
            "" => field,
            suffix => field.strip_suffix(suffix).unwrap_or(field),
        })
        .collect();
    owners.sort_unstable();
    owners.dedup();
    owners
}

/// The reply of `inspect.lua`, as Redis keeps it: what it means for each kind is read
/// in `inspect.rs`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    /// The kind the key is the hash of.
    pub(crate) kind: LockKind,
    /// What ends a field counting write holds, for a read-write lock (`:w`, or
    /// Redisson's `:write`).
    pub(crate) write_suffix: &'static str,
    /// The hash's remaining TTL (`None`: it has no expiry, or does not exist).
    pub(crate) ttl: Option<Duration>,
    /// The hash's fields and values, in Redis's order.
    pub(crate) fields: Vec<(String, String)>,
    /// The server's clock, in milliseconds since the Unix epoch.
    pub(crate) now_ms: u64,
    /// The sorted sets of the kind (see [`LockNames::operator_keys`]), each as (member, score) in
    /// order.
    pub(crate) sets: Vec<Vec<(String, f64)>>,
}

/// The names of a lock's hash fields that are not owner ids (see `lua/`).
pub(crate) mod fields {
    /// A fenced hold's token.
    pub(crate) const TOKEN: &str = super::super::TOKEN_FIELD;
    /// The mark that someone waits.
    pub(crate) const WAITING: &str = "waiting";
    /// The fair lock's pending hand-off.
    pub(crate) const CLAIM: &str = "claim";
    /// The read-write lock's mode, writer, and writer's wait.
    pub(crate) const MODE: &str = "mode";
    pub(crate) const WRITER: &str = "writer";
    pub(crate) const WRITER_WAITS: &str = "writer_waits";
    /// A read-write lock's lone holder, whose deadline is the hash's expiry (see
    /// `lua/rw_acquire.lua`).
    pub(crate) const SOLO: &str = "solo";
    /// The semaphore's number of permits.
    pub(crate) const PERMITS: &str = "permits";
    /// Every field above: none is an owner, for every kind (owner ids contain a colon).
    pub(super) const NOT_HOLDERS: [&str; 8] = [
        TOKEN,
        WAITING,
        CLAIM,
        MODE,
        WRITER,
        WRITER_WAITS,
        SOLO,
        PERMITS,
    ];
    /// What the field keeping a holder's data starts with: `data:<holder field>` (see
    /// `LockOptions::data` and `lua/acquire.lua`).
    pub(crate) const DATA: &str = "data:";
}
use fields::{DATA, NOT_HOLDERS};

impl Snapshot {
    /// The value of the hash's field `name`, if it has one.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }

    /// The hash's holder fields with their values: every field but the kinds' own
    /// and the holders' data. (A holder of a kind whose holders expire one by one may
    /// be past its deadline: see `inspect/read.rs`.)
    pub(crate) fn holders(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields
            .iter()
            .filter(|(field, _)| is_holder(field))
            .map(|(field, value)| (field.as_str(), value.as_str()))
    }

    /// The `index`th sorted set of the kind (empty if the kind has none there).
    pub(crate) fn set(&self, index: usize) -> &[(String, f64)] {
        self.sets.get(index).map_or(&[], Vec::as_slice)
    }
}

impl Scripts {
    /// Reads the lock whose hash is `key`, of whichever kind the key says; `None` if
    /// none of its keys exists.
    pub(crate) async fn inspect(
        &self,
        client: &Client,
        names: &LockNames,
    ) -> Result<Option<Snapshot>> {
        let (kind, companions) = (names.kind.public(), names.operator_keys());
        let mut keys = vec![&*names.key];
        keys.extend(companions.iter().map(String::as_str));
        let script = names.inspect_script();
        let reply = self
            .eval(client, script, &keys, &Vec::new, Delivery::Retried)
            .await?;
        let Value::Array(parts) = &reply else {
            return Err(protocol(&reply));
        };
        let [pttl, Value::Array(fields), now_ms, Value::Array(sets)] = parts.as_slice() else {
            return Err(protocol(&reply));
        };
        let snapshot = Snapshot {
            kind,
            write_suffix: names.write_suffix(),
            ttl: u64::try_from(integer(pttl)?)
                .ok()
                .map(Duration::from_millis),
            fields: pairs(fields, |value| value.as_string()).ok_or_else(|| protocol(&reply))?,
            now_ms: u64::try_from(integer(now_ms)?).map_err(|_| protocol(&reply))?,
            sets: sets
                .iter()
                .map(|set| match set {
                    Value::Array(members) => pairs(members, Value::as_f64),
                    _ => None,
                })
                .collect::<Option<_>>()
                .ok_or_else(|| protocol(&reply))?,
        };
        let exists = !snapshot.fields.is_empty() || snapshot.sets.iter().any(|set| !set.is_empty());
        Ok(exists.then_some(snapshot))
    }

    /// Breaks the lock whose hash is `key`, of whichever kind the key says, and wakes
    /// its waiters (a fair lock is handed to its first live waiter); whether it was
    /// held.
    ///
    /// Each client whose holds it breaks is told on its own channel, whose name starts
    /// with `prefix` (see `waiting.rs`).
    pub(crate) async fn force_unlock(
        &self,
        client: &Client,
        names: &LockNames,
        prefix: &str,
    ) -> Result<bool> {
        let (kind, companions) = (names.forced_as(), names.operator_keys());
        let mut keys = vec![&*names.key];
        keys.extend(companions.iter().map(String::as_str));
        let clients_channel: Value = [prefix, CLIENT_CHANNEL].concat().into();
        let args = || {
            let mut args = vec![
                Value::from_static_str(self.publish),
                Value::from_static_str(kind),
                super::decimal(CLAIM_WINDOW_MS),
                clients_channel.clone(),
                Value::from(names.registry_key()),
            ];
            let messages = names.forced_messages();
            if !messages.is_empty() {
                // Told as Redisson's forceUnlock tells its waiters.
                args.push(names.release_channel().into());
                args.extend(
                    messages
                        .iter()
                        .map(|message| Value::from_static_str(message)),
                );
            }
            args
        };
        // Sent again after a lost reply, a fair lock's would pass over the waiter the
        // first run handed it to.
        let delivery = match names.kind.hands_on_when_forced() {
            true => Delivery::AtMostOnce,
            false => Delivery::Retried,
        };
        let reply = self
            .eval(client, names.force_script(), &keys, &args, delivery)
            .await?;
        Ok(integer(&reply)? == 1)
    }
}

/// A flat `[name, value, name, value, ...]` reply as pairs, each name a string and
/// each value read by `value`; `None` if one cannot be read.
fn pairs<T>(flat: &[Value], value: impl Fn(&Value) -> Option<T>) -> Option<Vec<(String, T)>> {
    flat.chunks(2)
        .map(|pair| match pair {
            [name, item] => Some((name.as_string()?, value(item)?)),
            _ => None,
        })
        .collect()
}
