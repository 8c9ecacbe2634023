//! `holdlock`: run a command under a distributed Redis lock, and look at locks.
//!
//! ```text
//! holdlock run NAME [--wait DUR | --no-wait] [--lease DUR] [--once-per DUR] -- CMD ARGS...
//! holdlock inspect NAME [--json]
//! holdlock list [PATTERN] [--json]     (keys that are not locks: a warning each, exit 0)
//! holdlock unlock --force NAME [--json]
//! ```
//!
//! `run` takes the lock (with a fencing token), keeps it renewed while CMD runs, and
//! releases it when CMD exits; CMD finds `HOLDLOCK_NAME` and `HOLDLOCK_TOKEN` in its
//! environment. SIGINT and SIGTERM sent to holdlock are passed on to CMD. If the lock
//! is lost while CMD runs, CMD gets SIGTERM (SIGKILL ten seconds later) and holdlock
//! exits 70.
//!
//! With `--once-per PERIOD`, at most one instance completes CMD successfully per
//! UTC-aligned period (for cron jobs on many hosts); a failed run leaves the period
//! open for another instance.
//!
//! Exit status of `run`: CMD's own status (128+N if CMD died of signal N); 75 (or
//! `--conflict-exit-code`) when the lock was busy or the period already done; 70 when
//! the lock was lost; 64 for bad usage; 69 when Redis cannot be reached; 126/127 when
//! CMD cannot be executed / is not found.
//!
//! Built only with the `cli` feature: `cargo install --path . --features cli`.

use std::ffi::OsString;
use std::io::{self, IsTerminal};
use std::process::{ExitCode, ExitStatus};
use std::time::{Duration, SystemTime};

use clap::{Args, CommandFactory, Parser, Subcommand};
use holdlock::{
    Claim, LockClient, LockError, LockGuard, LockInfo, LockOptions, PeriodClaim, owner_scope,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal as listen_for};

mod table;
mod workloads;

use table::{escape, render_columns, sanitize};
use workloads::{Bench, Figure, Goal, Settings, Workload};

/// Success.
const EX_OK: u8 = 0;
/// Inspected lock is free (like `grep` finding nothing).
const EX_NOT_FOUND: u8 = 1;
/// Bad command line (sysexits.h `EX_USAGE`).
const EX_USAGE: u8 = 64;
/// The lock key holds something that is not a lock (`EX_DATAERR`).
const EX_DATAERR: u8 = 65;
/// Redis cannot be reached (`EX_UNAVAILABLE`).
const EX_UNAVAILABLE: u8 = 69;
/// The lock was lost while the command ran, or an internal error (`EX_SOFTWARE`).
const EX_SOFTWARE: u8 = 70;
/// The default exit status when the lock is busy or the period done (`EX_TEMPFAIL`).
const EX_TEMPFAIL: u8 = 75;
/// The command was found but could not be executed (as in the shell).
const EX_CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in the shell).
const EX_COMMAND_NOT_FOUND: u8 = 127;

/// The Redis URL used when neither `--url` nor `REDIS_URL` gives one.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// How long a command may take to stop after SIGTERM for a lost lock before SIGKILL.
const LOST_LOCK_GRACE: Duration = Duration::from_secs(10);

const RUN_EXIT_STATUS_HELP: &str = "\
Exit status:
  CMD's own     when CMD ran and exited (128+N if it was killed by signal N)
  75            the lock was busy, or with --once-per the period was already done
                (change it with --conflict-exit-code)
  70            the lock was lost while CMD ran: CMD got SIGTERM (SIGKILL 10 s later)
  64            usage error
  69            Redis could not be reached
  126, 127      CMD could not be executed, or was not found
  130, 143      holdlock got SIGINT or SIGTERM while waiting for the lock";

const LIST_HELP: &str = "\
A key under the prefix that cannot be read as a lock (a value of another type, a
hash written by someone else) does not stop the listing: it is left out, with a
warning line on stderr naming the key (and, with --json, an entry in \"unreadable\").

Exit status:
  0             the locks were listed (even if some keys could not be read)
  64            usage error
  69            Redis could not be reached";

/// Run commands under a distributed lock on Redis, and look at locks.
#[derive(Debug, Parser)]
#[command(name = "holdlock", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    connection: ConnectionArgs,

    /// Log to stderr (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Subcommands,
}

