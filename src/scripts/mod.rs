//! The Lua scripts that are the only writers of lock keys, and how they are sent.
//!
//! Each script lives in `lua/` and is sent with `EVALSHA`. A `NOSCRIPT` reply (after a
//! `SCRIPT FLUSH` or a failover to a fresh server) loads the script and sends it again;
//! that is safe because `NOSCRIPT` means the script did not run.
//!
//! Every script checks each key it touches before its first write, so that an error
//! (a key of another type) leaves nothing written. A script that finds a key other
//! than its first of the wrong type says which (`WRONGTYPE KEYS[n] <key> ...`), and
//! `LockError::from_script` reports that key.

use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::config::Options;
use fred::types::scripts::Script;
use fred::types::{ClusterHash, CustomCommand, Value};
use fred::util::redis_keyslot;
use tokio::time::Instant;

use crate::error::{Cause, LockError, Result, classify};
use crate::options::ResolvedOptions;

/// Declares a script: a `static` compiled on first use (its SHA-1 computed once) from
/// the files of `lua/` named, joined in order. Every script is declared this way,
/// beside the calls that send it.
macro_rules! script {
    ($(#[$doc:meta])* $vis:vis $name:ident = $($file:literal),+) => {
        $(#[$doc])*
        $vis static $name: std::sync::LazyLock<fred::types::scripts::Script> =
            std::sync::LazyLock::new(|| {
                fred::types::scripts::Script::from_lua(concat!(
                    $(include_str!(concat!("../../lua/", $file))),+
                ))
            });
    };
}

mod again;
mod asking;
mod batch;
mod election;
mod fair;
mod kinds;
mod leases;
mod operator;
mod redisson;
mod waits;

pub(crate) use asking::{Asking, HandOff};
pub(crate) use batch::{HoldToRenew, Placement, Released, RenewalCall, Renewed, key_slot};
pub(crate) use election::LeaderRecord;
pub(crate) use kinds::{Kind, LockNames, election_names, fair_names, rw_names, semaphore_names};
pub(crate) use leases::RW_UNMARK;
pub(crate) use operator::{Snapshot, fields};
pub(crate) use redisson::leave_fair_queue;
pub(crate) use waits::{clear_wait, read_holders, read_wait, write_wait};

script!(ACQUIRE = "fencing.lua", "acquire.lua");
script!(
    /// The acquire of the mutex in Redisson's layout (see `compat.rs`); its re-entry
    /// and renewal are holdlock's own, which change the hash as Redisson's do.
    REDISSON_ACQUIRE = "redisson/acquire.lua"
);
script!(
    /// The release of the mutex in Redisson's layout.
    REDISSON_RELEASE = "redisson/release.lua"
);
script!(REENTER = "reenter.lua");
script!(RELEASE = "release_hold.lua", "release.lua");
script!(RENEW = "renew.lua");
script!(FENCE = "fence.lua");
script!(COMPLETE_PERIOD = "complete_period.lua");
script!(SHARD_CHANNELS = "shard_channels.lua");

/// Whether the server behind `redis` has shard channels (`SPUBLISH`, Redis 7.0 on), for
/// a server that hides its version (an ACL without `INFO`): asked with a script, which
/// the documented ACL rule allows. A server that cannot be asked is taken to have them,
/// as holdlock took every server that hides its version before (its release and
/// waiting then fail with "unknown command" on Redis 6, rather than wait in silence).
pub(crate) async fn has_shard_channels(redis: &Client) -> bool {
    let asked = SHARD_CHANNELS
        .evalsha_with_reload::<i64, _, _>(redis, Vec::<String>::new(), Vec::<String>::new())
        .await;
    !matches!(asked, Ok(0))
}
/// How a script may be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Idempotent: fred may write it again after a reconnect.
    Retried,
    /// Not idempotent: written at most once; the caller resolves a failure itself.
    AtMostOnce,
    /// An acquisition: as `AtMostOnce`, and sent only to the node the slot map names,
    /// never to a node importing its slot (after `ASKING`). Its keys are new, which a
    /// half migrated slot refuses on that node too (`TRYAGAIN`) until the migration
    /// ends; and a `WAIT` after it (`min_replicas`) counts the replicas of the node the
    /// slot map names.
    Acquisition,
}

/// The reply of `acquire.lua` or `reenter.lua`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// The owner now holds the lock `count` times; `token` is 0 unless one was drawn.
    Granted { count: u32, token: u64 },
    /// Someone else holds it; their lease ends in `pttl` (None: the key has no expiry).
    /// A fair lock's waiter learns that it is `queued` (see `lua/fair_queue.lua`).
    Busy {
        pttl: Option<Duration>,
        queued: Option<Queued>,
    },
    /// A re-entry found that the owner no longer holds the lock.
    Vanished,
}

