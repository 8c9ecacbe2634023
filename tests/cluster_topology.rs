//! Redis Cluster topology changes under load: slots moved, a primary emptied, a
//! replica promoted, a primary restarted.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holdlock::LockClient;

use common::{RedisCluster, RedisServer};

fn node_id(node: &RedisServer) -> String {
    node.query(&["CLUSTER", "MYID"])
        .unwrap()
        .trim_start_matches('+')
        .trim_matches('"')
        .to_owned()
}

fn reshard(cluster: &RedisCluster, from: &RedisServer, to: &RedisServer, slots: usize) {
    let out = Command::new("redis-cli")
        .args(["--cluster", "reshard", &format!("127.0.0.1:{}", from.port)])
        .args([
            "--cluster-from",
            &node_id(from),
            "--cluster-to",
            &node_id(to),
        ])
        .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reshard: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = cluster;
}

async fn raw_probe(
    url: &str,
    key: &str,
) -> Result<Result<i64, String>, tokio::time::error::Elapsed> {
    use holdlock::fred::interfaces::{ClientLike, KeysInterface};
    tokio::time::timeout(Duration::from_secs(2), async {
        let c = common::raw(url).await;
        let r = c.pttl::<i64, _>(key).await.map_err(|e| e.to_string());
        let _ = c.quit().await;
        r
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn emptying_a_primary() {
    common::trace();
    let cluster = RedisCluster::start_with_replicas(
        3,
        std::env::var("REPLICAS").map_or(1, |r| r.parse().unwrap()),
    );
    let url = cluster.url();
    let lease = Duration::from_secs(std::env::var("LEASE").map_or(3, |r| r.parse().unwrap()));
    let holder = LockClient::builder(&url)
        .lease(lease)
        .build()
        .await
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..300 {
        guards.push(holder.lock(&format!("held:{i}")).await.unwrap());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(parking_lot::Mutex::new(HashMap::<String, u64>::new()));
    let cycles = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    let other = LockClient::builder(&url)
        .lease(lease)
        .build()
        .await
        .unwrap();
    for w in 0..8 {
        let client = if w % 2 == 0 {
            holder.clone()
        } else {
            other.clone()
        };
        let (stop, errors, cycles) = (stop.clone(), errors.clone(), cycles.clone());
        workers.push(tokio::spawn(async move {
            let mut i = w;
            let mut slowest = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("cycle:{}", i % 40);
                i += 7;
                let began = Instant::now();
                match client.lock(&name).await {
                    Ok(g) => {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        if let Err(e) = g.unlock().await {
                            *errors.lock().entry(format!("unlock {e}")).or_default() += 1;
                        }
                    }
                    Err(e) => *errors.lock().entry(format!("lock {e}")).or_default() += 1,
                }
                slowest = slowest.max(began.elapsed());
                cycles.fetch_add(1, Ordering::Relaxed);
            }
            slowest
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let primaries = cluster.primaries();
    let (from, to) = (primaries[0], primaries[1]);
    let began = Instant::now();
    tokio::task::block_in_place(|| reshard(&cluster, from, to, 5461));
    eprintln!("reshard took {:?}", began.elapsed());
    {
        use holdlock::fred::interfaces::ClientLike;
        use holdlock::fred::interfaces::KeysInterface;
        let redis = holder.redis();
        for round in 0..6 {
            let key = common::key(&format!("held:{round}"));
            let plain =
                tokio::time::timeout(Duration::from_secs(2), redis.pttl::<i64, _>(&key)).await;
            let once = tokio::time::timeout(
                Duration::from_secs(2),
                redis
                    .with_options(&holdlock::fred::types::config::Options {
                        max_attempts: Some(1),
                        ..Default::default()
                    })
                    .pttl::<i64, _>(&key),
            )
            .await;
            let t = Instant::now();
            let tried = tokio::time::timeout(
                Duration::from_secs(2),
                holder.try_lock(&format!("probe:{round}")),
            )
            .await
            .map(|r| r.map(|g| g.is_some()));
            let fresh = raw_probe(&url, &key).await;
            eprintln!(
                "probe {round}: plain {plain:?} once {once:?} try_lock {tried:?} in {:?} fresh {fresh:?}",
                t.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    tokio::time::sleep(lease * 2).await;
    stop.store(true, Ordering::Relaxed);
    let mut slowest = Duration::ZERO;
    for w in workers {
        slowest = slowest.max(w.await.unwrap());
    }
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    eprintln!(
        "lost {lost}, cycles {}, slowest {slowest:?}, errors {:?}",
        cycles.load(Ordering::Relaxed),
        errors.lock()
    );
    assert_eq!(lost, 0);
    assert!(errors.lock().is_empty());
}
