//! Reads a finished history and finds every violation of what the lock promises.
//!
//! 1. **Mutual exclusion.** A holder believes it holds from the moment its lock call
//!    returns until it starts to release, is told the lock was lost, or is killed. Two
//!    such beliefs about one name must never overlap (two readers of a read-write lock
//!    may; up to `n` holders of a semaphore's `n` permits may), unless a worker of one
//!    of them was paused (`SIGSTOP`) in between, or the lock server restarted and lost
//!    the lock (the fencing check below is what protects the data then), or the
//!    earlier holder's process did not run from before its lost deadline until the
//!    overlap (see [`Summary::overlaps_after_stall`]). A Java Redisson holder is never
//!    told that its hold lapsed (Redisson has no lost signal), so an overlap with one
//!    is excused too when a fault cut its worker off (a pause, partition or reset of
//!    it, every connection killed, or the topology changing) between its call and the
//!    overlap; never without such a fault.
//! 2. **No lost updates, no stale writes.** Each register is written only by fenced
//!    read-modify-writes, so its final value must equal the number of accepted writes
//!    (plus at most the writes whose outcome is unknown, a write a killed worker may
//!    have sent among them), and no two accepted writes
//!    may have written the same value.
//! 3. **Tokens never go backwards.** A grant whose lock call started after another
//!    grant of the same name had returned must carry a larger token. Java Redisson's
//!    `RFencedLock` draws its tokens with `INCR`, which starts over at 1 once a
//!    restart lost the counter (docs/deployments.md says so): a Java grant below a
//!    token granted before such a restart is counted apart, not as a violation.
//! 4. **Restarts are noticed.** A hold the lock server lost in a restart must not be
//!    released as if nothing happened: a release sent after the restart must find
//!    nothing held (or the lost signal ended the hold first). Java Redisson's
//!    `RFairLock.unlock` answers "released" when the lock is gone: such releases of
//!    Java workers are counted apart.
//! 6. **First come, first served** (fair locks). Of two granted calls on one name, the
//!    one that began more than [`FIFO_TIE`] later must not be granted first, unless
//!    the earlier one's worker was paused, partitioned or reset while it waited (or
//!    was still reconnecting from such a fault: [`RECONNECTING`]), or every
//!    connection was killed, the server restarted, or (cluster mode) slots moved, a
//!    replica took over or a node restarted meanwhile (each of which may cost a
//!    waiter its place, or delay its first attempt). Redisson's queue keeps one
//!    place per Java thread, which a wait that ended with an error, or gave up while
//!    its worker was cut off, could not leave: the thread's next wait on the name
//!    counts from the start of the one whose place it was served from.
//! 5. **Nothing hangs, nothing is left.** Every lock call of a worker that was not
//!    killed ended; every worker exited when asked; no lock key remains at the end.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::history::{Entry, Fault, Op, Outcome, Probe, Released};

/// Calls on a fair lock that began within this of each other may be served either
/// way round: the order is that of their first attempts' arrival at Redis, and a
/// worker records its call's start before the attempt is sent (one round trip, plus
/// however long two busy cores take to run the worker).
pub const FIFO_TIE: u64 = 50_000;

/// How long a worker's connections may still be coming back after a fault ended: the
/// client's reconnect delay doubles from 50 ms up to 2 s, so a waiter whose worker
/// was cut off may reach Redis (and queue) up to that long after the fault.
pub const RECONNECTING: u64 = 2_500_000;

/// How soon a holder whose process stalled past its lost deadline must have stopped
/// believing it holds once its process ran again, in microseconds: the deadline has
/// passed, so the watchdog's scheduler tells it at its first wake (or the holder lets
/// go first), but every process that stalled resumes at once and two cores take turns.
pub const RESUMING: u64 = 100_000;

/// What the checker looked at after the run, besides the history.
#[derive(Debug, Default)]
pub struct Final {
    /// Each register's value at the end, by lock name (`None`: not read, as when a
    /// history is checked again on its own).
    pub registers: Option<BTreeMap<String, u64>>,
    /// Lock keys still there after every worker stopped and every lease ran out.
    pub keys_left: Vec<String>,
    /// Workers that had to be killed because they did not exit when asked.
    pub hung_workers: Vec<u32>,
    /// Workers that exited with a failure though nobody killed them.
    pub failed_workers: Vec<u32>,
}

