//! The Lua contract, checked by calling each script directly (no Rust lock API).

mod common;

use fred::interfaces::{HashesInterface, KeysInterface, LuaInterface};
use fred::types::Value;

const ACQUIRE: &str = concat!(
    include_str!("../lua/fencing.lua"),
    include_str!("../lua/acquire.lua")
);
const REENTER: &str = include_str!("../lua/reenter.lua");
const RELEASE: &str = concat!(
    include_str!("../lua/release_hold.lua"),
    include_str!("../lua/release.lua")
);
const RENEW: &str = include_str!("../lua/renew.lua");
const FORCE_UNLOCK: &str = concat!(
    include_str!("../lua/fair_queue.lua"),
    include_str!("../lua/leases.lua"),
    include_str!("../lua/force_unlock.lua")
);
const FENCE: &str = include_str!("../lua/fence.lua");
const COMPLETE_PERIOD: &str = include_str!("../lua/complete_period.lua");
const FAIR_ACQUIRE: &str = concat!(
    include_str!("../lua/fencing.lua"),
    include_str!("../lua/fair_queue.lua"),
    include_str!("../lua/fair_acquire.lua")
);
const FAIR_LEAVE: &str = concat!(
    include_str!("../lua/fair_queue.lua"),
    include_str!("../lua/fair_leave.lua")
);

struct Lock {
    redis: fred::clients::Client,
    key: String,
    /// The queue of waiting clients beside the lock (see `lua/acquire.lua`).
    clients: String,
    token_key: String,
    channel: String,
}

impl Lock {
    async fn new(test: &str) -> Self {
        Self::on(&common::url(), test).await
    }

    async fn on(url: &str, test: &str) -> Self {
        let name = common::unique(test);
        Self {
            redis: common::raw(url).await,
            key: common::key(&name),
            clients: format!("{}:clients", common::key(&name)),
            token_key: common::token_key(&name),
            channel: common::release_channel(&name),
        }
    }

    /// `acquire.lua`: a fresh acquisition, drawing a token if `fenced`.
    async fn acquire(&self, owner: &str, lease_ms: i64, fenced: bool) -> Vec<i64> {
        let mut keys = vec![self.key.clone(), self.clients.clone()];
        if fenced {
            keys.push(self.token_key.clone());
        }
        let args = vec![owner.to_owned(), lease_ms.to_string()];
        self.redis.eval(ACQUIRE, keys, args).await.unwrap()
    }

    /// `acquire.lua` for a waiting call with hand-off `hints` ("q", "f").
    async fn acquire_hinted(&self, owner: &str, hints: &str) -> Vec<i64> {
        let keys = vec![self.key.clone(), self.clients.clone()];
        let args = vec![owner, "10000", "wait", "", hints];
        self.redis.eval(ACQUIRE, keys, args).await.unwrap()
    }

    /// The queue of waiting clients, first first.
    async fn queued(&self) -> Vec<String> {
        let zrange = "return redis.call('zrange', KEYS[1], 0, -1)";
        self.redis
            .eval(zrange, self.clients.clone(), Vec::<String>::new())
            .await
            .unwrap()
    }

    /// `reenter.lua`; a lease of 0 is not sent, which leaves the lease alone.
    async fn reenter(&self, owner: &str, lease_ms: i64) -> i64 {
        let mut args = vec![owner.to_owned()];
        if lease_ms > 0 {
            args.push(lease_ms.to_string());
        }
        self.redis
            .eval(REENTER, self.key.clone(), args)
            .await
            .unwrap()
    }

    async fn release(&self, owner: &str) -> i64 {
        self.release_hinted(owner, 0).await
    }

    /// `release.lua` with the caller's own count of its holds as the hint.
    async fn release_hinted(&self, owner: &str, held: u32) -> i64 {
        let args = vec![owner.to_owned(), "publish".to_owned(), held.to_string()];
        let keys = vec![self.key.clone(), self.clients.clone()];
        self.redis.eval(RELEASE, keys, args).await.unwrap()
    }

    async fn fields(&self) -> std::collections::HashMap<String, i64> {
        self.redis.hgetall(self.key.as_str()).await.unwrap()
    }

    async fn renew(&self, owner: &str, lease_ms: i64) -> i64 {
        self.redis
            .eval(
                RENEW,
                self.key.clone(),
                vec![owner.to_owned(), lease_ms.to_string()],
            )
            .await
            .unwrap()
    }

    async fn pttl(&self) -> i64 {
        self.redis.pttl(self.key.as_str()).await.unwrap()
    }
}

