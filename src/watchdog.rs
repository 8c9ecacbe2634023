//! Lease renewal: one scheduler per client renews every held lock on its own schedule,
//! and sends the renewals that fall due together in one script call.
//!
//! A hold books its watchdog when it is granted; it joins the scheduler's timers only
//! when its first renewal nears. Most holds are released long before a third of their
//! lease, and so never cost a timer.
//!
//! Each hold is renewed `lease / 3` after the exchange that set its current lease. At
//! each wake the scheduler takes every renewal due within [`EARLY`] (early, never
//! late) and sends them in batches of up to [`BATCH`] holds (`renew_many.lua`; on a
//! cluster, one batch per primary, of any of its slots, by the client's routing table:
//! a hold whose slot has moved is renewed alone, where it is now). Each hold's outcome is
//! its own: if its owner's field is gone (the key was deleted or expired behind our
//! back), or renewals keep failing until the lease is about to run out (see
//! [`lost_deadline`](crate::lease::lost_deadline)), that hold is lost: its guard's
//! [`lost`](crate::LockGuard::lost) signal fires and a warning is logged. A renewal
//! that lands late, or fails, warns that hold at risk.
//!
//! Every hold is also renewed as soon as the command connection is re-established.
//! The server the client reconnects to may not be the one it renewed on: after a
//! Sentinel or Cluster failover the new primary keeps the expiry of the last renewal
//! that reached it before the promotion, while the client may have gone on renewing
//! on the old primary until it was demoted. Waiting for the next `lease / 3` would
//! then lose any hold with less than that left on the new primary. The scheduler
//! hears fred's reconnection events and renews every hold at once (see
//! [`spawn_scheduler`]); a batch in flight across a reconnection is sent again when
//! it lands.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use fred::interfaces::EventInterface;
use fred::types::config::Server;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{Notify, Semaphore, SemaphorePermit, broadcast};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{LockError, Result};
use crate::hold::{Hold, SlotState};
use crate::lease::{lost_deadline, renewal_period};
use crate::protocol::Protocol;
use crate::scripts::{HoldToRenew, RenewalCall, Renewed, key_slot};

mod bookings;
mod by_owner;
mod timers;
mod watched;

use bookings::Bookings;
use by_owner::ByOwner;
use timers::Timers;
use watched::{Locked, Watched, WatchedTable};

/// How early a renewal may go out, to join others in one call: never late, at most
/// this and a timer slot ([`timers::TICK`]) early.
pub(crate) const EARLY: Duration = Duration::from_millis(40);

/// The most holds renewed in one script call.
pub(crate) const BATCH: usize = 256;

/// One hold's renewals, while the scheduler renews it: its number in the table of
/// holds renewed (see [`WatchedTable`]) and its deadline. Small, as it moves through
/// the timers and the calls: a client holding a million locks keeps a million.
///
/// What sending it needs stays in the table, side by side with the other holds'; a
/// renewal looks at its hold through the slot they share (see `hold/lease_slot.rs`),
/// and records there what it came to. The hold record itself is read only when
/// something happened to it (released, lost, at risk): with a million holds each
/// record is a cache miss.
#[derive(Debug)]
struct Renewal {
    /// The hold's number in the table, until its renewals end (see
    /// `watched::Locked::end`).
    number: usize,
    /// When the hold must be taken as lost unless a renewal lands first: a lost
    /// deadline (see [`lost_deadline`]) after the exchange that set the lease Redis
    /// has now was sent.
    expires: Instant,
    /// The lease in milliseconds.
    lease_ms: u64,
}

impl Renewal {
    fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// When the exchange that set the lease Redis has now was sent.
    fn renewed_at(&self) -> Instant {
        let lease = self.lease();
        self.expires
            .checked_sub(lease - lease / 10)
            .unwrap_or(self.expires)
    }

    /// When the renewal, sent at `sent_at` and answered at `now`, falls due next: a
    /// period after `sent_at` (never before now), or at the deadline if that is sooner;
    /// at once if the client reconnected while it was in flight (another renewal
    /// answers the reconnection).
    fn next_due(&self, sent_at: Instant, now: Instant, reconnected: bool) -> Instant {
        if reconnected {
            now
        } else {
            (sent_at + renewal_period(self.lease()))
                .max(now)
                .min(self.expires)
        }
    }

