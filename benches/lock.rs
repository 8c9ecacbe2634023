//! Lock throughput against a floor measured in the same run.
//!
//! `cargo bench --bench lock` starts a throwaway redis-server, measures a bare
//! round trip (`PING`) and the naive tutorial lock (`SET NX PX` + compare-and-delete)
//! as floors, then holdlock's uncontended, reentrant and contended paths, and prints
//! each as a ratio of the `PING` floor. Ratios, not absolute times, are what compare
//! across machines; 2 cores are shared by Redis, the client and the runtime.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use fred::interfaces::{ClientLike, KeysInterface, LuaInterface};

use fred::types::{Expiration, SetOptions};
use holdlock::LockClient;

const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

fn benches(c: &mut Criterion, server: &common::RedisServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    let client = runtime.block_on(LockClient::connect(&url)).unwrap();
    let raw = runtime.block_on(common::raw(&url));

    let mut floor = c.benchmark_group("floor");
    floor.bench_function("ping", |b| {
        timed_in_task(b, &runtime, &raw, |raw| async move {
            raw.ping::<String>(None).await.unwrap();
        })
    });
    floor.bench_function("naive_set_nx_del", |b| {
        timed_in_task(b, &runtime, &raw, |raw| async move {
            let token = "owner-token";
            let set: Option<String> = raw
                .set(
                    "bench:naive",
                    token,
                    Some(Expiration::PX(30_000)),
                    Some(SetOptions::NX),
                    false,
                )
                .await
                .unwrap();
            assert!(set.is_some());
            let _: i64 = raw
                .eval(COMPARE_AND_DELETE, "bench:naive", token)
                .await
                .unwrap();
        })
    });
    floor.finish();

    let mut lock = c.benchmark_group("holdlock");
    lock.bench_function("uncontended_lock_unlock", |b| {
        timed_in_task(b, &runtime, &client, |client| async move {
            client
                .lock("bench:uncontended")
                .await
                .unwrap()
                .unlock()
                .await
                .unwrap();
        })
    });
    lock.bench_function("try_lock_held_elsewhere", |b| {
        let other = runtime.block_on(LockClient::connect(&url)).unwrap();
        let held = runtime.block_on(other.lock("bench:held")).unwrap();
        timed_in_task(b, &runtime, &client, |client| async move {
            assert!(client.try_lock("bench:held").await.unwrap().is_none());
        });
        drop(held);
    });
    lock.bench_function("reentrant_second_hold", |b| {
        b.iter_custom(|iterations| {
            let client = client.clone();
            runtime.block_on(async move {
                tokio::spawn(async move {
                    let outer = client.lock("bench:reentrant").await.unwrap();
                    let start = Instant::now();
                    for _ in 0..iterations {
                        client
                            .lock("bench:reentrant")
                            .await
                            .unwrap()
                            .unlock()
                            .await
                            .unwrap();
                    }
                    let elapsed = start.elapsed();
                    outer.unlock().await.unwrap();
                    elapsed
                })
                .await
                .unwrap()
            })
        })
    });
    for tasks in [2usize, 4] {
        lock.bench_with_input(BenchmarkId::new("contended", tasks), &tasks, |b, &tasks| {
            b.iter_custom(|iterations| runtime.block_on(contended(&client, tasks, iterations)))
        });
    }
    lock.finish();
    runtime.block_on(async {
        client.shutdown().await;
        let _ = raw.quit().await;
    });
}

/// Times `iterations` runs of `op` in a loop inside one runtime task, so every
/// benchmark pays the same scheduling costs as application code would.
fn timed_in_task<T, F, Fut>(
    b: &mut criterion::Bencher<'_>,
    runtime: &tokio::runtime::Runtime,
    target: &T,
    op: F,
) where
    T: Clone + Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    b.iter_custom(|iterations| {
        let (target, op) = (target.clone(), op.clone());
        runtime.block_on(async move {
            tokio::spawn(async move {
                let start = Instant::now();
                for _ in 0..iterations {
                    op(target.clone()).await;
                }
                start.elapsed()
            })
            .await
            .unwrap()
        })
    });
}

/// `tasks` tasks share `iterations` lock/unlock pairs on one lock; returns the total
/// time, so criterion reports the time per acquisition (hand-off included).
async fn contended(client: &LockClient, tasks: usize, iterations: u64) -> Duration {
    let per_task = iterations.div_ceil(tasks as u64);
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    client
                        .lock("bench:contended")
                        .await
                        .unwrap()
                        .unlock()
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    start.elapsed()
}

/// Mean time of one benchmark from criterion's saved estimates, in nanoseconds.
fn mean_ns(id: &str) -> Option<f64> {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()?
        .join("criterion")
        .join(id)
        .join("new/estimates.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

fn main() {
    let server = common::RedisServer::start();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    benches(&mut criterion, &server);
    criterion.final_summary();

    let Some(floor) = mean_ns("floor/ping") else {
        return;
    };
    println!(
        "\nratios to one PING round trip ({:.1} µs) in this run:",
        floor / 1_000.0
    );
    for id in [
        "floor/naive_set_nx_del",
        "holdlock/uncontended_lock_unlock",
        "holdlock/try_lock_held_elsewhere",
        "holdlock/reentrant_second_hold",
        "holdlock/contended/2",
        "holdlock/contended/4",
    ] {
        if let Some(mean) = mean_ns(id) {
            println!(
                "  {id:<36} {:>6.2}x  ({:.1} µs)",
                mean / floor,
                mean / 1_000.0
            );
        }
    }
}
