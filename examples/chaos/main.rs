//! A chaos checker for holdlock: real worker processes take locks and do fenced
//! read-modify-writes while a nemesis pauses, kills, disconnects and partitions them and
//! restarts Redis; afterwards a checker reads the history and counts violations.
//!
//! ```text
//! cargo run --example chaos                                   # 60 s, seed 1
//! cargo run --example chaos -- --duration 30m --seed 7        # a soak
//! cargo run --example chaos -- --lock naive --duration 15s    # a broken lock: must fail
//! cargo run --example chaos -- --cluster --duration 5m        # the locks on a Redis Cluster
//! cargo run --example chaos --features postgres -- --workload bank   # transfers in PostgreSQL
//! ```
//!
//! Options (defaults in brackets): `--duration` [60s], `--seed` [1], `--workers` [6]
//! processes, `--tasks` [4] per worker, `--names` [4] locks, `--lease` [1s],
//! `--deadlock-check` [the library's: 1s, on], `--fault-every` [2s] (mean gap between faults), `--faults` [all: pause, kill,
//! client-kill, script-flush, restart, black-hole, reset (with `--cluster`: pause, kill,
//! client-kill, script-flush, reshard, empty, failover, node-restart, rolling-restart);
//! `none` for a
//! calm run],
//! `--lock` [holdlock | redisson | naive | multi | multi-broken | rw | rw-broken |
//! redisson-rw | fair | redisson-fair | fair-broken | sem | sem-broken | redisson-sem],
//! `--java-workers` [0] (how many of the workers are Java Redisson processes, for the
//! modes in Redisson's layout: `redisson`, `redisson-rw`, `redisson-fair`,
//! `redisson-sem`; they run `tests/interop-java`'s `ChaosWorker`, so that jar must be
//! built: `(cd tests/interop-java && mvn -q -B package -DskipTests)`),
//! `--history FILE` (one JSON line per event), `--json FILE` (the
//! summary), `--cluster` (no value), `--recheck FILE` (no run: check the history a
//! `--history` wrote again, without the final state it does not hold: registers'
//! values and keys left; give it the run's `--lease`), `--workload` [locks | bank |
//! bank-unfenced] (`bank.rs`: transfers between `--names` accounts in PostgreSQL under
//! fenced `lock_all`, fenced in the database too; it needs the `postgres` feature and
//! PostgreSQL's binaries, and adds the fault `db-kill`), `--overruns` [1] (the bank's
//! rounds in a hundred that hold a fixed lease and stall past it). It always starts its own two redis-servers (locks,
//! and the registers the locks protect), so that it can restart the first, and for the
//! bank a throwaway PostgreSQL.
//!
//! With `--cluster` the locks live on a Redis Cluster of its own instead: 3 primaries
//! with a replica each, which the workers reach directly with a `redis-cluster://` URL
//! (no proxies, so no black-hole or reset faults, and no restart of an empty server).
//! Its faults are pause, kill, client-kill and script-flush (on every node) and the
//! topology faults `reshard` (500 to 3,000 slots from one primary to another), `empty`
//! (every slot of a primary to another, then a rebalance over all three), `failover`
//! (a coordinated `CLUSTER FAILOVER` on a replica), `node-restart` (a replica, a
//! primary with its data, or a primary after its replica took over) and
//! `rolling-restart` (every node in turn: each replica, then each primary after its
//! replica took over), which need `redis-cli`.
//!
//! Exit status: 0 when no violation was found, 1 when one was, 2 when the run itself
//! failed.
//!
//! See `docs/chaos.md` for what is checked and the figures of a long run.

mod bank;
mod checker;
mod history;
mod nemesis;
mod proxy;
#[path = "../support/mod.rs"]
mod support;
mod topology;
mod worker;

use std::time::Duration;

pub use support::BoxError;

/// The register a lock protects, on the resource server.
pub fn register_key(name: &str) -> String {
    format!("register:{{{name}}}")
}