/// Where Redis is and how lock keys are named.
#[derive(Debug, Args)]
struct ConnectionArgs {
    /// Redis URL [default: $REDIS_URL, else redis://127.0.0.1:6379]
    #[arg(long, global = true, value_name = "URL")]
    url: Option<String>,

    /// Prefix of every lock key.
    #[arg(long, global = true, default_value = holdlock::DEFAULT_PREFIX)]
    prefix: String,

    /// Give up connecting to Redis after this long.
    #[arg(long, global = true, value_name = "DUR", default_value = "5s", value_parser = parse_duration)]
    connect_timeout: Duration,
}

#[derive(Debug, Subcommand)]
enum Subcommands {
    /// Run CMD while holding the lock NAME.
    #[command(after_help = RUN_EXIT_STATUS_HELP)]
    Run(RunArgs),
    /// Show who holds the lock NAME (exit status 1 if nobody does).
    Inspect {
        /// The lock name.
        name: String,
        /// Print JSON (`null` for a free lock).
        #[arg(long)]
        json: bool,
    },
    /// List the held locks whose names match a glob.
    #[command(after_help = LIST_HELP)]
    List {
        /// Glob over lock names (`*`, `?`, `[abc]`).
        #[arg(default_value = "*")]
        pattern: String,
        /// Print JSON: `{"locks": [...], "unreadable": [{"key", "name", "error"}]}`.
        #[arg(long)]
        json: bool,
    },
    /// Delete the lock NAME whoever holds it (requires --force).
    Unlock {
        /// Confirm deleting a lock that someone else may hold.
        #[arg(long)]
        force: bool,
        /// The lock name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure lock throughput and hand-off latency on this Redis (workloads W1-W4),
    /// each next to the floor the same Redis sets (see docs/performance.md).
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Which workloads to run, comma-separated: W1, W1r, W2, W3, W4 [default: all]
    #[arg(long, value_delimiter = ',', value_parser = parse_workload)]
    workloads: Vec<Workload>,
    /// Run a tenth of the default sizes.
    #[arg(long)]
    quick: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The lock name.
    name: String,

    /// Give up if the lock is not free within DUR [default: wait forever].
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "no_wait")]
    wait: Option<Duration>,

    /// Give up at once if the lock is busy.
    #[arg(long)]
    no_wait: bool,

    /// Lease renewed by the watchdog while CMD runs; a crashed holdlock frees the lock
    /// within one lease [default: 30s].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    lease: Option<Duration>,

    /// Run at most once per UTC-aligned period of this length (for cron on many hosts).
    #[arg(long, value_name = "DUR", value_parser = parse_period)]
    once_per: Option<Duration>,

    /// Exit status when the lock is busy or the period already done.
    #[arg(long, value_name = "N", default_value_t = EX_TEMPFAIL)]
    conflict_exit_code: u8,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

impl RunArgs {
    /// How long to wait for the lock; `None` is forever.
    fn wait_limit(&self) -> Option<Duration> {
        if self.no_wait {
            Some(Duration::ZERO)
        } else {
            self.wait
        }
    }

    fn lock_options(&self) -> LockOptions {
        let options = LockOptions::new().with_fencing();
        match self.wait_limit() {
            Some(limit) => options.wait(limit),
            None => options.wait_forever(),
        }
    }
}

/// A reason to stop, with the exit status it implies.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A library error, prefixed with what we were doing.
    fn from_lock_error(doing: &str, error: &LockError) -> Self {
        let code = match error {
            LockError::InvalidName { .. } | LockError::InvalidOption { .. } => EX_USAGE,
            // A server we cannot reach, cannot trust (TLS) or may not use (ACL).
            LockError::Redis(_)
            | LockError::ConnectTimeout { .. }
            | LockError::Tls { .. }
            | LockError::PermissionDenied { .. } => EX_UNAVAILABLE,
            LockError::WrongType { .. } => EX_DATAERR,
            _ => EX_SOFTWARE,
        };
        // A usage error says all there is to say; anything else needs its context.
        let message = if code == EX_USAGE {
            error.to_string()
        } else {
            format!("{doing}: {error}")
        };
        Self::new(code, message)
    }
}