/// A fair lock's waiter, queued by its refused attempt (see `lua/fair_acquire.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queued {
    /// Its place: when its wait began, in microseconds by the server's clock.
    pub(crate) place: u64,
    /// The server's clock when the attempt ran, in milliseconds.
    pub(crate) server_ms: u64,
    /// Whether the waiter's client was alive in the queue before the attempt. If not,
    /// the places of its other waits there were dropped: they must queue again.
    pub(crate) client_was_alive: bool,
    /// For a refresh: the positions in its `fair_check` of the entries not queued.
    pub(crate) not_queued: Vec<usize>,
}

/// How the scripts are sent: the settings every call shares.
#[derive(Debug)]
pub(crate) struct Scripts {
    /// How release messages are published: `publish`, or `spublish` on a cluster.
    publish: &'static str,
    /// Every script's timeout (the connect timeout): set per command, so that a lent
    /// client without a default command timeout cannot hold a lock call forever.
    timeout: Duration,
}

/// The command release messages are published with: `spublish` on shard channels
/// (`sharded`), else `publish`.
fn publish_command(sharded: bool) -> &'static str {
    if sharded { "spublish" } else { "publish" }
}

/// The hash field of a fenced hold's token in the lock key (see `lua/acquire.lua`).
/// Owner ids contain a colon, so it is never an owner.
pub(crate) const TOKEN_FIELD: &str = "token";

impl Scripts {
    /// The scripts, publishing release messages on shard channels if `sharded`.
    pub(crate) fn new(sharded: bool, timeout: Duration) -> Self {
        Self {
            publish: publish_command(sharded),
            timeout,
        }
    }

    /// Takes a mutex with `script` (`lua/acquire.lua` or Redisson's), sent at most once.
    pub(crate) async fn acquire(
        &self,
        client: &Client,
        script: &Script,
        call: AcquireCall<'_>,
    ) -> Result<Acquire> {
        let reply = self
            .eval(
                client,
                script,
                &call.keys(),
                &|| call.args(),
                Delivery::Acquisition,
            )
            .await?;
        acquire_reply(&reply)
    }

    /// Raises the hold count of `owner`, who holds the lock at `key` as far as it
    /// knows; sets the lease again unless `lease_ms` is `None`.
    pub(crate) async fn reenter(
        &self,
        client: &Client,
        key: &str,
        owner: &str,
        lease_ms: Option<u64>,
    ) -> Result<Acquire> {
        let args = || {
            let mut args = vec![owner.into()];
            args.extend(lease_ms.map(decimal));
            args
        };
        let reply = self
            .eval(client, &REENTER, &[key], &args, Delivery::AtMostOnce)
            .await?;
        match integer(&reply)? {
            0 => Ok(Acquire::Vanished),
            count => Ok(Acquire::Granted {
                count: u32::try_from(count).map_err(|_| protocol(&reply))?,
                token: 0,
            }),
        }
    }

    /// Releases a mutex with `script` (`lua/release.lua`, told the queue of waiting
    /// clients as `second`, or Redisson's, told its channel). Returns the remaining hold
    /// count, or `None` if the owner held nothing. `held` (the owner's count as known
    /// here) only picks the script's fastest path.
    pub(crate) async fn release(
        &self,
        client: &Client,
        script: &Script,
        names: &LockNames,
        second: &str,
        owner: &str,
        held: u32,
    ) -> Result<Option<u32>> {
        let args = || {
            vec![
                owner.into(),
                Value::from_static_str(self.publish),
                decimal(held.min(2)),
            ]
        };
        let keys = [&*names.key, second];
        let reply = self
            .eval(client, script, &keys, &args, Delivery::AtMostOnce)
            .await?;
        remaining_count(&reply)
    }

    /// Returns whether the owner still held the lock (and so had its lease extended).
    pub(crate) async fn renew(
        &self,
        client: &Client,
        key: &str,
        owner: &str,
        lease_ms: u64,
    ) -> Result<bool> {
        let args = || vec![owner.into(), decimal(lease_ms)];
        let reply = self
            .eval(client, &RENEW, &[key], &args, Delivery::Retried)
            .await?;
        Ok(integer(&reply)? == 1)
    }

