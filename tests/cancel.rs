//! Cancel safety: a dropped `lock()` future never leaves a hold behind.

mod common;

use std::time::{Duration, Instant};

use fred::interfaces::PubsubInterface;
use holdlock::LockClient;

async fn wait_until_free(client: &LockClient, name: &str) {
    let start = Instant::now();
    while client.is_locked(name).await.unwrap() {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "a cancelled lock() left a hold behind"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelled_waiters_leave_no_hold_and_no_subscription() {
    let holder = common::client().await;
    let waiters = common::client().await;
    let name = common::unique("cancel-waiters");
    let held = holder.lock(&name).await.unwrap();
    let channel = format!("holdlock:{{{name}}}:released");
    let subscribers = || async {
        let counts: Vec<(String, i64)> = holder
            .redis()
            .pubsub_shardnumsub(channel.as_str())
            .await
            .unwrap();
        counts.first().map_or(0, |(_, n)| *n)
    };
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let (client, name) = (waiters.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let _ =
                tokio::time::timeout(Duration::from_millis(50 + i % 100), client.lock(&name)).await;
        }));
    }
    let patient = {
        let (client, name) = (waiters.clone(), name.clone());
        tokio::spawn(async move { drop(client.lock(&name).await) })
    };
    let start = Instant::now();
    while subscribers().await != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "nobody subscribed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    patient.abort();
    for task in tasks {
        task.await.unwrap();
    }
    held.unlock().await.unwrap();
    wait_until_free(&holder, &name).await;

    // The waiting room unsubscribed once it emptied.
    let start = Instant::now();
    while subscribers().await != 0 {
        assert!(start.elapsed() < Duration::from_secs(2), "still subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And the lock still works for the next caller.
    waiters
        .try_lock(&name)
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_waiter_keeps_the_queue_moving() {
    let holder = common::client().await;
    let waiters = common::client().await;
    let name = common::unique("cancel-queue");
    let held = holder.lock(&name).await.unwrap();
    let first = {
        let (client, name) = (waiters.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.map(drop) })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = {
        let (client, name) = (waiters.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.unwrap().unlock().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.abort(); // the head of the line gives up
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), second)
        .await
        .expect("queue stalled")
        .unwrap();
}
