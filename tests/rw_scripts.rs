//! The read-write lock's and the semaphore's Lua contract (`lua/rw_*.lua`,
//! `lua/sem_*.lua` after `lua/leases.lua`), checked by calling the scripts directly:
//! what they write, and how many Redis calls their hot paths make.

mod common;

use std::collections::HashMap;

use fred::interfaces::{ClientLike, HashesInterface, KeysInterface, LuaInterface};
use fred::types::Value;

const RW_ACQUIRE: &str = concat!(
    include_str!("../lua/fencing.lua"),
    include_str!("../lua/leases.lua"),
    include_str!("../lua/rw_acquire.lua")
);
const RW_RELEASE: &str = concat!(
    include_str!("../lua/leases.lua"),
    include_str!("../lua/rw_release.lua")
);
const SEM_ACQUIRE: &str = concat!(
    include_str!("../lua/leases.lua"),
    include_str!("../lua/sem_acquire.lua")
);
const SEM_RELEASE: &str = include_str!("../lua/sem_release.lua");
const LEASE_RENEW: &str = concat!(
    include_str!("../lua/leases.lua"),
    include_str!("../lua/lease_renew.lua")
);
const RENEW_MANY: &str = concat!(
    include_str!("../lua/leases.lua"),
    include_str!("../lua/renew_many.lua")
);

/// The two scripts that renew a holder whose deadline is its own: `lease_renew.lua`
/// (one hold) and `renew_many.lua` (the watchdog's batches, here of one hold given
/// with its leases key, as the watchdog sends a read share or a permit).
#[derive(Debug, Clone, Copy)]
enum Renewal {
    One,
    Batched,
}

struct Rw {
    redis: fred::clients::Client,
    key: String,
    leases: String,
}

impl Rw {
    async fn on(url: &str, test: &str) -> Self {
        let key = format!("{}:rw", common::key(&common::unique(test)));
        Self {
            redis: common::raw(url).await,
            leases: format!("{key}:leases"),
            key,
        }
    }

    fn keys(&self) -> Vec<String> {
        vec![self.key.clone(), self.leases.clone()]
    }

    /// `rw_acquire.lua` for `owner`'s `side` ("read" or "write"), waiting if refused.
    async fn acquire(&self, owner: &str, side: &str, lease_ms: u64) -> Vec<i64> {
        let args = vec![
            owner.to_owned(),
            lease_ms.to_string(),
            side.to_owned(),
            "wait".to_owned(),
            "2000".to_owned(),
            String::new(),
        ];
        self.redis
            .eval(RW_ACQUIRE, self.keys(), args)
            .await
            .unwrap()
    }

    /// `rw_release.lua` of `field` (`<owner>` or `<owner>:w`).
    async fn release(&self, field: &str) -> i64 {
        let args = vec![field.to_owned(), "publish".to_owned()];
        self.redis
            .eval(RW_RELEASE, self.keys(), args)
            .await
            .unwrap()
    }

    async fn fields(&self) -> HashMap<String, String> {
        self.redis.hgetall(self.key.as_str()).await.unwrap()
    }

    /// A command of its own (fred's sorted-set interface is not built in).
    async fn command(&self, name: &'static str, args: Vec<String>) -> Value {
        let command =
            fred::types::CustomCommand::new_static(name, fred::types::ClusterHash::FirstKey, false);
        self.redis.custom(command, args).await.unwrap()
    }

    /// The holders in the leases set and their deadlines.
    async fn deadlines(&self) -> Vec<(String, i64)> {
        let args = vec![
            self.leases.clone(),
            "0".into(),
            "-1".into(),
            "WITHSCORES".into(),
        ];
        let Value::Array(items) = self.command("ZRANGE", args).await else {
            panic!("ZRANGE answers an array");
        };
        items
            .chunks(2)
            .map(|pair| {
                let member = pair[0].as_string().unwrap();
                let score: f64 = pair[1].as_string().unwrap().parse().unwrap();
                (member, score as i64)
            })
            .collect()
    }

