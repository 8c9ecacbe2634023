//! Redis Sentinel: locks through `redis-sentinel://`, and a forced failover while
//! locks are held and waiters wait.

mod common;

use std::time::{Duration, Instant};

use holdlock::{LockClient, LockGuard};

use common::sentinel::Sentinels;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn locks_follow_a_sentinel_failover() {
    let deployment = Sentinels::start();
    let url = deployment.url();
    // Renewals every 1.3 s: the failover (about a second) fits inside one lease.
    let lease = Duration::from_secs(4);
    let holder = LockClient::builder(&url)
        .lease(lease)
        .build()
        .await
        .unwrap();
    let waiters = LockClient::connect(&url).await.unwrap();

    let names: Vec<String> = (0..10)
        .map(|i| common::unique(&format!("held-{i}")))
        .collect();
    let mut guards: Vec<LockGuard> = Vec::new();
    for name in &names {
        guards.push(holder.lock(name).await.unwrap());
    }
    // Three of the held locks have a waiter each.
    let waiting: Vec<_> = names[..3]
        .iter()
        .map(|name| {
            let (client, name) = (waiters.clone(), name.clone());
            tokio::spawn(async move { client.lock(&name).await.map(|guard| (name, guard)) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    deployment.promote();
    // Taken while the old master does not know it was replaced: never replicated.
    let mut stranded = Vec::new();
    for i in 0..3 {
        let name = common::unique(&format!("stranded-{i}"));
        stranded.push(holder.lock(&name).await.unwrap());
    }
    deployment.retire_old_master();
    let new_master = &deployment.replica;
    let failed_over = Instant::now();
    // Long enough for every holder to try two renewals against the new master.
    tokio::time::sleep(lease * 2 / 3 + Duration::from_millis(500)).await;

    let new_master_client = common::raw(&new_master.url()).await;
    let mut survived = 0;
    for guard in &guards {
        let count = common::hold_count(&new_master_client, guard.name(), guard.owner()).await;
        if guard.is_lost() {
            assert_eq!(count, None, "{} reports lost but is held", guard.name());
        } else {
            // A guard that does not report lost really holds the lock on the new master,
            // and has renewed it there.
            assert_eq!(count, Some(1), "{} is silently lost", guard.name());
            let pttl = new_master
                .query(&["PTTL", &common::key(guard.name())])
                .unwrap();
            let pttl: u64 = pttl.trim_start_matches(':').parse().unwrap();
            assert!(
                pttl > lease.as_millis() as u64 / 2,
                "{} was not renewed on the new master (PTTL {pttl} ms)",
                guard.name()
            );
            survived += 1;
        }
    }
    println!(
        "sentinel failover: {survived} of {} holds survived; {} taken on the retired master \
         reported lost ({:?} after the failover)",
        guards.len(),
        stranded.len(),
        failed_over.elapsed()
    );
    for guard in &stranded {
        assert!(
            guard.is_lost(),
            "{} never reached the new master",
            guard.name()
        );
    }
    for waiter in &waiting {
        assert!(
            !waiter.is_finished(),
            "a waiter got in while its lock was held"
        );
    }

    // New acquisitions work, through the old clients and a new one.
    let fresh = common::unique("after-failover");
    holder.lock(&fresh).await.unwrap().unlock().await.unwrap();
    let late = LockClient::connect(&url).await.unwrap();
    late.lock(&fresh).await.unwrap().unlock().await.unwrap();

    // Releasing the held locks wakes their waiters (or frees them for the taking).
    for guard in guards {
        let _ = guard.unlock().await;
    }
    for waiter in waiting {
        let (name, guard) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("a waiter slept through the release")
            .unwrap()
            .unwrap();
        assert_eq!(guard.name(), name);
        guard.unlock().await.unwrap();
    }
}

/// The PTTL of `key` on `server`, in milliseconds (negative if it has none).
fn pttl(server: &common::RedisServer, key: &str) -> i64 {
    common::integer(&server.query(&["PTTL", key]).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holds_are_renewed_as_soon_as_the_client_reaches_the_new_master() {
    // The sentinels promote the replica at once but retire the old master (and cut its
    // clients) only some seconds later. Meanwhile the holder renews on the old master,
    // and the new master keeps the expiry of the last renewal it had replicated, which
    // runs low. A holder that waited for its next renewal period after reconnecting
    // would find its holds gone.
    let deployment = Sentinels::start();
    let (old_master, new_master) = (&deployment.master, &deployment.replica);
    let lease = Duration::from_secs(9);
    let period = lease / 3;
    let holder = LockClient::builder(deployment.url())
        .lease(lease)
        .build()
        .await
        .unwrap();
    let mut guards: Vec<LockGuard> = Vec::new();
    for i in 0..5 {
        guards.push(
            holder
                .lock(common::unique(&format!("renewed-{i}")))
                .await
                .unwrap(),
        );
    }
    let keys: Vec<String> = guards
        .iter()
        .map(|guard| common::key(guard.name()))
        .collect();
    old_master.wait_replicated(new_master);

    deployment.promote();
    // Renewals go on reaching the old master, not the new one, until the new master's
    // copy has less than a renewal period left. (The renewals are a period apart and
    // the new master's copy expires a lease after one of them, so the old master
    // renewed about now: wait a little longer, so that renewal is answered and not
    // re-sent to the new master when the old one cuts the connection.)
    let low = i64::try_from((period - Duration::from_millis(300)).as_millis()).unwrap();
    common::wait_until("the new master's copy to run low", lease, || {
        pttl(new_master, &keys[0]) < low
    });
    let (old_ttl, new_ttl) = (pttl(old_master, &keys[0]), pttl(new_master, &keys[0]));
    assert!(
        old_ttl > new_ttl + 3_000,
        "the holder did not renew on the old master after the promotion \
         (PTTL {old_ttl} ms there, {new_ttl} ms on the new master)"
    );
    // With the renewals a third of a lease apart, the next one is due just when the
    // new master's copy expires (the issue saw it arrive 5 ms late): a coin toss. Cut
    // the new master's copies to 1.2 s, as if they were 1.5 s older, so that a holder
    // which waits for its next period loses them for certain.
    for key in &keys {
        assert_eq!(
            new_master.query(&["PEXPIRE", key, "1200"]).as_deref(),
            Ok(":1")
        );
    }
    deployment.retire_old_master();
    let retired = Instant::now();

    // The copies would expire 1.2 s from now; the next periodic renewal is due in
    // about 2.7 s. Every copy must be renewed before it expires.
    let renewed = |key: &String| pttl(new_master, key) > (lease / 2).as_millis() as i64;
    while !keys.iter().all(renewed) {
        assert!(
            retired.elapsed() < Duration::from_millis(2_000),
            "not renewed on the new master after the reconnection: {:?}",
            keys.iter()
                .map(|key| (key.as_str(), pttl(new_master, key)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "every hold renewed on the new master {:?} after the old master was retired",
        retired.elapsed()
    );
    for guard in &guards {
        assert!(!guard.is_lost(), "{} reports lost", guard.name());
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    for key in &keys {
        assert_eq!(pttl(new_master, key), -2, "{key} was left held");
    }
}

/// docs/guarantees.md: "A failover that loses the queue forgets the order (waiters
/// queue again with their client's next attempt, within 2 s)." The fair lock is held
/// (replicated), the replica is promoted, and only then do the waiters of two clients
/// queue: on the old master alone, so the new master has the holder but no queue. Once
/// the old master is retired, every wait is queued again on the new master within a
/// place refresh (2 s, and a little for the clients to find the new master), and all
/// are served after the holder lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "racy on a loaded machine: it needs the old master to take writes after \
            SENTINEL FAILOVER, but the sentinels may demote it first (the waits then get \
            READONLY); tests/fair.rs a_lost_queue_is_rebuilt_within_a_refresh_and_every_waiter_served \
            covers the re-queueing"]
async fn a_failover_that_loses_a_fair_locks_queue_queues_every_waiter_again() {
    let deployment = Sentinels::start();
    let url = deployment.url();
    let (old_master, new_master) = (&deployment.master, &deployment.replica);
    let name = common::unique("fair-failover");
    let key = format!("{}:fair", common::key(&name));
    let queue = format!("{key}:queue");
    let queued = |server: &common::RedisServer| -> Vec<String> {
        let mut waits = server.array(&["ZRANGE", &queue, "0", "-1"]).unwrap();
        waits.sort();
        waits
    };
    // A long lease: only a release lets the waiters in.
    let holder = LockClient::builder(&url)
        .lease(Duration::from_secs(30))
        .build()
        .await
        .unwrap();
    let held = holder.fair_lock(&name).await.unwrap();
    // Connected before the promotion, the waiters' clients go on with the old master
    // until it is retired (a client connected after it would find the new one).
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(LockClient::connect(&url).await.unwrap());
    }
    old_master.wait_replicated(new_master);

    deployment.promote();
    let mut waits = Vec::new();
    for client in &clients {
        for _ in 0..2 {
            let (client, name) = (client.clone(), name.clone());
            waits.push(tokio::spawn(async move {
                let guard = client.fair_lock(&name).await.unwrap();
                guard.unlock().await.unwrap();
            }));
        }
    }
    common::wait_until("four waits queued", Duration::from_secs(5), || {
        queued(old_master).len() == 4
    });
    let before = queued(old_master);
    assert!(queued(new_master).is_empty(), "the queue was replicated");
    assert_eq!(
        new_master
            .query(&["HEXISTS", &key, held.owner()])
            .as_deref(),
        Ok(":1"),
        "the holder was not replicated"
    );

    deployment.retire_old_master();
    let retired = Instant::now();
    while queued(new_master) != before {
        assert!(
            retired.elapsed() < Duration::from_secs(3),
            "not every wait queued again on the new master: {:?} of {before:?}",
            queued(new_master)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "every wait queued again {:?} after the failover",
        retired.elapsed()
    );
    assert!(!held.is_lost(), "the holder lost the lock");
    assert!(
        waits.iter().all(|wait| !wait.is_finished()),
        "a waiter got in while the lock was held"
    );

    held.unlock().await.unwrap();
    for wait in waits {
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("every waiter is served")
            .unwrap();
    }
    assert_eq!(new_master.query(&["EXISTS", &key]).as_deref(), Ok(":0"));
}
