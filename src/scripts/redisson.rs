//! The scripts of the read-write lock and the semaphore in the layouts of Redisson's
//! `RReadWriteLock` and `RPermitExpirableSemaphore` (see `compat.rs`,
//! `lua/redisson/rw_acquire.lua`, `lua/redisson/sem_acquire.lua`).

use fred::clients::Client;
use fred::types::Value;

use super::leases::other_permits;
use super::{
    Acquire, Asking, Delivery, LockNames, Scripts, acquire_reply, decimal, publish_command,
    remaining_count,
};
use crate::compat;
use crate::error::Result;
use crate::options::ResolvedOptions;

script!(
    REDISSON_RW_ACQUIRE = "redisson/layout.lua",
    "redisson/rw_acquire.lua"
);
script!(
    REDISSON_RW_RELEASE = "redisson/layout.lua",
    "redisson/rw_release.lua"
);
script!(
    /// Reads the lock for the operator, as `lua/inspect.lua` does holdlock's.
    pub(crate) REDISSON_RW_INSPECT = "redisson/layout.lua", "redisson/rw_inspect.lua"
);
script!(
    REDISSON_SEM_ACQUIRE = "redisson/layout.lua",
    "redisson/sem_acquire.lua"
);
script!(
    REDISSON_SEM_RELEASE = "redisson/layout.lua",
    "redisson/sem_release.lua"
);
script!(
    /// Counts the permits held, as `lua/sem_available.lua` does holdlock's.
    pub(crate) REDISSON_SEM_HELD = "redisson/layout.lua", "redisson/sem_held.lua"
);
script!(
    /// Reads the semaphore for the operator, as `lua/inspect.lua` does holdlock's.
    pub(crate) REDISSON_SEM_INSPECT = "redisson/layout.lua", "redisson/sem_inspect.lua"
);
script!(
    /// Breaks the semaphore, as `lua/force_unlock.lua` does holdlock's.
    pub(crate) REDISSON_SEM_FORCE = "redisson/layout.lua", "redisson/sem_force.lua"
);

script!(
    REDISSON_FAIR_ACQUIRE = "redisson/layout.lua",
    "redisson/fair_acquire.lua"
);
script!(
    REDISSON_FAIR_RELEASE = "redisson/layout.lua",
    "redisson/fair_release.lua"
);
script!(
    /// Takes a waiter that gives up out of the queue (see [`leave_fair_queue`]).
    REDISSON_FAIR_LEAVE = "redisson/layout.lua", "redisson/fair_leave.lua"
);
script!(
    /// Reads the fair lock for the operator, as `lua/inspect.lua` does holdlock's.
    pub(crate) REDISSON_FAIR_INSPECT = "redisson/layout.lua", "redisson/fair_inspect.lua"
);
script!(
    /// Breaks the fair lock, as `lua/force_unlock.lua` does holdlock's.
    pub(crate) REDISSON_FAIR_FORCE = "redisson/layout.lua", "redisson/fair_force.lua"
);

/// Takes `owner` out of the queue of the fair lock `names` in Redisson's layout as its
/// wait ends without the lock (`lua/redisson/fair_leave.lua`): the deadlines behind it
/// move `wait_ms` earlier, and the new head of a free lock is told, on a shard
/// channel if `sharded`. The call owns what it sends, for a task of its own (see
/// `waiting/mark.rs`); the script is loaded again if the server's cache lost it.
pub(crate) fn leave_fair_queue(
    redis: Client,
    names: &LockNames,
    owner: &str,
    wait_ms: u64,
    sharded: bool,
) -> impl Future<Output = fred::prelude::FredResult<i64>> + Send + 'static {
    let [queue, deadlines] = compat::fair_queue_keys(&names.key);
    let keys = vec![
        names.key.to_string(),
        queue,
        deadlines,
        names.release_channel(),
    ];
    let publish = publish_command(sharded).to_owned();
    let args = vec![owner.to_owned(), wait_ms.to_string(), publish];
    async move {
        REDISSON_FAIR_LEAVE
            .evalsha_with_reload(&redis, keys, args)
            .await
    }
}