/// The figures of one run.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub workers_started: u32,
    /// Of those, Java Redisson workers.
    pub java_workers_started: u32,
    pub operations: u64,
    pub lock_calls: u64,
    pub acquisitions: u64,
    /// Of those, by Java Redisson workers.
    pub java_acquisitions: u64,
    pub nested_acquisitions: u64,
    /// Re-entries that failed with an error (Redis unreachable or busy): allowed,
    /// unlike a refusal.
    pub nested_errors: u64,
    pub busy: u64,
    pub errors: u64,
    pub cut_off_at_deadline: u64,
    pub lost_signals: u64,
    pub releases_not_held: u64,
    pub reads: BTreeMap<&'static str, u64>,
    pub writes: BTreeMap<&'static str, u64>,
    pub register_total: u64,
    pub faults: BTreeMap<&'static str, u64>,
    pub overlaps_after_pause: u64,
    pub overlaps_after_restart: u64,
    /// Overlaps with a holder whose process stalled past its lost deadline.
    ///
    /// No lease covers a holder that is not running (`docs/guarantees.md`, "holder
    /// pauses past its lease"). A holder's watchdog gives its hold up at its lost
    /// deadline, `0.9 lease` after the exchange that set its lease was sent (the call's
    /// attempt, or the last renewal that landed), and a correct library tells the holder
    /// then, while Redis still has the hold. So an overlap with a holder is excused only
    /// when its worker recorded a stall of both probes at once (the process did not
    /// run, see `Op::Stall`) that
    ///
    /// - began no later than the earliest the lost deadline can be: `0.9 lease` after
    ///   the call began, or, once a renewal was seen to land before the stall (an
    ///   `Op::Renewed`), a tenth of a lease before its `after + margin_ms` (the
    ///   exchange before that renewal was sent no earlier than `after + margin_ms -
    ///   lease`, and the deadline only moves later): the process was not running when
    ///   the deadline passed;
    /// - began at least `0.9 lease` before the overlapping grant: the deadline of any
    ///   renewal sent before the stall had passed by then (a renewal is seen landing
    ///   only some time after, so this bound is all the history gives);
    /// - lasted until the holder stopped believing, less [`RESUMING`]: it was told (or
    ///   let go) as soon as it ran again.
    ///
    /// A stall too short or too late, or a holder told late once it ran again, is no
    /// excuse: those are the library's to get right.
    pub overlaps_after_stall: u64,
    /// Renewals seen to land (`Op::Renewed`).
    pub renewals_seen: u64,
    /// Stalls of a worker's process (both its probes at once, see `Op::Stall`) outside
    /// the nemesis's pauses of it.
    pub stalls: u64,
    /// The longest of those, in milliseconds.
    pub longest_stall_ms: u64,
    /// Overlaps with a Java Redisson holder that a fault had cut off, which Redisson
    /// cannot tell of a lapsed hold.
    pub overlaps_java_not_told: u64,
    pub holds_across_restarts: u64,
    pub token_regressions: u64,
    /// Java Redisson grants whose token was below one granted before a restart that
    /// lost the counter (Redisson's `INCR` starts over at 1).
    pub java_tokens_started_over: u64,
    /// Pairs of granted fair-lock calls, one begun more than the tie after the other.
    pub fifo_pairs_checked: u64,
    /// Of those, later calls served first because the earlier one lost its place to
    /// a fault.
    pub passed_over_after_fault: u64,
    /// Java Redisson fair-lock waits that began where the same thread's last wait, cut
    /// short by an error or while a fault cut its worker off, left its place.
    pub java_waits_in_a_kept_place: u64,
    /// Of those, later calls served first because a Java Redisson waiter ahead of the
    /// earlier one was cut off by a fault: its `acquireFailed` moved every deadline
    /// behind it one wait earlier, past, and the next call dropped them as stale.
    pub passed_over_behind_java_cut_off: u64,
    /// Java Redisson fair-lock releases sent after a restart lost the lock that
    /// answered "released" (`RFairLock.unlock` does when the lock is gone).
    pub java_fair_releases_not_told: u64,
    pub violations: BTreeMap<&'static str, u64>,
    /// The first few violations, described.
    pub examples: Vec<String>,
    /// The bank workload's figures (`--workload bank`), whose checks are `bank.rs`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bank: Option<crate::bank::BankFigures>,
}

