//! A worker process: tasks that take locks and do fenced read-modify-writes under them,
//! printing every step as a JSON line (see `history.rs`), until stdin closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use holdlock::fred::interfaces::KeysInterface;
use holdlock::fred::types::{Expiration, SetOptions};
use holdlock::{Compat, LockClient, LockClientBuilder, LockError, LockGuard, LockOptions, fence};
use tokio::io::AsyncReadExt;

use crate::history::{Op, Outcome, Probe, Released, STALL_RECORDED, now_us};
use crate::{BoxError, Rng, register_key};

/// How a worker locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// holdlock's mutex with its watchdog: half the rounds fenced (they draw a token
    /// and write the register), half not (they hold only; a client's unfenced
    /// acquisitions and releases go out in batches when several are due at once).
    Holdlock,
    /// `Holdlock` in Redisson's layout (`Compat::Redisson`): its own scripts, keys,
    /// channel and fencing counter under the same faults.
    Redisson,
    /// A deliberately broken lock, the one tutorials teach: `SET NX PX` to take, a plain
    /// `DEL` to release (no owner check), no renewal, no lost signal, and an `INCR`
    /// counter for tokens. The checker must catch it.
    Naive,
    /// holdlock's multi-lock: each round takes two names with one `lock_all` and
    /// increments both registers under it (a transfer whose total the registers keep).
    Multi,
    /// A deliberately broken multi-lock: it takes the first name, lets it go, then
    /// takes the second, and writes both registers as if it held both (not all or
    /// nothing). The checker must catch it.
    MultiBroken,
    /// holdlock's read-write lock: a quarter of the rounds take the write side, the
    /// rest the read side; readers may overlap each other, never a writer.
    ReadWrite,
    /// A deliberately broken read-write lock: writers take the read side. The checker
    /// must catch it.
    ReadWriteBroken,
    /// The read-write lock in Redisson's layout (`Compat::Redisson`: Redisson's
    /// `RReadWriteLock` keys, timeout keys, channel and messages), as `ReadWrite`.
    RedissonReadWrite,
    /// holdlock's fair lock, fenced, as `Holdlock` does with the mutex; the checker also
    /// holds it to first come, first served.
    Fair,
    /// The fair lock in Redisson's layout (`Compat::Redisson`: `RFairLock`'s queue,
    /// deadlines and per-waiter channels), unfenced (Redisson keeps no counter for
    /// it), held to first come, first served as `Fair`.
    RedissonFair,
    /// A deliberately unfair lock: the mutex, whose releases go to whichever attempt
    /// lands first, checked as a fair lock. The checker must catch it.
    FairBroken,
    /// holdlock's semaphore of [`PERMITS`] permits per name: up to that many holders
    /// at once, never more.
    Semaphore,
    /// A deliberately broken semaphore: one permit more than the checker is told. The
    /// checker must catch it.
    SemaphoreBroken,
    /// The semaphore in Redisson's layout (`Compat::Redisson`: the count of free
    /// permits at the name, the permits' deadlines in `{name}:timeout`, as Redisson's
    /// `RPermitExpirableSemaphore`), as `Semaphore`.
    RedissonSemaphore,
}

/// The `fairLockWaitTimeout` of the `redisson-fair` mode's clients (Rust and Java)
/// when every worker is a Rust one: short, so that the queue's stale heads are
/// dropped often.
pub const REDISSON_FAIR_WAIT: Duration = Duration::from_secs(2);

/// The same beside Java Redisson workers. Redisson's queue moves every waiter's
/// deadline one wait earlier at each grant and never later, so a waiter keeps its
/// place only if the holds ahead of it end within about one wait of its queueing;
/// its waiters cannot move theirs on as ours do. Holds here last up to 2.2 leases
/// (see `TaskWorker::hold_time`), and with 2 s Java waiters behind them were dropped
/// while they waited (docs/chaos.md, "Java workers").
pub const REDISSON_FAIR_WAIT_BESIDE_JAVA: Duration = Duration::from_secs(10);

/// The permits of each name's semaphore in the `sem` modes.
pub const PERMITS: u32 = 2;

