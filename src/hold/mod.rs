//! The process-local record of what each owner holds: one [`Hold`] per lock and owner,
//! shared by that owner's nested guards; the registry that finds it again is in
//! [`registry`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use fred::bytes_utils::Str;
use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

use crate::error::LockError;
use crate::scripts::LockNames;

mod lease_slot;
mod registry;

pub(crate) use lease_slot::{CELLS_PER_CHUNK, LeaseChunk, LeaseSlot, SlotState};
pub(crate) use registry::{HoldUse, Holds, LocalHolder};

/// One owner's hold on one lock, however many times it is nested.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) names: Arc<LockNames>,
    /// Shared bytes: the watchdog's renewals send it without a copy, and the holds of
    /// one owner share it (see `Holds::enter`).
    pub(crate) owner: Str,
    /// The authoritative local hold count. Holding this lock serialises this owner's
    /// scripts on this lock, which is what lets an unanswered script be resolved by
    /// reading the owner's field (see `Engine::settle` in `engine.rs`).
    pub(crate) ops: Arc<tokio::sync::Mutex<u32>>,
    /// A read-only mirror of the count for synchronous readers: only
    /// [`set_count`](Self::set_count) writes it, with `ops` locked.
    count: AtomicU32,
    /// How many guards own holds of this hold (see `engine::HoldClaim`). Fewer claims
    /// than holds means releases are in flight or owed; a hold with holds but no
    /// claim is being released and must not be re-entered (see
    /// [`is_being_released`](Self::is_being_released)).
    claims: AtomicU32,
    /// Told (all waiters) on every change a waiter may be waiting for: the count
    /// dropping to 0, a claim added, the hold marked lost, the hold warned at risk.
    /// Each waiter checks its own condition again (one signal instead of three keeps
    /// a hold small: a client may hold a million).
    changed: Notify,
    /// Calls in progress on this hold; it stays registered while any are.
    in_use: AtomicUsize,
    token: AtomicU64,
    lost_flag: AtomicBool,
    /// The hold is known to be gone from Redis (its field vanished, or Redis disagreed
    /// with the count): a late release has nothing to free. A hold lost otherwise (its
    /// lease about to run out, renewals failing) may still be in Redis.
    gone: AtomicBool,
    /// Set once a renewal landed with less than the client's at-risk share of the lease
    /// left, or failed, while the hold was not lost: an early warning (see
    /// [`warn_at_risk`](Self::warn_at_risk)).
    at_risk_flag: AtomicBool,
    /// The lease left in Redis when the last renewal landed, in milliseconds
    /// (`u32::MAX`: no renewal has landed yet), as of the last watchdog's end: while a
    /// watchdog runs, its [`LeaseSlot`] has it.
    margin_ms: AtomicU32,
    times: Mutex<Times>,
    /// The renewals: [`WATCHDOG_OFF`], [`WATCHDOG_BOOKED`] or [`WATCHDOG_RUNNING`]
    /// (see [`Hold::start_booked_watchdog`]).
    watchdog: AtomicU32,
    /// Counted in the `holdlock_locks_held` gauge (feature `metrics`): from the count
    /// leaving 0 until it returns to 0 or the hold is lost, whichever comes first.
    #[cfg(feature = "metrics")]
    counted: AtomicBool,
    /// The last hold's release is in flight: a renewal that finds the field gone is
    /// not a loss. (The watchdog is stopped once the release has been answered, so
    /// that stopping it costs the release nothing.)
    releasing: AtomicBool,
    /// The hold's `holdlock.hold` span (see `LockClientBuilder::hold_spans`), from the
    /// grant that raised the count from 0 until it returns to 0 or the hold is lost.
    /// Boxed: most holds never open one, and a span is five words.
    span: Mutex<Option<Box<tracing::Span>>>,
}