#[tokio::test]
async fn a_fresh_acquire_starts_over_a_hold_its_owner_gave_up() {
    let lock = Lock::new("leftover").await;
    let first = lock.acquire("a", 10_000, true).await;
    assert_eq!(first[0], 1);
    assert_eq!(lock.reenter("a", 10_000).await, 2, "re-entry counts up");
    // The owner gave both holds up as lost without releasing them, and starts afresh:
    // count 1 again, with a new token, not a third nested hold sharing the old one.
    let fresh = lock.acquire("a", 10_000, true).await;
    assert_eq!(fresh[0], 1);
    assert!(
        fresh[1] > first[1],
        "a new token: {fresh:?} after {first:?}"
    );
    let count: i64 = lock.redis.hget(lock.key.as_str(), "a").await.unwrap();
    assert_eq!(count, 1);
    assert_eq!(
        lock.acquire("b", 10_000, true).await[0],
        0,
        "others are still refused"
    );
}

#[tokio::test]
async fn acquire_grants_and_reports_the_holders_ttl() {
    let lock = Lock::new("acquire").await;
    assert_eq!(lock.acquire("a", 10_000, false).await, vec![1, 0]);
    assert_eq!(lock.reenter("a", 10_000).await, 2);
    let busy = lock.acquire("b", 10_000, false).await;
    assert_eq!(busy[0], 0, "another owner is refused");
    assert!(
        busy[1] > 9_000 && busy[1] <= 10_000,
        "with the holder's PTTL: {busy:?}"
    );
    let fields: std::collections::HashMap<String, String> =
        lock.redis.hgetall(lock.key.as_str()).await.unwrap();
    assert_eq!(
        fields,
        [
            ("a".to_owned(), "2".to_owned()),
            ("waiting".to_owned(), "1".to_owned())
        ]
        .into(),
        "the refusal left word that someone waits"
    );
    assert_eq!(lock.queued().await, ["b"], "and queued b's client");
    let floor: i64 = lock.redis.exists(lock.token_key.as_str()).await.unwrap();
    assert_eq!(floor, 0, "no token key without fencing");
}

#[tokio::test]
async fn reenter_sets_the_lease_again_only_when_asked() {
    let lock = Lock::new("reenter-lease").await;
    lock.acquire("a", 1_000, false).await;
    assert_eq!(lock.reenter("a", 0).await, 2);
    assert!(
        lock.pttl().await <= 1_000,
        "no lease: the lease is left alone"
    );
    assert_eq!(lock.reenter("a", 60_000).await, 3);
    assert!(lock.pttl().await > 59_000, "a lease is set again");
}

#[tokio::test]
async fn reenter_changes_nothing_for_an_owner_that_no_longer_holds() {
    let lock = Lock::new("reenter-vanished").await;
    assert_eq!(lock.reenter("a", 10_000).await, 0, "nothing held");
    let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
    assert_eq!(exists, 0, "no key left behind");
    lock.acquire("b", 10_000, false).await;
    assert_eq!(lock.reenter("a", 10_000).await, 0, "another owner holds it");
    assert_eq!(lock.fields().await, [("b".to_owned(), 1)].into());
    assert!(lock.pttl().await > 9_000, "their lease is untouched");
}

#[tokio::test]
async fn release_counts_down_leaves_the_lease_and_deletes_at_zero() {
    for hint in [0, 1, 2] {
        let lock = Lock::new(&format!("release-{hint}")).await;
        lock.acquire("a", 10_000, false).await;
        lock.reenter("a", 10_000).await;
        assert_eq!(
            lock.release_hinted("b", hint).await,
            -1,
            "a non-owner holds nothing"
        );
        assert_eq!(
            lock.fields().await,
            [("a".to_owned(), 2)].into(),
            "and leaves no field"
        );
        let _: bool = lock
            .redis
            .pexpire(lock.key.as_str(), 5_000, None)
            .await
            .unwrap();
        // The hint only picks the script's path: a wrong one gives the same answer.
        assert_eq!(lock.release_hinted("a", hint).await, 1, "hint {hint}");
        let pttl = lock.pttl().await;
        assert!(
            (1..=5_000).contains(&pttl),
            "a remaining hold keeps the lease it had: {pttl}"
        );
        assert_eq!(lock.release_hinted("a", hint).await, 0);
        let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
        assert_eq!(exists, 0);
        assert_eq!(
            lock.release_hinted("a", hint).await,
            -1,
            "nothing left to release"
        );
        let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
        assert_eq!(exists, 0, "and no key made for it");
    }
}

