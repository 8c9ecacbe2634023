//! Timing: samples of durations, and runs that alternate the floor with holdlock.

use std::time::{Duration, Instant};

use super::BenchResult;

/// Samples of the floor, of holdlock's scripts alone and of holdlock, in that order.
type ThreeWays = (Samples, Samples, Samples);

/// Runs `count` timed operations of each kind in alternating chunks, so that the
/// floor, holdlock's scripts alone and holdlock see the same machine (a busy
/// neighbour, a cold cache).
pub(super) async fn alternate<P, F, FFut, S, SFut, L, LFut>(
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
pub(super) async fn time_each<F, Fut>(count: u64, mut op: F) -> BenchResult<Samples>
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

pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

/// Durations of repeated operations.
#[derive(Debug, Default)]
pub(super) struct Samples {
    durations: Vec<Duration>,
}

impl Samples {
    pub(super) fn with_capacity(capacity: u64) -> Self {
        Self {
            durations: Vec::with_capacity(capacity as usize),
        }
    }

    pub(super) fn push(&mut self, duration: Duration) {
        self.durations.push(duration);
    }

    pub(super) fn extend(&mut self, other: Samples) {
        self.durations.extend(other.durations);
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Duration> {
        self.durations.iter()
    }

    pub(super) fn len(&self) -> usize {
        self.durations.len()
    }

    fn total(&self) -> Duration {
        self.durations.iter().sum()
    }

    /// Operations per second, back to back.
    pub(super) fn rate(&self) -> f64 {
        self.durations.len() as f64 / self.total().as_secs_f64()
    }

    /// The mean, in milliseconds.
    pub(super) fn mean(&self) -> f64 {
        millis(self.total()) / self.durations.len().max(1) as f64
    }

    /// The `p`th percentile (nearest rank), in milliseconds.
    pub(super) fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.durations.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        millis(sorted[rank.clamp(1, sorted.len()) - 1])
    }
}

/// The CPU time the process has used, user and system (`/proc/self/stat`, in the
/// kernel's 100 ticks a second), if it can be read.
pub(super) fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (in parentheses, which may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// A small xorshift generator: which accounts a benchmark task visits (not a secret).
pub(super) struct Random(u64);

impl Random {
    /// Seeded with `seed`, which must not be 0.
    pub(super) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `bound` (at least 1).
    pub(super) fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}
