//! The mutex's batch scripts' Lua contract (`lua/acquire_many.lua`,
//! `lua/release_many.lua` after `lua/release_hold.lua`), checked by calling them
//! directly: what each lock of a batch gets, and how many Redis calls it costs.

mod common;

use std::collections::BTreeMap;

use fred::interfaces::{HashesInterface, KeysInterface, LuaInterface};

const ACQUIRE_MANY: &str = include_str!("../lua/acquire_many.lua");
const RELEASE_MANY: &str = concat!(
    include_str!("../lua/release_hold.lua"),
    include_str!("../lua/release_many.lua")
);

struct Batch {
    redis: fred::clients::Client,
    server: common::RedisServer,
    prefix: String,
}

impl Batch {
    async fn start(test: &str) -> Self {
        let server = common::RedisServer::start();
        Self {
            redis: common::raw(&server.url()).await,
            prefix: common::key(&common::unique(test)),
            server,
        }
    }

    fn key(&self, lock: &str) -> String {
        format!("{}:{lock}", self.prefix)
    }

    fn queue(&self, lock: &str) -> String {
        format!("{}:{lock}:clients", self.prefix)
    }

    /// `acquire_many.lua` of `(lock, owner)`s, a 30 s lease each.
    async fn acquire(&self, locks: &[(&str, &str)]) -> Vec<i64> {
        self.run(ACQUIRE_MANY, "30000", locks).await
    }

    /// `release_many.lua` of `(lock, owner)`s.
    async fn release(&self, holds: &[(&str, &str)]) -> Vec<i64> {
        self.run(RELEASE_MANY, "publish", holds).await
    }

    /// A batch script given `first` (its own argument), then each `(lock, owner)`'s key
    /// and owner; declaring the first lock's key and queue, as the client does.
    async fn run(&self, script: &str, first: &str, locks: &[(&str, &str)]) -> Vec<i64> {
        let mut args = vec![first.to_owned()];
        for (lock, owner) in locks {
            args.extend([self.key(lock), (*owner).to_owned()]);
        }
        let declared = vec![self.key(locks[0].0), self.queue(locks[0].0)];
        self.redis.eval(script, declared, args).await.unwrap()
    }

    async fn fields(&self, lock: &str) -> BTreeMap<String, String> {
        self.redis.hgetall(self.key(lock)).await.unwrap()
    }

    async fn exists(&self, lock: &str) -> bool {
        let n: i64 = self.redis.exists(self.key(lock)).await.unwrap();
        n == 1
    }
}

/// A lock's fields when `owner` alone holds it `count` times.
fn held_by(owner: &str, count: u32) -> BTreeMap<String, String> {
    BTreeMap::from([(owner.to_owned(), count.to_string())])
}

/// Ten free locks nobody queues for cost an `EXISTS` (of the lock and its queue), an
/// `HSET` and a `PEXPIRE` each, and their ten last releases an `HMGET` and a `DEL`
/// each: the same commands as ten calls alone, in one script call.
#[tokio::test]
async fn a_batch_of_free_locks_costs_the_commands_of_as_many_lone_calls() {
    let batch = Batch::start("batch-calls").await;
    let locks: Vec<String> = (0..10).map(|i| format!("lock-{i}")).collect();
    let owners: Vec<String> = (0..10).map(|i| format!("client:{i}")).collect();
    let items: Vec<(&str, &str)> = locks
        .iter()
        .zip(&owners)
        .map(|(lock, owner)| (lock.as_str(), owner.as_str()))
        .collect();
    batch.server.script_commands_since();
    assert_eq!(batch.acquire(&items).await, vec![1; 10]);
    assert_eq!(
        batch.server.script_commands_since(),
        common::counts(&[("exists", 10), ("hset", 10), ("pexpire", 10)]),
        "the takes' calls"
    );
    for (lock, owner) in &items {
        assert_eq!(batch.fields(lock).await, held_by(owner, 1), "{lock}");
    }
    batch.server.script_commands_since();
    assert_eq!(batch.release(&items).await, vec![0; 10]);
    assert_eq!(
        batch.server.script_commands_since(),
        common::counts(&[("hmget", 10), ("del", 10)]),
        "the releases' calls"
    );
    for lock in &locks {
        assert!(!batch.exists(lock).await, "{lock} still held");
    }
}