/// How many times each command other than the scripts and `CONFIG` ran since the last
/// `CONFIG RESETSTAT`.
fn command_calls(server: &common::RedisServer) -> std::collections::BTreeMap<String, u64> {
    let mut calls = server.command_stats();
    calls.retain(|name, _| name != "evalsha" && name != "eval" && !name.starts_with("config"));
    calls
}

#[tokio::test]
async fn the_hot_paths_make_the_fewest_redis_calls() {
    // Each redis.call costs the server about a microsecond; these are the counts the
    // design promises (see docs/performance.md).
    let server = common::RedisServer::start();
    let lock = Lock::on(&server.url(), "calls").await;
    let calls = |expected: &[(&str, u64)]| {
        let got = command_calls(&server);
        server.command(&["CONFIG", "RESETSTAT"]).unwrap();
        let expected: std::collections::BTreeMap<String, u64> = expected
            .iter()
            .map(|(name, n)| ((*name).to_owned(), *n))
            .collect();
        assert_eq!(got, expected);
    };
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    lock.acquire("a", 10_000, false).await;
    // The fast path: EXISTS of the lock and its queue (free, and no client queued to
    // be told of the release?), then the hold and its lease.
    calls(&[("exists", 1), ("hset", 1), ("pexpire", 1)]);
    assert_eq!(lock.reenter("a", 0).await, 2);
    calls(&[("hincrby", 1)]);
    assert_eq!(lock.release_hinted("a", 2).await, 1);
    calls(&[("hincrby", 1)]);
    assert_eq!(lock.release_hinted("a", 1).await, 0);
    calls(&[("hmget", 1), ("del", 1)]); // nobody waited: nothing published

    lock.acquire("a", 10_000, false).await;
    assert_eq!(lock.acquire("b", 10_000, false).await[0], 0);
    // A refused attempt pays the fast path's EXISTS, then PTTL and HGETALL.
    let queued = [("zrange", 1), ("zadd", 1)];
    calls(
        &[
            [
                ("exists", 2),
                ("pttl", 1),
                ("hset", 2),
                ("pexpire", 2),
                ("hgetall", 1),
            ]
            .as_slice(),
            &queued,
        ]
        .concat(),
    );
    assert_eq!(lock.acquire("c", 10_000, false).await[0], 0);
    // The mark is written once; the client is queued (and the queue's expiry set).
    calls(
        &[
            [("exists", 1), ("pttl", 1), ("hgetall", 1), ("pexpire", 1)].as_slice(),
            &queued,
        ]
        .concat(),
    );
    assert_eq!(lock.release_hinted("a", 1).await, 0);
    // b waits: told, its client taken off the queue.
    calls(&[
        ("hmget", 1),
        ("del", 1),
        ("zrange", 1),
        ("zrem", 1),
        ("publish", 1),
    ]);
}

#[tokio::test]
async fn release_at_zero_publishes_on_the_channel() {
    use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
    let lock = Lock::new("publish").await;
    let config = fred::types::config::Config::from_url(&common::url()).unwrap();
    let subscriber = fred::types::Builder::from_config(config)
        .build_subscriber_client()
        .unwrap();
    subscriber.init().await.unwrap();
    let mut messages = subscriber.message_rx();
    subscriber.subscribe(lock.channel.as_str()).await.unwrap();
    lock.acquire("a", 10_000, false).await;
    lock.reenter("a", 10_000).await;
    assert_eq!(
        lock.acquire("b", 10_000, false).await[0],
        0,
        "b is refused: it waits"
    );
    lock.release("a").await;
    lock.release("a").await;
    let message = tokio::time::timeout(std::time::Duration::from_secs(2), messages.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.channel.to_string(), lock.channel);
    assert_eq!(
        message.value.as_string().as_deref(),
        Some("b"),
        "the message names the client to hand the lock to"
    );
    // Exactly one message: the nested release published nothing.
    let more = tokio::time::timeout(std::time::Duration::from_millis(200), messages.recv()).await;
    assert!(more.is_err(), "published before the count reached zero");
}

