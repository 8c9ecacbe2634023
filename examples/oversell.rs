//! Two services sell the same 500 items; without a lock they oversell, with one they don't.
//!
//! Each "service" is its own `LockClient` in its own tokio runtime on its own OS thread,
//! as if they were two processes. Each runs 200 concurrent buyers, 1,000 purchase
//! attempts in all. A purchase is a deliberately non-atomic read-check-write on a Redis
//! counter: `GET stock`, and if something is left, a short pause (think: calling the
//! payment provider), `SET stock stock-1`, `INCR sold`.
//!
//! Round 1 runs it bare and oversells. Round 2 wraps each purchase in
//! `client.lock("stock:item-1")` and sells exactly 500. The process exits non-zero if
//! round 2 is wrong.
//!
//! Run it with `cargo run --example oversell`. It starts a throwaway `redis-server` on
//! a free loopback port, or uses `REDIS_URL` if set (it only touches keys under
//! `holdlock-example:`).

mod support;

use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::interfaces::KeysInterface;
use holdlock::LockClient;

use support::{BoxError, Redis};

const ITEMS_IN_STOCK: i64 = 500;
const SERVICE_NAMES: [&str; 2] = ["A", "B"];
const BUYERS_PER_SERVICE: usize = 200;
const ATTEMPTS_PER_SERVICE: usize = 500;
const STOCK_KEY: &str = "holdlock-example:stock:item-1";
const SOLD_KEY: &str = "holdlock-example:sold:item-1";
const LOCK_NAME: &str = "stock:item-1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    WithoutLock,
    WithLock,
}

/// What one round ended with.
#[derive(Debug)]
struct Outcome {
    sold_per_service: Vec<u64>,
    sold: i64,
    stock_left: i64,
    took: Duration,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs both rounds; `Ok(false)` if the locked round sold the wrong amount.
fn run() -> Result<bool, BoxError> {
    let redis = Redis::from_url_or_env_or_start(None)?;
    if redis.is_throwaway() {
        println!(
            "Started a throwaway redis-server at {} (set REDIS_URL to use your own).",
            redis.url()
        );
    } else {
        println!("Using Redis at {}.", redis.url());
    }
    println!(
        "{ITEMS_IN_STOCK} items in stock; {} services x {BUYERS_PER_SERVICE} concurrent buyers, {} purchase attempts.",
        SERVICE_NAMES.len(),
        SERVICE_NAMES.len() * ATTEMPTS_PER_SERVICE,
    );

    println!("\nRound 1: no lock (read stock, pause, write stock-1)");
    let bare = sell_out(redis.url(), Round::WithoutLock)?;
    print_outcome(&bare);
    let mut problems = Vec::new();
    if bare.sold > ITEMS_IN_STOCK {
        problems.push(format!("oversold by {}", bare.sold - ITEMS_IN_STOCK));
    }
    if bare.sold + bare.stock_left != ITEMS_IN_STOCK {
        problems.push(format!(
            "the stock counter says {} are still on the shelf",
            bare.stock_left
        ));
    }
    if problems.is_empty() {
        println!("  (no oversell this time: the race is real, this run just got lucky)");
    } else {
        println!(
            "  WRONG: {} sold from a stock of {ITEMS_IN_STOCK}: {}.",
            bare.sold,
            problems.join(", and ")
        );
    }

    println!("\nRound 2: the same purchase inside client.lock(\"{LOCK_NAME}\")");
    let locked = sell_out(redis.url(), Round::WithLock)?;
    print_outcome(&locked);
    let correct = locked.sold == ITEMS_IN_STOCK && locked.stock_left == 0;
    if correct {
        println!("  CORRECT: exactly {ITEMS_IN_STOCK} sold and the stock is 0.");
    } else {
        println!("  FAILED: the lock did not protect the stock. This is a bug; please report it.");
    }
    Ok(correct)
}

fn print_outcome(outcome: &Outcome) {
    let per_service: Vec<String> = SERVICE_NAMES
        .iter()
        .zip(&outcome.sold_per_service)
        .map(|(name, sold)| format!("service {name} sold {sold}"))
        .collect();
    let took = if outcome.took < Duration::from_secs(1) {
        format!("{} ms", outcome.took.as_millis())
    } else {
        format!("{:.1} s", outcome.took.as_secs_f64())
    };
    println!(
        "  {} -> {} sold, stock left {} ({took})",
        per_service.join(", "),
        outcome.sold,
        outcome.stock_left,
    );
}

/// Resets the stock, lets every service sell until its attempts are used up, and reads
/// the counters back.
fn sell_out(url: &str, round: Round) -> Result<Outcome, BoxError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let admin = runtime.block_on(LockClient::connect(url))?;
    runtime.block_on(async {
        let _: () = admin
            .redis()
            .set(STOCK_KEY, ITEMS_IN_STOCK, None, None, false)
            .await?;
        let _: () = admin.redis().set(SOLD_KEY, 0, None, None, false).await?;
        Ok::<_, BoxError>(())
    })?;