    /// What the renewal of `watched`, whose slot says `state`, due at `now`, comes to.
    fn fate(&self, watched: &Watched, state: SlotState, now: Instant) -> Fate {
        if state == SlotState::Stopped {
            Fate::Stopped
        } else if state == SlotState::MaybeReleased && watched.hold.is_being_released() {
            // Every guard let go and the release is queued or in flight: no guard
            // owns the hold, and none ever will (a new call takes a new hold). Its
            // lease is left to run, which at worst frees the lock as the release was
            // to (a million dropped guards are released, not renewed as well); if the
            // release has not landed by the lost deadline, the hold is lost there as
            // before, which ends the release's retries and lets the owner go on.
            if now >= self.expires {
                Fate::Lost("its release did not land before its lease ran out")
            } else {
                Fate::Released
            }
        } else if now >= self.expires {
            Fate::Lost("renewals failed until the lease was about to run out")
        } else if watched.renew_until.is_some_and(|until| now >= until) {
            Fate::HeldLongEnough
        } else {
            Fate::Renew
        }
    }
}

/// What a renewal that fell due comes to (see [`Renewal::fate`]).
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    /// Sent.
    Renew,
    /// Dropped: the hold is renewed no more (released, or lost).
    Stopped,
    /// Not sent: the hold is being released. Filed again for its lost deadline.
    Released,
    /// The lease is about to run out (renewals failed, or the release did not land):
    /// the hold is lost, for the reason given.
    Lost(&'static str),
    /// Held for its `max_hold`: the lease is left to run out.
    HeldLongEnough,
}

/// What one hold's renewal in a batch came to.
enum Outcome {
    Landed(Renewed),
    Failed(String),
    TimedOut,
}

/// The watchdogs of one client: bookings not yet started, the timers of the holds
/// renewed, the bound on renewal calls in flight, and the protocol they renew over.
/// One scheduler task per client starts booked watchdogs when they fall due, sends
/// the renewals due, and renews every hold after a reconnection.
#[derive(Debug)]
pub(crate) struct Watchdogs {
    bookings: Bookings,
    timers: Mutex<Timers>,
    /// Wakes the scheduler for a renewal due before it planned to wake.
    wake: Notify,
    /// The holds renewed, by number.
    watched: WatchedTable,
    /// Bumped on each reconnection of the command client: a batch sent before one and
    /// landing after it is due again at once.
    reconnections: AtomicU64,
    slots: RenewalSlots,
    renewer: Arc<Protocol>,
    /// A renewal that lands with less than this share of the lease left warns that its
    /// hold is at risk (see `Hold::warn_at_risk`).
    at_risk_share: f64,
    /// The scheduler task, until [`stop`](Self::stop).
    starter: Mutex<Option<JoinHandle<()>>>,
}

impl Watchdogs {
    /// Starts the scheduler of a client whose holds are renewed over `renewer`, with
    /// `lease` as its default lease (the scheduler wakes at least every sixth of it),
    /// warning of a hold at risk when a renewal lands with less than `at_risk_share` of
    /// its lease left.
    pub(crate) fn start(renewer: Arc<Protocol>, lease: Duration, at_risk_share: f64) -> Arc<Self> {
        let watchdogs = Arc::new(Self {
            bookings: Bookings::default(),
            timers: Mutex::default(),
            wake: Notify::new(),
            watched: WatchedTable::default(),
            reconnections: AtomicU64::new(0),
            slots: RenewalSlots::default(),
            renewer,
            at_risk_share,
            starter: Mutex::new(None),
        });
        *watchdogs.starter.lock() = Some(spawn_scheduler(&watchdogs, lease));
        watchdogs
    }

    /// Books a watchdog for `hold`, granted at `granted_at`, unless it has one. The
    /// hold joins the timers only if it lives until near its first renewal.
    pub(crate) fn book(&self, hold: &Arc<Hold>, lease: Duration, granted_at: Instant) {
        self.bookings.book(hold, lease, granted_at);
    }

    /// Starts a watchdog for `hold` now, unless it has one, whose first renewal is sent
    /// at `first_renewal`: for a hold whose expiry in Redis is shorter than its lease (a
    /// fair lock taken on its hand-off message), which `granted_at` accounts for.
    pub(crate) fn start_now(
        self: &Arc<Self>,
        hold: &Arc<Hold>,
        lease: Duration,
        granted_at: Instant,
        first_renewal: Instant,
    ) {
        if hold.book_watchdog() {
            self.start_booked(hold, lease, granted_at, first_renewal);
        }
    }

