//! The benchmark workloads W1–W4, shared by `holdlock bench` and `benches/lock.rs`.
//!
//! Each workload runs next to its floor on the same fred client in the same run: a
//! *bare lock* made of plain commands (`SET key token NX PX` to take, one `EVALSHA`
//! of a compare-and-delete script to release), or one `EVALSHA` of a script that only
//! returns. A figure is reported with its floor and the ratio between them, so that
//! runs on different machines compare. W1 and W1r also time holdlock's own scripts
//! sent alone, which splits a figure into the data model's cost and the library's.
//!
//! - **W1 uncontended**: one task, `cycles` lock+unlock cycles on one name.
//! - **W1r reentrant**: the cost of a nested `lock()` of a lock the task holds.
//! - **W2 burst**: `burst` concurrent one-shot `try_lock`s on one name; the winner keeps
//!   it until all have answered.
//! - **W3 contended**: `workers` tasks over two clients, each doing `sections` critical
//!   sections {lock; GET counter; SET counter+1; unlock} and then `work` outside.
//! - **W4 hand-off**: two workers on two clients ping-pong one lock; the time from the
//!   start of a release to the waiter's `lock()` returning.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::clients::{Client, SubscriberClient};
use fred::interfaces::{ClientLike, EventInterface, KeysInterface, PubsubInterface};
use fred::types::scripts::Script;
use fred::types::{Expiration, SetOptions};
use holdlock::LockClient;
use parking_lot::Mutex;
use tokio::sync::watch;

/// Errors of a benchmark run: Redis, the lock, or a broken invariant.
pub(crate) type BenchError = Box<dyn Error + Send + Sync>;
type BenchResult<T> = Result<T, BenchError>;

/// Releases the bare lock: delete the key only if it still holds our token.
const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
/// The bare hand-off's release: compare-and-delete, then tell the waiters.
const RELEASE_AND_PUBLISH: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     redis.call('del', KEYS[1]) redis.call('publish', ARGV[2], 'released') return 1 end return 0";
/// The round-trip floor: a script that does nothing.
const TRIVIAL: &str = "return 1";
/// The bare lock's expiry; long enough never to matter during a run.
const BARE_LEASE_MS: u64 = 30_000;

/// One of the workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    /// Uncontended lock+unlock cycles.
    W1,
    /// A nested acquisition of a held lock.
    W1r,
    /// A burst of concurrent `try_lock`s.
    W2,
    /// Many workers contending for one lock.
    W3,
    /// Hand-off latency between two waiting workers.
    W4,
    /// Many locks held at once: memory and renewals (`cargo bench` only, as it reads
    /// the process's own memory).
    #[allow(dead_code)] // constructed by benches/lock.rs, which shares this file
    W5,
}

impl Workload {
    /// Every workload `Bench::run` can run, in order.
    pub(crate) const ALL: [Workload; 5] = [Self::W1, Self::W1r, Self::W2, Self::W3, Self::W4];

    /// The short name used on the command line and in tables.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::W1 => "W1",
            Self::W1r => "W1r",
            Self::W2 => "W2",
            Self::W3 => "W3",
            Self::W4 => "W4",
            Self::W5 => "W5",
        }
    }

    /// Parses `w1`, `W1r`, …
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|workload| workload.label().eq_ignore_ascii_case(text.trim()))
    }
}

/// How big each workload is.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// W1: lock+unlock cycles.
    pub(crate) cycles: u64,
    /// W1r: nested acquisitions.
    pub(crate) nested: u64,
    /// W2: concurrent `try_lock`s.
    pub(crate) burst: usize,
    /// W3: workers (split over two clients).
    pub(crate) workers: usize,
    /// W3: critical sections per worker.
    pub(crate) sections: u64,
    /// W3: work outside the lock after each section.
    pub(crate) work: Duration,
    /// W4: hand-offs.
    pub(crate) handoffs: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            cycles: 20_000,
            nested: 5_000,
            burst: 1_000,
            workers: 32,
            sections: 200,
            work: Duration::from_millis(1),
            handoffs: 200,
        }
    }
}