/// A hold's times, under one lock.
#[derive(Debug, Default)]
struct Times {
    /// For a fixed lease: when the hold counts as lost, a little before Redis expires
    /// it (see `lease::lost_deadline`).
    expires_at: Option<Instant>,
    /// When Redis will have expired the hold at the latest, unless renewed again: a
    /// lease after the last grant, renewal or extension was answered. A late release
    /// waits no longer than this (after it, there is nothing left to release). While a
    /// watchdog runs, its `slot` has it.
    lease_ends_by: Option<Instant>,
    /// When the grant that raised the count from 0 was sent.
    granted_at: Option<Instant>,
    /// When the watchdog stops renewing (see `LockOptions::max_hold`; `None`: never).
    renew_until: Option<Instant>,
    /// The cell the running watchdog shares with this hold (see `lease_slot.rs`): the
    /// renewals write the margin and the lease's end there, not here.
    slot: Option<LeaseSlot>,
}

/// [`Hold::watchdog`]: no renewals (a fixed lease, or not held).
const WATCHDOG_OFF: u32 = 0;
/// [`Hold::watchdog`]: booked to start at the first renewal, if the hold lives that
/// long.
const WATCHDOG_BOOKED: u32 = 1;
/// [`Hold::watchdog`]: renewed by the client's scheduler.
const WATCHDOG_RUNNING: u32 = 2;

impl Hold {
    fn new(names: &Arc<LockNames>, owner: Str, count: u32) -> Self {
        Self {
            names: Arc::clone(names),
            owner,
            ops: Arc::new(tokio::sync::Mutex::new(count)),
            count: AtomicU32::new(count),
            claims: AtomicU32::new(0),
            changed: Notify::new(),
            in_use: AtomicUsize::new(0),
            token: AtomicU64::new(0),
            lost_flag: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            at_risk_flag: AtomicBool::new(false),
            margin_ms: AtomicU32::new(u32::MAX),
            times: Mutex::default(),
            watchdog: AtomicU32::new(WATCHDOG_OFF),
            #[cfg(feature = "metrics")]
            counted: AtomicBool::new(false),
            releasing: AtomicBool::new(false),
            span: Mutex::new(None),
        }
    }

    /// Takes this owner's operation lock on the hold (see [`ops`](Self::ops)). Without
    /// a wait when it is free, the usual case: tokio's mutex is fair, so a waiter
    /// queued behind a holder is served before any later `try_lock` can succeed.
    pub(crate) async fn lock_ops(&self) -> OwnedMutexGuard<u32> {
        match Arc::clone(&self.ops).try_lock_owned() {
            Ok(count) => count,
            Err(_) => Arc::clone(&self.ops).lock_owned().await,
        }
    }

    pub(crate) fn count(&self) -> u32 {
        self.count.load(Ordering::Acquire)
    }

    /// Records the count after a script; call with `ops` locked.
    pub(crate) fn set_count(&self, ops: &mut u32, count: u32) {
        *ops = count;
        self.count.store(count, Ordering::Release);
        if count == 0 {
            self.changed.notify_waiters();
            self.end_span("released");
        }
        #[cfg(feature = "metrics")]
        if count > 0 && !self.counted.swap(true, Ordering::AcqRel) {
            crate::observe::metrics::held();
        } else if count == 0 && self.counted.swap(false, Ordering::AcqRel) {
            crate::observe::metrics::let_go(self.held_for());
        }
    }

    pub(crate) fn token(&self) -> Option<u64> {
        Some(self.token.load(Ordering::Acquire)).filter(|&t| t != 0)
    }

    /// Records the token of a fresh hold (0: none), replacing any earlier hold's.
    pub(crate) fn set_token(&self, token: u64) {
        self.token.store(token, Ordering::Release);
    }

    /// Opens the hold's span (a fresh grant of a client with `hold_spans`).
    pub(crate) fn open_span(&self) {
        let span = crate::observe::hold_span(
            &self.names.name,
            self.names.kind.label(),
            &self.owner,
            self.token(),
        );
        *self.span.lock() = Some(Box::new(span));
    }

