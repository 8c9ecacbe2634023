//! A bank-transfer HTTP service whose instances share per-account locks in Redis.
//!
//! Balances live in one Redis hash. A transfer takes the locks of both accounts with one
//! `lock_all`, which takes them in a global order, so two opposite transfers (1 -> 2 and
//! 2 -> 1) can never deadlock. Inside, `debit` and `credit` lock their account again: the same owner
//! re-entering a lock it holds succeeds at once (the hold count goes to 2), so helpers
//! can be made safe on their own without deadlocking their callers. A balance never
//! goes negative: a transfer that would overdraw is refused with 409. Each request is
//! a lock owner of its own, through `holdlock::tower::OwnerScopeLayer`.
//!
//! Endpoints:
//! - `GET  /accounts/{id}` -> `{"id": 1, "balance": 1000}`
//! - `POST /accounts/{id}/transfer` with `{"to": 2, "amount": 150}` -> both new balances;
//!   400 for a transfer to the same account or of nothing, 404 for an unknown account,
//!   409 for insufficient funds
//! - `GET  /total` -> the sum of all balances, read under every account lock
//! - `GET  /metrics` -> the lock metrics in Prometheus's text format (holdlock's own
//!   with `--features metrics`: `cargo run --example accounts_http --features tower,metrics`)
//!
//! Run it with `cargo run --example accounts_http --features tower`. Without `REDIS_URL` or `--redis` it
//! starts a throwaway `redis-server` and seeds 20 accounts with 1,000 each. To see two
//! instances share the locks, start a second one against the same Redis:
//! `cargo run --example accounts_http --features tower -- --redis redis://127.0.0.1:PORT`.
//!
//! Flags: `--port P` (default 0: any free port), `--redis URL` (default `REDIS_URL`),
//! `--seed N` (reset the bank to N accounts of 1,000 each). The first line of output is
//! `listening on 127.0.0.1:PORT`.

mod support;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fred::interfaces::{HashesInterface, KeysInterface};
use holdlock::tower::OwnerScopeLayer;
use holdlock::{LockClient, LockError};
use serde::{Deserialize, Serialize};
use serde_json::json;

use support::{BoxError, Redis};

/// The Redis hash of balances: field = account id, value = balance.
const BALANCES_KEY: &str = "holdlock-example:accounts:balances";
const OPENING_BALANCE: i64 = 1_000;
const DEFAULT_ACCOUNTS: u32 = 20;

type AccountId = u32;

/// The state every handler shares: one `LockClient` per process (clones share it).
#[derive(Clone)]
struct Bank {
    locks: LockClient,
    /// Renders what holdlock reports through the `metrics` facade.
    metrics: metrics_exporter_prometheus::PrometheusHandle,
}

#[derive(Debug, Default)]
struct Options {
    port: u16,
    redis_url: Option<String>,
    seed_accounts: Option<u32>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let options = parse_args()?;
    let redis = Redis::from_url_or_env_or_start(options.redis_url.clone())?;
    // Installed before the client exists, so that every lock call is counted.
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    let locks = LockClient::connect(redis.url()).await?;
    let bank = Bank { locks, metrics };

    let seed = match options.seed_accounts {
        Some(accounts) => Some(accounts),
        // A fresh throwaway server is empty: give it something to play with.
        None if redis.is_throwaway() => Some(DEFAULT_ACCOUNTS),
        None => None,
    };
    if redis.is_throwaway() {
        println!("Started a throwaway redis-server at {}.", redis.url());
        println!("  A second instance can share it: --redis {}", redis.url());
    } else {
        println!("Using Redis at {}.", redis.url());
    }
    if let Some(accounts) = seed {
        bank.seed(accounts).await?;
        println!("Seeded accounts 1..={accounts} with {OPENING_BALANCE} each.");
    }

    let app = Router::new()
        .route("/accounts/{id}", get(show_account))
        .route("/accounts/{id}/transfer", post(transfer))
        .route("/total", get(total))
        .route("/metrics", get(render_metrics))
        .with_state(bank.clone())
        // Locks belong to an owner, normally the current tokio task. axum runs a
        // handler inside its connection's task, which the requests of one keep-alive
        // connection share; the layer gives each request an owner of its own.
        .layer(OwnerScopeLayer::new());
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, options.port)))
            .await?;
    let address = listener.local_addr()?;
    println!("listening on {address}");
    println!("  curl -s {address}/accounts/1");
    println!(
        "  curl -s -X POST {address}/accounts/1/transfer -H 'content-type: application/json' \
         -d '{{\"to\": 2, \"amount\": 150}}'"
    );
    println!("  curl -s {address}/total");
    println!("Press Ctrl-C to stop.");
    std::io::stdout().flush()?;

    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    bank.locks.shutdown().await;
    Ok(())
}