impl Settings {
    /// A tenth of the default sizes, for a quick look.
    pub(crate) fn quick() -> Self {
        let full = Self::default();
        Self {
            cycles: full.cycles / 10,
            nested: full.nested / 10,
            burst: full.burst,
            workers: full.workers,
            sections: full.sections / 10,
            work: full.work,
            handoffs: full.handoffs / 4,
        }
    }
}

/// What a figure must reach to meet its target.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Goal {
    /// The ratio to the floor is at least this.
    RatioAtLeast(f64),
    /// The ratio to the floor is at most this.
    RatioAtMost(f64),
    /// The value is at least this.
    AtLeast(f64),
    /// The value is at most this.
    AtMost(f64),
    /// The value is exactly this (a correctness check).
    Exactly(f64),
}

impl Goal {
    fn met(self, value: f64, ratio: Option<f64>) -> bool {
        match self {
            Self::RatioAtLeast(bound) => ratio.is_some_and(|ratio| ratio >= bound),
            Self::RatioAtMost(bound) => ratio.is_some_and(|ratio| ratio <= bound),
            Self::AtLeast(bound) => value >= bound,
            Self::AtMost(bound) => value <= bound,
            Self::Exactly(bound) => value == bound,
        }
    }

    fn describe(self, unit: Unit) -> String {
        match self {
            Self::RatioAtLeast(bound) => format!("ratio >= {bound}"),
            Self::RatioAtMost(bound) => format!("ratio <= {bound}"),
            Self::AtLeast(bound) => format!(">= {}", unit.format(bound)),
            Self::AtMost(bound) => format!("<= {}", unit.format(bound)),
            Self::Exactly(bound) => format!("= {}", unit.format(bound)),
        }
    }
}

/// How a figure's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Operations per second.
    PerSecond,
    /// A duration, stored in milliseconds.
    Millis,
    /// A share, stored as a percentage.
    Percent,
    /// A plain count.
    Count,
    /// Memory.
    #[allow(dead_code)] // constructed by benches/lock.rs, which shares this file
    Bytes,
}

impl Unit {
    fn format(self, value: f64) -> String {
        match self {
            Self::PerSecond => format!("{value:.0}/s"),
            Self::Millis if value < 1.0 => format!("{:.0} µs", value * 1_000.0),
            Self::Millis => format!("{value:.2} ms"),
            Self::Percent => format!("{value:.1}%"),
            Self::Count => format!("{value:.0}"),
            Self::Bytes => format!("{value:.0} B"),
        }
    }

    fn json_name(self) -> &'static str {
        match self {
            Self::PerSecond => "per_second",
            Self::Millis => "ms",
            Self::Percent => "percent",
            Self::Count => "count",
            Self::Bytes => "bytes",
        }
    }
}

/// One measured figure, next to its floor.
#[derive(Debug, Clone)]
pub(crate) struct Figure {
    /// Which workload measured it.
    pub(crate) workload: Workload,
    /// What was measured, e.g. `cycles/s`.
    pub(crate) metric: &'static str,
    /// holdlock's figure.
    pub(crate) value: f64,
    /// How the value is written.
    pub(crate) unit: Unit,
    /// What the floor is, and its figure for the same metric.
    pub(crate) floor: Option<(&'static str, f64)>,
    /// The target, if the issue sets one.
    pub(crate) goal: Option<Goal>,
}

impl Figure {
    pub(crate) fn new(workload: Workload, metric: &'static str, value: f64, unit: Unit) -> Self {
        Self {
            workload,
            metric,
            value,
            unit,
            floor: None,
            goal: None,
        }
    }

    pub(crate) fn floor(mut self, name: &'static str, value: f64) -> Self {
        self.floor = Some((name, value));
        self
    }

    pub(crate) fn goal(mut self, goal: Goal) -> Self {
        self.goal = Some(goal);
        self
    }

    /// holdlock's figure divided by the floor's.
    pub(crate) fn ratio(&self) -> Option<f64> {
        self.floor
            .map(|(_, floor)| self.value / floor)
            .filter(|ratio| ratio.is_finite())
    }