fn main() -> ExitCode {
    let started_at = SystemTime::now();
    let cli = match Cli::try_parse().and_then(check_usage) {
        Ok(cli) => cli,
        Err(error) => return usage_error_exit(&error),
    };
    start_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return fail(&Failure::new(
                EX_SOFTWARE,
                format!("cannot start the runtime: {error}"),
            ));
        }
    };
    // One owner for the whole run, whichever thread polls it.
    match runtime.block_on(owner_scope(execute(cli, started_at))) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => fail(&failure),
    }
}

/// Rules clap's derive cannot express.
fn check_usage(cli: Cli) -> Result<Cli, clap::Error> {
    if let Subcommands::Unlock { force: false, .. } = cli.command {
        let kind = clap::error::ErrorKind::MissingRequiredArgument;
        let message = "`unlock` deletes the lock whoever holds it; pass --force to confirm";
        let mut command = Cli::command();
        command.build();
        return Err(match command.find_subcommand_mut("unlock") {
            Some(unlock) => unlock.error(kind, message),
            None => command.error(kind, message),
        });
    }
    Ok(cli)
}

/// Prints a clap error (or help/version) and picks the exit status: 0 for help and
/// version, 64 for everything else.
fn usage_error_exit(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    ExitCode::from(if error.use_stderr() { EX_USAGE } else { EX_OK })
}

fn fail(failure: &Failure) -> ExitCode {
    eprintln!("holdlock: {}", sanitize(&failure.message));
    ExitCode::from(failure.code)
}