    /// Starts the booked watchdog of `hold` (unless it was stopped since): its first
    /// renewal falls due at `first_renewal`.
    fn start_booked(
        &self,
        hold: &Arc<Hold>,
        lease: Duration,
        granted_at: Instant,
        first_renewal: Instant,
    ) {
        let mut table = self.watched.lock();
        let (number, slot) = table.take();
        // Shared before the start, so that a stop once it started finds the slot.
        hold.share_slot(&slot);
        if !hold.start_booked_watchdog() {
            hold.let_go_of_slot(&slot);
            table.give_back(number);
            return;
        }
        table.fill(number, Watched::new(hold));
        drop(table);
        let renewal = Renewal {
            number,
            expires: lost_deadline(granted_at, lease),
            lease_ms: millis(lease),
        };
        self.file(first_renewal, renewal);
    }

    /// Files `renewal` to fall due at `at`, waking the scheduler if it sleeps past it.
    fn file(&self, at: Instant, renewal: Renewal) {
        if self.timers.lock().insert_all([(at, renewal)]) {
            self.wake.notify_one();
        }
    }

    /// Stops the scheduler: booked watchdogs are never started, and nothing is renewed
    /// again. (Holds are marked lost by the client's shutdown.)
    pub(crate) fn stop(&self) {
        if let Some(starter) = self.starter.lock().take() {
            starter.abort();
        }
    }

    /// Takes the renewals due by `now` (and up to [`EARLY`] before they fall due), and
    /// sends them in batches. Holds that reached their deadline are marked lost here;
    /// a hold held for its `max_hold` is renewed no more.
    fn send_due(self: &Arc<Self>, now: Instant) {
        let mut due = self.timers.lock().take_due(now + EARLY);
        if due.is_empty() {
            return;
        }
        let epoch = self.reconnections.load(Ordering::Acquire);
        // On a cluster, a call per node (of any of its slots), by the client's table.
        let placement = self.renewer.placement();
        // The holds of one owner next to each other: a batch names each owner once.
        let mut ready = ByOwner::default();
        let mut released = Vec::new();
        // In the order of their entries, which lie side by side in the table: the
        // processor fetches what comes next before it is read.
        due.sort_unstable_by_key(|renewal| renewal.number);
        let mut table = self.watched.lock();
        for renewal in due {
            let number = renewal.number;
            let Some(watched) = table.get(number) else {
                continue;
            };
            match renewal.fate(watched, table.state(number), now) {
                Fate::Renew => ready.push(watched.owner.as_ptr(), renewal),
                Fate::Stopped => table.end(number),
                Fate::Released => released.push((renewal.expires, renewal)),
                Fate::Lost(why) => {
                    watched.hold.mark_lost(why);
                    table.end(number);
                }
                Fate::HeldLongEnough => self.stop_at_max_hold(watched, renewal),
            }
        }
        let slot_of = |renewal: &Renewal| {
            table
                .get(renewal.number)
                .map_or(0, |watched| key_slot(watched.key.as_bytes()))
        };
        // Each call's keys and arguments made while its entries were just read.
        let calls: Vec<_> = placement
            .calls(ready.into_vec(), slot_of, BATCH)
            .into_iter()
            .map(|batch| {
                let call = renewal_call(&table, &batch);
                (batch, call)
            })
            .collect();
        drop(table);
        if !released.is_empty() {
            // Filed during the scheduler's own pass: it reads the timers before it
            // sleeps, so no wake-up is needed.
            self.timers.lock().insert_all(released);
        }
        // One task sends them all, each call on its own: a task per call would wake an
        // idle worker thread for each, and a thread's wake-up costs more than the call.
        if calls.is_empty() {
            return;
        }
        let batches = calls.into_iter().map(|(batch, call)| {
            let watchdogs = Arc::clone(self);
            watchdogs.renew_batch(batch, call, epoch)
        });
        drop(tokio::spawn(futures::future::join_all(batches)));
    }