impl Summary {
    pub fn violation_count(&self) -> u64 {
        self.violations.values().sum()
    }

    pub fn violate(&mut self, kind: &'static str, detail: String) {
        *self.violations.entry(kind).or_default() += 1;
        if self.examples.len() < 12 {
            self.examples.push(format!("{kind}: {detail}"));
        }
    }
}

/// One call to take a lock, and what happened under it.
#[derive(Debug, Default)]
struct Attempt {
    w: u32,
    a: u64,
    name: String,
    start: u64,
    ended: bool,
    grant: Option<(u64, u64)>,
    lost: Option<u64>,
    unlock: Option<u64>,
    unlocked: Option<(u64, Released)>,
    nested_refused: bool,
    /// A write of the register was recorded (its outcome known or not).
    wrote: bool,
    /// A shared (read) hold.
    shared: bool,
    /// A semaphore's permits (0: not a semaphore).
    permits: u32,
    /// A fair lock's call.
    fifo: bool,
    /// Ended without the lock: when, and whether with an error.
    unserved: Option<(u64, bool)>,
}

impl Attempt {
    /// "worker 3 attempt 0x100000002 on chaos:1", for violation reports.
    fn describe(&self) -> String {
        format!("worker {} attempt {:#x} on {}", self.w, self.a, self.name)
    }
}

/// A renewal seen to land (see `Op::Renewed`).
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// When it was seen.
    t: u64,
    /// It landed after this.
    after: u64,
    /// The lease left in Redis when it landed, by the clock of the exchange before.
    margin_ms: u64,
}

/// A belief of holding: from the grant to its end.
#[derive(Debug, Clone, Copy)]
struct Hold {
    w: u32,
    a: u64,
    /// Shared (a reader): may overlap other shared holds.
    shared: bool,
    /// A semaphore's permits: may overlap `permits - 1` others (0: not a semaphore).
    permits: u32,
    call: u64,
    start: u64,
    end: u64,
}

fn label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "ok",
        Outcome::Stale => "refused (stale token)",
        Outcome::Unknown => "unknown",
    }
}

