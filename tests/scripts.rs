//! The Lua contract, checked by calling each script directly (no Rust lock API).

mod common;

use fred::interfaces::{HashesInterface, KeysInterface, LuaInterface};
use fred::types::Value;

const ACQUIRE: &str = include_str!("../lua/acquire.lua");
const RELEASE: &str = include_str!("../lua/release.lua");
const RENEW: &str = include_str!("../lua/renew.lua");
const FORCE_UNLOCK: &str = include_str!("../lua/force_unlock.lua");
const FENCE_SET: &str = include_str!("../lua/fence_set.lua");

struct Lock {
    redis: fred::clients::Client,
    key: String,
    token_key: String,
    channel: String,
}

impl Lock {
    async fn new(test: &str) -> Self {
        let key = format!("holdlock:{{{}}}", common::unique(test));
        Self {
            redis: common::raw(&common::url()).await,
            token_key: format!("{key}:token"),
            channel: format!("{key}:released"),
            key,
        }
    }

    async fn acquire(&self, owner: &str, lease_ms: i64, fenced: bool) -> Vec<i64> {
        let args = vec![
            owner.to_owned(),
            lease_ms.to_string(),
            if fenced { "1" } else { "0" }.to_owned(),
        ];
        self.redis
            .eval(
                ACQUIRE,
                vec![self.key.clone(), self.token_key.clone()],
                args,
            )
            .await
            .unwrap()
    }

    async fn release(&self, owner: &str) -> i64 {
        let args = vec![owner.to_owned(), "10000".to_owned(), self.channel.clone()];
        self.redis
            .eval(RELEASE, self.key.clone(), args)
            .await
            .unwrap()
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
async fn acquire_grants_reenters_and_reports_the_holders_ttl() {
    let lock = Lock::new("acquire").await;
    assert_eq!(lock.acquire("a", 10_000, false).await, vec![1, 0]);
    assert_eq!(lock.acquire("a", 10_000, false).await, vec![2, 0]);
    let busy = lock.acquire("b", 10_000, false).await;
    assert_eq!(busy[0], 0, "another owner is refused");
    assert!(
        busy[1] > 9_000 && busy[1] <= 10_000,
        "with the holder's PTTL: {busy:?}"
    );
    let fields: std::collections::HashMap<String, i64> =
        lock.redis.hgetall(lock.key.as_str()).await.unwrap();
    assert_eq!(fields, [("a".to_owned(), 2)].into());
}

#[tokio::test]
async fn release_counts_down_refreshes_and_deletes_at_zero() {
    let lock = Lock::new("release").await;
    lock.acquire("a", 10_000, false).await;
    lock.acquire("a", 10_000, false).await;
    assert_eq!(lock.release("b").await, -1, "a non-owner holds nothing");
    let _: bool = lock
        .redis
        .pexpire(lock.key.as_str(), 500, None)
        .await
        .unwrap();
    assert_eq!(lock.release("a").await, 1);
    assert!(
        lock.pttl().await > 9_000,
        "a remaining hold gets the lease again"
    );
    assert_eq!(lock.release("a").await, 0);
    let exists: i64 = lock.redis.exists(lock.key.as_str()).await.unwrap();
    assert_eq!(exists, 0);
    assert_eq!(lock.release("a").await, -1, "nothing left to release");
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
    lock.acquire("a", 10_000, false).await;
    lock.release("a").await;
    lock.release("a").await;
    let message = tokio::time::timeout(std::time::Duration::from_secs(2), messages.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.channel.to_string(), lock.channel);
    // Exactly one message: the nested release published nothing.
    let more = tokio::time::timeout(std::time::Duration::from_millis(200), messages.recv()).await;
    assert!(more.is_err(), "published before the count reached zero");
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

#[tokio::test]
async fn fencing_tokens_are_drawn_only_on_fresh_acquisitions() {
    let lock = Lock::new("tokens").await;
    let first = lock.acquire("a", 10_000, true).await;
    assert_eq!(first[0], 1);
    assert!(first[1] >= 1);
    assert_eq!(
        lock.acquire("a", 10_000, true).await,
        vec![2, 0],
        "nested: no new token"
    );
    lock.release("a").await;
    lock.release("a").await;
    let second = lock.acquire("b", 10_000, true).await;
    assert_eq!(second[1], first[1] + 1);
    let ttl: i64 = lock.redis.pttl(lock.token_key.as_str()).await.unwrap();
    assert_eq!(ttl, -1, "the token counter never expires");
}

#[tokio::test]
async fn force_unlock_deletes_whatever_the_owner() {
    let lock = Lock::new("force").await;
    let deleted: i64 = lock
        .redis
        .eval(FORCE_UNLOCK, lock.key.clone(), lock.channel.clone())
        .await
        .unwrap();
    assert_eq!(deleted, 0);
    lock.acquire("a", 10_000, false).await;
    let deleted: i64 = lock
        .redis
        .eval(FORCE_UNLOCK, lock.key.clone(), lock.channel.clone())
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
    let args = vec!["a".to_owned(), "1000".to_owned(), "0".to_owned()];
    let error = lock
        .redis
        .eval::<Value, _, _, _>(
            ACQUIRE,
            vec![lock.key.clone(), lock.token_key.clone()],
            args,
        )
        .await
        .unwrap_err();
    assert!(error.details().contains("WRONGTYPE"), "{error:?}");
    let value: String = lock.redis.get(lock.key.as_str()).await.unwrap();
    assert_eq!(value, "x");
}

#[tokio::test]
async fn fence_set_refuses_older_tokens() {
    let lock = Lock::new("fence").await;
    let key = format!("{}:data", lock.key);
    let set = |value: &str, token: u64| {
        let (redis, key) = (lock.redis.clone(), key.clone());
        let args = vec![value.to_owned(), token.to_string()];
        async move {
            redis
                .eval::<Vec<i64>, _, _, _>(FENCE_SET, key, args)
                .await
                .unwrap()
        }
    };
    assert_eq!(set("v5", 5).await, vec![1, 5]);
    assert_eq!(
        set("v5b", 5).await,
        vec![1, 5],
        "the same token may write again"
    );
    assert_eq!(set("v3", 3).await, vec![0, 5], "an older token is refused");
    let value: String = lock.redis.hget(key.as_str(), "value").await.unwrap();
    assert_eq!(value, "v5b");
    assert_eq!(set("v9", 9).await, vec![1, 9]);
}