    /// Ends the hold's span, if it has one open, with `outcome`.
    fn end_span(&self, outcome: &'static str) {
        if let Some(span) = self.span.lock().take() {
            crate::observe::end_hold_span(*span, outcome);
        }
    }

    /// Counts a guard's claim on a hold; call with `ops` locked, as the count rises.
    pub(crate) fn add_claim(&self) {
        self.claims.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
    }

    /// A guard's claim ended: its release is in flight, owed, or not needed. The last
    /// claim's end tells a running watchdog to ask before its next renewal (see
    /// [`is_being_released`](Self::is_being_released)).
    pub(crate) fn drop_claim(&self) {
        if self.claims.fetch_sub(1, Ordering::AcqRel) == 1 && self.has_watchdog() {
            if let Some(slot) = &self.times.lock().slot {
                slot.mark_maybe_released();
            }
        }
    }

    /// Whether every guard of this hold has let go while Redis may still count holds
    /// of it: their releases are in flight or owed. Such a hold must not be re-entered
    /// (a new call is a new hold); wait for [`settled`](Self::settled) instead.
    pub(crate) fn is_being_released(&self) -> bool {
        self.count() > 0 && self.claims.load(Ordering::Acquire) == 0 && !self.is_lost()
    }

    /// Resolves once the hold is no longer [being released](Self::is_being_released):
    /// its releases landed (count 0), it was lost (its lease ran out or the client shut
    /// down), or a new guard claimed it.
    pub(crate) async fn settled(&self) {
        loop {
            let changed = self.changed.notified();
            if !self.is_being_released() {
                return;
            }
            let expiry = self.expires_at();
            tokio::select! {
                () = changed => {}
                () = sleep_until_some(expiry) => {}
            }
        }
    }

    /// Whether this hold was taken by `owner`: its own holds, and a semaphore's permits
    /// it took (their ids are `<owner>:p<n>`, see `semaphore.rs`).
    pub(crate) fn is_taken_by(&self, owner: &str) -> bool {
        self.owner
            .strip_prefix(owner)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    }

    /// Records that Redis set the hold's lease to `lease` by now (a grant, renewal or
    /// extension just answered).
    pub(crate) fn lease_set_now(&self, lease: Duration) {
        self.lease_set_by(Instant::now(), lease);
    }

    /// Records that Redis set the hold's lease to `lease` by `answered` (a reading of
    /// the clock taken once the answer was in, shared by a batch of renewals).
    pub(crate) fn lease_set_by(&self, answered: Instant, lease: Duration) {
        let mut times = self.times.lock();
        let ends_by = Some(answered + lease);
        match &times.slot {
            Some(slot) => slot.set_lease_ends_by(ends_by),
            None => times.lease_ends_by = ends_by,
        }
    }

    /// Records that a re-entry asked Redis for `lease` from now: Redis keeps the later
    /// of the two ends (`reenter.lua` never shortens a lease), and so does this record.
    pub(crate) fn lease_lengthened_now(&self, lease: Duration) {
        let later = Instant::now() + lease;
        if self.lease_ends_by().is_none_or(|ends_by| ends_by < later) {
            self.lease_set_by(Instant::now(), lease);
        }
    }

    /// When Redis will have expired the hold at the latest (see
    /// [`lease_set_now`](Self::lease_set_now)); `None` if unknown.
    pub(crate) fn lease_ends_by(&self) -> Option<Instant> {
        let times = self.times.lock();
        match &times.slot {
            Some(slot) => slot.lease_ends_by(),
            None => times.lease_ends_by,
        }
    }

    /// Records a fixed lease granted at `sent_at`, or clears it when a watchdog renews.
    pub(crate) fn set_expiry(&self, sent_at: Instant, lease: Option<Duration>) {
        self.times.lock().expires_at =
            lease.map(|lease| crate::lease::lost_deadline(sent_at, lease));
    }