/// Checks `history` (in any order) against the promises above.
/// `lease` is the workers' (`--lease`).
pub fn check(history: &[Entry], last: &Final, lease: std::time::Duration) -> Summary {
    let lease = u64::try_from(lease.as_micros()).unwrap_or(u64::MAX);
    // The lost deadline's distance from the exchange that set the lease, as the
    // library's: nine tenths of the lease.
    let lost_after = lease - lease / 10;
    let mut summary = Summary::default();
    let mut attempts: HashMap<(u32, u64), Attempt> = HashMap::new();
    let mut writes: HashMap<String, Vec<(u64, Outcome, u32, u64)>> = HashMap::new();
    let mut pauses: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    // Faults that may cost a worker's waiter its place: pauses, partitions, resets.
    let mut displaced: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    // Faults that may cost every waiter its place: CLIENT KILL, restarts.
    let mut everyone_displaced = Vec::new();
    let mut kills: HashMap<u32, u64> = HashMap::new();
    let mut restarts = Vec::new();
    let mut workers = std::collections::HashSet::new();
    // The renewals seen to land, by attempt.
    let mut renewals: HashMap<(u32, u64), Vec<Seen>> = HashMap::new();
    // Each worker's probes' stalls, by probe.
    let mut probe_stalls: HashMap<(u32, Probe), Vec<(u64, u64)>> = HashMap::new();
    let java: std::collections::HashSet<u32> = history
        .iter()
        .filter_map(|entry| match entry {
            Entry::Op {
                w,
                op: Op::Ready { java: true, .. },
            } => Some(*w),
            _ => None,
        })
        .collect();

    for entry in history {
        let (w, op) = match entry {
            Entry::Fault(fault) => {
                *summary.faults.entry(fault.kind()).or_default() += 1;
                match *fault {
                    Fault::Pause { t, until, w } => {
                        pauses.entry(w).or_default().push((t, until));
                        displaced
                            .entry(w)
                            .or_default()
                            .push((t, until + RECONNECTING));
                    }
                    Fault::Kill { t, w } => {
                        kills.insert(w, t);
                    }
                    Fault::Restart { t, until } => {
                        restarts.push((t, until));
                        everyone_displaced.push((t, until + RECONNECTING));
                    }
                    Fault::BlackHole { t, until, w } | Fault::Reset { t, until, w } => {
                        displaced
                            .entry(w)
                            .or_default()
                            .push((t, until + RECONNECTING));
                    }
                    Fault::ClientKill { t } => everyone_displaced.push((t, t + RECONNECTING)),
                    Fault::ScriptFlush { .. } | Fault::DbKill { .. } => {}
                    // A moving slot refuses scripts on its keys (TRYAGAIN, ASK) until its
                    // keys have all moved, a failover sends every client to the new
                    // primary, and a restarted primary refuses every call until it has
                    // rejoined: a waiter may lose its place meanwhile. (No excuse for an
                    // overlap or a lost update: no acknowledged write is lost, so those
                    // must not happen; a hold its primary could not renew in time ends
                    // with its lost signal.)
                    Fault::Reshard { t, until, .. }
                    | Fault::Empty { t, until, .. }
                    | Fault::Rebalance { t, until, .. }
                    | Fault::Failover { t, until, .. }
                    | Fault::NodeRestart { t, until, .. }
                    | Fault::RollingRestart { t, until, .. } => {
                        everyone_displaced.push((t, until + RECONNECTING));
                    }
                }
                continue;
            }
            // What the process and its watchdog did, not the worker's operations (not
            // counted as such): its stalls, and its holds' renewals.
            Entry::Op {
                w,
                op: Op::Stall { t, until, probe },
            } => {
                probe_stalls
                    .entry((*w, *probe))
                    .or_default()
                    .push((*t, *until));
                continue;
            }
            Entry::Op {
                w,
                op:
                    Op::Renewed {
                        t,
                        a,
                        after,
                        margin_ms,
                    },
            } => {
                summary.renewals_seen += 1;
                renewals.entry((*w, *a)).or_default().push(Seen {
                    t: *t,
                    after: *after,
                    margin_ms: *margin_ms,
                });
                continue;
            }
            Entry::Op { w, op } => (*w, op),
        };
        workers.insert(w);
        summary.operations += 1;
        match op {
            Op::Start {
                t,
                a,
                name,
                shared,
                permits,
                fifo,
                ..
            } => {
                summary.lock_calls += 1;
                let entry = attempts.entry((w, *a)).or_default();
                entry.shared = *shared;
                entry.permits = *permits;
                entry.fifo = *fifo;
                entry.w = w;
                entry.a = *a;
                entry.name = name.clone();
                entry.start = *t;
            }
            Op::Grant { t, a, token } => {
                summary.acquisitions += 1;
                if java.contains(&w) {
                    summary.java_acquisitions += 1;
                }
                let entry = attempts.entry((w, *a)).or_default();
                entry.ended = true;
                entry.grant = Some((*t, *token));
            }
            Op::Busy { a, .. } | Op::Error { a, .. } | Op::Cancelled { a, .. } => {
                match op {
                    Op::Busy { .. } => summary.busy += 1,
                    // No task waits for a lock while holding another (a multi-lock
                    // takes its members in one order): a deadlock reported is false.
                    Op::Error { error, .. } if error.starts_with("deadlock") => {
                        summary.errors += 1;
                        summary
                            .violate("false deadlock", format!("worker {w} attempt {a}: {error}"));
                    }
                    Op::Error { .. } => summary.errors += 1,
                    _ => summary.cut_off_at_deadline += 1,
                }
                let entry = attempts.entry((w, *a)).or_default();
                entry.ended = true;
                entry.unserved = Some((op.t(), matches!(op, Op::Error { .. })));
            }
            Op::Nested {
                a, count, error, ..
            } => {
                if *count >= 2 {
                    summary.nested_acquisitions += 1;
                } else if error.is_some() {
                    summary.nested_errors += 1;
                } else {
                    attempts.entry((w, *a)).or_default().nested_refused = true;
                }
            }
            Op::Lost { t, a } => {
                summary.lost_signals += 1;
                attempts.entry((w, *a)).or_default().lost = Some(*t);
            }

            Op::Read { outcome, .. } => *summary.reads.entry(label(*outcome)).or_default() += 1,
            Op::Write {
                a, value, outcome, ..
            } => {
                *summary.writes.entry(label(*outcome)).or_default() += 1;
                let attempt = attempts.entry((w, *a)).or_default();
                attempt.wrote = true;
                let name = attempt.name.clone();
                writes
                    .entry(name)
                    .or_default()
                    .push((*value, *outcome, w, *a));
            }
            Op::Unlock { t, a } => attempts.entry((w, *a)).or_default().unlock = Some(*t),
            Op::Unlocked { t, a, released } => {
                if *released == Released::NotHeld {
                    summary.releases_not_held += 1;
                }
                attempts.entry((w, *a)).or_default().unlocked = Some((*t, *released));
            }
            Op::Ready { .. }
            | Op::Done { .. }
            | Op::Stall { .. }
            | Op::Renewed { .. }
            | Op::TransferStart { .. }
            | Op::Transfer { .. } => {}
        }
    }
    summary.workers_started = u32::try_from(workers.len()).unwrap_or(u32::MAX);
    summary.java_workers_started = u32::try_from(java.len()).unwrap_or(u32::MAX);

    // 5. Calls that never ended, in workers nobody killed.
    let mut holds: BTreeMap<&str, Vec<Hold>> = BTreeMap::new();
    for attempt in attempts.values() {
        let killed = kills.get(&attempt.w).copied();
        if !attempt.ended {
            if killed.is_none() {
                summary.violate(
                    "hung lock call",
                    format!("{} never returned", attempt.describe()),
                );
            }
            continue;
        }
        let Some((granted, _)) = attempt.grant else {
            continue;
        };
        let end = [
            attempt.unlock,
            attempt.lost,
            killed.filter(|&k| k >= granted),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(end) = end else {
            summary.violate("hold never ended", attempt.describe());
            continue;
        };
        holds.entry(&attempt.name).or_default().push(Hold {
            w: attempt.w,
            a: attempt.a,
            shared: attempt.shared,
            permits: attempt.permits,
            call: attempt.start,
            start: granted,
            end,
        });
        // 4. Holds that spanned a restart of the lock server.
        if let (Some(unlock), Some((released_at, released))) = (attempt.unlock, attempt.unlocked) {
            let spanned = restarts
                .iter()
                .any(|&(down, up)| granted < down && released_at > up);
            // A release still in flight when the server went down cannot tell "my
            // release ran" from "the hold was gone already": both end with nothing held.
            let sent_after_restart = restarts
                .iter()
                .any(|&(down, up)| granted < down && unlock > up);
            if spanned {
                summary.holds_across_restarts += 1;
            }
            if sent_after_restart
                && released == Released::Ok
                && attempt.fifo
                && java.contains(&attempt.w)
            {
                // RFairLock's unlock answers "released" when the lock is gone.
                summary.java_fair_releases_not_told += 1;
            } else if sent_after_restart && released == Released::Ok {
                summary.violate(
                    "restart not noticed",
                    format!(
                        "{} released normally after the server lost it",
                        attempt.describe()
                    ),
                );
            }
        }
        if attempt.nested_refused
            && attempt.lost.is_none()
            && attempt.unlocked.is_some_and(|(_, r)| r == Released::Ok)
        {
            summary.violate("re-entry refused", attempt.describe());
        }
    }

    // 1. Overlapping beliefs.
    let paused_between = |w: u32, from: u64, to: u64| {
        pauses
            .get(&w)
            .is_some_and(|list| list.iter().any(|&(stop, cont)| stop < to && cont > from))
    };
    // Whether a fault may have cut worker `w` off from the lock server between `from`
    // and `to` (or cost its waiter its place).
    let displaced_between = |w: u32, from: u64, to: u64| {
        let hit = |list: &[(u64, u64)]| list.iter().any(|&(down, up)| down < to && up >= from);
        displaced.get(&w).is_some_and(|list| hit(list)) || hit(&everyone_displaced)
    };
    // The old server dies somewhere between the stop and the new one answering.
    let restarted_between =
        |from: u64, to: u64| restarts.iter().any(|&(down, up)| down < to && up >= from);
    // The stalls of each worker's process: where both its probes stalled at once.
    let mut stalls: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for (&(w, probe), thread) in &probe_stalls {
        if probe != Probe::Thread {
            continue;
        }
        let Some(runtime) = probe_stalls.get(&(w, Probe::Runtime)) else {
            continue;
        };
        let both = stalls.entry(w).or_default();
        for &(from, until) in thread {
            for &(runtime_from, runtime_until) in runtime {
                let (from, until) = (from.max(runtime_from), until.min(runtime_until));
                if from < until {
                    both.push((from, until));
                }
            }
        }
    }
    for (&w, list) in &stalls {
        for &(from, until) in list {
            if !paused_between(w, from, until) {
                summary.stalls += 1;
                summary.longest_stall_ms = summary.longest_stall_ms.max((until - from) / 1000);
            }
        }
    }
    // The earliest `held`'s lost deadline can be, from what was seen by `by`: 0.9
    // lease after its call began, or a tenth of a lease before a renewal's `after +
    // margin` (a margin of 0 was cut short by the clock, and bounds nothing).
    let earliest_deadline = |held: &Hold, by: u64| {
        let seen = renewals.get(&(held.w, held.a)).into_iter().flatten();
        seen.filter(|seen| seen.t <= by && seen.margin_ms > 0)
            .map(|seen| (seen.after + seen.margin_ms * 1000).saturating_sub(lease / 10))
            .fold(held.call + lost_after, u64::max)
    };
    // Whether `held`'s belief when another was granted at `granted` is excused by a
    // stall of its process (see `Summary::overlaps_after_stall`).
    let stalled_past_its_deadline = |held: &Hold, granted: u64| {
        stalls.get(&held.w).is_some_and(|list| {
            list.iter().any(|&(from, until)| {
                from <= earliest_deadline(held, from)
                    && from + lost_after <= granted
                    && held.end <= until + RESUMING
            })
        })
    };
    for (name, list) in &mut holds {
        list.sort_by_key(|hold| hold.start);
        let mut active: Vec<Hold> = Vec::new();
        for hold in list.iter() {
            active.retain(|earlier| earlier.end > hold.start);
            let others: Vec<&Hold> = active
                .iter()
                .filter(|earlier| {
                    let same_acquisition = earlier.w == hold.w && earlier.a == hold.a;
                    let both_shared = earlier.shared && hold.shared;
                    !same_acquisition && !both_shared
                })
                .collect();
            // A semaphore's hold may overlap `permits - 1` others; any other hold none.
            let allowed = hold.permits.saturating_sub(1) as usize;
            if others.len() > allowed {
                let from = others
                    .iter()
                    .map(|earlier| earlier.call)
                    .min()
                    .unwrap_or(hold.call)
                    .min(hold.call);
                if others
                    .iter()
                    .map(|earlier| earlier.w)
                    .chain([hold.w])
                    .any(|w| paused_between(w, from, hold.start))
                {
                    summary.overlaps_after_pause += 1;
                } else if restarted_between(from, hold.start) {
                    summary.overlaps_after_restart += 1;
                } else if others
                    .iter()
                    .filter(|earlier| !stalled_past_its_deadline(earlier, hold.start))
                    .count()
                    <= allowed
                {
                    summary.overlaps_after_stall += 1;
                } else if others.iter().copied().chain([hold]).any(|held| {
                    java.contains(&held.w) && displaced_between(held.w, held.call, hold.start)
                }) {
                    summary.overlaps_java_not_told += 1;
                } else {
                    let earlier = others[others.len() - 1];
                    // A stall of an earlier holder's process that did not excuse it,
                    // and why, for whoever reads the report.
                    let stalled = others.iter().find_map(|earlier| {
                        let list = stalls.get(&earlier.w)?;
                        let &(from, until) = list
                            .iter()
                            .find(|&&(from, until)| from < hold.start && until > earlier.start)?;
                        let deadline = earliest_deadline(earlier, from);
                        let mut why = Vec::new();
                        if from > deadline {
                            why.push(format!(
                                "it began {} ms after the earliest its lost deadline could be",
                                (from - deadline) / 1000
                            ));
                        }
                        if from + lost_after > hold.start {
                            why.push(
                                "it began less than 0.9 lease before the grant (the deadline may not have passed)"
                                    .to_owned(),
                            );
                        }
                        if earlier.end > until + RESUMING {
                            why.push(format!(
                                "the holder believed on for {} ms after it ran again",
                                (earlier.end - until) / 1000
                            ));
                        }
                        Some(format!(
                            "; worker {}'s process stalled from {} ms before to {} ms after the grant, not enough to excuse it: {}",
                            earlier.w,
                            (hold.start - from) / 1000,
                            until.saturating_sub(hold.start) / 1000,
                            why.join("; "),
                        ))
                    });
                    summary.violate(
                        "overlapping holders",
                        format!(
                            "{name}: {} other holder(s) (the last worker {}, attempt {:#x}, until +{} ms) when worker {} (attempt {:#x}) was granted it{}{}",
                            others.len(),
                            earlier.w,
                            earlier.a,
                            (earlier.end - hold.start) / 1000,
                            hold.w,
                            hold.a,
                            if hold.permits > 0 { format!(" ({} permits)", hold.permits) } else { String::new() },
                            stalled.unwrap_or_default(),
                        ),
                    );
                }
            }
            active.push(*hold);
        }
    }

    // 3. Token regressions: a call that started after another grant returned.
    let mut grants: BTreeMap<&str, Vec<(u64, u64, u64, u32)>> = BTreeMap::new();
    for attempt in attempts.values() {
        // Unfenced holds (read-write locks) draw no token.
        if let Some((granted, token)) = attempt.grant.filter(|&(_, token)| token != 0) {
            grants.entry(&attempt.name).or_default().push((
                attempt.start,
                granted,
                token,
                attempt.w,
            ));
        }
    }
    for (name, list) in &grants {
        let mut by_call = list.clone();
        by_call.sort_by_key(|&(call, ..)| call);
        let mut by_grant = list.clone();
        by_grant.sort_by_key(|&(_, granted, ..)| granted);
        // The newest token granted before the call, and when it was granted.
        let (mut next, mut newest, mut newest_at) = (0, 0, 0);
        for &(call, granted, token, w) in &by_call {
            while next < by_grant.len() && by_grant[next].1 < call {
                if by_grant[next].2 > newest {
                    (newest, newest_at) = (by_grant[next].2, by_grant[next].1);
                }
                next += 1;
            }
            // A grant may land on the old server after the restart began (it dies
            // somewhere between the stop and the new one answering).
            if token <= newest && java.contains(&w) && restarted_between(newest_at, granted) {
                summary.java_tokens_started_over += 1;
            } else if token <= newest {
                summary.token_regressions += 1;
                summary.violate(
                    "token regression",
                    format!(
                        "{name}: token {token} granted at {granted} after token {newest} had been"
                    ),
                );
            }
        }
    }

    // 6. First come, first served: of two granted fair-lock calls on a name, where the
    // later began more than the tie after the earlier and while it still waited, the
    // later must not be granted first unless the earlier lost its place to a fault.
    // Redisson's fair queue keeps one place per thread, and a Java thread whose wait
    // ended with an error, or gave up while a fault cut its worker off, could not
    // leave it: its next wait (at once, on the same name) is served from that place,
    // so it counts from the earlier wait's start.
    let mut waiting_since: HashMap<(u32, u64), u64> = HashMap::new();
    let mut java_waits: Vec<&Attempt> = attempts
        .values()
        .filter(|attempt| attempt.fifo && java.contains(&attempt.w))
        .collect();
    java_waits.sort_by_key(|attempt| attempt.start);
    for attempt in java_waits {
        let kept = attempt
            .a
            .checked_sub(1)
            .filter(|_| attempt.a & u64::from(u32::MAX) > 0)
            .and_then(|previous| attempts.get(&(attempt.w, previous)))
            .filter(|previous| previous.name == attempt.name)
            .and_then(|previous| {
                let (ended, failed) = previous.unserved?;
                let since = waiting_since
                    .get(&(previous.w, previous.a))
                    .copied()
                    .unwrap_or(previous.start);
                (failed || displaced_between(previous.w, since, ended)).then_some(since)
            });
        if kept.is_some() && attempt.grant.is_some() {
            summary.java_waits_in_a_kept_place += 1;
        }
        waiting_since.insert((attempt.w, attempt.a), kept.unwrap_or(attempt.start));
    }
    // A Java waiter queued ahead of a call on `name` (its wait began first and had not
    // ended when the call began) and cut off while the call waited. Asked of pass-overs
    // only, which are few. (A cut-off waiter of the call's own worker is excused before.)
    let java_ahead_cut_off = |name: &str, since: u64, granted: u64| {
        attempts.values().any(|ahead| {
            let ended = ahead
                .grant
                .map(|(granted, _)| granted)
                .or(ahead.unserved.map(|(ended, _)| ended))
                .unwrap_or(u64::MAX);
            ahead.fifo
                && ahead.name == name
                && java.contains(&ahead.w)
                && ahead.start < since
                && ended > since
                && displaced_between(ahead.w, since, granted.min(ended))
        })
    };
    let mut fair: BTreeMap<&str, Vec<(u64, u64, u32, u64)>> = BTreeMap::new();
    for attempt in attempts.values().filter(|attempt| attempt.fifo) {
        if let Some((granted, _)) = attempt.grant {
            let since = waiting_since
                .get(&(attempt.w, attempt.a))
                .copied()
                .unwrap_or(attempt.start);
            fair.entry(&attempt.name)
                .or_default()
                .push((since, granted, attempt.w, attempt.a));
        }
    }
    for (name, list) in &mut fair {
        list.sort_unstable();
        let longest_wait = list
            .iter()
            .map(|&(call, granted, _, _)| granted.saturating_sub(call))
            .max()
            .unwrap_or(0);
        let mut first = 0;
        for later in 0..list.len() {
            let (call, granted, w, a) = list[later];
            while list[first].0 + longest_wait < call {
                first += 1;
            }
            for &(earlier_call, earlier_granted, earlier_w, earlier_a) in &list[first..later] {
                if earlier_call + FIFO_TIE >= call || earlier_granted <= call {
                    continue;
                }
                summary.fifo_pairs_checked += 1;
                if granted >= earlier_granted {
                    continue;
                }
                if displaced_between(earlier_w, earlier_call, earlier_granted) {
                    summary.passed_over_after_fault += 1;
                } else if java_ahead_cut_off(name, earlier_call, earlier_granted) {
                    summary.passed_over_behind_java_cut_off += 1;
                } else {
                    summary.violate(
                        "served out of order",
                        format!(
                            "{name}: worker {w} (attempt {a:#x}) began {} ms after worker {earlier_w} (attempt {earlier_a:#x}) and was granted {} ms before it",
                            (call - earlier_call) / 1000,
                            (earlier_granted - granted) / 1000
                        ),
                    );
                }
            }
        }
    }

    // 2. Registers. A worker killed while it held a lock and had not recorded its
    // write may have sent it: that write's outcome is unknown too.
    let mut killed_mid_write: HashMap<&str, u64> = HashMap::new();
    for attempt in attempts.values() {
        let killed = kills.get(&attempt.w).copied();
        if let (Some((granted, _)), Some(killed)) = (attempt.grant, killed) {
            if killed >= granted && !attempt.wrote && attempt.unlock.is_none() {
                *killed_mid_write.entry(attempt.name.as_str()).or_default() += 1;
            }
        }
    }
    for (name, list) in &writes {
        let accepted: Vec<u64> = list
            .iter()
            .filter(|write| write.1 == Outcome::Ok)
            .map(|write| write.0)
            .collect();
        let unknown = list
            .iter()
            .filter(|write| write.1 == Outcome::Unknown)
            .count() as u64
            + killed_mid_write.get(name.as_str()).copied().unwrap_or(0);
        let Some(registers) = &last.registers else {
            continue;
        };
        let value = registers.get(name).copied().unwrap_or(0);
        summary.register_total += value;
        let count = accepted.len() as u64;
        if value < count || value > count + unknown {
            summary.violate(
                "lost or extra update",
                format!("{name}: register is {value} after {count} accepted writes and {unknown} of unknown outcome"),
            );
        }
        let mut sorted = accepted.clone();
        sorted.sort_unstable();
        let duplicates = sorted.windows(2).filter(|pair| pair[0] == pair[1]).count();
        if duplicates > 0 {
            summary.violate(
                "lost update",
                format!("{name}: {duplicates} accepted writes wrote a value already written"),
            );
        }
    }

    for key in &last.keys_left {
        summary.violate("lock key left behind", key.clone());
    }
    for w in &last.hung_workers {
        summary.violate("hung worker", format!("worker {w} did not exit when asked"));
    }
    for w in &last.failed_workers {
        summary.violate("worker failed", format!("worker {w} exited with a failure"));
    }
    summary
}