#[tokio::test]
async fn waiting_clients_queue_once_each_and_a_release_names_the_first() {
    use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
    // Owner ids are "<client>:<task>"; the queue holds clients.
    let lock = Lock::new("clients").await;
    let config = fred::types::config::Config::from_url(&common::url()).unwrap();
    let subscriber = fred::types::Builder::from_config(config)
        .build_subscriber_client()
        .unwrap();
    subscriber.init().await.unwrap();
    let mut messages = subscriber.message_rx();
    subscriber.subscribe(lock.channel.as_str()).await.unwrap();
    async fn next(messages: &mut tokio::sync::broadcast::Receiver<fred::types::Message>) -> String {
        let message = tokio::time::timeout(std::time::Duration::from_secs(2), messages.recv());
        message.await.unwrap().unwrap().value.as_string().unwrap()
    }

    lock.acquire("x:1", 10_000, false).await;
    assert_eq!(lock.acquire("x:2", 10_000, false).await[0], 0);
    assert_eq!(lock.acquire("y:1", 10_000, false).await[0], 0);
    assert_eq!(lock.acquire("z:1", 10_000, false).await[0], 0);
    assert_eq!(lock.acquire("x:3", 10_000, false).await[0], 0);
    assert_eq!(lock.acquire("w:1", 10_000, false).await[0], 0);
    assert_eq!(
        lock.queued().await,
        ["x", "y", "z", "w"],
        "x keeps its place"
    );
    let ttl: i64 = lock.redis.pttl(lock.clients.as_str()).await.unwrap();
    assert!(ttl > 20_000, "the queue outlives the hold: {ttl}");
    assert_eq!(lock.release("x:1").await, 0);
    assert_eq!(
        next(&mut messages).await,
        "x,y,z",
        "the first, then two backups"
    );
    assert_eq!(
        lock.queued().await,
        ["y", "z", "w"],
        "the first is taken off"
    );

    // A single try is not queued.
    lock.acquire("v:1", 10_000, false).await;
    let keys = vec![lock.key.clone(), lock.clients.clone()];
    let refused: Vec<i64> = lock
        .redis
        .eval(ACQUIRE, keys, vec!["u:1", "10000", "try"])
        .await
        .unwrap();
    assert_eq!(refused[0], 0);
    assert_eq!(lock.queued().await, ["y", "z", "w"]);

    // A client named but beaten to the lock goes to the front.
    assert_eq!(lock.acquire_hinted("x:2", "f").await[0], 0);
    assert_eq!(lock.queued().await, ["x", "y", "z", "w"]);
    assert_eq!(lock.release("v:1").await, 0);
    assert_eq!(next(&mut messages).await, "x,y,z");

    // A grant for a client with more waiters queues it again, at the back, and marks
    // the lock so that its release names the next client.
    assert_eq!(lock.acquire_hinted("x:2", "q").await, [1, 0]);
    assert_eq!(lock.queued().await, ["y", "z", "w", "x"]);
    assert_eq!(lock.release("x:2").await, 0);
    assert_eq!(next(&mut messages).await, "y,z,w");

    // A grant while clients are queued (one that was not named, say) marks the lock,
    // so that its release names the next client queued: they sleep until named.
    lock.acquire("v:1", 10_000, false).await;
    assert_eq!(lock.release("v:1").await, 0);
    assert_eq!(next(&mut messages).await, "z,w,x");
    assert_eq!(lock.queued().await, ["w", "x"]);

    // A grant for a client with no more waiters takes it off the queue (it may have
    // been granted without being named).
    assert_eq!(lock.acquire_hinted("w:1", "d").await, [1, 0]);
    assert_eq!(lock.queued().await, ["x"]);
    assert_eq!(lock.release("w:1").await, 0);
    assert_eq!(next(&mut messages).await, "x");

    // A release nobody waited for, with nobody queued, publishes nothing.
    lock.acquire("y:1", 10_000, false).await;
    assert_eq!(lock.release("y:1").await, 0);
    let more = tokio::time::timeout(std::time::Duration::from_millis(200), messages.recv()).await;
    assert!(more.is_err(), "published for a hold nobody waited for");

    // An empty queue (expired) names nobody.
    let _: i64 = lock.redis.del(lock.clients.as_str()).await.unwrap();
    lock.acquire("y:1", 10_000, false).await;
    lock.redis
        .hset::<(), _, _>(lock.key.as_str(), ("waiting", "1"))
        .await
        .unwrap();
    assert_eq!(lock.release("y:1").await, 0);
    assert_eq!(next(&mut messages).await, "");
}

#[tokio::test]
async fn renew_extends_only_for_the_owner() {
    let lock = Lock::new("renew").await;
    assert_eq!(lock.renew("a", 10_000).await, 0, "no lock, no renewal");
    let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
    assert_eq!(exists, 0, "renew must not create the key");
    lock.acquire("a", 1_000, false).await;
    assert_eq!(lock.renew("b", 60_000).await, 0);
    assert!(lock.pttl().await <= 1_000);
    assert_eq!(lock.renew("a", 60_000).await, 1);
    assert!(lock.pttl().await > 59_000);
}

