//! The floors: the bare lock, and holdlock's own scripts sent with nothing around them.

use fred::clients::{Client, SubscriberClient};
use fred::interfaces::KeysInterface;
use fred::interfaces::{ClientLike, PubsubInterface};
use fred::types::scripts::Script;
use fred::types::{Expiration, SetOptions};

use super::BenchResult;

/// Releases the bare lock: delete the key only if it still holds our token.
const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
/// The bare hand-off's release: compare-and-delete, then tell the waiters.
pub(super) const RELEASE_AND_PUBLISH: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     redis.call('del', KEYS[1]) redis.call('publish', ARGV[2], 'released') return 1 end return 0";
/// The round-trip floor: a script that does nothing.
pub(super) const TRIVIAL: &str = "return 1";
/// The bare lock's expiry; long enough never to matter during a run.
const BARE_LEASE_MS: u64 = 30_000;

/// holdlock's own scripts sent by fred with nothing around them (no hold registry,
/// guard or watchdog): what the data model costs by itself, so that a figure splits
/// into what Redis spends on the scripts and what the library adds.
pub(super) struct ScriptsAlone {
    redis: Client,
    acquire: Script,
    reenter: Script,
    release: Script,
    owner: String,
    lease: String,
}

/// The floor name of figures measured against [`ScriptsAlone`].
pub(super) const SCRIPTS_ALONE: &str = "its scripts alone";

impl ScriptsAlone {
    pub(super) async fn new(redis: Client) -> BenchResult<Self> {
        let scripts = Self {
            acquire: Script::from_lua(include_str!("../../lua/acquire.lua")),
            reenter: Script::from_lua(include_str!("../../lua/reenter.lua")),
            release: Script::from_lua(concat!(
                include_str!("../../lua/release_hold.lua"),
                include_str!("../../lua/release.lua")
            )),
            owner: format!("{}:scripts-alone", uuid::Uuid::new_v4()),
            lease: BARE_LEASE_MS.to_string(),
            redis,
        };
        for script in [&scripts.acquire, &scripts.reenter, &scripts.release] {
            script.load(&scripts.redis).await?;
        }
        Ok(scripts)
    }

    /// `acquire.lua` with the default 30 s lease, unfenced.
    pub(super) async fn acquire(&self, key: &str) -> BenchResult<()> {
        let reply: Vec<i64> = self
            .acquire
            .evalsha(
                &self.redis,
                vec![key.to_owned(), clients_key(key)],
                vec![self.owner.as_str(), self.lease.as_str()],
            )
            .await?;
        match reply.first() {
            Some(1) => Ok(()),
            _ => Err(format!("scripts alone: acquire refused ({reply:?})").into()),
        }
    }

    /// `reenter.lua` as under a watchdog (no lease argument).
    pub(super) async fn reenter(&self, key: &str) -> BenchResult<()> {
        let count: i64 = self
            .reenter
            .evalsha(&self.redis, key, vec![self.owner.as_str()])
            .await?;
        match count {
            2.. => Ok(()),
            _ => Err(format!("scripts alone: re-entry counted {count}").into()),
        }
    }

    /// `release.lua` for an owner holding the lock `held` times.
    pub(super) async fn release(&self, key: &str, held: i64) -> BenchResult<()> {
        let hint = held.min(2).to_string();
        let remaining: i64 = self
            .release
            .evalsha(
                &self.redis,
                vec![key.to_owned(), clients_key(key)],
                vec![self.owner.as_str(), "publish", hint.as_str()],
            )
            .await?;
        if remaining == held - 1 {
            Ok(())
        } else {
            Err(format!("scripts alone: release left {remaining} of {held}").into())
        }
    }
}

/// The queue of waiting clients beside the lock `key` (as `src/keys.rs` names it).
fn clients_key(key: &str) -> String {
    format!("{key}:clients")
}

/// A subscriber connection of the same server as `redis`, subscribed to `channel`
/// (a bare hand-off's waiter hears the release there).
pub(super) async fn subscribed(redis: &Client, channel: &str) -> BenchResult<SubscriberClient> {
    let subscriber = SubscriberClient::new(
        redis.client_config(),
        Some(redis.perf_config()),
        Some(redis.connection_config().clone()),
        None,
    );
    subscriber.init().await?;
    subscriber.subscribe(channel).await?;
    Ok(subscriber)
}

/// The tutorial lock: `SET NX PX` to take, compare-and-delete to release.
pub(super) struct BareLock {
    redis: Client,
    release: Script,
    pub(super) token: String,
}

impl BareLock {
    pub(super) async fn new(redis: Client) -> BenchResult<Self> {
        let release = Script::from_lua(COMPARE_AND_DELETE);
        release.load(&redis).await?;
        Ok(Self {
            redis,
            release,
            token: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// The client it sends with.
    pub(super) fn redis(&self) -> &Client {
        &self.redis
    }

    pub(super) async fn take(&self, key: &str) -> BenchResult<bool> {
        let set: Option<String> = self
            .redis
            .set(
                key,
                self.token.as_str(),
                Some(Expiration::PX(BARE_LEASE_MS as i64)),
                Some(SetOptions::NX),
                false,
            )
            .await?;
        Ok(set.is_some())
    }

    pub(super) async fn release(&self, key: &str) -> BenchResult<()> {
        let deleted: i64 = self
            .release
            .evalsha(&self.redis, key, self.token.as_str())
            .await?;
        if deleted == 1 {
            Ok(())
        } else {
            Err("bare lock: released a key we did not hold".into())
        }
    }
}
