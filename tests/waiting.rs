//! Waiting for a held lock: shutdown, and a lost subscriber connection.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fred::interfaces::PubsubInterface;
use holdlock::{LockClient, LockError, LockOptions};

/// How many clients are subscribed to `name`'s release channel.
async fn subscribers(client: &LockClient, name: &str) -> i64 {
    let channel = format!("holdlock:{{{name}}}:released");
    let counts: Vec<(String, i64)> = client
        .redis()
        .pubsub_shardnumsub(channel.as_str())
        .await
        .unwrap();
    counts.first().map_or(0, |(_, n)| *n)
}

async fn wait_for_subscribers(client: &LockClient, name: &str, count: i64) {
    let start = Instant::now();
    while subscribers(client, name).await != count {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the release channel never had {count} subscribers"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_wakes_every_waiter_with_shutdown() {
    let holder = common::client().await; // holds with the default 30 s lease
    let client = common::client().await;
    let name = common::unique("shutdown-waiters");
    let held = common::lock_as_another_owner(&holder, &name).await;

    // One head, asleep on the release channel...
    let head = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.map(drop) })
    };
    wait_for_subscribers(&holder, &name, 1).await;
    // ...and two queued behind it, one of them with a (long) timeout.
    let queued = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.map(drop) })
    };
    let timed = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move {
            client
                .lock_timeout(&name, Duration::from_secs(60))
                .await
                .map(drop)
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;

    let start = Instant::now();
    client.shutdown().await;
    for (which, task) in [("head", head), ("queued", queued), ("timed", timed)] {
        let result = tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap_or_else(|_| panic!("the {which} waiter still waits after shutdown"))
            .unwrap();
        assert!(
            matches!(result, Err(LockError::Shutdown)),
            "{which}: {result:?}"
        );
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    held.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_survive_losing_the_subscriber_connection() {
    common::trace();
    let server = common::RedisServer::start();
    let holder = LockClient::connect(&server.url()).await.unwrap(); // 30 s lease
    let client = LockClient::connect(&server.url()).await.unwrap();
    // Two locks with a waiter each, the anchor's channel in a lower hash slot: fred's
    // own resubscription (`manage_subscriptions`) stops after the lowest slot's
    // channels when it fails, so only the anchor would be subscribed again.
    let slot =
        |name: &str| fred::util::redis_keyslot(format!("holdlock:{{{name}}}:released").as_bytes());
    let name = std::iter::repeat_with(|| common::unique("lost-subscriber"))
        .find(|name| slot(name) > 1_000)
        .unwrap();
    let anchor = std::iter::repeat_with(|| common::unique("lost-subscriber-anchor"))
        .find(|anchor| slot(anchor) < slot(&name))
        .unwrap();
    let held = common::lock_as_another_owner(&holder, &name).await;
    let _anchor_hold = common::lock_as_another_owner(&holder, &anchor).await;
    let anchor_waiter = {
        let (client, anchor) = (client.clone(), anchor.clone());
        tokio::spawn(async move { client.lock(&anchor).await.map(drop) })
    };

    // Waiters that take the lock in turn once it is released...
    let woken = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (client, name, woken) = (client.clone(), name.clone(), Arc::clone(&woken));
            tokio::spawn(async move {
                let guard = client.lock(&name).await?;
                woken.lock().unwrap().push(Instant::now());
                tokio::time::sleep(Duration::from_millis(10)).await;
                guard.unlock().await
            })
        })
        .collect();
    // ...and, on another lock, waiters that keep joining and giving up, so that the
    // subscriber connection is busy subscribing when it is killed.
    let churned = common::unique("lost-subscriber-churn");
    let _churn_hold = common::lock_as_another_owner(&holder, &churned).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn: Vec<_> = (0..4)
        .map(|i| {
            let (client, name, stop) = (client.clone(), churned.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let wait = Duration::from_millis(5 + 7 * i);
                    let options = LockOptions::new().wait(wait);
                    if let Some(guard) = client.lock_with(&name, options).await? {
                        drop(guard);
                    }
                }
                Ok::<_, LockError>(())
            })
        })
        .collect();
    wait_for_subscribers(&holder, &name, 1).await;
    wait_for_subscribers(&holder, &anchor, 1).await;

    for _ in 0..6 {
        server
            .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in churn {
        let result = task.await.unwrap();
        assert!(result.is_ok(), "a waiter failed: {result:?}");
    }

    let released = Instant::now();
    held.unlock().await.unwrap();
    for waiter in waiters {
        let result = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("a waiter never got the lock")
            .unwrap();
        assert!(result.is_ok(), "a waiter failed: {result:?}");
    }
    assert!(!anchor_waiter.is_finished(), "{:?}", anchor_waiter.await);
    anchor_waiter.abort();
    let first = woken.lock().unwrap().iter().min().copied().unwrap();
    assert!(
        first - released < Duration::from_secs(2),
        "the first waiter woke {:?} after the release",
        first - released
    );
}
