//! The examples, run as a user would run them: `oversell`, `accounts_http` (two
//! instances under 2,000 concurrent transfers), `accounts_postgres` (with the `postgres`
//! feature: a paused holder refused by the fence in PostgreSQL, and two instances'
//! transfers balancing), `cron_once`, and the `chaos` checker (its short mode against
//! holdlock, and against a deliberately broken lock; Redisson's layouts beside Java
//! Redisson workers; a short run with the locks on a Redis Cluster; and, with the
//! `postgres` feature, its bank workload in PostgreSQL, fenced and not).
//!
//! The example binaries are built with `cargo build --example ...` into the same target
//! directory and profile as this test (a no-op when `cargo test` has built them already),
//! then run as child processes against throwaway Redis servers on loopback.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use holdlock::LockClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EXAMPLES: [&str; 4] = ["oversell", "accounts_http", "cron_once", "chaos"];

/// How much of the machine a test needs while it runs. The oversell test, the transfer
/// storms and the runs with Java workers (their JVMs) load both cores: they run alone.
/// A chaos run of holdlock's own workers mostly sleeps (about a quarter of a core in
/// all, redis-server included): two run at once. (The cron test runs beside any of
/// them: it mostly sleeps, and its margins are hundreds of milliseconds.)
#[derive(Clone, Copy)]
enum Load {
    Light = 1,
    Heavy = 2,
}

/// The turns of [`Load`] in use, out of [`Load::Heavy`]'s.
static LOAD_IN_USE: Mutex<usize> = Mutex::new(0);
static LOAD_FREED: Condvar = Condvar::new();

/// A test's turn, given back when dropped (a failed test does not block the rest).
struct Turn(usize);

/// Waits until the machine has room for a test of this `load`.
fn turn(load: Load) -> Turn {
    let need = load as usize;
    let mut in_use = LOAD_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
    while *in_use + need > Load::Heavy as usize {
        in_use = LOAD_FREED.wait(in_use).unwrap_or_else(|p| p.into_inner());
    }
    *in_use += need;
    Turn(need)
}

impl Drop for Turn {
    fn drop(&mut self) {
        *LOAD_IN_USE.lock().unwrap_or_else(|p| p.into_inner()) -= self.0;
        LOAD_FREED.notify_all();
    }
}

/// Every feature of Cargo.toml, and whether this test was built with it
/// ([`every_feature_is_listed`] fails when one is missing).
const FEATURES: [(&str, bool); 8] = [
    ("tls-rustls", cfg!(feature = "tls-rustls")),
    ("cli", cfg!(feature = "cli")),
    ("bench", cfg!(feature = "bench")),
    ("metrics", cfg!(feature = "metrics")),
    ("serde", cfg!(feature = "serde")),
    ("tower", cfg!(feature = "tower")),
    ("blocking", cfg!(feature = "blocking")),
    ("postgres", cfg!(feature = "postgres")),
];

/// The examples are built with the test's own features: a feature of Cargo.toml not in
/// [`FEATURES`] would build the library a second time.
#[test]
fn every_feature_is_listed() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("Cargo.toml has a [features] table");
    let declared: Vec<&str> = section
        .lines()
        .filter_map(|line| line.split_once(" = ").map(|(name, _)| name.trim()))
        .filter(|name| !name.starts_with('#') && *name != "default")
        .collect();
    let listed: Vec<&str> = FEATURES.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        declared, listed,
        "FEATURES must list Cargo.toml's features in order"
    );
}

/// Builds the examples once per test run and returns the path of one of them.
fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = BUILT
        .get_or_init(build_examples)
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// Runs `cargo build --example ...` for the profile this test was built with, and
/// returns the examples directory: `target/<profile>/examples`, beside `deps/` where
/// this test executable lives.
fn build_examples() -> Result<PathBuf, String> {
    let test_exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let profile_dir = test_exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or("the test executable is not in target/<profile>/deps")?;
    // Prefer what cargo tells the running test over what it told the compiler: the
    // same build may be run from another checkout.
    let cargo_program = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    let mut cargo = Command::new(cargo_program);
    // The `metrics` feature, so that the bank's /metrics shows holdlock's own; `tower`
    // for the bank's `OwnerScopeLayer`.
    cargo
        .current_dir(manifest_dir)
        .args(["build", "--features", "metrics,tower"]);
    for name in EXAMPLES {
        cargo.args(["--example", name]);
    }
    // Its `required-features`, which this test was built with or not.
    if cfg!(feature = "postgres") {
        cargo.args(["--example", "accounts_postgres"]);
    }
    match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cargo.arg("--release");
        }
        Some(profile) => {
            cargo.args(["--profile", profile]);
        }
        None => {
            return Err(format!(
                "cannot tell the profile from {}",
                profile_dir.display()
            ));
        }
    }
    // Build with the features this test was built with, so that cargo reuses the
    // library (and, under `--all-features`, the examples `cargo test` built) instead of
    // building them again.
    let features: Vec<&str> = FEATURES
        .iter()
        .filter_map(|&(feature, on)| on.then_some(feature))
        .collect();
    if !features.is_empty() {
        cargo.args(["--features", &features.join(",")]);
    }
    let output = cargo
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the examples failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(profile_dir.join("examples"))
}

/// A running example process, killed (by its PID) and reaped when dropped.
struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command to completion, killing it if it takes longer than `limit`.
fn run_with_limit(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let stdout_reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        text
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the example") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stdout =
                String::from_utf8_lossy(&stdout_reader.join().unwrap_or_default()).into_owned();
            panic!("the example ran longer than {limit:?}; its output so far:\n{stdout}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout_reader.join().unwrap_or_default(),
        stderr: stderr_reader.join().unwrap_or_default(),
    }
}

