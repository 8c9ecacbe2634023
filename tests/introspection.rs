//! Looking at locks and breaking them on purpose.

mod common;

use std::time::{Duration, Instant};

use holdlock::LockClient;

#[tokio::test(flavor = "multi_thread")]
async fn inspect_shows_owner_count_ttl_and_token() {
    let client = LockClient::builder(common::url())
        .lease(Duration::from_secs(10))
        .fencing(true)
        .build()
        .await
        .unwrap();
    let name = common::unique("inspect");
    assert!(client.inspect(&name).await.unwrap().is_none());
    let a = client.lock(&name).await.unwrap();
    let b = client.lock(&name).await.unwrap();
    // Another process was refused: word that it waits is kept in the lock, but it is
    // no owner.
    let other = common::client().await;
    assert!(other.try_lock(&name).await.unwrap().is_none());
    let info = client.inspect(&name).await.unwrap().expect("held");
    assert_eq!(info.name, name);
    assert_eq!(info.owners.len(), 1);
    assert_eq!(info.owners[0].id, a.owner());
    assert_eq!(info.owners[0].hold_count, 2);
    let ttl = info.ttl.unwrap();
    assert!(
        ttl > Duration::from_secs(8) && ttl <= Duration::from_secs(10),
        "{ttl:?}"
    );
    assert_eq!(info.fencing_token, a.fencing_token());
    assert!(client.is_locked(&name).await.unwrap());
    let remaining = b.remaining_ttl().await.unwrap().unwrap();
    assert!(remaining <= Duration::from_secs(10));
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread")]
async fn list_scans_by_pattern_and_skips_other_keys() {
    let prefix = format!("list-{}:", uuid::Uuid::new_v4().simple());
    let client = LockClient::builder(common::url())
        .prefix(&prefix)
        .fencing(true)
        .build()
        .await
        .unwrap();
    let mut guards = Vec::new();
    for name in ["job:a", "job:b", "account:1"] {
        guards.push(client.lock(name).await.unwrap());
    }
    let mut jobs: Vec<String> = client
        .list("job:*")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    jobs.sort();
    assert_eq!(jobs, ["job:a", "job:b"]);
    // The token counters (strings) are not listed as locks.
    assert_eq!(client.list("*").await.unwrap().len(), 3);
    drop(guards);
    let start = Instant::now();
    while !client.list("*").await.unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn force_unlock_frees_the_lock_wakes_waiters_and_the_holder_learns_it_lost() {
    let holder = LockClient::builder(common::url())
        .lease(Duration::from_millis(900))
        .build()
        .await
        .unwrap();
    let waiter = common::client().await;
    let operator = common::client().await;
    let name = common::unique("force");
    let guard = holder.lock(&name).await.unwrap();
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move {
            let got = waiter.lock(&name).await.unwrap();
            (Instant::now(), got)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let broke_at = Instant::now();
    assert!(operator.force_unlock(&name).await.unwrap());
    let (woke_at, got) = waiting.await.unwrap();
    assert!(
        woke_at - broke_at < Duration::from_millis(100),
        "waiter was not woken"
    );
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("holder never learned");
    assert!(matches!(
        guard.unlock().await,
        Err(holdlock::LockError::NotHeld { .. })
    ));
    assert!(
        operator.is_locked(&name).await.unwrap(),
        "the stale unlock did not free the new holder's lock"
    );
    got.unlock().await.unwrap();
    assert!(
        !operator.force_unlock(&name).await.unwrap(),
        "nothing left to break"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn list_leaves_out_keys_that_are_not_locks_and_reports_them() {
    use fred::interfaces::{HashesInterface, KeysInterface};
    use holdlock::LockError;
    let prefix = format!("list-{}:", uuid::Uuid::new_v4().simple());
    let client = LockClient::builder(common::url())
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let guards = [
        client.lock("job:a").await.unwrap(),
        client.lock("job:b").await.unwrap(),
    ];
    let raw = common::raw(&common::url()).await;
    let (string, foreign, empty) = (
        format!("{prefix}{{job:string}}"),
        format!("{prefix}{{job:foreign}}"),
        format!("{prefix}{{}}"),
    );
    let _: () = raw
        .set(string.as_str(), "x", None, None, false)
        .await
        .unwrap();
    let _: () = raw.hset(foreign.as_str(), ("owner", "abc")).await.unwrap();
    let _: () = raw.hset(empty.as_str(), ("owner", "1")).await.unwrap();

    let listing = client.list_report("*").await.unwrap();
    let names: Vec<&str> = listing
        .locks
        .iter()
        .map(|info| info.name.as_str())
        .collect();
    assert_eq!(names, ["job:a", "job:b"]);
    let keys: Vec<&str> = listing
        .unreadable
        .iter()
        .map(|bad| bad.key.as_str())
        .collect();
    // Sorted by key (`}` sorts after letters).
    assert_eq!(keys, [foreign.as_str(), string.as_str(), empty.as_str()]);
    let [not_ours, wrong_type, empty_name] = &listing.unreadable[..] else {
        panic!("{:?}", listing.unreadable);
    };
    assert!(
        matches!(&empty_name.error, LockError::InvalidName { .. }),
        "{empty_name:?}"
    );
    assert_eq!(empty_name.name, "");
    assert!(
        matches!(&not_ours.error, LockError::Protocol(_)),
        "{not_ours:?}"
    );
    assert_eq!(not_ours.name, "job:foreign");
    assert!(
        matches!(&wrong_type.error, LockError::WrongType { key } if *key == string),
        "{wrong_type:?}"
    );

    // `list` returns the readable locks alone.
    let names: Vec<String> = client
        .list("job:*")
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.name)
        .collect();
    assert_eq!(names, ["job:a", "job:b"]);
    drop(guards);
}

/// With the `serde` feature, a lock's snapshot serializes with its TTL in whole
/// milliseconds (`ttl_ms`, the CLI's schema) and reads back equal.
#[cfg(feature = "serde")]
#[tokio::test(flavor = "multi_thread")]
async fn lock_info_serializes_and_reads_back() {
    let client = common::client().await;
    let name = common::unique("serde");
    let guard = client
        .lock_with(&name, holdlock::LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let info = client.inspect(&name).await.unwrap().expect("held");
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["name"], name.as_str());
    assert_eq!(json["owners"][0]["id"], guard.owner());
    assert_eq!(json["owners"][0]["hold_count"], 1);
    assert!(json["ttl_ms"].as_u64().is_some_and(|ms| ms > 0), "{json}");
    assert_eq!(json["fencing_token"], guard.fencing_token().unwrap());
    let back: holdlock::LockInfo = serde_json::from_value(json).unwrap();
    assert_eq!(back, info);
    let listing = serde_json::to_value(client.list_report(&name).await.unwrap()).unwrap();
    assert_eq!(listing["locks"][0]["name"], name.as_str());
    assert_eq!(listing["unreadable"], serde_json::json!([]));
    guard.unlock().await.unwrap();
}