fn start_logging(verbosity: u8) {
    let level = match verbosity {
        0 => return,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_max_level(level)
        .try_init();
}

async fn execute(cli: Cli, started_at: SystemTime) -> Result<u8, Failure> {
    let lease = match &cli.command {
        Subcommands::Run(run) => run.lease,
        _ => None,
    };
    check_arguments(&cli.command)?;
    let client = connect(&cli.connection, lease).await?;
    let outcome = match cli.command {
        Subcommands::Run(args) => run(&client, &args, started_at).await,
        Subcommands::Inspect { name, json } => inspect(&client, &name, json).await,
        Subcommands::List { pattern, json } => list(&client, &pattern, json).await,
        Subcommands::Unlock { name, json, .. } => force_unlock(&client, &name, json).await,
        Subcommands::Bench(args) => bench(&client, &cli.connection, &args).await,
    };
    client.shutdown().await;
    outcome
}

/// Refuses, before connecting, every argument the library would refuse once connected
/// (durations are checked as they are parsed), so that a bad command line exits 64
/// whether Redis is up or not. The prefix and URL are checked by the builder, before
/// it connects.
fn check_arguments(command: &Subcommands) -> Result<(), Failure> {
    let name = match command {
        Subcommands::Run(RunArgs { name, .. })
        | Subcommands::Inspect { name, .. }
        | Subcommands::Unlock { name, .. } => name,
        Subcommands::List { pattern, .. } if pattern.is_empty() => {
            return Err(Failure::new(
                EX_USAGE,
                "the empty pattern matches no lock name; use '*' to list every lock",
            ));
        }
        Subcommands::List { .. } | Subcommands::Bench(_) => return Ok(()),
    };
    holdlock::validate_name(name).map_err(|error| Failure::from_lock_error("", &error))
}

// ---------------------------------------------------------------------------------
// Connecting

impl ConnectionArgs {
    /// `--url`, else `$REDIS_URL`, else the local default.
    fn resolved_url(&self) -> String {
        self.url
            .clone()
            .or_else(|| {
                std::env::var("REDIS_URL")
                    .ok()
                    .filter(|url| !url.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_URL.to_owned())
    }
}

async fn connect(args: &ConnectionArgs, lease: Option<Duration>) -> Result<LockClient, Failure> {
    let url = args.resolved_url();
    let mut builder = LockClient::builder(url.as_str())
        .prefix(args.prefix.as_str())
        .connect_timeout(args.connect_timeout);
    if let Some(lease) = lease {
        builder = builder.lease(lease);
    }
    builder.build().await.map_err(|error| {
        Failure::from_lock_error(
            &format!("cannot connect to {}", holdlock::redact_url(&url)),
            &error,
        )
    })
}

// ---------------------------------------------------------------------------------
// `run`

/// What `run` holds while the command runs.
enum Holding {
    /// The lock alone.
    Lock(LockGuard),
    /// The lock, and (re-entered inside it) the claim on the current period.
    Period { lock: LockGuard, claim: PeriodClaim },
}

impl Holding {
    fn guard(&self) -> &LockGuard {
        match self {
            Holding::Lock(lock) | Holding::Period { lock, .. } => lock,
        }
    }

    /// Releases the lock; for a period, records it done first if the command succeeded.
    async fn release(self, command_succeeded: bool) -> holdlock::Result<()> {
        match self {
            Holding::Lock(lock) => lock.unlock().await,
            Holding::Period { lock, claim } => {
                let settled = if command_succeeded {
                    claim.complete().await
                } else {
                    claim.abandon().await
                };
                let released = lock.unlock().await;
                settled.and(released)
            }
        }
    }
}

/// The result of trying to take the lock.
enum Acquired {
    Held(Holding),
    /// Busy, or the period is done: the one-line reason.
    Conflict(String),
}

/// How the command ended.
struct CommandEnd {
    /// The status to exit with (from CMD's exit status).
    code: u8,
    /// Whether holdlock stopped it because the lock was lost.
    lock_lost: bool,
}

async fn run(client: &LockClient, args: &RunArgs, started_at: SystemTime) -> Result<u8, Failure> {
    let mut signals = Signals::listen()?;
    let acquired = tokio::select! {
        acquired = acquire(client, args, started_at) => acquired?,
        signal = signals.next() => {
            return Err(Failure::new(
                signal_exit_code(signal as i32),
                format!("interrupted by {} while waiting for lock {:?}", signal.as_str(), args.name),
            ));
        }
    };
    let holding = match acquired {
        Acquired::Held(holding) => holding,
        Acquired::Conflict(reason) => {
            eprintln!("holdlock: {reason}");
            return Ok(args.conflict_exit_code);
        }
    };
    let child = match spawn_command(&args.command, holding.guard()) {
        Ok(child) => child,
        Err(failure) => {
            let _ = holding.release(false).await;
            return Err(failure);
        }
    };
    let end = supervise(child, holding.guard(), &mut signals).await;
    Ok(finish(holding, end, &args.name).await)
}

async fn acquire(
    client: &LockClient,
    args: &RunArgs,
    started_at: SystemTime,
) -> Result<Acquired, Failure> {
    let taking = format!("cannot take lock {:?}", args.name);
    let lock = client
        .lock_with(&args.name, args.lock_options())
        .await
        .map_err(|error| Failure::from_lock_error(&taking, &error))?;
    let Some(lock) = lock else {
        return Ok(Acquired::Conflict(busy_reason(args)));
    };
    match args.once_per {
        None => Ok(Acquired::Held(Holding::Lock(lock))),
        Some(period) => claim_period(client, lock, &args.name, period, started_at).await,
    }
}

fn busy_reason(args: &RunArgs) -> String {
    let waited = match args.wait_limit() {
        Some(Duration::ZERO) => "--no-wait".to_owned(),
        Some(limit) => format!("waited {}", format_duration(limit)),
        None => "wait ended".to_owned(),
    };
    format!(
        "lock {:?} is held by someone else ({waited}); command not run",
        args.name
    )
}

/// Claims the period of `started_at` while holding `lock`. The claim re-enters the
/// held lock, so it is never busy unless the lock was lost meanwhile.
async fn claim_period(
    client: &LockClient,
    lock: LockGuard,
    name: &str,
    period: Duration,
    started_at: SystemTime,
) -> Result<Acquired, Failure> {
    let reenter = LockOptions::new().wait(Duration::ZERO).with_fencing();
    let claimed = client.claim_period(name, period, started_at, reenter).await;
    let claim = match claimed {
        Ok(Claim::Won(claim)) => claim,
        Ok(Claim::Busy) => {
            return Err(Failure::new(
                EX_SOFTWARE,
                format!("lost lock {name:?} while claiming the period"),
            ));
        }
        Ok(_) => {
            let _ = lock.unlock().await;
            let every = format_duration(period);
            return Ok(Acquired::Conflict(format!(
                "{name:?} already ran for this period (once per {every}); command not run"
            )));
        }
        Err(error) => {
            let _ = lock.unlock().await;
            return Err(Failure::from_lock_error(
                &format!("cannot claim the period of {name:?}"),
                &error,
            ));
        }
    };
    Ok(Acquired::Held(Holding::Period { lock, claim }))
}

fn spawn_command(command: &[OsString], guard: &LockGuard) -> Result<Child, Failure> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(Failure::new(EX_USAGE, "no command given after `--`"));
    };
    let mut process = Command::new(program);
    process.args(arguments).env("HOLDLOCK_NAME", guard.name());
    if let Some(token) = guard.fencing_token() {
        process.env("HOLDLOCK_TOKEN", token.to_string());
    }
    process.spawn().map_err(|error| {
        let code = match error.kind() {
            io::ErrorKind::NotFound => EX_COMMAND_NOT_FOUND,
            _ => EX_CANNOT_EXECUTE,
        };
        Failure::new(
            code,
            format!("cannot run {:?}: {error}", program.to_string_lossy()),
        )
    })
}

/// Waits for the command, passing on signals, and stops it if the lock is lost.
async fn supervise(mut child: Child, guard: &LockGuard, signals: &mut Signals) -> CommandEnd {
    loop {
        tokio::select! {
            status = child.wait() => {
                return CommandEnd { code: exit_code_of(status), lock_lost: false };
            }
            () = guard.lost() => {
                let code = stop_after_lost_lock(&mut child, guard.name()).await;
                return CommandEnd { code, lock_lost: true };
            }
            signal = signals.next() => send_signal(&child, signal),
        }
    }
}

async fn stop_after_lost_lock(child: &mut Child, name: &str) -> u8 {
    let pid = child
        .id()
        .map_or_else(|| "?".to_owned(), |pid| pid.to_string());
    eprintln!("holdlock: lost lock {name:?} while the command ran; sending SIGTERM to pid {pid}");
    send_signal(child, Signal::SIGTERM);
    if let Ok(status) = tokio::time::timeout(LOST_LOCK_GRACE, child.wait()).await {
        return exit_code_of(status);
    }
    eprintln!(
        "holdlock: pid {pid} still running {} after SIGTERM; sending SIGKILL",
        format_duration(LOST_LOCK_GRACE)
    );
    let _ = child.start_kill();
    exit_code_of(child.wait().await)
}

/// Releases the lock and picks the exit status.
async fn finish(holding: Holding, end: CommandEnd, name: &str) -> u8 {
    if end.lock_lost {
        let _ = holding.release(false).await;
        eprintln!(
            "holdlock: command stopped with status {}; exiting {EX_SOFTWARE}",
            end.code
        );
        return EX_SOFTWARE;
    }
    match holding.release(end.code == EX_OK).await {
        Ok(()) => end.code,
        Err(LockError::NotHeld { .. }) => {
            eprintln!(
                "holdlock: lock {name:?} was lost before the command finished (status {}); exiting {EX_SOFTWARE}",
                end.code
            );
            EX_SOFTWARE
        }
        Err(error) => {
            let error = error.to_string();
            eprintln!(
                "holdlock: warning: releasing lock {name:?} failed ({}); it expires within its lease",
                sanitize(&error)
            );
            end.code
        }
    }
}

/// The status a shell would report: the exit code, or 128 + the signal number.
fn exit_code_of(status: io::Result<ExitStatus>) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(EX_SOFTWARE),
            (None, Some(signal)) => signal_exit_code(signal),
            (None, None) => EX_SOFTWARE,
        },
        Err(error) => {
            eprintln!("holdlock: cannot wait for the command: {error}");
            EX_SOFTWARE
        }
    }
}

