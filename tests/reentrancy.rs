//! Nested holds by one owner: counts, release order, and who may re-enter.

mod common;

use std::time::Duration;

use holdlock::LockError;

common::on_every_topology!(
    re_entry_works_while_others_wait_in_line,
    an_unlocked_hold_is_gone_and_another_owner_takes_it_afresh,
    a_guard_whose_hold_vanished_reports_not_held_and_touches_nothing,
    dropping_nested_guards_releases_in_the_background,
    a_re_entry_sets_the_lease_only_when_no_watchdog_keeps_it,
    a_re_entry_never_shortens_a_fixed_lease_of_any_kind,
);

async fn re_entry_works_while_others_wait_in_line(url: &str) {
    // A holder that re-enters must not queue behind waiters for its own lock.
    let client = common::connect(url).await;
    let name = common::unique("reenter-queue");
    let outer = client.lock(&name).await.unwrap();
    let waiter = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.unwrap().unlock().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let inner = tokio::time::timeout(Duration::from_secs(2), client.lock(&name))
        .await
        .expect("re-entry deadlocked behind a waiter")
        .unwrap();
    assert_eq!(inner.hold_count(), 2);
    inner.unlock().await.unwrap();
    assert!(!waiter.is_finished(), "still held once");
    outer.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
}

async fn an_unlocked_hold_is_gone_and_another_owner_takes_it_afresh(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("double");
    let guard = client.lock(&name).await.unwrap();
    let owner = guard.owner().to_owned();
    guard.unlock().await.unwrap();
    // Another owner takes it; the old owner's hold is gone and cannot be released.
    let other = common::lock_as_another_owner(&client, &name).await;
    assert_ne!(other.owner(), owner);
    assert_eq!(
        common::hold_count(client.redis(), &name, &owner).await,
        None
    );
    assert_eq!(
        common::hold_count(client.redis(), &name, other.owner()).await,
        Some(1)
    );
    other.unlock().await.unwrap();
}

async fn a_guard_whose_hold_vanished_reports_not_held_and_touches_nothing(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("vanished");
    let old = client.lock(&name).await.unwrap();
    client.force_unlock(&name).await.unwrap();
    // The same owner takes the lock afresh; the stale guard must not release it.
    let fresh = client.lock(&name).await.unwrap();
    assert_eq!(fresh.hold_count(), 1, "a fresh hold, not a nested one");
    assert!(old.is_lost());
    assert!(matches!(old.unlock().await, Err(LockError::NotHeld { .. })));
    assert!(
        client.is_locked(&name).await.unwrap(),
        "the fresh hold survived the stale unlock"
    );
    fresh.unlock().await.unwrap();
    assert!(!client.is_locked(&name).await.unwrap());
}

async fn dropping_nested_guards_releases_in_the_background(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("drop");
    let a = client.lock(&name).await.unwrap();
    let b = client.lock(&name).await.unwrap();
    drop(b);
    drop(a);
    common::wait_until_free(&client, &name, Duration::from_secs(2)).await;
}

async fn a_re_entry_sets_the_lease_only_when_no_watchdog_keeps_it(url: &str) {
    use fred::interfaces::KeysInterface;
    let client = common::connect(url).await;
    let redis = client.redis().clone();
    let pttl = |name: String| {
        let redis = redis.clone();
        async move {
            let pttl: i64 = redis.pttl(common::key(&name).as_str()).await.unwrap();
            pttl
        }
    };

    // The watchdog renews the outer hold: a nested lock() leaves its lease alone.
    let watched = common::unique("reenter-watched");
    let outer = client.lock(&watched).await.unwrap();
    let _: bool = redis
        .pexpire(common::key(&watched).as_str(), 5_000, None)
        .await
        .unwrap();
    let inner = client.lock(&watched).await.unwrap();
    assert!(
        pttl(watched.clone()).await <= 5_000,
        "the lease was set again"
    );
    // Nor may a nested fixed lease cut short the lease the watchdog counts on.
    let brief = holdlock::LockOptions::new().lease(Duration::from_millis(500));
    let third = client.lock(&watched).options(brief).await.unwrap().unwrap();
    let kept = pttl(watched.clone()).await;
    assert!(
        kept > 1_000,
        "a nested fixed lease cut the lease short: {kept}"
    );
    assert_eq!(third.hold_count(), 3);
    drop((third, inner, outer));

    // A fixed lease has no watchdog: a nested fixed lease lengthens it, and a nested
    // lock() lengthens it to the lease its watchdog will renew (the client's 30 s)...
    let fixed = common::unique("reenter-fixed");
    let short = holdlock::LockOptions::new().lease(Duration::from_secs(2));
    let outer = client.lock(&fixed).options(short).await.unwrap().unwrap();
    let long = holdlock::LockOptions::new().lease(Duration::from_secs(10));
    let inner = client.lock(&fixed).options(long).await.unwrap().unwrap();
    assert!(
        pttl(fixed.clone()).await > 8_000,
        "the fixed lease was not lengthened"
    );
    let third = client.lock(&fixed).await.unwrap();
    let watched_lease = pttl(fixed.clone()).await;
    assert!(
        (20_000..=30_000).contains(&watched_lease),
        "the watchdog's lease was not set: {watched_lease}"
    );
    assert_eq!(third.hold_count(), 3);
    drop((third, inner, outer));

    // ...but never shortens a longer one: the watchdog renews it from its first
    // renewal on.
    let longer = common::unique("reenter-longer");
    let minute = holdlock::LockOptions::new().lease(Duration::from_secs(60));
    let outer = client.lock(&longer).options(minute).await.unwrap().unwrap();
    let inner = client.lock(&longer).await.unwrap();
    assert!(
        pttl(longer.clone()).await > 50_000,
        "a nested lock() cut a 60 s lease short"
    );
    drop((inner, outer));
}