    /// Records a re-entry's fixed lease sent at `sent_at`: the hold is lost at the later
    /// of its current deadline and the one this lease gives (a re-entry never shortens
    /// a lease).
    pub(crate) fn lengthen_expiry(&self, sent_at: Instant, lease: Duration) {
        let mut times = self.times.lock();
        let deadline = crate::lease::lost_deadline(sent_at, lease);
        if times.expires_at.is_some_and(|current| current < deadline) {
            times.expires_at = Some(deadline);
        }
    }

    /// Records a fresh hold granted at `granted_at`, whose watchdog stops renewing at
    /// `renew_until` (`None`: never).
    pub(crate) fn set_granted(&self, granted_at: Instant, renew_until: Option<Instant>) {
        let mut times = self.times.lock();
        times.granted_at = Some(granted_at);
        times.renew_until = renew_until;
    }

    /// When the watchdog stops renewing, if ever.
    pub(crate) fn renew_until(&self) -> Option<Instant> {
        self.times.lock().renew_until
    }

    /// How long the hold has been held (since its fresh grant was sent).
    pub(crate) fn held_for(&self) -> Option<Duration> {
        self.times
            .lock()
            .granted_at
            .map(|granted_at| granted_at.elapsed())
    }

    pub(crate) fn expires_at(&self) -> Option<Instant> {
        self.times.lock().expires_at
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost_flag.load(Ordering::Acquire)
            || self.expires_at().is_some_and(|at| Instant::now() >= at)
    }

    /// Resolves once the hold has been marked lost (at once if it already was).
    pub(crate) async fn marked_lost(&self) {
        loop {
            let told = self.changed.notified();
            if self.lost_flag.load(Ordering::Acquire) {
                return;
            }
            told.await;
        }
    }

    /// Marks the hold lost because it is known to be gone from Redis (see
    /// [`is_gone`](Self::is_gone)).
    pub(crate) fn mark_gone(&self, why: &str) {
        self.gone.store(true, Ordering::Release);
        self.mark_lost(why);
    }

    /// The error of a call that found this hold not held.
    pub(crate) fn not_held(&self) -> LockError {
        LockError::NotHeld {
            name: self.names.name.clone(),
            owner: self.owner.to_string(),
        }
    }

    /// Whether the hold is known to be gone from Redis; a hold lost otherwise may
    /// still be there until its lease runs out, and a late release frees it.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Marks the hold lost (once), stops its renewal and tells every waiting guard.
    pub(crate) fn mark_lost(&self, why: &str) {
        if self.lost_flag.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stop_watchdog();
        #[cfg(feature = "metrics")]
        {
            crate::observe::metrics::lost();
            if self.counted.swap(false, Ordering::AcqRel) {
                crate::observe::metrics::let_go(self.held_for());
            }
        }
        tracing::warn!(lock = %self.names.name, owner = %self.owner, "lock lost: {why}");
        self.end_span("lost");
        self.changed.notify_waiters();
    }

    /// The lease left in Redis when the last renewal landed, if one has.
    pub(crate) fn margin(&self) -> Option<Duration> {
        if let Some(slot) = &self.times.lock().slot {
            return slot.margin();
        }
        self.own_margin()
    }

    /// The margin the hold's last watchdog left, if one renewed it.
    fn own_margin(&self) -> Option<Duration> {
        let millis = self.margin_ms.load(Ordering::Acquire);
        (millis != u32::MAX).then(|| Duration::from_millis(u64::from(millis)))
    }

    /// Shares `slot` with the watchdog about to start (see `lease_slot.rs`): from now
    /// on the renewals record the margin and the lease's end there. Any slot shared
    /// before is let go first (see [`let_go_of_slot`](Self::let_go_of_slot)).
    pub(crate) fn share_slot(&self, slot: &LeaseSlot) {
        let mut times = self.times.lock();
        if let Some(earlier) = times.slot.clone() {
            self.keep_slot_state(&mut times, &earlier);
        }
        let maybe_released = self.claims.load(Ordering::Acquire) == 0;
        slot.start(self.own_margin(), times.lease_ends_by, maybe_released);
        times.slot = Some(slot.clone());
    }

