//! The bank workload (`--workload bank`): transfers between accounts kept in
//! PostgreSQL, each under the fenced locks of both accounts, fenced in the database
//! with `holdlock::postgres`, while the nemesis does its worst; and its own checks on
//! the money and the ledger.
//!
//! Each task of a worker repeatedly picks two accounts and an amount, takes both
//! accounts' locks with one fenced `lock_all` (names `chaos:<n>`), and in one
//! transaction fences both accounts (in lock order) with their tokens, reads both
//! balances, waits a little, writes both (a read-modify-write: the new balances are
//! computed from what it read), records the transfer's id in a ledger table, and
//! commits. One round in a hundred (`--overruns` percent) takes its locks with a fixed lease (no
//! watchdog) and stall for 1.2 to 2.2 leases, before the fences or between the reads
//! and the writes, then go on as a holder that did not notice would (their lost
//! signal is recorded when it fires): a newer holder may have taken the accounts
//! meanwhile, and the fences must refuse the stale transaction (stalled before them),
//! or make the newer holder wait for it (stalled after them, with the rows locked).
//! The nemesis's pauses do the same to whole workers. `--workload bank-unfenced` does
//! the same without the fences: the checker must catch it losing updates.
//!
//! The checks (besides the lock checks of `checker.rs`, which see the two members of
//! each attempt as the multi-lock's do):
//! - **No money is made or lost**: the balances' total never changes.
//! - **Every balance agrees with the ledger**: an account's final balance is its
//!   opening balance, less what the ledger's transfers took out of it, plus what they
//!   put in. A lost update (a write computed from a read a newer holder had already
//!   overwritten) or a transfer applied twice breaks it.
//! - **No balance goes negative.**
//! - **What a worker was told is what happened**: a transfer reported committed is in
//!   the ledger; one refused (a stale token, too little money, a failed statement)
//!   is not; one whose commit's answer was lost may be either. Every ledger row was
//!   begun by a worker, with its accounts and amount.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use holdlock::{LockClient, LockError, LockOptions};
use serde::Serialize;
use tokio_postgres::{Client, NoTls};

use crate::checker::Summary;
use crate::history::{Entry, Op, Released, Transferred, now_us};
use crate::worker::WorkerConfig;
use crate::{BoxError, Rng};

/// Every account's opening balance.
pub const OPENING: i64 = 1_000;

/// How many rounds in a hundred hold for a fixed lease and stall past it, unless
/// `--overruns` says otherwise.
pub const OVERRUN_PERCENT: u64 = 1;

/// What the workers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Locks and registers in Redis (`worker.rs`, by `--lock` mode).
    Locks,
    /// Transfers between accounts in PostgreSQL, fenced there.
    Bank,
    /// The same without the fences in PostgreSQL: the checker must catch it.
    BankUnfenced,
}

impl Workload {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Locks => "locks",
            Workload::Bank => "bank",
            Workload::BankUnfenced => "bank-unfenced",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(name: &str) -> Option<Self> {
        [Workload::Locks, Workload::Bank, Workload::BankUnfenced]
            .into_iter()
            .find(|workload| workload.name() == name)
    }

    /// Whether it moves money in PostgreSQL.
    pub fn is_bank(self) -> bool {
        self != Workload::Locks
    }
}

/// The tables, made afresh before the workers start: `accounts` accounts of
/// [`OPENING`] each, an empty ledger, and holdlock's fence table.
pub async fn prepare(database: &str, accounts: u32) -> Result<(), BoxError> {
    let db = connect(database).await?;
    create_fence_table(&db).await?;
    db.batch_execute(
        "DROP TABLE IF EXISTS bank_accounts, bank_transfers;
         TRUNCATE holdlock_fences;
         CREATE TABLE bank_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
         CREATE TABLE bank_transfers (
             id text PRIMARY KEY,
             from_account int NOT NULL,
             to_account int NOT NULL,
             amount bigint NOT NULL
         );",
    )
    .await?;
    for id in 0..accounts {
        db.execute(
            "INSERT INTO bank_accounts VALUES ($1, $2)",
            &[&(id as i32), &OPENING],
        )
        .await?;
    }
    Ok(())
}

async fn connect(database: &str) -> Result<Client, BoxError> {
    let (client, connection) = tokio::time::timeout(
        Duration::from_secs(5),
        tokio_postgres::connect(database, NoTls),
    )
    .await
    .map_err(|_| "connecting to PostgreSQL took over 5 s")??;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The nemesis's `db-kill`: terminates every other connection to the database (the
/// workers'), and says how many.
pub async fn kill_connections(database: &str) -> Result<u32, BoxError> {
    let db = connect(database).await?;
    let killed = db
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND backend_type = 'client backend'",
            &[],
        )
        .await?
        .len();
    Ok(u32::try_from(killed).unwrap_or(u32::MAX))
}