/// The server's clock in microseconds (`TIME`).
async fn server_micros(redis: &fred::clients::Client) -> u64 {
    use fred::interfaces::ClientLike;
    let (seconds, micros): (u64, u64) = redis
        .custom(
            fred::types::CustomCommand::new_static(
                "TIME",
                fred::types::ClusterHash::FirstKey,
                false,
            ),
            Vec::<String>::new(),
        )
        .await
        .unwrap();
    seconds * 1_000_000 + micros
}

#[tokio::test]
async fn fencing_tokens_are_drawn_only_on_fresh_acquisitions_from_the_clock() {
    let lock = Lock::new("tokens").await;
    let before = server_micros(&lock.redis).await;
    let first = lock.acquire("a", 10_000, true).await;
    let after = server_micros(&lock.redis).await;
    assert_eq!(first[0], 1);
    let token = u64::try_from(first[1]).unwrap();
    assert!(
        (before..=after).contains(&token),
        "a token is the server clock in microseconds: {before} <= {token} <= {after}"
    );
    let held: Option<u64> = lock.redis.hget(lock.key.as_str(), "token").await.unwrap();
    assert_eq!(held, Some(token), "the hold keeps its token");
    assert_eq!(lock.reenter("a", 10_000).await, 2, "nested: no new token");
    lock.release("a").await;
    assert_eq!(lock.release("a").await, 0);
    let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
    assert_eq!(
        exists, 0,
        "the token field does not keep a released lock alive"
    );
    let second = lock.acquire("b", 10_000, true).await;
    assert!(second[1] > first[1]);
    let floor_ttl: i64 = lock.redis.pttl(lock.token_key.as_str()).await.unwrap();
    assert!(
        floor_ttl == -2 || (0..=2).contains(&floor_ttl),
        "the token key lives until the clock passes the token: {floor_ttl}"
    );
}

#[tokio::test]
async fn a_token_key_ahead_of_the_clock_is_exceeded_and_kept_until_the_clock_passes_it() {
    // As left by tokens issued before the clock stepped back a minute (or by many
    // acquisitions in one microsecond): the next token is one more, not the clock.
    let lock = Lock::new("floor").await;
    let ahead = server_micros(&lock.redis).await + 60_000_000;
    let _: () = lock
        .redis
        .set(
            lock.token_key.as_str(),
            ahead.to_string(),
            None,
            None,
            false,
        )
        .await
        .unwrap();
    let granted = lock.acquire("a", 10_000, true).await;
    assert_eq!(granted, vec![1, i64::try_from(ahead + 1).unwrap()]);
    let floor: String = lock.redis.get(lock.token_key.as_str()).await.unwrap();
    assert_eq!(floor, (ahead + 1).to_string(), "written as an integer");
    let ttl: i64 = lock.redis.pttl(lock.token_key.as_str()).await.unwrap();
    assert!(
        (59_000..=60_002).contains(&ttl),
        "kept until the clock reaches the token: {ttl} ms"
    );
    assert_eq!(lock.release("a").await, 0);
    let again = lock.acquire("b", 10_000, true).await;
    assert_eq!(
        again[1],
        granted[1] + 1,
        "a free lock still continues from the floor"
    );
}

#[tokio::test]
async fn force_unlock_deletes_whatever_the_owner() {
    let lock = Lock::new("force").await;
    let deleted: i64 = lock
        .redis
        .eval(
            FORCE_UNLOCK,
            lock.key.clone(),
            vec!["publish", "mutex", "2000"],
        )
        .await
        .unwrap();
    assert_eq!(deleted, 0);
    lock.acquire("a", 10_000, false).await;
    let deleted: i64 = lock
        .redis
        .eval(
            FORCE_UNLOCK,
            lock.key.clone(),
            vec!["publish", "mutex", "2000"],
        )
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(
        lock.renew("a", 10_000).await,
        0,
        "the old owner cannot renew"
    );
}

#[tokio::test]
async fn scripts_raise_wrongtype_on_a_foreign_key() {
    let lock = Lock::new("foreign").await;
    let _: () = lock
        .redis
        .set(lock.key.as_str(), "x", None, None, false)
        .await
        .unwrap();
    for script in [ACQUIRE, REENTER, RELEASE] {
        let args = vec!["a".to_owned(), "1000".to_owned(), "1".to_owned()];
        let error = lock
            .redis
            .eval::<Value, _, _, _>(script, lock.key.clone(), args)
            .await
            .unwrap_err();
        assert!(error.details().contains("WRONGTYPE"), "{error:?}");
    }
    let value: String = lock.redis.get(lock.key.as_str()).await.unwrap();
    assert_eq!(value, "x");
}

