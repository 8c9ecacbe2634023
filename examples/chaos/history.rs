//! The history: what workers did and what the nemesis injected, on one clock.
//!
//! Workers print one JSON [`Op`] per line on stdout; the checker adds the worker's id
//! and keeps them, with its own [`Fault`]s, as [`Entry`]s. Every timestamp is
//! `CLOCK_MONOTONIC` in microseconds, which all processes on the machine share.

use serde::{Deserialize, Serialize};

/// Microseconds on the machine's monotonic clock.
pub fn now_us() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always readable on Linux");
    u64::try_from(now.tv_sec()).unwrap_or(0) * 1_000_000
        + u64::try_from(now.tv_nsec()).unwrap_or(0) / 1_000
}

/// How a fenced read or write of the register ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Accepted.
    Ok,
    /// Refused: a newer token had been seen.
    Stale,
    /// No answer (timeout, connection lost, or abandoned when the lock was lost):
    /// it may or may not have happened.
    Unknown,
}

/// How an unlock ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Released {
    Ok,
    NotHeld,
    Error,
}

/// One thing a worker did. `a` is the attempt: one call to take a lock and, if it was
/// granted, everything done under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// About to call `lock_timeout(name, wait)` (or another kind's call).
    Start {
        t: u64,
        a: u64,
        name: String,
        wait_ms: u64,
        /// A shared hold (the read side of a read-write lock): shared holds may overlap
        /// each other, never an exclusive one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shared: bool,
        /// A permit of a semaphore of this many: up to that many holds of the name may
        /// overlap. 0 for every other lock (one holder, or shared holds).
        #[serde(default, skip_serializing_if = "is_zero")]
        permits: u32,
        /// A fair lock's wait: calls on the name are to be served in the order they
        /// began.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fifo: bool,
    },
    /// Granted a fresh hold with this fencing token.
    Grant { t: u64, a: u64, token: u64 },
    /// The wait ran out.
    Busy { t: u64, a: u64 },
    /// The call failed.
    Error { t: u64, a: u64, error: String },
    /// The call had not returned a grace period after its wait: dropped.
    Cancelled { t: u64, a: u64 },
    /// A nested (reentrant) take of the held lock; `count` is the hold count it gave
    /// (0: it was refused, or failed with `error`).
    Nested {
        t: u64,
        a: u64,
        count: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The lost signal fired.
    Lost { t: u64, a: u64 },
    /// A renewal of the hold landed after `after` and had by `t`: the guard's
    /// `renewal_margin()` changed to `margin_ms` (the lease left in Redis when it
    /// landed, by the clock of the exchange before it). So the exchange before it was
    /// sent at `after + margin_ms - lease` or later, and the hold's lost deadline is at
    /// least a tenth of a lease before `after + margin_ms`. Seen by polling (see
    /// `worker::record_renewals`): a renewal that left the same margin as the one
    /// before is not seen, which only makes that bound older.
    Renewed {
        t: u64,
        a: u64,
        after: u64,
        margin_ms: u64,
    },
    /// A fenced read of the register.
    Read { t: u64, a: u64, outcome: Outcome },
    /// A fenced write of `value` to the register.
    Write {
        t: u64,
        a: u64,
        value: u64,
        outcome: Outcome,
    },
    /// About to release.
    Unlock { t: u64, a: u64 },
    /// The release returned.
    Unlocked { t: u64, a: u64, released: Released },
    /// Connected and working. `java`: a Java Redisson worker
    /// (`tests/interop-java`'s `ChaosWorker`), whose holders are never told of a lost
    /// hold (Redisson has no such signal).
    Ready {
        t: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        java: bool,
    },
    /// Every task has stopped; the worker exits.
    Done { t: u64 },
    /// The bank workload (`--workload bank`): transfer `id` of `amount` from account
    /// `from` to account `to`, begun under attempt `a`'s locks (both accounts').
    TransferStart {
        t: u64,
        a: u64,
        id: String,
        from: u32,
        to: u32,
        amount: i64,
    },
    /// How transfer `id` ended (see [`Transferred`]).
    Transfer {
        t: u64,
        a: u64,
        id: String,
        outcome: Transferred,
    },
    /// One of the worker's stall probes did not run from `t` to `until`, at least
    /// [`STALL_RECORDED`] longer than it asked to sleep (see `worker::watch_for_stalls`).
    /// Where both probes stalled, the process did not run: its watchdog could neither
    /// renew nor tell a holder its lease ran out.
    Stall { t: u64, until: u64, probe: Probe },
}

/// How a transfer of the bank workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transferred {
    /// Its transaction committed.
    Committed,
    /// A fence refused a token: a newer holder had been there. Not committed.
    Stale,
    /// The sender had too little money: rolled back.
    Insufficient,
    /// A statement before the commit failed (the connection, or PostgreSQL): not
    /// committed.
    Failed,
    /// The commit's answer was lost, or it took too long and was dropped: it may or
    /// may not have committed.
    Unknown,
}

/// The shortest stall a worker's probes record, in microseconds.
pub const STALL_RECORDED: u64 = 50_000;