    /// Renews `field` for `lease_ms` with `renewal`: whether it was renewed.
    async fn renew(&self, renewal: Renewal, field: &str, lease_ms: u64) -> bool {
        match renewal {
            Renewal::One => {
                let args = vec![field.to_owned(), lease_ms.to_string()];
                let renewed: i64 = self
                    .redis
                    .eval(LEASE_RENEW, self.keys(), args)
                    .await
                    .unwrap();
                renewed == 1
            }
            Renewal::Batched => {
                // The hold's layout, holder and lease, then its keys (declared too, as
                // the first hold's keys of a batch are).
                let mut args = vec!["l".to_owned(), field.to_owned(), lease_ms.to_string()];
                args.extend(self.keys());
                let renewed: String = self
                    .redis
                    .eval(RENEW_MANY, self.keys(), args)
                    .await
                    .unwrap();
                assert!(renewed == "1" || renewed == "0", "{renewed:?}");
                renewed == "1"
            }
        }
    }

    /// `sem_acquire.lua` for the permit `id` of a semaphore of `permits`, waiting if
    /// refused: whether it was granted.
    async fn sem_acquire(&self, id: &str, lease_ms: u64, permits: u32) -> bool {
        let args = vec![
            id.to_owned(),
            lease_ms.to_string(),
            permits.to_string(),
            "wait".to_owned(),
            String::new(),
        ];
        let granted: Vec<i64> = self
            .redis
            .eval(SEM_ACQUIRE, self.keys(), args)
            .await
            .unwrap();
        granted[0] == 1
    }

    async fn exists(&self, key: &str) -> bool {
        let found: i64 = self.redis.exists(key).await.unwrap();
        found == 1
    }

    /// When `key` expires, in ms since the epoch (Redis 7.0's PEXPIRETIME).
    async fn pexpiretime(&self, key: &str) -> i64 {
        self.command("PEXPIRETIME", vec![key.to_owned()])
            .await
            .as_i64()
            .unwrap()
    }
}

/// How many times each command other than the scripts and `CONFIG` ran since the last
/// `CONFIG RESETSTAT`, which this resets.
#[tokio::test]
async fn the_read_write_hot_paths_make_few_redis_calls() {
    let server = common::RedisServer::start();
    let rw = Rw::on(&server.url(), "rw-calls").await;
    server.script_commands_since();
    // An uncontended read cycle: a lone holder, whose deadline is the hash's expiry,
    // costs the mutex's calls: 3 to take, 2 to give back (it was 15 and 10).
    assert_eq!(rw.acquire("c:1", "read", 10_000).await, [1, 0]);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[("exists", 1), ("hset", 1), ("pexpire", 1)])
    );
    assert_eq!(rw.release("c:1").await, 0);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[("hmget", 1), ("del", 1)])
    );
    // The same for a write cycle.
    assert_eq!(rw.acquire("c:1", "write", 10_000).await, [1, 0]);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[("exists", 1), ("hset", 1), ("pexpire", 1)])
    );
    assert_eq!(rw.release("c:1:w").await, 0);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[("hmget", 1), ("del", 1)])
    );
    // A second reader starts the leases set with the first one's deadline (the hash's
    // expiry, read exactly).
    rw.acquire("c:1", "read", 10_000).await;
    server.script_commands_since();
    assert_eq!(rw.acquire("c:2", "read", 10_000).await, [1, 0]);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[
            ("exists", 1),
            ("hmget", 1),
            ("time", 1),
            ("pexpiretime", 1),
            ("zadd", 2),
            ("pexpireat", 3),
            ("hdel", 1),
            ("hset", 1),
            ("zrange", 1),
        ])
    );
    // A third checks the earliest and the latest deadline.
    assert_eq!(rw.acquire("c:3", "read", 10_000).await, [1, 0]);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[
            ("exists", 1),
            ("hmget", 1),
            ("zrange", 2),
            ("time", 1),
            ("hset", 1),
            ("zadd", 1),
            ("pexpireat", 2),
        ])
    );
    rw.release("c:3").await;
    rw.release("c:2").await;
    assert_eq!(rw.release("c:1").await, 0);
    assert!(rw.fields().await.is_empty());
    rw.acquire("c:1", "read", 10_000).await;
    rw.acquire("c:1", "read", 10_000).await;
    server.script_commands_since();
    // A nested hold's release only counts down.
    assert_eq!(rw.release("c:1").await, 1);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[("hmget", 1), ("hincrby", 1)])
    );
    assert_eq!(rw.release("c:1").await, 0);
    assert_eq!(rw.release("c:1").await, -1, "held nothing");
    assert!(rw.fields().await.is_empty(), "and wrote nothing");
}

