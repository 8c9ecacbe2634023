//! The process-local record of what each owner holds: one [`Hold`] per lock and owner,
//! shared by that owner's nested guards, plus the registry that finds it again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

use crate::keys::{Kind, LockNames};

/// One owner's hold on one lock, however many times it is nested.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) names: Arc<LockNames>,
    pub(crate) owner: String,
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
    /// (`u64::MAX`: no renewal has landed yet).
    margin_ms: AtomicU64,
    times: Mutex<Times>,
    /// The renewals: [`WATCHDOG_OFF`], [`WATCHDOG_BOOKED`], or the ticket of the
    /// running renewal plus [`WATCHDOG_RUNNING`] (see [`Hold::start_booked_watchdog`]).
    watchdog: AtomicU64,
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
    /// waits no longer than this (after it, there is nothing left to release).
    lease_ends_by: Option<Instant>,
    /// When the grant that raised the count from 0 was sent.
    granted_at: Option<Instant>,
    /// When the watchdog stops renewing (see `LockOptions::max_hold`; `None`: never).
    renew_until: Option<Instant>,
}

/// [`Hold::watchdog`]: no renewals (a fixed lease, or not held).
const WATCHDOG_OFF: u64 = 0;
/// [`Hold::watchdog`]: booked to start at the first renewal, if the hold lives that
/// long.
const WATCHDOG_BOOKED: u64 = 1;
/// [`Hold::watchdog`]: renewed by the client's scheduler, as the renewal whose ticket
/// is the value minus this.
const WATCHDOG_RUNNING: u64 = 2;

