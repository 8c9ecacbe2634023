//! The benchmark workloads W1–W9 (and W1s, W3f, W4f), shared by `holdlock bench` (all but
//! W5, with the `cli` feature) and `benches/lock.rs` (all of them). Compiled only with the `bench`
//! feature and hidden from the documentation: this is tooling, not part of the API.
//! It uses only holdlock's public API, as another crate would.
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
//! - **W2 burst**: `burst` concurrent one-shot `try_now`s on one name (a try unanswered
//!   within its budget counted apart); the winner keeps
//!   it until all have answered.
//! - **W3 contended**: `workers` tasks over two clients, each doing `sections` critical
//!   sections {lock; GET counter; SET counter+1; unlock} and then `work` outside.
//! - **W3f contended, fair**: W3 with the fair lock.
//! - **W4 hand-off**: two workers on two clients ping-pong one lock; the time from the
//!   start of a release to the waiter's `lock()` returning.
//! - **W4f hand-off, fair**: W4 with the fair lock.
//! - **W4p hand-off between processes** (by name only, `holdlock bench`, which starts
//!   the second process): W4 with each worker in a process of its own, next to the
//!   bare hand-off between the same two; and the Redis commands a hand-off costs each
//!   (`peer.rs`).
//! - **W5 many locks held** (`benches/lock.rs` only, as it reads the process's own
//!   memory): built there from [`Figure`]s.
//! - **W6 transfers**: `workers` tasks over two clients, each making transfers between
//!   two random accounts of 1,000 under `lock_all`, next to the same transfers under
//!   two ordered `lock()` calls.
//! - **W7 read-mostly**: `workers` tasks, 95% reads and 5% writes of one name with
//!   `work` inside, under the read-write lock next to the same under the mutex; then
//!   the same accesses on tokio's in-process `RwLock` and `Mutex`, the ceiling the mix
//!   itself sets when locking costs nothing.
//! - **W1s sides**: W1 for each side of the read-write lock, next to the mutex's W1.
//! - **W8 semaphore**: `workers` tasks over two clients on one semaphore of 5 permits,
//!   each taking a permit `sections` times and holding it for `work`.
//! - **W9 many clients** (by name only, not in [`Workload::ALL`]): 200 clients × 5
//!   tasks on one lock (on the bench's runtime, then on one `current_thread` runtime)
//!   and 500 × 2, the mutex and the fair lock; scripts per acquisition.
//! - **W11 many accounts** (by name only): `account_tasks` tasks (256) of one client,
//!   then of two, then 1, 16 and 1,024 tasks of one client, each cycling
//!   `lock(<random of accounts>)` / `unlock` over `accounts` names (100,000) for
//!   `account_time`, next to the same loop on the bare
//!   lock: cycles/s, Redis and client CPU per cycle, p50/p99 (`accounts.rs`).
//! - **W10 many locks held** (by name only): `held` locks taken by 16 tasks of one
//!   client, watched for `watch`: memory per held lock, renewal scripts per renewal
//!   due, CPU, the smallest sampled PTTL, locks lost, and how soon dropping every
//!   guard frees every key (`held.rs`).
//!
//! Files: `workloads.rs` runs W1–W4 (and W3f, W4f), `family.rs` W6, W7 and W1s,
//! `fair.rs` W8, `peer.rs` W4p, `crowd.rs` W9, `held.rs` W10, `accounts.rs` W11, `exclusive.rs` the lock kinds of W3/W3f, W4/W4f
//! and W9, `floors.rs` holds the
//! bare lock and holdlock's scripts sent alone, `samples.rs` the timing helpers,
//! `report.rs` the figures and their table and JSON.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fred::clients::Client;

use crate::LockClient;
use exclusive::Exclusive;
use floors::BareLock;

mod accounts;
mod crowd;
mod exclusive;
mod fair;
mod family;
mod floors;
mod held;
mod peer;
mod proxy;
mod report;
mod samples;
mod server;
mod workloads;

pub use peer::{PeerCommand, serve_peer};
pub use proxy::{DelayProxy, ping_cost};
pub use report::{Figure, Goal, Unit, json, table};

/// Errors of a benchmark run: Redis, the lock, or a broken invariant.
pub type BenchError = Box<dyn Error + Send + Sync>;
type BenchResult<T> = Result<T, BenchError>;

