//! A cron job that runs exactly once per second across three instances with skewed clocks.
//!
//! Three instances (each with its own `LockClient`, as if on three hosts) fire the same
//! job, "report", at every second boundary of their own clock. The clocks disagree: one
//! is right, one runs 300 ms ahead and one 250 ms behind, so the same tick arrives at
//! three different moments. Each instance calls `client.claim_period(...)` with its own
//! clock's time; the first to claim a period runs the job and marks the period done, and
//! the others find it done and skip it, even though the lock itself is free again by
//! then. One run is made to fail on purpose: it abandons its claim, and another instance
//! runs that period instead.
//!
//! At the end it prints which instance ran each period, and exits non-zero unless every
//! period was run exactly once.
//!
//! Run it with `cargo run --example cron_once` (about 11 s), or shorter with
//! `cargo run --example cron_once -- --seconds 4`. It starts a throwaway `redis-server`,
//! or uses `REDIS_URL` if set.

mod support;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fred::interfaces::{KeysInterface, ListInterface};
use holdlock::{Claim, LockClient, LockOptions};
use tokio::time::Instant;

use support::{BoxError, Redis};

const JOB_NAME: &str = "cron:report";
const PERIOD: Duration = Duration::from_secs(1);
/// Where each run (and each failed run) is recorded, as `period instance outcome`.
const RUNS_KEY: &str = "holdlock-example:cron:runs";
/// How long the report job takes.
const JOB_TIME: Duration = Duration::from_millis(100);
/// The run that fails on purpose: this instance's run of this tick (0-based).
const FAILING_RUN: (&str, u64) = ("host-b", 2);
/// How long the failing run struggles before it gives up.
const FAILING_JOB_TIME: Duration = Duration::from_millis(400);

/// How long an instance waits for the lock when another instance holds it.
///
/// With `Duration::ZERO` an instance that finds the lock held gives up at once. That is
/// fine while the holder's run succeeds, but if it fails and abandons the period, an
/// instance that fired at the same moment (clocks in sync, the usual case with NTP) has
/// already walked away, and the period may go unrun. A short wait, longer than a normal
/// run but well under the period, lets it take over an abandoned period, and costs
/// nothing when the run succeeds: it then gets the lock, finds the period done and skips.
const CLAIM_WAIT: Duration = Duration::from_millis(400);

/// One instance of the service: a name and how far its clock is off, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Instance {
    name: &'static str,
    clock_offset_ms: i64,
}

const INSTANCES: [Instance; 3] = [
    Instance {
        name: "host-a",
        clock_offset_ms: 0,
    },
    Instance {
        name: "host-b",
        clock_offset_ms: 300,
    },
    Instance {
        name: "host-c",
        clock_offset_ms: -250,
    },
];

impl Instance {
    /// This instance's idea of the current time.
    fn now(&self) -> SystemTime {
        let offset = Duration::from_millis(self.clock_offset_ms.unsigned_abs());
        if self.clock_offset_ms >= 0 {
            SystemTime::now() + offset
        } else {
            SystemTime::now() - offset
        }
    }

    fn label(&self) -> String {
        format!("{} (clock {:+} ms)", self.name, self.clock_offset_ms)
    }
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parse_seconds() -> Result<u64, BoxError> {
    let mut seconds = 10;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--seconds" => seconds = args.next().ok_or("--seconds needs a value")?.parse()?,
            "--help" | "-h" => {
                println!("usage: cron_once [--seconds N]   (default 10)");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}; try --help").into()),
        }
    }
    if seconds == 0 {
        return Err("--seconds must be at least 1".into());
    }
    Ok(seconds)
}

/// Runs the instances for `--seconds` ticks; `Ok(false)` unless each period ran once.
async fn run() -> Result<bool, BoxError> {
    let ticks = parse_seconds()?;
    let redis = Redis::from_url_or_env_or_start(None)?;
    if redis.is_throwaway() {
        println!(
            "Started a throwaway redis-server at {} (set REDIS_URL to use your own).",
            redis.url()
        );
    } else {
        println!("Using Redis at {}.", redis.url());
    }
    let admin = LockClient::connect(redis.url()).await?;
    let _: i64 = admin.redis().del(RUNS_KEY).await?;

    // The first tick every instance can still catch: far enough ahead that even the
    // clock that runs fastest has not reached it yet.
    let fastest_clock_ms = INSTANCES
        .iter()
        .map(|i| i.clock_offset_ms)
        .max()
        .unwrap_or(0);
    let now_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    let first_tick = u64::try_from((now_ms + fastest_clock_ms + 200) / 1_000 + 1)?;
    let labels: Vec<String> = INSTANCES.iter().map(Instance::label).collect();
    println!(
        "Job {JOB_NAME:?} every second for {ticks} s on 3 instances: {}.",
        labels.join(", ")
    );
    println!("Each fires at its own clock's second boundaries and claims that second's period.\n");

    let started = Instant::now();
    let mut instances = Vec::new();
    for instance in INSTANCES {
        let url = redis.url().to_owned();
        instances.push(tokio::spawn(async move {
            let client = LockClient::connect(&url).await?;
            let fired = run_instance(&client, instance, first_tick, ticks, started).await;
            client.shutdown().await;
            fired
        }));
    }
    for instance in instances {
        instance.await??;
    }

    let records: Vec<String> = admin.redis().lrange(RUNS_KEY, 0, -1).await?;
    admin.shutdown().await;
    Ok(report(&records, first_tick, ticks))
}

