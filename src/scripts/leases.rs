//! The scripts of the kinds whose holders expire one by one (the semaphore and the
//! read-write lock): each keeps its holders' deadlines in a sorted set next to the lock
//! and has `lua/leases.lua` put in front of it.

use fred::clients::Client;
use fred::types::Value;

use super::LockNames;
use super::{
    Acquire, Delivery, Scripts, acquire_reply, data_argument, decimal, integer, protocol,
    remaining_count,
};
use crate::error::{LockError, Result};
use crate::lease::WRITER_PATIENCE_MS;
use crate::options::ResolvedOptions;

script!(SEM_ACQUIRE = "leases.lua", "sem_acquire.lua");
script!(SEM_RELEASE = "sem_release.lua");
script!(pub(crate) SEM_AVAILABLE = "sem_available.lua");
script!(LEASE_RENEW = "leases.lua", "lease_renew.lua");
script!(RW_ACQUIRE = "fencing.lua", "leases.lua", "rw_acquire.lua");
script!(RW_RELEASE = "leases.lua", "rw_release.lua");
script!(
    /// Takes down a waiting writer's mark (see `waiting::Mark::WriterWaits`).
    pub(crate) RW_UNMARK = "rw_unmark.lua"
);

impl Scripts {
    /// Takes a permit `id` of the semaphore `names` (`lua/sem_acquire.lua`), asking
    /// within its `permits`; a waiting call's refusal has the next release publish.
    pub(crate) async fn sem_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        id: &str,
        options: &ResolvedOptions,
    ) -> Result<Acquire> {
        let (lease_ms, permits) = (options.lease_ms, names.permits);
        let (waits, data) = (!options.is_single_try(), options.data.as_deref());
        let leases = names.leases_key();
        let keys = [&*names.key, leases.as_str()];
        let args = || {
            vec![
                id.into(),
                decimal(lease_ms),
                decimal(permits),
                Value::from_static_str(if waits { "wait" } else { "try" }),
                data_argument(data),
            ]
        };
        let script = &SEM_ACQUIRE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::Acquisition)
            .await;
        reply
            .map_err(|error| other_permits(names, error))
            .and_then(|reply| acquire_reply(&reply))
    }

    /// Gives back the permit `id` of the semaphore `names`; whether it was held.
    pub(crate) async fn sem_release(
        &self,
        client: &Client,
        names: &LockNames,
        id: &str,
    ) -> Result<bool> {
        let leases = names.leases_key();
        let keys = [&*names.key, leases.as_str()];
        let args = || vec![id.into(), Value::from_static_str(self.publish)];
        let script = &SEM_RELEASE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        Ok(integer(&reply)? == 0)
    }

    /// How many permits of the semaphore `names` are held now (its kind's count: see
    /// `scripts/kinds/table.rs`).
    pub(crate) async fn sem_held(&self, client: &Client, names: &LockNames) -> Result<u32> {
        let Some((script, key)) = names.held_count() else {
            return Err(LockError::Protocol(format!(
                "`{}` is not a semaphore",
                names.name
            )));
        };
        let reply = self
            .eval(
                client,
                script,
                &[key.as_str()],
                &Vec::new,
                Delivery::Retried,
            )
            .await?;
        u32::try_from(integer(&reply)?).map_err(|_| protocol(&reply))
    }

    /// Extends the lease of `holder` of the lock `names`, for kinds whose holders
    /// expire one by one (`lua/lease_renew.lua`); whether it still held.
    pub(crate) async fn lease_renew(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        lease_ms: u64,
    ) -> Result<bool> {
        let holder = names.field(owner);
        let leases = names.leases_key();
        let keys = [&*names.key, leases.as_str()];
        let args = || vec![holder.as_ref().into(), decimal(lease_ms)];
        let script = &LEASE_RENEW;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::Retried)
            .await?;
        Ok(integer(&reply)? == 1)
    }

    /// Takes or re-enters the read or write side (`names.kind`) of a read-write lock
    /// for `owner` (`lua/rw_acquire.lua`); a waiting call's refusal has the next
    /// release that lets someone in publish (and a writer's keeps readers out). A fresh
    /// write hold draws a fencing token if fenced.
    pub(crate) async fn rw_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        options: &ResolvedOptions,
    ) -> Result<Acquire> {
        let (lease_ms, waits, data) = (
            options.lease_ms,
            !options.is_single_try(),
            options.data.as_deref(),
        );
        let leases = names.leases_key();
        let exclusive = names.kind.is_exclusive();
        let token_key = (options.fenced && exclusive).then(|| names.token_key());
        let mut keys = vec![&*names.key, leases.as_str()];
        keys.extend(token_key.as_deref());
        let side = names.kind.label();
        let args = || {
            vec![
                owner.into(),
                decimal(lease_ms),
                Value::from_static_str(side),
                Value::from_static_str(if waits { "wait" } else { "try" }),
                decimal(WRITER_PATIENCE_MS),
                data_argument(data),
            ]
        };
        let script = &RW_ACQUIRE;
        match self
            .eval(client, script, &keys, &args, Delivery::Acquisition)
            .await
        {
            Ok(reply) => acquire_reply(&reply),
            Err(LockError::Redis(error)) if error.details().contains("WOULDDEADLOCK") => {
                Err(LockError::WouldDeadlock {
                    name: names.name.clone(),
                })
            }
            Err(error) => Err(error),
        }
    }

    /// Drops one hold counted in `field` of a read-write lock (`lua/rw_release.lua`):
    /// the remaining count, or `None` if there was none.
    pub(crate) async fn rw_release(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
    ) -> Result<Option<u32>> {
        let field = names.field(owner);
        let leases = names.leases_key();
        let keys = [&*names.key, leases.as_str()];
        let args = || vec![field.as_ref().into(), Value::from_static_str(self.publish)];
        let script = &RW_RELEASE;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }
}

/// A semaphore's refusal of a caller asking within another number of permits
/// (`PERMITS <n>`, see `lua/sem_acquire.lua`) as [`LockError::InvalidOption`]; any other
/// error as it is.
pub(super) fn other_permits(names: &LockNames, error: LockError) -> LockError {
    let LockError::Redis(redis) = &error else {
        return error;
    };
    let details = redis.details();
    let Some(at) = details.find("PERMITS ") else {
        return error;
    };
    let stored = details[at..].trim_start_matches("PERMITS ").trim();
    LockError::InvalidOption {
        option: "permits",
        reason: format!(
            "semaphore `{}` is in use with {stored} permits, not {}",
            names.name, names.permits
        ),
    }
}