/// One of the workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Uncontended lock+unlock cycles.
    W1,
    /// A nested acquisition of a held lock.
    W1r,
    /// A burst of concurrent `try_lock`s.
    W2,
    /// Many workers contending for one lock.
    W3,
    /// W3 with the fair lock.
    W3f,
    /// Hand-off latency between two waiting workers.
    W4,
    /// W4 with the fair lock.
    W4f,
    /// W4 with its two workers in two processes (`holdlock bench` only, which starts
    /// the second).
    W4p,
    /// Many locks held at once: memory and renewals (`cargo bench` only, as it reads
    /// the process's own memory).
    W5,
    /// Transfers between two of 1,000 accounts under `lock_all`.
    W6,
    /// Read-mostly access under the read-write lock, next to the mutex.
    W7,
    /// Each side of the read-write lock uncontended, next to the mutex's W1.
    W1s,
    /// Many workers sharing the permits of one semaphore.
    W8,
    /// 200 clients on one lock: scripts per acquisition, the mutex and the fair lock.
    W9,
    /// Many locks held by one client under the watchdog: memory, renewal scripts, CPU,
    /// lateness, and how soon dropping them all frees them.
    W10,
    /// Many tasks of one client cycling through many independent locks (a
    /// per-account service), next to the bare lock: throughput and CPU per cycle.
    W11,
    /// The network-distance mode's own cost: a `PING` through the delay proxy.
    Net,
}

impl Workload {
    /// The workloads `Bench::run` runs by default, in order. W9 (200 clients) runs
    /// only when named.
    pub const ALL: [Workload; 11] = [
        Self::W1,
        Self::W1r,
        Self::W1s,
        Self::W2,
        Self::W3,
        Self::W3f,
        Self::W4,
        Self::W4f,
        Self::W6,
        Self::W7,
        Self::W8,
    ];

    /// Every workload, in the order of their names.
    ///
    /// ```
    /// use holdlock::bench::Workload;
    /// assert!(Workload::EVERY.contains(&Workload::W11));
    /// ```
    pub const EVERY: [Workload; 17] = [
        Self::W1,
        Self::W1r,
        Self::W1s,
        Self::W2,
        Self::W3,
        Self::W3f,
        Self::W4,
        Self::W4f,
        Self::W4p,
        Self::W5,
        Self::W6,
        Self::W7,
        Self::W8,
        Self::W9,
        Self::W10,
        Self::W11,
        Self::Net,
    ];

    /// The short name used on the command line and in tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::W1 => "W1",
            Self::W1r => "W1r",
            Self::W2 => "W2",
            Self::W3 => "W3",
            Self::W3f => "W3f",
            Self::W4 => "W4",
            Self::W4f => "W4f",
            Self::W4p => "W4p",
            Self::W5 => "W5",
            Self::W6 => "W6",
            Self::W7 => "W7",
            Self::W1s => "W1s",
            Self::W8 => "W8",
            Self::W9 => "W9",
            Self::W10 => "W10",
            Self::W11 => "W11",
            Self::Net => "net",
        }
    }

    /// Parses any label: `w1`, `W1r`, `W9`, …
    pub fn parse(text: &str) -> Option<Self> {
        Self::EVERY
            .into_iter()
            .find(|workload| workload.label().eq_ignore_ascii_case(text.trim()))
    }
}

/// How big each workload is.
#[derive(Debug, Clone)]
pub struct Settings {
    /// W1: lock+unlock cycles.
    pub cycles: u64,
    /// W1r: nested acquisitions.
    pub nested: u64,
    /// W2: concurrent `try_lock`s.
    pub burst: usize,
    /// W3, W3f, W6, W7, W8: workers (split over two clients).
    pub workers: usize,
    /// W3, W3f, W6, W7, W8: critical sections per worker.
    pub sections: u64,
    /// W3, W3f, W9: work outside the lock after each section; W7, W8: inside.
    pub work: Duration,
    /// W4, W4f, W4p: hand-offs.
    pub handoffs: u64,
    /// W10: locks held at once.
    pub held: usize,
    /// W10: how long the held locks are watched.
    pub watch: Duration,
    /// W11: tasks.
    pub account_tasks: usize,
    /// W11: names the tasks pick from.
    pub accounts: u64,
    /// W11: how long each loop runs.
    pub account_time: Duration,
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
            held: 1_000_000,
            watch: Duration::from_secs(60),
            account_tasks: 256,
            accounts: 100_000,
            account_time: Duration::from_secs(5),
        }
    }
}

impl Settings {
    /// A tenth of the default sizes, for a quick look.
    pub fn quick() -> Self {
        let full = Self::default();
        Self {
            cycles: full.cycles / 10,
            nested: full.nested / 10,
            burst: full.burst,
            workers: full.workers,
            sections: full.sections / 10,
            work: full.work,
            handoffs: full.handoffs / 4,
            held: full.held / 10,
            watch: full.watch / 3,
            account_tasks: full.account_tasks,
            accounts: full.accounts,
            account_time: full.account_time / 5,
        }
    }
}