fn signal_exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

/// Sends `signal` to the child unless it has already been reaped.
fn send_signal(child: &Child, signal: Signal) {
    let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
        return;
    };
    if let Err(error) = kill(Pid::from_raw(pid), signal) {
        tracing::debug!(pid, %error, "could not send {}", signal.as_str());
    }
}

/// SIGINT and SIGTERM sent to holdlock, caught so they can be passed on.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> Result<Self, Failure> {
        let listen = |kind| {
            listen_for(kind).map_err(|error| {
                Failure::new(EX_SOFTWARE, format!("cannot handle signals: {error}"))
            })
        };
        Ok(Self {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
        })
    }

    async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
            else => std::future::pending().await,
        }
    }
}

// ---------------------------------------------------------------------------------
// `inspect`, `list`, `unlock --force`

async fn inspect(client: &LockClient, name: &str, json: bool) -> Result<u8, Failure> {
    let info = client
        .inspect(name)
        .await
        .map_err(|error| Failure::from_lock_error(&format!("cannot inspect {name:?}"), &error))?;
    let Some(info) = info else {
        println!(
            "{}",
            if json {
                "null".to_owned()
            } else {
                format!("{} is not locked", escape(name))
            }
        );
        return Ok(EX_NOT_FOUND);
    };
    if json {
        println!("{}", lock_json(&info));
    } else {
        print!("{}", lock_table(std::slice::from_ref(&info)));
    }
    Ok(EX_OK)
}