fn parse_args() -> Result<Options, BoxError> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => options.port = value()?.parse()?,
            "--redis" => options.redis_url = Some(value()?),
            "--seed" => options.seed_accounts = Some(value()?.parse()?),
            "--help" | "-h" => {
                println!("usage: accounts_http [--port P] [--redis URL] [--seed ACCOUNTS]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}; try --help").into()),
        }
    }
    Ok(options)
}

/// What a request can go wrong with, and the HTTP status each one means.
#[derive(Debug)]
enum ApiError {
    SameAccount,
    BadAmount,
    NoSuchAccount(AccountId),
    InsufficientFunds {
        account: AccountId,
        balance: i64,
        amount: i64,
    },
    Internal(String),
}

impl From<LockError> for ApiError {
    fn from(error: LockError) -> Self {
        ApiError::Internal(error.to_string())
    }
}

impl From<fred::error::Error> for ApiError {
    fn from(error: fred::error::Error) -> Self {
        ApiError::Internal(error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            ApiError::SameAccount => (
                StatusCode::BAD_REQUEST,
                json!({"error": "cannot transfer to the same account"}),
            ),
            ApiError::BadAmount => (
                StatusCode::BAD_REQUEST,
                json!({"error": "the amount must be a positive whole number"}),
            ),
            ApiError::NoSuchAccount(id) => (
                StatusCode::NOT_FOUND,
                json!({"error": format!("no account {id}")}),
            ),
            ApiError::InsufficientFunds {
                account,
                balance,
                amount,
            } => (
                StatusCode::CONFLICT,
                json!({
                    "error": "insufficient funds",
                    "account": account,
                    "balance": balance,
                    "amount": amount,
                }),
            ),
            ApiError::Internal(message) => {
                (StatusCode::INTERNAL_SERVER_ERROR, json!({"error": message}))
            }
        };
        (status, Json(body)).into_response()
    }
}

#[derive(Debug, Deserialize)]
struct TransferRequest {
    to: AccountId,
    amount: u64,
}

#[derive(Debug, Serialize)]
struct AccountBalance {
    id: AccountId,
    balance: i64,
}

#[derive(Debug, Serialize)]
struct TransferReceipt {
    amount: i64,
    from: AccountBalance,
    to: AccountBalance,
}

async fn show_account(
    State(bank): State<Bank>,
    Path(id): Path<AccountId>,
) -> Result<Json<AccountBalance>, ApiError> {
    // A single HGET is atomic on its own: no lock needed to read one balance.
    let balance = bank.balance(id).await?;
    Ok(Json(AccountBalance { id, balance }))
}

async fn transfer(
    State(bank): State<Bank>,
    Path(from): Path<AccountId>,
    Json(request): Json<TransferRequest>,
) -> Result<Json<TransferReceipt>, ApiError> {
    let amount = i64::try_from(request.amount).map_err(|_| ApiError::BadAmount)?;
    if amount == 0 {
        return Err(ApiError::BadAmount);
    }
    if from == request.to {
        return Err(ApiError::SameAccount);
    }
    // A request of its own as the owner (see `OwnerScopeLayer` in `main`).
    let receipt = bank.transfer(from, request.to, amount).await?;
    Ok(Json(receipt))
}

async fn render_metrics(State(bank): State<Bank>) -> String {
    bank.metrics.render()
}

async fn total(State(bank): State<Bank>) -> Result<Json<serde_json::Value>, ApiError> {
    let (accounts, total) = bank.total().await?;
    Ok(Json(json!({"accounts": accounts, "total": total})))
}

fn account_lock(id: AccountId) -> String {
    format!("account:{id}")
}

impl Bank {
    /// Replaces every account with accounts `1..=accounts` holding the opening balance.
    async fn seed(&self, accounts: u32) -> Result<(), BoxError> {
        let redis = self.locks.redis();
        let _: i64 = redis.del(BALANCES_KEY).await?;
        let balances: Vec<(String, i64)> = (1..=accounts)
            .map(|id| (id.to_string(), OPENING_BALANCE))
            .collect();
        if !balances.is_empty() {
            let _: i64 = redis.hset(BALANCES_KEY, balances).await?;
        }
        Ok(())
    }

