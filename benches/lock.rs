//! holdlock against the floor Redis sets, measured in the same run.
//!
//! `cargo bench --bench lock --features bench` starts a throwaway redis-server, and
//! then:
//!
//! 1. criterion measures a lock+unlock cycle (W1) and a nested acquisition (W1r) next
//!    to their floors: the bare lock (`SET NX PX` + compare-and-delete `EVALSHA`) and
//!    one `EVALSHA` of a script that only returns;
//! 2. the workloads W1–W7 of `holdlock bench` (shared code: the library's `bench`
//!    module, `src/bench/`) run at full size and print a table of figures, floors and
//!    ratios;
//! 3. W5 holds 10,000 locks with a 3 s lease for 10 s and reports the client's memory
//!    per held lock and the renewal commands per second.
//!
//! `HOLDLOCK_BENCH_LATENCY_US=100` runs all of it through a delay proxy that adds
//! 100 µs each way (the network-distance mode of `holdlock bench --latency`).
//!
//! The table is also written as JSON to `target/holdlock-bench.json`. Ratios, not
//! absolute times, are what compare across machines: 2 cores are shared by Redis,
//! the client and the runtime. See docs/performance.md.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use fred::interfaces::ClientLike;
use fred::types::scripts::Script;
use futures::StreamExt;
use holdlock::LockClient;
use holdlock::bench::{self as workloads, Bench, Figure, Goal, Settings, Unit, Workload};

/// W5: how many locks are held at once, for how long, with what lease.
const W5_LOCKS: usize = 10_000;
const W5_HOLD: Duration = Duration::from_secs(10);
const W5_LEASE: Duration = Duration::from_secs(3);

fn criterion_groups(c: &mut Criterion, runtime: &tokio::runtime::Runtime, url: &str) {
    let client = runtime.block_on(LockClient::connect(url)).unwrap();
    let redis = client.redis().clone();
    let trivial = Script::from_lua("return 1");
    runtime.block_on(trivial.load(&redis)).unwrap();
    let release = Script::from_lua(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    );
    runtime.block_on(release.load(&redis)).unwrap();

    let mut w1 = c.benchmark_group("w1");
    w1.bench_function("bare", |b| {
        let (redis, release) = (redis.clone(), release.clone());
        b.iter_custom(|iterations| {
            let (redis, release) = (redis.clone(), release.clone());
            in_task(runtime, async move {
                use fred::interfaces::KeysInterface;
                use fred::types::{Expiration, SetOptions};
                let started = Instant::now();
                for _ in 0..iterations {
                    let set: Option<String> = redis
                        .set(
                            "bench:w1:{bare}",
                            "me",
                            Some(Expiration::PX(30_000)),
                            Some(SetOptions::NX),
                            false,
                        )
                        .await
                        .unwrap();
                    assert!(set.is_some());
                    let deleted: i64 = release
                        .evalsha(&redis, "bench:w1:{bare}", "me")
                        .await
                        .unwrap();
                    assert_eq!(deleted, 1);
                }
                started.elapsed()
            })
        })
    });
    w1.bench_function("holdlock", |b| {
        b.iter_custom(|iterations| {
            let client = client.clone();
            in_task(runtime, async move {
                let started = Instant::now();
                for _ in 0..iterations {
                    client
                        .lock("bench:w1")
                        .await
                        .unwrap()
                        .unlock()
                        .await
                        .unwrap();
                }
                started.elapsed()
            })
        })
    });
    w1.finish();

    let mut w1r = c.benchmark_group("w1r");
    w1r.bench_function("evalsha", |b| {
        b.iter_custom(|iterations| {
            let (redis, trivial) = (redis.clone(), trivial.clone());
            in_task(runtime, async move {
                let started = Instant::now();
                for _ in 0..iterations {
                    let _: i64 = trivial
                        .evalsha(&redis, "bench:w1r:{trivial}", ())
                        .await
                        .unwrap();
                }
                started.elapsed()
            })
        })
    });
    w1r.bench_function("holdlock_nested", |b| {
        b.iter_custom(|iterations| {
            let client = client.clone();
            in_task(runtime, async move {
                let outer = client.lock("bench:w1r").await.unwrap();
                let mut nested = Duration::ZERO;
                for _ in 0..iterations {
                    let started = Instant::now();
                    let inner = client.lock("bench:w1r").await.unwrap();
                    nested += started.elapsed();
                    inner.unlock().await.unwrap();
                }
                outer.unlock().await.unwrap();
                nested
            })
        })
    });
    w1r.finish();
    runtime.block_on(client.shutdown());
}