async fn list(client: &LockClient, pattern: &str, json: bool) -> Result<u8, Failure> {
    let listing = client
        .list_report(pattern)
        .await
        .map_err(|error| Failure::from_lock_error("cannot list locks", &error))?;
    for bad in &listing.unreadable {
        let error = bad.error.to_string();
        eprintln!(
            "holdlock: warning: key {} is not a readable lock, left out: {}",
            escape(&bad.key),
            sanitize(&error)
        );
    }
    if json {
        let locks: Vec<_> = listing.locks.iter().map(lock_json).collect();
        let unreadable: Vec<_> = listing
            .unreadable
            .iter()
            .map(|bad| json!({ "key": bad.key, "name": bad.name, "error": bad.error.to_string() }))
            .collect();
        println!("{}", json!({ "locks": locks, "unreadable": unreadable }));
    } else if listing.locks.is_empty() {
        println!("no locks match {pattern:?}");
    } else {
        print!("{}", lock_table(&listing.locks));
    }
    Ok(EX_OK)
}

async fn force_unlock(client: &LockClient, name: &str, json: bool) -> Result<u8, Failure> {
    let was_locked = client
        .force_unlock(name)
        .await
        .map_err(|error| Failure::from_lock_error(&format!("cannot unlock {name:?}"), &error))?;
    if json {
        println!("{}", json!({ "name": name, "was_locked": was_locked }));
    } else if was_locked {
        println!("unlocked {}", escape(name));
    } else {
        println!("{} was not locked", escape(name));
    }
    Ok(EX_OK)
}

fn lock_json(info: &LockInfo) -> serde_json::Value {
    let owners: Vec<_> = info
        .owners
        .iter()
        .map(|owner| json!({ "id": owner.id, "hold_count": owner.hold_count }))
        .collect();
    let ttl_ms = info
        .ttl
        .map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
    json!({
        "name": info.name,
        "owners": owners,
        "ttl_ms": ttl_ms,
        "fencing_token": info.fencing_token,
    })
}

