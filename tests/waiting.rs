//! Waiting for a held lock.

mod common;

use std::time::{Duration, Instant};

use fred::interfaces::PubsubInterface;
use holdlock::{LockClient, LockError};

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