/// Runs `future` as a task of its own (a lock owner of its own) and waits for it.
fn in_task<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    future: impl Future<Output = T> + Send + 'static,
) -> T {
    runtime.block_on(async { tokio::spawn(future).await.unwrap() })
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

fn print_criterion_ratios() {
    println!("\ncriterion means, as ratios to their floors:");
    for (id, floor) in [
        ("w1/holdlock", "w1/bare"),
        ("w1r/holdlock_nested", "w1r/evalsha"),
    ] {
        if let (Some(mean), Some(floor_mean)) = (mean_ns(id), mean_ns(floor)) {
            println!(
                "  {id:<22} {:>8.1} µs   {floor:<12} {:>8.1} µs   ratio {:.2}x",
                mean / 1_000.0,
                floor_mean / 1_000.0,
                mean / floor_mean
            );
        }
    }
}

/// The process's resident memory, in bytes (Linux).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1_024)
}

/// `EVALSHA` calls the server has run so far.
async fn evalsha_calls(client: &LockClient) -> u64 {
    let stats: String = client
        .redis()
        .info(Some(fred::types::InfoKind::CommandStats))
        .await
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// W5: memory per held lock and renewal rate with many locks held at once.
async fn watchdog_load(url: &str) -> Vec<Figure> {
    let client = LockClient::builder(url)
        .lease(W5_LEASE)
        .build()
        .await
        .unwrap();
    let names: Vec<String> = (0..W5_LOCKS).map(|i| format!("bench:w5:{i}")).collect();
    // Warm the allocator and the connection before the baseline.
    for name in names.iter().take(200) {
        client.lock(name).await.unwrap().unlock().await.unwrap();
    }
    let before = resident_bytes();
    let guards: Vec<_> = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let client = client.clone();
            async move { client.lock(&name).await.unwrap() }
        })
        .buffer_unordered(200)
        .collect()
        .await;
    let acquired_at = Instant::now();
    // Every watchdog task has started once the first renewals are due.
    tokio::time::sleep(W5_LEASE / 3 + Duration::from_millis(200)).await;
    let after = resident_bytes();
    let calls_before = evalsha_calls(&client).await;
    let counted_from = Instant::now();
    tokio::time::sleep_until((acquired_at + W5_HOLD).into()).await;
    let renewals = evalsha_calls(&client).await - calls_before;
    let per_second = renewals as f64 / counted_from.elapsed().as_secs_f64();
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    client.shutdown().await;

    let expected = W5_LOCKS as f64 / (W5_LEASE / 3).as_secs_f64();
    let mut figures = Vec::new();
    if let (Some(before), Some(after)) = (before, after) {
        let per_lock = after.saturating_sub(before) as f64 / W5_LOCKS as f64;
        figures.push(
            Figure::new(
                Workload::W5,
                "memory per held lock (RSS)",
                per_lock,
                Unit::Bytes,
            )
            .goal(Goal::AtMost(2_048.0)),
        );
    }
    figures.push(
        Figure::new(Workload::W5, "renewals/s", per_second, Unit::PerSecond)
            .floor("locks / (lease/3)", expected)
            .goal(Goal::RatioAtMost(1.05)),
    );
    figures
}

fn main() {
    let server = common::RedisServer::start();
    // HOLDLOCK_BENCH_LATENCY_US=100 runs everything through a proxy that delays each
    // direction by that many microseconds (the network-distance mode).
    let latency = std::env::var("HOLDLOCK_BENCH_LATENCY_US")
        .ok()
        .and_then(|micros| micros.parse().ok())
        .map(Duration::from_micros);
    let (_proxy, url) = match latency {
        None => (None, server.url()),
        Some(latency) => {
            let (upstream, through) =
                holdlock::bench::DelayProxy::upstream_of(&server.url()).unwrap();
            let proxy = holdlock::bench::DelayProxy::start(upstream, latency).unwrap();
            let url = through(proxy.address());
            eprintln!("network-distance mode: {latency:?} each way through {url}");
            (Some(proxy), url)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    criterion_groups(&mut criterion, &runtime, &url);
    criterion.final_summary();
    print_criterion_ratios();

    let mut figures = runtime.block_on(async {
        let clients = [
            LockClient::connect(&url).await.unwrap(),
            LockClient::connect(&url).await.unwrap(),
        ];
        let bench = Bench::new(clients.clone(), Settings::default(), Arc::new(|_, _, _| {}));
        let figures = bench.run(&Workload::ALL).await.unwrap();
        for client in clients {
            client.shutdown().await;
        }
        figures
    });
    figures.extend(runtime.block_on(watchdog_load(&url)));
    println!(
        "\nworkloads (floors measured in the same run):\n{}",
        workloads::table(&figures)
    );
    let json = workloads::json(&figures);
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|target| target.join("holdlock-bench.json"));
    if let Some(out) = out {
        if std::fs::write(&out, json.to_string()).is_ok() {
            println!("written to {}", out.display());
        }
    }
}