/// One row per owner: NAME, OWNER, HOLDS, TTL, TOKEN.
fn lock_table(locks: &[LockInfo]) -> String {
    let mut rows = vec![
        ["NAME", "OWNER", "HOLDS", "TTL", "TOKEN"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for info in locks {
        let ttl = info.ttl.map_or_else(|| "none".to_owned(), format_duration);
        let token = info
            .fencing_token
            .map_or_else(|| "-".to_owned(), |token| token.to_string());
        for owner in &info.owners {
            rows.push(vec![
                info.name.clone(),
                owner.id.clone(),
                owner.hold_count.to_string(),
                ttl.clone(),
                token.clone(),
            ]);
        }
    }
    render_columns(&rows)
}

// ---------------------------------------------------------------------------------
// Benchmarks

/// `holdlock bench`: runs the workloads on two clients of this Redis and prints the
/// figures. Exits 1 if a correctness check failed (a lost increment, two winners).
async fn bench(
    client: &LockClient,
    connection: &ConnectionArgs,
    args: &BenchArgs,
) -> Result<u8, Failure> {
    let second = connect(connection, None).await?;
    let settings = if args.quick {
        Settings::quick()
    } else {
        Settings::default()
    };
    let workloads = if args.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.workloads.clone()
    };
    let bench = Bench::new(
        [client.clone(), second.clone()],
        settings,
        progress_printer(),
    );
    let figures = bench.run(&workloads).await;
    second.shutdown().await;
    let figures =
        figures.map_err(|error| Failure::new(EX_SOFTWARE, format!("benchmark failed: {error}")))?;
    eprint!(
        "{}",
        if io::stderr().is_terminal() {
            "\r\x1b[K"
        } else {
            ""
        }
    );
    if args.json {
        println!("{}", workloads::json(&figures));
    } else {
        print!("{}", workloads::table(&figures));
    }
    let broken = figures.iter().any(|figure: &Figure| {
        matches!(figure.goal, Some(Goal::Exactly(_))) && figure.met() == Some(false)
    });
    Ok(if broken { EX_NOT_FOUND } else { EX_OK })
}

/// Reports progress on stderr at most twice a second: in place on a terminal, else a line each.
fn progress_printer() -> workloads::Progress {
    let terminal = io::stderr().is_terminal();
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    std::sync::Arc::new(move |workload: Workload, done: u64, total: u64| {
        let Ok(mut last) = last.lock() else { return };
        if last.is_some_and(|at| at.elapsed() < Duration::from_millis(500)) {
            return;
        }
        *last = Some(std::time::Instant::now());
        if terminal {
            eprint!("\r\x1b[K{} {done}/{total}", workload.label());
        } else {
            eprintln!("{} {done}/{total}", workload.label());
        }
    })
}

fn parse_workload(text: &str) -> Result<Workload, String> {
    Workload::parse(text)
        .ok_or_else(|| format!("unknown workload {text:?}; expected W1, W1r, W2, W3 or W4"))
}

// ---------------------------------------------------------------------------------
// Durations

/// The units a duration may use, longest spelling first within each.
const DURATION_UNITS: &[(&str, u128)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("sec", 1_000),
    ("m", 60_000),
    ("min", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Parses durations like `500ms`, `30s`, `2m`, `1h30m`, `1d`: whole numbers, each
/// followed by a unit (`ms`, `s`, `m`, `h`, `d`), optionally separated by spaces.
fn parse_duration(text: &str) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration like 500ms, 30s, 2m, 1h30m or 1d";
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(format!("empty duration; {EXPECTED}"));
    }
    let mut total_ms: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("{text:?}: {EXPECTED}"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?} is too long"))?;
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..letters];
        let Some(&(_, unit_ms)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
            let problem = if unit.is_empty() {
                "a number without a unit".to_owned()
            } else {
                format!("the unknown unit {unit:?}")
            };
            return Err(format!("{text:?} has {problem}; {EXPECTED}"));
        };
        rest = rest[letters..].trim_start();
        total_ms = number
            .checked_mul(unit_ms)
            .and_then(|piece| total_ms.checked_add(piece))
            .ok_or_else(|| format!("{text:?} is too long"))?;
    }
    let duration = u64::try_from(total_ms)
        .map(Duration::from_millis)
        .map_err(|_| format!("{text:?} is too long"))?;
    if duration > holdlock::MAX_DURATION {
        return Err(format!(
            "{text:?} is longer than ten years, the longest duration holdlock accepts"
        ));
    }
    Ok(duration)
}