/// Every key a script writes is checked before its first write: a key of another type
/// fails the call with nothing written, and the error names the key.
#[tokio::test]
async fn a_foreign_second_key_fails_the_script_before_anything_is_written() {
    let lock = Lock::new("foreign-second").await;
    let _: () = lock
        .redis
        .hset(lock.token_key.as_str(), ("someone", "else"))
        .await
        .unwrap();
    let keys = vec![
        lock.key.clone(),
        lock.clients.clone(),
        lock.token_key.clone(),
    ];
    let error = lock
        .redis
        .eval::<Value, _, _, _>(ACQUIRE, keys, vec!["a", "10000"])
        .await
        .unwrap_err();
    let named = format!("WRONGTYPE KEYS[3] {} ", lock.token_key);
    assert!(error.details().starts_with(&named), "{error:?}");
    let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
    assert_eq!(exists, 0, "the fenced acquire wrote nothing");
    // An unfenced acquire does not touch the token key.
    assert_eq!(lock.acquire("a", 10_000, false).await, [1, 0]);

    let marker = format!("{}:period:7", lock.key);
    let _: () = lock
        .redis
        .hset(marker.as_str(), ("someone", "else"))
        .await
        .unwrap();
    let keys = vec![lock.key.clone(), marker.clone()];
    let error = lock
        .redis
        .eval::<Value, _, _, _>(COMPLETE_PERIOD, keys, vec!["a", "10000"])
        .await
        .unwrap_err();
    let named = format!("WRONGTYPE KEYS[2] {marker} ");
    assert!(error.details().starts_with(&named), "{error:?}");
    let foreign: std::collections::HashMap<String, String> =
        lock.redis.hgetall(marker.as_str()).await.unwrap();
    assert_eq!(
        foreign["someone"], "else",
        "the foreign marker is left alone"
    );
}

#[tokio::test]
async fn fence_refuses_older_tokens_exactly_for_every_u64() {
    let lock = Lock::new("fence").await;
    let key = format!("{}:data", lock.key);
    let set = |value: &str, token: &str| {
        let (redis, key) = (lock.redis.clone(), key.clone());
        let args = vec![token.to_owned(), value.to_owned()];
        async move {
            let (written, reply): (i64, String) = redis.eval(FENCE, key, args).await.unwrap();
            (written, reply)
        }
    };
    let reply = |written: i64, text: &str| (written, text.to_owned());
    assert_eq!(set("v5", "5").await, reply(1, "v5"));
    assert_eq!(
        set("v5b", "5").await,
        reply(1, "v5b"),
        "the same token may write again"
    );
    assert_eq!(
        set("v3", "3").await,
        reply(0, "5"),
        "an older token is refused, with the newest"
    );
    let value: String = lock.redis.hget(key.as_str(), "value").await.unwrap();
    assert_eq!(value, "v5b");
    assert_eq!(set("v40", "40").await, reply(1, "v40"), "longer is larger");
    // 2^53 + 1 and 2^53 are the same Lua number; compared as decimals they differ.
    assert_eq!(set("big", "9007199254740993").await, reply(1, "big"));
    assert_eq!(
        set("older", "9007199254740992").await,
        reply(0, "9007199254740993")
    );
    let max = u64::MAX.to_string();
    assert_eq!(set("max", &max).await, reply(1, "max"));
    assert_eq!(set("below", "18446744073709551614").await, reply(0, &max));
    for malformed in ["0", "007", "-1", "1e3", "x", "184467440737095516150"] {
        let args = vec![malformed.to_owned(), "bad".to_owned()];
        let error = lock
            .redis
            .eval::<Value, _, _, _>(FENCE, key.clone(), args)
            .await
            .unwrap_err();
        assert!(
            error.details().contains("fencing token"),
            "{malformed}: {error:?}"
        );
    }
    let value: String = lock.redis.hget(key.as_str(), "value").await.unwrap();
    assert_eq!(value, "max", "refused writes change nothing");
}