    /// Renews `watched` no more: held for its `max_hold`, its lease is left to run out,
    /// and the hold is lost at its deadline (exactly, not a timer slot early or late).
    fn stop_at_max_hold(self: &Arc<Self>, watched: &Watched, renewal: Renewal) {
        let hold = &watched.hold;
        tracing::warn!(lock = %hold.names.name, owner = %hold.owner, "held for its max_hold; the watchdog stops renewing it");
        let watchdogs = Arc::clone(self);
        drop(tokio::spawn(async move {
            tokio::time::sleep_until(renewal.expires).await;
            let mut table = watchdogs.watched.lock();
            let number = renewal.number;
            if let Some(watched) = table.get(number) {
                if table.state(number) != SlotState::Stopped {
                    let why = "held longer than its max_hold; renewal stopped";
                    watched.hold.mark_lost(why);
                }
            }
            table.end(number);
        }));
    }

    /// Renews `batch` in one call (on a cluster, one node's holds; `call` made from
    /// their entries, `None` if one was missing) and files each renewal again by its
    /// own outcome; `epoch` is the reconnections heard when it was taken. A hold whose
    /// slot has moved off that node is renewed again alone, where its slot is now.
    async fn renew_batch(
        self: Arc<Self>,
        batch: Vec<Renewal>,
        call: Option<RenewalCall>,
        epoch: u64,
    ) {
        // Taken before the wait for a slot: the deadline errs early, never late.
        let sent_at = Instant::now();
        let deadline = batch
            .iter()
            .map(|renewal| (sent_at + renewal_period(renewal.lease())).min(renewal.expires))
            .min()
            .unwrap_or(sent_at);
        let call = async {
            let _slot = self.slots.take().await;
            let mut replies = match &call {
                Some(call) => self.renewer.renew_many(call).await?,
                // Never: a renewal's number is the table's until its renewals end.
                None => return Err(LockError::Protocol("a renewal not in the table".into())),
            };
            if batch.len() > 1 {
                self.renew_moved_alone(&batch, &mut replies).await;
            }
            Ok(replies)
        };
        let replies: Result<Vec<Renewed>, Option<LockError>> =
            match tokio::time::timeout_at(deadline, call).await {
                Ok(Ok(replies)) => Ok(replies),
                Ok(Err(error)) => Err(Some(error)),
                Err(_) => Err(None),
            };
        let reconnected = self.reconnections.load(Ordering::Acquire) != epoch;
        // One reading of the clock for the whole batch: they all landed together.
        let landed_at = Instant::now();
        let mut next = Vec::with_capacity(batch.len());
        let mut table = self.watched.lock();
        for (index, renewal) in batch.into_iter().enumerate() {
            let outcome = match &replies {
                Ok(replies) => match replies.get(index) {
                    Some(&renewed) => Outcome::Landed(renewed),
                    None => Outcome::Failed("a short reply".to_owned()),
                },
                Err(Some(error)) => Outcome::Failed(error.to_string()),
                Err(None) => Outcome::TimedOut,
            };
            next.extend(self.landed(
                &mut table,
                renewal,
                outcome,
                sent_at,
                landed_at,
                reconnected,
            ));
        }
        drop(table);
        // Filed again together: one lock of the timers per batch.
        if self.timers.lock().insert_all(next) {
            self.wake.notify_one();
        }
    }

    /// Renews alone each hold of `batch` that its node answered [`Renewed::Elsewhere`]
    /// (the client's table sent it to a node its slot has left): a call of one hold
    /// names its keys, so it goes where the slot is now. Its answer replaces the
    /// batch's; one that fails leaves `Elsewhere`, a failure retried as any other.
    async fn renew_moved_alone(&self, batch: &[Renewal], replies: &mut [Renewed]) {
        for (renewal, reply) in batch.iter().zip(replies.iter_mut()) {
            if *reply != Renewed::Elsewhere {
                continue;
            }
            let call = renewal_call(&self.watched.lock(), std::slice::from_ref(renewal));
            let Some(call) = call else { continue };
            if let Ok(renewed) = self.renewer.renew_many(&call).await {
                *reply = renewed.first().copied().unwrap_or(Renewed::Elsewhere);
            }
        }
    }

