//! Workloads of the lock family beyond the mutex: W6 (transfers under `lock_all`), W7
//! (read-mostly under the read-write lock) and W1s (each side of the read-write lock
//! uncontended, next to the mutex's W1).

use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::interfaces::KeysInterface;

use super::samples::{Random, alternate};
use super::{Bench, BenchResult, Figure, Goal, Unit, Workload};
use crate::LockClient;

/// W6: how many accounts the transfers pick from.
const ACCOUNTS: u64 = 1_000;

/// How a W6 transfer takes its two accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Locking {
    /// One `lock_all`.
    All,
    /// Two `lock()` calls, the lower name first: the hand-written way.
    Ordered,
}

impl Bench {
    /// W6: `workers` tasks over two clients each make `sections` transfers between two
    /// random accounts of 1,000 (a GET and a SET of each inside), under `lock_all`, next
    /// to the same transfers under two ordered `lock()` calls. The two ways take turns
    /// in four phases, so that drift of the machine hits both alike. Every transfer
    /// moves money; the total must stay zero.
    pub(super) async fn transfers(&self) -> BenchResult<Vec<Figure>> {
        let (workers, sections) = (self.settings.workers, self.settings.sections);
        let per_phase = (sections / 2).max(1);
        let mut elapsed = [Duration::ZERO; 2];
        for phase in 0..4 {
            let locking = if phase % 2 == 0 {
                Locking::Ordered
            } else {
                Locking::All
            };
            let started = Instant::now();
            let handles: Vec<_> = (0..workers)
                .map(|worker| {
                    let client = self.clients[worker % 2].clone();
                    let stem = self.name("w6");
                    let seed = (phase * 1_000 + worker as u64) * 0x9E37_79B9 + 1;
                    tokio::spawn(transfer_loop(client, stem, seed, per_phase, locking))
                })
                .collect();
            for handle in handles {
                tokio::time::timeout(Duration::from_secs(120), handle)
                    .await
                    .map_err(|_| "W6: a transfer worker is stuck (deadlock?)")???;
            }
            elapsed[phase as usize % 2] += started.elapsed();
            (self.progress)(Workload::W6, phase + 1, 4);
        }
        let total = total_balance(self.redis(), &self.name("w6")).await?;
        if total != 0 {
            return Err(format!("W6: the transfers made or lost {total}").into());
        }
        let transfers = (workers as u64 * per_phase * 2) as f64;
        let [ordered, all] = elapsed.map(|wall| transfers / wall.as_secs_f64());
        Ok(vec![
            Figure::new(Workload::W6, "transfers/s", all, Unit::PerSecond)
                .floor("two ordered lock()", ordered)
                .goal(Goal::RatioAtLeast(0.8)),
        ])
    }
}