    /// Reads (`value: None`) or writes the fenced `key` as the holder of `token`.
    /// Returns the key's value after the call, or `Err(newest)` if `token` is stale.
    pub(crate) async fn fence(
        &self,
        client: &Client,
        key: &str,
        token: u64,
        value: Option<Value>,
    ) -> Result<Result<Option<String>, u64>> {
        let args = || {
            std::iter::once(token.to_string().into())
                .chain(value.clone())
                .collect()
        };
        let reply = self
            .eval(client, &FENCE, &[key], &args, Delivery::Retried)
            .await?;
        match &reply {
            Value::Array(items) if items.len() == 2 => match integer(&items[0])? {
                1 => match &items[1] {
                    Value::Null | Value::Boolean(false) => Ok(Ok(None)),
                    value => Ok(Ok(Some(value.as_string().ok_or_else(|| protocol(&reply))?))),
                },
                _ => Ok(Err(unsigned(&items[1])?)),
            },
            _ => Err(protocol(&reply)),
        }
    }

    /// Marks a period done if `owner` still holds the lock; returns whether it did.
    pub(crate) async fn complete_period(
        &self,
        client: &Client,
        key: &str,
        marker: &str,
        owner: &str,
        keep_ms: u64,
    ) -> Result<bool> {
        let args = || vec![owner.into(), decimal(keep_ms)];
        let reply = self
            .eval(
                client,
                &COMPLETE_PERIOD,
                &[key, marker],
                &args,
                Delivery::Retried,
            )
            .await?;
        Ok(integer(&reply)? == 1)
    }

    /// `WAIT replicas timeout` on `client`, routed to the node of `key`: how many
    /// replicas have every write made on that connection so far. Sent once.
    pub(crate) async fn wait_for_replicas(
        client: &Client,
        key: &str,
        (replicas, wait_ms): (u32, u64),
        timeout: Duration,
    ) -> Result<u32> {
        let wait = CustomCommand::new_static("WAIT", slot_of(key), true);
        let options = Options {
            max_attempts: Some(1),
            timeout: Some(timeout),
            ..Options::default()
        };
        let args: Vec<Value> = vec![replicas.into(), decimal(wait_ms)];
        let reply: Value = Box::pin(client.with_options(&options).custom(wait, args)).await?;
        integer(&reply).and_then(|n| u32::try_from(n).map_err(|_| protocol(&reply)))
    }

    /// `EVALSHA`, loading the script and trying again on `NOSCRIPT` ([`MOST_LOADS`]
    /// times at most). `args` builds the script's arguments; it is called again only
    /// for those tries (so that the hot path never clones them).
    ///
    /// Sent as a custom command because fred's per-command options (`max_attempts`)
    /// are not offered on its Lua interface; routing uses the first key's slot.
    async fn eval<K: ScriptKey>(
        &self,
        client: &Client,
        script: &Script,
        keys: &[K],
        args: &(dyn Fn() -> Vec<Value> + Sync),
        delivery: Delivery,
    ) -> Result<Value> {
        if keys.is_empty() {
            return Err(LockError::Protocol("a lock script needs a key".into()));
        }
        let command = evalsha_command(client, keys);
        let deadline = Instant::now() + self.timeout;
        let key = keys[0].as_str();
        let arguments = || evalsha_arguments(script, keys, args());
        let send = || again::send(client, &command, key, &arguments, delivery, deadline);
        // One allocation per send: `again::send` boxes fred's future itself.
        let mut sent = send().await;
        let mut loads = 0;
        while let Err(error) = &sent {
            if !loaded_again(client, script, error, &mut loads).await? {
                break;
            }
            sent = send().await;
        }
        sent.map_err(|error| script_error(error, script, keys))
    }

    /// `command key [field]` (`HGET`, `GET`) on `client`, sent again like a script when
    /// Redis did not run it (see `again`). Read over the connection the scripts go
    /// over, it sees what a script sent before it did, even one whose reply was lost
    /// (a connection runs its commands in order; another one may overtake it, and
    /// under `CLIENT PAUSE WRITE` a read does).
    pub(crate) async fn read(
        &self,
        client: &Client,
        command: &'static str,
        key: &str,
        field: Option<&str>,
    ) -> Result<Value> {
        let command = keyed_command(client, command, key);
        let arguments = || {
            [Some(key), field]
                .into_iter()
                .flatten()
                .map(Value::from)
                .collect()
        };
        let deadline = Instant::now() + self.timeout;
        let send = again::send(
            client,
            &command,
            key,
            &arguments,
            Delivery::Retried,
            deadline,
        );
        Box::pin(send)
            .await
            .map_err(|error| LockError::from_redis(error, key))
    }
}