    /// Records what one hold's renewal, sent at `sent_at` and answered by `now` (one
    /// reading of the clock for its whole batch), came to, exactly as a renewal of that
    /// hold alone would; returns its next renewal and when it is due, unless the hold
    /// is renewed no more.
    fn landed(
        &self,
        table: &mut Locked<'_>,
        mut renewal: Renewal,
        outcome: Outcome,
        sent_at: Instant,
        now: Instant,
        reconnected: bool,
    ) -> Option<(Instant, Renewal)> {
        let number = renewal.number;
        if let Outcome::Landed(Renewed::Extended) = outcome {
            // Recorded in the slot by number, without a look at the hold's entry or
            // whether the hold was stopped (released, lost) while the renewal was in
            // flight: stores to cold lines cost less than loads, and the next renewal
            // finds it stopped.
            let lease = renewal.lease();
            // The lease left when this renewal landed, by the last one's clock.
            let margin = (renewal.renewed_at() + lease).saturating_duration_since(now);
            if let Some(slots) = table.slots_of(number) {
                slots.renewed(number, margin, now + lease);
            }
            #[cfg(feature = "metrics")]
            {
                crate::observe::metrics::renewed("ok");
                crate::observe::metrics::renewal_margin(margin);
            }
            renewal.expires = lost_deadline(sent_at, lease);
            // Landed late: warned unless stopped. (Only then is the entry read.)
            let late = margin < lease.mul_f64(self.at_risk_share);
            if let Some(watched) = late.then(|| table.get(number)).flatten() {
                if table.state(number) != SlotState::Stopped {
                    watched.hold.warn_at_risk(&format!(
                        "a renewal landed with {margin:?} of the {lease:?} lease left \
                         (the holder's runtime or Redis is too slow)"
                    ));
                }
            }
            return Some((renewal.next_due(sent_at, now, reconnected), renewal));
        }
        // Anything else looks first, so that a hold stopped is not lost or warned.
        let watched = table.get(number)?;
        if table.state(number) == SlotState::Stopped || !self.failed(watched, outcome) {
            table.end(number);
            return None;
        }
        if now >= renewal.expires {
            watched
                .hold
                .mark_lost("renewals failed until the lease was about to run out");
            table.end(number);
            return None;
        }
        Some((renewal.next_due(sent_at, now, reconnected), renewal))
    }

    /// Records a renewal of `watched` (still renewed) that did not extend its lease;
    /// whether it is renewed again (no, if the hold is gone from Redis).
    fn failed(&self, watched: &Watched, outcome: Outcome) -> bool {
        let hold = &watched.hold;
        #[cfg(feature = "metrics")]
        crate::observe::metrics::renewed(match &outcome {
            Outcome::Landed(Renewed::Extended) => "ok",
            Outcome::Landed(Renewed::Gone) => "gone",
            Outcome::Landed(Renewed::WrongType | Renewed::Elsewhere) | Outcome::Failed(_) => {
                "error"
            }
            Outcome::TimedOut => "timeout",
        });
        match outcome {
            Outcome::Landed(Renewed::Extended) => {}
            // Released while the renewal was in flight: not a loss.
            Outcome::Landed(Renewed::Gone) if hold.is_releasing() => return false,
            Outcome::Landed(Renewed::Gone) => {
                hold.mark_gone(
                    "the lock's key or owner field is gone (deleted, force-unlocked or expired)",
                );
                return false;
            }
            Outcome::Landed(Renewed::WrongType) => {
                let error = LockError::Protocol(format!(
                    "the key `{}` holds another kind of value",
                    hold.names.key
                ));
                tracing::debug!(lock = %hold.names.name, %error, "renewal failed; will retry");
                hold.warn_at_risk(&format!("a renewal failed ({error}); retrying"));
            }
            Outcome::Landed(Renewed::Elsewhere) => {
                let error = "the node asked no longer serves the lock's slot";
                tracing::debug!(lock = %hold.names.name, error, "renewal failed; will retry");
                hold.warn_at_risk(&format!("a renewal failed ({error}); retrying"));
            }
            Outcome::Failed(error) => {
                tracing::debug!(lock = %hold.names.name, %error, "renewal failed; will retry");
                hold.warn_at_risk(&format!("a renewal failed ({error}); retrying"));
            }
            Outcome::TimedOut => {
                tracing::debug!(lock = %hold.names.name, "renewal timed out; will retry");
                hold.warn_at_risk("a renewal timed out; retrying");
            }
        }
        true
    }
}

/// The call that renews `batch`, made from the holds' entries in `table`; `None` if one
/// is missing (never: a renewal's number is the table's until its renewals end).
fn renewal_call(table: &Locked<'_>, batch: &[Renewal]) -> Option<RenewalCall> {
    let holds: Option<Vec<_>> = batch
        .iter()
        .map(|renewal| {
            let watched = table.get(renewal.number)?;
            Some(HoldToRenew {
                key: watched.key.as_bytes(),
                kind: watched.kind,
                owner: &watched.owner,
                lease_ms: renewal.lease_ms,
            })
        })
        .collect();
    holds.map(|holds| RenewalCall::new(&holds))
}

