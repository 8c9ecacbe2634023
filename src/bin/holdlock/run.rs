//! `holdlock run`: take the lock (or with `--permits N` one of N permits of a
//! semaphore), run CMD as a child process while the watchdog keeps it, pass SIGINT and
//! SIGTERM on to CMD, stop CMD if the lock is lost, and with `--once-per` claim the
//! current period first and record it done after a success.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::time::{Duration, SystemTime};

use clap::Args;
use holdlock::{Claim, LockClient, LockError, LockGuard, LockOptions, PeriodClaim, Permit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal as listen_for};

use crate::duration::{format_duration, parse_duration, parse_period};
use crate::exit::{
    EX_CANNOT_EXECUTE, EX_COMMAND_NOT_FOUND, EX_OK, EX_SOFTWARE, EX_TEMPFAIL, EX_USAGE, Failure,
};
use crate::table::sanitize;

/// How long a command may take to stop after SIGTERM for a lost lock before SIGKILL.
const LOST_LOCK_GRACE: Duration = Duration::from_secs(10);

/// Shown after `holdlock run --help`.
pub(crate) const RUN_EXIT_STATUS_HELP: &str = "\
Exit status:
  CMD's own     when CMD ran and exited (128+N if it was killed by signal N)
  75            the lock was busy, or with --once-per the period was already done
                (change it with --conflict-exit-code)
  70            the lock was lost while CMD ran: CMD got SIGTERM (SIGKILL 10 s later)
  65            the lock's key holds something that is not a lock (another type)
  64            usage error
  69            Redis could not be reached, or refused us (TLS, password, ACL)
  126, 127      CMD could not be executed, or was not found
  130, 143      holdlock got SIGINT or SIGTERM while waiting for the lock";

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lock name.
    pub(crate) name: String,

    /// Give up if the lock is not free within DUR [default: wait forever].
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "no_wait")]
    wait: Option<Duration>,

    /// Give up at once if the lock is busy.
    #[arg(long)]
    no_wait: bool,

    /// Lease renewed by the watchdog while CMD runs; a crashed holdlock frees the lock
    /// within one lease [default: 30s].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) lease: Option<Duration>,

    /// Stop renewing once the lock has been held this long: a hung CMD then loses the
    /// lock (and gets SIGTERM, exit 70) instead of keeping it forever [default: none].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    max_hold: Option<Duration>,

    /// Run at most once per UTC-aligned period of this length (for cron on many hosts).
    #[arg(long, value_name = "DUR", value_parser = parse_period)]
    once_per: Option<Duration>,

    /// Hold one of N permits of the semaphore NAME instead of the lock NAME: at most N
    /// commands run at once across every host (a semaphore and a lock of the same
    /// name are different).
    #[arg(long, value_name = "N", conflicts_with = "once_per")]
    permits: Option<u32>,

    /// Data kept with the hold, shown by `list`, `inspect` and `top`
    /// [default: "<hostname> pid <pid>: <CMD ...>", cut to 1 KiB].
    #[arg(long, value_name = "TEXT")]
    data: Option<String>,

    /// Exit status when the lock is busy or the period already done.
    #[arg(long, value_name = "N", default_value_t = EX_TEMPFAIL)]
    conflict_exit_code: u8,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

impl RunArgs {
    /// What the hold says of itself by default: `<hostname> pid <pid>: <CMD ...>`, so
    /// that `holdlock list` tells which machine runs which job; cut to
    /// [`MAX_DATA_LEN`](holdlock::MAX_DATA_LEN) bytes.
    fn default_data(&self) -> String {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|host| host.into_string().ok())
            .unwrap_or_else(|| "?".to_owned());
        let command: Vec<_> = self
            .command
            .iter()
            .map(|arg| arg.to_string_lossy())
            .collect();
        let mut data = format!("{host} pid {}: {}", std::process::id(), command.join(" "));
        if data.len() > holdlock::MAX_DATA_LEN {
            let mut end = holdlock::MAX_DATA_LEN;
            while !data.is_char_boundary(end) {
                end -= 1;
            }
            data.truncate(end);
        }
        data
    }

    /// How long to wait for the lock; `None` is forever.
    fn wait_limit(&self) -> Option<Duration> {
        if self.no_wait {
            Some(Duration::ZERO)
        } else {
            self.wait
        }
    }

    /// The options of the lock or permit; `compat` says whether the default data
    /// (host, pid, command) can be kept with the hold (Redisson's layout keeps none).
    fn lock_options(&self, compat: holdlock::Compat) -> LockOptions {
        // A lock's token goes to the command (HOLDLOCK_TOKEN); a permit, shared with
        // the other permits' holders, has none.
        let mut options = match self.permits {
            Some(_) => LockOptions::new(),
            None => LockOptions::new().with_fencing(),
        };
        if let Some(max_hold) = self.max_hold {
            options = options.max_hold(max_hold);
        }
        let data = match (&self.data, compat) {
            (Some(data), _) => Some(data.clone()),
            (None, holdlock::Compat::Holdlock) => Some(self.default_data()),
            (None, _) => None,
        };
        if let Some(data) = data {
            options = options.data(data);
        }
        match self.wait_limit() {
            Some(limit) => options.wait(limit),
            None => options.wait_forever(),
        }
    }
}

