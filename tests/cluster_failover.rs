//! A Redis Cluster failover (three primaries, one replica each): a replica takes over
//! its primary's slots while locks there are held and waited for.

mod common;

use std::time::Duration;

use holdlock::LockClient;

use common::RedisCluster;

#[tokio::test(flavor = "multi_thread")]
async fn held_locks_and_waiters_survive_a_failover_to_a_replica() {
    let cluster = RedisCluster::start_with_replicas(3, 1);
    let url = cluster.url();
    let lease = Duration::from_secs(3);
    let renewing = LockClient::builder(&url)
        .lease(lease)
        .fencing(true)
        .build()
        .await
        .unwrap();
    let holder = common::client_with_lease(&url, Duration::from_secs(60)).await;
    let waiter = LockClient::builder(&url)
        .fencing(true)
        .build()
        .await
        .unwrap();

    // Two locks on the same primary: one renewed by its watchdog, one waited for.
    let renewed_name = common::unique("failover-renewed");
    let renewed_key = common::key(&renewed_name);
    let primary = cluster.primary_of(&renewed_key);
    let waited_name = (0..)
        .map(|_| common::unique("failover-waited"))
        .find(|name| cluster.primary_of(&common::key(name)).port == primary.port)
        .unwrap();
    let waited_key = common::key(&waited_name);

    let renewed = renewing.lock(&renewed_name).await.unwrap();
    let first_token = renewed.fencing_token().unwrap();
    let held = holder.lock(&waited_name).await.unwrap();
    let waiting = {
        let name = waited_name.clone();
        tokio::spawn(async move { waiter.lock(&name).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let replica = cluster.replica_of(primary);
    cluster.fail_over(primary, replica, "");
    let after = common::integer(&replica.query(&["PTTL", &renewed_key]).unwrap());
    assert!(after > 0, "the hold was replicated before the failover");

    // Two renewal periods later the holder has renewed on the new primary...
    tokio::time::sleep(lease * 2 / 3 + Duration::from_millis(500)).await;
    let renewed_pttl = common::integer(&replica.query(&["PTTL", &renewed_key]).unwrap());
    assert!(
        !renewed.is_lost(),
        "the holder lost the lock in the failover"
    );
    assert!(
        renewed_pttl > after - (lease * 2 / 3).as_millis() as i64,
        "no renewal since the failover: PTTL {after} then {renewed_pttl}"
    );
    renewed.unlock().await.unwrap();
    assert_eq!(
        common::integer(&replica.query(&["EXISTS", &renewed_key]).unwrap()),
        0
    );

    // ...the waiter still waits, and is woken by the release through the new primary
    // (the holder's lease is a minute: only the release message can wake it).
    assert!(
        !waiting.is_finished(),
        "the waiter got in while the lock was held"
    );
    // (Longer than the 10 s the waiter is given below, however long the failover took.)
    let held_pttl = common::integer(&replica.query(&["PTTL", &waited_key]).unwrap());
    assert!(
        held_pttl > 20_000,
        "the holder's lease is long: {held_pttl} ms"
    );
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter slept through the release")
        .unwrap();
    guard.unlock().await.unwrap();

    // New acquisitions work, with tokens still going up.
    let again = renewing.lock(&renewed_name).await.unwrap();
    assert!(again.fencing_token().unwrap() > first_token);
    again.unlock().await.unwrap();
}