/// A lease in milliseconds, as the scripts take it.
fn millis(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

/// How many renewal calls of one client may be in flight at once. Each call renews
/// up to [`BATCH`] holds, so 64 in flight renew over a million holds a second at a
/// 10 ms round trip; the bound keeps the command buffers of a reconnection's renewal
/// of every hold from piling up in fred all at once.
const RENEWALS_IN_FLIGHT: usize = 64;

/// The slots that bound the renewal calls in flight (see [`RENEWALS_IN_FLIGHT`]).
#[derive(Debug)]
struct RenewalSlots(Semaphore);

impl Default for RenewalSlots {
    fn default() -> Self {
        Self(Semaphore::new(RENEWALS_IN_FLIGHT))
    }
}

impl RenewalSlots {
    /// Waits for a free slot; it is given back when the permit is dropped.
    async fn take(&self) -> Option<SemaphorePermit<'_>> {
        // The semaphore is never closed, so this only fails if it were.
        self.0.acquire().await.ok()
    }
}

/// The scheduler of a client, until the client is gone: starts booked watchdogs when
/// they fall due, and sends the renewals due (see [`Watchdogs::send_due`]). It wakes
/// at the next renewal due, and at least every `lease / 6`, so a booking made while it
/// sleeps is never started late (bookings fall due half a renewal period after their
/// grant).
///
/// It also listens for reconnections of the client the scripts go over: on each, every
/// booked watchdog is started, and every hold renewed, at once. One task per client
/// does both, so a booking is started by exactly one of the two.
fn spawn_scheduler(watchdogs: &Arc<Watchdogs>, lease: Duration) -> JoinHandle<()> {
    // Subscribed before the client is handed out: no reconnection after it is missed.
    // (fred also reports the first connection, but that happened in `init`, before this.)
    let mut reconnects = Some(watchdogs.renewer.scripting().reconnect_rx());
    let watchdogs = Arc::downgrade(watchdogs);
    let nap = renewal_period(lease) / 2;
    tokio::spawn(async move {
        let mut reconnected = false;
        loop {
            let now = Instant::now();
            let Some(strong) = watchdogs.upgrade() else {
                return;
            };
            let (mut due, next) = strong.bookings.take_due(now);
            if reconnected {
                strong.reconnections.fetch_add(1, Ordering::AcqRel);
                due.extend(strong.bookings.take_all());
                strong.timers.lock().all_due_now(now);
            }
            for booking in due {
                if let Some(hold) = booking.hold.upgrade() {
                    let first_renewal = if reconnected {
                        now
                    } else {
                        booking.granted_at + renewal_period(booking.lease)
                    };
                    strong.start_booked(&hold, booking.lease, booking.granted_at, first_renewal);
                }
            }
            strong.send_due(now);
            let wake = {
                let mut timers = strong.timers.lock();
                let now = Instant::now();
                let wake = [next, timers.next()]
                    .into_iter()
                    .flatten()
                    .fold(now + nap, Instant::min)
                    .max(now + Duration::from_millis(1));
                timers.sleeping_until = Some(wake);
                wake
            };
            let woken = async {
                strong.wake.notified().await;
            };
            reconnected = tokio::select! {
                () = tokio::time::sleep_until(wake) => false,
                () = woken => false,
                () = next_reconnection(&mut reconnects) => true,
            };
            strong.timers.lock().sleeping_until = None;
            drop(strong);
        }
    })
}

/// Resolves on the next reconnection of the command client, having taken every other
/// one already queued (a cluster client reports each node it connects to; one renewal
/// per hold answers them all). A lagging receiver missed some: that counts as one.
/// Never resolves once fred has closed the channel (the client quit).
async fn next_reconnection(reconnects: &mut Option<broadcast::Receiver<Server>>) {
    let Some(receiver) = reconnects else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(_) | Err(RecvError::Lagged(_)) => loop {
            match receiver.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        },
        Err(RecvError::Closed) => {
            *reconnects = None;
            std::future::pending().await
        }
    }
}

#[cfg(test)]
mod tests;
