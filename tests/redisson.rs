//! `Compat::Redisson`: the mutex kept in Redisson's layout, checked from Redis itself.
//! (tests/redisson_interop.rs runs a real Redisson-protocol client against it.)

mod common;

use std::time::Duration;

use fred::interfaces::{EventInterface, HashesInterface, KeysInterface, PubsubInterface};
use holdlock::{Compat, LockClient, LockError, LockKind, LockOptions};

async fn redisson_client(url: &str) -> LockClient {
    LockClient::builder(url)
        .compat(Compat::Redisson)
        .build()
        .await
        .unwrap()
}

/// Whether `owner` is "<uuid>:<integer>", as Redisson's owner ids are.
fn is_redisson_owner(owner: &str) -> bool {
    let (uuid, thread) = owner.split_once(':').unwrap();
    uuid::Uuid::try_parse(uuid).is_ok() && thread.parse::<u64>().is_ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_looks_in_redis_as_a_redisson_holders_does() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("layout");

    let guard = client.lock(&name).await.unwrap();
    assert!(is_redisson_owner(guard.owner()), "{}", guard.owner());
    // The key is the name as given, and the hash holds the holder and nothing else.
    let fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    assert_eq!(fields, [(guard.owner().to_owned(), "1".to_owned())]);
    let pttl: i64 = redis.pttl(name.as_str()).await.unwrap();
    assert!((20_000..=30_000).contains(&pttl), "{pttl}");
    assert_eq!(
        common::shared()
            .command(&["EXISTS", &common::key(&name)])
            .unwrap(),
        ":0"
    );

    // Re-entry counts in the same field, as Redisson's does.
    let inner = client.lock(&name).await.unwrap();
    let count: String = redis.hget(name.as_str(), guard.owner()).await.unwrap();
    assert_eq!(count, "2");
    inner.unlock().await.unwrap();
    let count: String = redis.hget(name.as_str(), guard.owner()).await.unwrap();
    assert_eq!(count, "1");
    guard.unlock().await.unwrap();
    assert!(!client.is_locked(&name).await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_release_publishes_redissons_unlock_message_on_its_channel() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let name = common::unique("channel");
    let subscriber = common::raw(&url).await;
    let mut messages = subscriber.message_rx();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    subscriber.subscribe(channel.as_str()).await.unwrap();

    let guard = client.lock(&name).await.unwrap();
    let inner = client.lock(&name).await.unwrap();
    inner.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv())
        .await
        .expect("a release message")
        .unwrap();
    assert_eq!(message.channel.to_string(), channel);
    assert_eq!(message.value.as_string().as_deref(), Some("0"));
    // One message: the inner release told nobody.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), messages.recv())
            .await
            .is_err()
    );

    // force_unlock tells Redisson's waiters the same way.
    let _held = client.lock(&name).await.unwrap();
    assert!(client.force_unlock(&name).await.unwrap());
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv())
        .await
        .expect("a force-unlock message")
        .unwrap();
    assert_eq!(message.value.as_string().as_deref(), Some("0"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_written_by_redisson_keeps_us_out_and_its_message_wakes_us() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let name = common::unique("foreign");
    let redis = common::raw(&url).await;
    // A Java holder: thread 1 of another Redisson client, for 30 s.
    let java = format!("{}:1", uuid::Uuid::new_v4());
    let _: () = redis.hset(name.as_str(), (java.as_str(), 1)).await.unwrap();
    let _: bool = redis.pexpire(name.as_str(), 30_000, None).await.unwrap();

    assert!(client.lock(&name).try_now().await.unwrap().is_none());
    let info = client.inspect(&name).await.unwrap().unwrap();
    assert_eq!(info.owners.len(), 1);
    assert_eq!(info.owners[0].id, java);

    let waiter = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move {
            client
                .lock(&name)
                .await
                .map(|guard| (guard, std::time::Instant::now()))
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Java's unlock: the key deleted and "0" published on its channel.
    let released = std::time::Instant::now();
    let _: i64 = redis.del(name.as_str()).await.unwrap();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let _: i64 = redis.publish(channel.as_str(), "0").await.unwrap();
    let (guard, woke) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the message, not the 30 s lease")
        .unwrap()
        .unwrap();
    assert!(
        woke - released < Duration::from_secs(1),
        "{:?}",
        woke - released
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn fencing_tokens_share_redissons_counter_and_keep_increasing() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("fenced");
    let counter = format!("redisson_lock_token:{{{name}}}");
    // Java's RFencedLock has drawn 41 tokens.
    let _: () = redis
        .set(counter.as_str(), 41, None, None, false)
        .await
        .unwrap();

    let fenced = || client.lock(&name).options(LockOptions::fenced());
    let guard = fenced().await.unwrap().unwrap();
    let ours = guard.fencing_token().unwrap();
    assert!(ours > 41, "{ours}");
    // Drawn by the clock (microseconds), so a restart that loses the counter cannot
    // make ours go back; the counter moves up to it and never expires.
    let counted: u64 = redis.get(counter.as_str()).await.unwrap();
    assert_eq!(counted, ours);
    let ttl: i64 = redis.pttl(counter.as_str()).await.unwrap();
    assert_eq!(ttl, -1);
    // Nothing but the holder in the hash: the token lives in the counter.
    let fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    assert_eq!(fields.len(), 1);
    guard.unlock().await.unwrap();
    // Java's next acquisition INCRs above ours, and ours come above that.
    let java: u64 = redis.incr(counter.as_str()).await.unwrap();
    assert_eq!(java, ours + 1);
    let guard = fenced().await.unwrap().unwrap();
    assert!(guard.fencing_token().unwrap() > java);
    guard.unlock().await.unwrap();
    // A counter ahead of the clock (Java drew many): ours continue above it.
    let ahead = java * 2;
    let _: () = redis
        .set(counter.as_str(), ahead, None, None, false)
        .await
        .unwrap();
    let guard = fenced().await.unwrap().unwrap();
    assert_eq!(guard.fencing_token(), Some(ahead + 1));
    guard.unlock().await.unwrap();

    // A counter of the wrong type fails the acquisition and writes nothing.
    let _: () = redis
        .set(counter.as_str(), "not a number", None, None, false)
        .await
        .unwrap();
    let refused = client.lock(&name).options(LockOptions::fenced()).await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(!client.is_locked(&name).await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn names_with_braces_use_redissons_channel_and_every_kind_still_works() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("{{{tag}}}:account:1");

    let guard = client.lock(&name).await.unwrap();
    let exists: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(exists, 1);
    // A waiter of a braced name wakes by Redisson's channel for it.
    let waiter = tokio::spawn({
        let client = redisson_client(&url).await;
        let name = name.clone();
        async move { client.lock(&name).await.map(|_| std::time::Instant::now()) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = std::time::Instant::now();
    guard.unlock().await.unwrap();
    let woke = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the message")
        .unwrap()
        .unwrap();
    assert!(woke - released < Duration::from_secs(1));

    // The read-write lock is Redisson's too: the key is the braced name as given.
    drop(client.lock(&name).await.unwrap());
    let read = client.read_lock(&name).await.unwrap();
    let mode: String = redis.hget(name.as_str(), "mode").await.unwrap();
    assert_eq!(mode, "read");
    read.unlock().await.unwrap();
    // So is the fair lock: the hash at the braced name, its queue in the name's slot
    // (no braces added), and a waiter woken on its own channel for it.
    let fair = client.fair_lock(&name).await.unwrap();
    let held: i64 = redis.hlen(name.as_str()).await.unwrap();
    assert_eq!(held, 1);
    let waiter = tokio::spawn({
        let client = redisson_client(&url).await;
        let name = name.clone();
        async move {
            client
                .fair_lock(&name)
                .await
                .map(|_| std::time::Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued: i64 = redis
        .exists(format!("redisson_lock_queue:{name}").as_str())
        .await
        .unwrap();
    assert_eq!(queued, 1);
    let released = std::time::Instant::now();
    fair.unlock().await.unwrap();
    let woke = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the message")
        .unwrap()
        .unwrap();
    assert!(woke - released < Duration::from_secs(1));
    let plain = common::unique("kinds");
    assert!(
        client
            .inspect_kind(LockKind::ReadWrite, &plain)
            .await
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_writes_nothing() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let name = common::unique("refused");
    // Data would be a field Redisson reads as a holder.
    let refused = client
        .lock(&name)
        .options(LockOptions::new().data("host-1"))
        .await;
    assert!(
        matches!(
            refused,
            Err(LockError::InvalidOption { option: "data", .. })
        ),
        "{refused:?}"
    );
    assert!(!client.is_locked(&name).await.unwrap());
    assert!(matches!(
        client.lock("").await,
        Err(LockError::InvalidName { .. })
    ));

    // A prefix given explicitly is kept; by default there is none.
    let prefixed = LockClient::builder(&url)
        .compat(Compat::Redisson)
        .prefix("svc:")
        .build()
        .await
        .unwrap();
    let guard = prefixed.lock(&name).await.unwrap();
    let redis = common::raw(&url).await;
    let exists: i64 = redis.exists(format!("svc:{name}").as_str()).await.unwrap();
    assert_eq!(exists, 1);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_calls_leave_no_hold_and_no_subscription_behind() {
    use futures::FutureExt;
    let url = common::url();
    let holder = redisson_client(&url).await;
    let waiters = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("cancel");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let subscribers = || async {
        let counts: Vec<(String, i64)> = redis.pubsub_numsub(channel.as_str()).await.unwrap();
        counts.first().map_or(0, |(_, n)| *n)
    };

    // Waiters dropped at every point of their wait, 200 of them.
    let held = holder.lock(&name).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let (client, name) = (waiters.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let wait = Duration::from_millis(20 + i % 100);
            let _ = tokio::time::timeout(wait, client.lock(&name)).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    held.unlock().await.unwrap();
    let start = std::time::Instant::now();
    while subscribers().await != 0 {
        assert!(start.elapsed() < Duration::from_secs(2), "still subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !holder.is_locked(&name).await.unwrap(),
        "a dropped waiter left a hold"
    );

    // Unlocks polled once and dropped, behind a guard dropped just before.
    for _ in 0..50 {
        let outer = holder.lock(&name).await.unwrap();
        let inner = holder.lock(&name).await.unwrap();
        drop(outer);
        drop(inner.unlock().now_or_never());
    }
    common::wait_until_free(&waiters, &name, Duration::from_secs(3)).await;
    let fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    assert!(fields.is_empty(), "{fields:?}");
}

/// The client knows its own holds in Redisson's layout as in its own: a holder's
/// re-entry goes straight to Redis, not behind this client's waiters for the lock
/// (who wait for that very holder), and another owner's try is refused without a
/// round trip.
#[tokio::test(flavor = "multi_thread")]
async fn a_holder_re_enters_past_its_clients_waiters_and_tries_cost_redis_nothing() {
    let server = common::RedisServer::start();
    let client = redisson_client(&server.url()).await;
    let name = common::unique("redisson-local");
    let outer = client.lock(&name).await.unwrap();
    let waiter = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let inner = tokio::time::timeout(Duration::from_secs(2), client.lock(&name))
        .await
        .expect("the re-entry waited behind a waiter for its own lock")
        .unwrap();
    assert_eq!(inner.hold_count(), 2);

    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    for _ in 0..10 {
        let (client, name) = (client.clone(), name.clone());
        let refused = tokio::spawn(async move { client.lock(&name).try_now().await.unwrap() });
        assert!(
            refused.await.unwrap().is_none(),
            "another owner got a held lock"
        );
    }
    assert_eq!(
        server.command_calls("evalsha"),
        0,
        "refused without a round trip"
    );
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    waiter.await.unwrap().unlock().await.unwrap();
}

/// The timeout key of `owner`'s `n`-th read hold of the Redisson read-write lock at
/// `key` (Redisson's `suffixName(key, owner) + ":rwlock_timeout:" + n`).
fn read_timeout_key(key: &str, owner: &str, n: u32) -> String {
    match key.contains('{') {
        true => format!("{key}:{owner}:rwlock_timeout:{n}"),
        false => format!("{{{key}}}:{owner}:rwlock_timeout:{n}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_write_lock_looks_in_redis_as_redissons_does() {
    use fred::interfaces::PubsubInterface;
    let url = common::url();
    let (one, two) = (redisson_client(&url).await, redisson_client(&url).await);
    let redis = common::raw(&url).await;
    let name = common::unique("rw-layout");
    let subscriber = common::raw(&url).await;
    let mut messages = subscriber.message_rx();
    subscriber
        .subscribe(format!("redisson_rwlock:{{{name}}}"))
        .await
        .unwrap();
    let pttl = |key: String| {
        let redis = redis.clone();
        async move { redis.pttl::<i64, _>(key).await.unwrap() }
    };

    // Two readers of two clients: the mode, one field each, a timeout key per hold.
    let first = one.read_lock(&name).await.unwrap();
    let second = two.read_lock(&name).await.unwrap();
    let inner = two.read_lock(&name).await.unwrap();
    assert!(is_redisson_owner(first.owner()), "{}", first.owner());
    let mut fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    fields.sort();
    let mut expected = vec![
        ("mode".to_owned(), "read".to_owned()),
        (first.owner().to_owned(), "1".to_owned()),
        (second.owner().to_owned(), "2".to_owned()),
    ];
    expected.sort();
    assert_eq!(fields, expected);
    for (owner, n) in [(first.owner(), 1), (second.owner(), 1), (second.owner(), 2)] {
        let left = pttl(read_timeout_key(&name, owner, n)).await;
        assert!((20_000..=30_000).contains(&left), "{owner} {n}: {left}");
    }
    assert!((20_000..=30_000).contains(&pttl(name.clone()).await));
    // A writer is kept out; the inner release drops its own timeout key.
    let three = redisson_client(&url).await;
    assert!(three.write_lock(&name).try_now().await.unwrap().is_none());
    inner.unlock().await.unwrap();
    assert_eq!(pttl(read_timeout_key(&name, second.owner(), 2)).await, -2);
    first.unlock().await.unwrap();
    second.unlock().await.unwrap();
    // The last reader deletes the hash and tells Redisson's UNLOCK_MESSAGE.
    assert_eq!(pttl(name.clone()).await, -2);
    let told = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await;
    assert_eq!(told.unwrap().unwrap().value.as_str().unwrap(), "0");

    // A writer: `<owner>:write`, re-entered, and reading inside its own write lock.
    let write = one.write_lock(&name).await.unwrap();
    let rewrite = one.write_lock(&name).await.unwrap();
    let read = one.read_lock(&name).await.unwrap();
    let field = format!("{}:write", write.owner());
    let count: String = redis.hget(name.as_str(), field.as_str()).await.unwrap();
    assert_eq!(count, "2");
    let mode: String = redis.hget(name.as_str(), "mode").await.unwrap();
    assert_eq!(mode, "write");
    assert!(pttl(read_timeout_key(&name, read.owner(), 1)).await > 0);
    assert!(two.read_lock(&name).try_now().await.unwrap().is_none());
    assert!(two.write_lock(&name).try_now().await.unwrap().is_none());
    rewrite.unlock().await.unwrap();
    write.unlock().await.unwrap();
    // The writer still reads: the mode goes back to read, and others may read.
    let mode: String = redis.hget(name.as_str(), "mode").await.unwrap();
    assert_eq!(mode, "read");
    let other = two.read_lock(&name).try_now().await.unwrap();
    assert!(other.is_some());
    drop(other);
    read.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(pttl(name.clone()).await, -2);

    // A write hold's last release tells READ_UNLOCK_MESSAGE, which wakes every waiter,
    // then UNLOCK_MESSAGE, for a Redisson waiter between its attempt and its wait.
    while let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(100), messages.recv()).await {}
    one.write_lock(&name).await.unwrap().unlock().await.unwrap();
    for expected in ["1", "0"] {
        let told = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await;
        assert_eq!(told.unwrap().unwrap().value.as_str().unwrap(), expected);
    }
    assert_eq!(pttl(name.clone()).await, -2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watchdog_renews_redisson_read_holds_and_their_timeout_keys() {
    let url = common::url();
    let lease = Duration::from_millis(1_000);
    let client = common::redisson_client(&url, lease).await;
    let redis = common::raw(&url).await;
    let name = common::unique("rw-renew");
    let read = client.read_lock(&name).await.unwrap();
    let again = client.read_lock(&name).await.unwrap();
    let write_name = common::unique("rw-renew-write");
    let write = client.write_lock(&write_name).await.unwrap();
    // Three leases on, every key lives, and no hold was lost.
    tokio::time::sleep(lease * 3).await;
    for key in [
        name.clone(),
        read_timeout_key(&name, read.owner(), 1),
        read_timeout_key(&name, read.owner(), 2),
        write_name.clone(),
    ] {
        let left: i64 = redis.pttl(key.as_str()).await.unwrap();
        assert!(left > 0 && left <= 1_000, "{key}: {left}");
    }
    assert!(!read.is_lost() && !again.is_lost() && !write.is_lost());
    // The last release of the last reader deletes the hash.
    again.unlock().await.unwrap();
    read.unlock().await.unwrap();
    write.unlock().await.unwrap();
    let left: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(left, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redisson_write_lock_refuses_fencing_and_writes_nothing() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let name = common::unique("rw-fenced");
    let refused = client
        .write_lock(&name)
        .options(LockOptions::fenced())
        .await;
    assert!(
        matches!(
            refused,
            Err(LockError::InvalidOption {
                option: "fenced",
                ..
            })
        ),
        "{refused:?}"
    );
    let redis = common::raw(&url).await;
    let exists: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(exists, 0);
    // A client that fences by default takes it without a token.
    let fencing = LockClient::builder(&url)
        .compat(Compat::Redisson)
        .fencing(true)
        .build()
        .await
        .unwrap();
    let write = fencing.write_lock(&name).await.unwrap();
    write.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_read_and_break_a_read_write_lock_in_redissons_layout() {
    let url = common::url();
    let (one, two) = (redisson_client(&url).await, redisson_client(&url).await);
    let redis = common::raw(&url).await;
    let name = common::unique("rw-operator");
    let subscriber = common::raw(&url).await;
    let mut messages = subscriber.message_rx();
    fred::interfaces::PubsubInterface::subscribe(
        &subscriber,
        format!("redisson_rwlock:{{{name}}}"),
    )
    .await
    .unwrap();

    // Two readers, one of them twice; a third reader whose timeout key is gone (it
    // died, as far as Redisson can tell) is not listed.
    let first = one.read_lock(&name).await.unwrap();
    let second = two.read_lock(&name).await.unwrap();
    let again = two.read_lock(&name).await.unwrap();
    let dead = "00000000-0000-0000-0000-000000000000:7";
    let _: () = redis.hset(name.as_str(), (dead, 1)).await.unwrap();
    let info = one
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap()
        .expect("held");
    let rw = info.read_write.expect("a read-write lock's holders");
    assert!(rw.writer.is_none());
    let readers: Vec<(&str, u32)> = rw
        .readers
        .iter()
        .map(|reader| (reader.owner.as_str(), reader.hold_count))
        .collect();
    let mut expected = vec![(first.owner(), 1), (second.owner(), 2)];
    expected.sort();
    assert_eq!(readers, expected);
    for reader in &rw.readers {
        let lease = reader.lease.expect("a read hold's lease");
        assert!(lease > Duration::from_secs(20), "{lease:?}");
    }
    let _: () = redis.hdel(name.as_str(), dead).await.unwrap();
    drop(again);
    second.unlock().await.unwrap();
    first.unlock().await.unwrap();

    // A writer reading inside its own write lock: owner ids without `:write`.
    let write = one.write_lock(&name).await.unwrap();
    let read = one.read_lock(&name).await.unwrap();
    let info = two
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap()
        .expect("held");
    assert_eq!(info.owners.len(), 1, "{:?}", info.owners);
    assert_eq!(info.owners[0].id, write.owner());
    let rw = info.read_write.unwrap();
    let writer = rw.writer.expect("the writer");
    assert_eq!(
        (writer.owner.as_str(), writer.hold_count),
        (write.owner(), 1)
    );
    assert_eq!(rw.readers.len(), 1);

    // Broken by force: the holds are lost at once, a waiting writer gets in, and
    // nothing else (no key of holdlock's layout) is touched.
    let beside = format!("{name}:leases");
    let _: () = redis
        .set(beside.as_str(), "a user's key", None, None, false)
        .await
        .unwrap();
    while let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(100), messages.recv()).await {}
    let waiter = tokio::spawn({
        let (two, name) = (two.clone(), name.clone());
        async move { two.write_lock(&name).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        two.force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
    let taken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiting writer is woken")
        .unwrap()
        .unwrap();
    let told = async { tokio::join!(write.lost(), read.lost()) };
    tokio::time::timeout(Duration::from_secs(5), told)
        .await
        .expect("the holders are told");
    // Redisson's waiters are told as a write release tells them: "1", then "0".
    let mut heard = Vec::new();
    while let Ok(Ok(message)) =
        tokio::time::timeout(Duration::from_millis(300), messages.recv()).await
    {
        heard.push(message.value.as_str().unwrap().into_owned());
    }
    assert_eq!(heard, ["1", "0"]);
    let kept: String = redis.get(beside.as_str()).await.unwrap();
    assert_eq!(kept, "a user's key");
    taken.unlock().await.unwrap();
    let _: () = redis.del(beside.as_str()).await.unwrap();
    assert!(
        !two.force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_read_and_write_calls_in_redissons_layout_leave_nothing_behind() {
    use futures::FutureExt;
    let url = common::url();
    let holder = redisson_client(&url).await;
    let waiters = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("rw-cancel");
    let channel = format!("redisson_rwlock:{{{name}}}");
    let subscribers = || async {
        let counts: Vec<(String, i64)> = redis.pubsub_numsub(channel.as_str()).await.unwrap();
        counts.first().map_or(0, |(_, n)| *n)
    };
    // Every key of the lock: its hash and any read hold's timeout key.
    let keys_left = || {
        let pattern = format!("*{name}*");
        common::shared().array(&["KEYS", &pattern]).unwrap()
    };

    // Readers and writers dropped at every point of their wait, 200 of them.
    let held = holder.write_lock(&name).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let (client, name) = (waiters.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let wait = Duration::from_millis(20 + i % 100);
            if i % 2 == 0 {
                let _ = tokio::time::timeout(wait, client.read_lock(&name)).await;
            } else {
                let _ = tokio::time::timeout(wait, client.write_lock(&name)).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    held.unlock().await.unwrap();
    let start = std::time::Instant::now();
    while subscribers().await != 0 {
        assert!(start.elapsed() < Duration::from_secs(2), "still subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Takes of a free lock dropped at every point, in flight included: each that
    // landed is given back in the background.
    for i in 0..100u64 {
        let wait = Duration::from_micros(100 * (i % 30));
        let _ = match i % 2 {
            0 => tokio::time::timeout(wait, waiters.read_lock(&name))
                .await
                .map(drop),
            _ => tokio::time::timeout(wait, waiters.write_lock(&name))
                .await
                .map(drop),
        };
    }
    // Releases polled once and dropped, behind a guard dropped just before.
    for _ in 0..50 {
        let outer = holder.write_lock(&name).await.unwrap();
        let inner = holder.read_lock(&name).await.unwrap();
        drop(outer);
        drop(inner.unlock().now_or_never());
    }
    let start = std::time::Instant::now();
    loop {
        let left = keys_left();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `ZSCORE key member` (the test client is built without fred's sorted-set commands).
async fn zscore(redis: &fred::clients::Client, key: &str, member: &str) -> f64 {
    use fred::interfaces::LuaInterface;
    let script = "return redis.call('zscore', KEYS[1], ARGV[1])";
    let score: String = redis.eval(script, key, member).await.unwrap();
    score.parse().unwrap()
}

/// `ZCARD key`.
async fn zcard(redis: &fred::clients::Client, key: &str) -> i64 {
    use fred::interfaces::LuaInterface;
    let script = "return redis.call('zcard', KEYS[1])";
    redis.eval(script, key, ()).await.unwrap()
}

/// `ZADD key score member`, the member given by a Lua expression.
async fn zadd_lua(redis: &fred::clients::Client, key: &str, score: f64, member: &str) {
    use fred::interfaces::LuaInterface;
    let script = format!("return redis.call('zadd', KEYS[1], ARGV[1], {member})");
    let _: i64 = redis.eval(script, key, score.to_string()).await.unwrap();
}

/// The sorted set of the permits' deadlines of the Redisson semaphore at `key`
/// (Redisson's `suffixName(key, "timeout")`).
fn permit_deadlines_key(key: &str) -> String {
    match key.contains('{') {
        true => format!("{key}:timeout"),
        false => format!("{{{key}}}:timeout"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_semaphore_looks_in_redis_as_redissons_permit_expirable_semaphore_does() {
    use fred::interfaces::PubsubInterface;
    let url = common::url();
    let client = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("sem-layout");
    let deadlines = permit_deadlines_key(&name);
    let subscriber = common::raw(&url).await;
    let mut messages = subscriber.message_rx();
    subscriber
        .subscribe(format!("redisson_sc:{{{name}}}"))
        .await
        .unwrap();
    let semaphore = client.semaphore(&name, 2);

    // A semaphore nobody set up is set up with the caller's permits, as trySetPermits.
    let first = semaphore.acquire().await.unwrap();
    let free: String = redis.get(name.as_str()).await.unwrap();
    assert_eq!(free, "1");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    let deadline = zscore(&redis, &deadlines, first.id()).await;
    assert!(
        (now_ms + 25_000.0..=now_ms + 31_000.0).contains(&deadline),
        "{deadline} at {now_ms}"
    );
    let second = semaphore.acquire().await.unwrap();
    let free: String = redis.get(name.as_str()).await.unwrap();
    assert_eq!(free, "0");
    assert!(semaphore.acquire().try_now().await.unwrap().is_none());
    assert_eq!(semaphore.available().await.unwrap(), 0);

    // Another number of permits is refused, and changes nothing.
    let other = client.semaphore(&name, 3).acquire().try_now().await;
    assert!(
        matches!(
            other,
            Err(LockError::InvalidOption {
                option: "permits",
                ..
            })
        ),
        "{other:?}"
    );
    let held = zcard(&redis, &deadlines).await;
    assert_eq!(held, 2);

    // A release gives the permit back and tells the channel how many are free.
    first.release().await.unwrap();
    let free: String = redis.get(name.as_str()).await.unwrap();
    assert_eq!(free, "1");
    let told = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await;
    assert_eq!(told.unwrap().unwrap().value.as_str().unwrap(), "1");
    assert_eq!(semaphore.available().await.unwrap(), 1);
    second.release().await.unwrap();
    let held = zcard(&redis, &deadlines).await;
    assert_eq!(held, 0);
    let free: String = redis.get(name.as_str()).await.unwrap();
    assert_eq!(free, "2");
    // Data would be a permit Redisson cannot read.
    let refused = semaphore
        .acquire()
        .options(LockOptions::new().data("host-1"))
        .await;
    assert!(
        matches!(
            refused,
            Err(LockError::InvalidOption { option: "data", .. })
        ),
        "{refused:?}"
    );
    let _: () = redis.del(name.as_str()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watchdog_renews_redisson_permits_and_an_expired_one_comes_back() {
    let url = common::url();
    let lease = Duration::from_millis(1_000);
    let client = common::redisson_client(&url, lease).await;
    let redis = common::raw(&url).await;
    let name = common::unique("sem-renew");
    let semaphore = client.semaphore(&name, 1);
    let permit = semaphore.acquire().await.unwrap();
    tokio::time::sleep(lease * 3).await;
    assert!(!permit.is_lost());
    assert!(semaphore.acquire().try_now().await.unwrap().is_none());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    let deadlines = permit_deadlines_key(&name);
    let deadline = zscore(&redis, &deadlines, permit.id()).await;
    assert!(deadline > now_ms, "{deadline} at {now_ms}");
    permit.release().await.unwrap();

    // A permit whose holder died (here: one written as Redisson's would be, past its
    // deadline) comes back with the next acquire.
    let _: () = redis
        .set(name.as_str(), 0, None, None, false)
        .await
        .unwrap();
    zadd_lua(
        &redis,
        &deadlines,
        now_ms - 1.0,
        "'java-permit-of-a-dead-process'",
    )
    .await;
    let taken = semaphore.acquire().try_now().await.unwrap();
    assert!(taken.is_some(), "the expired permit did not come back");
    taken.unwrap().release().await.unwrap();
    let _: () = redis.del(name.as_str()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_read_and_break_a_semaphore_in_redissons_layout() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("sem-operator");
    let semaphore = client.semaphore(&name, 3);
    let ours = semaphore.acquire().await.unwrap();
    // A Java permit: 16 bytes, shown in hexadecimal as Redisson prints its ids.
    let far = 4_000_000_000_000.0;
    let deadlines = permit_deadlines_key(&name);
    zadd_lua(&redis, &deadlines, far, "string.rep(string.char(171), 16)").await;
    let _: i64 = redis.decr(name.as_str()).await.unwrap();

    let info = client
        .inspect_kind(LockKind::Semaphore, &name)
        .await
        .unwrap()
        .expect("held");
    let sem = info.semaphore.expect("a semaphore's permits");
    assert_eq!(sem.permits, 3);
    let ids: Vec<&str> = sem.held.iter().map(|permit| permit.id.as_str()).collect();
    let mut expected = vec!["ab".repeat(16), ours.id().to_owned()];
    expected.sort();
    assert_eq!(ids, expected);
    let mine = sem.held.iter().find(|p| p.id == ours.id()).unwrap();
    assert_eq!(mine.owner, client.owner_id());

    // Broken by force: every permit comes back, ours is lost at once.
    assert!(
        client
            .force_unlock_kind(LockKind::Semaphore, &name)
            .await
            .unwrap()
    );
    tokio::time::timeout(Duration::from_secs(5), ours.lost())
        .await
        .expect("the holder is told");
    assert_eq!(semaphore.available().await.unwrap(), 3);
    let free: String = redis.get(name.as_str()).await.unwrap();
    assert_eq!(free, "3");
    assert!(
        !client
            .force_unlock_kind(LockKind::Semaphore, &name)
            .await
            .unwrap()
    );
    let _: () = redis.del(name.as_str()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_permit_calls_in_redissons_layout_leave_the_count_whole() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let waiters = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("sem-cancel");
    let semaphore = client.semaphore(&name, 2);
    let held = [
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    ];
    // Waits dropped at every point, then takes dropped in flight on a free semaphore.
    let mut tasks = Vec::new();
    for i in 0..100u64 {
        let semaphore = waiters.semaphore(&name, 2);
        tasks.push(tokio::spawn(async move {
            let wait = Duration::from_millis(20 + i % 100);
            let _ = tokio::time::timeout(wait, semaphore.acquire()).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for permit in held {
        permit.release().await.unwrap();
    }
    let semaphore = waiters.semaphore(&name, 2);
    for i in 0..100u64 {
        let wait = Duration::from_micros(100 * (i % 30));
        let _ = tokio::time::timeout(wait, semaphore.acquire())
            .await
            .map(drop);
    }
    let deadlines = permit_deadlines_key(&name);
    let start = std::time::Instant::now();
    loop {
        let free: String = redis.get(name.as_str()).await.unwrap();
        let held = zcard(&redis, &deadlines).await;
        if free == "2" && held == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{free} free, {held} held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _: () = redis.del(name.as_str()).await.unwrap();
}

/// `list` finds locks of every kind in Redisson's layout, whose keys are their bare
/// names, by reading the keys its pattern matches: Rust and Java holds alike, and none
/// of the application's hashes and strings beside them (on a cluster, from every
/// primary).
#[tokio::test(flavor = "multi_thread")]
async fn list_finds_every_kind_in_redissons_layout_and_no_application_key() {
    for url in [common::url(), common::cluster_url()] {
        let client = redisson_client(&url).await;
        let redis = common::raw(&url).await;
        let base = common::unique("listed");
        let (mutex, rw, sem) = (
            format!("{base}:mutex"),
            format!("{base}:rw"),
            format!("{base}:sem"),
        );
        let held = client.lock(&mutex).await.unwrap();
        let reading = client.read_lock(&rw).await.unwrap();
        let permit = client.semaphore(&sem, 2).acquire().await.unwrap();
        // A Java thread's hold, as Redisson writes it.
        let java = format!("{base}:java");
        let java_owner = format!("{}:57", uuid::Uuid::new_v4());
        let _: () = redis
            .hset(java.as_str(), (java_owner.as_str(), 1))
            .await
            .unwrap();
        let _: () = redis.pexpire(java.as_str(), 30_000, None).await.unwrap();
        // The application's keys under the same pattern: a hash of counts, a hash of
        // text, a string, and a free semaphore's count.
        let _: () = redis
            .hset(format!("{base}:views"), ("home", 12))
            .await
            .unwrap();
        let _: () = redis
            .hset(format!("{base}:user"), ("email", "a@b"))
            .await
            .unwrap();
        let _: () = redis
            .set(format!("{base}:cache"), "x", None, None, false)
            .await
            .unwrap();
        let _: () = redis
            .set(format!("{base}:idle"), "2", None, None, false)
            .await
            .unwrap();

        let listing = client.list_report(&format!("{base}:*")).await.unwrap();
        let found = common::listed(&listing);
        assert_eq!(
            found,
            [
                (java.as_str(), LockKind::Mutex),
                (mutex.as_str(), LockKind::Mutex),
                (rw.as_str(), LockKind::ReadWrite),
                (sem.as_str(), LockKind::Semaphore),
            ],
            "{url}"
        );
        assert!(listing.unreadable.is_empty(), "{:?}", listing.unreadable);
        let java_info = &listing.locks[0];
        assert_eq!(java_info.owners[0].id, java_owner);
        assert_eq!(listing.locks[1].owners[0].id, held.owner());
        // The list reads; it changes nothing.
        assert!(!held.is_lost() && !reading.is_lost() && !permit.is_lost());
        let views: Option<String> = redis.hget(format!("{base}:views"), "home").await.unwrap();
        assert_eq!(views.as_deref(), Some("12"));

        drop((held, reading, permit));
        client.shutdown().await;
        for key in [java, sem]
            .into_iter()
            .chain(["views", "user", "cache", "idle"].map(|key| format!("{base}:{key}")))
        {
            let _: () = redis.del(key).await.unwrap();
        }
    }
}
