//! W10: many locks held by one client under the watchdog: what holding them costs
//! (memory, renewal scripts, CPU), whether every renewal is on time, and how soon
//! dropping every guard frees every key.
//!
//! Reads the process's own memory and CPU time from `/proc/self` (Linux; elsewhere
//! those figures are left out), and counts scripts server-wide from `INFO
//! commandstats` (every primary's on a cluster): run it on otherwise idle servers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::interfaces::{ClientLike, KeysInterface};
use fred::types::Value;

use super::samples::cpu_time;
use super::server::{key_count, script_calls};
use super::{Bench, BenchError, BenchResult, Figure, Goal, Unit, Workload};
use crate::{LockClient, LockGuard};

/// The tasks that take the locks.
const TAKERS: usize = 16;

/// The lease of W10's client (the default).
const LEASE: Duration = Duration::from_secs(30);

/// How many keys each PTTL sample reads.
const SAMPLED: usize = 1_000;

/// How often the PTTL of the sampled keys is read.
const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// The prefix of W10's own client, so that its keys can be named.
const PREFIX: &str = "holdlock-w10:";

/// The W10 targets (issue 29).
const BYTES_TARGET: f64 = 1_024.0;
const RENEWALS_PER_SCRIPT_TARGET: f64 = 50.0;
const CPU_TARGET: f64 = 15.0;
const FREED_TARGET_MS: f64 = 10_000.0;

impl Bench {
    /// W10: `held` locks taken by 16 tasks of one client (a client of its own, with
    /// a 30 s lease), watched for `watch`, then every guard dropped.
    pub(super) async fn many_held(&self) -> BenchResult<Vec<Figure>> {
        let config = self.redis().client_config();
        let client = LockClient::builder_from_config(config)
            .prefix(PREFIX)
            .lease(LEASE)
            .build()
            .await?;
        let measured = self.many_held_on(&client).await;
        client.shutdown().await;
        measured
    }

    async fn many_held_on(&self, client: &LockClient) -> BenchResult<Vec<Figure>> {
        let held = self.settings.held;
        let watch = self.settings.watch;
        let names: Arc<Vec<String>> =
            Arc::new((0..held).map(|i| self.name(&format!("w10:{i}"))).collect());
        let keys: Vec<String> = names
            .iter()
            .map(|name| format!("{PREFIX}{{{name}}}"))
            .collect();
        let keys_before = key_count(self.redis()).await?;
        let resident_before = resident_bytes();
        let taken = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..TAKERS)
            .map(|task| {
                let (client, names) = (client.clone(), Arc::clone(&names));
                let (taken, progress) = (Arc::clone(&taken), Arc::clone(&self.progress));
                tokio::spawn(async move {
                    let mut guards = Vec::with_capacity(names.len() / TAKERS + 1);
                    for name in names.iter().skip(task).step_by(TAKERS) {
                        guards.push(client.lock(name).await?);
                        let done = taken.fetch_add(1, Ordering::Relaxed) + 1;
                        if done % 10_000 == 0 {
                            progress(Workload::W10, done, names.len() as u64);
                        }
                    }
                    Ok::<_, BenchError>(guards)
                })
            })
            .collect();
        // Kept as each task took them: they are dropped the same way, by 16 tasks.
        let mut guards: Vec<Vec<LockGuard>> = Vec::with_capacity(TAKERS);
        for handle in handles {
            guards.push(handle.await??);
        }
        let resident_after = resident_bytes();

        // Watch: sample the PTTL of a spread of keys, count scripts and CPU time.
        let redis = self.redis();
        let scripts_before = script_calls(redis).await?;
        let cpu_before = cpu_time();
        let started = Instant::now();
        let step = (held / SAMPLED).max(1);
        let sampled: Vec<&str> = keys.iter().step_by(step).map(String::as_str).collect();
        let mut smallest_pttl = i64::MAX;
        while started.elapsed() < watch {
            tokio::time::sleep(SAMPLE_EVERY.min(watch.saturating_sub(started.elapsed()))).await;
            let (smallest, missing) = smallest_pttl_of(redis, &sampled).await?;
            if missing > 0 {
                return Err(format!("W10: {missing} sampled keys are gone while held").into());
            }
            smallest_pttl = smallest_pttl.min(smallest);
            self.progress(Workload::W10, started.elapsed(), watch);
        }
        let watched = started.elapsed();
        let cpu = cpu_before
            .zip(cpu_time())
            .map(|(before, after)| 100.0 * (after - before).as_secs_f64() / watched.as_secs_f64());
        let scripts = script_calls(redis).await? - scripts_before;
        let due = held as f64 * watched.as_secs_f64() / (LEASE / 3).as_secs_f64();
        let lost = guards
            .iter()
            .flatten()
            .filter(|guard| guard.is_lost())
            .count();