#[tokio::test]
async fn an_expired_reader_is_dropped_when_it_is_due_and_only_then() {
    let rw = Rw::on(&common::url(), "rw-expired").await;
    assert_eq!(rw.acquire("c:dead", "read", 100).await, [1, 0]);
    assert_eq!(rw.acquire("c:live", "read", 10_000).await, [1, 0]);
    // A writer is refused while the dead reader's lease runs.
    assert_eq!(rw.acquire("c:w", "write", 10_000).await[0], 0);
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    // Past its deadline, the next call drops it (and its field) ...
    assert_eq!(rw.release("c:live").await, 0);
    let members: Vec<String> = rw.deadlines().await.into_iter().map(|(m, _)| m).collect();
    assert!(members.is_empty(), "{members:?}");
    // ... so the waiting writer gets in.
    assert_eq!(rw.acquire("c:w", "write", 10_000).await[0], 1);
    assert!(!rw.fields().await.contains_key("c:dead"));
}

#[tokio::test]
async fn an_owner_whose_own_share_expired_asks_afresh() {
    let rw = Rw::on(&common::url(), "rw-own-expired").await;
    assert_eq!(rw.acquire("c:me", "read", 100).await, [1, 0]);
    assert_eq!(rw.acquire("c:other", "read", 10_000).await, [1, 0]);
    assert_eq!(
        rw.acquire("c:w", "write", 10_000).await[0],
        0,
        "readers hold"
    );
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    // The purge drops c:me's share in the same call: it is a new reader, not a nested
    // one, and a writer waits.
    assert_eq!(rw.acquire("c:me", "read", 10_000).await[0], 0);
    assert!(!rw.fields().await.contains_key("c:me"));
    // Nor does its lapsed read hold make a write an upgrade (WOULDDEADLOCK): it is
    // refused as any writer while c:other reads.
    assert_eq!(rw.acquire("c:me", "write", 10_000).await[0], 0);
}

#[tokio::test]
async fn an_expired_writer_lets_readers_in_and_its_mark_goes() {
    let rw = Rw::on(&common::url(), "rw-dead-writer").await;
    assert_eq!(rw.acquire("c:w", "write", 100).await, [1, 0]);
    assert_eq!(
        rw.acquire("c:r", "read", 10_000).await[0],
        0,
        "a writer holds"
    );
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(rw.acquire("c:r", "read", 10_000).await, [1, 0]);
    let fields = rw.fields().await;
    assert!(!fields.contains_key("writer"), "{fields:?}");
    assert!(!fields.contains_key("c:w:w"), "{fields:?}");
    assert_eq!(fields["mode"], "read");
}

#[tokio::test]
async fn the_keys_live_until_the_latest_deadline_and_a_nested_hold_never_shortens_it() {
    let rw = Rw::on(&common::url(), "rw-expiry").await;
    rw.acquire("c:long", "read", 60_000).await;
    let long = rw.pexpiretime(&rw.key).await;
    // A shorter reader leaves the keys' expiry at the longer one's deadline.
    rw.acquire("c:short", "read", 5_000).await;
    assert_eq!(rw.pexpiretime(&rw.key).await, long);
    assert_eq!(rw.pexpiretime(&rw.leases).await, long);
    // A nested hold with a shorter lease keeps the longer deadline.
    assert_eq!(rw.acquire("c:long", "read", 1_000).await, [2, 0]);
    let deadlines: HashMap<String, i64> = rw.deadlines().await.into_iter().collect();
    assert_eq!(deadlines["c:long"], long);
    // The longest holder leaving leaves the expiry (a safety net) where it was.
    rw.release("c:long").await;
    rw.release("c:long").await;
    assert_eq!(rw.pexpiretime(&rw.key).await, long);
    assert_eq!(rw.fields().await["c:short"], "1");
}

