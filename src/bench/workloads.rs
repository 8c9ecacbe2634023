//! The workloads W1–W4, each next to its floor; W3 and W4 also with the fair lock
//! (W3f, W4f).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::error::ErrorKind;
use fred::interfaces::{ClientLike, EventInterface, KeysInterface};
use fred::types::scripts::Script;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::exclusive::Exclusive;
use super::floors::{
    BareLock, RELEASE_AND_PUBLISH, SCRIPTS_ALONE, ScriptsAlone, TRIVIAL, subscribed,
};
use super::samples::{Samples, alternate, millis, time_each};
use super::{Bench, BenchError, BenchResult, Figure, Goal, Settings, Unit, Workload};
use crate::LockError;

impl Bench {
    /// W1: lock+unlock cycles in one task, next to the bare lock's and to holdlock's
    /// two scripts sent alone.
    pub(super) async fn uncontended(&self) -> BenchResult<Vec<Figure>> {
        let cycles = self.settings.cycles;
        let bare = self.bare().await?;
        let alone = ScriptsAlone::new(self.redis().clone()).await?;
        let (key, alone_key) = (self.key("w1"), self.key("w1:scripts"));
        let (client, name) = (self.clients[0].clone(), self.name("w1"));
        let progress = Arc::clone(&self.progress);
        let (floor, scripts, lock) = spawn(async move {
            alternate(
                cycles,
                |done| progress(Workload::W1, done, cycles),
                || async {
                    let started = Instant::now();
                    if !bare.take(&key).await? {
                        return Err("bare lock: key left over".into());
                    }
                    bare.release(&key).await?;
                    Ok(started.elapsed())
                },
                || async {
                    let started = Instant::now();
                    alone.acquire(&alone_key).await?;
                    alone.release(&alone_key, 1).await?;
                    Ok(started.elapsed())
                },
                || async {
                    let started = Instant::now();
                    client.lock(&name).await?.unlock().await?;
                    Ok(started.elapsed())
                },
            )
            .await
        })
        .await?;

        const FLOOR: &str = "bare lock";
        Ok(vec![
            Figure::new(Workload::W1, "cycles/s", lock.rate(), Unit::PerSecond)
                .floor(FLOOR, floor.rate())
                .goal(Goal::RatioAtLeast(0.95)),
            Figure::new(
                Workload::W1,
                "cycle p50",
                lock.percentile(50.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(50.0)),
            Figure::new(
                Workload::W1,
                "cycle p99",
                lock.percentile(99.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(99.0)),
            Figure::new(
                Workload::W1,
                "scripts alone/s",
                scripts.rate(),
                Unit::PerSecond,
            )
            .floor(FLOOR, floor.rate()),
            Figure::new(Workload::W1, "cycles/s", lock.rate(), Unit::PerSecond)
                .floor(SCRIPTS_ALONE, scripts.rate())
                .goal(Goal::RatioAtLeast(0.95)),
        ])
    }

    /// W1r: a nested `lock()` of a held lock, next to one `EVALSHA` round trip and to
    /// `reenter.lua` sent alone.
    pub(super) async fn reentrant(&self) -> BenchResult<Vec<Figure>> {
        let nested = self.settings.nested;
        let trivial = Script::from_lua(TRIVIAL);
        trivial.load(self.redis()).await?;
        let alone = ScriptsAlone::new(self.redis().clone()).await?;
        let (redis, key, alone_key) = (
            self.redis().clone(),
            self.key("w1r"),
            self.key("w1r:scripts"),
        );
        let (client, name) = (self.clients[0].clone(), self.name("w1r"));
        let progress = Arc::clone(&self.progress);
        let (floor, scripts, lock) = spawn(async move {
            let outer = client.lock(&name).await?;
            alone.acquire(&alone_key).await?;
            let measured = alternate(
                nested,
                |done| progress(Workload::W1r, done, nested),
                || async {
                    let started = Instant::now();
                    let _: i64 = trivial.evalsha(&redis, key.as_str(), ()).await?;
                    Ok(started.elapsed())
                },
                || async {
                    let started = Instant::now();
                    alone.reenter(&alone_key).await?;
                    let took = started.elapsed();
                    alone.release(&alone_key, 2).await?;
                    Ok(took)
                },
                || async {
                    let started = Instant::now();
                    let inner = client.lock(&name).await?;
                    let took = started.elapsed();
                    if inner.hold_count() != 2 {
                        return Err(format!("nested hold count {}", inner.hold_count()).into());
                    }
                    inner.unlock().await?;
                    Ok(took)
                },
            )
            .await;
            alone.release(&alone_key, 1).await?;
            outer.unlock().await?;
            measured
        })
        .await?;

        const FLOOR: &str = "one EVALSHA";
        Ok(vec![
            Figure::new(
                Workload::W1r,
                "nested lock p50",
                lock.percentile(50.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(50.0))
            .goal(Goal::RatioAtMost(1.05)),
            Figure::new(Workload::W1r, "nested lock mean", lock.mean(), Unit::Millis)
                .floor(FLOOR, floor.mean()),
            Figure::new(
                Workload::W1r,
                "script alone p50",
                scripts.percentile(50.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(50.0)),
            Figure::new(
                Workload::W1r,
                "nested lock p50",
                lock.percentile(50.0),
                Unit::Millis,
            )
            .floor(SCRIPTS_ALONE, scripts.percentile(50.0)),
        ])
    }

    /// W2: a burst of concurrent one-shot tries, next to the same burst of `SET NX`.
    pub(super) async fn burst(&self) -> BenchResult<Vec<Figure>> {
        /// Bursts of each kind, alternating; the medians are reported.
        const ROUNDS: usize = 5;
        let burst = self.settings.burst;
        let bare = Arc::new(self.bare().await?);
        let key = Arc::new(self.key("w2"));
        let client = self.clients[0].clone();
        let name = Arc::new(self.name("w2"));
        let (mut floor_walls, mut walls, mut winner_counts) = (Vec::new(), Vec::new(), Vec::new());
        let mut most_unanswered = 0;
        for round in 0..ROUNDS {
            (self.progress)(Workload::W2, round as u64, ROUNDS as u64);
            let started = Instant::now();
            let tries = (0..burst).map(|_| {
                let (bare, key) = (Arc::clone(&bare), Arc::clone(&key));
                tokio::spawn(async move { bare.take(&key).await })
            });
            let mut floor_winners = 0;
            for taken in futures::future::join_all(tries).await {
                floor_winners += usize::from(taken??);
            }
            floor_walls.push(started.elapsed());
            bare.release(&key).await?;
            if floor_winners != 1 {
                return Err(format!("bare burst: {floor_winners} winners").into());
            }

            let started = Instant::now();
            let tries = (0..burst).map(|_| {
                let (client, name) = (client.clone(), Arc::clone(&name));
                tokio::spawn(async move { client.lock(name.as_str()).try_now().await })
            });
            let mut winners = Vec::new();
            let mut unanswered = 0;
            for guard in futures::future::join_all(tries).await {
                match guard? {
                    Ok(guard) => winners.extend(guard),
                    // A try's budget is its zero wait and a round trip's grace: on a
                    // busy machine a burst's last tries can run past it. Counted, not
                    // fatal: the burst's answer is what the others say.
                    Err(LockError::Redis(error)) if *error.kind() == ErrorKind::Timeout => {
                        unanswered += 1;
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            walls.push(started.elapsed());
            winner_counts.push(winners.len());
            most_unanswered = most_unanswered.max(unanswered);
            for guard in winners {
                guard.unlock().await?;
            }
        }
        floor_walls.sort_unstable();
        walls.sort_unstable();
        let most_winners = winner_counts.iter().copied().max().unwrap_or(0);

        Ok(vec![
            Figure::new(
                Workload::W2,
                "wall time (median)",
                millis(walls[ROUNDS / 2]),
                Unit::Millis,
            )
            .floor("bare SET NX burst", millis(floor_walls[ROUNDS / 2]))
            .goal(Goal::RatioAtMost(1.5)),
            Figure::new(
                Workload::W2,
                "most winners in a burst",
                most_winners as f64,
                Unit::Count,
            )
            .goal(Goal::Exactly(1.0)),
            Figure::new(
                Workload::W2,
                "most tries unanswered in their budget, in a burst",
                most_unanswered as f64,
                Unit::Count,
            ),
        ])
    }

    /// W3 (the mutex) and W3f (the fair lock): workers on two clients contending for
    /// one lock around a read-modify-write.
    pub(super) async fn contended(&self, kind: Exclusive) -> BenchResult<Vec<Figure>> {
        let (workload, goal) = match kind {
            Exclusive::Mutex => (Workload::W3, 0.6),
            Exclusive::Fair => (Workload::W3f, 0.8),
        };
        let stem = workload.label().to_lowercase();
        let Settings {
            workers,
            sections,
            work,
            ..
        } = self.settings.clone();
        let total = workers as u64 * sections;
        let floor = self
            .serial_floor(&stem, total, Section::ReadModifyWrite)
            .await?;

        let counter = self.key(&format!("{stem}:counter"));
        let _: i64 = self.redis().del(counter.as_str()).await?;
        let order = Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
        let longest_wait = Arc::new(Mutex::new(Duration::ZERO));
        let done = Arc::new(AtomicU64::new(0));
        let name = Arc::new(self.name(&stem));
        let counter = Arc::new(counter);
        let started = Instant::now();
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let client = self.clients[worker % 2].clone();
                let (name, counter) = (Arc::clone(&name), Arc::clone(&counter));
                let (order, longest_wait) = (Arc::clone(&order), Arc::clone(&longest_wait));
                let (done, progress) = (Arc::clone(&done), Arc::clone(&self.progress));
                tokio::spawn(async move {
                    let mut longest = Duration::ZERO;
                    for _ in 0..sections {
                        let asked = Instant::now();
                        let guard = kind.take(&client, &name).await?;
                        longest = longest.max(asked.elapsed());
                        order.lock().push(worker);
                        increment(client.redis(), &counter).await?;
                        guard.unlock().await?;
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished % 500 == 0 {
                            progress(workload, finished, total);
                        }
                        tokio::time::sleep(work).await;
                    }
                    let mut longest_wait = longest_wait.lock();
                    *longest_wait = (*longest_wait).max(longest);
                    Ok::<_, BenchError>(())
                })
            })
            .collect();
        for handle in handles {
            handle.await??;
        }
        let wall = started.elapsed();
        let final_count: Option<u64> = self.redis().get(counter.as_str()).await?;
        let _: i64 = self.redis().del(counter.as_str()).await?;
        let order = order.lock();
        let changes = order.windows(2).filter(|pair| pair[0] != pair[1]).count();
        let changed_share = 100.0 * changes as f64 / order.len().saturating_sub(1).max(1) as f64;
        let longest_wait = *longest_wait.lock();

        Ok(vec![
            Figure::new(
                workload,
                "acquisitions/s",
                total as f64 / wall.as_secs_f64(),
                Unit::PerSecond,
            )
            .floor(SERIAL_FLOOR, floor.rate())
            .goal(Goal::RatioAtLeast(goal)),
            Figure::new(workload, "longest wait", millis(longest_wait), Unit::Millis)
                .goal(Goal::AtMost(50.0)),
            Figure::new(workload, "owner changes", changed_share, Unit::Percent)
                .goal(Goal::AtLeast(90.0)),
            Figure::new(
                workload,
                "final counter",
                final_count.unwrap_or(0) as f64,
                Unit::Count,
            )
            .goal(Goal::Exactly(total as f64)),
        ])
    }

    /// W4 (the mutex) and W4f (the fair lock): two workers on two clients hand one
    /// lock back and forth.
    pub(super) async fn handoff(&self, kind: Exclusive) -> BenchResult<Vec<Figure>> {
        /// Blocks of each kind, alternating.
        const BLOCKS: u64 = 4;
        let (workload, goal) = match kind {
            Exclusive::Mutex => (Workload::W4, 1.0),
            Exclusive::Fair => (Workload::W4f, 0.7),
        };
        let name = self.name(&workload.label().to_lowercase());
        let per_block = self.settings.handoffs.div_ceil(BLOCKS);
        let (mut floor, mut samples) = (Samples::default(), Samples::default());
        for block in 0..BLOCKS {
            (self.progress)(workload, block * per_block, BLOCKS * per_block);
            floor.extend(self.bare_handoff(per_block).await?);
            samples.extend(self.lock_handoffs(kind, &name, per_block).await?);
        }

        const FLOOR: &str = "bare lock + PUBLISH";
        Ok(vec![
            Figure::new(
                workload,
                "hand-off p50",
                samples.percentile(50.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(50.0))
            .goal(Goal::RatioAtMost(goal)),
            Figure::new(
                workload,
                "hand-off p90",
                samples.percentile(90.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(90.0)),
        ])
    }

    /// `handoffs` hand-offs of the lock `name` of `kind` between two workers on two
    /// clients.
    async fn lock_handoffs(
        &self,
        kind: Exclusive,
        name: &str,
        handoffs: u64,
    ) -> BenchResult<Samples> {
        let name = Arc::new(name.to_owned());
        // The number of acquisitions so far; a worker waits for the other's before asking again.
        let (acquired, _) = watch::channel(0u64);
        let acquired = Arc::new(acquired);
        let release_started = Arc::new(Mutex::new(None::<Instant>));
        let samples = Arc::new(Mutex::new(Samples::with_capacity(handoffs)));
        let handles: Vec<_> = (0..2u64)
            .map(|worker| {
                let client = self.clients[worker as usize].clone();
                let name = Arc::clone(&name);
                let (acquired, release_started) =
                    (Arc::clone(&acquired), Arc::clone(&release_started));
                let samples = Arc::clone(&samples);
                tokio::spawn(async move {
                    let mut seen = acquired.subscribe();
                    loop {
                        // Worker 0 takes acquisitions 0, 2, 4…; worker 1 the odd ones.
                        let turn = *seen.borrow_and_update();
                        if turn > handoffs {
                            return Ok::<_, BenchError>(());
                        }
                        if turn % 2 != worker {
                            seen.changed().await?;
                            continue;
                        }
                        // The other worker holds the lock (or is about to release it).
                        let guard = kind.take(&client, &name).await?;
                        if let Some(started) = release_started.lock().take() {
                            samples.lock().push(started.elapsed());
                        }
                        acquired.send_modify(|count| *count += 1);
                        // Hold 1–10 ms while the other worker is already waiting.
                        tokio::time::sleep(Duration::from_millis(1 + turn * 7 % 10)).await;
                        *release_started.lock() = Some(Instant::now());
                        guard.unlock().await?;
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.await??;
        }
        let samples = std::mem::take(&mut *samples.lock());
        Ok(samples)
    }
}

impl Bench {
    /// The serial ceiling of W3, W3f and W8: `count` (at most 2,000) of their critical
    /// sections done back to back by one task with the bare lock, which is as fast as
    /// any lock needing these round trips can go. `stem` names its keys.
    pub(super) async fn serial_floor(
        &self,
        stem: &str,
        count: u64,
        section: Section,
    ) -> BenchResult<Samples> {
        let bare = Arc::new(self.bare().await?);
        let (redis, key) = (self.redis().clone(), self.key(stem));
        let counter = self.key(&format!("{stem}:floor-counter"));
        let floor_counter = counter.clone();
        let floor = spawn(async move {
            time_each(count.min(2_000), |_| {
                let (bare, redis, key, counter) = (&bare, &redis, &key, &floor_counter);
                async move {
                    if !bare.take(key).await? {
                        return Err("bare lock: key left over".into());
                    }
                    match section {
                        Section::ReadModifyWrite => increment(redis, counter).await?,
                        Section::Hold(work) => tokio::time::sleep(work).await,
                    }
                    bare.release(key).await
                }
            })
            .await
        })
        .await?;
        let _: i64 = self.redis().del(counter).await?;
        Ok(floor)
    }

    /// The floor of a notified hand-off, made of bare commands: the holder deletes the
    /// key and publishes in one script, a raw subscriber on another connection hears
    /// it and takes the key with `SET NX`. Same pauses as W4, so the same idle costs.
    async fn bare_handoff(&self, handoffs: u64) -> BenchResult<Samples> {
        let redis = self.redis().clone();
        let key = self.key("w4:bare");
        let channel = format!("{key}:released");
        let subscriber = subscribed(&redis, &channel).await?;
        let release = Script::from_lua(RELEASE_AND_PUBLISH);
        release.load(&redis).await?;
        let holder = BareLock::new(redis.clone()).await?;
        let taker = BareLock::new(redis.clone()).await?;
        let mut messages = subscriber.message_rx();
        let mut samples = Samples::with_capacity(handoffs);
        for turn in 0..handoffs {
            if !holder.take(&key).await? {
                return Err("bare hand-off: key left over".into());
            }
            let waiter = async {
                messages.recv().await?;
                if !taker.take(&key).await? {
                    return Err::<_, BenchError>(
                        "bare hand-off: not free after the release".into(),
                    );
                }
                Ok(Instant::now())
            };
            let holding = async {
                tokio::time::sleep(Duration::from_millis(1 + turn * 7 % 10)).await;
                let started = Instant::now();
                let _: i64 = release
                    .evalsha(
                        &redis,
                        key.as_str(),
                        vec![holder.token.as_str(), channel.as_str()],
                    )
                    .await?;
                Ok::<_, BenchError>(started)
            };
            let (taken, started) = tokio::try_join!(waiter, holding)?;
            samples.push(taken - started);
            taker.release(&key).await?;
        }
        let _ = subscriber.quit().await;
        Ok(samples)
    }
}

/// The floor of W3, W3f (and, five times over, W8).
pub(super) const SERIAL_FLOOR: &str = "bare lock, one task";

/// What a critical section of a serial floor does while it holds the bare lock.
#[derive(Debug, Clone, Copy)]
pub(super) enum Section {
    /// W3's read-modify-write of a counter: GET, then SET one more.
    ReadModifyWrite,
    /// W8's: nothing but wait this long.
    Hold(Duration),
}

/// The critical section's read-modify-write: GET, then SET one more.
async fn increment(redis: &Client, counter: &str) -> BenchResult<()> {
    let value: Option<u64> = redis.get(counter).await?;
    let _: () = redis
        .set(counter, value.unwrap_or(0) + 1, None, None, false)
        .await?;
    Ok(())
}

/// Runs `future` as a task of its own (so that it has its own lock owner).
async fn spawn<T: Send + 'static>(
    future: impl Future<Output = BenchResult<T>> + Send + 'static,
) -> BenchResult<T> {
    tokio::spawn(future).await?
}