/// What `run` holds while the command runs.
enum Holding {
    /// The lock alone.
    Lock(LockGuard),
    /// The lock, and (re-entered inside it) the claim on the current period.
    Period { lock: LockGuard, claim: PeriodClaim },
    /// One permit of a semaphore.
    Permit(Permit),
}

impl Holding {
    fn name(&self) -> &str {
        match self {
            Holding::Lock(lock) | Holding::Period { lock, .. } => lock.name(),
            Holding::Permit(permit) => permit.name(),
        }
    }

    fn fencing_token(&self) -> Option<u64> {
        match self {
            Holding::Lock(lock) | Holding::Period { lock, .. } => lock.fencing_token(),
            Holding::Permit(_) => None,
        }
    }

    /// Resolves once what is held is lost.
    async fn lost(&self) {
        match self {
            Holding::Lock(lock) | Holding::Period { lock, .. } => lock.lost().await,
            Holding::Permit(permit) => permit.lost().await,
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
            Holding::Permit(permit) => permit.release().await,
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

pub(crate) async fn run(
    client: &LockClient,
    args: &RunArgs,
    started_at: SystemTime,
) -> Result<u8, Failure> {
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
    let child = match spawn_command(&args.command, &holding) {
        Ok(child) => child,
        Err(failure) => {
            let _ = holding.release(false).await;
            return Err(failure);
        }
    };
    let end = supervise(child, &holding, &mut signals).await;
    Ok(finish(holding, end, &args.name).await)
}

async fn acquire(
    client: &LockClient,
    args: &RunArgs,
    started_at: SystemTime,
) -> Result<Acquired, Failure> {
    if let Some(permits) = args.permits {
        let taking = format!("cannot take a permit of semaphore {:?}", args.name);
        let semaphore = client.semaphore(args.name.clone(), permits);
        let permit = semaphore
            .acquire()
            .options(args.lock_options(client.compat()))
            .await
            .map_err(|error| Failure::from_lock_error(&taking, &error))?;
        return Ok(match permit {
            Some(permit) => Acquired::Held(Holding::Permit(permit)),
            None => Acquired::Conflict(busy_reason(args)),
        });
    }
    let taking = format!("cannot take lock {:?}", args.name);
    let lock = client
        .lock(&args.name)
        .options(args.lock_options(client.compat()))
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
    match args.permits {
        Some(permits) => format!(
            "all {permits} permits of semaphore {:?} are held ({waited}); command not run",
            args.name
        ),
        None => format!(
            "lock {:?} is held by someone else ({waited}); command not run",
            args.name
        ),
    }
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

fn spawn_command(command: &[OsString], holding: &Holding) -> Result<Child, Failure> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(Failure::new(EX_USAGE, "no command given after `--`"));
    };
    let mut process = Command::new(program);
    process.args(arguments).env("HOLDLOCK_NAME", holding.name());
    if let Some(token) = holding.fencing_token() {
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
async fn supervise(mut child: Child, holding: &Holding, signals: &mut Signals) -> CommandEnd {
    loop {
        tokio::select! {
            status = child.wait() => {
                return CommandEnd { code: exit_code_of(status), lock_lost: false };
            }
            () = holding.lost() => {
                let code = stop_after_lost_lock(&mut child, holding.name()).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_exit_like_a_shell() {
        assert_eq!(signal_exit_code(15), 143);
        assert_eq!(signal_exit_code(2), 130);
    }
}