impl Bench {
    /// W7: `workers` tasks over two clients, each making `sections` accesses to one
    /// name, 95% reads and 5% writes, each holding for `work` (1 ms): once under the
    /// read-write lock and once under the mutex (every access exclusive), in
    /// alternating phases. The figure is reads per second; a second figure is the same
    /// accesses on tokio's in-process `RwLock` against its `Mutex`: what this mix
    /// allows when taking a lock costs nothing (see [`in_process`]).
    pub(super) async fn read_mostly(&self) -> BenchResult<Vec<Figure>> {
        let (workers, sections, work) = (
            self.settings.workers,
            self.settings.sections,
            self.settings.work,
        );
        let per_phase = (sections / 4).max(20);
        let mut elapsed = [Duration::ZERO; 2];
        let mut reads = [0u64; 2];
        for phase in 0..4u64 {
            let shared = phase % 2 == 1;
            let name = self.name("w7");
            let started = Instant::now();
            let handles: Vec<_> = (0..workers)
                .map(|worker| {
                    let client = self.clients[worker % 2].clone();
                    let name = name.clone();
                    tokio::spawn(async move {
                        let mut done_reads = 0u64;
                        for op in 0..per_phase {
                            let write = is_write(op, worker);
                            match (shared, write) {
                                (true, false) => {
                                    let guard = client.read_lock(&name).await?;
                                    tokio::time::sleep(work).await;
                                    guard.unlock().await?;
                                }
                                (true, true) => {
                                    let guard = client.write_lock(&name).await?;
                                    tokio::time::sleep(work).await;
                                    guard.unlock().await?;
                                }
                                (false, _) => {
                                    let guard = client.lock(&name).await?;
                                    tokio::time::sleep(work).await;
                                    guard.unlock().await?;
                                }
                            }
                            done_reads += u64::from(!write);
                        }
                        Ok::<_, crate::LockError>(done_reads)
                    })
                })
                .collect();
            for handle in handles {
                let done = tokio::time::timeout(Duration::from_secs(300), handle)
                    .await
                    .map_err(|_| "W7: a worker is stuck")???;
                reads[usize::from(shared)] += done;
            }
            elapsed[usize::from(shared)] += started.elapsed();
            (self.progress)(Workload::W7, phase + 1, 4);
        }
        let [exclusive, shared] = [0, 1].map(|i| reads[i] as f64 / elapsed[i].as_secs_f64());
        let [local_exclusive, local_shared] = in_process(workers, per_phase, work).await?;
        Ok(vec![
            Figure::new(Workload::W7, "reads/s", shared, Unit::PerSecond)
                .floor("the mutex", exclusive)
                .goal(Goal::RatioAtLeast(10.0)),
            Figure::new(
                Workload::W7,
                "reads/s, in-process RwLock",
                local_shared,
                Unit::PerSecond,
            )
            .floor("in-process Mutex", local_exclusive),
        ])
    }

    /// W1s: uncontended read_lock+unlock and write_lock+unlock cycles, next to the
    /// mutex's lock+unlock, alternating.
    pub(super) async fn uncontended_sides(&self) -> BenchResult<Vec<Figure>> {
        let cycles = self.settings.cycles;
        let client = self.clients[0].clone();
        let (mutex, read, write) = (
            self.name("w1s:mutex"),
            self.name("w1s:read"),
            self.name("w1s:write"),
        );
        let progress = std::sync::Arc::clone(&self.progress);
        let (floor, reads, writes) = tokio::spawn(async move {
            alternate(
                cycles,
                |done| progress(Workload::W1s, done, cycles),
                || async {
                    let started = Instant::now();
                    client.lock(&mutex).await?.unlock().await?;
                    Ok(started.elapsed())
                },
                || async {
                    let started = Instant::now();
                    client.read_lock(&read).await?.unlock().await?;
                    Ok(started.elapsed())
                },
                || async {
                    let started = Instant::now();
                    client.write_lock(&write).await?.unlock().await?;
                    Ok(started.elapsed())
                },
            )
            .await
        })
        .await??;
        const FLOOR: &str = "mutex W1";
        Ok(vec![
            Figure::new(
                Workload::W1s,
                "read cycles/s",
                reads.rate(),
                Unit::PerSecond,
            )
            .floor(FLOOR, floor.rate())
            .goal(Goal::RatioAtLeast(0.97)),
            Figure::new(
                Workload::W1s,
                "write cycles/s",
                writes.rate(),
                Unit::PerSecond,
            )
            .floor(FLOOR, floor.rate())
            .goal(Goal::RatioAtLeast(0.97)),
        ])
    }
}

/// W7's mix: one access in twenty is a write, each worker's writes at its own turns.
fn is_write(op: u64, worker: usize) -> bool {
    (op + worker as u64) % 20 == 0
}