#[tokio::test]
async fn an_upgrade_is_refused_and_reading_inside_a_write_is_granted() {
    let rw = Rw::on(&common::url(), "rw-upgrade").await;
    rw.acquire("c:1", "read", 10_000).await;
    let error = rw
        .redis
        .eval::<Value, _, _, _>(
            RW_ACQUIRE,
            rw.keys(),
            vec!["c:1", "10000", "write", "wait", "2000", ""],
        )
        .await
        .unwrap_err();
    assert!(error.details().contains("WOULDDEADLOCK"), "{error:?}");
    rw.release("c:1").await;
    assert_eq!(rw.acquire("c:1", "write", 10_000).await, [1, 0]);
    assert_eq!(rw.acquire("c:1", "read", 10_000).await, [1, 0]);
    assert_eq!(rw.acquire("c:2", "read", 10_000).await[0], 0);
    assert_eq!(rw.fields().await["mode"], "write");
    assert_eq!(rw.release("c:1:w").await, 0);
    assert_eq!(rw.fields().await["mode"], "read");
    assert_eq!(rw.acquire("c:2", "read", 10_000).await, [1, 0]);
}

#[tokio::test]
async fn a_foreign_leases_key_fails_the_acquire_that_would_use_it_before_anything_is_written() {
    let rw = Rw::on(&common::url(), "rw-foreign").await;
    let _: () = rw
        .redis
        .set(rw.leases.as_str(), "x", None, None, false)
        .await
        .unwrap();
    // A lone holder does not touch the leases key.
    assert_eq!(rw.acquire("c:1", "read", 10_000).await, [1, 0]);
    let error = rw
        .redis
        .eval::<Value, _, _, _>(
            RW_ACQUIRE,
            rw.keys(),
            vec!["c:2", "10000", "read", "wait", "2000", ""],
        )
        .await
        .unwrap_err();
    let named = format!("WRONGTYPE KEYS[2] {} ", rw.leases);
    assert!(error.details().starts_with(&named), "{error:?}");
    let fields = rw.fields().await;
    assert!(!fields.contains_key("c:2"), "{fields:?}");
    assert_eq!(fields["solo"], "c:1", "nothing written");
}

#[tokio::test]
async fn a_lone_holders_deadline_is_the_hash_expiry_and_moves_to_the_set_with_a_second() {
    let rw = Rw::on(&common::url(), "rw-solo").await;
    rw.acquire("c:1", "read", 60_000).await;
    assert_eq!(rw.fields().await["solo"], "c:1");
    let first = rw.pexpiretime(&rw.key).await;
    assert!(rw.deadlines().await.is_empty(), "no set for a lone holder");
    // A nested hold with a shorter lease leaves the expiry alone.
    assert_eq!(rw.acquire("c:1", "read", 1_000).await, [2, 0]);
    assert_eq!(rw.pexpiretime(&rw.key).await, first);
    // A second reader moves the first one's deadline into the set.
    rw.acquire("c:2", "read", 5_000).await;
    let deadlines: HashMap<String, i64> = rw.deadlines().await.into_iter().collect();
    assert!(
        (deadlines["c:1"] - first).abs() <= 2,
        "{deadlines:?} {first}"
    );
    assert!(!rw.fields().await.contains_key("solo"));
    assert_eq!(rw.pexpiretime(&rw.leases).await, deadlines["c:1"]);
    // A writer is refused while the first reader holds, and the lone writer after them
    // expires with the hash.
    assert_eq!(rw.acquire("c:w", "write", 100).await[0], 0);
    rw.release("c:1").await;
    rw.release("c:1").await;
    rw.release("c:2").await;
    assert_eq!(rw.acquire("c:w", "write", 100).await, [1, 0]);
    assert_eq!(
        rw.acquire("c:r", "read", 10_000).await[0],
        0,
        "the writer holds"
    );
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(
        rw.acquire("c:r", "read", 10_000).await,
        [1, 0],
        "it expired"
    );
}

