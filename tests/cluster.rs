//! The lock on a three-primary Redis Cluster: hash tags keep each lock in one slot,
//! release messages cross nodes, and listing scans every primary.

mod common;

use std::time::{Duration, Instant};

use holdlock::{LockClient, LockOptions, fence};

#[tokio::test(flavor = "multi_thread")]
async fn locks_work_across_slots_and_nodes() {
    let cluster = common::RedisCluster::start(3);
    let url = cluster.url();
    let a = LockClient::builder(&url)
        .fencing(true)
        .build()
        .await
        .unwrap();
    let b = LockClient::connect(&url).await.unwrap();

    // Many names land in many slots on every node; each lock's keys share one slot.
    let names: Vec<String> = (0..30).map(|i| format!("cluster:item-{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        let guard = a.lock(name).await.unwrap();
        let nested = a.lock(name).await.unwrap();
        assert_eq!(nested.hold_count(), 2);
        assert!(guard.fencing_token().is_some());
        assert!(b.try_lock(name).await.unwrap().is_none());
        drop(nested);
        guards.push(guard);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let listed = a.list("cluster:*").await.unwrap();
    assert_eq!(listed.len(), names.len(), "SCAN must cover every primary");
    assert!(
        listed
            .iter()
            .all(|info| info.owners.len() == 1 && info.owners[0].hold_count == 1)
    );

    // A waiter on one node is woken by a release published through another.
    let waiter = {
        let (b, name) = (b.clone(), names[7].clone());
        tokio::spawn(async move {
            let guard = b
                .lock_with(&name, LockOptions::fenced())
                .await
                .unwrap()
                .unwrap();
            (Instant::now(), guard)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    guards.remove(7).unlock().await.unwrap();
    let (woke, guard) = waiter.await.unwrap();
    assert!(
        woke - released < Duration::from_millis(200),
        "woke {:?} after the release",
        woke - released
    );

    // Fenced writes and force unlock work on a cluster too.
    let resource = format!("{{{}}}:data", names[7]);
    fence::set_with(&guard, &resource, "v1").await.unwrap();
    assert!(a.force_unlock(&names[7]).await.unwrap());
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert!(a.list("cluster:*").await.unwrap().is_empty());
}
