//! Workloads of the fair lock and the semaphore: the kind of exclusive lock W3 and W4
//! take (W3f and W4f are the same with the fair lock), W8 (a semaphore of 5 permits
//! under contention) and W9 (200 clients on one lock, the mutex and the fair lock).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::InfoKind;
use futures::StreamExt;

use super::workloads::Section;
use super::{Bench, BenchError, BenchResult, Figure, Goal, Settings, Unit, Workload};
use crate::{LockClient, LockGuard};

/// W8: the semaphore's permits.
const PERMITS: u32 = 5;
/// W9: clients, tasks per client and acquisitions per task.
const CROWD_CLIENTS: usize = 200;
const CROWD_TASKS: usize = 5;
const CROWD_ROUNDS: u64 = 4;
/// W9: the fair lock's target, in scripts per acquisition (its release included).
const FAIR_SCRIPTS_TARGET: f64 = 3.0;
/// How long a worker may take before the workload is deemed stuck.
const STUCK: Duration = Duration::from_secs(300);

/// The exclusive lock a workload takes: W3 and W4 take the mutex, W3f and W4f the
/// fair lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exclusive {
    /// `lock()`.
    Mutex,
    /// `fair_lock()`.
    Fair,
}

impl Exclusive {
    /// Takes the lock `name` of this kind, waiting as long as it takes.
    pub(super) async fn take(self, client: &LockClient, name: &str) -> crate::Result<LockGuard> {
        match self {
            Self::Mutex => client.lock(name).await,
            Self::Fair => client.fair_lock(name).await,
        }
    }
}

impl Bench {
    /// W8: `workers` tasks over two clients each take a permit of one semaphore of 5
    /// `sections` times and hold it for `work` (1 ms). The floor is five times the
    /// serial ceiling of the same sections (take the bare lock, wait `work`, release)
    /// measured in this run: five bare locks kept busy back to back. The workers
    /// count the permits held at once (up after `acquire`, down before `release`, so
    /// never more than Redis grants); more than 5 fails the workload.
    pub(super) async fn semaphore(&self) -> BenchResult<Vec<Figure>> {
        let Settings {
            workers,
            sections,
            work,
            ..
        } = self.settings.clone();
        let total = workers as u64 * sections;
        let floor = self.serial_floor("w8", total, Section::Hold(work)).await?;
        let name = self.name("w8");
        let held = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let semaphore = self.clients[worker % 2].semaphore(name.clone(), PERMITS);
                let (held, most) = (Arc::clone(&held), Arc::clone(&most));
                let (done, progress) = (Arc::clone(&done), Arc::clone(&self.progress));
                tokio::spawn(async move {
                    for _ in 0..sections {
                        let permit = semaphore.acquire().await?;
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        if now > PERMITS {
                            return Err(
                                format!("W8: {now} of {PERMITS} permits held at once").into()
                            );
                        }
                        tokio::time::sleep(work).await;
                        held.fetch_sub(1, Ordering::SeqCst);
                        permit.release().await?;
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished % 500 == 0 {
                            progress(Workload::W8, finished, total);
                        }
                    }
                    Ok::<_, BenchError>(())
                })
            })
            .collect();
        for handle in handles {
            tokio::time::timeout(STUCK, handle)
                .await
                .map_err(|_| "W8: a worker is stuck")???;
        }
        let rate = total as f64 / started.elapsed().as_secs_f64();
        Ok(vec![
            Figure::new(Workload::W8, "acquisitions/s", rate, Unit::PerSecond)
                .floor("5 x bare lock, one task", f64::from(PERMITS) * floor.rate())
                .goal(Goal::RatioAtLeast(0.8)),
            Figure::new(
                Workload::W8,
                "most permits held at once",
                f64::from(most.load(Ordering::SeqCst)),
                Unit::Count,
            )
            .goal(Goal::AtMost(f64::from(PERMITS))),
        ])
    }
}

impl Bench {
    /// W9: 200 clients of the deployment, 5 tasks each, every task taking one lock 4
    /// times (lock; unlock; `work` outside): with the mutex, then with the fair lock.
    /// The figures are the scripts Redis ran per acquisition, the release's included
    /// (so 2 at the least; the fair lock's target is at most 3, next to the mutex's),
    /// and acquisitions per second. Scripts are counted server-wide from `INFO
    /// commandstats`: run it on an otherwise idle single server. The clients are built
    /// from the first client's fred configuration (the same servers, credentials, TLS
    /// and delay proxy) with the default prefix, and shut down at the end.
    pub(super) async fn crowd(&self) -> BenchResult<Vec<Figure>> {
        let config = self.redis().client_config();
        let built: Vec<_> = futures::stream::iter(0..CROWD_CLIENTS)
            .map(|_| LockClient::builder_from_config(config.clone()).build())
            .buffer_unordered(16)
            .collect()
            .await;
        let mut clients = Vec::with_capacity(CROWD_CLIENTS);
        let mut failed = None;
        for client in built {
            match client {
                Ok(client) => clients.push(client),
                Err(error) => failed = Some(error),
            }
        }
        let measured = match failed {
            Some(error) => Err(format!("W9: connecting a client failed: {error}").into()),
            None => self.crowd_on(&clients).await,
        };
        futures::future::join_all(clients.iter().map(LockClient::shutdown)).await;
        measured
    }