/// A release that lets in only a waiting writer says so, and keeps the `waiting` mark
/// for the release that lets the readers in.
#[tokio::test]
async fn a_release_that_lets_in_only_a_writer_says_so() {
    use fred::interfaces::{EventInterface, PubsubInterface};
    let rw = Rw::on(&common::url(), "rw-writer-message").await;
    let subscriber = fred::types::Builder::from_config(
        fred::types::config::Config::from_url(&common::url()).unwrap(),
    )
    .build_subscriber_client()
    .unwrap();
    subscriber.init().await.unwrap();
    let channel = format!("{}:released", rw.key);
    subscriber.subscribe(channel.as_str()).await.unwrap();
    let mut messages = subscriber.message_rx();
    rw.acquire("c:r", "read", 10_000).await;
    assert_eq!(
        rw.acquire("c:w", "write", 10_000).await[0],
        0,
        "the writer waits"
    );
    assert_eq!(
        rw.acquire("c:r2", "read", 10_000).await[0],
        0,
        "a reader too"
    );
    assert_eq!(rw.release("c:r").await, 0);
    let told = messages.recv().await.unwrap().value.as_string().unwrap();
    let (word, ms) = told.split_once(' ').expect("writer <ms>");
    assert_eq!(word, "writer");
    assert!((1..=2_000).contains(&ms.parse::<i64>().unwrap()), "{told}");
    assert_eq!(rw.fields().await["waiting"], "1", "kept for the readers");
    assert_eq!(rw.acquire("c:w", "write", 10_000).await, [1, 0]);
    assert_eq!(rw.release("c:w:w").await, 0);
    let told = messages.recv().await.unwrap().value.as_string().unwrap();
    assert_eq!(told, "", "the readers are told");
    assert_eq!(rw.acquire("c:r2", "read", 10_000).await, [1, 0]);
}

#[tokio::test]
async fn the_semaphore_hot_paths_make_few_redis_calls() {
    let server = common::RedisServer::start();
    let sem = Rw::on(&server.url(), "sem-calls").await;
    let acquire = |id: &str| {
        let args = vec![
            id.to_owned(),
            "10000".to_owned(),
            "1".to_owned(),
            "wait".to_owned(),
            String::new(),
        ];
        sem.redis
            .eval::<Vec<i64>, _, _, _>(SEM_ACQUIRE, sem.keys(), args)
    };
    server.script_commands_since();
    assert_eq!(acquire("c:1:p1").await.unwrap(), [1, 0]);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[
            ("hmget", 1),
            ("time", 1),
            ("hset", 1),
            ("zadd", 1),
            ("pexpireat", 2),
        ])
    );
    assert_eq!(acquire("c:2:p1").await.unwrap()[0], 0);
    assert_eq!(
        server.script_commands_since(),
        common::counts(&[
            ("hmget", 1),
            ("zrange", 1),
            ("time", 1),
            ("zcard", 1),
            ("hset", 1)
        ])
    );
    let release =
        sem.redis
            .eval::<i64, _, _, _>(SEM_RELEASE, sem.keys(), vec!["c:1:p1", "publish"]);
    assert_eq!(release.await.unwrap(), 0);
    let calls = server.script_commands_since();
    assert_eq!(
        calls.values().sum::<u64>(),
        calls["publish"] + 4,
        "{calls:?}"
    );
}

/// A lone reader's lease, kept as the hash's expiry, is what `inspect` shows.
#[tokio::test]
async fn inspect_shows_a_lone_readers_lease() {
    use holdlock::{LockKind, LockOptions};
    let client = common::connect(&common::url()).await;
    let name = common::unique("rw-solo-inspect");
    let options = LockOptions::new().lease(std::time::Duration::from_secs(20));
    let reading = client
        .read_lock(&name)
        .options(options)
        .await
        .unwrap()
        .unwrap();
    let info = client
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap()
        .expect("held");
    let rw = info.read_write.expect("a read-write lock");
    assert_eq!(rw.readers.len(), 1, "{rw:#?}");
    let left = rw.readers[0].lease.expect("a lease");
    assert!(
        left > std::time::Duration::from_secs(18) && left <= std::time::Duration::from_secs(20),
        "{left:?}"
    );
    reading.unlock().await.unwrap();
}

