//! A worker process: tasks that take locks and do fenced read-modify-writes under them,
//! printing every step as a JSON line (see `history.rs`), until stdin closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use holdlock::fred::interfaces::KeysInterface;
use holdlock::fred::types::{Expiration, SetOptions};
use holdlock::{LockClient, LockError, LockGuard, fence};
use tokio::io::AsyncReadExt;

use crate::history::{Op, Outcome, Released, now_us};
use crate::{BoxError, Rng, register_key};

/// How a worker locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// holdlock, fenced, with its watchdog.
    Holdlock,
    /// A deliberately broken lock, the one tutorials teach: `SET NX PX` to take, a plain
    /// `DEL` to release (no owner check), no renewal, no lost signal, and an `INCR`
    /// counter for tokens. The checker must catch it.
    Naive,
}

impl LockKind {
    /// The name used on the command line: `holdlock` or `naive`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Holdlock => "holdlock",
            LockKind::Naive => "naive",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(name: &str) -> Option<Self> {
        [LockKind::Holdlock, LockKind::Naive]
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
}

/// Runs until stdin closes, then lets every task finish its round and exits.
pub async fn run(config: WorkerConfig) -> Result<(), BoxError> {
    let locks = LockClient::builder(&config.lock_url)
        .lease(config.lease)
        .fencing(true)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await?;
    let resource = LockClient::builder(&config.resource_url)
        .connect_timeout(Duration::from_secs(2))
        .build()
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
    Op::Ready { t: now_us() }.emit();
    let tasks: Vec<_> = (0..config.tasks)
        .map(|task| {
            let task_worker = TaskWorker {
                locks: locks.clone(),
                resource: resource.clone(),
                config: config.clone(),
                rng: Rng::new(config.seed ^ (u64::from(task) << 40)),
                next_attempt: u64::from(task) << 32,
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

struct TaskWorker {
    locks: LockClient,
    resource: LockClient,
    config: WorkerConfig,
    rng: Rng,
    next_attempt: u64,
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
            self.round().await;
            // Time outside the lock, so that others get a turn.
            let pause = self.rng.below(5);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// One attempt: take a lock, and if granted, work under it and release it.
    async fn round(&mut self) {
        let a = self.next_attempt;
        self.next_attempt += 1;
        let name = format!("chaos:{}", self.rng.below(u64::from(self.config.names)));
        let wait = Duration::from_millis(200 + self.rng.below(1_800));
        Op::Start {
            t: now_us(),
            a,
            name: name.clone(),
            wait_ms: wait.as_millis() as u64,
        }
        .emit();
        // The wait bounds the call; a call still running 5 s later is dropped (cancel
        // safety must then leave no hold behind) and recorded.
        let taking = self.take(&name, wait);
        let held = match tokio::time::timeout(wait + Duration::from_secs(5), taking).await {
            Err(_) => return Op::Cancelled { t: now_us(), a }.emit(),
            Ok(Ok(None)) => return Op::Busy { t: now_us(), a }.emit(),
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
            LockKind::Holdlock => Ok(self
                .locks
                .lock_timeout(name, wait)
                .await?
                .map(Held::Holdlock)),
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
                    let inner = self.locks.try_lock(name).await;
                    let count = match &inner {
                        Ok(Some(guard)) => guard.hold_count(),
                        _ => 0,
                    };
                    Op::Nested {
                        t: now_us(),
                        a,
                        count,
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

fn outcome(error: &LockError) -> Outcome {
    match error {
        LockError::StaleToken { .. } => Outcome::Stale,
        _ => Outcome::Unknown,
    }
}