    /// W9's two phases on `clients`.
    async fn crowd_on(&self, clients: &[LockClient]) -> BenchResult<Vec<Figure>> {
        let (mutex_scripts, mutex_rate) = self.crowd_phase(clients, Exclusive::Mutex).await?;
        let (fair_scripts, fair_rate) = self.crowd_phase(clients, Exclusive::Fair).await?;
        const MUTEX: &str = "the mutex";
        Ok(vec![
            Figure::new(
                Workload::W9,
                "mutex scripts/acquisition",
                mutex_scripts,
                Unit::PerOp,
            ),
            Figure::new(
                Workload::W9,
                "fair scripts/acquisition",
                fair_scripts,
                Unit::PerOp,
            )
            .floor(MUTEX, mutex_scripts)
            .goal(Goal::AtMost(FAIR_SCRIPTS_TARGET)),
            Figure::new(
                Workload::W9,
                "mutex acquisitions/s",
                mutex_rate,
                Unit::PerSecond,
            ),
            Figure::new(
                Workload::W9,
                "fair acquisitions/s",
                fair_rate,
                Unit::PerSecond,
            )
            .floor(MUTEX, mutex_rate),
        ])
    }

    /// Every task of every client takes the lock of `kind` `CROWD_ROUNDS` times; returns
    /// the scripts run per acquisition and the acquisitions per second.
    async fn crowd_phase(
        &self,
        clients: &[LockClient],
        kind: Exclusive,
    ) -> BenchResult<(f64, f64)> {
        let name = Arc::new(self.name("w9"));
        let work = self.settings.work;
        let acquisitions = (clients.len() * CROWD_TASKS) as u64 * CROWD_ROUNDS;
        let offset = match kind {
            Exclusive::Mutex => 0,
            Exclusive::Fair => acquisitions,
        };
        let done = Arc::new(AtomicU64::new(0));
        let scripts_before = script_calls(self.redis()).await?;
        let started = Instant::now();
        let handles: Vec<_> = clients
            .iter()
            .flat_map(|client| std::iter::repeat_n(client, CROWD_TASKS))
            .map(|client| {
                let (client, name) = (client.clone(), Arc::clone(&name));
                let (done, progress) = (Arc::clone(&done), Arc::clone(&self.progress));
                tokio::spawn(async move {
                    for _ in 0..CROWD_ROUNDS {
                        kind.take(&client, &name).await?.unlock().await?;
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished % 500 == 0 {
                            progress(Workload::W9, offset + finished, 2 * acquisitions);
                        }
                        tokio::time::sleep(work).await;
                    }
                    Ok::<_, BenchError>(())
                })
            })
            .collect();
        for handle in handles {
            tokio::time::timeout(STUCK, handle)
                .await
                .map_err(|_| "W9: a task is stuck")???;
        }
        let rate = acquisitions as f64 / started.elapsed().as_secs_f64();
        let scripts = script_calls(self.redis()).await? - scripts_before;
        Ok((scripts as f64 / acquisitions as f64, rate))
    }
}

/// The scripts the server has run so far (see [`count_scripts`]).
pub(super) async fn script_calls(redis: &Client) -> BenchResult<u64> {
    let stats: String = redis.info(Some(InfoKind::CommandStats)).await?;
    Ok(count_scripts(&stats))
}

/// The calls of `EVAL`, `EVALSHA` and `FCALL` (and their read-only forms) in the text
/// of `INFO commandstats`.
fn count_scripts(stats: &str) -> u64 {
    const SCRIPTS: [&str; 6] = [
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ];
    stats
        .lines()
        .filter_map(|line| {
            let (command, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            if !SCRIPTS.contains(&command) {
                return None;
            }
            let calls = fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="));
            calls?.parse::<u64>().ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_calls_are_read_from_commandstats() {
        let stats = "# Commandstats\r\n\
            cmdstat_get:calls=7,usec=3,usec_per_call=0.43,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=2\r\n\
            cmdstat_eval:calls=3,usec=40,usec_per_call=13.33,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_fcall:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha_ro:calls=1,usec=1,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_script|load:calls=9,usec=99,usec_per_call=11.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(super::count_scripts(stats), 129);
        assert_eq!(super::count_scripts(""), 0);
    }
}
