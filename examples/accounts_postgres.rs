//! Per-account locks over balances kept in PostgreSQL, with the write fenced where the
//! balance is (`holdlock::postgres`).
//!
//! `accounts_http` keeps its balances in Redis; this one keeps them in a PostgreSQL
//! table, as a bank would, and shows what the lock alone cannot promise there:
//!
//! 1. **A paused holder.** Holder A locks account 1 with a short fixed lease, reads its
//!    balance, and stalls past the lease. Holder B takes the lock (a larger fencing
//!    token), deposits 50 and commits. Then A writes what it computed from its old
//!    read: its `holdlock::postgres::fence` call refuses the transaction
//!    (`FenceError::StaleToken`), and B's deposit stands. The same without the fence
//!    (a plain `UPDATE`) loses B's deposit.
//! 2. **Two instances, many transfers.** Two clients (as two processes would be), each
//!    with many tasks, move money between 20 accounts: each transfer takes both
//!    accounts' locks fenced with one `lock_all`, fences both accounts in its
//!    transaction (first, in lock order), reads both balances, refuses an overdraft,
//!    writes both and records the transfer in a ledger. At the end the total is what
//!    it was, and every balance agrees with the ledger.
//!
//! Run it with `cargo run --example accounts_postgres --features postgres`. It uses the
//! PostgreSQL of `DATABASE_URL` (a URL or a key-value connection string; it creates and
//! drops tables named `holdlock_example_*`, and `holdlock_fences`) or starts a throwaway
//! one (`initdb` and `postgres` in a temporary directory, on a free loopback port,
//! stopped when the example ends); and the Redis of `REDIS_URL`, or a throwaway
//! `redis-server`. Flags: `--transfers N` (default 1,000). It exits 1 if the books do
//! not balance.

mod support;

use std::sync::Arc;
use std::time::Duration;

use holdlock::postgres::{self, FenceError};
use holdlock::{LockClient, LockOptions};
use tokio_postgres::{Client, NoTls};

use support::{BoxError, Database, Redis};

const ACCOUNTS: i32 = 20;
const OPENING: i64 = 1_000;
const TASKS_PER_INSTANCE: usize = 16;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut transfers = 1_000;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--transfers" => {
                transfers = args.next().ok_or("--transfers needs a value")?.parse()?;
            }
            "--help" | "-h" => {
                println!("usage: accounts_postgres [--transfers N]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}; try --help").into()),
        }
    }
    let redis = Redis::from_url_or_env_or_start(None)?;
    let database = Database::from_url_or_env_or_start(None)?;
    match database.url() {
        Some(url) => println!("Started a throwaway PostgreSQL at {url}."),
        None => println!("Using the PostgreSQL of DATABASE_URL."),
    }
    println!("Locks on Redis at {}.", redis.url());
    let db = connect(database.config()).await?;
    postgres::create_table(&db).await?;
    reset(&db).await?;

    paused_holder(redis.url(), database.config()).await?;
    let balanced = many_transfers(redis.url(), database.config(), transfers).await?;
    db.batch_execute("DROP TABLE holdlock_example_accounts, holdlock_example_transfers")
        .await?;
    if !balanced {
        std::process::exit(1);
    }
    Ok(())
}