/// W7's accesses on tokio's in-process locks, `RwLock` (fair, so a waiting writer
/// keeps new readers out, as holdlock's writer preference does) and `Mutex`: reads per
/// second under each, `[mutex, rwlock]`, in alternating phases as W7's. Taking and
/// giving back cost nothing here, so the ratio is the ceiling that the mix itself (one
/// write in twenty excludes everyone, and waits for the readers inside) sets on W7's.
async fn in_process(workers: usize, per_phase: u64, work: Duration) -> BenchResult<[f64; 2]> {
    let mut elapsed = [Duration::ZERO; 2];
    let mut reads = [0u64; 2];
    for phase in 0..4u64 {
        let shared = phase % 2 == 1;
        let lock = std::sync::Arc::new(tokio::sync::RwLock::new(()));
        let started = Instant::now();
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let lock = std::sync::Arc::clone(&lock);
                tokio::spawn(async move {
                    let mut done_reads = 0u64;
                    for op in 0..per_phase {
                        let write = is_write(op, worker);
                        if shared && !write {
                            let _reading = lock.read().await;
                            tokio::time::sleep(work).await;
                        } else {
                            // The mutex is the write side with every access on it.
                            let _writing = lock.write().await;
                            tokio::time::sleep(work).await;
                        }
                        done_reads += u64::from(!write);
                    }
                    done_reads
                })
            })
            .collect();
        for handle in handles {
            reads[usize::from(shared)] += handle.await.map_err(|_| "W7: a worker panicked")?;
        }
        elapsed[usize::from(shared)] += started.elapsed();
    }
    Ok([0, 1].map(|i| reads[i] as f64 / elapsed[i].as_secs_f64()))
}

/// `count` transfers by one worker, taking the two accounts as `locking` says.
async fn transfer_loop(
    client: LockClient,
    stem: String,
    seed: u64,
    count: u64,
    locking: Locking,
) -> BenchResult<()> {
    let mut random = Random::new(seed);
    let mut next = move || random.next();
    for _ in 0..count {
        let from = next() % ACCOUNTS;
        let to = (from + 1 + next() % (ACCOUNTS - 1)) % ACCOUNTS;
        let names = [format!("{stem}:{from}"), format!("{stem}:{to}")];
        let amount = (next() % 100) as i64;
        match locking {
            Locking::All => {
                let both = client.lock_all(&names).await?;
                move_money(client.redis(), &names, amount).await?;
                both.unlock().await?;
            }
            Locking::Ordered => {
                let (low, high) = if names[0] < names[1] {
                    (&names[0], &names[1])
                } else {
                    (&names[1], &names[0])
                };
                let first = client.lock(low).await?;
                let second = client.lock(high).await?;
                move_money(client.redis(), &names, amount).await?;
                second.unlock().await?;
                first.unlock().await?;
            }
        }
    }
    Ok(())
}

/// The balance key of account `name`.
fn balance_key(name: &str) -> String {
    format!("{name}:balance")
}

/// Moves `amount` from the first account to the second: a GET and a SET of each.
async fn move_money(redis: &Client, names: &[String; 2], amount: i64) -> BenchResult<()> {
    let [from, to] = names.each_ref().map(|name| balance_key(name));
    let from_balance: Option<i64> = redis.get(&from).await?;
    let to_balance: Option<i64> = redis.get(&to).await?;
    let _: () = redis
        .set(&from, from_balance.unwrap_or(0) - amount, None, None, false)
        .await?;
    let _: () = redis
        .set(&to, to_balance.unwrap_or(0) + amount, None, None, false)
        .await?;
    Ok(())
}

/// The sum of every account's balance (deleting them): 0 if no money was made or lost.
async fn total_balance(redis: &Client, stem: &str) -> BenchResult<i64> {
    let mut total = 0;
    for account in 0..ACCOUNTS {
        let key = balance_key(&format!("{stem}:{account}"));
        let balance: Option<i64> = redis.get(&key).await?;
        total += balance.unwrap_or(0);
        let _: i64 = redis.del(&key).await?;
    }
    Ok(total)
}

/// Checks that the two ways of locking agree on what a transfer is (kept next to
/// them so that a change to one shows here).
#[cfg(test)]
mod tests {
    #[test]
    fn an_account_is_never_paired_with_itself() {
        for from in 0..super::ACCOUNTS {
            for step in [0, 1, super::ACCOUNTS - 2] {
                let to = (from + 1 + step % (super::ACCOUNTS - 1)) % super::ACCOUNTS;
                assert_ne!(from, to);
            }
        }
    }
}