impl Scripts {
    /// Takes a fair lock in Redisson's layout afresh for `owner`, queueing it if
    /// refused (unless a single try; at the head again if a later attempt of a wait
    /// finds it dropped), sent at most once.
    pub(crate) async fn redisson_fair_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        (options, asking): (&ResolvedOptions, &Asking),
    ) -> Result<Acquire> {
        let [queue, deadlines] = compat::fair_queue_keys(&names.key);
        let keys = [&*names.key, queue.as_str(), deadlines.as_str()];
        let args = || {
            let mut args = vec![
                owner.into(),
                decimal(options.lease_ms),
                decimal(options.fair_wait_ms),
            ];
            if options.is_single_try() {
                args.push(Value::from_static_str("try"));
            } else if asking.again {
                args.push(Value::from_static_str("again"));
            }
            args
        };
        let script = &REDISSON_FAIR_ACQUIRE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::Acquisition)
            .await?;
        acquire_reply(&reply)
    }

    /// Drops one of `owner`'s holds of a fair lock in Redisson's layout, telling the
    /// head of its queue when the lock is free: the count left, or `None` if it held
    /// none.
    pub(crate) async fn redisson_fair_release(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
    ) -> Result<Option<u32>> {
        let [queue, deadlines] = compat::fair_queue_keys(&names.key);
        let channel = names.release_channel();
        let keys = [&*names.key, &*queue, &*deadlines, &*channel];
        let publish = Value::from_static_str(self.publish);
        let args = || vec![owner.into(), publish.clone()];
        let script = &REDISSON_FAIR_RELEASE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }

    /// Takes or re-enters the side `names.kind` of a read-write lock in Redisson's
    /// layout for `owner`, sent at most once.
    pub(crate) async fn redisson_rw_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        options: &ResolvedOptions,
    ) -> Result<Acquire> {
        let side = Value::from_static_str(names.kind.label());
        let args = || vec![owner.into(), decimal(options.lease_ms), side.clone()];
        let script = &REDISSON_RW_ACQUIRE;
        let reply = self
            .eval(client, script, &[&*names.key], &args, Delivery::Acquisition)
            .await?;
        acquire_reply(&reply)
    }

    /// Drops one of `owner`'s holds of the side `names.kind` of a read-write lock in
    /// Redisson's layout, telling its channel when the lock is free: the count left,
    /// or `None` if it held none.
    pub(crate) async fn redisson_rw_release(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
    ) -> Result<Option<u32>> {
        let channel = names.release_channel();
        let keys = [&*names.key, channel.as_str()];
        let side = Value::from_static_str(names.kind.label());
        let publish = Value::from_static_str(self.publish);
        let args = || vec![owner.into(), side.clone(), publish.clone()];
        let script = &REDISSON_RW_RELEASE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }

    /// Takes the permit `id` of a semaphore in Redisson's layout, asking within its
    /// `permits`, sent at most once.
    pub(crate) async fn redisson_sem_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        id: &str,
        options: &ResolvedOptions,
    ) -> Result<Acquire> {
        let (deadlines, channel) = (names.beside("timeout"), names.release_channel());
        let keys = [&*names.key, deadlines.as_str(), channel.as_str()];
        let publish = Value::from_static_str(self.publish);
        let args = || {
            vec![
                id.into(),
                decimal(options.lease_ms),
                decimal(names.permits),
                publish.clone(),
            ]
        };
        let script = &REDISSON_SEM_ACQUIRE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::Acquisition)
            .await;
        reply
            .map_err(|error| other_permits(names, error))
            .and_then(|reply| acquire_reply(&reply))
    }

    /// Gives back the permit `id` of a semaphore in Redisson's layout: `Some(0)` if it
    /// was held, `None` if not.
    pub(crate) async fn redisson_sem_release(
        &self,
        client: &Client,
        names: &LockNames,
        id: &str,
    ) -> Result<Option<u32>> {
        let (deadlines, channel) = (names.beside("timeout"), names.release_channel());
        let keys = [&*names.key, deadlines.as_str(), channel.as_str()];
        let publish = Value::from_static_str(self.publish);
        let args = || vec![id.into(), publish.clone()];
        let script = &REDISSON_SEM_RELEASE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }
}