async fn connect(config: &str) -> Result<Client, BoxError> {
    let (client, connection) = tokio_postgres::connect(config, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Accounts 1..=20 of 1,000 each, and an empty ledger.
async fn reset(db: &Client) -> Result<(), BoxError> {
    db.batch_execute(
        "DROP TABLE IF EXISTS holdlock_example_accounts, holdlock_example_transfers;
         CREATE TABLE holdlock_example_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
         CREATE TABLE holdlock_example_transfers (
             id bigserial PRIMARY KEY, from_account int NOT NULL, to_account int NOT NULL,
             amount bigint NOT NULL
         );",
    )
    .await?;
    for id in 1..=ACCOUNTS {
        db.execute(
            "INSERT INTO holdlock_example_accounts VALUES ($1, $2)",
            &[&id, &OPENING],
        )
        .await?;
    }
    Ok(())
}

async fn balance(db: &impl tokio_postgres::GenericClient, id: i32) -> Result<i64, BoxError> {
    let row = db
        .query_one(
            "SELECT balance FROM holdlock_example_accounts WHERE id = $1",
            &[&id],
        )
        .await?;
    Ok(row.get(0))
}

async fn set_balance(
    db: &impl tokio_postgres::GenericClient,
    id: i32,
    balance: i64,
) -> Result<(), BoxError> {
    db.execute(
        "UPDATE holdlock_example_accounts SET balance = $2 WHERE id = $1",
        &[&id, &balance],
    )
    .await?;
    Ok(())
}

fn account_lock(id: i32) -> String {
    format!("account:{id}")
}

/// Part 1: holder A stalls past its lease between its read and its write, twice: with
/// the fence its write is refused; without it, holder B's deposit is lost.
async fn paused_holder(redis_url: &str, database: &str) -> Result<(), BoxError> {
    println!("\nPart 1: a holder that stalls past its lease");
    for fenced in [true, false] {
        let locks = LockClient::connect(redis_url).await?;
        let mut a_db = connect(database).await?;
        let lease = Duration::from_millis(500);
        let a = locks
            .lock(account_lock(1))
            .options(LockOptions::fenced().lease(lease))
            .await?
            .ok_or("the lock waits")?;
        let a_token = a.fencing_token().ok_or("taken fenced")?;
        let a_tx = a_db.transaction().await?;
        let before = balance(&a_tx, 1).await?;
        println!("  A (token {a_token}) reads {before}, then stalls for 800 ms");
        tokio::time::sleep(Duration::from_millis(800)).await;

        // B, another instance: its lock is granted once A's lease has run out.
        let b_token = deposit(redis_url, database, 1, 50).await?;
        println!("  B (token {b_token}) deposits 50 and commits");

        // A wakes up and writes its withdrawal of 10, computed from its old read.
        let written = async {
            if fenced {
                postgres::fence(&a_tx, &account_lock(1), a_token).await?;
            }
            set_balance(&a_tx, 1, before - 10).await?;
            a_tx.commit().await?;
            Ok::<_, BoxError>(())
        }
        .await;
        let after = balance(&connect(database).await?, 1).await?;
        match (fenced, written) {
            (true, Err(error)) if is_stale(&*error) => {
                println!(
                    "  with the fence: A's write is refused ({error}); the balance is {after}"
                );
            }
            (false, Ok(())) => println!(
                "  without the fence: A's write lands; the balance is {after}, and B's 50 is lost"
            ),
            (_, outcome) => return Err(format!("unexpected: {outcome:?}").into()),
        }
        drop(a);
        locks.shutdown().await;
        reset(&connect(database).await?).await?;
    }
    Ok(())
}

fn is_stale(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<FenceError>()
        .is_some_and(FenceError::is_stale)
}

/// Holder B: deposits `amount` into `account` under its lock, fenced. Its token.
async fn deposit(
    redis_url: &str,
    database: &str,
    account: i32,
    amount: i64,
) -> Result<u64, BoxError> {
    let locks = LockClient::connect(redis_url).await?;
    let mut db = connect(database).await?;
    let guard = locks
        .lock(account_lock(account))
        .options(LockOptions::fenced())
        .await?
        .ok_or("the lock waits")?;
    let token = guard.fencing_token().ok_or("taken fenced")?;
    let tx = db.transaction().await?;
    postgres::fence(&tx, &account_lock(account), token).await?;
    let read = balance(&tx, account).await?;
    set_balance(&tx, account, read + amount).await?;
    tx.commit().await?;
    guard.unlock().await?;
    locks.shutdown().await;
    Ok(token)
}

/// Part 2: two instances moving money between the accounts; whether the books balance.
async fn many_transfers(
    redis_url: &str,
    database: &str,
    transfers: usize,
) -> Result<bool, BoxError> {
    println!("\nPart 2: two instances x {TASKS_PER_INSTANCE} tasks, {transfers} transfers");
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let mut instances = Vec::new();
    for _instance in 0..2 {
        let locks = LockClient::connect(redis_url).await?;
        instances.push(locks.clone());
        for task in 0..TASKS_PER_INSTANCE {
            let (locks, next, database) = (locks.clone(), Arc::clone(&next), database.to_owned());
            tasks.push(tokio::spawn(async move {
                let mut db = connect(&database).await?;
                let mut random = task as u64 * 7_919 + 1;
                let (mut made, mut refused) = (0u32, 0u32);
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < transfers {
                    random = random
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1);
                    let accounts = ACCOUNTS as u64;
                    let from = (random >> 33) % accounts;
                    let to = (from + 1 + (random >> 13) % (accounts - 1)) % accounts;
                    let (from, to) = (from as i32 + 1, to as i32 + 1);
                    let amount = ((random >> 45) % 300) as i64 + 1;
                    if transfer(&locks, &mut db, from, to, amount).await? {
                        made += 1;
                    } else {
                        refused += 1;
                    }
                }
                Ok::<_, BoxError>((made, refused))
            }));
        }
    }
    let (mut made, mut refused) = (0, 0);
    for task in tasks {
        let (m, r) = task.await??;
        made += m;
        refused += r;
    }
    for locks in instances {
        locks.shutdown().await;
    }
    let db = connect(database).await?;
    let total: i64 = db
        .query_one(
            "SELECT sum(balance)::bigint FROM holdlock_example_accounts",
            &[],
        )
        .await?
        .get(0);
    // Each balance, replayed from the ledger.
    let disagreeing: i64 = db
        .query_one(
            "SELECT count(*) FROM holdlock_example_accounts a WHERE a.balance <> $1::bigint
                 - coalesce((SELECT sum(amount) FROM holdlock_example_transfers
                             WHERE from_account = a.id), 0)::bigint
                 + coalesce((SELECT sum(amount) FROM holdlock_example_transfers
                             WHERE to_account = a.id), 0)::bigint",
            &[&OPENING],
        )
        .await?
        .get(0);
    let expected = OPENING * i64::from(ACCOUNTS);
    println!("  {made} transfers made, {refused} refused for insufficient funds");
    println!(
        "  total {total} (expected {expected}); balances that disagree with the ledger: {disagreeing}"
    );
    let balanced = total == expected && disagreeing == 0;
    println!(
        "  {}",
        if balanced {
            "OK: the books balance"
        } else {
            "WRONG: the books do not balance"
        }
    );
    Ok(balanced)
}

/// One transfer under both accounts' fenced locks; `false` if refused for funds.
async fn transfer(
    locks: &LockClient,
    db: &mut Client,
    from: i32,
    to: i32,
    amount: i64,
) -> Result<bool, BoxError> {
    let (from_lock, to_lock) = (account_lock(from), account_lock(to));
    let both = locks
        .lock_all([from_lock.as_str(), to_lock.as_str()])
        .options(LockOptions::fenced())
        .await?
        .ok_or("the lock waits")?;
    let tx = db.transaction().await?;
    // First, before the reads; in one order (sorted, as lock_all takes the locks), so
    // that two transfers never wait for each other's fence rows.
    let mut fences = [&from_lock, &to_lock];
    fences.sort();
    for name in fences {
        let token = both.token_of(name).ok_or("taken fenced")?;
        postgres::fence(&tx, name, token).await?;
    }
    let (from_balance, to_balance) = (balance(&tx, from).await?, balance(&tx, to).await?);
    if from_balance < amount {
        drop(tx); // rolled back
        both.unlock().await?;
        return Ok(false);
    }
    set_balance(&tx, from, from_balance - amount).await?;
    set_balance(&tx, to, to_balance + amount).await?;
    tx.execute(
        "INSERT INTO holdlock_example_transfers (from_account, to_account, amount) VALUES ($1, $2, $3)",
        &[&from, &to, &amount],
    )
    .await?;
    tx.commit().await?;
    both.unlock().await?;
    Ok(true)
}
