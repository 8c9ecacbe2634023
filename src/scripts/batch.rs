//! The scripts that renew or release many holds in one call (`lua/renew_many.lua`,
//! `lua/release_many.lua`): the watchdog's renewals, and the background releases of
//! dropped guards, that fall due together. On a cluster every key of one call must be
//! in one slot; the callers group them so.

use fred::bytes_utils::Str;
use fred::clients::Client;
use fred::types::Value;

use super::{Delivery, Scripts, decimal, integer, protocol};
use crate::error::{LockError, Result};
use crate::keys::{Kind, LockNames};

pub(super) const RENEW_MANY: &str = concat!(
    include_str!("../../lua/leases.lua"),
    include_str!("../../lua/renew_many.lua")
);
pub(super) const RELEASE_MANY: &str = concat!(
    include_str!("../../lua/release_hold.lua"),
    include_str!("../../lua/release_many.lua")
);

/// What one renewal in a batch found (see `lua/renew_many.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// The lease was extended.
    Extended,
    /// The holder holds nothing.
    Gone,
    /// The lock's keys hold another kind of value: nothing was written for it.
    WrongType,
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
}

impl Scripts {
    /// Extends the lease of each `(names, owner, lease_ms)` hold, in one call; says per
    /// hold what it found, in order. Idempotent, so sent with retries. The keys and
    /// owners go out as shared bytes, without a copy.
    pub(crate) async fn renew_many(
        &self,
        client: &Client,
        holds: &[(&LockNames, &Str, u64)],
    ) -> Result<Vec<Renewed>> {
        let expires_whole = |names: &LockNames| matches!(names.kind, Kind::Mutex | Kind::Fair);
        let mut keys: Vec<Str> = Vec::with_capacity(holds.len());
        for (names, _, _) in holds {
            keys.push(names.key.clone());
            if !expires_whole(names) {
                keys.push(names.leases_key().into());
            }
        }
        let args = || {
            let mut args = Vec::with_capacity(holds.len() * 3);
            for &(names, owner, lease_ms) in holds {
                let layout = if expires_whole(names) { "h" } else { "l" };
                args.push(Value::from_static_str(layout));
                args.push(match names.kind {
                    Kind::Write => names.kind.field(owner).as_ref().into(),
                    _ => Value::String(owner.clone()),
                });
                args.push(decimal(lease_ms));
            }
            args
        };
        let reply = self
            .eval(client, &self.renew_many, &keys, &args, Delivery::Retried)
            .await?;
        each(&reply, holds.len(), |n| match n {
            1 => Some(Renewed::Extended),
            0 => Some(Renewed::Gone),
            -1 => Some(Renewed::WrongType),
            _ => None,
        })
    }

    /// Drops one hold of each `(names, owner)` mutex hold (holdlock's layout), in one
    /// call, publishing each release as `release.lua` does; says per hold what it
    /// found, in order. Not idempotent: sent at most once, and a failure in transit is
    /// for the caller to settle hold by hold.
    pub(crate) async fn release_many(
        &self,
        client: &Client,
        holds: &[(&LockNames, &Str)],
    ) -> Result<Vec<Released>> {
        let keys: Vec<Str> = holds
            .iter()
            .flat_map(|(names, _)| [names.key.clone(), names.clients_key().into()])
            .collect();
        let args = || {
            let mut args = Vec::with_capacity(holds.len() + 1);
            args.push(Value::from_static_str(self.publish));
            args.extend(
                holds
                    .iter()
                    .map(|(_, owner)| Value::String((*owner).clone())),
            );
            args
        };
        let reply = self
            .eval(
                client,
                &self.release_many,
                &keys,
                &args,
                Delivery::AtMostOnce,
            )
            .await?;
        each(&reply, holds.len(), |n| match n {
            -1 => Some(Released::NotHeld),
            -2 => Some(Released::WrongType),
            n => u32::try_from(n).ok().map(Released::Remaining),
        })
    }
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
        _ => Err(LockError::Protocol(format!(
            "expected {len} replies, got {reply:?}"
        ))),
    }
}