#[tokio::test]
async fn a_fenced_read_records_its_token_and_changes_no_value() {
    let lock = Lock::new("fence-read").await;
    let key = format!("{}:data", lock.key);
    let call = |args: Vec<&str>| {
        let (redis, key) = (lock.redis.clone(), key.clone());
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            redis
                .eval::<Value, _, _, _>(FENCE, key, args)
                .await
                .unwrap()
        }
    };
    let read = call(vec!["7"]).await;
    assert_eq!(
        read,
        Value::Array(vec![1.into(), Value::Null]),
        "nothing written yet"
    );
    let token: String = lock.redis.hget(key.as_str(), "token").await.unwrap();
    assert_eq!(token, "7", "the read recorded its token");
    let refused = call(vec!["6", "late"]).await;
    assert_eq!(refused, Value::Array(vec![0.into(), "7".into()]));
    call(vec!["7", "v7"]).await;
    let read = call(vec!["9"]).await;
    assert_eq!(read, Value::Array(vec![1.into(), "v7".into()]));
    let refused = call(vec!["8"]).await;
    assert_eq!(
        refused,
        Value::Array(vec![0.into(), "9".into()]),
        "older reads are refused too"
    );
    let value: String = lock.redis.hget(key.as_str(), "value").await.unwrap();
    assert_eq!(value, "v7", "reads change no value");
}

/// `fair_leave.lua` ends one wait only: it hands on a lock handed to that wait, and
/// takes that wait's entry out of the queue; a late leave of an owner's earlier wait
/// leaves the entry and the grant of its later wait alone, as that wait may have taken
/// the lock on the message.
#[tokio::test]
async fn a_fair_leave_touches_only_its_own_wait() {
    let lock = Lock::new("fair-leave").await;
    let key = format!("{}:fair", lock.key);
    let keys = vec![key.clone(), format!("{key}:queue"), format!("{key}:alive")];
    let _: () = lock
        .redis
        .hset(key.as_str(), [("o:1", "1"), ("claim", "o:1 2000")])
        .await
        .unwrap();
    let _: bool = lock.redis.pexpire(key.as_str(), 2_000, None).await.unwrap();
    let queue_entry = |member: &'static str| {
        lock.redis.eval::<Option<i64>, _, _, _>(
            "return redis.call('zrank', KEYS[1], ARGV[1])",
            keys[1].clone(),
            member,
        )
    };
    let _: i64 = lock
        .redis
        .eval(
            "return redis.call('zadd', KEYS[1], 5, ARGV[1])",
            keys[1].clone(),
            "o:1 3000",
        )
        .await
        .unwrap();
    let leave = |wait: &str| {
        let args: Vec<String> = ["o:1", "publish", "2000", wait].map(str::to_owned).into();
        lock.redis
            .eval::<i64, _, _, _>(FAIR_LEAVE, keys.clone(), args)
    };
    for stale in ["1000", ""] {
        assert_eq!(leave(stale).await.unwrap(), 0, "wait {stale:?}");
        let count: Option<i64> = lock.redis.hget(key.as_str(), "o:1").await.unwrap();
        assert_eq!(count, Some(1), "a leave of wait {stale:?} freed the grant");
    }
    assert_eq!(
        leave("2000").await.unwrap(),
        1,
        "the grant was not handed on"
    );
    assert_eq!(
        queue_entry("o:1 3000").await.unwrap(),
        None,
        "the later wait was queued first, so the hand-off went to it"
    );
    let claim: Option<String> = lock.redis.hget(key.as_str(), "claim").await.unwrap();
    assert_eq!(
        claim.as_deref(),
        Some("o:1 3000"),
        "handed to the later wait"
    );
    // The later wait's grant survives another late leave of the earlier wait.
    assert_eq!(leave("2000").await.unwrap(), 0);
    let claim: Option<String> = lock.redis.hget(key.as_str(), "claim").await.unwrap();
    assert_eq!(
        claim.as_deref(),
        Some("o:1 3000"),
        "a stale leave took the grant"
    );
}