/// The error of `script` on `keys` (see [`LockError::from_script`]).
fn script_error(error: fred::error::Error, script: &Script, keys: &[impl ScriptKey]) -> LockError {
    let keys: Vec<&str> = keys.iter().map(ScriptKey::as_str).collect();
    LockError::from_script(error, &keys, Some(script))
}

/// How a script is sent: `delivery`'s attempts and what is left of the call's time.
///
/// No redirection is asked for here: fred reads a command's `max_redirections` of 0
/// as the client's default. On a cluster the scripts' client follows none (see
/// `connection::scripting_settings`), and [`SendAgain`] sends a redirected script
/// again (a redirection means it did not run).
pub(super) fn send_options(delivery: Delivery, deadline: Instant) -> Options {
    Options {
        max_attempts: (delivery != Delivery::Retried).then_some(1),
        timeout: Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(MIN_SEND_TIMEOUT),
        ),
        ..Options::default()
    }
}

/// The shortest timeout a command is sent with (one sent with none left would wait
/// forever: fred reads a zero timeout as none).
const MIN_SEND_TIMEOUT: Duration = Duration::from_millis(1);

/// How many times one call loads its script again after `NOSCRIPT` (which means the
/// script did not run, so sending it again is safe): more than once, as on a cluster
/// the load and the next try can meet a flushed cache again (a failover to a replica
/// that never loaded it, a `SCRIPT FLUSH` in between; the cluster chaos soak saw one
/// call fail so with a single load).
const MOST_LOADS: u32 = 3;

/// Loads `script` again if `error` is `NOSCRIPT` and this call (whose loads so far
/// `loads` counts) has not loaded it [`MOST_LOADS`] times yet: whether to send again.
async fn loaded_again(
    client: &Client,
    script: &Script,
    error: &fred::error::Error,
    loads: &mut u32,
) -> Result<bool> {
    if *loads >= MOST_LOADS || classify(error) != Cause::NoScript {
        return Ok(false);
    }
    tracing::debug!("script cache flushed on the server; loading the script again");
    Box::pin(script.load(client)).await?;
    *loads += 1;
    Ok(true)
}

/// Routes a command to the slot of `key` (the lock's hash tag).
fn slot_of(key: &str) -> ClusterHash {
    ClusterHash::Custom(redis_keyslot(key.as_bytes()))
}

/// A key as a script takes it: borrowed (copied into the command), or a slice of one
/// buffer shared by a batch call's keys (see `batch::PackedKeys`).
pub(crate) trait ScriptKey: Sync {
    /// The key's text (for its slot, and to name it in an error).
    fn as_str(&self) -> &str;

    /// The key as an argument of `EVALSHA`.
    fn to_value(&self) -> Value;
}

impl ScriptKey for &str {
    fn as_str(&self) -> &str {
        self
    }

    fn to_value(&self) -> Value {
        Value::from(*self)
    }
}

/// `EVALSHA`, routed by the first of `keys` (only a cluster needs its slot).
fn evalsha_command(client: &Client, keys: &[impl ScriptKey]) -> CustomCommand {
    let key = keys.first().map_or("", ScriptKey::as_str);
    keyed_command(client, "EVALSHA", key)
}

/// `command`, routed by `key` (only a cluster needs its slot).
fn keyed_command(client: &Client, command: &'static str, key: &str) -> CustomCommand {
    let route = match client.is_clustered() {
        true => slot_of(key),
        false => ClusterHash::Random,
    };
    CustomCommand::new_static(command, route, false)
}

/// The arguments of `EVALSHA` for `script`: its SHA-1, the keys and `args`.
fn evalsha_arguments(script: &Script, keys: &[impl ScriptKey], args: Vec<Value>) -> Vec<Value> {
    let mut arguments: Vec<Value> = Vec::with_capacity(2 + keys.len() + args.len());
    arguments.push(script.sha1().clone().into());
    arguments.push(decimal(keys.len() as u64));
    arguments.extend(keys.iter().map(ScriptKey::to_value));
    arguments.extend(args);
    arguments
}

/// A number as a script argument (sent as its decimal digits; the small ones that
/// every call sends, such as the key count, without formatting them each time).
fn decimal(number: impl Into<u64>) -> Value {
    match number.into() {
        0 => Value::from_static_str("0"),
        1 => Value::from_static_str("1"),
        2 => Value::from_static_str("2"),
        number => Value::Integer(i64::try_from(number).unwrap_or(i64::MAX)),
    }
}