/// One instance's timer: fires at each of its own clock's second boundaries.
async fn run_instance(
    client: &LockClient,
    instance: Instance,
    first_tick: u64,
    ticks: u64,
    started: Instant,
) -> Result<(), BoxError> {
    for tick in 0..ticks {
        sleep_until_clock_reads(instance, first_tick + tick).await;
        let fired_at = instance.now();
        let asked = Instant::now();
        let options = LockOptions::new().wait(CLAIM_WAIT);
        let claim = client
            .claim_period(JOB_NAME, PERIOD, fired_at, options)
            .await?;
        let waited = asked.elapsed();
        let at = started.elapsed().as_secs_f64();
        let who = instance.label();
        let claim = match claim {
            Claim::Won(claim) => claim,
            Claim::AlreadyDone { period } => {
                println!("[{at:6.3} s] {who}: period {period} already done elsewhere, skipped");
                continue;
            }
            Claim::Busy => {
                let period = fired_at.duration_since(UNIX_EPOCH)?.as_millis() / PERIOD.as_millis();
                println!("[{at:6.3} s] {who}: period {period} busy elsewhere, skipped");
                continue;
            }
        };
        let period = claim.period();
        let after_wait = if waited > Duration::from_millis(50) {
            format!(" after waiting {} ms for the lock", waited.as_millis())
        } else {
            String::new()
        };
        if (instance.name, tick) == FAILING_RUN {
            tokio::time::sleep(FAILING_JOB_TIME).await;
            let _: i64 = client
                .redis()
                .rpush(RUNS_KEY, format!("{period} {} failed", instance.name))
                .await?;
            claim.abandon().await?;
            println!(
                "[{at:6.3} s] {who}: period {period} claimed{after_wait}, but the job FAILED; abandoned"
            );
            continue;
        }
        tokio::time::sleep(JOB_TIME).await;
        let _: i64 = client
            .redis()
            .rpush(RUNS_KEY, format!("{period} {} ran", instance.name))
            .await?;
        claim.complete().await?;
        println!("[{at:6.3} s] {who}: period {period} claimed{after_wait}, ran the report");
    }
    Ok(())
}

/// Sleeps until `instance`'s clock reads `unix_second`.
async fn sleep_until_clock_reads(instance: Instance, unix_second: u64) {
    let target = UNIX_EPOCH + Duration::from_secs(unix_second);
    while let Ok(left) = target.duration_since(instance.now()) {
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(left).await;
    }
}

/// Who ran a period, and who tried and failed.
#[derive(Debug, Default)]
struct PeriodRuns {
    ran: Vec<String>,
    failed: Vec<String>,
}

/// Prints the period table; true if each of the `ticks` periods ran exactly once.
fn report(records: &[String], first_tick: u64, ticks: u64) -> bool {
    let mut periods: BTreeMap<u64, PeriodRuns> = (first_tick..first_tick + ticks)
        .map(|period| (period, PeriodRuns::default()))
        .collect();
    for record in records {
        let mut fields = record.split(' ');
        let (Some(period), Some(instance), Some(outcome)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(period) = period.parse() else { continue };
        let runs = periods.entry(period).or_default();
        match outcome {
            "ran" => runs.ran.push(instance.to_owned()),
            _ => runs.failed.push(instance.to_owned()),
        }
    }

    println!("\nperiod      UTC time  ran on   notes");
    let mut exactly_once = 0;
    for (period, runs) in &periods {
        let seconds_of_day = period % 86_400;
        let time = format!(
            "{:02}:{:02}:{:02}",
            seconds_of_day / 3_600,
            seconds_of_day / 60 % 60,
            seconds_of_day % 60
        );
        let ran_on = match runs.ran.as_slice() {
            [] => "-".to_owned(),
            ran => ran.join("+"),
        };
        let mut notes = Vec::new();
        match runs.ran.len() {
            1 => exactly_once += 1,
            0 => notes.push("NOT RUN".to_owned()),
            n => notes.push(format!("RUN {n} TIMES")),
        }
        if !runs.failed.is_empty() {
            notes.push(format!(
                "{} failed first and abandoned it",
                runs.failed.join(", ")
            ));
        }
        if !(first_tick..first_tick + ticks).contains(period) {
            notes.push("not a scheduled period".to_owned());
        }
        let row = format!("{period}  {time}  {ran_on:<7}  {}", notes.join("; "));
        println!("{}", row.trim_end());
    }

    let correct = exactly_once == periods.len()
        && periods.len() == usize::try_from(ticks).unwrap_or(usize::MAX);
    if correct {
        println!(
            "\nOK: {ticks} periods, each run exactly once, although 3 instances fired at every tick."
        );
    } else {
        println!(
            "\nFAILED: {exactly_once} of {} periods ran exactly once (expected {ticks}).",
            periods.len()
        );
    }
    correct
}