impl LockKind {
    /// The name used on the command line: `holdlock` or `naive`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Holdlock => "holdlock",
            LockKind::Redisson => "redisson",
            LockKind::Naive => "naive",
            LockKind::Multi => "multi",
            LockKind::MultiBroken => "multi-broken",
            LockKind::ReadWrite => "rw",
            LockKind::ReadWriteBroken => "rw-broken",
            LockKind::RedissonReadWrite => "redisson-rw",
            LockKind::Fair => "fair",
            LockKind::RedissonFair => "redisson-fair",
            LockKind::FairBroken => "fair-broken",
            LockKind::Semaphore => "sem",
            LockKind::SemaphoreBroken => "sem-broken",
            LockKind::RedissonSemaphore => "redisson-sem",
        }
    }

    /// Whether it keeps Redisson's layout (`Compat::Redisson`), so that Java Redisson
    /// workers can take part (`--java-workers`) with `RFencedLock`, `RReadWriteLock`,
    /// `RFairLock` and `RPermitExpirableSemaphore`.
    pub fn in_redissons_layout(self) -> bool {
        matches!(
            self,
            LockKind::Redisson
                | LockKind::RedissonReadWrite
                | LockKind::RedissonFair
                | LockKind::RedissonSemaphore
        )
    }

    /// Whether the checker holds it to first come, first served.
    pub fn is_fair(self) -> bool {
        matches!(
            self,
            LockKind::Fair | LockKind::RedissonFair | LockKind::FairBroken
        )
    }

    /// Parses [`name`](Self::name).
    pub fn parse(name: &str) -> Option<Self> {
        [
            LockKind::Holdlock,
            LockKind::Redisson,
            LockKind::Naive,
            LockKind::Multi,
            LockKind::MultiBroken,
            LockKind::ReadWrite,
            LockKind::ReadWriteBroken,
            LockKind::RedissonReadWrite,
            LockKind::Fair,
            LockKind::RedissonFair,
            LockKind::FairBroken,
            LockKind::Semaphore,
            LockKind::SemaphoreBroken,
            LockKind::RedissonSemaphore,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

/// What one worker is told on its command line.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub lock_url: String,
    pub resource_url: String,
    pub names: u32,
    pub tasks: u32,
    pub lease: Duration,
    pub seed: u64,
    pub kind: LockKind,
    /// `None`: the library's default.
    pub deadlock_check: Option<Duration>,
    /// The `redisson-fair` mode's `fair_wait_timeout`.
    pub fair_wait: Duration,
    /// Locks and registers, or the bank's transfers in PostgreSQL (`bank.rs`).
    pub workload: crate::bank::Workload,
    /// The bank's PostgreSQL connection string.
    pub database: Option<String>,
    /// The bank's rounds in a hundred that hold a fixed lease and stall past it.
    pub overruns: u64,
}

/// Builds a client, again while a fault keeps Redis out of reach (a restart, a
/// partition, a topology change under way), for up to a minute: a service that starts
/// in the middle of one retries too.
async fn connect(builder: impl Fn() -> LockClientBuilder) -> Result<LockClient, BoxError> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match builder().build().await {
            Ok(client) => return Ok(client),
            Err(error) if error.is_redis() && tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Runs until stdin closes, then lets every task finish its round and exits.
pub async fn run(config: WorkerConfig) -> Result<(), BoxError> {
    let locks = connect(|| {
        let mut locks = LockClient::builder(&config.lock_url).lease(config.lease);
        if let Some(check) = config.deadlock_check {
            locks = locks.deadlock_check(check);
        }
        locks
            // Fair and mutex rounds ask for fencing per call: half of them do (see
            // `TaskWorker::run`).
            .fencing(!matches!(
                config.kind,
                LockKind::Holdlock | LockKind::Fair | LockKind::RedissonFair
            ))
            .compat(if config.kind.in_redissons_layout() {
                Compat::Redisson
            } else {
                Compat::Holdlock
            })
            .connect_timeout(Duration::from_secs(2))
            // Redisson's fair queue spaces its waiters by one wait each: in the
            // `redisson-fair` mode every call waits without a deadline of its own (it
            // is dropped at its cut-off instead), so all use this one.
            .fair_wait_timeout(config.fair_wait)
    })
    .await?;
    let resource = connect(|| {
        LockClient::builder(&config.resource_url).connect_timeout(Duration::from_secs(2))
    })
    .await?;
    let stop = Arc::new(AtomicBool::new(false));
    tokio::spawn({
        let stop = Arc::clone(&stop);
        async move {
            let mut sink = [0u8; 64];
            while matches!(tokio::io::stdin().read(&mut sink).await, Ok(n) if n > 0) {}
            stop.store(true, Ordering::Release);
        }
    });
    Op::Ready {
        t: now_us(),
        java: false,
    }
    .emit();
    watch_for_stalls(&stop);
    let tasks: Vec<_> = (0..config.tasks)
        .map(|task| {
            if config.workload.is_bank() {
                let bank = crate::bank::BankTask::new(locks.clone(), &config, task);
                return tokio::spawn(bank.run(Arc::clone(&stop)));
            }
            let task_worker = TaskWorker {
                locks: locks.clone(),
                resource: resource.clone(),
                config: config.clone(),
                rng: Rng::new(config.seed ^ (u64::from(task) << 40)),
                next_attempt: u64::from(task) << 32,
                rewait: None,
            };
            tokio::spawn(task_worker.run(Arc::clone(&stop)))
        })
        .collect();
    for task in tasks {
        task.await?;
    }
    locks.shutdown().await;
    resource.shutdown().await;
    Op::Done { t: now_us() }.emit();
    Ok(())
}

/// How often a hold's renewal margin is looked at (see [`record_renewals`]).
const RENEWAL_POLL: Duration = Duration::from_millis(10);

/// Records every renewal of hold `a` that is seen to land (an [`Op::Renewed`]),
/// looking at `margin` (the guard's `renewal_margin()`) every [`RENEWAL_POLL`]; never
/// returns. The checker reads from them how late the hold's lost deadline is at the
/// least (see `checker::Summary::overlaps_after_stall`).
async fn record_renewals(a: u64, margin: impl Fn() -> Option<Duration>) {
    // When the last look began: a margin that changed since was set after this.
    let mut since = now_us();
    let mut last = margin();
    loop {
        tokio::time::sleep(RENEWAL_POLL).await;
        let looked_at = now_us();
        let now = margin();
        if now != last {
            if let Some(margin) = now {
                Op::Renewed {
                    t: now_us(),
                    a,
                    after: since,
                    margin_ms: margin.as_millis() as u64,
                }
                .emit();
            }
            last = now;
        }
        since = looked_at;
    }
}

/// How long the stall probes sleep at a time.
const PROBE_TICK: Duration = Duration::from_millis(5);

/// Starts the worker's two stall probes, until `stop`: a thread of its own and a task
/// on the runtime, each sleeping [`PROBE_TICK`] at a time and recording (as an
/// [`Op::Stall`]) any sleep that ended [`STALL_RECORDED`] or more after it was due.
/// Where both stalled at once the process did not run (the machine stalled, or the
/// worker was not scheduled, or paused): its watchdog could neither renew a lease nor
/// tell its holder that the lease ran out, which the checker needs to know (see
/// `checker::Summary::overlaps_after_stall`). The thread alone may be left unscheduled
/// while the runtime runs, and the runtime alone may be blocked by what runs on it
/// (which is the library's business to avoid): neither is a stall of the process.
fn watch_for_stalls(stop: &Arc<AtomicBool>) {
    let tick = PROBE_TICK.as_micros() as u64;
    let late = move |asleep_at: u64, probe: Probe| {
        let due = asleep_at + tick;
        let now = now_us();
        if now >= due + STALL_RECORDED {
            Op::Stall {
                t: due,
                until: now,
                probe,
            }
            .emit();
        }
    };
    let thread_stop = Arc::clone(stop);
    let spawned = std::thread::Builder::new()
        .name("stall-probe".into())
        .spawn(move || {
            while !thread_stop.load(Ordering::Acquire) {
                let asleep_at = now_us();
                std::thread::sleep(PROBE_TICK);
                late(asleep_at, Probe::Thread);
            }
        });
    if let Err(error) = spawned {
        eprintln!("chaos worker: no stall probe thread: {error}");
    }
    let task_stop = Arc::clone(stop);
    tokio::spawn(async move {
        while !task_stop.load(Ordering::Acquire) {
            let asleep_at = now_us();
            tokio::time::sleep(PROBE_TICK).await;
            late(asleep_at, Probe::Runtime);
        }
    });
}

struct TaskWorker {
    locks: LockClient,
    resource: LockClient,
    config: WorkerConfig,
    rng: Rng,
    next_attempt: u64,
    /// A fair wait that ended without the lock (it gave up, or was cancelled): the
    /// next round waits again on its name at once, in the same task (see
    /// [`next_call`](Self::next_call)).
    rewait: Option<String>,
}

/// A hold, of either kind of lock.
enum Held {
    Holdlock(LockGuard),
    Naive { key: String, token: u64 },
}

impl Held {
    fn token(&self) -> u64 {
        match self {
            Held::Holdlock(guard) => guard.fencing_token().unwrap_or(0),
            Held::Naive { token, .. } => *token,
        }
    }
}

impl TaskWorker {
    async fn run(mut self, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::Acquire) {
            match self.config.kind {
                LockKind::Multi | LockKind::MultiBroken => self.round_of_two().await,
                LockKind::ReadWrite
                | LockKind::ReadWriteBroken
                | LockKind::RedissonReadWrite
                | LockKind::Semaphore
                | LockKind::SemaphoreBroken
                | LockKind::RedissonFair
                | LockKind::RedissonSemaphore => self.unfenced_round().await,
                // Fenced fair waits claim a hand-off with an attempt (which draws the
                // token); unfenced ones take it on the message alone. Unfenced mutex
                // acquisitions may go out in a batch; fenced ones always go alone.
                LockKind::Holdlock | LockKind::Fair if self.rng.below(2) == 0 => {
                    self.unfenced_round().await
                }
                LockKind::Holdlock
                | LockKind::Redisson
                | LockKind::Naive
                | LockKind::Fair
                | LockKind::FairBroken => self.round().await,
            }
            // Time outside the lock, so that others get a turn; none before a re-wait.
            if self.rewait.is_none() {
                let pause = self.rng.below(5);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }

    /// The name, the wait and the cut-off (after which the call is dropped) of the next
    /// call. A fair wait that ended without the lock is followed at once by another on
    /// the same name in the same task; one fair wait in four is short (it gives up
    /// while others hold the lock) and one in eight is cut off while it waits, so that
    /// abandoned waits and their immediate successors are always in the mix (a later
    /// wait must neither inherit nor lose the place of an earlier one; see issue 31).
    fn next_call(&mut self) -> (String, Duration, Duration) {
        let fair = self.config.kind.is_fair();
        let name = match self.rewait.take() {
            Some(name) => name,
            None => format!("chaos:{}", self.rng.below(u64::from(self.config.names))),
        };
        let wait = if fair && self.rng.below(4) == 0 {
            Duration::from_millis(20 + self.rng.below(230))
        } else {
            Duration::from_millis(200 + self.rng.below(1_800))
        };
        // Calls still running 5 s after their wait are dropped too (cancel safety must
        // then leave no hold behind).
        let cut = if fair && self.rng.below(8) == 0 {
            Duration::from_millis(1 + self.rng.below(wait.as_millis() as u64))
        } else {
            wait + Duration::from_secs(5)
        };
        (name, wait, cut)
    }

    /// Ends a call without the lock: a fair one is followed by a re-wait at once.
    fn ended_unserved(&mut self, name: &str, op: Op) {
        if self.config.kind.is_fair() {
            self.rewait = Some(name.to_owned());
        }
        op.emit();
    }

    /// One attempt: take a lock, and if granted, work under it and release it.
    async fn round(&mut self) {
        let a = self.next_attempt;
        self.next_attempt += 1;
        let (name, wait, cut) = self.next_call();
        Op::Start {
            t: now_us(),
            a,
            name: name.clone(),
            wait_ms: wait.as_millis() as u64,
            shared: false,
            permits: 0,
            fifo: self.config.kind.is_fair(),
        }
        .emit();
        // The wait bounds the call; a call still running at its cut-off is dropped
        // (cancel safety must then leave no hold behind) and recorded.
        let taking = self.take(&name, wait);
        let held = match tokio::time::timeout(cut, taking).await {
            Err(_) => return self.ended_unserved(&name, Op::Cancelled { t: now_us(), a }),
            Ok(Ok(None)) => return self.ended_unserved(&name, Op::Busy { t: now_us(), a }),
            Ok(Err(error)) => {
                Op::Error {
                    t: now_us(),
                    a,
                    error: error.to_string(),
                }
                .emit();
                return tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Ok(Some(held))) => held,
        };
        Op::Grant {
            t: now_us(),
            a,
            token: held.token(),
        }
        .emit();
        self.work(a, &name, &held).await;
        Op::Unlock { t: now_us(), a }.emit();
        let released = match held {
            Held::Holdlock(guard) => {
                match tokio::time::timeout(Duration::from_secs(5), guard.unlock()).await {
                    Ok(Ok(())) => Released::Ok,
                    Ok(Err(LockError::NotHeld { .. })) => Released::NotHeld,
                    _ => Released::Error,
                }
            }
            Held::Naive { key, .. } => match self.locks.redis().del::<i64, _>(key).await {
                Ok(1) => Released::Ok,
                Ok(_) => Released::NotHeld,
                Err(_) => Released::Error,
            },
        };
        Op::Unlocked {
            t: now_us(),
            a,
            released,
        }
        .emit();
    }

    async fn take(&mut self, name: &str, wait: Duration) -> Result<Option<Held>, BoxError> {
        match self.config.kind {
            LockKind::Redisson | LockKind::FairBroken => Ok(self
                .locks
                .lock(name)
                .timeout(wait)
                .await?
                .map(Held::Holdlock)),
            LockKind::Holdlock => {
                let options = holdlock::LockOptions::new().wait(wait).with_fencing();
                let guard = self.locks.lock(name).options(options).await?;
                Ok(guard.map(Held::Holdlock))
            }
            LockKind::Fair => {
                let options = holdlock::LockOptions::new().wait(wait).with_fencing();
                let guard = self.locks.fair_lock(name).options(options).await?;
                Ok(guard.map(Held::Holdlock))
            }
            LockKind::Multi
            | LockKind::MultiBroken
            | LockKind::ReadWrite
            | LockKind::ReadWriteBroken
            | LockKind::RedissonReadWrite
            | LockKind::Semaphore
            | LockKind::SemaphoreBroken
            | LockKind::RedissonFair
            | LockKind::RedissonSemaphore => Err(
                "this kind has a round of its own (see `round_of_two`, `unfenced_round`)".into(),
            ),
            LockKind::Naive => {
                let key = format!("naive:{{{name}}}");
                let deadline = tokio::time::Instant::now() + wait;
                let lease = Expiration::PX(self.config.lease.as_millis() as i64);
                loop {
                    let set: Option<String> = self
                        .locks
                        .redis()
                        .set(
                            &key,
                            "held",
                            Some(lease.clone()),
                            Some(SetOptions::NX),
                            false,
                        )
                        .await?;
                    if set.is_some() {
                        let token: u64 = self.locks.redis().incr(format!("{key}:token")).await?;
                        return Ok(Some(Held::Naive { key, token }));
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Ok(None);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// Under the lock: a fenced read of the register, a pause, sometimes a nested take,
    /// a fenced write of the value plus one, another pause. Stops early when the lost
    /// signal fires (holdlock only: the naive lock has none).
    async fn work(&mut self, a: u64, name: &str, held: &Held) {
        let register = register_key(name);
        let token = held.token();
        // Mostly short holds; some longer than the lease, so the watchdog must renew.
        let hold = match self.rng.below(100) {
            0..=84 => Duration::from_millis(self.rng.below(15)),
            85..=96 => Duration::from_millis(50 + self.rng.below(250)),
            _ => self.config.lease.mul_f64(1.2 + self.rng.unit()),
        };
        let nest = self.rng.below(100) < 20;
        let inner_first = self.rng.below(2) == 0;
        let writing = AtomicBool::new(false);
        let value = std::sync::atomic::AtomicU64::new(0);
        let steps = async {
            let read = fence::read(&self.resource, &register, token).await;
            let current = match read {
                Ok(current) => current.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0),
                Err(error) => {
                    return Op::Read {
                        t: now_us(),
                        a,
                        outcome: outcome(&error),
                    }
                    .emit();
                }
            };
            Op::Read {
                t: now_us(),
                a,
                outcome: Outcome::Ok,
            }
            .emit();
            tokio::time::sleep(hold / 2).await;
            let nested = match held {
                Held::Holdlock(_) if nest => {
                    // Same task, so the same owner: granted at once, one hold deeper.
                    let inner = if self.config.kind == LockKind::Fair {
                        self.locks.fair_lock(name).try_now().await
                    } else {
                        self.locks.lock(name).try_now().await
                    };
                    let count = match &inner {
                        Ok(Some(guard)) => guard.hold_count(),
                        _ => 0,
                    };
                    Op::Nested {
                        t: now_us(),
                        a,
                        count,
                        error: inner.as_ref().err().map(ToString::to_string),
                    }
                    .emit();
                    inner.ok().flatten()
                }
                _ => None,
            };
            value.store(current + 1, Ordering::Relaxed);
            writing.store(true, Ordering::Release);
            let written =
                fence::set(&self.resource, &register, (current + 1).to_string(), token).await;
            writing.store(false, Ordering::Release);
            Op::Write {
                t: now_us(),
                a,
                value: current + 1,
                outcome: written.as_ref().map_or_else(outcome, |()| Outcome::Ok),
            }
            .emit();
            // Nested holds are released in either order relative to the outer one's work.
            if let Some(inner) = nested {
                if inner_first {
                    let _ = inner.unlock().await;
                    tokio::time::sleep(hold / 2).await;
                } else {
                    tokio::time::sleep(hold / 2).await;
                    drop(inner);
                }
            } else {
                tokio::time::sleep(hold / 2).await;
            }
        };
        match held {
            Held::Holdlock(guard) => {
                tokio::select! {
                    () = steps => {}
                    () = record_renewals(a, || guard.renewal_margin()) => {}
                    () = guard.lost() => {
                        Op::Lost { t: now_us(), a }.emit();
                        if writing.load(Ordering::Acquire) {
                            Op::Write {
                                t: now_us(),
                                a,
                                value: value.load(Ordering::Relaxed),
                                outcome: Outcome::Unknown,
                            }
                            .emit();
                        }
                    }
                }
            }
            Held::Naive { .. } => steps.await,
        }
    }
}

impl TaskWorker {
    /// One multi-lock attempt: two different names taken together, both registers read
    /// and then incremented under them, both released. Each member is recorded as an
    /// attempt of its own (ids `a` and `a + 1`), so the checker holds every name to
    /// mutual exclusion and every register to no lost update.
    async fn round_of_two(&mut self) {
        let a = self.next_attempt;
        self.next_attempt += 2;
        let count = u64::from(self.config.names.max(2));
        let first = self.rng.below(count);
        let second = (first + 1 + self.rng.below(count - 1)) % count;
        let mut names = [format!("chaos:{first}"), format!("chaos:{second}")];
        // In lock order, the order `lock_all` gives the guards back in.
        names.sort();
        let members = [a, a + 1];
        let wait = Duration::from_millis(200 + self.rng.below(1_800));
        for (a, name) in members.iter().zip(&names) {
            Op::Start {
                t: now_us(),
                a: *a,
                name: name.clone(),
                wait_ms: wait.as_millis() as u64,
                shared: false,
                permits: 0,
                fifo: false,
            }
            .emit();
        }
        let each = |op: fn(u64) -> Op| members.iter().for_each(|&a| op(a).emit());
        let taking = self.take_two(&names, wait);
        let guards = match tokio::time::timeout(wait + Duration::from_secs(5), taking).await {
            Err(_) => return each(|a| Op::Cancelled { t: now_us(), a }),
            Ok(Ok(None)) => return each(|a| Op::Busy { t: now_us(), a }),
            Ok(Err(error)) => {
                for &a in &members {
                    let error = error.to_string();
                    Op::Error {
                        t: now_us(),
                        a,
                        error,
                    }
                    .emit();
                }
                return tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Ok(Some(guards))) => guards,
        };
        for (&a, member) in members.iter().zip(&guards) {
            Op::Grant {
                t: now_us(),
                a,
                token: member.token,
            }
            .emit();
        }
        let hold = Duration::from_millis(self.rng.below(15));
        let writing = [AtomicBool::new(false), AtomicBool::new(false)];
        let values = [
            std::sync::atomic::AtomicU64::new(0),
            std::sync::atomic::AtomicU64::new(0),
        ];
        let steps = async {
            let mut read = [0; 2];
            for (k, member) in guards.iter().enumerate() {
                let token = member.token;
                let register = register_key(&names[k]);
                match fence::read(&self.resource, &register, token).await {
                    Ok(current) => {
                        read[k] = current.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                        Op::Read {
                            t: now_us(),
                            a: members[k],
                            outcome: Outcome::Ok,
                        }
                        .emit();
                    }
                    Err(error) => {
                        let outcome = outcome(&error);
                        return Op::Read {
                            t: now_us(),
                            a: members[k],
                            outcome,
                        }
                        .emit();
                    }
                }
            }
            tokio::time::sleep(hold / 2).await;
            for (k, member) in guards.iter().enumerate() {
                let token = member.token;
                let register = register_key(&names[k]);
                let value = read[k] + 1;
                values[k].store(value, Ordering::Relaxed);
                writing[k].store(true, Ordering::Release);
                let written = fence::set(&self.resource, &register, value.to_string(), token).await;
                writing[k].store(false, Ordering::Release);
                let outcome = written.as_ref().map_or_else(outcome, |()| Outcome::Ok);
                Op::Write {
                    t: now_us(),
                    a: members[k],
                    value,
                    outcome,
                }
                .emit();
            }
            tokio::time::sleep(hold / 2).await;
        };
        let lost = async {
            let watches = guards.iter().flat_map(|member| &member.guard);
            let watches: Vec<_> = watches.map(|guard| Box::pin(guard.lost())).collect();
            if watches.is_empty() {
                return std::future::pending().await;
            }
            futures::future::select_all(watches).await;
        };
        tokio::select! {
            () = steps => {}
            () = lost => {
                for k in 0..2 {
                    Op::Lost { t: now_us(), a: members[k] }.emit();
                    if writing[k].load(Ordering::Acquire) {
                        let value = values[k].load(Ordering::Relaxed);
                        Op::Write { t: now_us(), a: members[k], value, outcome: Outcome::Unknown }.emit();
                    }
                }
            }
        }
        each(|a| Op::Unlock { t: now_us(), a });
        for (&a, member) in members.iter().zip(guards).rev() {
            let Some(guard) = member.guard else {
                // The broken lock let go long ago, and believes all is well.
                Op::Unlocked {
                    t: now_us(),
                    a,
                    released: Released::Ok,
                }
                .emit();
                continue;
            };
            let released = match tokio::time::timeout(Duration::from_secs(5), guard.unlock()).await
            {
                Ok(Ok(())) => Released::Ok,
                Ok(Err(LockError::NotHeld { .. })) => Released::NotHeld,
                _ => Released::Error,
            };
            Op::Unlocked {
                t: now_us(),
                a,
                released,
            }
            .emit();
        }
    }

    /// Takes both names, as the kind of lock does: one `lock_all`, or (broken) hand
    /// over hand, letting the first go once the second is held.
    async fn take_two(
        &self,
        names: &[String; 2],
        wait: Duration,
    ) -> Result<Option<Vec<Member>>, BoxError> {
        let options = holdlock::LockOptions::new().wait(wait);
        let member = |guard: LockGuard| Member {
            token: guard.fencing_token().unwrap_or(0),
            guard: Some(guard),
        };
        if self.config.kind == LockKind::Multi {
            let taken = self.locks.lock_all(names).options(options).await?;
            return Ok(taken.map(|all| all.into_guards().into_iter().map(member).collect()));
        }
        let Some(first) = self.locks.lock(&names[0]).options(options.clone()).await? else {
            return Ok(None);
        };
        let Some(second) = self.locks.lock(&names[1]).options(options).await? else {
            let _ = first.unlock().await;
            return Ok(None);
        };
        let token = first.fencing_token().unwrap_or(0);
        first.unlock().await?;
        Ok(Some(vec![Member { token, guard: None }, member(second)]))
    }
}

impl TaskWorker {
    /// One round of a kind that draws no fencing token: the read side (three rounds in
    /// four) or the write side of a read-write lock, one permit of a semaphore, or an
    /// unfenced fair lock or mutex; held for a while with the lost signal watched. No register
    /// is written, so only the holds (and a fair lock's order) are checked.
    async fn unfenced_round(&mut self) {
        let a = self.next_attempt;
        self.next_attempt += 1;
        let (name, wait, cut) = self.next_call();
        let kind = self.config.kind;
        // Redisson's fair queue is consistent only when every waiter gives the same
        // wait (a grant moves every deadline by the grantee's wait): the calls of the
        // `redisson-fair` mode wait without a deadline, and are dropped at theirs.
        let (wait, cut, options) = match kind {
            LockKind::RedissonFair => (cut.min(wait), cut.min(wait), LockOptions::new()),
            _ => (wait, cut, LockOptions::new().wait(wait)),
        };
        let semaphore = matches!(
            kind,
            LockKind::Semaphore | LockKind::SemaphoreBroken | LockKind::RedissonSemaphore
        );
        let fair = kind.is_fair();
        let exclusive = fair || kind == LockKind::Holdlock;
        let shared = !semaphore && !exclusive && self.rng.below(4) != 0;
        Op::Start {
            t: now_us(),
            a,
            name: name.clone(),
            wait_ms: wait.as_millis() as u64,
            shared,
            permits: if semaphore { PERMITS } else { 0 },
            fifo: fair,
        }
        .emit();
        let taking = async {
            match kind {
                LockKind::Fair | LockKind::RedissonFair => {
                    let guard = self.locks.fair_lock(&name).options(options).await?;
                    Ok(guard.map(Side::Exclusive))
                }
                LockKind::Holdlock => {
                    let guard = self.locks.lock(&name).options(options).await?;
                    Ok(guard.map(Side::Exclusive))
                }
                // The broken semaphore has one permit too many.
                LockKind::Semaphore | LockKind::SemaphoreBroken | LockKind::RedissonSemaphore => {
                    let permits = PERMITS + u32::from(kind == LockKind::SemaphoreBroken);
                    let semaphore = self.locks.semaphore(name.as_str(), permits);
                    Ok(semaphore
                        .acquire()
                        .options(options)
                        .await?
                        .map(Side::Permit))
                }
                // The broken read-write lock has writers take the read side too.
                _ if shared || kind == LockKind::ReadWriteBroken => {
                    let guard = self.locks.read_lock(&name).options(options).await?;
                    Ok::<_, LockError>(guard.map(Side::Read))
                }
                _ => {
                    let guard = self.locks.write_lock(&name).options(options).await?;
                    Ok(guard.map(Side::Write))
                }
            }
        };
        let side = match tokio::time::timeout(cut, taking).await {
            Err(_) => return self.ended_unserved(&name, Op::Cancelled { t: now_us(), a }),
            Ok(Ok(None)) => return self.ended_unserved(&name, Op::Busy { t: now_us(), a }),
            Ok(Err(error)) => {
                let error = error.to_string();
                Op::Error {
                    t: now_us(),
                    a,
                    error,
                }
                .emit();
                return tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Ok(Some(side))) => side,
        };
        Op::Grant {
            t: now_us(),
            a,
            token: 0,
        }
        .emit();
        let hold = match self.rng.below(100) {
            0..=89 => Duration::from_millis(self.rng.below(20)),
            _ => self.config.lease.mul_f64(1.2 + self.rng.unit()),
        };
        let lost = async {
            match &side {
                Side::Read(guard) => guard.lost().await,
                Side::Write(guard) => guard.lost().await,
                Side::Permit(permit) => permit.lost().await,
                Side::Exclusive(guard) => guard.lost().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(hold) => {}
            () = record_renewals(a, || side.renewal_margin()) => {}
            () = lost => Op::Lost { t: now_us(), a }.emit(),
        }
        Op::Unlock { t: now_us(), a }.emit();
        let unlocking = async {
            match side {
                Side::Read(guard) => guard.unlock().await,
                Side::Write(guard) => guard.unlock().await,
                Side::Permit(permit) => permit.release().await,
                Side::Exclusive(guard) => guard.unlock().await,
            }
        };
        let released = match tokio::time::timeout(Duration::from_secs(5), unlocking).await {
            Ok(Ok(())) => Released::Ok,
            Ok(Err(LockError::NotHeld { .. })) => Released::NotHeld,
            _ => Released::Error,
        };
        Op::Unlocked {
            t: now_us(),
            a,
            released,
        }
        .emit();
    }
}

/// A hold without fencing: one side of a read-write lock, a permit, or a fair lock or
/// mutex.
enum Side {
    Read(holdlock::ReadGuard),
    Write(holdlock::WriteGuard),
    Permit(holdlock::Permit),
    Exclusive(LockGuard),
}

impl Side {
    fn renewal_margin(&self) -> Option<Duration> {
        match self {
            Side::Read(guard) => guard.renewal_margin(),
            Side::Write(guard) => guard.renewal_margin(),
            Side::Permit(permit) => permit.renewal_margin(),
            Side::Exclusive(guard) => guard.renewal_margin(),
        }
    }
}

/// One name of a multi-lock round: its token, and its guard (none once the broken
/// multi-lock has let it go).
struct Member {
    token: u64,
    guard: Option<LockGuard>,
}

fn outcome(error: &LockError) -> Outcome {
    match error {
        LockError::StaleToken { .. } => Outcome::Stale,
        _ => Outcome::Unknown,
    }
}
