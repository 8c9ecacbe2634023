//! The main behaviours, each written once and run on a single server and on a
//! three-primary Redis Cluster: exclusivity, reentrancy, the watchdog, wake-up
//! latency, the lost signal and cancellation.
//!
//! Each scenario is an `async fn(url)`; `common::on_every_topology!` turns it into one
//! `#[tokio::test]` per topology (`single::NAME`, `cluster::NAME`). Each test binary
//! shares one server and one cluster; the tests use unique lock names. (The scenarios
//! of `lock.rs`, `reentrancy.rs`, `watchdog.rs` and `cancel.rs` run on both too.)

mod common;

use std::time::{Duration, Instant};

use fred::interfaces::KeysInterface;
use holdlock::LockGuard;

common::on_every_topology!(
    two_clients_times_sixteen_tasks_never_lose_an_increment,
    three_deep_released_innermost_first,
    three_deep_released_outermost_first,
    three_deep_released_middle_first,
    the_watchdog_keeps_a_one_second_lease_alive_for_four_seconds,
    a_waiter_is_woken_by_the_release_message_not_by_the_lease,
    the_lost_signal_fires_within_one_renewal_period_after_the_key_is_deleted,
    a_thousand_lock_futures_cancelled_at_every_stage_leave_no_key,
);

async fn two_clients_times_sixteen_tasks_never_lose_an_increment(url: &str) {
    let counter = common::unique("counter");
    let name = common::unique("exclusive");
    let clients = [common::connect(url).await, common::connect(url).await];
    let mut tasks = Vec::new();
    for task in 0..32 {
        let client = clients[task % 2].clone();
        let (counter, name) = (counter.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..1_000 / 32 + usize::from(task < 1_000 % 32) {
                let guard = client.lock(&name).await.unwrap();
                // Deliberately non-atomic: read, yield, write.
                let value: Option<i64> = client.redis().get(counter.as_str()).await.unwrap();
                tokio::task::yield_now().await;
                let _: () = client
                    .redis()
                    .set(counter.as_str(), value.unwrap_or(0) + 1, None, None, false)
                    .await
                    .unwrap();
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total: i64 = clients[0].redis().get(counter.as_str()).await.unwrap();
    assert_eq!(total, 1_000);
    assert!(
        !clients[0].is_locked(&name).await.unwrap(),
        "the lock is free at the end"
    );
}

/// Takes the lock three times in one task and releases in the order given.
async fn three_deep_released_in(url: &str, order: [usize; 3]) {
    let client = common::connect(url).await;
    let name = common::unique("reentrant");
    let mut guards: Vec<Option<LockGuard>> = Vec::new();
    for depth in 1..=3 {
        let guard = tokio::time::timeout(Duration::from_secs(2), client.lock(&name))
            .await
            .expect("re-entry must not wait for itself")
            .unwrap();
        assert_eq!(guard.hold_count(), depth);
        guards.push(Some(guard));
    }
    let owner = guards[0].as_ref().unwrap().owner().to_owned();
    assert_eq!(
        common::hold_count(client.redis(), &name, &owner).await,
        Some(3)
    );

    for (released, index) in order.into_iter().enumerate() {
        let guard = guards[index].take().unwrap();
        guard.unlock().await.unwrap();
        let left = 2 - released as i64;
        if left > 0 {
            assert_eq!(
                common::hold_count(client.redis(), &name, &owner).await,
                Some(left)
            );
            assert!(
                client.is_locked(&name).await.unwrap(),
                "held while any hold remains"
            );
            for guard in guards.iter().flatten() {
                assert_eq!(guard.hold_count() as i64, left);
            }
        }
    }
    assert!(
        !client.is_locked(&name).await.unwrap(),
        "the key is deleted at zero"
    );
}

async fn three_deep_released_innermost_first(url: &str) {
    three_deep_released_in(url, [2, 1, 0]).await;
}

async fn three_deep_released_outermost_first(url: &str) {
    three_deep_released_in(url, [0, 1, 2]).await;
}

async fn three_deep_released_middle_first(url: &str) {
    three_deep_released_in(url, [1, 2, 0]).await;
}

async fn the_watchdog_keeps_a_one_second_lease_alive_for_four_seconds(url: &str) {
    let client = common::client_with_lease(url, Duration::from_secs(1)).await;
    let other = common::connect(url).await;
    let name = common::unique("renew");
    let guard = client.lock(&name).await.unwrap();
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            other.lock(&name).try_now().await.unwrap().is_none(),
            "someone else got in"
        );
        let ttl = guard.remaining_ttl().await.unwrap().expect("still there");
        assert!(ttl <= Duration::from_secs(1));
    }
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert!(!client.is_locked(&name).await.unwrap());
}

async fn a_waiter_is_woken_by_the_release_message_not_by_the_lease(url: &str) {
    let name = common::unique("wake");
    let holder = common::client_with_lease(url, Duration::from_secs(60)).await;
    let waiter = common::connect(url).await;
    let held = holder.lock(&name).await.unwrap();
    let pttl = held.remaining_ttl().await.unwrap().unwrap();
    assert!(
        pttl > Duration::from_secs(20),
        "holder's TTL is long: {pttl:?}"
    );

    let name2 = name.clone();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock(&name2).await.unwrap();
        (Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_millis(300)).await; // the waiter is asleep by now
    let released_at = Instant::now();
    held.unlock().await.unwrap();
    let (acquired_at, guard) = waiting.await.unwrap();
    let delay = acquired_at - released_at;
    assert!(
        delay < Duration::from_millis(50),
        "woke {delay:?} after the release"
    );
    guard.unlock().await.unwrap();
}

async fn the_lost_signal_fires_within_one_renewal_period_after_the_key_is_deleted(url: &str) {
    let lease = Duration::from_millis(900);
    let client = common::client_with_lease(url, lease).await;
    let name = common::unique("lost");
    let guard = client.lock(&name).await.unwrap();
    let lost = {
        let start = Instant::now();
        let raw = common::raw(url).await;
        let _: i64 = raw.del(common::key(&name).as_str()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("lost never fired");
        start.elapsed()
    };
    // One renewal period is lease / 3 = 300 ms; allow scheduling slack.
    assert!(
        lost <= lease / 3 + Duration::from_millis(150),
        "lost after {lost:?}"
    );
    assert!(guard.is_lost());
}

async fn a_thousand_lock_futures_cancelled_at_every_stage_leave_no_key(url: &str) {
    // A long lease: if a hold leaked, the key would stay for a minute, not vanish.
    let client = common::client_with_lease(url, Duration::from_secs(60)).await;
    let name = common::unique("cancel");
    let mut acquired_before_cancel = 0;
    for i in 0..1_000u64 {
        // Cancel after 0..~500 µs: before sending, in flight, and after the reply.
        let cut = Duration::from_micros((i * 7919) % 500);
        let client = client.clone();
        let name = name.clone();
        let finished = tokio::spawn(async move {
            match tokio::time::timeout(cut, client.lock(&name)).await {
                Ok(guard) => {
                    // Completed: dropping it must release too.
                    drop(guard.unwrap());
                    true
                }
                Err(_) => false,
            }
        })
        .await
        .unwrap();
        acquired_before_cancel += usize::from(finished);
    }
    common::wait_until_free(&client, &name, Duration::from_secs(3)).await;
    // Both paths were exercised (the cut points spread over a round trip).
    assert!(
        acquired_before_cancel < 1_000,
        "no future was cancelled mid-way"
    );
}