/// A lock named twice in one batch while it is free (two tasks of a client asking for
/// it at once) is taken by the first owner only; the second is left to ask alone.
#[tokio::test]
async fn a_lock_named_twice_in_a_batch_is_taken_by_its_first_owner_only() {
    let batch = Batch::start("batch-twice").await;
    let items = [("a", "client:1"), ("a", "client:2"), ("b", "client:3")];
    assert_eq!(batch.acquire(&items).await, [1, 0, 1]);
    assert_eq!(batch.fields("a").await, held_by("client:1", 1));
    assert_eq!(batch.fields("b").await, held_by("client:3", 1));
    let released = batch.release(&[("a", "client:1"), ("b", "client:3")]);
    assert_eq!(released.await, [0, 0]);
}

/// A batch with a held lock and a lock others queue for takes every other lock, and
/// leaves those two as they were (for `acquire.lua` to answer alone), at the cost of
/// one `EXISTS` each.
#[tokio::test]
async fn a_batch_takes_its_free_locks_and_leaves_a_held_or_queued_one_untouched() {
    let batch = Batch::start("batch-busy").await;
    assert_eq!(batch.acquire(&[("held", "other:1")]).await, [1]);
    batch
        .server
        .command(&["ZADD", &batch.queue("queued"), "1", "other"])
        .unwrap();
    batch.server.script_commands_since();
    let items = [
        ("a", "client:1"),
        ("held", "client:2"),
        ("queued", "client:3"),
        ("b", "client:4"),
    ];
    assert_eq!(batch.acquire(&items).await, [1, 0, 0, 1]);
    assert_eq!(
        batch.server.script_commands_since(),
        common::counts(&[("exists", 4), ("hset", 2), ("pexpire", 2)])
    );
    assert_eq!(batch.fields("held").await, held_by("other:1", 1));
    assert!(!batch.exists("queued").await, "a queued lock taken");
    let released = batch.release(&[("a", "client:1"), ("held", "other:1"), ("b", "client:4")]);
    assert_eq!(released.await, [0, 0, 0]);
}

/// Each hold of a release batch gets what `release.lua` would have answered it alone,
/// in order: a nested hold released twice (1, then 0), a lock freed earlier in the
/// batch and named again (-1: its key is gone), a lock not held (-1), a key of another
/// type (-2, left as it is), and a lock someone waits for (deleted, the first client
/// of its queue named and taken off it).
#[tokio::test]
async fn a_release_batch_answers_each_hold_as_a_release_alone_would() {
    let batch = Batch::start("batch-release").await;
    let taken = [
        ("nested", "client:1"),
        ("b", "client:2"),
        ("waited", "client:3"),
    ];
    assert_eq!(batch.acquire(&taken).await, [1, 1, 1]);
    let _: i64 = batch
        .redis
        .hincrby(batch.key("nested"), "client:1", 1)
        .await
        .unwrap();
    let _: i64 = batch
        .redis
        .hset(batch.key("waited"), ("waiting", "1"))
        .await
        .unwrap();
    let server = &batch.server;
    server
        .command(&["ZADD", &batch.queue("waited"), "1", "first", "2", "second"])
        .unwrap();
    server.command(&["SET", &batch.key("string"), "x"]).unwrap();
    batch.server.script_commands_since();
    let holds = [
        ("nested", "client:1"),
        ("nested", "client:1"),
        ("b", "client:2"),
        ("b", "client:2"),
        ("free", "client:4"),
        ("string", "client:5"),
        ("waited", "client:3"),
    ];
    assert_eq!(batch.release(&holds).await, [1, 0, 0, -1, -1, -2, 0]);
    let calls = batch.server.script_commands_since();
    assert_eq!(calls.get("del"), Some(&3), "{calls:?}");
    assert_eq!(calls.get("publish"), Some(&1), "{calls:?}");
    for lock in ["nested", "b", "free", "waited"] {
        assert!(!batch.exists(lock).await, "{lock} left in redis");
    }
    assert_eq!(server.query(&["GET", &batch.key("string")]), Ok("x".into()));
    let queued = |client| server.query(&["ZSCORE", &batch.queue("waited"), client]);
    assert!(queued("first").is_err(), "the first still queued");
    assert_eq!(queued("second"), Ok("2".into()));
}
