//! Redis Sentinel: locks through `redis-sentinel://`, and a forced failover while
//! locks are held and waiters wait.

mod common;

use std::time::{Duration, Instant};

use fred::interfaces::HashesInterface;
use holdlock::{LockClient, LockGuard};

use common::sentinel::Sentinels;

fn key(name: &str) -> String {
    format!("holdlock:{{{name}}}")
}

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
        let count: Option<i64> = new_master_client
            .hget(key(guard.name()).as_str(), guard.owner())
            .await
            .unwrap();
        if guard.is_lost() {
            assert_eq!(count, None, "{} reports lost but is held", guard.name());
        } else {
            // A guard that does not report lost really holds the lock on the new master,
            // and has renewed it there.
            assert_eq!(count, Some(1), "{} is silently lost", guard.name());
            let pttl = new_master.query(&["PTTL", &key(guard.name())]).unwrap();
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
