//! Lease renewal: one task per held lock and owner, however deeply it is nested.
//!
//! A hold books its watchdog when it is granted; the task is spawned only when the
//! first renewal falls due, by one starter task per client. Most holds are released
//! long before a third of their lease, and so never cost a task (spawning and
//! aborting one per lock doubled the CPU time of a lock+unlock cycle).
//!
//! Every `lease / 3` the task runs `renew.lua`. If the owner's field is gone (the key
//! was deleted or expired behind our back), or renewals keep failing until the lease
//! is about to run out (see [`lost_deadline`](crate::lease::lost_deadline)), the hold is lost: the guard's
//! [`lost`](crate::LockGuard::lost) signal fires and a warning is logged.
//!
//! Every hold is also renewed as soon as the command connection is re-established.
//! The server the client reconnects to may not be the one it renewed on: after a
//! Sentinel or Cluster failover the new primary keeps the expiry of the last renewal
//! that reached it before the promotion, while the client may have gone on renewing
//! on the old primary until it was demoted. Waiting for the next `lease / 3` tick
//! would then lose any hold with less than that left on the new primary. The starter
//! task hears fred's reconnection events, tells every running watchdog to renew now,
//! and starts every booked one at once (see [`spawn_starter`]).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use fred::interfaces::EventInterface;
use fred::types::config::Server;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{Semaphore, SemaphorePermit, broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::hold::Hold;
use crate::lease::{lost_deadline, renewal_period};
use crate::protocol::Protocol;

/// Starts renewing `hold` every `lease / 3` from `first_renewal` (for a fresh grant,
/// `granted_at + lease / 3`; now, after a reconnection), and after every
/// reconnection; `granted_at` is when the acquire that set the current expiry was
/// sent.
fn spawn(
    watchdogs: &Arc<Watchdogs>,
    hold: &Arc<Hold>,
    lease: Duration,
    granted_at: Instant,
    first_renewal: Instant,
) -> JoinHandle<()> {
    // Subscribed here, not in the task: a reconnection between this spawn and the
    // task's first poll is not missed.
    let mut reconnected = watchdogs.bookings.reconnections.subscribe();
    let watchdogs = Arc::clone(watchdogs);
    let hold = Arc::clone(hold);
    let period = renewal_period(lease);
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let risky = lease.mul_f64(watchdogs.at_risk_share);
    tokio::spawn(async move {
        let mut expires = lost_deadline(granted_at, lease);
        // When the exchange that set the lease Redis has now was sent.
        let mut renewed_at = granted_at;
        let mut ticks = tokio::time::interval_at(first_renewal, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // The deadline is watched while waiting for a tick and while a renewal is in
            // flight: a holder cut off from Redis is told before its lease can run out.
            tokio::select! {
                _ = ticks.tick() => {}
                // The client reconnected (maybe to another server): renew now, and a
                // period from now. (The sender lives in `watchdogs`, so this never fails.)
                Ok(()) = reconnected.changed() => ticks.reset(),
                () = tokio::time::sleep_until(expires) => break,
            }
            // This renewal goes out after every reconnection heard so far; one heard
            // while it is in flight is answered by another renewal.
            reconnected.borrow_and_update();
            if hold
                .renew_until()
                .is_some_and(|until| Instant::now() >= until)
            {
                // Held for `max_hold`: let the lease run out, and say so before it does.
                tracing::warn!(lock = %hold.names.name, owner = %hold.owner, "held for its max_hold; the watchdog stops renewing it");
                tokio::time::sleep_until(expires).await;
                hold.mark_lost("held longer than its max_hold; renewal stopped");
                return;
            }
            // Taken before the wait for a slot: the deadline errs early, never late.
            let sent_at = Instant::now();
            let renewal = async {
                let _slot = watchdogs.slots.take().await;
                // Boxed: the renewal's state lives only while it is in flight, not in
                // every held lock's task (a third of the task's size).
                let renew = watchdogs.renewer.renew(&hold.names, &hold.owner, lease_ms);
                Box::pin(renew).await
            };
            let renewed = tokio::time::timeout_at((sent_at + period).min(expires), renewal).await;
            #[cfg(feature = "metrics")]
            crate::observe::metrics::renewed(match &renewed {
                Ok(Ok(true)) => "ok",
                Ok(Ok(false)) => "gone",
                Ok(Err(_)) => "error",
                Err(_) => "timeout",
            });
            match renewed {
                Ok(Ok(true)) => {
                    // The lease left when this renewal landed, by the last one's clock.
                    let margin = (renewed_at + lease).saturating_duration_since(Instant::now());
                    hold.record_margin(margin);
                    hold.lease_set_now(lease);
                    if margin < risky {
                        hold.warn_at_risk(&format!(
                            "a renewal landed with {margin:?} of the {lease:?} lease left \
                             (the holder's runtime or Redis is too slow)"
                        ));
                    }
                    renewed_at = sent_at;
                    expires = lost_deadline(sent_at, lease);
                }
                // Released while the renewal was in flight: not a loss.
                Ok(Ok(false)) if hold.is_releasing() => return,
                Ok(Ok(false)) => {
                    hold.mark_gone("the lock's key or owner field is gone (deleted, force-unlocked or expired)");
                    return;
                }
                Ok(Err(error)) => {
                    tracing::debug!(lock = %hold.names.name, %error, "renewal failed; will retry");
                    hold.warn_at_risk(&format!("a renewal failed ({error}); retrying"));
                }
                Err(_) => {
                    tracing::debug!(lock = %hold.names.name, "renewal timed out; will retry");
                    hold.warn_at_risk("a renewal timed out; retrying");
                }
            }
            if Instant::now() >= expires {
                break;
            }
        }
        hold.mark_lost("renewals failed until the lease was about to run out");
    })
}

/// The watchdogs of one client: bookings not yet started, the bound on renewals in
/// flight, and the protocol they renew over. One starter task per client starts booked
/// watchdogs when they fall due and renews every hold after a reconnection.
#[derive(Debug)]
pub(crate) struct Watchdogs {
    bookings: Bookings,
    slots: RenewalSlots,
    renewer: Arc<Protocol>,
    /// A renewal that lands with less than this share of the lease left warns that its
    /// hold is at risk (see `Hold::warn_at_risk`).
    at_risk_share: f64,
    /// The starter task, until [`stop`](Self::stop).
    starter: Mutex<Option<JoinHandle<()>>>,
}

impl Watchdogs {
    /// Starts the starter task of a client whose holds are renewed over `renewer`,
    /// with `lease` as its default lease (the starter wakes every sixth of it), warning
    /// of a hold at risk when a renewal lands with less than `at_risk_share` of its
    /// lease left.
    pub(crate) fn start(renewer: Arc<Protocol>, lease: Duration, at_risk_share: f64) -> Arc<Self> {
        let watchdogs = Arc::new(Self {
            bookings: Bookings::default(),
            slots: RenewalSlots::default(),
            renewer,
            at_risk_share,
            starter: Mutex::new(None),
        });
        *watchdogs.starter.lock() = Some(spawn_starter(&watchdogs, lease));
        watchdogs
    }

    /// Books a watchdog for `hold`, granted at `granted_at`, unless it has one. The
    /// renewal task itself starts only if the hold lives until its first renewal.
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
            hold.start_booked_watchdog(|| spawn(self, hold, lease, granted_at, first_renewal));
        }
    }

    /// Stops the starter task: booked watchdogs are never started. (Running ones are
    /// stopped with their holds.)
    pub(crate) fn stop(&self) {
        if let Some(starter) = self.starter.lock().take() {
            starter.abort();
        }
    }
}