/// Called now and then during a long workload: (workload, done, total).
pub type Progress = Arc<dyn Fn(Workload, u64, u64) + Send + Sync>;

/// Runs workloads on two lock clients of one deployment.
pub struct Bench {
    clients: [LockClient; 2],
    settings: Settings,
    progress: Progress,
    /// Starts W4p's second process.
    peer: Option<PeerCommand>,
    /// Makes every name of this run unique, so that runs never collide.
    stem: String,
}

impl Bench {
    /// Workloads on `clients` (two clients of the same Redis, like two processes).
    pub fn new(clients: [LockClient; 2], settings: Settings, progress: Progress) -> Self {
        let stem = format!("bench:{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        Self {
            clients,
            settings,
            progress,
            peer: None,
            stem,
        }
    }

    /// Runs W4p's second process with `command`, which runs [`serve_peer`] on a client
    /// of the same deployment (without it, W4p fails).
    ///
    /// ```no_run
    /// # async fn run(clients: [holdlock::LockClient; 2]) {
    /// use std::sync::Arc;
    /// use holdlock::bench::{Bench, Settings, Workload};
    ///
    /// let peer = Arc::new(|| {
    ///     let mut command = std::process::Command::new("holdlock");
    ///     command.args(["bench", "--peer"]);
    ///     command
    /// });
    /// let bench = Bench::new(clients, Settings::quick(), Arc::new(|_, _, _| {})).with_peer(peer);
    /// let figures = bench.run(&[Workload::W4p]).await;
    /// # }
    /// ```
    pub fn with_peer(mut self, command: PeerCommand) -> Self {
        self.peer = Some(command);
        self
    }

    /// Runs `workloads` in order and returns their figures.
    ///
    /// Must run inside a multi-threaded tokio runtime: workers are spawned tasks.
    pub async fn run(&self, workloads: &[Workload]) -> BenchResult<Vec<Figure>> {
        let mut figures = Vec::new();
        for &workload in workloads {
            figures.extend(match workload {
                Workload::W1 => self.uncontended().await?,
                Workload::W1r => self.reentrant().await?,
                Workload::W2 => self.burst().await?,
                Workload::W3 => self.contended(Exclusive::Mutex).await?,
                Workload::W3f => self.contended(Exclusive::Fair).await?,
                Workload::W4 => self.handoff(Exclusive::Mutex).await?,
                Workload::W4f => self.handoff(Exclusive::Fair).await?,
                Workload::W4p => self.handoff_between_processes().await?,
                Workload::W5 => return Err("W5 runs only in benches/lock.rs".into()),
                Workload::W6 => self.transfers().await?,
                Workload::W7 => self.read_mostly().await?,
                Workload::W1s => self.uncontended_sides().await?,
                Workload::W8 => self.semaphore().await?,
                Workload::W9 => self.crowd().await?,
                Workload::W10 => self.many_held().await?,
                Workload::W11 => self.accounts().await?,
                Workload::Net => return Err("`net` is measured with the delay proxy".into()),
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
}

/// Runs `work` on a `current_thread` runtime in a thread of its own (as a
/// single-threaded service would); `workload` names it in an error.
pub(super) async fn on_own_runtime<W, F, T>(workload: &str, work: W) -> BenchResult<T>
where
    W: FnOnce() -> F + Send + 'static,
    F: Future<Output = BenchResult<T>>,
    T: Send + 'static,
{
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let measured = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(work()),
            Err(error) => Err(error.into()),
        };
        let _ = done.send(measured);
    });
    result
        .await
        .map_err(|_| BenchError::from(format!("{workload}: its thread failed")))?
}

impl fmt::Debug for Bench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bench")
            .field("settings", &self.settings)
            .field("stem", &self.stem)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::Workload;

    #[test]
    fn every_label_parses_back() {
        for workload in Workload::EVERY {
            assert_eq!(Workload::parse(workload.label()), Some(workload));
        }
        assert_eq!(Workload::parse(" w3F "), Some(Workload::W3f));
        assert!(Workload::ALL.iter().all(|w| Workload::EVERY.contains(w)));
        assert_eq!(Workload::parse("W10"), Some(Workload::W10));
        assert_eq!(Workload::parse("W11"), Some(Workload::W11));
        assert_eq!(Workload::parse("W12"), None);
    }
}