    /// Whether the target is met (`None` if there is none).
    pub(crate) fn met(&self) -> Option<bool> {
        self.goal.map(|goal| goal.met(self.value, self.ratio()))
    }
}

/// The figures as a plain-text table.
pub(crate) fn table(figures: &[Figure]) -> String {
    let mut rows = vec![
        [
            "WORKLOAD", "METRIC", "HOLDLOCK", "FLOOR", "FLOOR IS", "RATIO", "TARGET", "MET",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for figure in figures {
        let (floor_name, floor_value) = figure
            .floor
            .map_or(("-".to_owned(), "-".to_owned()), |(name, value)| {
                (name.to_owned(), figure.unit.format(value))
            });
        rows.push(vec![
            figure.workload.label().to_owned(),
            figure.metric.to_owned(),
            figure.unit.format(figure.value),
            floor_value,
            floor_name,
            figure
                .ratio()
                .map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}x")),
            figure
                .goal
                .map_or_else(|| "-".to_owned(), |goal| goal.describe(figure.unit)),
            match figure.met() {
                None => "-",
                Some(true) => "yes",
                Some(false) => "NO",
            }
            .to_owned(),
        ]);
    }
    crate::table::render_columns(&rows)
}

/// The figures as JSON, one object per figure.
pub(crate) fn json(figures: &[Figure]) -> serde_json::Value {
    figures
        .iter()
        .map(|figure| {
            serde_json::json!({
                "workload": figure.workload.label(),
                "metric": figure.metric,
                "value": figure.value,
                "unit": figure.unit.json_name(),
                "floor": figure.floor.map(|(_, value)| value),
                "floor_is": figure.floor.map(|(name, _)| name),
                "ratio": figure.ratio(),
                "target": figure.goal.map(|goal| goal.describe(figure.unit)),
                "met": figure.met(),
            })
        })
        .collect()
}

/// Called now and then during a long workload: (workload, done, total).
pub(crate) type Progress = Arc<dyn Fn(Workload, u64, u64) + Send + Sync>;

/// Runs workloads on two lock clients of one deployment.
pub(crate) struct Bench {
    clients: [LockClient; 2],
    settings: Settings,
    progress: Progress,
    /// Makes every name of this run unique, so that runs never collide.
    stem: String,
}

impl Bench {
    /// Workloads on `clients` (two clients of the same Redis, like two processes).
    pub(crate) fn new(clients: [LockClient; 2], settings: Settings, progress: Progress) -> Self {
        let stem = format!("bench:{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        Self {
            clients,
            settings,
            progress,
            stem,
        }
    }

    /// Runs `workloads` in order and returns their figures.
    ///
    /// Must run inside a multi-threaded tokio runtime: workers are spawned tasks.
    pub(crate) async fn run(&self, workloads: &[Workload]) -> BenchResult<Vec<Figure>> {
        let mut figures = Vec::new();
        for &workload in workloads {
            figures.extend(match workload {
                Workload::W1 => self.uncontended().await?,
                Workload::W1r => self.reentrant().await?,
                Workload::W2 => self.burst().await?,
                Workload::W3 => self.contended().await?,
                Workload::W4 => self.handoff().await?,
                Workload::W5 => return Err("W5 runs only in `cargo bench --bench lock`".into()),
            });
        }
        Ok(figures)
    }

    fn name(&self, what: &str) -> String {
        format!("{}:{what}", self.stem)
    }

    /// A raw key in the same hash slot as the lock `name` (for the floors and counters).
    fn key(&self, what: &str) -> String {
        format!("{}:{{{}}}", self.stem, self.name(what))
    }

    fn redis(&self) -> &Client {
        self.clients[0].redis()
    }

    async fn bare(&self) -> BenchResult<BareLock> {
        BareLock::new(self.redis().clone()).await
    }

    /// W1: lock+unlock cycles in one task, next to the bare lock's and to holdlock's
    /// two scripts sent alone.
    async fn uncontended(&self) -> BenchResult<Vec<Figure>> {
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
                .goal(Goal::RatioAtLeast(0.9)),
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
                .floor(SCRIPTS_ALONE, scripts.rate()),
        ])
    }