/// How many renewals of one client may be in flight at once. Locks taken together fall
/// due together, and each renewal in flight holds about 12 KiB of command buffers and
/// futures in fred: unbounded, the first renewals of 10,000 locks taken at once raised
/// the client's memory by 1.1 KiB per lock, against 0.85 KiB with this bound (W5 in
/// docs/performance.md). 64 in flight renew 64,000 holds a second at a 1 ms round trip,
/// 6,400 at 10 ms: 64,000 locks at the default 30 s lease.
const RENEWALS_IN_FLIGHT: usize = 64;

/// The slots that bound the renewals in flight (see [`RENEWALS_IN_FLIGHT`]).
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

/// Watchdogs booked and not yet started, in the order they fall due; and the signal
/// that tells running watchdogs that the client reconnected.
#[derive(Debug)]
struct Bookings {
    queue: Mutex<Queue>,
    /// Bumped (by the starter task only) on each reconnection of the command client;
    /// every running watchdog holds a receiver.
    reconnections: watch::Sender<()>,
}

impl Default for Bookings {
    fn default() -> Self {
        Self {
            queue: Mutex::default(),
            reconnections: watch::channel(()).0,
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    entries: VecDeque<Booking>,
    /// Sweep out cancelled bookings once the queue grows past this.
    sweep_at: usize,
}

#[derive(Debug)]
struct Booking {
    /// When the starter must spawn the task (half a renewal period after the grant,
    /// so that the starter's own period of half a renewal period never makes the first
    /// renewal late).
    start_by: Instant,
    hold: Weak<Hold>,
    lease: Duration,
    granted_at: Instant,
}

impl Booking {
    fn is_cancelled(&self) -> bool {
        self.hold
            .upgrade()
            .is_none_or(|hold| !hold.is_watchdog_booked())
    }
}

impl Bookings {
    /// Books a watchdog for `hold`, granted at `granted_at`, unless it has one.
    fn book(&self, hold: &Arc<Hold>, lease: Duration, granted_at: Instant) {
        if !hold.book_watchdog() {
            return;
        }
        let booking = Booking {
            start_by: granted_at + renewal_period(lease) / 2,
            hold: Arc::downgrade(hold),
            lease,
            granted_at,
        };
        let mut queue = self.queue.lock();
        while queue.entries.front().is_some_and(Booking::is_cancelled) {
            queue.entries.pop_front();
        }
        queue.entries.push_back(booking);
        if queue.entries.len() > queue.sweep_at {
            queue.entries.retain(|booking| !booking.is_cancelled());
            queue.sweep_at = (queue.entries.len() * 2).max(1_024);
        }
    }

    /// Takes the bookings due by `now`, and says when the next one is.
    fn take_due(&self, now: Instant) -> (Vec<Booking>, Option<Instant>) {
        let mut queue = self.queue.lock();
        let mut due = Vec::new();
        while queue
            .entries
            .front()
            .is_some_and(|booking| booking.start_by <= now)
        {
            due.extend(queue.entries.pop_front());
        }
        let next = queue.entries.front().map(|booking| booking.start_by);
        (due, next)
    }

    /// After a reconnection: tells every running watchdog to renew now, and takes
    /// every booking, due or not.
    fn reconnected(&self) -> Vec<Booking> {
        self.reconnections.send_replace(());
        let mut queue = self.queue.lock();
        queue.entries.drain(..).collect()
    }
}

/// Starts booked watchdogs when they fall due, until the client is gone. It wakes at
/// least every `lease / 6`, so a booking made while it sleeps is never started late
/// (bookings fall due half a renewal period after their grant).
///
/// It also listens for reconnections of the command client: on each, every running
/// watchdog renews at once and every booked one is started at once and renews. One
/// task per client does both, so a booking is started by exactly one of the two.
fn spawn_starter(watchdogs: &Arc<Watchdogs>, lease: Duration) -> JoinHandle<()> {
    // Subscribed before the client is handed out: no reconnection after it is missed.
    // (fred also reports the first connection, but that happened in `init`, before this.)
    let mut reconnects = Some(watchdogs.renewer.redis().reconnect_rx());
    let watchdogs = Arc::downgrade(watchdogs);
    let nap = renewal_period(lease) / 2;
    tokio::spawn(async move {
        let mut reconnected = false;
        loop {
            let now = Instant::now();
            let Some(strong) = watchdogs.upgrade() else {
                return;
            };
            let (due, next) = strong.bookings.take_due(now);
            let (due, renew_now) = if reconnected {
                let mut all = due;
                all.extend(strong.bookings.reconnected());
                (all, true)
            } else {
                (due, false)
            };
            for booking in due {
                if let Some(hold) = booking.hold.upgrade() {
                    hold.start_booked_watchdog(|| {
                        let first_renewal = if renew_now {
                            now
                        } else {
                            booking.granted_at + renewal_period(booking.lease)
                        };
                        spawn(
                            &strong,
                            &hold,
                            booking.lease,
                            booking.granted_at,
                            first_renewal,
                        )
                    });
                }
            }
            drop(strong);
            let wake = next.map_or(now + nap, |next| next.min(now + nap));
            let wake = wake.max(now + Duration::from_millis(1));
            reconnected = tokio::select! {
                () = tokio::time::sleep_until(wake) => false,
                () = next_reconnection(&mut reconnects) => true,
            };
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
mod tests {
    use super::*;
    use crate::hold::Holds;
    use crate::options::ClientConfig;

    #[test]
    fn bookings_fall_due_half_a_period_after_the_grant_unless_cancelled() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let bookings = Bookings::default();
        let lease = Duration::from_secs(3);
        let granted = Instant::now();

        let first = holds.enter(&names, "o:1");
        bookings.book(&first.hold, lease, granted);
        bookings.book(&first.hold, lease, granted);
        assert_eq!(bookings.queue.lock().entries.len(), 1, "booked once");
        let (due, next) = bookings.take_due(granted);
        assert!(due.is_empty());
        assert_eq!(next, Some(granted + Duration::from_millis(500)));

        // Released before its first renewal: the booking is cancelled and swept.
        first.hold.stop_watchdog();
        let second = holds.enter(&names, "o:2");
        bookings.book(&second.hold, lease, granted);
        assert_eq!(
            bookings.queue.lock().entries.len(),
            1,
            "cancelled one swept"
        );
        let (due, next) = bookings.take_due(granted + lease);
        assert_eq!(due.len(), 1);
        assert!(Arc::ptr_eq(&due[0].hold.upgrade().unwrap(), &second.hold));
        assert_eq!(next, None);
    }
}
