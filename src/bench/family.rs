//! Workloads of the lock family beyond the mutex: W6 (transfers under `lock_all`).

use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::interfaces::KeysInterface;

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

/// `count` transfers by one worker, taking the two accounts as `locking` says.
async fn transfer_loop(
    client: LockClient,
    stem: String,
    mut seed: u64,
    count: u64,
    locking: Locking,
) -> BenchResult<()> {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
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