#[test]
fn oversell_oversells_without_the_lock_and_sells_exactly_500_with_it() {
    let bin = example("oversell");
    let _turn = turn(Load::Heavy);
    let mut command = Command::new(bin);
    // No REDIS_URL: the example starts (and must stop) a redis-server of its own.
    command.env_remove("REDIS_URL");
    let output = run_with_limit(command, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "oversell failed: {}\n{stdout}\n{stderr}",
        output.status
    );

    let round_two = stdout.split("Round 2").nth(1).expect("a second round");
    assert!(round_two.contains("-> 500 sold, stock left 0"), "{stdout}");
    assert!(round_two.contains("CORRECT"), "{stdout}");
    let round_one = stdout
        .split("Round 1")
        .nth(1)
        .and_then(|rest| rest.split("Round 2").next());
    assert!(
        round_one.is_some_and(|round| round.contains("WRONG")),
        "round 1 did not oversell:\n{stdout}"
    );

    // Its throwaway server is gone with it.
    let port: u16 = stdout
        .split("redis://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|port| port.parse().ok())
        .expect("the throwaway server's port in the output");
    assert!(
        port_closed(port),
        "the throwaway redis-server on port {port} outlived the example"
    );
}

/// Whether nothing listens on loopback `port` any more, within a second.
fn port_closed(port: u16) -> bool {
    (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    })
}

#[cfg(feature = "postgres")]
#[test]
fn accounts_postgres_refuses_the_paused_holder_and_balances_its_books() {
    let bin = example("accounts_postgres");
    let _turn = turn(Load::Heavy);
    let mut command = Command::new(bin);
    // Neither URL: it starts (and must stop) a PostgreSQL and a redis-server of its own.
    command.env_remove("DATABASE_URL").env_remove("REDIS_URL");
    let output = run_with_limit(command, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "accounts_postgres failed: {}\n{stdout}\n{stderr}",
        output.status
    );
    // Part 1: with the fence the paused holder's write is refused and B's deposit
    // stands; without it, B's deposit is lost.
    assert!(
        stdout.contains("with the fence: A's write is refused (stale fencing token"),
        "{stdout}"
    );
    assert!(stdout.contains("the balance is 1050"), "{stdout}");
    assert!(
        stdout.contains("without the fence: A's write lands; the balance is 990"),
        "{stdout}"
    );
    // Part 2: the books balance.
    assert!(
        stdout.contains("total 20000 (expected 20000); balances that disagree with the ledger: 0"),
        "{stdout}"
    );
    assert!(stdout.contains("OK: the books balance"), "{stdout}");
    // Its throwaway servers are gone with it.
    let port_after = |marker: &str| -> u16 {
        stdout
            .split(marker)
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no {marker:?} in the output:\n{stdout}"))
    };
    for port in [
        port_after("postgresql://holdlock@127.0.0.1:"),
        port_after("redis://127.0.0.1:"),
    ] {
        assert!(
            port_closed(port),
            "a throwaway server on port {port} outlived the example"
        );
    }
}

#[test]
fn cron_once_runs_each_period_exactly_once_across_skewed_instances() {
    let bin = example("cron_once");
    let redis = common::RedisServer::start();
    let mut command = Command::new(bin);
    command
        .env("REDIS_URL", redis.url())
        .args(["--seconds", "10"]);
    let output = run_with_limit(command, Duration::from_secs(40));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "cron_once failed: {}\n{stdout}\n{stderr}",
        output.status
    );

    // Table rows: `<period>  <hh:mm:ss>  <instance>  <notes>`.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|line| line.len() > 10 && line[..10].bytes().all(|b| b.is_ascii_digit()))
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 10, "ten periods in the table:\n{stdout}");
    let periods: Vec<u64> = rows.iter().map(|row| row[0].parse().unwrap()).collect();
    for pair in periods.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "consecutive periods, each once:\n{stdout}"
        );
    }
    for row in &rows {
        assert!(
            row[2].starts_with("host-") && !row[2].contains('+'),
            "one runner per period: {row:?}"
        );
        let notes = row[3..].join(" ");
        assert!(
            !notes.contains("NOT RUN") && !notes.contains("TIMES"),
            "{row:?}\n{stdout}"
        );
    }
    // The run that fails on purpose was taken over by another instance.
    assert!(
        rows.iter()
            .any(|row| row.join(" ").contains("failed first")),
        "{stdout}"
    );
    assert!(
        stdout.contains("OK: 10 periods, each run exactly once"),
        "{stdout}"
    );
}

/// One instance of the bank service, and the address it listens on.
struct BankInstance {
    address: SocketAddr,
    _process: Running,
}

fn start_bank(redis_url: &str, extra_args: &[&str]) -> BankInstance {
    let mut child = Command::new(example("accounts_http"))
        .args(["--port", "0", "--redis", redis_url])
        .args(extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start accounts_http");
    let stdout = child.stdout.take().expect("piped stdout");
    let process = Running { child };
    // Read lines until the address; keep draining afterwards so the pipe never fills.
    let (address_sender, address_receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(address) = line.strip_prefix("listening on ") {
                let _ = address_sender.send(address.trim().to_owned());
            }
        }
    });
    let address = address_receiver
        .recv_timeout(Duration::from_secs(20))
        .expect("accounts_http printed `listening on ADDRESS`");
    BankInstance {
        address: address.parse().expect("a socket address"),
        _process: process,
    }
}

/// One HTTP/1.1 request on a fresh connection: (status, body).
async fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {head:?}")))?;
    Ok((status, body.to_owned()))
}

async fn get_json(address: SocketAddr, path: &str) -> serde_json::Value {
    let (status, body) = http(address, "GET", path, None).await.expect("GET");
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).expect("a JSON body")
}

/// A small deterministic generator (SplitMix64), seeded per run and printed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

const ACCOUNTS: u64 = 20;
const TRANSFERS: usize = 2_000;