    /// Stops sharing `slot` (unless another slot was shared since), keeping what it
    /// recorded: its watchdog's renewals have ended.
    pub(crate) fn let_go_of_slot(&self, slot: &LeaseSlot) {
        let mut times = self.times.lock();
        if times.slot.as_ref().is_some_and(|shared| shared.is(slot)) {
            self.keep_slot_state(&mut times, slot);
        }
    }

    /// Copies what `slot` recorded into the hold's own fields, and stops sharing it.
    fn keep_slot_state(&self, times: &mut Times, slot: &LeaseSlot) {
        times.lease_ends_by = slot.lease_ends_by();
        let millis = slot.margin().map_or(u32::MAX, lease_slot::whole_millis);
        self.margin_ms.store(millis, Ordering::Release);
        times.slot = None;
    }

    /// Warns (once) that the hold is at risk of being lost, with `why`: a renewal came
    /// late or failed. Every guard's `at_risk()` resolves; `lost()` has not fired, and
    /// may never.
    pub(crate) fn warn_at_risk(&self, why: &str) {
        if self.is_lost() || self.at_risk_flag.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(lock = %self.names.name, owner = %self.owner, "lock at risk: {why}");
        self.changed.notify_waiters();
    }

    /// Whether the hold has been [warned at risk](Self::warn_at_risk).
    pub(crate) fn is_at_risk(&self) -> bool {
        self.at_risk_flag.load(Ordering::Acquire)
    }

    /// Resolves once the hold has been warned at risk (at once if it was).
    pub(crate) async fn warned_at_risk(&self) {
        loop {
            let told = self.changed.notified();
            if self.is_at_risk() {
                return;
            }
            told.await;
        }
    }

    pub(crate) fn has_watchdog(&self) -> bool {
        self.watchdog.load(Ordering::Acquire) != WATCHDOG_OFF
    }