    // All services connect first, then start selling at the same moment.
    let start_line = Arc::new(Barrier::new(SERVICE_NAMES.len() + 1));
    let services: Vec<_> = SERVICE_NAMES
        .iter()
        .map(|name| {
            let (url, start_line) = (url.to_owned(), Arc::clone(&start_line));
            std::thread::Builder::new()
                .name(format!("service-{name}"))
                .spawn(move || run_service(&url, round, &start_line))
        })
        .collect::<Result<_, _>>()?;
    start_line.wait();
    let started = Instant::now();
    let mut sold_per_service = Vec::new();
    for service in services {
        let sold = service.join().map_err(|_| "a service thread panicked")??;
        sold_per_service.push(sold);
    }
    let took = started.elapsed();

    runtime.block_on(async {
        let sold: i64 = admin.redis().get(SOLD_KEY).await?;
        let stock_left: i64 = admin.redis().get(STOCK_KEY).await?;
        admin.shutdown().await;
        Ok(Outcome {
            sold_per_service,
            sold,
            stock_left,
            took,
        })
    })
}

/// One service: its own runtime and `LockClient`, and `BUYERS_PER_SERVICE` buyer tasks.
/// Returns how many items this service sold.
fn run_service(url: &str, round: Round, start_line: &Barrier) -> Result<u64, BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Wait at the start line even if connecting failed, so the others are not stuck.
    let client = runtime.block_on(LockClient::connect(url));
    start_line.wait();
    let client = client?;
    runtime.block_on(async {
        let mut buyers = Vec::with_capacity(BUYERS_PER_SERVICE);
        for buyer in 0..BUYERS_PER_SERVICE {
            // Spread the attempts evenly: 500 over 200 buyers is 2 or 3 each.
            let attempts = ATTEMPTS_PER_SERVICE / BUYERS_PER_SERVICE
                + usize::from(buyer < ATTEMPTS_PER_SERVICE % BUYERS_PER_SERVICE);
            let client = client.clone();
            buyers.push(tokio::spawn(async move {
                let mut bought = 0;
                for _ in 0..attempts {
                    if buy_one(&client, round).await? {
                        bought += 1;
                    }
                }
                Ok::<u64, BoxError>(bought)
            }));
        }
        let mut sold = 0;
        for buyer in buyers {
            sold += buyer.await??;
        }
        client.shutdown().await;
        Ok(sold)
    })
}

/// One purchase attempt; `true` if an item was sold.
async fn buy_one(client: &LockClient, round: Round) -> Result<bool, BoxError> {
    match round {
        Round::WithoutLock => read_check_decrement(client.redis()).await,
        Round::WithLock => {
            let guard = client.lock(LOCK_NAME).await?;
            let sold = read_check_decrement(client.redis()).await;
            guard.unlock().await?;
            sold
        }
    }
}

/// The racy part: read the stock, and if any is left, write it back one lower.
async fn read_check_decrement(redis: &Client) -> Result<bool, BoxError> {
    let stock: i64 = redis.get(STOCK_KEY).await?;
    if stock <= 0 {
        return Ok(false);
    }
    // Real services do something here (charge a card, call another service). Any
    // pause between the read and the write lets other buyers read the same stock.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let _: () = redis.set(STOCK_KEY, stock - 1, None, None, false).await?;
    let _: i64 = redis.incr(SOLD_KEY).await?;
    Ok(true)
}