/// The database at the end: each account's balance, and the ledger by transfer id.
#[derive(Debug, Default)]
pub struct Ledger {
    pub balances: BTreeMap<u32, i64>,
    pub transfers: HashMap<String, (u32, u32, i64)>,
}

/// Reads the [`Ledger`].
pub async fn ledger(database: &str) -> Result<Ledger, BoxError> {
    let db = connect(database).await?;
    let mut ledger = Ledger::default();
    for row in db
        .query("SELECT id, balance FROM bank_accounts", &[])
        .await?
    {
        let id: i32 = row.get(0);
        ledger.balances.insert(id as u32, row.get(1));
    }
    for row in db
        .query(
            "SELECT id, from_account, to_account, amount FROM bank_transfers",
            &[],
        )
        .await?
    {
        let (from, to): (i32, i32) = (row.get(1), row.get(2));
        ledger
            .transfers
            .insert(row.get(0), (from as u32, to as u32, row.get(3)));
    }
    Ok(ledger)
}

/// One task of a bank worker.
pub struct BankTask {
    locks: LockClient,
    database: String,
    fenced: bool,
    accounts: u32,
    lease: Duration,
    overruns: u64,
    seed: u64,
    rng: Rng,
    next_attempt: u64,
    db: Option<Client>,
}

impl BankTask {
    /// Task `task` of the worker `config` describes.
    pub fn new(locks: LockClient, config: &WorkerConfig, task: u32) -> Self {
        BankTask {
            locks,
            database: config.database.clone().unwrap_or_default(),
            fenced: config.workload == Workload::Bank,
            accounts: config.names.max(2),
            lease: config.lease,
            overruns: config.overruns,
            seed: config.seed,
            rng: Rng::new(config.seed ^ (u64::from(task) << 40) ^ 0xBA4C),
            next_attempt: u64::from(task) << 32,
            db: None,
        }
    }