    async fn balance(&self, id: AccountId) -> Result<i64, ApiError> {
        let balance: Option<i64> = self
            .locks
            .redis()
            .hget(BALANCES_KEY, id.to_string())
            .await?;
        balance.ok_or(ApiError::NoSuchAccount(id))
    }

    async fn set_balance(&self, id: AccountId, balance: i64) -> Result<(), ApiError> {
        let _: i64 = self
            .locks
            .redis()
            .hset(BALANCES_KEY, (id.to_string(), balance))
            .await?;
        Ok(())
    }

    /// Moves `amount` from one account to another under both accounts' locks.
    async fn transfer(
        &self,
        from: AccountId,
        to: AccountId,
        amount: i64,
    ) -> Result<TransferReceipt, ApiError> {
        // Both accounts at once: `lock_all` takes them in one global order, so two
        // transfers between the same accounts in opposite directions queue for the
        // same first lock instead of each holding one and waiting for the other.
        let both = self
            .locks
            .lock_all([account_lock(from), account_lock(to)])
            .await?;
        let moved = self.move_money(from, to, amount).await;
        let released = both.unlock().await;
        let receipt = moved?;
        released?;
        Ok(receipt)
    }

    async fn move_money(
        &self,
        from: AccountId,
        to: AccountId,
        amount: i64,
    ) -> Result<TransferReceipt, ApiError> {
        // Check the receiver exists before any money leaves the sender.
        self.balance(to).await?;
        let from_balance = self.debit(from, amount).await?;
        let to_balance = self.credit(to, amount).await?;
        Ok(TransferReceipt {
            amount,
            from: AccountBalance {
                id: from,
                balance: from_balance,
            },
            to: AccountBalance {
                id: to,
                balance: to_balance,
            },
        })
    }

    /// Takes `amount` out of `account`, refusing to overdraw it; returns the new balance.
    ///
    /// It locks the account itself, so it is safe to call on its own. Called from
    /// `transfer`, whose owner already holds this lock, that is a re-entry: it succeeds
    /// at once with a hold count of 2, and the lock stays held until `transfer` lets go.
    async fn debit(&self, account: AccountId, amount: i64) -> Result<i64, ApiError> {
        let guard = self.locks.lock(account_lock(account)).await?;
        let result = async {
            // Read, check, write: not atomic by itself, safe because we hold the lock.
            let balance = self.balance(account).await?;
            if balance < amount {
                return Err(ApiError::InsufficientFunds {
                    account,
                    balance,
                    amount,
                });
            }
            self.set_balance(account, balance - amount).await?;
            Ok(balance - amount)
        }
        .await;
        guard.unlock().await?;
        result
    }

    /// Adds `amount` to `account` under its lock (a re-entry inside `transfer`).
    async fn credit(&self, account: AccountId, amount: i64) -> Result<i64, ApiError> {
        let guard = self.locks.lock(account_lock(account)).await?;
        let result = async {
            let balance = self.balance(account).await?;
            self.set_balance(account, balance + amount).await?;
            Ok(balance + amount)
        }
        .await;
        guard.unlock().await?;
        result
    }

    /// The number of accounts and the sum of their balances, read while holding every
    /// account's lock (one `lock_all`, in the same order as transfers take theirs), so
    /// no transfer is caught halfway.
    async fn total(&self) -> Result<(usize, i64), ApiError> {
        let ids: Vec<AccountId> = self
            .locks
            .redis()
            .hkeys::<Vec<String>, _>(BALANCES_KEY)
            .await?
            .iter()
            .filter_map(|id| id.parse().ok())
            .collect();
        if ids.is_empty() {
            return Ok((0, 0));
        }
        let all = self
            .locks
            .lock_all(ids.iter().map(|&id| account_lock(id)))
            .await?;
        let balances: Result<Vec<Option<i64>>, _> = self
            .locks
            .redis()
            .hmget(
                BALANCES_KEY,
                ids.iter().map(ToString::to_string).collect::<Vec<_>>(),
            )
            .await;
        all.unlock().await?;
        let balances = balances?;
        Ok((ids.len(), balances.into_iter().flatten().sum()))
    }
}