/// The arguments of one `acquire.lua` call.
#[derive(Debug, Clone)]
pub(crate) struct AcquireCall<'a> {
    key: &'a str,
    /// The queue of waiting clients beside it (none in Redisson's layout, whose
    /// waiters all ask at each release).
    clients: Option<String>,
    /// Given only when a fencing token is to be drawn.
    token_key: Option<String>,
    owner: &'a str,
    lease_ms: u64,
    /// Whether the caller waits for a release if refused.
    waits: bool,
    /// Data to keep with a fresh hold.
    data: Option<&'a str>,
    /// What the caller's client knows of the hand-off (see `lua/acquire.lua`).
    hand_off: HandOff,
}

impl<'a> AcquireCall<'a> {
    /// The call that takes lock `names` afresh for `owner`.
    pub(crate) fn of(
        names: &'a LockNames,
        owner: &'a str,
        (options, asking): (&'a ResolvedOptions, &Asking),
    ) -> Self {
        Self {
            key: &names.key,
            clients: names.queues_clients().then(|| names.clients_key()),
            token_key: options.fenced.then(|| names.token_key()),
            owner,
            lease_ms: options.lease_ms,
            waits: !options.is_single_try(),
            data: options.data.as_deref(),
            hand_off: asking.hand_off,
        }
    }

    fn keys(&self) -> KeyList<'_> {
        match (&self.clients, &self.token_key) {
            (Some(clients), Some(token_key)) => KeyList::Three([self.key, clients, token_key]),
            (Some(other), None) | (None, Some(other)) => KeyList::Two([self.key, other]),
            (None, None) => KeyList::One([self.key]),
        }
    }

    fn args(&self) -> Vec<Value> {
        let mut args = vec![self.owner.into(), decimal(self.lease_ms)];
        if !self.waits {
            // A single try: a refusal need not have the next release publish.
            args.push(Value::from_static_str("try"));
        }
        let hints = self.hand_off.hints();
        if self.data.is_some() || !hints.is_empty() {
            if self.waits {
                args.push(Value::from_static_str("wait"));
            }
            args.push(data_argument(self.data));
        }
        if !hints.is_empty() {
            args.push(Value::from_static_str(hints));
        }
        args
    }
}

/// The keys of one script call, without a `Vec`.
enum KeyList<'a> {
    One([&'a str; 1]),
    Two([&'a str; 2]),
    Three([&'a str; 3]),
}

impl<'a> std::ops::Deref for KeyList<'a> {
    type Target = [&'a str];

    fn deref(&self) -> &Self::Target {
        match self {
            Self::One(keys) => keys,
            Self::Two(keys) => keys,
            Self::Three(keys) => keys,
        }
    }
}

fn acquire_reply(reply: &Value) -> Result<Acquire> {
    match pair(reply)? {
        (0, pttl) => Ok(Acquire::Busy {
            pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
            queued: None,
        }),
        (count, token) => Ok(Acquire::Granted {
            count: u32::try_from(count).map_err(|_| protocol(reply))?,
            token: u64::try_from(token).map_err(|_| protocol(reply))?,
        }),
    }
}

/// The reply of a release script: the owner's remaining hold count, or `None` (-1)
/// if it held nothing.
fn remaining_count(reply: &Value) -> Result<Option<u32>> {
    match integer(reply)? {
        -1 => Ok(None),
        count => u32::try_from(count).map(Some).map_err(|_| protocol(reply)),
    }
}

/// Data kept with a fresh hold, as a script argument: empty for none.
fn data_argument(data: Option<&str>) -> Value {
    data.map_or_else(|| Value::from_static_str(""), Value::from)
}

fn protocol(reply: &Value) -> LockError {
    LockError::Protocol(format!("{reply:?}"))
}

fn integer(reply: &Value) -> Result<i64> {
    reply.as_i64().ok_or_else(|| protocol(reply))
}

/// A non-negative integer, sent as an integer or (beyond Lua's exact range) as a
/// decimal string.
fn unsigned(reply: &Value) -> Result<u64> {
    reply.as_u64().ok_or_else(|| protocol(reply))
}

fn pair(reply: &Value) -> Result<(i64, i64)> {
    match reply {
        Value::Array(items) if items.len() == 2 => Ok((integer(&items[0])?, integer(&items[1])?)),
        _ => Err(protocol(reply)),
    }
}