/// `fair_acquire.lua` claims a lock handed to the caller's wait only. A hold of its
/// owner found under any other grant (or with none) is one the owner gave up, as lost
/// or in an earlier wait: it goes to the first waiter, and the caller queues behind
/// (found by the 30-minute fair soak: a worker whose hold was given up as lost during
/// a partition took it again at once, ahead of waiters queued for seconds).
#[tokio::test]
async fn a_fair_attempt_claims_only_a_grant_to_its_own_wait() {
    let lock = Lock::new("fair-claim").await;
    let key = format!("{}:fair", lock.key);
    let keys = vec![key.clone(), format!("{key}:queue"), format!("{key}:alive")];
    let attempt = |owner: &str, wait: &str| {
        let args: Vec<String> = [owner, "30000", "2000", "wait", "publish", wait, "", "6000"]
            .map(str::to_owned)
            .into();
        lock.redis
            .eval::<Vec<Value>, _, _, _>(FAIR_ACQUIRE, keys.clone(), args)
    };
    let granted = |reply: &[Value]| reply.first().and_then(Value::as_i64) == Some(1);
    // o:1 has a hold in Redis (with or without a claim mark); o:2 queues (when asked).
    let (redis, keys, key) = (&lock.redis, &keys, &key);
    let set_up = |claim: Option<&'static str>, o2_queues: bool| async move {
        let _: i64 = redis.del(keys.clone()).await.unwrap();
        let mut fields = vec![("o:1", "1")];
        fields.extend(claim.map(|claim| ("claim", claim)));
        let _: () = redis.hset(key.as_str(), fields).await.unwrap();
        let _: bool = redis.pexpire(key.as_str(), 2_000, None).await.unwrap();
        if o2_queues {
            let reply = attempt("o:2", "7").await.unwrap();
            assert!(!granted(&reply), "o:2 took o:1's hold");
            assert!(reply.get(2).is_some(), "o:2 is not queued: {reply:?}");
        }
    };

    // A lock handed to o:1's wait 2000 is claimed by that wait.
    set_up(Some("o:1 2000"), true).await;
    assert!(granted(&attempt("o:1", "2000").await.unwrap()));
    let claim: Option<String> = lock.redis.hget(key.as_str(), "claim").await.unwrap();
    assert_eq!(claim, None, "the claim mark outlived the claim");

    // A hold o:1 took afresh and gave up as lost, or one handed to an earlier wait of
    // o:1, goes to o:2, who waited first; o:1's wait queues behind it.
    for (claim, wait) in [
        (None, "5"),
        (Some("o:1 2000"), "5"),
        (Some("o:1 2000"), "3000"),
    ] {
        set_up(claim, true).await;
        let reply = attempt("o:1", wait).await.unwrap();
        let case = format!("claim {claim:?}, o:1's wait {wait:?}");
        assert!(
            !granted(&reply),
            "o:1 took its given-up hold again ({case})"
        );
        let held: Option<String> = lock.redis.hget(key.as_str(), "o:1").await.unwrap();
        assert_eq!(held, None, "o:1's given-up hold is still there ({case})");
        let claim: Option<String> = lock.redis.hget(key.as_str(), "claim").await.unwrap();
        assert_eq!(claim.as_deref(), Some("o:2 7"), "{case}");
        let rank: Option<i64> = lock
            .redis
            .eval(
                "return redis.call('zrank', KEYS[1], ARGV[1])",
                &keys[1],
                format!("o:1 {wait}"),
            )
            .await
            .unwrap();
        assert_eq!(rank, Some(0), "o:1's wait is not queued ({case})");
    }

    // With nobody queued, a given-up hold is simply taken afresh.
    set_up(None, false).await;
    assert!(granted(&attempt("o:1", "5").await.unwrap()));
}

/// Two waits of one owner are two entries in a fair lock's queue: the second does not
/// inherit the first's place (it queues behind those who came meanwhile), and each is
/// served in its own turn.
#[tokio::test]
async fn two_waits_of_one_owner_queue_as_two_entries() {
    let lock = Lock::new("fair-two-waits").await;
    let key = format!("{}:fair", lock.key);
    let keys = vec![key.clone(), format!("{key}:queue"), format!("{key}:alive")];
    let attempt = |owner: &str, wait: &str| {
        let args: Vec<String> = [owner, "30000", "2000", "wait", "publish", wait, "", "6000"]
            .map(str::to_owned)
            .into();
        lock.redis
            .eval::<Vec<Value>, _, _, _>(FAIR_ACQUIRE, keys.clone(), args)
    };
    let _: () = lock.redis.hset(key.as_str(), [("h:1", "1")]).await.unwrap();
    let _: bool = lock.redis.pexpire(key.as_str(), 5_000, None).await.unwrap();
    for (owner, wait) in [("o:1", "1"), ("o:2", "1"), ("o:1", "2")] {
        let reply = attempt(owner, wait).await.unwrap();
        assert_eq!(
            reply.first().and_then(Value::as_i64),
            Some(0),
            "{owner} {wait}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let queued: Vec<String> = lock
        .redis
        .eval("return redis.call('zrange', KEYS[1], 0, -1)", &keys[1], ())
        .await
        .unwrap();
    assert_eq!(queued, ["o:1 1", "o:2 1", "o:1 2"]);
}