    /// W1r: a nested `lock()` of a held lock, next to one `EVALSHA` round trip and to
    /// `reenter.lua` sent alone.
    async fn reentrant(&self) -> BenchResult<Vec<Figure>> {
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
            .goal(Goal::RatioAtMost(1.2)),
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
    async fn burst(&self) -> BenchResult<Vec<Figure>> {
        /// Bursts of each kind, alternating; the medians are reported.
        const ROUNDS: usize = 5;
        let burst = self.settings.burst;
        let bare = Arc::new(self.bare().await?);
        let key = Arc::new(self.key("w2"));
        let client = self.clients[0].clone();
        let name = Arc::new(self.name("w2"));
        let (mut floor_walls, mut walls, mut winner_counts) = (Vec::new(), Vec::new(), Vec::new());
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
                tokio::spawn(async move { client.try_lock(&name).await })
            });
            let mut winners = Vec::new();
            for guard in futures::future::join_all(tries).await {
                winners.extend(guard??);
            }
            walls.push(started.elapsed());
            winner_counts.push(winners.len());
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
            .goal(Goal::RatioAtMost(2.0)),
            Figure::new(
                Workload::W2,
                "most winners in a burst",
                most_winners as f64,
                Unit::Count,
            )
            .goal(Goal::Exactly(1.0)),
        ])
    }

    /// W3: workers on two clients contending for one lock around a read-modify-write.
    async fn contended(&self) -> BenchResult<Vec<Figure>> {
        let Settings {
            workers,
            sections,
            work,
            ..
        } = self.settings.clone();
        let counter = self.key("w3:counter");
        let total = workers as u64 * sections;

        // The floor: the same critical sections done back to back by one task with the
        // bare lock, which is as fast as any lock needing these round trips can go.
        let bare = Arc::new(self.bare().await?);
        let (redis, key) = (self.redis().clone(), self.key("w3"));
        let floor_counter = self.key("w3:floor-counter");
        let floor = spawn(async move {
            time_each(total.min(2_000), |_| {
                let (bare, redis, key, counter) = (&bare, &redis, &key, &floor_counter);
                async move {
                    if !bare.take(key).await? {
                        return Err("bare lock: key left over".into());
                    }
                    increment(redis, counter).await?;
                    bare.release(key).await
                }
            })
            .await
        })
        .await?;
        let _: i64 = self.redis().del(self.key("w3:floor-counter")).await?;

        let _: i64 = self.redis().del(counter.as_str()).await?;
        let order = Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
        let longest_wait = Arc::new(Mutex::new(Duration::ZERO));
        let done = Arc::new(AtomicU64::new(0));
        let name = Arc::new(self.name("w3"));
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
                        let guard = client.lock(&name).await?;
                        longest = longest.max(asked.elapsed());
                        order.lock().push(worker);
                        increment(client.redis(), &counter).await?;
                        guard.unlock().await?;
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished % 500 == 0 {
                            progress(Workload::W3, finished, total);
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
                Workload::W3,
                "acquisitions/s",
                total as f64 / wall.as_secs_f64(),
                Unit::PerSecond,
            )
            .floor("bare lock, one task", floor.rate())
            .goal(Goal::AtLeast(3_000.0)),
            Figure::new(
                Workload::W3,
                "longest wait",
                millis(longest_wait),
                Unit::Millis,
            )
            .goal(Goal::AtMost(50.0)),
            Figure::new(Workload::W3, "owner changes", changed_share, Unit::Percent)
                .goal(Goal::AtLeast(90.0)),
            Figure::new(
                Workload::W3,
                "final counter",
                final_count.unwrap_or(0) as f64,
                Unit::Count,
            )
            .goal(Goal::Exactly(total as f64)),
        ])
    }

    /// W4: two workers on two clients hand one lock back and forth.
    async fn handoff(&self) -> BenchResult<Vec<Figure>> {
        /// Blocks of each kind, alternating.
        const BLOCKS: u64 = 4;
        let per_block = self.settings.handoffs.div_ceil(BLOCKS);
        let (mut floor, mut samples) = (Samples::default(), Samples::default());
        for block in 0..BLOCKS {
            (self.progress)(Workload::W4, block * per_block, BLOCKS * per_block);
            floor.extend(self.bare_handoff(per_block).await?);
            samples.extend(self.lock_handoffs(per_block).await?);
        }

        const FLOOR: &str = "bare lock + PUBLISH";
        Ok(vec![
            Figure::new(
                Workload::W4,
                "hand-off p50",
                samples.percentile(50.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(50.0))
            .goal(Goal::AtMost(0.25)),
            Figure::new(
                Workload::W4,
                "hand-off p90",
                samples.percentile(90.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(90.0)),
        ])
    }

    /// `handoffs` hand-offs between two workers on two clients.
    async fn lock_handoffs(&self, handoffs: u64) -> BenchResult<Samples> {
        let name = Arc::new(self.name("w4"));
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
                        let guard = client.lock(&name).await?;
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
    /// The floor of a notified hand-off, made of bare commands: the holder deletes the
    /// key and publishes in one script, a raw subscriber on another connection hears
    /// it and takes the key with `SET NX`. Same pauses as W4, so the same idle costs.
    async fn bare_handoff(&self, handoffs: u64) -> BenchResult<Samples> {
        let redis = self.redis().clone();
        let subscriber = SubscriberClient::new(
            redis.client_config(),
            Some(redis.perf_config()),
            Some(redis.connection_config().clone()),
            None,
        );
        subscriber.init().await?;
        let key = self.key("w4:bare");
        let channel = format!("{key}:released");
        subscriber.subscribe(channel.as_str()).await?;
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

/// holdlock's own scripts sent by fred with nothing around them (no hold registry,
/// guard or watchdog): what the data model costs by itself, so that a figure splits
/// into what Redis spends on the scripts and what the library adds.
struct ScriptsAlone {
    redis: Client,
    acquire: Script,
    reenter: Script,
    release: Script,
    owner: String,
    lease: String,
}

/// The floor name of figures measured against [`ScriptsAlone`].
const SCRIPTS_ALONE: &str = "its scripts alone";

impl ScriptsAlone {
    async fn new(redis: Client) -> BenchResult<Self> {
        let scripts = Self {
            acquire: Script::from_lua(include_str!("../../../lua/acquire.lua")),
            reenter: Script::from_lua(include_str!("../../../lua/reenter.lua")),
            release: Script::from_lua(include_str!("../../../lua/release.lua")),
            owner: format!("{}:scripts-alone", uuid::Uuid::new_v4()),
            lease: BARE_LEASE_MS.to_string(),
            redis,
        };
        for script in [&scripts.acquire, &scripts.reenter, &scripts.release] {
            script.load(&scripts.redis).await?;
        }
        Ok(scripts)
    }

    /// `acquire.lua` with the default 30 s lease, unfenced.
    async fn acquire(&self, key: &str) -> BenchResult<()> {
        let reply: Vec<i64> = self
            .acquire
            .evalsha(
                &self.redis,
                key,
                vec![self.owner.as_str(), self.lease.as_str()],
            )
            .await?;
        match reply.first() {
            Some(1) => Ok(()),
            _ => Err(format!("scripts alone: acquire refused ({reply:?})").into()),
        }
    }

    /// `reenter.lua` as under a watchdog (no lease argument).
    async fn reenter(&self, key: &str) -> BenchResult<()> {
        let count: i64 = self
            .reenter
            .evalsha(&self.redis, key, vec![self.owner.as_str()])
            .await?;
        match count {
            2.. => Ok(()),
            _ => Err(format!("scripts alone: re-entry counted {count}").into()),
        }
    }

    /// `release.lua` for an owner holding the lock `held` times.
    async fn release(&self, key: &str, held: i64) -> BenchResult<()> {
        let hint = held.min(2).to_string();
        let remaining: i64 = self
            .release
            .evalsha(
                &self.redis,
                key,
                vec![self.owner.as_str(), "publish", hint.as_str()],
            )
            .await?;
        if remaining == held - 1 {
            Ok(())
        } else {
            Err(format!("scripts alone: release left {remaining} of {held}").into())
        }
    }
}

/// The tutorial lock: `SET NX PX` to take, compare-and-delete to release.
struct BareLock {
    redis: Client,
    release: Script,
    token: String,
}

impl BareLock {
    async fn new(redis: Client) -> BenchResult<Self> {
        let release = Script::from_lua(COMPARE_AND_DELETE);
        release.load(&redis).await?;
        Ok(Self {
            redis,
            release,
            token: uuid::Uuid::new_v4().to_string(),
        })
    }

    async fn take(&self, key: &str) -> BenchResult<bool> {
        let set: Option<String> = self
            .redis
            .set(
                key,
                self.token.as_str(),
                Some(Expiration::PX(BARE_LEASE_MS as i64)),
                Some(SetOptions::NX),
                false,
            )
            .await?;
        Ok(set.is_some())
    }

    async fn release(&self, key: &str) -> BenchResult<()> {
        let deleted: i64 = self
            .release
            .evalsha(&self.redis, key, self.token.as_str())
            .await?;
        if deleted == 1 {
            Ok(())
        } else {
            Err("bare lock: released a key we did not hold".into())
        }
    }
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

/// Samples of the floor, of holdlock's scripts alone and of holdlock, in that order.
type ThreeWays = (Samples, Samples, Samples);

/// Runs `count` timed operations of each kind in alternating chunks, so that the
/// floor, holdlock's scripts alone and holdlock see the same machine (a busy
/// neighbour, a cold cache).
async fn alternate<P, F, FFut, S, SFut, L, LFut>(
    count: u64,
    progress: P,
    mut floor: F,
    mut scripts: S,
    mut lock: L,
) -> BenchResult<ThreeWays>
where
    P: Fn(u64),
    F: FnMut() -> FFut,
    FFut: Future<Output = BenchResult<Duration>>,
    S: FnMut() -> SFut,
    SFut: Future<Output = BenchResult<Duration>>,
    L: FnMut() -> LFut,
    LFut: Future<Output = BenchResult<Duration>>,
{
    const CHUNK: u64 = 250;
    let mut samples: ThreeWays = (
        Samples::with_capacity(count),
        Samples::with_capacity(count),
        Samples::with_capacity(count),
    );
    let mut done = 0;
    while done < count {
        progress(done);
        let chunk = CHUNK.min(count - done);
        for _ in 0..chunk {
            samples.0.push(floor().await?);
        }
        for _ in 0..chunk {
            samples.1.push(scripts().await?);
        }
        for _ in 0..chunk {
            samples.2.push(lock().await?);
        }
        done += chunk;
    }
    Ok(samples)
}

/// Runs `op` `count` times in a row and times each run.
async fn time_each<F, Fut>(count: u64, mut op: F) -> BenchResult<Samples>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = BenchResult<()>>,
{
    let mut samples = Samples::with_capacity(count);
    for done in 0..count {
        let started = Instant::now();
        op(done).await?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

/// Durations of repeated operations.
#[derive(Debug, Default)]
struct Samples {
    durations: Vec<Duration>,
}

impl Samples {
    fn with_capacity(capacity: u64) -> Self {
        Self {
            durations: Vec::with_capacity(capacity as usize),
        }
    }

    fn push(&mut self, duration: Duration) {
        self.durations.push(duration);
    }

    fn extend(&mut self, other: Samples) {
        self.durations.extend(other.durations);
    }

    fn total(&self) -> Duration {
        self.durations.iter().sum()
    }

    /// Operations per second, back to back.
    fn rate(&self) -> f64 {
        self.durations.len() as f64 / self.total().as_secs_f64()
    }

    /// The mean, in milliseconds.
    fn mean(&self) -> f64 {
        millis(self.total()) / self.durations.len().max(1) as f64
    }

    /// The `p`th percentile (nearest rank), in milliseconds.
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.durations.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        millis(sorted[rank.clamp(1, sorted.len()) - 1])
    }
}