/// Which of a worker's probes stalled (see [`Op::Stall`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    /// A thread of its own, outside the runtime, that sleeps a few milliseconds at a
    /// time: the operating system did not run it (the machine stalled, or the process
    /// was not scheduled).
    Thread,
    /// A task on the worker's tokio runtime, as the library's watchdog is: the
    /// runtime did not poll it.
    Runtime,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Op {
    /// When it happened.
    pub fn t(&self) -> u64 {
        match self {
            Op::Start { t, .. }
            | Op::Grant { t, .. }
            | Op::Busy { t, .. }
            | Op::Error { t, .. }
            | Op::Cancelled { t, .. }
            | Op::Nested { t, .. }
            | Op::Lost { t, .. }
            | Op::Renewed { t, .. }
            | Op::Read { t, .. }
            | Op::Write { t, .. }
            | Op::Unlock { t, .. }
            | Op::Unlocked { t, .. }
            | Op::Ready { t, .. }
            | Op::Stall { t, .. }
            | Op::TransferStart { t, .. }
            | Op::Transfer { t, .. }
            | Op::Done { t } => *t,
        }
    }

    /// Prints the op as a line of the worker's stdout.
    pub fn emit(&self) {
        if let Ok(line) = serde_json::to_string(self) {
            println!("{line}");
        }
    }
}

/// A fault the nemesis injected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// `SIGSTOP` to worker `w` at `t`, `SIGCONT` at `until`.
    Pause { t: u64, until: u64, w: u32 },
    /// `SIGKILL` to worker `w`; a replacement starts.
    Kill { t: u64, w: u32 },
    /// `CLIENT KILL` of every client connection of the lock server (of every node of
    /// the lock cluster).
    ClientKill { t: u64 },
    /// `SCRIPT FLUSH` on both servers (on every node of the lock cluster).
    ScriptFlush { t: u64 },
    /// The bank workload: every worker connection to PostgreSQL was terminated
    /// (`pg_terminate_backend`), `killed` of them.
    DbKill { t: u64, killed: u32 },
    /// The lock server was stopped at `t` and answered again at `until`, empty.
    Restart { t: u64, until: u64 },
    /// Worker `w`'s link to the lock server was a black hole from `t` to `until`.
    BlackHole { t: u64, until: u64, w: u32 },
    /// Worker `w`'s connections to the lock server were reset, and refused until `until`.
    Reset { t: u64, until: u64, w: u32 },
    /// Cluster mode: `slots` slots (and their keys) moved from one primary to another
    /// (`redis-cli --cluster reshard`) from `t` until every node reported ok at `until`;
    /// `ok` is false when redis-cli or the wait failed.
    Reshard {
        t: u64,
        until: u64,
        slots: u32,
        ok: bool,
    },
    /// Cluster mode: every slot of a primary (`slots` of them) moved to another.
    Empty {
        t: u64,
        until: u64,
        slots: u32,
        ok: bool,
    },
    /// Cluster mode: the slots spread over every primary again, emptied ones included
    /// (`redis-cli --cluster rebalance --cluster-use-empty-masters`).
    Rebalance { t: u64, until: u64, ok: bool },
    /// Cluster mode: a coordinated `CLUSTER FAILOVER` on a replica, from `t` until the
    /// replica was the primary and every node reported ok at `until`.
    Failover { t: u64, until: u64, ok: bool },
    /// Cluster mode: a node stopped and started again on its port, `how`, from `t`
    /// until every node reported ok at `until`.
    NodeRestart {
        t: u64,
        until: u64,
        how: Restarted,
        ok: bool,
    },
    /// Cluster mode: every node restarted in turn, as a rolling upgrade does (each
    /// replica, then each primary after a coordinated failover made it a replica),
    /// from `t` until every node reported ok after the last at `until`.
    RollingRestart { t: u64, until: u64, ok: bool },
}

/// Which node a cluster-mode restart stopped, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restarted {
    /// A replica, without saving: it copies its primary again.
    Replica,
    /// A primary, by `SHUTDOWN SAVE`: it comes back with its keys, as the primary.
    PrimaryWithItsData,
    /// A primary, after a coordinated failover made it a replica of its old replica.
    PrimaryAfterFailover,
}

impl Fault {
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Pause { .. } => "pause (SIGSTOP past the lease)",
            Fault::Kill { .. } => "kill (SIGKILL, replaced)",
            Fault::ClientKill { .. } => "CLIENT KILL",
            Fault::ScriptFlush { .. } => "SCRIPT FLUSH",
            Fault::DbKill { .. } => "PostgreSQL connections terminated",
            Fault::Restart { .. } => "redis-server restart",
            Fault::BlackHole { .. } => "partition (black hole)",
            Fault::Reset { .. } => "partition (reset)",
            Fault::Reshard { ok: true, .. } => "reshard (slots moved)",
            Fault::Reshard { ok: false, .. } => "reshard FAILED",
            Fault::Empty { ok: true, .. } => "empty a primary (all its slots moved)",
            Fault::Empty { ok: false, .. } => "empty a primary FAILED",
            Fault::Rebalance { ok: true, .. } => "rebalance",
            Fault::Rebalance { ok: false, .. } => "rebalance FAILED",
            Fault::Failover { ok: true, .. } => "failover (coordinated)",
            Fault::Failover { ok: false, .. } => "failover FAILED",
            Fault::NodeRestart { ok: false, .. } => "node restart FAILED",
            Fault::RollingRestart { ok: true, .. } => "rolling restart (every node in turn)",
            Fault::RollingRestart { ok: false, .. } => "rolling restart FAILED",
            Fault::NodeRestart { how, .. } => match how {
                Restarted::Replica => "node restart: a replica",
                Restarted::PrimaryWithItsData => "node restart: a primary, with its data",
                Restarted::PrimaryAfterFailover => {
                    "node restart: a primary, after its replica took over"
                }
            },
        }
    }
}

/// One line of the history file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry {
    Op {
        w: u32,
        #[serde(flatten)]
        op: Op,
    },
    Fault(Fault),
}