#[test]
fn two_bank_instances_keep_money_conserved_under_2000_concurrent_transfers() {
    let _turn = turn(Load::Heavy);
    let redis = common::RedisServer::start();
    // The first instance seeds the accounts before it listens; then the second starts.
    let first = start_bank(&redis.url(), &["--seed", &ACCOUNTS.to_string()]);
    let second = start_bank(&redis.url(), &[]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(transfer_storm(
        &redis.url(),
        [first.address, second.address],
    ));
    drop((first, second));
}

/// Fires the transfers at both instances and checks the books afterwards.
async fn transfer_storm(url: &str, addresses: [SocketAddr; 2]) {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("random seed {seed}");
    let mut random = Random(seed);
    let started = Instant::now();
    let mut requests = Vec::with_capacity(TRANSFERS);
    for n in 0..TRANSFERS {
        let from = random.between(1, ACCOUNTS);
        let to = (from + random.between(1, ACCOUNTS - 1) - 1) % ACCOUNTS + 1; // any other account
        let amount = random.between(1, 200);
        let address = addresses[n % 2];
        requests.push(tokio::spawn(async move {
            let body = format!(r#"{{"to": {to}, "amount": {amount}}}"#);
            let path = format!("/accounts/{from}/transfer");
            let reply = tokio::time::timeout(
                Duration::from_secs(45),
                http(address, "POST", &path, Some(&body)),
            )
            .await;
            (from, to, amount, reply)
        }));
    }
    let (mut moved, mut refused) = (0, 0);
    for request in requests {
        let (from, to, amount, reply) = request.await.unwrap();
        let what = format!("transfer {amount} from {from} to {to}");
        match reply {
            Err(_) => panic!("{what}: no answer within 45 s (seed {seed})"),
            Ok(Err(error)) => panic!("{what}: {error} (seed {seed})"),
            Ok(Ok((200, _))) => moved += 1,
            Ok(Ok((409, body))) => {
                assert!(body.contains("insufficient funds"), "{what}: 409 {body}");
                refused += 1;
            }
            Ok(Ok((status, body))) => panic!("{what}: {status} {body} (seed {seed})"),
        }
    }
    let took = started.elapsed();
    println!("{moved} transfers made, {refused} refused for funds, in {took:?}");
    assert!(moved > 0, "some transfers succeed");
    assert!(
        refused > 0,
        "some transfers are refused for insufficient funds (seed {seed})"
    );

    let mut sum = 0;
    for id in 1..=ACCOUNTS {
        let account = get_json(addresses[(id % 2) as usize], &format!("/accounts/{id}")).await;
        let balance = account["balance"].as_i64().expect("a balance");
        assert!(
            balance >= 0,
            "account {id} went negative: {balance} (seed {seed})"
        );
        sum += balance;
    }
    assert_eq!(sum, 20_000, "money was created or destroyed (seed {seed})");
    for address in addresses {
        let total = get_json(address, "/total").await;
        assert_eq!(total["total"], 20_000, "{total}");
        assert_eq!(total["accounts"], 20, "{total}");
    }

    // The bad requests are refused, not mishandled.
    let same = http(
        addresses[0],
        "POST",
        "/accounts/3/transfer",
        Some(r#"{"to": 3, "amount": 5}"#),
    )
    .await
    .unwrap();
    assert_eq!(same.0, 400, "{}", same.1);
    let unknown = http(
        addresses[1],
        "POST",
        "/accounts/3/transfer",
        Some(r#"{"to": 99, "amount": 5}"#),
    )
    .await
    .unwrap();
    assert_eq!(unknown.0, 404, "{}", unknown.1);

    // The bank serves holdlock's metrics.
    let (status, metrics) = http(addresses[0], "GET", "/metrics", None).await.unwrap();
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains("holdlock_acquisitions_total{outcome=\"granted\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("holdlock_locks_held"), "{metrics}");

    // Every hold was released, nested ones included.
    let inspector = LockClient::connect(url).await.unwrap();
    let held = inspector.list("account:*").await.unwrap();
    assert!(held.is_empty(), "locks left held: {held:?}");
    inspector.shutdown().await;
}

/// Runs the chaos checker with `args` and returns its exit code and JSON summary.
fn chaos(args: &[&str], limit: Duration) -> (Option<i32>, serde_json::Value, String) {
    let summary = temp_path(".json");
    let mut command = Command::new(example("chaos"));
    command.args(args).arg("--json").arg(&summary);
    let output = run_with_limit(command, limit);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let json = std::fs::read(&summary)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("no summary was written:\n{text}"));
    let _ = std::fs::remove_file(&summary);
    (output.status.code(), json, text)
}

/// A 20-second run of the chaos checker's `mode` under every kind of fault, seeded:
/// no violation, and more than `acquisitions` acquisitions. Its summary and output.
fn chaos_finds_nothing(mode: &str, seed: &str, acquisitions: u64) -> (serde_json::Value, String) {
    chaos_run_finds_nothing(&["--lock", mode, "--seed", seed], acquisitions)
}

/// As [`chaos_finds_nothing`], with two of the six workers Java Redisson processes
/// (`mode` is one in Redisson's layout): more than `acquisitions` acquisitions by each
/// side.
fn chaos_with_java_finds_nothing(
    mode: &str,
    seed: &str,
    acquisitions: u64,
) -> (serde_json::Value, String) {
    common::java::peer_jar();
    let args = ["--lock", mode, "--seed", seed, "--java-workers", "2"];
    let (summary, text) = chaos_run_finds_nothing(&args, acquisitions);
    assert_each_side_acquired(&summary, acquisitions, &text);
    (summary, text)
}

/// A 20-second run of the chaos checker with `args`: no violation, and more than
/// `acquisitions` acquisitions.
fn chaos_run_finds_nothing(args: &[&str], acquisitions: u64) -> (serde_json::Value, String) {
    let args = [args, &["--duration", "20s"]].concat();
    let (code, summary, text) = chaos(&args, Duration::from_secs(180));
    assert_eq!(code, Some(0), "violations found:\n{text}");
    assert_eq!(summary["violations"], serde_json::json!({}), "{text}");
    assert!(
        summary["acquisitions"].as_u64() > Some(acquisitions),
        "{text}"
    );
    (summary, text)
}

/// Java Redisson's workers and holdlock's each acquired more than `acquisitions`.
fn assert_each_side_acquired(summary: &serde_json::Value, acquisitions: u64, text: &str) {
    let all = summary["acquisitions"].as_u64().unwrap_or(0);
    let java = summary["java_acquisitions"].as_u64().unwrap_or(0);
    assert!(java > acquisitions, "Java acquired {java}:\n{text}");
    assert!(
        all - java > acquisitions,
        "Rust acquired {}:\n{text}",
        all - java
    );
}

/// The fair order check (check 6) had more than 100 pairs of calls to check.
fn assert_order_checked(summary: &serde_json::Value, text: &str) {
    assert!(
        summary["fifo_pairs_checked"].as_u64() > Some(100),
        "the order check had nothing to check:\n{text}"
    );
}

/// A fresh path in the temporary directory, ending in `suffix`.
fn temp_path(suffix: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "holdlock-chaos-{}{suffix}",
        uuid::Uuid::new_v4().simple()
    ))
}

/// A calm 10-second run of the chaos checker's `mode` (no fault), with `extra`
/// arguments: its exit code, JSON summary and output.
fn calm_chaos(mode: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let args = [
        &["--lock", mode, "--duration", "10s", "--faults", "none"],
        extra,
    ]
    .concat();
    chaos(&args, Duration::from_secs(120))
}

/// A calm 10-second run of the deliberately broken `mode`: the checker must fail it
/// with `violation`, and fail its history again when it is checked on its own
/// (`--recheck`). Its summary and output.
fn chaos_catches(mode: &str, violation: &str) -> (serde_json::Value, String) {
    let history = temp_path(".jsonl");
    let (code, summary, text) = calm_chaos(mode, &["--history", history.to_str().unwrap()]);
    assert_eq!(code, Some(1), "the broken `{mode}` passed:\n{text}");
    assert!(
        summary["violations"][violation].as_u64() > Some(0),
        "{text}"
    );
    let (again, summary_again, text_again) = recheck_file(&history);
    let _ = std::fs::remove_file(&history);
    assert_eq!(
        again,
        Some(1),
        "the history passed when checked again:\n{text_again}"
    );
    assert_eq!(
        summary_again["violations"][violation], summary["violations"][violation],
        "{text_again}"
    );
    (summary, text)
}

#[test]
fn the_chaos_checker_finds_no_violation_in_holdlock_under_every_fault() {
    let _turn = turn(Load::Light);
    // The short mode: one minute, a fixed seed, every kind of fault.
    let (code, summary, text) = chaos(
        &["--duration", "60s", "--seed", "1"],
        Duration::from_secs(240),
    );
    assert_eq!(code, Some(0), "violations found:\n{text}");
    assert_eq!(summary["violations"], serde_json::json!({}), "{text}");
    assert_eq!(summary["token_regressions"], 0, "{text}");
    for fault in [
        "pause (SIGSTOP past the lease)",
        "kill (SIGKILL, replaced)",
        "CLIENT KILL",
        "SCRIPT FLUSH",
        "redis-server restart",
        "partition (black hole)",
        "partition (reset)",
    ] {
        assert!(
            summary["faults"][fault].as_u64() > Some(0),
            "seed 1 never injected {fault}:\n{text}"
        );
    }
    // Work got done, and the checks had something to check.
    assert!(summary["acquisitions"].as_u64() > Some(500), "{text}");
    assert!(summary["nested_acquisitions"].as_u64() > Some(0), "{text}");
    assert!(
        summary["register_total"].as_u64() >= summary["writes"]["ok"].as_u64(),
        "every accepted write is in the registers:\n{text}"
    );
}

#[test]
fn the_chaos_checker_catches_a_broken_lock() {
    let _turn = turn(Load::Light);
    // The tutorial lock: SET NX PX, DEL to release, no renewal. Holds longer than the
    // lease overlap with the next holder, with no fault needed.
    let (code, summary, text) = chaos(
        &["--lock", "naive", "--duration", "15s", "--faults", "none"],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(1), "the broken lock passed:\n{text}");
    assert!(
        summary["violations"]["overlapping holders"].as_u64() > Some(0),
        "{text}"
    );
    assert!(text.contains("VIOLATIONS FOUND"), "{text}");
}

#[test]
fn the_chaos_checker_finds_no_violation_in_the_multi_lock() {
    let _turn = turn(Load::Light);
    // Transfers under `lock_all` (two names a round, both registers incremented) with
    // every kind of fault; the 30-minute soak's figures are in docs/chaos.md.
    let (summary, text) = chaos_finds_nothing("multi", "3", 200);
    // Every accepted write is in the registers, and nothing else but writes whose
    // reply was lost (they may have landed).
    let count = |outcome: &str| summary["writes"][outcome].as_u64().unwrap_or(0);
    let total = summary["register_total"].as_u64().unwrap_or(0);
    assert!(
        (count("ok")..=count("ok") + count("unknown")).contains(&total),
        "the registers hold {total}:\n{text}"
    );
}

#[test]
fn the_chaos_checker_catches_a_broken_multi_lock() {
    let _turn = turn(Load::Light);
    // Hand over hand: the first name is let go once the second is held, while both
    // registers are still written. Calm run: the overlap needs no fault.
    chaos_catches("multi-broken", "overlapping holders");
}

#[test]
fn the_chaos_checker_finds_no_violation_in_redissons_layout() {
    let _turn = turn(Load::Heavy);
    // The mutex in Redisson's layout (its own acquire and release scripts, key,
    // channel and INCR fencing counter) under every kind of fault, with Java
    // Redisson's RFencedLock in two of the six workers: one sequence of tokens.
    let (summary, text) = chaos_with_java_finds_nothing("redisson", "7", 50);
    assert_eq!(summary["token_regressions"], 0, "{text}");
}

#[test]
fn the_chaos_checker_finds_java_and_rust_holders_of_every_redisson_kind_exclude_each_other() {
    let _turn = turn(Load::Heavy);
    common::java::peer_jar();
    // Without faults nothing excuses an overlap: Java Redisson's RFencedLock,
    // RReadWriteLock, RFairLock and RPermitExpirableSemaphore beside holdlock's kinds
    // in Redisson's layout, on the same names, hold them in turn (and the fair lock in
    // the order the calls began).
    // (The fair lock hands over one holder at a time through its queue: fewer rounds.)
    for (mode, acquisitions) in [
        ("redisson", 50),
        ("redisson-rw", 50),
        ("redisson-fair", 15),
        ("redisson-sem", 50),
    ] {
        let (code, summary, text) = calm_chaos(mode, &["--java-workers", "3"]);
        assert_eq!(code, Some(0), "{mode}: violations found:\n{text}");
        assert_eq!(
            summary["violations"],
            serde_json::json!({}),
            "{mode}: {text}"
        );
        assert_eq!(summary["overlaps_java_not_told"], 0, "{mode}: {text}");
        assert_each_side_acquired(&summary, acquisitions, &text);
    }
}

#[test]
fn chaos_workers_started_while_their_redis_is_down_connect_once_it_is_back() {
    // A restart, a partition or a topology change may meet a worker's start (each
    // replaces a killed one): Rust and Java workers alike start again until Redis
    // answers, rather than exit and be counted as failed. Down 4 s, twice the Rust
    // worker's connect timeout.
    let jar = common::java::peer_jar();
    let mut redis = common::RedisServer::start();
    let url = redis.url();
    let rust = {
        let mut rust = Command::new(example("chaos"));
        rust.args(["worker", "--lock", "holdlock"]);
        rust
    };
    let java = {
        let mut java = Command::new("java");
        java.arg("-cp")
            .arg(&jar)
            .arg("holdlock.interop.ChaosWorker")
            .args(["--lock", "redisson-fair"]);
        java
    };
    for (side, mut worker) in [("rust", rust), ("java", java)] {
        let output = std::thread::scope(|scope| {
            let restart = scope.spawn(|| redis.restart_after(Duration::from_secs(4)));
            // The old server stops at once; the worker starts while it is down.
            std::thread::sleep(Duration::from_millis(500));
            worker.args(["--lock-url", &url, "--resource-url", &url]);
            let output = run_with_limit(worker, Duration::from_secs(90));
            restart.join().unwrap();
            output
        });
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.code(), Some(0), "{side}: {text}");
        assert!(text.contains(r#""op":"ready""#), "{side}: {text}");
    }
}

/// Checks the history in `path` with `chaos --recheck`: the exit code, summary and
/// output.
fn recheck_file(path: &Path) -> (Option<i32>, serde_json::Value, String) {
    chaos(
        &["--recheck", path.to_str().unwrap()],
        Duration::from_secs(60),
    )
}

/// Checks `history` (JSON lines) with `chaos --recheck`: the exit code, summary and
/// output.
fn recheck(history: &str) -> (Option<i32>, serde_json::Value, String) {
    let path = temp_path(".jsonl");
    std::fs::write(&path, history).unwrap();
    let checked = recheck_file(&path);
    let _ = std::fs::remove_file(&path);
    checked
}

/// Checks `history` twice, its worker 0 (`{java}` in its `ready` line) a Java worker
/// and then a Rust one: the first finds no violation, the second some. Both summaries
/// and outputs.
fn recheck_as_java_and_rust(
    history: &str,
) -> ((serde_json::Value, String), (serde_json::Value, String)) {
    let (code, java, java_text) = recheck(&history.replace("{java}", r#","java":true"#));
    assert_eq!(code, Some(0), "{java_text}");
    let (code, rust, rust_text) = recheck(&history.replace("{java}", ""));
    assert_eq!(code, Some(1), "{rust_text}");
    ((java, java_text), (rust, rust_text))
}

#[test]
fn the_chaos_checker_counts_java_redissons_own_ways_apart_for_java_workers_only() {
    // After a restart lost the counter, worker 0 draws token 1 (below worker 1's 1000
    // before it), and releases a fair lock the restart lost as if it held it: what
    // RFencedLock's INCR and RFairLock.unlock do. From a Java worker each is counted
    // apart; from a Rust worker each is a violation.
    let history = r#"{"w":0,"op":"ready","t":1{java}}
{"w":1,"op":"ready","t":1}
{"w":1,"op":"start","t":10,"a":1,"name":"chaos:0","wait_ms":100}
{"w":1,"op":"grant","t":20,"a":1,"token":1000}
{"w":0,"op":"start","t":21,"a":2,"name":"chaos:1","wait_ms":100,"fifo":true}
{"w":0,"op":"grant","t":22,"a":2,"token":0}
{"w":1,"op":"unlock","t":30,"a":1}
{"w":1,"op":"unlocked","t":31,"a":1,"released":"ok"}
{"fault":"restart","t":40,"until":50}
{"w":0,"op":"start","t":60,"a":1,"name":"chaos:0","wait_ms":100}
{"w":0,"op":"grant","t":70,"a":1,"token":1}
{"w":0,"op":"unlock","t":80,"a":1}
{"w":0,"op":"unlocked","t":81,"a":1,"released":"not_held"}
{"w":0,"op":"unlock","t":90,"a":2}
{"w":0,"op":"unlocked","t":91,"a":2,"released":"ok"}
"#;
    let ((java, java_text), (rust, rust_text)) = recheck_as_java_and_rust(history);
    assert_eq!(java["java_tokens_started_over"], 1, "{java_text}");
    assert_eq!(java["java_fair_releases_not_told"], 1, "{java_text}");
    assert_eq!(rust["violations"]["token regression"], 1, "{rust_text}");
    assert_eq!(rust["violations"]["restart not noticed"], 1, "{rust_text}");
}

#[test]
fn the_chaos_checker_excuses_what_a_fault_does_to_a_java_worker_and_never_to_a_rust_one() {
    // Worker 0 is cut off by a black hole three times. On chaos:0 while it holds: worker
    // 1 is granted once the hold ran out, and worker 0 (never told) releases after.
    // On chaos:1 its wait ends in an error, and its next wait, begun after worker 1's,
    // is served first (from the place the first one kept). On chaos:2 while it waits
    // ahead of worker 1: worker 2, come after worker 1, is served first (the cut-off
    // waiter's leave ran worker 1's deadline out). Redisson's ways for a Java worker,
    // counted apart; violations for a Rust one.
    let history = r#"{"w":0,"op":"ready","t":1{java}}
{"w":1,"op":"ready","t":1}
{"w":2,"op":"ready","t":1}
{"w":0,"op":"start","t":10000,"a":1,"name":"chaos:0","wait_ms":100}
{"w":0,"op":"grant","t":20000,"a":1,"token":0}
{"fault":"black_hole","t":30000,"until":1000000,"w":0}
{"w":1,"op":"start","t":40000,"a":1,"name":"chaos:0","wait_ms":2000}
{"w":1,"op":"grant","t":1100000,"a":1,"token":0}
{"w":0,"op":"unlock","t":1200000,"a":1}
{"w":0,"op":"unlocked","t":1201000,"a":1,"released":"not_held"}
{"w":1,"op":"unlock","t":1300000,"a":1}
{"w":1,"op":"unlocked","t":1301000,"a":1,"released":"ok"}
{"w":0,"op":"start","t":5000000,"a":5,"name":"chaos:1","wait_ms":2000,"fifo":true}
{"w":1,"op":"start","t":5100000,"a":5,"name":"chaos:1","wait_ms":2000,"fifo":true}
{"w":0,"op":"error","t":5300000,"a":5,"error":"timed out"}
{"w":0,"op":"start","t":5300001,"a":6,"name":"chaos:1","wait_ms":2000,"fifo":true}
{"w":0,"op":"grant","t":5400000,"a":6,"token":0}
{"w":0,"op":"unlock","t":5410000,"a":6}
{"w":0,"op":"unlocked","t":5411000,"a":6,"released":"ok"}
{"w":1,"op":"grant","t":5420000,"a":5,"token":0}
{"w":1,"op":"unlock","t":5430000,"a":5}
{"w":1,"op":"unlocked","t":5431000,"a":5,"released":"ok"}
{"w":0,"op":"start","t":10000000,"a":10,"name":"chaos:2","wait_ms":2000,"fifo":true}
{"fault":"black_hole","t":10050000,"until":10500000,"w":0}
{"w":1,"op":"start","t":10100000,"a":10,"name":"chaos:2","wait_ms":2000,"fifo":true}
{"w":2,"op":"start","t":10200000,"a":10,"name":"chaos:2","wait_ms":2000,"fifo":true}
{"w":0,"op":"busy","t":10510000,"a":10}
{"w":2,"op":"grant","t":10520000,"a":10,"token":0}
{"w":2,"op":"unlock","t":10530000,"a":10}
{"w":2,"op":"unlocked","t":10531000,"a":10,"released":"ok"}
{"w":1,"op":"grant","t":10600000,"a":10,"token":0}
{"w":1,"op":"unlock","t":10610000,"a":10}
{"w":1,"op":"unlocked","t":10611000,"a":10,"released":"ok"}
"#;
    let ((java, java_text), (rust, rust_text)) = recheck_as_java_and_rust(history);
    assert_eq!(java["overlaps_java_not_told"], 1, "{java_text}");
    assert_eq!(java["java_waits_in_a_kept_place"], 1, "{java_text}");
    assert_eq!(java["passed_over_behind_java_cut_off"], 1, "{java_text}");
    assert_eq!(rust["violations"]["overlapping holders"], 1, "{rust_text}");
    assert_eq!(rust["violations"]["served out of order"], 2, "{rust_text}");
}

#[test]
fn the_chaos_checker_excuses_a_holder_whose_process_stalled_past_its_lost_deadline_only() {
    // A 1 s lease (the recheck's default): the lost deadline is 0.9 s after the call's
    // attempt at the earliest, or a tenth of a lease before a renewal's `after +
    // margin_ms`. On chaos:0 worker 0's process stops 0.1 s after its grant (both
    // probes stall), worker 1 is granted at 1.2 s, and worker 0 hears of the loss 15 ms
    // after it runs again: excused. On chaos:5 the stall begins at 1 s, after the
    // call's 0.9 s, but a renewal seen at 0.68 s puts the deadline at 1.23 s at the
    // earliest: excused. Violations: only the probe thread stalled (chaos:1: the runtime
    // ran, its watchdog could tell); a stall begun after the earliest deadline
    // (chaos:2, and chaos:6, whose second renewal was seen only once the stall had
    // begun); a grant less than 0.9 s after the stall began (chaos:3: a renewal sent
    // just before it would still have held); the holder told 150 ms after it ran again
    // (chaos:4).
    let both = |from, until| [Some((from, until)), Some((from, until))];
    let early: &[(u64, u64, u64)] = &[(340_000, 330_000, 660)];
    let renewed = [early, &[(680_000, 670_000, 660)]].concat();
    let renewed_late = [early, &[(1_010_000, 670_000, 660)]].concat();
    // One name's holder (worker 2n) and the other (worker 2n + 1): the holder's
    // probes' stalls (thread, runtime: from, until), its renewals seen (t, after,
    // margin_ms), the other's grant and the holder's lost signal.
    struct Scenario<'a> {
        probes: [Option<(u64, u64)>; 2],
        renewals: &'a [(u64, u64, u64)],
        granted: u64,
        lost: u64,
    }
    let stopped = [Some((100_000, 1_300_000)), Some((100_000, 1_295_000))];
    let scenarios = [
        Scenario {
            probes: stopped,
            renewals: &[],
            granted: 1_200_000,
            lost: 1_310_000,
        },
        Scenario {
            probes: [Some((100_000, 1_300_000)), None],
            renewals: &[],
            granted: 1_200_000,
            lost: 1_310_000,
        },
        Scenario {
            probes: both(950_000, 2_000_000),
            renewals: &[],
            granted: 1_900_000,
            lost: 2_010_000,
        },
        Scenario {
            probes: both(100_000, 1_300_000),
            renewals: &[],
            granted: 950_000,
            lost: 1_310_000,
        },
        Scenario {
            probes: stopped,
            renewals: &[],
            granted: 1_200_000,
            lost: 1_445_000,
        },
        Scenario {
            probes: both(1_000_000, 2_300_000),
            renewals: &renewed,
            granted: 1_950_000,
            lost: 2_310_000,
        },
        Scenario {
            probes: both(1_000_000, 2_300_000),
            renewals: &renewed_late,
            granted: 1_950_000,
            lost: 2_310_000,
        },
    ];
    let mut history = String::new();
    for (n, scenario) in scenarios.iter().enumerate() {
        let Scenario {
            probes,
            renewals,
            granted,
            lost,
        } = *scenario;
        let (holder, other) = (2 * n, 2 * n + 1);
        history.push_str(&format!(
            r#"{{"w":{holder},"op":"start","t":1000,"a":1,"name":"chaos:{n}","wait_ms":100}}
{{"w":{holder},"op":"grant","t":2000,"a":1,"token":0}}
{{"w":{other},"op":"start","t":500000,"a":1,"name":"chaos:{n}","wait_ms":2000}}
{{"w":{other},"op":"grant","t":{granted},"a":1,"token":0}}
{{"w":{other},"op":"unlock","t":{},"a":1}}
{{"w":{other},"op":"unlocked","t":{},"a":1,"released":"ok"}}
{{"w":{holder},"op":"lost","t":{lost},"a":1}}
{{"w":{holder},"op":"unlock","t":{},"a":1}}
{{"w":{holder},"op":"unlocked","t":{},"a":1,"released":"not_held"}}
"#,
            granted + 10_000,
            granted + 11_000,
            lost + 100,
            lost + 200,
        ));
        for (probe, stall) in ["thread", "runtime"].into_iter().zip(probes) {
            if let Some((t, until)) = stall {
                history.push_str(&format!(
                    r#"{{"w":{holder},"op":"stall","t":{t},"until":{until},"probe":"{probe}"}}
"#
                ));
            }
        }
        for (t, after, margin_ms) in renewals {
            history.push_str(&format!(
                r#"{{"w":{holder},"op":"renewed","t":{t},"a":1,"after":{after},"margin_ms":{margin_ms}}}
"#
            ));
        }
    }
    let (code, summary, text) = recheck(&history);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(summary["overlaps_after_stall"], 2, "{text}");
    assert_eq!(summary["violations"]["overlapping holders"], 5, "{text}");
    assert_eq!(summary["renewals_seen"], 4, "{text}");
    // The processes' stalls: workers 0, 4, 6, 8, 10 and 12 (worker 2's runtime ran).
    assert_eq!(summary["stalls"], 6, "{text}");
    assert_eq!(summary["longest_stall_ms"], 1_300, "{text}");
    // Each report names the stall and what it lacked.
    for why in [
        "after the earliest its lost deadline could be",
        "less than 0.9 lease before the grant",
        "believed on for 150 ms after it ran again",
    ] {
        assert!(text.contains(why), "{why}: {text}");
    }
}

#[test]
fn the_chaos_checker_finds_no_violation_in_the_read_write_lock() {
    let _turn = turn(Load::Light);
    // Readers and writers under every kind of fault: readers may overlap, a writer
    // never overlaps anyone (outside the excused pauses and restarts).
    chaos_finds_nothing("rw", "5", 100);
}

#[test]
fn the_chaos_checker_finds_no_violation_in_redissons_read_write_layout() {
    let _turn = turn(Load::Heavy);
    // The read-write lock in Redisson's layout (its own scripts, timeout keys per read
    // hold, channel and messages) under every kind of fault, beside Java Redisson's
    // RReadWriteLock.
    chaos_with_java_finds_nothing("redisson-rw", "5", 25);
}

#[test]
fn the_chaos_checker_finds_no_violation_in_redissons_semaphore_layout() {
    let _turn = turn(Load::Heavy);
    // The semaphore in Redisson's layout (the count of free permits at the name, the
    // permits' deadlines beside it) under every kind of fault: never more holders than
    // permits, and every permit back at the end; beside Java Redisson's
    // RPermitExpirableSemaphore.
    chaos_with_java_finds_nothing("redisson-sem", "5", 25);
}

#[test]
fn the_chaos_checker_catches_a_broken_read_write_lock() {
    let _turn = turn(Load::Light);
    // Writers that take the read side: they overlap readers and each other.
    chaos_catches("rw-broken", "overlapping holders");
}

#[test]
fn the_chaos_checker_finds_no_violation_in_the_fair_lock() {
    let _turn = turn(Load::Light);
    // Fair locks (half the rounds fenced) under every kind of fault: no overlap, rising
    // tokens, and calls served in the order they arrived (a 50 ms tie window; a caller
    // that a fault hit while it waited may be passed over).
    let (summary, text) = chaos_finds_nothing("fair", "3", 200);
    assert_eq!(summary["token_regressions"], 0, "{text}");
    assert_order_checked(&summary, &text);
}

#[test]
fn the_chaos_checker_finds_no_violation_in_redissons_fair_layout() {
    let _turn = turn(Load::Light);
    // The fair lock in Redisson's layout (its queue, deadlines and per-waiter
    // channels) under every kind of fault: no overlap, and calls served in the order
    // they arrived. Rust workers only, with a 2 s fair wait: stale heads are dropped
    // often, and ours must take their places back.
    let (summary, text) = chaos_finds_nothing("redisson-fair", "7", 100);
    assert_order_checked(&summary, &text);
}

#[test]
fn the_chaos_checker_finds_no_violation_in_redissons_fair_layout_beside_java_redisson() {
    let _turn = turn(Load::Heavy);
    // The same beside Java Redisson's RFairLock, every worker with a 10 s fair wait
    // (Redisson's waiters keep their places only while the holds ahead are short: see
    // docs/chaos.md, "Java workers"); what Redisson does to a Java waiter cut off, or
    // to those behind it, is counted apart.
    let (summary, text) = chaos_with_java_finds_nothing("redisson-fair", "7", 15);
    assert_order_checked(&summary, &text);
}

#[test]
fn the_chaos_checker_catches_a_lock_that_is_not_fair() {
    let _turn = turn(Load::Light);
    // The mutex checked as a fair lock: it never overlaps, but pub/sub wakes every
    // waiter and the fastest wins, so later callers overtake earlier ones.
    let (summary, text) = chaos_catches("fair-broken", "served out of order");
    assert!(
        summary["violations"]["overlapping holders"].is_null(),
        "the mutex overlapped:\n{text}"
    );
}

#[test]
fn the_chaos_checker_finds_no_violation_in_the_semaphore() {
    let _turn = turn(Load::Light);
    // Permits under every kind of fault: never more than the permits at once.
    chaos_finds_nothing("sem", "3", 200);
}

#[test]
fn the_chaos_checker_catches_a_semaphore_with_a_permit_too_many() {
    let _turn = turn(Load::Light);
    // One permit more than the checker allows: three holders at once is an overlap.
    chaos_catches("sem-broken", "overlapping holders");
}

#[test]
fn the_chaos_checker_finds_no_violation_on_a_cluster() {
    let _turn = turn(Load::Light);
    // `--cluster`: the locks on 3 primaries with a replica each, workers connected
    // directly, while slots move, a primary is emptied and refilled, and replicas take
    // over (coordinated), besides the process faults. The topology faults take turns,
    // so 30 s sees at least a reshard (each takes seconds).
    let (code, summary, text) = chaos(
        &["--cluster", "--duration", "30s", "--seed", "2"],
        Duration::from_secs(240),
    );
    assert_eq!(code, Some(0), "violations found:\n{text}");
    assert_eq!(summary["violations"], serde_json::json!({}), "{text}");
    assert_eq!(summary["token_regressions"], 0, "{text}");
    assert!(
        summary["faults"]["reshard (slots moved)"].as_u64() > Some(0),
        "no slots moved:\n{text}"
    );
    for fault in ["partition (black hole)", "redis-server restart"] {
        assert!(
            summary["faults"][fault].is_null(),
            "not offered on a cluster:\n{text}"
        );
    }
    assert!(summary["acquisitions"].as_u64() > Some(300), "{text}");
    assert!(
        summary["register_total"].as_u64() >= summary["writes"]["ok"].as_u64(),
        "every accepted write is in the registers:\n{text}"
    );
}

/// The bank's figure `field` (`committed`, `stale`, ... under `outcomes`).
#[cfg(feature = "postgres")]
fn bank_outcome(summary: &serde_json::Value, outcome: &str) -> u64 {
    summary["bank"]["outcomes"][outcome].as_u64().unwrap_or(0)
}

#[cfg(feature = "postgres")]
#[test]
fn the_chaos_checker_finds_no_violation_in_the_bank_workload() {
    let _turn = turn(Load::Light);
    // Transfers between accounts in PostgreSQL under fenced `lock_all`, fenced in the
    // database too, under every fault of one lock server and `db-kill`; the 10-minute
    // soaks' figures are in docs/chaos.md.
    let (code, summary, text) = chaos(
        &["--workload", "bank", "--duration", "25s", "--seed", "5"],
        Duration::from_secs(240),
    );
    assert_eq!(code, Some(0), "violations found:\n{text}");
    assert_eq!(summary["violations"], serde_json::json!({}), "{text}");
    assert_eq!(summary["token_regressions"], 0, "{text}");
    let bank = &summary["bank"];
    assert_eq!(bank["final_total"], bank["expected_total"], "{text}");
    assert!(bank_outcome(&summary, "committed") > 200, "{text}");
    assert!(
        bank["ledger_rows"].as_u64() >= Some(bank_outcome(&summary, "committed")),
        "{text}"
    );
}

#[cfg(feature = "postgres")]
#[test]
fn the_chaos_checker_catches_the_bank_without_its_fences_and_passes_it_with_them() {
    let _turn = turn(Load::Light);
    // One round in ten holds a fixed lease and stalls past it, with no fault needed:
    // without the fences in PostgreSQL, a stalled holder's write overwrites a newer
    // holder's, and the balances no longer agree with the ledger.
    let calm = ["--overruns", "10", "--faults", "none", "--seed", "2"];
    let (code, summary, text) = chaos(
        &[
            &["--workload", "bank-unfenced", "--duration", "10s"],
            &calm[..],
        ]
        .concat(),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(1), "the unfenced bank passed:\n{text}");
    assert!(
        summary["violations"]["bank: a balance disagrees with the ledger"].as_u64() > Some(0),
        "{text}"
    );
    // With them, the same stalls are refused (stale tokens) or waited for.
    let (code, summary, text) = chaos(
        &[&["--workload", "bank", "--duration", "15s"], &calm[..]].concat(),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "violations found:\n{text}");
    assert_eq!(summary["violations"], serde_json::json!({}), "{text}");
    assert!(
        bank_outcome(&summary, "stale") > 0,
        "no fence refused a stall:\n{text}"
    );
}