/// A re-entry may lengthen a fixed lease, never shorten it, for every kind that
/// re-enters: the outer guard's 10 s still hold after a nested 1 s lease ran out.
async fn a_re_entry_never_shortens_a_fixed_lease_of_any_kind(url: &str) {
    use holdlock::LockOptions;
    let client = common::connect(url).await;
    let redisson = holdlock::LockClient::builder(url)
        .compat(holdlock::Compat::Redisson)
        .build()
        .await
        .unwrap();
    let long = LockOptions::new().lease(Duration::from_secs(10));
    let short = LockOptions::new().lease(Duration::from_secs(1));
    let name = common::unique("shorten-mutex");
    let outer = client
        .lock(&name)
        .options(long.clone())
        .await
        .unwrap()
        .unwrap();
    let inner = client
        .lock(&name)
        .options(short.clone())
        .await
        .unwrap()
        .unwrap();
    let held = checked(&client, "mutex", common::key(&name), outer, inner).await;
    let other = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).try_now().await.unwrap().is_none() })
    };
    assert!(other.await.unwrap(), "another owner took the lock");
    drop(held);

    let name = common::unique("shorten-fair");
    let outer = client
        .fair_lock(&name)
        .options(long.clone())
        .await
        .unwrap()
        .unwrap();
    let inner = client
        .fair_lock(&name)
        .options(short.clone())
        .await
        .unwrap()
        .unwrap();
    let key = format!("{}:fair", common::key(&name));
    drop(checked(&client, "fair lock", key, outer, inner).await);

    let name = common::unique("shorten-write");
    let outer = client
        .write_lock(&name)
        .options(long.clone())
        .await
        .unwrap()
        .unwrap();
    let inner = client
        .write_lock(&name)
        .options(short.clone())
        .await
        .unwrap()
        .unwrap();
    let key = format!("{}:rw", common::key(&name));
    drop(checked(&client, "write lock", key, outer, inner).await);

    let name = common::unique("shorten-read");
    let outer = client
        .read_lock(&name)
        .options(long.clone())
        .await
        .unwrap()
        .unwrap();
    let inner = client
        .read_lock(&name)
        .options(short.clone())
        .await
        .unwrap()
        .unwrap();
    let key = format!("{}:rw", common::key(&name));
    drop(checked(&client, "read lock", key, outer, inner).await);

    let name = common::unique("shorten-redisson");
    let outer = redisson.lock(&name).options(long).await.unwrap().unwrap();
    let inner = redisson.lock(&name).options(short).await.unwrap().unwrap();
    drop(checked(&client, "redisson mutex", name, outer, inner).await);
}

/// Checks that the key of two nested holds keeps the outer 10 s lease past the inner
/// 1 s one, and that neither guard is taken as lost; hands the guards back.
async fn checked<G: holdlock::Held>(
    client: &holdlock::LockClient,
    what: &str,
    key: String,
    outer: G,
    inner: G,
) -> (G, G) {
    use fred::interfaces::KeysInterface;
    let pttl = || async {
        let pttl: i64 = client.redis().pttl(key.as_str()).await.unwrap();
        pttl
    };
    let left = pttl().await;
    assert!(
        left > 8_000,
        "{what}: a nested 1 s lease cut 10 s to {left} ms"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        !outer.is_lost() && !inner.is_lost(),
        "{what}: taken as lost"
    );
    let left = pttl().await;
    assert!(left > 6_000, "{what}: the key expires in {left} ms");
    (outer, inner)
}
