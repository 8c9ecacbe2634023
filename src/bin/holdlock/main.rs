//! `holdlock`: run a command under a distributed Redis lock, and look at locks.
//!
//! ```text
//! holdlock run NAME [--wait DUR | --no-wait] [--lease DUR] [--once-per DUR] -- CMD ARGS...
//! holdlock inspect NAME [--kind K] [--json]
//! holdlock list [PATTERN] [--json]     (every kind; keys that are not locks: a warning each)
//! holdlock unlock --force [--kind K] NAME [--json]
//! holdlock leader NAME [--json]       (who leads the election NAME)
//! holdlock waits [--json]             (who waits for what; deadlocks: exit 1)
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
//! Built only with the `cli` feature: `cargo install --path . --features cli`. The
//! `bench` subcommand (`holdlock bench [--workloads W1,W4] [--quick] [--json]`) is
//! there only with the `bench` feature as well: `--features cli,bench`.

use std::io;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{CommandFactory, Parser, Subcommand};
use holdlock::{LockKind, owner_scope};

mod admin;
#[cfg(feature = "bench")]
mod bench;
mod connect;
mod duration;
mod exit;
mod leader;
mod run;
mod table;
mod top;
mod waits;

use admin::{KIND_HELP, LIST_HELP, kind_parser};
#[cfg(feature = "bench")]
use bench::BenchArgs;
use connect::{ConnectionArgs, connect};
use exit::{EX_OK, EX_SOFTWARE, EX_USAGE, Failure, fail};
use leader::LEADER_HELP;
use run::{RUN_EXIT_STATUS_HELP, RunArgs};
use top::TopArgs;
use waits::WAITS_HELP;

/// Run commands under a distributed lock on Redis, and look at locks.
#[derive(Debug, Parser)]
#[command(name = "holdlock", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    connection: ConnectionArgs,

    /// Log to stderr (-v debug, -vv trace); `RUST_LOG` (e.g. `holdlock=debug`), when
    /// set, chooses instead.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Subcommands,
}

#[derive(Debug, Subcommand)]
enum Subcommands {
    /// Run CMD while holding the lock NAME.
    #[command(after_help = RUN_EXIT_STATUS_HELP)]
    Run(RunArgs),
    /// Show who holds the lock NAME (exit status 1 if nobody does).
    #[command(after_help = KIND_HELP)]
    Inspect {
        /// The lock name.
        name: String,
        /// The kind of lock.
        #[arg(long, value_name = "KIND", default_value = "mutex", value_parser = kind_parser())]
        kind: LockKind,
        /// Print JSON (`null` for a free lock).
        #[arg(long)]
        json: bool,
    },
    /// List the held locks of every kind whose names match a glob.
    #[command(after_help = LIST_HELP)]
    List {
        /// Glob over lock names (`*`, `?`, `[abc]`).
        #[arg(default_value = "*")]
        pattern: String,
        /// Print JSON: `{"locks": [...], "unreadable": [{"key", "name", "error"}]}`.
        #[arg(long)]
        json: bool,
    },
    /// Break the lock NAME whoever holds it, and wake its waiters (requires --force).
    ///
    /// A fair lock goes to its first waiter; every permit of a semaphore and every
    /// holder of a read-write lock are let go.
    #[command(after_help = KIND_HELP)]
    Unlock {
        /// Confirm deleting a lock that someone else may hold.
        #[arg(long)]
        force: bool,
        /// The kind of lock.
        #[arg(long, value_name = "KIND", default_value = "mutex", value_parser = kind_parser())]
        kind: LockKind,
        /// The lock name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A live view of the locks of every kind matching a glob, refreshed every second:
    /// kind, owners, lease left, token, whether someone waits, how long held (since
    /// first seen); the most contended and longest held first. Each refresh is two
    /// SCANs (COUNT 200 per step): one of the locks, with one inspect script per lock
    /// found, and one of the wait edges, with a GET per edge and the deadlock walks.
    Top(TopArgs),
    /// Show who leads the election NAME (exit status 1 if nobody does).
    #[command(after_help = LEADER_HELP)]
    Leader {
        /// The election's name.
        name: String,
        /// Print JSON (`null` when nobody leads).
        #[arg(long)]
        json: bool,
    },
    /// Show who waits for what: every wait past its client's deadlock check, and the
    /// deadlocks among them (exit status 1 if there is one).
    #[command(after_help = WAITS_HELP)]
    Waits {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure lock throughput and hand-off latency on this Redis, each workload next
    /// to the floor the same Redis sets (see --workloads and docs/performance.md).
    #[cfg(feature = "bench")]
    Bench(BenchArgs),
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

/// Logs to stderr as `RUST_LOG` says (an env filter, e.g. `holdlock=debug,fred=info`),
/// else at the level of `-v`/`-vv`, else not at all.
fn start_logging(verbosity: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => match verbosity {
            0 => return,
            1 => EnvFilter::new("debug"),
            _ => EnvFilter::new("trace"),
        },
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_env_filter(filter)
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
        Subcommands::Run(args) => run::run(&client, &args, started_at).await,
        Subcommands::Inspect { name, kind, json } => {
            admin::inspect(&client, kind, &name, json).await
        }
        Subcommands::List { pattern, json } => admin::list(&client, &pattern, json).await,
        Subcommands::Unlock {
            name, kind, json, ..
        } => admin::force_unlock(&client, kind, &name, json).await,
        Subcommands::Top(args) => top::top(&client, &args).await,
        Subcommands::Leader { name, json } => leader::leader(&client, &name, json).await,
        Subcommands::Waits { json } => waits::waits(&client, json).await,
        #[cfg(feature = "bench")]
        Subcommands::Bench(args) => bench::bench(&client, &cli.connection, &args).await,
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
        | Subcommands::Unlock { name, .. }
        | Subcommands::Leader { name, .. } => name,
        Subcommands::List { pattern, .. } if pattern.is_empty() => {
            return Err(Failure::new(
                EX_USAGE,
                "the empty pattern matches no lock name; use '*' to list every lock",
            ));
        }
        Subcommands::List { .. } => return Ok(()),
        Subcommands::Top(TopArgs { pattern, .. }) if pattern.is_empty() => {
            return Err(Failure::new(
                EX_USAGE,
                "the empty pattern matches no lock name; use '*' to see every lock",
            ));
        }
        Subcommands::Top(_) | Subcommands::Waits { .. } => return Ok(()),
        #[cfg(feature = "bench")]
        Subcommands::Bench(_) => return Ok(()),
    };
    holdlock::validate_name(name).map_err(|error| Failure::from_lock_error("", &error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
