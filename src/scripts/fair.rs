//! The fair lock's scripts: each has `lua/fair_queue.lua` (the queue's functions) put
//! in front of it, and takes the lock's key, queue and liveness as its keys.

use std::time::Duration;

use fred::clients::Client;
use fred::types::Value;
use fred::types::scripts::Script;

use super::{
    Acquire, Delivery, Queued, Scripts, acquire_reply, data_argument, decimal, integer, protocol,
    remaining_count, unsigned,
};
use super::{Asking, LockNames};
use crate::error::Result;
use crate::lease::{CLAIM_WINDOW_MS, PLACE_WINDOW_MS};
use crate::options::ResolvedOptions;

script!(
    FAIR_ACQUIRE = "fencing.lua",
    "fair_queue.lua",
    "fair_acquire.lua"
);
script!(FAIR_RELEASE = "fair_queue.lua", "fair_release.lua");
script!(FAIR_LEAVE = "fair_queue.lua", "fair_leave.lua");

impl Scripts {
    /// Takes the fair lock `names` afresh for `owner` (drawing a fencing token if
    /// `fenced`), or (if `waits`) queues it (`lua/fair_acquire.lua`).
    pub(crate) async fn fair_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        (options, asking): (&ResolvedOptions, &Asking),
    ) -> Result<Acquire> {
        let waits = !options.is_single_try();
        let args = || {
            let mut args = vec![
                owner.into(),
                decimal(options.lease_ms),
                decimal(CLAIM_WINDOW_MS),
                Value::from_static_str(if waits { "wait" } else { "try" }),
                Value::from_static_str(self.publish),
                asking
                    .fair_wait
                    .map_or_else(|| Value::from_static_str(""), decimal),
                data_argument(options.data.as_deref()),
                decimal(PLACE_WINDOW_MS),
            ];
            for entry in asking.fair_check.iter().flat_map(|check| check.iter()) {
                args.push(entry.as_str().into());
            }
            args
        };
        let token_key = options.fenced.then(|| names.token_key());
        let script = &FAIR_ACQUIRE;
        let reply = self
            .fair_call(
                client,
                script,
                names,
                token_key,
                &args,
                Delivery::Acquisition,
            )
            .await?;
        fair_acquire_reply(&reply)
    }

    /// Drops one hold of `owner` on the fair lock `names`, handing the lock to the first
    /// waiter after the last (`lua/fair_release.lua`): the remaining count, or `None`
    /// if the owner held nothing.
    pub(crate) async fn fair_release(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
    ) -> Result<Option<u32>> {
        let args = || self.fair_hand_on_args(owner);
        let script = &FAIR_RELEASE;
        let reply = self
            .fair_call(client, script, names, None, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }

    /// Ends `owner`'s `wait` for the fair lock: takes it out of the queue, and hands on
    /// a lock handed to that wait and not claimed (`lua/fair_leave.lua`). No other wait
    /// is touched, a later one of the same owner included.
    pub(crate) async fn fair_leave(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        wait: u64,
    ) -> Result<()> {
        let args = || {
            let mut args = self.fair_hand_on_args(owner);
            args.push(decimal(wait));
            args
        };
        let script = &FAIR_LEAVE;
        self.fair_call(client, script, names, None, &args, Delivery::Retried)
            .await
            .map(drop)
    }

    /// The arguments of the fair scripts that may hand the lock on.
    fn fair_hand_on_args(&self, owner: &str) -> Vec<Value> {
        vec![
            owner.into(),
            Value::from_static_str(self.publish),
            decimal(CLAIM_WINDOW_MS),
        ]
    }

    /// A fair lock's `script`, with the lock's key, queue and liveness as its keys,
    /// and the token floor key after them when one is given.
    async fn fair_call(
        &self,
        client: &Client,
        script: &Script,
        names: &LockNames,
        token_key: Option<String>,
        args: &(dyn Fn() -> Vec<Value> + Sync),
        delivery: Delivery,
    ) -> Result<Value> {
        let [queue, alive] = names.queue_keys();
        let mut keys = vec![&*names.key, queue.as_str(), alive.as_str()];
        keys.extend(token_key.as_deref());
        Box::pin(self.eval(client, script, &keys, args, delivery)).await
    }
}

/// The reply of `fair_acquire.lua`: as `acquire.lua`'s, and for a refused waiter that
/// it is queued (see [`Queued`]).
fn fair_acquire_reply(reply: &Value) -> Result<Acquire> {
    match reply {
        Value::Array(items) if items.len() >= 5 && integer(&items[0])? == 0 => {
            let pttl = u64::try_from(integer(&items[1])?).ok();
            let not_queued = items[5..]
                .iter()
                .map(|item| {
                    let position = usize::try_from(unsigned(item)?).ok();
                    position
                        .and_then(|p| p.checked_sub(1))
                        .ok_or_else(|| protocol(reply))
                })
                .collect::<Result<_>>()?;
            let queued = Queued {
                place: unsigned(&items[2])?,
                server_ms: unsigned(&items[3])?,
                client_was_alive: integer(&items[4])? == 1,
                not_queued,
            };
            Ok(Acquire::Busy {
                pttl: pttl.map(Duration::from_millis),
                queued: Some(queued),
            })
        }
        _ => acquire_reply(reply),
    }
}