        // Drop every guard: time until the last key is gone.
        let dropped = Instant::now();
        for guards in guards {
            drop(tokio::spawn(async move { drop(guards) }));
        }
        // Reading every key is itself a million commands, which on a small machine
        // take longer than the releases: the server's key count (O(1)) is watched until
        // it is back to what it was before the locks were taken, and only then is every
        // key read (untimed, unless some are left).
        let mut freed_after = None;
        while dropped.elapsed() < LEASE * 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if key_count(redis).await? <= keys_before {
                freed_after = Some(dropped.elapsed());
                break;
            }
        }
        let mut left = still_there(redis, keys.iter().map(String::as_str).collect()).await?;
        while !left.is_empty() {
            if dropped.elapsed() > LEASE * 2 {
                let left = left.len();
                return Err(format!("W10: {left} keys still there after {:?}", LEASE * 2).into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            left = still_there(redis, left).await?;
            freed_after = None;
        }
        let freed_after = freed_after.unwrap_or_else(|| dropped.elapsed());

        let on_time = LEASE.mul_f64(2.0 / 3.0).as_millis() as f64 - 500.0;
        let mut figures = vec![
            Figure::new(Workload::W10, "locks held", held as f64, Unit::Count),
            Figure::new(
                Workload::W10,
                "renewals due per script",
                due / (scripts as f64).max(1.0),
                Unit::PerOp,
            )
            .goal(Goal::AtLeast(RENEWALS_PER_SCRIPT_TARGET)),
            Figure::new(
                Workload::W10,
                "smallest sampled PTTL",
                smallest_pttl as f64,
                Unit::Millis,
            )
            .goal(Goal::AtLeast(on_time)),
            Figure::new(Workload::W10, "locks lost", lost as f64, Unit::Count)
                .goal(Goal::Exactly(0.0)),
            Figure::new(
                Workload::W10,
                "last key gone after dropping all",
                freed_after.as_secs_f64() * 1_000.0,
                Unit::Millis,
            )
            .goal(Goal::AtMost(FREED_TARGET_MS)),
        ];
        if let (Some(before), Some(after)) = (resident_before, resident_after) {
            figures.push(
                Figure::new(
                    Workload::W10,
                    "resident memory/held lock",
                    after.saturating_sub(before) as f64 / held as f64,
                    Unit::Bytes,
                )
                .goal(Goal::AtMost(BYTES_TARGET)),
            );
        }
        if let Some(cpu) = cpu {
            figures.push(
                Figure::new(
                    Workload::W10,
                    "client CPU (% of a core)",
                    cpu,
                    Unit::Percent,
                )
                .goal(Goal::AtMost(CPU_TARGET)),
            );
        }
        Ok(figures)
    }

    fn progress(&self, workload: Workload, done: Duration, total: Duration) {
        (self.progress)(workload, done.as_secs(), total.as_secs());
    }
}

/// The smallest PTTL among `keys` in milliseconds, and how many of them are gone.
async fn smallest_pttl_of(redis: &Client, keys: &[&str]) -> BenchResult<(i64, usize)> {
    let pipeline = redis.pipeline();
    for key in keys {
        let _: () = pipeline.pttl(*key).await?;
    }
    let replies: Vec<i64> = pipeline.all().await?;
    let missing = replies.iter().filter(|&&ttl| ttl == -2).count();
    let smallest = replies
        .into_iter()
        .filter(|&ttl| ttl >= 0)
        .min()
        .unwrap_or(i64::MAX);
    Ok((smallest, missing))
}

/// The keys of `keys` that still exist (read 1,000 at a time).
async fn still_there<'k>(redis: &Client, keys: Vec<&'k str>) -> BenchResult<Vec<&'k str>> {
    let mut left = Vec::new();
    for chunk in keys.chunks(1_000) {
        let pipeline = redis.pipeline();
        for key in chunk {
            let _: () = pipeline.exists(*key).await?;
        }
        let replies: Vec<Value> = pipeline.all().await?;
        for (key, reply) in chunk.iter().zip(replies) {
            if reply.as_i64() != Some(0) {
                left.push(*key);
            }
        }
    }
    Ok(left)
}

/// The process's resident memory (`VmRSS` in `/proc/self/status`), if it can be read.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1_024)
}