    /// Transfers until `stop`.
    pub async fn run(mut self, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::Acquire) {
            self.round().await;
        }
    }

    /// One transfer: both locks, the transaction, both released. Each lock is recorded
    /// as an attempt of its own (`a`, `a + 1`, in lock order), as the multi-lock's are.
    async fn round(&mut self) {
        let a = self.next_attempt;
        self.next_attempt += 2;
        let count = u64::from(self.accounts);
        let from = self.rng.below(count) as u32;
        let to = ((u64::from(from) + 1 + self.rng.below(count - 1)) % count) as u32;
        let amount = 1 + self.rng.below(150) as i64;
        let (low, high) = (from.min(to), from.max(to));
        let names = [format!("chaos:{low}"), format!("chaos:{high}")];
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
        let each = |op: &dyn Fn(u64) -> Op| members.iter().for_each(|&a| op(a).emit());
        // A few rounds overrun: a fixed lease (no watchdog), and a stall of 1.2 to 2.2
        // leases before the fences or between the reads and the writes, as a holder
        // that stalled past its lease (no fault needed; the nemesis's pauses do the
        // same to whole workers).
        let overrun = self.rng.below(100) < self.overruns;
        let stall = if overrun {
            self.lease.mul_f64(1.2 + self.rng.unit())
        } else {
            Duration::ZERO
        };
        let stall_first = self.rng.below(2) == 0;
        let options = if overrun {
            LockOptions::fenced().wait(wait).lease(self.lease)
        } else {
            LockOptions::fenced().wait(wait)
        };
        let taking = self.locks.lock_all(&names).options(options);
        let both = match tokio::time::timeout(wait + Duration::from_secs(5), taking).await {
            Err(_) => return each(&|a| Op::Cancelled { t: now_us(), a }),
            Ok(Ok(None)) => return each(&|a| Op::Busy { t: now_us(), a }),
            Ok(Err(error)) => {
                let error = error.to_string();
                each(&|a| Op::Error {
                    t: now_us(),
                    a,
                    error: error.clone(),
                });
                return tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Ok(Some(both))) => both,
        };
        let tokens = [
            both.token_of(&names[0]).unwrap_or(0),
            both.token_of(&names[1]).unwrap_or(0),
        ];
        for (&a, &token) in members.iter().zip(&tokens) {
            Op::Grant {
                t: now_us(),
                a,
                token,
            }
            .emit();
        }
        let id = format!("{}-{a}", self.seed);
        Op::TransferStart {
            t: now_us(),
            a,
            id: id.clone(),
            from,
            to,
            amount,
        }
        .emit();
        // The transaction goes on after a lost signal, as a holder that did not
        // notice would: the fences are what must stop it then.
        // A pause of the worker may come before the fences (then they must refuse a
        // token overtaken meanwhile) or after them, between the reads and the writes
        // (then the row locks they took make the next holder wait).
        let mut before = Duration::from_millis(self.rng.below(15));
        let mut think = Duration::from_millis(self.rng.below(15));
        if stall_first {
            before += stall;
        } else {
            think += stall;
        }
        let resources = [(names[0].clone(), tokens[0]), (names[1].clone(), tokens[1])];
        let outcome = {
            let transfer = tokio::time::timeout(Duration::from_secs(15), async {
                tokio::time::sleep(before).await;
                self.transfer(&id, from, to, amount, &resources, think)
                    .await
            });
            tokio::pin!(transfer);
            let lost = both.lost();
            tokio::pin!(lost);
            let mut told = false;
            loop {
                tokio::select! {
                    outcome = &mut transfer => break outcome.unwrap_or(Transferred::Unknown),
                    () = &mut lost, if !told => {
                        told = true;
                        each(&|a| Op::Lost { t: now_us(), a });
                    }
                }
            }
        };
        Op::Transfer {
            t: now_us(),
            a,
            id,
            outcome,
        }
        .emit();
        each(&|a| Op::Unlock { t: now_us(), a });
        let released = match tokio::time::timeout(Duration::from_secs(5), both.unlock()).await {
            Ok(Ok(())) => Released::Ok,
            Ok(Err(LockError::NotHeld { .. })) => Released::NotHeld,
            _ => Released::Error,
        };
        each(&|a| Op::Unlocked {
            t: now_us(),
            a,
            released,
        });
    }

    /// This task's connection, made again once the last one closed.
    async fn db(&mut self) -> Option<&mut Client> {
        if self.db.as_ref().is_none_or(Client::is_closed) {
            self.db = connect(&self.database).await.ok();
        }
        self.db.as_mut()
    }

    /// The transaction of one transfer.
    async fn transfer(
        &mut self,
        id: &str,
        from: u32,
        to: u32,
        amount: i64,
        resources: &[(String, u64); 2],
        think: Duration,
    ) -> Transferred {
        let fenced = self.fenced;
        let Some(db) = self.db().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Transferred::Failed;
        };
        let Ok(tx) = db.transaction().await else {
            return Transferred::Failed;
        };
        // First, before the reads, in lock order.
        if fenced {
            for (resource, token) in resources {
                match fence(&tx, resource, *token).await {
                    Fenced::Passed => {}
                    Fenced::Stale => return Transferred::Stale,
                    Fenced::Failed => return Transferred::Failed,
                }
            }
        }
        let read = |account: u32| {
            let tx = &tx;
            async move {
                tx.query_one(
                    "SELECT balance FROM bank_accounts WHERE id = $1",
                    &[&(account as i32)],
                )
                .await
                .map(|row| row.get::<_, i64>(0))
            }
        };
        let (Ok(from_balance), Ok(to_balance)) = (read(from).await, read(to).await) else {
            return Transferred::Failed;
        };
        tokio::time::sleep(think).await;
        if from_balance < amount {
            let _ = tx.rollback().await;
            return Transferred::Insufficient;
        }
        let write = |account: u32, balance: i64| {
            let tx = &tx;
            async move {
                tx.execute(
                    "UPDATE bank_accounts SET balance = $2 WHERE id = $1",
                    &[&(account as i32), &balance],
                )
                .await
            }
        };
        let recorded = async {
            write(from, from_balance - amount).await?;
            write(to, to_balance + amount).await?;
            tx.execute(
                "INSERT INTO bank_transfers VALUES ($1, $2, $3, $4)",
                &[&id, &(from as i32), &(to as i32), &amount],
            )
            .await
        };
        if recorded.await.is_err() {
            return Transferred::Failed;
        }
        match tx.commit().await {
            Ok(()) => Transferred::Committed,
            Err(_) => Transferred::Unknown,
        }
    }
}

/// What a fence said (without the `postgres` feature, only `Failed`).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
enum Fenced {
    Passed,
    Stale,
    Failed,
}

/// `holdlock::postgres::fence`, which the `postgres` feature brings (without it the
/// bank workload is refused on the command line).
#[cfg(feature = "postgres")]
async fn fence(tx: &tokio_postgres::Transaction<'_>, resource: &str, token: u64) -> Fenced {
    match holdlock::postgres::fence(tx, resource, token).await {
        Ok(()) => Fenced::Passed,
        Err(holdlock::postgres::FenceError::StaleToken { .. }) => Fenced::Stale,
        Err(_) => Fenced::Failed,
    }
}

#[cfg(not(feature = "postgres"))]
async fn fence(_: &tokio_postgres::Transaction<'_>, _: &str, _: u64) -> Fenced {
    Fenced::Failed
}

#[cfg(feature = "postgres")]
async fn create_fence_table(db: &Client) -> Result<(), BoxError> {
    Ok(holdlock::postgres::create_table(db).await?)
}