/// A renewal never revives a read share whose deadline has passed, by either renewal
/// script: the share is not renewed (the holder is told it holds nothing), its field
/// and deadline are dropped, and the other readers keep their shares and deadlines; a
/// live share is renewed as usual.
#[tokio::test]
async fn a_renewal_never_revives_a_read_share_whose_deadline_has_passed() {
    for renewal in [Renewal::One, Renewal::Batched] {
        let rw = Rw::on(&common::url(), "rw-renew-expired").await;
        assert_eq!(rw.acquire("c:dead", "read", 100).await, [1, 0]);
        assert_eq!(rw.acquire("c:live", "read", 10_000).await, [1, 0]);
        let live_deadline = rw.deadlines().await.into_iter().collect::<HashMap<_, _>>()["c:live"];
        let expiry = rw.pexpiretime(&rw.key).await;
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        // Nothing has dropped the dead share yet: only the renewal can.
        assert!(rw.fields().await.contains_key("c:dead"), "{renewal:?}");

        assert!(
            !rw.renew(renewal, "c:dead", 10_000).await,
            "{renewal:?}: a share past its deadline was renewed"
        );
        let fields = rw.fields().await;
        assert!(!fields.contains_key("c:dead"), "{renewal:?}: {fields:?}");
        assert_eq!(fields["c:live"], "1", "{renewal:?}");
        assert_eq!(
            rw.deadlines().await,
            [("c:live".to_owned(), live_deadline)],
            "{renewal:?}"
        );
        assert_eq!(rw.pexpiretime(&rw.key).await, expiry, "{renewal:?}");
        // Asked again, it is still not renewed and not written back.
        assert!(!rw.renew(renewal, "c:dead", 10_000).await, "{renewal:?}");
        assert!(!rw.fields().await.contains_key("c:dead"), "{renewal:?}");

        // The live share is renewed, and a writer now waits only for it.
        assert!(rw.renew(renewal, "c:live", 20_000).await, "{renewal:?}");
        let deadlines: HashMap<String, i64> = rw.deadlines().await.into_iter().collect();
        assert!(
            deadlines["c:live"] > live_deadline,
            "{renewal:?}: {deadlines:?}"
        );
        assert_eq!(rw.release("c:live").await, 0);
        assert_eq!(
            rw.acquire("c:w", "write", 10_000).await,
            [1, 0],
            "{renewal:?}"
        );

        // A lone reader's deadline is the hash's expiry: past it, nothing is left to
        // renew, and the renewal writes nothing back.
        let lone = Rw::on(&common::url(), "rw-renew-expired-lone").await;
        assert_eq!(lone.acquire("c:lone", "read", 100).await, [1, 0]);
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        assert!(!lone.renew(renewal, "c:lone", 10_000).await, "{renewal:?}");
        assert!(!lone.exists(&lone.key).await, "{renewal:?}");
        assert!(!lone.exists(&lone.leases).await, "{renewal:?}");
    }
}

/// The same for a semaphore's permits: renewing a permit past its deadline does not
/// bring it back (nor take a permit from the semaphore's count), and leaves the
/// other permits as they were.
#[tokio::test]
async fn a_renewal_never_revives_a_permit_whose_deadline_has_passed() {
    for renewal in [Renewal::One, Renewal::Batched] {
        let sem = Rw::on(&common::url(), "sem-renew-expired").await;
        assert!(sem.sem_acquire("c:1:dead", 100, 2).await);
        assert!(sem.sem_acquire("c:2:live", 10_000, 2).await);
        let live_deadline =
            sem.deadlines().await.into_iter().collect::<HashMap<_, _>>()["c:2:live"];
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        assert!(sem.fields().await.contains_key("c:1:dead"), "{renewal:?}");

        assert!(
            !sem.renew(renewal, "c:1:dead", 10_000).await,
            "{renewal:?}: a permit past its deadline was renewed"
        );
        let fields = sem.fields().await;
        assert!(!fields.contains_key("c:1:dead"), "{renewal:?}: {fields:?}");
        assert!(fields.contains_key("c:2:live"), "{renewal:?}: {fields:?}");
        assert_eq!(
            sem.deadlines().await,
            [("c:2:live".to_owned(), live_deadline)],
            "{renewal:?}"
        );
        assert!(!sem.renew(renewal, "c:1:dead", 10_000).await, "{renewal:?}");
        // The dead permit's place is free for one new holder, and only one.
        assert!(sem.sem_acquire("c:3:new", 10_000, 2).await, "{renewal:?}");
        assert!(!sem.sem_acquire("c:4:late", 10_000, 2).await, "{renewal:?}");
        assert!(!sem.fields().await.contains_key("c:1:dead"), "{renewal:?}");
        // A live permit is renewed.
        assert!(sem.renew(renewal, "c:2:live", 20_000).await, "{renewal:?}");
        let deadlines: HashMap<String, i64> = sem.deadlines().await.into_iter().collect();
        assert!(
            deadlines["c:2:live"] > live_deadline,
            "{renewal:?}: {deadlines:?}"
        );
    }
}