    /// Books a watchdog unless one is booked or running; returns whether it booked.
    /// The renewal task itself starts only if the hold lives until its first renewal
    /// (see `watchdog.rs`), so short holds never spawn one.
    pub(crate) fn book_watchdog(&self) -> bool {
        let booked = self
            .watchdog
            .compare_exchange(
                WATCHDOG_OFF,
                WATCHDOG_BOOKED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if booked {
            self.releasing.store(false, Ordering::Release);
        }
        booked
    }

    /// Whether a booked watchdog still waits to be started.
    pub(crate) fn is_watchdog_booked(&self) -> bool {
        self.watchdog.load(Ordering::Acquire) == WATCHDOG_BOOKED
    }

    /// Starts the booked watchdog (see `watchdog.rs`), which shares a slot with the
    /// hold from now on (share it first: see [`share_slot`](Self::share_slot)); returns
    /// whether it did (not if it was stopped since).
    pub(crate) fn start_booked_watchdog(&self) -> bool {
        self.watchdog
            .compare_exchange(
                WATCHDOG_BOOKED,
                WATCHDOG_RUNNING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Marks the last hold's release as sent; see [`Hold::is_releasing`].
    pub(crate) fn begin_last_release(&self) {
        self.releasing.store(true, Ordering::Release);
    }

    /// The last hold's release was refused (nothing changed): a renewal that finds
    /// the field gone is a loss again.
    pub(crate) fn end_last_release(&self) {
        self.releasing.store(false, Ordering::Release);
    }

    /// Whether the last hold's release may already have run in Redis.
    pub(crate) fn is_releasing(&self) -> bool {
        self.releasing.load(Ordering::Acquire)
    }

    /// Stops (or cancels the booking of) the renewals: the scheduler drops the hold's
    /// renewal when it next falls due or lands (its slot says so). A renewal already
    /// written to Redis may still run, but the renewal scripts only extend a hold whose
    /// owner field still exists.
    pub(crate) fn stop_watchdog(&self) {
        if self.watchdog.swap(WATCHDOG_OFF, Ordering::AcqRel) == WATCHDOG_RUNNING {
            // Shared before the watchdog started, so there to stop.
            if let Some(slot) = &self.times.lock().slot {
                slot.stop();
            }
        }
    }
}

/// Sleeps until `at`; forever if `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ClientConfig;

    /// A client may hold a million locks (W10 in `holdlock bench`): the record stays
    /// small (it was 336 bytes before its signals, times and watchdog state were
    /// folded; the owner id's handle is shared bytes since, 8 bytes more than a
    /// `String` but no copy of its own per hold; the link to a running watchdog's
    /// slot is 8 bytes more again).
    #[test]
    fn a_hold_record_stays_small() {
        assert!(
            std::mem::size_of::<Hold>() <= 224,
            "{} bytes",
            std::mem::size_of::<Hold>()
        );
    }

    #[test]
    fn the_watchdog_state_follows_booking_start_and_stop() {
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let hold = Hold::new(&names, Str::from("o:1"), 1);
        assert!(!hold.has_watchdog());
        assert!(!hold.start_booked_watchdog(), "not booked");
        assert!(hold.book_watchdog());
        assert!(!hold.book_watchdog(), "booked once");
        assert!(hold.is_watchdog_booked());
        assert!(hold.start_booked_watchdog());
        assert!(!hold.start_booked_watchdog(), "started once");
        assert!(hold.has_watchdog() && !hold.is_watchdog_booked());
        assert!(!hold.book_watchdog(), "running");
        hold.stop_watchdog();
        assert!(!hold.has_watchdog());
        assert!(hold.book_watchdog() && hold.start_booked_watchdog());
    }

    /// While a watchdog runs, its slot has the margin and the lease's end; the hold
    /// keeps them when the watchdog ends, and a stop or the last claim's end reaches
    /// the slot.
    #[test]
    fn a_shared_slot_holds_the_lease_state_until_let_go() {
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let hold = Hold::new(&names, Str::from("o:1"), 1);
        let now = Instant::now();
        let lease = Duration::from_secs(30);
        hold.lease_set_by(now, lease);
        hold.add_claim();
        assert!(hold.book_watchdog());

        let chunk = LeaseChunk::new(now);
        let slot = LeaseSlot::new(Arc::clone(&chunk), 0);
        hold.share_slot(&slot);
        assert!(hold.start_booked_watchdog());
        assert_eq!(slot.state(), SlotState::Running);
        assert_eq!(slot.lease_ends_by(), Some(now + lease), "carried over");
        slot.renewed(Duration::from_secs(20), now + lease * 2);
        assert_eq!(hold.margin(), Some(Duration::from_secs(20)));
        assert_eq!(hold.lease_ends_by(), Some(now + lease * 2));
        hold.lease_set_by(now, lease * 3);
        assert_eq!(
            slot.lease_ends_by(),
            Some(now + lease * 3),
            "written through"
        );

        hold.drop_claim();
        assert_eq!(slot.state(), SlotState::MaybeReleased);
        hold.stop_watchdog();
        assert_eq!(slot.state(), SlotState::Stopped);

        // Another slot shared since: letting go of the first keeps the second.
        let second = LeaseSlot::new(chunk, 1);
        assert!(hold.book_watchdog());
        hold.share_slot(&second);
        assert_eq!(second.state(), SlotState::MaybeReleased, "no claim left");
        assert_eq!(second.margin(), Some(Duration::from_secs(20)));
        hold.let_go_of_slot(&slot);
        second.renewed(Duration::from_secs(19), now + lease * 4);
        assert_eq!(hold.margin(), Some(Duration::from_secs(19)));
        hold.let_go_of_slot(&second);
        second.renewed(Duration::from_secs(1), now);
        assert_eq!(hold.margin(), Some(Duration::from_secs(19)), "kept");
        assert_eq!(hold.lease_ends_by(), Some(now + lease * 4));
    }
}