#[cfg(not(feature = "postgres"))]
async fn create_fence_table(_: &Client) -> Result<(), BoxError> {
    Err(NEEDS_THE_FEATURE.into())
}

/// Why the bank workload is refused without the `postgres` feature.
pub const NEEDS_THE_FEATURE: &str =
    "--workload bank needs holdlock::postgres: build with `--features postgres`";

/// The bank's figures in the summary.
#[derive(Debug, Default, Serialize)]
pub struct BankFigures {
    pub workload: &'static str,
    pub accounts: u32,
    pub transfers_begun: u64,
    /// By outcome: committed, stale, insufficient, failed, unknown; `unreported` for
    /// those begun by a worker that was killed before it could say.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Of the unknown and unreported, how many are in the ledger (committed after all).
    pub unknown_in_the_ledger: u64,
    pub ledger_rows: u64,
    pub expected_total: i64,
    /// `None` when only a history was checked again (`--recheck`).
    pub final_total: Option<i64>,
}

fn label(outcome: Transferred) -> &'static str {
    match outcome {
        Transferred::Committed => "committed",
        Transferred::Stale => "stale",
        Transferred::Insufficient => "insufficient",
        Transferred::Failed => "failed",
        Transferred::Unknown => "unknown",
    }
}

/// The bank's checks (see the module's documentation), added to `summary`; without a
/// ledger (a history checked again) only the figures.
pub fn check(
    history: &[Entry],
    ledger: Option<&Ledger>,
    workload: Workload,
    accounts: u32,
    summary: &mut Summary,
) {
    let mut begun: HashMap<&str, (u32, u32, i64)> = HashMap::new();
    let mut told: HashMap<&str, Transferred> = HashMap::new();
    for entry in history {
        let Entry::Op { op, .. } = entry else {
            continue;
        };
        match op {
            Op::TransferStart {
                id,
                from,
                to,
                amount,
                ..
            } => {
                begun.insert(id, (*from, *to, *amount));
            }
            Op::Transfer { id, outcome, .. } => {
                told.insert(id, *outcome);
            }
            _ => {}
        }
    }
    let mut figures = BankFigures {
        workload: workload.name(),
        accounts,
        transfers_begun: begun.len() as u64,
        expected_total: OPENING * i64::from(accounts),
        ..BankFigures::default()
    };
    for id in begun.keys() {
        let outcome = told.get(id).map_or("unreported", |outcome| label(*outcome));
        *figures.outcomes.entry(outcome).or_default() += 1;
    }
    let Some(ledger) = ledger else {
        summary.bank = Some(figures);
        return;
    };
    figures.ledger_rows = ledger.transfers.len() as u64;
    let total: i64 = ledger.balances.values().sum();
    figures.final_total = Some(total);
    if total != figures.expected_total {
        summary.violate(
            "bank: money made or lost",
            format!(
                "the balances add up to {total}, not {}",
                figures.expected_total
            ),
        );
    }
    let mut expected: BTreeMap<u32, i64> = (0..accounts).map(|id| (id, OPENING)).collect();
    for (id, (from, to, amount)) in &ledger.transfers {
        *expected.entry(*from).or_default() -= amount;
        *expected.entry(*to).or_default() += amount;
        match begun.get(id.as_str()) {
            None => summary.violate(
                "bank: a ledger row nobody began",
                format!("transfer {id}: {amount} from {from} to {to}"),
            ),
            Some(started) if *started != (*from, *to, *amount) => summary.violate(
                "bank: a ledger row unlike its transfer",
                format!(
                    "transfer {id}: {started:?} begun, {:?} recorded",
                    (from, to, amount)
                ),
            ),
            Some(_) => {}
        }
        match told.get(id.as_str()) {
            None | Some(Transferred::Unknown) => figures.unknown_in_the_ledger += 1,
            Some(Transferred::Committed) => {}
            Some(refused) => summary.violate(
                "bank: a refused transfer was applied",
                format!("transfer {id} was told {refused:?}, yet is in the ledger"),
            ),
        }
    }
    for (id, outcome) in &told {
        if *outcome == Transferred::Committed && !ledger.transfers.contains_key(*id) {
            summary.violate(
                "bank: a committed transfer is missing",
                format!("transfer {id} was told committed, and is not in the ledger"),
            );
        }
    }
    for (account, want) in &expected {
        let have = ledger.balances.get(account).copied();
        if have != Some(*want) {
            summary.violate(
                "bank: a balance disagrees with the ledger",
                format!(
                    "account {account}: {have:?}, where its transfers in the ledger make {want}"
                ),
            );
        }
        if have.is_some_and(|balance| balance < 0) {
            summary.violate(
                "bank: a negative balance",
                format!("account {account}: {have:?}"),
            );
        }
    }
    summary.bank = Some(figures);
}