/// A small seeded generator (SplitMix64): runs repeat with their seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose numbers follow from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 for n = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Parses `500ms`, `2s`, `30m`, `1h`.
fn duration(text: &str) -> Result<Duration, BoxError> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` needs a unit (ms, s, m, h)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number * 60),
        "h" => Duration::from_secs(number * 3_600),
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (ms, s, m, h)").into()),
    })
}

/// The command line, as `--flag value` pairs (a switch, such as `--cluster`, takes no
/// value).
struct Args(Vec<(String, String)>);

/// The options that take no value.
const SWITCHES: [&str; 1] = ["cluster"];

impl Args {
    fn parse(args: impl Iterator<Item = String>) -> Result<Self, BoxError> {
        let mut pairs = Vec::new();
        let mut args = args.peekable();
        while let Some(flag) = args.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument `{flag}`"))?;
            if SWITCHES.contains(&name) {
                pairs.push((name.to_owned(), String::new()));
                continue;
            }
            let value = args
                .next()
                .ok_or_else(|| format!("`{flag}` needs a value"))?;
            pairs.push((name.to_owned(), value));
        }
        Ok(Args(pairs))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(flag, _)| flag == name)
            .map(|(_, value)| value.as_str())
    }

    fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, BoxError> {
        match self.get(name) {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| format!("--{name}: `{text}` is not a number").into()),
        }
    }

    fn duration(&self, name: &str, default: Duration) -> Result<Duration, BoxError> {
        self.get(name).map_or(Ok(default), |text| {
            duration(text).map_err(|e| format!("--{name}: {e}").into())
        })
    }

    fn check_known(&self, known: &[&str]) -> Result<(), BoxError> {
        match self
            .0
            .iter()
            .find(|(flag, _)| !known.contains(&flag.as_str()))
        {
            Some((flag, _)) => Err(format!("unknown option --{flag}").into()),
            None => Ok(()),
        }
    }
}

fn workload(args: &Args) -> Result<bank::Workload, BoxError> {
    let name = args.get("workload").unwrap_or("locks");
    let workload = bank::Workload::parse(name)
        .ok_or_else(|| format!("--workload: `{name}` (locks, bank or bank-unfenced)"))?;
    if workload.is_bank() && !cfg!(feature = "postgres") {
        return Err(bank::NEEDS_THE_FEATURE.into());
    }
    Ok(workload)
}

fn lock_kind(args: &Args) -> Result<worker::LockKind, BoxError> {
    let name = args.get("lock").unwrap_or("holdlock");
    worker::LockKind::parse(name).ok_or_else(|| {
        format!(
            "--lock: `{name}` (holdlock, redisson, naive, multi, multi-broken, rw, rw-broken, \
             redisson-rw, fair, redisson-fair, fair-broken, sem, sem-broken or \
             redisson-sem)"
        )
        .into()
    })
}

fn main() {
    let mut raw = std::env::args().skip(1).peekable();
    let is_worker = raw.peek().is_some_and(|first| first == "worker");
    let result = if is_worker {
        raw.next();
        run_worker(raw)
    } else {
        run_checker(raw)
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            eprintln!("chaos: {error}");
            std::process::exit(2);
        }
    }
}

fn run_worker(raw: impl Iterator<Item = String>) -> Result<i32, BoxError> {
    let args = Args::parse(raw)?;
    let config = worker::WorkerConfig {
        lock_url: args
            .get("lock-url")
            .ok_or("--lock-url is required")?
            .to_owned(),
        resource_url: args
            .get("resource-url")
            .ok_or("--resource-url is required")?
            .to_owned(),
        names: args.number("names", 4)?,
        tasks: args.number("tasks", 4)?,
        lease: args.duration("lease", Duration::from_secs(1))?,
        seed: args.number("seed", 1)?,
        kind: lock_kind(&args)?,
        deadlock_check: args
            .get("deadlock-check")
            .map(|_| args.duration("deadlock-check", Duration::from_secs(1)))
            .transpose()?,
        fair_wait: args.duration("fair-wait", worker::REDISSON_FAIR_WAIT)?,
        workload: workload(&args)?,
        database: args.get("database").map(Into::into),
        overruns: args.number("overruns", bank::OVERRUN_PERCENT)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(worker::run(config))?;
    Ok(0)
}

fn run_checker(raw: impl Iterator<Item = String>) -> Result<i32, BoxError> {
    let args = Args::parse(raw)?;
    args.check_known(&[
        "duration",
        "seed",
        "workers",
        "java-workers",
        "tasks",
        "names",
        "lease",
        "deadlock-check",
        "fault-every",
        "faults",
        "lock",
        "history",
        "json",
        "cluster",
        "recheck",
        "workload",
        "overruns",
    ])?;
    let cluster = args.get("cluster").is_some();
    let workload = workload(&args)?;
    let plan = nemesis::Plan {
        duration: args.duration("duration", Duration::from_secs(60))?,
        seed: args.number("seed", 1)?,
        workers: args.number("workers", 6)?,
        java_workers: args.number("java-workers", 0)?,
        tasks: args.number("tasks", 4)?,
        names: args.number("names", 4)?,
        lease: args.duration("lease", Duration::from_secs(1))?,
        deadlock_check: args
            .get("deadlock-check")
            .map(|_| args.duration("deadlock-check", Duration::from_secs(1)))
            .transpose()?,
        fault_every: args.duration("fault-every", Duration::from_secs(2))?,
        faults: nemesis::FaultKind::parse_list(
            args.get("faults").unwrap_or("all"),
            cluster,
            workload.is_bank(),
        )?,
        kind: lock_kind(&args)?,
        history: args.get("history").map(Into::into),
        json: args.get("json").map(Into::into),
        cluster,
        workload,
        overruns: args.number("overruns", bank::OVERRUN_PERCENT)?,
    };
    if plan.workers == 0 || plan.tasks == 0 || plan.names == 0 {
        return Err("--workers, --tasks and --names must be at least 1".into());
    }
    if plan.java_workers > plan.workers {
        return Err("--java-workers: at most --workers of them".into());
    }
    if plan.java_workers > 0 {
        if !plan.kind.in_redissons_layout() {
            return Err(format!(
                "--java-workers: the `{}` mode has no Java Redisson counterpart (redisson, \
                 redisson-rw, redisson-fair and redisson-sem have)",
                plan.kind.name()
            )
            .into());
        }
        nemesis::java_worker_jar()?;
    }
    let multi = matches!(
        plan.kind,
        worker::LockKind::Multi | worker::LockKind::MultiBroken
    );
    if plan.workload.is_bank() && (plan.kind != worker::LockKind::Holdlock || plan.java_workers > 0)
    {
        return Err(
            "--workload bank takes holdlock's multi-lock: no --lock, no --java-workers".into(),
        );
    }
    if (multi || plan.workload.is_bank()) && plan.names < 2 {
        return Err("--lock multi takes two names a round: --names must be at least 2".into());
    }
    if let Some(history) = args.get("recheck") {
        let summary = nemesis::recheck(std::path::Path::new(history), &plan)?;
        return Ok(if summary.violation_count() == 0 { 0 } else { 1 });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let summary = runtime.block_on(nemesis::run(plan))?;
    Ok(if summary.violation_count() == 0 { 0 } else { 1 })
}