impl Hold {
    fn new(names: &Arc<LockNames>, owner: &str, count: u32) -> Self {
        Self {
            names: Arc::clone(names),
            owner: owner.to_owned(),
            ops: Arc::new(tokio::sync::Mutex::new(count)),
            count: AtomicU32::new(count),
            claims: AtomicU32::new(0),
            changed: Notify::new(),
            in_use: AtomicUsize::new(0),
            token: AtomicU64::new(0),
            lost_flag: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            at_risk_flag: AtomicBool::new(false),
            margin_ms: AtomicU64::new(u64::MAX),
            times: Mutex::default(),
            watchdog: AtomicU64::new(WATCHDOG_OFF),
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

    /// A guard's claim ended: its release is in flight, owed, or not needed.
    pub(crate) fn drop_claim(&self) {
        self.claims.fetch_sub(1, Ordering::AcqRel);
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
        self.times.lock().lease_ends_by = Some(Instant::now() + lease);
    }

    /// When Redis will have expired the hold at the latest (see
    /// [`lease_set_now`](Self::lease_set_now)); `None` if unknown.
    pub(crate) fn lease_ends_by(&self) -> Option<Instant> {
        self.times.lock().lease_ends_by
    }

    /// Records a fixed lease granted at `sent_at`, or clears it when a watchdog renews.
    pub(crate) fn set_expiry(&self, sent_at: Instant, lease: Option<Duration>) {
        self.times.lock().expires_at =
            lease.map(|lease| crate::lease::lost_deadline(sent_at, lease));
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

    /// Records the lease left in Redis when a renewal landed.
    pub(crate) fn record_margin(&self, margin: Duration) {
        let millis = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX - 1);
        self.margin_ms.store(millis, Ordering::Release);
        #[cfg(feature = "metrics")]
        crate::observe::metrics::renewal_margin(margin);
    }

    /// The lease left in Redis when the last renewal landed, if one has.
    pub(crate) fn margin(&self) -> Option<Duration> {
        let millis = self.margin_ms.load(Ordering::Acquire);
        (millis != u64::MAX).then(|| Duration::from_millis(millis))
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

    /// Starts the booked watchdog as renewal `ticket` (see `watchdog.rs`); returns
    /// whether it did (not if it was stopped since).
    pub(crate) fn start_booked_watchdog(&self, ticket: u64) -> bool {
        let running = ticket.saturating_add(WATCHDOG_RUNNING);
        self.watchdog
            .compare_exchange(
                WATCHDOG_BOOKED,
                running,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Whether renewal `ticket` still renews this hold: it was started and neither
    /// stopped nor replaced by a later watchdog of the same hold since.
    pub(crate) fn is_renewed_by(&self, ticket: u64) -> bool {
        self.watchdog.load(Ordering::Acquire) == ticket.saturating_add(WATCHDOG_RUNNING)
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
    /// renewal when it next falls due or lands. A renewal already written to Redis may
    /// still run, but the renewal scripts only extend a hold whose owner field still
    /// exists.
    pub(crate) fn stop_watchdog(&self) {
        self.watchdog.store(WATCHDOG_OFF, Ordering::Release);
    }
}

/// Sleeps until `at`; forever if `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Every hold of one client: by lock name, the holds of each owner (rarely more than
/// one per lock: only one owner can hold a lock, others appear while they try).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    map: Mutex<HashMap<RegistryKey, Holders>>,
}

/// A registry entry's key: the [registry key](LockNames::registry_key) of the names it
/// holds, without a copy of it (a client may hold a million locks).
#[derive(Debug, Clone)]
struct RegistryKey(Arc<LockNames>);

impl std::borrow::Borrow<str> for RegistryKey {
    fn borrow(&self) -> &str {
        self.0.registry_key()
    }
}

impl std::hash::Hash for RegistryKey {
    // As `str` hashes, which `Borrow<str>` requires.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.registry_key().hash(state);
    }
}

impl PartialEq for RegistryKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.registry_key() == other.0.registry_key()
    }
}

impl Eq for RegistryKey {}

/// The holds registered under one lock: nearly always one, kept without an allocation
/// of its own.
#[derive(Debug)]
enum Holders {
    One(Arc<Hold>),
    Many(Vec<Arc<Hold>>),
}

impl Default for Holders {
    fn default() -> Self {
        Self::Many(Vec::new())
    }
}

impl Holders {
    fn as_slice(&self) -> &[Arc<Hold>] {
        match self {
            Self::One(hold) => std::slice::from_ref(hold),
            Self::Many(holds) => holds,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Arc<Hold>] {
        match self {
            Self::One(hold) => std::slice::from_mut(hold),
            Self::Many(holds) => holds,
        }
    }

    fn push(&mut self, hold: Arc<Hold>) {
        match self {
            Self::Many(holds) if holds.is_empty() => *self = Self::One(hold),
            Self::Many(holds) => holds.push(hold),
            Self::One(first) => *self = Self::Many(vec![Arc::clone(first), hold]),
        }
    }

    /// Takes out `hold` if it is registered here.
    fn remove(&mut self, hold: &Arc<Hold>) {
        match self {
            Self::One(only) if Arc::ptr_eq(only, hold) => *self = Self::default(),
            Self::One(_) => {}
            Self::Many(holds) => holds.retain(|current| !Arc::ptr_eq(current, hold)),
        }
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    fn into_vec(self) -> Vec<Arc<Hold>> {
        match self {
            Self::One(hold) => vec![hold],
            Self::Many(holds) => holds,
        }
    }
}

/// The answer of [`Holds::local_holder`].
#[derive(Debug)]
pub(crate) enum LocalHolder {
    /// The owner asking: a re-entry, with its hold in use.
    Owner(HoldUse),
    Other,
    Nobody,
}

impl Hold {
    /// Held (as far as this process knows) and not lost.
    fn is_live(&self) -> bool {
        self.count() > 0 && !self.is_lost()
    }
}

impl Holds {
    /// Who holds the lock filed under `registry` (see [`LockNames::registry_key`])
    /// through this client, as far as it knows, for `owner` asking for a hold of
    /// `kind`: `owner` itself (a re-entry: its hold is returned in use, so one lookup
    /// serves the whole call), another owner whose hold excludes it (Redis would
    /// refuse `owner` for certain), or nobody here.
    pub(crate) fn local_holder(
        self: &Arc<Self>,
        registry: &str,
        owner: &str,
        kind: Kind,
    ) -> LocalHolder {
        let map = self.map.lock();
        let live = map
            .get(registry)
            .map_or(&[][..], Holders::as_slice)
            .iter()
            .filter(|hold| hold.is_live());
        let mut holder = LocalHolder::Nobody;
        for hold in live {
            if hold.owner == owner && hold.names.kind == kind {
                return LocalHolder::Owner(self.use_registered(hold));
            }
            if hold.owner != owner && hold.names.kind.excludes(kind) {
                holder = LocalHolder::Other;
            }
        }
        holder
    }

    /// The registered hold of `owner` on this lock, created (with count 0) if there is
    /// none or the registered one is lost. It stays registered while the use lives.
    pub(crate) fn enter(self: &Arc<Self>, names: &Arc<LockNames>, owner: &str) -> HoldUse {
        let mut map = self.map.lock();
        let holds = match map.get_mut(names.registry_key()) {
            Some(holds) => holds,
            None => map.entry(RegistryKey(Arc::clone(names))).or_default(),
        };
        let hold = match holds
            .as_mut_slice()
            .iter_mut()
            .find(|hold| hold.owner == owner && hold.names.kind == names.kind)
        {
            // A lost hold is replaced only once no call is at work on it (a late
            // release of it may be in flight: it must not touch the new hold's field).
            // The caller waits for that call, finds the hold lost and enters again.
            Some(slot) if slot.is_lost() && slot.ops.try_lock().is_ok() => {
                *slot = Arc::new(Hold::new(names, owner, 0));
                Arc::clone(slot)
            }
            Some(slot) => Arc::clone(slot),
            None => {
                let hold = Arc::new(Hold::new(names, owner, 0));
                holds.push(Arc::clone(&hold));
                hold
            }
        };
        self.use_registered(&hold)
    }

    /// Whether `hold` is the one registered for its owner and lock: no newer hold of
    /// the owner has taken its place.
    pub(crate) fn is_current(&self, hold: &Arc<Hold>) -> bool {
        let map = self.map.lock();
        map.get(hold.names.registry_key()).is_some_and(|holds| {
            holds
                .as_slice()
                .iter()
                .any(|current| Arc::ptr_eq(current, hold))
        })
    }

    /// Uses `hold`, a hold given up as lost, for a late release: registered again (so
    /// that the owner's next call waits for the release instead of replacing it while
    /// the release is in flight), unless a newer hold of the owner has taken its place
    /// (`None`: a late release would touch that hold's count).
    pub(crate) fn reenter_lost(self: &Arc<Self>, hold: &Arc<Hold>) -> Option<HoldUse> {
        let mut map = self.map.lock();
        let holds = map.entry(RegistryKey(Arc::clone(&hold.names))).or_default();
        let same =
            |other: &Arc<Hold>| other.owner == hold.owner && other.names.kind == hold.names.kind;
        match holds.as_slice().iter().find(|other| same(other)) {
            Some(current) if !Arc::ptr_eq(current, hold) => return None,
            Some(_) => {}
            None => holds.push(Arc::clone(hold)),
        }
        drop(map);
        Some(self.reenter(hold))
    }

    /// Uses a hold a guard already has, whether or not it is still registered.
    pub(crate) fn reenter(self: &Arc<Self>, hold: &Arc<Hold>) -> HoldUse {
        let _map = self.map.lock();
        self.use_registered(hold)
    }

    /// Counts a use of `hold`; the caller holds the map's lock, so that `leave` cannot
    /// unregister the hold meanwhile.
    fn use_registered(self: &Arc<Self>, hold: &Arc<Hold>) -> HoldUse {
        hold.in_use.fetch_add(1, Ordering::AcqRel);
        HoldUse {
            holds: Arc::clone(self),
            hold: Arc::clone(hold),
        }
    }

    /// A hold that `owner` took on the lock filed under `registry` (of any kind, or a
    /// semaphore permit) and is [being released](Hold::is_being_released), if any.
    pub(crate) fn being_released(&self, registry: &str, owner: &str) -> Option<Arc<Hold>> {
        let map = self.map.lock();
        map.get(registry)?
            .as_slice()
            .iter()
            .find(|hold| hold.is_taken_by(owner) && hold.is_being_released())
            .cloned()
    }

    /// Registers a new hold with `count` holds in place of `stale`, whose Redis state
    /// has vanished.
    pub(crate) fn replace(self: &Arc<Self>, stale: &Arc<Hold>, count: u32) -> HoldUse {
        stale.mark_gone("the hold vanished from redis (expired or force-unlocked)");
        let fresh = Arc::new(Hold::new(&stale.names, &stale.owner, count));
        fresh.in_use.fetch_add(1, Ordering::AcqRel);
        let mut map = self.map.lock();
        let holds = map
            .entry(RegistryKey(Arc::clone(&stale.names)))
            .or_default();
        let same = |hold: &&mut Arc<Hold>| {
            hold.owner == stale.owner && hold.names.kind == stale.names.kind
        };
        match holds.as_mut_slice().iter_mut().find(same) {
            Some(slot) => *slot = Arc::clone(&fresh),
            None => holds.push(Arc::clone(&fresh)),
        }
        HoldUse {
            holds: Arc::clone(self),
            hold: fresh,
        }
    }

    /// Empties the registry, marking every hold lost with `why`.
    pub(crate) fn drain(&self, why: &str) {
        let holds: Vec<_> = self
            .map
            .lock()
            .drain()
            .flat_map(|(_, holds)| holds.into_vec())
            .collect();
        for hold in holds {
            if hold.count() > 0 {
                hold.mark_lost(why);
            }
            hold.stop_watchdog();
        }
    }

    fn leave(&self, hold: &Arc<Hold>) {
        let mut map = self.map.lock();
        let in_use = hold.in_use.fetch_sub(1, Ordering::AcqRel) - 1;
        if in_use > 0 || hold.is_live() {
            return;
        }
        let Some(holds) = map.get_mut(hold.names.registry_key()) else {
            return;
        };
        holds.remove(hold);
        if holds.is_empty() {
            map.remove(hold.names.registry_key());
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map
            .lock()
            .values()
            .map(|holds| holds.as_slice().len())
            .sum()
    }
}

/// A call in progress on a [`Hold`]; unregisters the hold on drop once it is unused.
#[derive(Debug)]
pub(crate) struct HoldUse {
    holds: Arc<Holds>,
    pub(crate) hold: Arc<Hold>,
}

impl Drop for HoldUse {
    fn drop(&mut self) {
        self.holds.leave(&self.hold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ClientConfig;

    #[tokio::test]
    async fn registry_forgets_unused_holds() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let first = holds.enter(&names, "o:1");
        {
            let mut ops = first.hold.ops.lock().await;
            first.hold.set_count(&mut ops, 1);
        }
        let hold = Arc::clone(&first.hold);
        drop(first);
        assert_eq!(holds.len(), 1, "a held lock stays registered");
        match holds.local_holder("a", "o:1", Kind::Mutex) {
            LocalHolder::Owner(entry) => assert!(Arc::ptr_eq(&entry.hold, &hold)),
            other => panic!("the holder asked: {other:?}"),
        }
        assert!(matches!(
            holds.local_holder("a", "o:2", Kind::Mutex),
            LocalHolder::Other
        ));
        assert!(matches!(
            holds.local_holder("b", "o:1", Kind::Mutex),
            LocalHolder::Nobody
        ));
        let again = holds.reenter(&hold);
        {
            let mut ops = hold.ops.lock().await;
            hold.set_count(&mut ops, 0);
        }
        drop(again);
        assert_eq!(holds.len(), 0, "a released lock is forgotten");
    }

    #[test]
    fn lost_holds_are_replaced_on_enter() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let first = holds.enter(&names, "o:1");
        first.hold.mark_lost("test");
        let second = holds.enter(&names, "o:1");
        assert!(!Arc::ptr_eq(&first.hold, &second.hold));
        assert!(first.hold.lost_flag.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn several_owners_of_one_lock_are_registered_and_forgotten_one_by_one() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let uses: Vec<HoldUse> = ["o:1", "o:2", "o:3"]
            .into_iter()
            .map(|owner| holds.enter(&names, owner))
            .collect();
        assert_eq!(holds.len(), 3);
        let again = holds.enter(&names, "o:2");
        assert!(Arc::ptr_eq(&again.hold, &uses[1].hold), "the same owner's hold");
        drop(again);
        let mut uses = uses.into_iter();
        let first = uses.next().unwrap();
        let first_hold = Arc::clone(&first.hold);
        drop(first);
        assert_eq!(holds.len(), 2, "an unused, unheld hold is forgotten");
        assert!(!holds.is_current(&first_hold));
        let rest: Vec<HoldUse> = uses.collect();
        assert!(rest.iter().all(|entry| holds.is_current(&entry.hold)));
        // Registered again under a key whose first names were the forgotten hold's.
        let other_names = Arc::new(ClientConfig::default().names("a").unwrap());
        let fourth = holds.enter(&other_names, "o:4");
        assert_eq!(holds.len(), 3);
        drop(rest);
        drop(fourth);
        assert_eq!(holds.len(), 0);
        assert!(matches!(
            holds.local_holder("a", "o:2", Kind::Mutex),
            LocalHolder::Nobody
        ));
    }

    /// A client may hold a million locks (W10 in `holdlock bench`): the record stays
    /// small (it was 336 bytes before its signals, times and watchdog state were
    /// folded).
    #[test]
    fn a_hold_record_stays_small() {
        assert!(
            std::mem::size_of::<Hold>() <= 208,
            "{} bytes",
            std::mem::size_of::<Hold>()
        );
    }

    #[test]
    fn the_watchdog_state_follows_booking_start_and_stop() {
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let hold = Hold::new(&names, "o:1", 1);
        assert!(!hold.has_watchdog());
        assert!(!hold.start_booked_watchdog(7), "not booked");
        assert!(hold.book_watchdog());
        assert!(!hold.book_watchdog(), "booked once");
        assert!(hold.is_watchdog_booked());
        assert!(!hold.is_renewed_by(7));
        assert!(hold.start_booked_watchdog(7));
        assert!(!hold.start_booked_watchdog(8), "started once");
        assert!(hold.is_renewed_by(7) && !hold.is_renewed_by(8));
        assert!(!hold.book_watchdog(), "running");
        hold.stop_watchdog();
        assert!(!hold.has_watchdog() && !hold.is_renewed_by(7));
        assert!(hold.book_watchdog() && hold.start_booked_watchdog(9));
        assert!(hold.is_renewed_by(9) && !hold.is_renewed_by(7));
    }
}
