//! The scripts of the kinds whose holders expire one by one (the semaphore and the
//! read-write lock): each keeps its holders' deadlines in a sorted set next to the lock
//! and has `lua/leases.lua` put in front of it.

use fred::clients::Client;
use fred::types::Value;

use super::{
    Acquire, Delivery, Scripts, acquire_reply, data_argument, decimal, integer, protocol,
    remaining_count,
};
use crate::error::{LockError, Result};
use crate::keys::{Kind, LockNames};
use crate::lease::WRITER_PATIENCE_MS;

pub(super) const SEM_ACQUIRE: &str = concat!(
    include_str!("../../lua/leases.lua"),
    include_str!("../../lua/sem_acquire.lua")
);
pub(super) const SEM_RELEASE: &str = include_str!("../../lua/sem_release.lua");
pub(super) const SEM_AVAILABLE: &str = include_str!("../../lua/sem_available.lua");
pub(super) const LEASE_RENEW: &str = concat!(
    include_str!("../../lua/leases.lua"),
    include_str!("../../lua/lease_renew.lua")
);
pub(super) const RW_ACQUIRE: &str = concat!(
    include_str!("../../lua/fencing.lua"),
    include_str!("../../lua/leases.lua"),
    include_str!("../../lua/rw_acquire.lua")
);
pub(super) const RW_RELEASE: &str = concat!(
    include_str!("../../lua/leases.lua"),
    include_str!("../../lua/rw_release.lua")
);

impl Scripts {
    /// Takes a permit `id` of the semaphore `names` (`lua/sem_acquire.lua`), asking
    /// within `permits`; `waits` says whether a refusal should have the next release
    /// publish.
    pub(crate) async fn sem_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        id: &str,
        (lease_ms, permits): (u64, u32),
        (waits, data): (bool, Option<&str>),
    ) -> Result<Acquire> {
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
        let script = &self.sem_acquire;
        match self
            .eval(client, script, &keys, &args, Delivery::Acquisition)
            .await
        {
            Ok(reply) => acquire_reply(&reply),
            Err(LockError::Redis(error)) if error.details().contains("PERMITS ") => {
                let details = error.details();
                let stored = details[details.find("PERMITS ").unwrap_or(0)..]
                    .trim_start_matches("PERMITS ")
                    .trim();
                Err(LockError::InvalidOption {
                    option: "permits",
                    reason: format!(
                        "semaphore `{}` is in use with {stored} permits, not {permits}",
                        names.name
                    ),
                })
            }
            Err(error) => Err(error),
        }
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
        let script = &self.sem_release;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        Ok(integer(&reply)? == 0)
    }

    /// How many permits of the semaphore `names` are held now.
    pub(crate) async fn sem_held(&self, client: &Client, names: &LockNames) -> Result<u32> {
        let leases = names.leases_key();
        let script = &self.sem_available;
        let reply = self
            .eval(
                client,
                script,
                &[leases.as_str()],
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
        holder: &str,
        lease_ms: u64,
    ) -> Result<bool> {
        let leases = names.leases_key();
        let keys = [&*names.key, leases.as_str()];
        let args = || vec![holder.into(), decimal(lease_ms)];
        let script = &self.lease_renew;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::Retried)
            .await?;
        Ok(integer(&reply)? == 1)
    }

    /// Takes or re-enters the read or write side (`names.kind`) of a read-write lock
    /// for `owner` (`lua/rw_acquire.lua`); `waits` says whether a refusal should have
    /// the next release that lets someone in publish (and a writer's keep readers out).
    /// A fresh write hold draws a fencing token if `fenced`.
    pub(crate) async fn rw_acquire(
        &self,
        client: &Client,
        names: &LockNames,
        owner: &str,
        (lease_ms, fenced): (u64, bool),
        (waits, data): (bool, Option<&str>),
    ) -> Result<Acquire> {
        let leases = names.leases_key();
        let token_key = (fenced && names.kind == Kind::Write).then(|| names.token_key());
        let mut keys = vec![&*names.key, leases.as_str()];
        keys.extend(token_key.as_deref());
        let side = if names.kind == Kind::Write {
            "write"
        } else {
            "read"
        };
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
        let script = &self.rw_acquire;
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
        field: &str,
    ) -> Result<Option<u32>> {
        let leases = names.leases_key();
        let keys = [&*names.key, leases.as_str()];
        let args = || vec![field.into(), Value::from_static_str(self.publish)];
        let script = &self.rw_release;
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }
}