/// A `--once-per` period: a duration of at least one second.
fn parse_period(text: &str) -> Result<Duration, String> {
    let period = parse_duration(text)?;
    if period < Duration::from_secs(1) {
        return Err(format!(
            "{text:?} is too short for a period; use at least 1s"
        ));
    }
    Ok(period)
}

/// A short human form: `850ms`, `12.5s`, `2m5s`, `1h30m`.
fn format_duration(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        return format!("{}ms", duration.as_millis());
    }
    if duration < Duration::from_secs(60) {
        let seconds = duration.as_secs_f64();
        return if duration.subsec_millis() == 0 {
            format!("{seconds:.0}s")
        } else {
            format!("{seconds:.1}s")
        };
    }
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    let mut text = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s")] {
        if value > 0 {
            text.push_str(&format!("{value}{unit}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn durations_parse_in_every_unit_and_combination() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m 5s"), Ok(Duration::from_secs(5405)));
        assert_eq!(parse_duration("5 s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations_are_rejected_with_a_reason() {
        for bad in [
            "",
            "5",
            "5 parsecs",
            "parsecs",
            "1.5s",
            "-1s",
            "10y",
            "s",
            "1h30",
        ] {
            let error = parse_duration(bad).expect_err(bad);
            assert!(error.contains("expected a duration"), "{bad}: {error}");
        }
        assert!(parse_duration("99999999999999999999999999999999999999999d").is_err());
        assert!(parse_duration("999999999999999999d").is_err());
        assert_eq!(
            parse_duration("3650d"),
            Ok(holdlock::MAX_DURATION),
            "ten years are accepted"
        );
        let error = parse_duration("3650d 1ms").expect_err("beyond ten years");
        assert!(error.contains("ten years"), "{error}");
    }

    #[test]
    fn periods_are_at_least_a_second() {
        assert_eq!(parse_period("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_period("0s").is_err());
        assert!(parse_period("500ms").is_err());
        assert!(parse_period("soon").is_err());
    }

    #[test]
    fn durations_format_shortly() {
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(Duration::from_millis(12_500)), "12.5s");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m5s");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    }

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["A".to_owned(), "BB".to_owned(), "C".to_owned()],
            vec!["long".to_owned(), "x".to_owned(), "y".to_owned()],
        ];
        assert_eq!(render_columns(&rows), "A     BB  C\nlong  x   y\n");
    }

    #[test]
    fn control_and_invisible_characters_are_escaped() {
        assert_eq!(escape("job:42"), "job:42");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("a\nb\tc\r\0"), "a\\nb\\tc\\r\\0");
        assert_eq!(escape("\x1b[31mred"), "\\x1b[31mred");
        assert_eq!(escape("\u{7f}\u{85}"), "\\x7f\\u{85}");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("zero\u{200b}width"), "zero\\u{200b}width");
        assert_eq!(escape(r"C:\dir"), r"C:\\dir");
        assert_eq!(escape("ünïcödé ✓"), "ünïcödé ✓");
        assert_eq!(sanitize(r#"lock "a\nb": x"#), r#"lock "a\nb": x"#);
        assert_eq!(sanitize("a\nb"), "a\\nb");
    }

    #[test]
    fn a_cell_cannot_break_its_row() {
        let rows = vec![
            vec!["NAME".to_owned(), "OWNER".to_owned()],
            vec!["a\nb   fake-owner".to_owned(), "me".to_owned()],
        ];
        let table = render_columns(&rows);
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("a\\nb   fake-owner  me"), "{table}");
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn signals_exit_like_a_shell() {
        assert_eq!(signal_exit_code(15), 143);
        assert_eq!(signal_exit_code(2), 130);
    }
}
