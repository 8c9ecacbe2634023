//! The engine: holds taken and released exactly once, with their watchdogs, and every
//! call's outcome settled even when its caller goes away.
//!
//! [`Engine::acquire`] and [`Engine::release`] run one script for one owner on one
//! lock, under that owner's per-hold operation lock, through the exactly-once
//! [`Protocol`]; they record the outcome in the hold (its count, token, expiry and
//! watchdog) and return a hold, never a guard. A call whose future is dropped while its
//! script is in flight, or whose reply stays lost, leaves an [`InFlight`] that settles
//! the outcome in the background; a release that did not happen is owed, and paid by a
//! background release (see `docs/design.md`, "Cancel safety").
//!
//! A kind of lock plugs in here: its scripts in the protocol, and a guard over the
//! holds this engine keeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fred::bytes_utils::Str;
use tokio::time::Instant;
use uuid::Uuid;

use crate::chores::{Chore, Chores};
use crate::deadlock::Detector;
use crate::error::{LockError, Result};
use crate::hold::{Hold, HoldUse, Holds, LocalHolder};
use crate::lease::{CLAIM_WINDOW, lost_deadline, renewal_period};
use crate::options::{ClientConfig, ResolvedOptions};
use crate::owner::{OwnerIds, local_owner};
use crate::protocol::Protocol;
use crate::scripts::Queued;
use crate::scripts::{Kind, LockNames};
use crate::waiting::Waiting;
use crate::watchdog::Watchdogs;

mod acquire;
mod background;
mod claim;
mod coalesce;
mod in_flight;
mod queue;
mod take;
mod waits;

pub(crate) use claim::HoldClaim;
use in_flight::{InFlight, Op};
pub(crate) use take::Lock;

/// The shared state of one client and its clones, and the calls that change holds.
#[derive(Debug)]
pub(crate) struct Engine {
    id: Uuid,
    /// `<client-uuid>:`, the start of every owner id of this client.
    owner_prefix: String,
    /// The owner ids of recent calls, by local owner.
    owner_ids: OwnerIds,
    config: ClientConfig,
    protocol: Arc<Protocol>,
    waiting: Arc<Waiting>,
    holds: Arc<Holds>,
    /// The deadlock checks of long waits, unless they are off (see `deadlock.rs`).
    deadlocks: Option<Arc<Detector>>,
    watchdogs: Arc<Watchdogs>,
    runtime: tokio::runtime::Handle,
    shut_down: AtomicBool,
    /// Work owed Redis in the background (releases of dropped guards, refused or
    /// cancelled releases, settling, waits and their leaving); `shutdown` waits for it.
    chores: Arc<Chores>,
    /// Releases pending together, sent together (see `background.rs`).
    pending: background::Pending,
    /// Acquisitions pending together, sent together (see `acquire.rs`).
    acquisitions: acquire::Pending,
}

/// What one acquire attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// Granted: the claim on the hold, with its count raised, for a new guard.
    Granted(HoldClaim),
    /// Someone else holds the lock; their lease ends in `pttl` (if it has an end). A
    /// fair lock's waiter is told that it is `queued`.
    Busy {
        pttl: Option<Duration>,
        queued: Option<Queued>,
    },
}

impl Engine {
    /// The engine of a new client `id` with `config`, over `protocol` (connected),
    /// waking waiters through `waiting`, keeping its holds in `holds` (which
    /// `deadlocks`, the deadlock checks of long waits if they are on, reads too). Returns once the client's own channel is subscribed (see
    /// [`Waiting::listen_for_notices`]).
    pub(crate) async fn start(
        id: Uuid,
        config: ClientConfig,
        protocol: Arc<Protocol>,
        (waiting, holds, deadlocks): (Arc<Waiting>, Arc<Holds>, Option<Arc<Detector>>),
        chores: Arc<Chores>,
    ) -> Arc<Self> {
        let engine = Arc::new(Self {
            id,
            owner_prefix: format!("{id}:"),
            owner_ids: OwnerIds::default(),
            watchdogs: Watchdogs::start(Arc::clone(&protocol), config.lease, config.at_risk_share),
            config,
            protocol,
            waiting,
            holds,
            deadlocks,
            runtime: tokio::runtime::Handle::current(),
            shut_down: AtomicBool::new(false),
            chores,
            pending: background::Pending::new(),
            acquisitions: acquire::Pending::new(),
        });
        let weak = Arc::downgrade(&engine);
        engine
            .waiting
            .listen_for_notices(
                crate::keys::client_channel(&engine.config.prefix, id),
                Box::new(move |registry| {
                    if let Some(engine) = weak.upgrade() {
                        engine.check_broken_holds(registry);
                    }
                }),
            )
            .await;
        engine
    }

    /// A force-unlock told this client that it broke the lock filed under `registry`
    /// (see `lua/force_unlock.lua`): each hold here on it whose field is gone from
    /// Redis is marked gone now, rather than at its next renewal. The read tells a
    /// hold the force-unlock broke from one taken after it (whose field is there).
    fn check_broken_holds(self: &Arc<Self>, registry: &[u8]) {
        let Ok(registry) = std::str::from_utf8(registry) else {
            return;
        };
        let holds = self.holds.held_under(registry);
        if holds.is_empty() {
            return;
        }
        let engine = Arc::clone(self);
        self.background_runtime().spawn(async move {
            for hold in holds {
                match engine.protocol.holds_field(&hold.names, &hold.owner).await {
                    Ok(false) => hold.mark_gone("force-unlocked (told by the force-unlock)"),
                    Ok(true) => {}
                    Err(error) => {
                        tracing::debug!(lock = %hold.names.name, %error, "could not check a hold told force-unlocked; its next renewal will");
                    }
                }
            }
        });
    }

    /// The client's id, the first part of its owner ids.
    pub(crate) fn id(&self) -> Uuid {
        self.id
    }

    /// The client's settings.
    pub(crate) fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The connection and scripts, for calls that change no hold (inspect, fence, ...).
    pub(crate) fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    /// Counts a chore owed Redis until the token is dropped: `shutdown` waits for it.
    pub(crate) fn begin_chore(&self) -> Chore {
        self.chores.begin()
    }

    /// The waiting rooms of this client's locks.
    pub(crate) fn waiting(&self) -> &Arc<Waiting> {
        &self.waiting
    }

    /// The owner id that a lock taken here and now would have, as shared bytes: kept
    /// for the owners of recent calls (see [`OwnerIds`]), so that a lock call formats
    /// none and the holds of one owner share one copy.
    pub(crate) fn owner(&self) -> Str {
        self.owner_ids.id_of(local_owner(), |local| {
            // The client's part is formatted once, at connect.
            let prefix = &self.owner_prefix;
            let mut id = String::with_capacity(prefix.len() + 24);
            id.push_str(prefix);
            self.config.compat.write_owner(&mut id, local);
            Str::from(id.as_str())
        })
    }

    /// [`owner`](Self::owner), as a string of its own.
    pub(crate) fn owner_id(&self) -> String {
        self.owner().to_string()
    }

    /// Who holds the lock filed under `registry` here, as far as this client knows
    /// (see [`Holds::local_holder`]), once `owner`'s own releases of it have landed.
    ///
    /// A new call is a new hold: a hold of `owner` on this lock whose guards have all
    /// let go (dropped, or an `unlock()` cancelled) is still being released in the
    /// background; the call waits for that (one round trip, unless Redis is
    /// unreachable: then until the release is given up with the hold, within its
    /// lease) instead of re-entering it or taking it for a hold that excludes the
    /// call. Holds of every kind on the lock count, and the permits `owner` took of a
    /// semaphore.
    pub(crate) async fn local_holder(
        &self,
        registry: &str,
        owner: &str,
        kind: Kind,
    ) -> LocalHolder {
        loop {
            match self
                .holds
                .local_holder_unless_releasing(registry, owner, kind)
            {
                Ok(holder) => return holder,
                Err(releasing) => releasing.settled().await,
            }
        }
    }

    /// [`Holds::local_holder`] as it is now, without waiting for releases.
    pub(crate) fn holds_here(&self, registry: &str, owner: &str, kind: Kind) -> LocalHolder {
        self.holds.local_holder(registry, owner, kind)
    }

    /// Waits until no hold that `owner` took on the lock filed under `registry` is
    /// [being released](Hold::is_being_released) (see [`local_holder`](Self::local_holder)).
    pub(crate) async fn own_releases_landed(&self, registry: &str, owner: &str) {
        while let Some(hold) = self.holds.being_released(registry, owner) {
            hold.settled().await;
        }
    }

    /// Where background work runs: the current runtime if there is one, else (or, for
    /// a blocking client, always) the runtime the client was built on.
    pub(crate) fn background_runtime(&self) -> tokio::runtime::Handle {
        #[cfg(feature = "blocking")]
        if self.config.background_on_own_runtime {
            return self.runtime.clone();
        }
        tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone())
    }

    pub(crate) fn check_running(&self) -> Result<()> {
        if self.shut_down.load(Ordering::Acquire) {
            Err(LockError::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Takes over, without a round trip, a fair lock that a release handed to `owner`
    /// while it waited (the message named its wait). `handed_at` is the earliest
    /// instant, by this process's clock, at which Redis can have handed it over (see
    /// `Places::local_time_of`): Redis keeps the hold for at least the claim window
    /// from then. The hold is
    /// taken as lost when a claim window's worth of lease (less its tenth of margin)
    /// has passed since then, unless its watchdog, which renews it to the owner's lease
    /// a third of a window after then, has been answered first.
    /// `None` (nothing changed) if the owner's hold here is in use or lost, or the
    /// clock cannot go back that far: the caller then claims with an attempt.
    ///
    /// Cancel safe: the only wait is for the owner's operation lock, before anything
    /// changes.
    pub(crate) async fn adopt_handed(
        self: &Arc<Self>,
        names: &Arc<LockNames>,
        owner: &Str,
        options: &ResolvedOptions,
        handed_at: Instant,
    ) -> Option<HoldClaim> {
        let lease = options.lease();
        // The grant time that gives the watchdog that deadline for a full lease.
        let known = lost_deadline(handed_at, CLAIM_WINDOW.min(lease));
        let granted_at = known.checked_sub(lease - lease / 10)?;
        let entry = self.holds.enter(names, owner);
        let hold = Arc::clone(&entry.hold);
        let mut count = hold.lock_ops().await;
        if hold.is_lost() || *count != 0 {
            return None;
        }
        hold.set_count(&mut count, 1);
        let claim = HoldClaim::new(self, Arc::clone(&hold));
        drop(count);
        hold.set_token(0);
        hold.set_granted(handed_at, options.max_hold.map(|max| handed_at + max));
        self.open_span(&hold);
        hold.set_expiry(granted_at, None);
        // The hand-off's lease, a claim window, was set before its message came.
        hold.lease_set_now(CLAIM_WINDOW.min(lease));
        // Renewed as a hold of a claim window's lease would be (a third of the way), so
        // a hand-off released soon after costs no renewal.
        let first_renewal = handed_at + renewal_period(CLAIM_WINDOW.min(lease));
        self.watchdogs
            .start_now(&hold, lease, granted_at, first_renewal);
        Some(claim)
    }

    /// Opens a fresh hold's span, if the client gives holds spans.
    fn open_span(&self, hold: &Hold) {
        if self.config.hold_spans {
            hold.open_span();
        }
    }

    /// Sets the token, the expiry and the watchdog of a freshly granted hold.
    fn record_grant(
        self: &Arc<Self>,
        entry: &HoldUse,
        options: &ResolvedOptions,
        token: u64,
        sent_at: Instant,
    ) {
        let hold = &entry.hold;
        let fresh = hold.count() == 1;
        if !hold.has_watchdog() || options.watchdog {
            // This grant set the lease Redis keeps (a re-entry under a running watchdog
            // leaves it alone, and any other re-entry only lengthens it).
            if fresh {
                hold.lease_set_now(options.lease());
            } else {
                hold.lease_lengthened_now(options.lease());
            }
        }
        if fresh {
            // A fresh hold: its token and renewal cap are its own; nested holds share them.
            hold.set_token(token);
            hold.set_granted(sent_at, options.max_hold.map(|max_hold| sent_at + max_hold));
            self.open_span(hold);
        }
        if options.watchdog {
            hold.set_expiry(sent_at, None);
            self.watchdogs.book(hold, options.lease(), sent_at);
        } else if !hold.has_watchdog() {
            if fresh {
                hold.set_expiry(sent_at, Some(options.lease()));
            } else {
                hold.lengthen_expiry(sent_at, options.lease());
            }
        }
    }

    /// Releases the hold a guard's `claim` is on. Stops the watchdog once the last
    /// release is answered.
    ///
    /// The claim is handed over as the release is sent: from then on this call (or, if
    /// it is dropped, the settlement of its script) answers for the release. Dropped
    /// before that, the claim is dropped with it and releases in the background.
    ///
    /// A release that Redis refused (nothing changed) is retried in the background, and
    /// one whose reply was lost is settled in the background; the error is returned
    /// either way.
    pub(crate) async fn release(self: &Arc<Self>, claim: HoldClaim) -> Result<()> {
        let hold = Arc::clone(claim.hold());
        match self.release_once(&hold, Some(claim), true).await {
            Ok(()) => Ok(()),
            Err(Unreleased::Owed(error)) => {
                self.release_in_background(hold);
                Err(error)
            }
            Err(Unreleased::Final(error)) => Err(error),
            Err(Unreleased::Settling(error, held)) => {
                // The reply was lost (a connection lost, fred's connection task
                // restarted): settling finds out whether the release ran, and completes
                // it if not. Its answer, if it comes within the connect timeout, is
                // this call's.
                let settled = tokio::time::timeout(self.config.connect_timeout, hold.lock_ops());
                match settled.await {
                    Ok(count) if *count < held && !hold.is_lost() && !hold.is_gone() => Ok(()),
                    _ => Err(error),
                }
            }
        }
    }

    /// One try of [`release`](Self::release) (with the guard's `claim`, or none for a
    /// background release, whose claim was dropped), which says what is left to do if
    /// it fails. A mutex's release may join a batch if `batchable` (see
    /// `background.rs`); else it goes alone.
    async fn release_once(
        self: &Arc<Self>,
        hold: &Arc<Hold>,
        claim: Option<HoldClaim>,
        batchable: bool,
    ) -> Result<(), Unreleased> {
        let not_held = || Unreleased::Final(hold.not_held());
        if let Err(error) = self.check_running() {
            // Shut down: every hold was given up, nothing is owed.
            if let Some(claim) = claim {
                claim.discharge();
            }
            return Err(Unreleased::Final(error));
        }
        // A hold given up as lost (its lease about to run out, renewals failing) may
        // still be in Redis: its owner-checked release is sent all the same, late,
        // unless a newer hold of the owner has taken its place meanwhile.
        let late = hold.is_lost();
        let entry = match late {
            false => Some(self.holds.reenter(hold)),
            true => self.holds.reenter_lost(hold),
        };
        let count = hold.lock_ops().await;
        let superseded = late && !self.holds.is_current(hold);
        let nothing_to_release = *count == 0 || hold.is_gone() || superseded;
        let Some(entry) = entry.filter(|_| !nothing_to_release) else {
            if let Some(claim) = claim {
                claim.discharge();
            }
            return Err(not_held());
        };
        let held = *count;
        if held == 1 {
            // The watchdog is stopped once the answer is in (below, or by `settle`), so
            // that the release is written without waiting on the task's cancellation.
            hold.begin_last_release();
        }
        let lease = self.config.lease;
        let in_flight = InFlight::new(self, Op::Release, entry, count, lease, claim);
        // A mutex's release goes alone unless its client has as many release calls in
        // flight as it allows: then it joins the next batch (see `background.rs`).
        // Counted in flight until this call returns.
        let alone =
            (batchable && !late && hold.names.kind.batches()).then(|| self.pending.alone_now());
        if let Some(None) = alone {
            return self.release_in_batch(hold, in_flight, held).await;
        }
        let release = self.protocol.release(&hold.names, &hold.owner, held);
        let reply = match hold.lease_ends_by().filter(|_| late) {
            // A late release is worth waiting for only until Redis has expired the
            // hold anyway (an unreachable Redis would hold it up for the command
            // timeout): past that, there is nothing left to release.
            Some(ends_by) => match tokio::time::timeout_at(ends_by, release).await {
                Ok(reply) => reply,
                Err(_) => Ok(None),
            },
            None => release.await,
        };
        if let Err(error) = reply {
            if error.outcome_unknown() {
                // Maybe ran: settling finds out, and completes it if it did not.
                return Err(Unreleased::Settling(in_flight.unresolved(error), held));
            }
            // Redis refused it: nothing changed, and the hold is still owed.
            in_flight.refused();
            hold.end_last_release();
            return Err(Unreleased::Owed(error));
        }
        let (_entry, mut count) = in_flight.land();
        match reply {
            Ok(Some(remaining)) => {
                hold.set_count(&mut count, remaining);
                if remaining == 0 {
                    hold.stop_watchdog();
                    #[cfg(feature = "metrics")]
                    crate::observe::metrics::released();
                    let held_ms = hold.held_for().map(|held| held.as_millis());
                    tracing::debug!(lock = %hold.names.name, owner = %hold.owner, ?held_ms, "released");
                }
                Ok(())
            }
            _ => {
                hold.set_count(&mut count, 0);
                drop(count);
                hold.mark_gone("released a hold that redis no longer had");
                Err(not_held())
            }
        }
    }

    /// Sets the fixed lease of `hold` to `lease` from now, if it is still held (see
    /// `LockGuard::extend`). No watchdog is started.
    ///
    /// Cancel safe: the renewal is idempotent; dropped while it is in flight, Redis may
    /// have the longer lease while the guard still counts the shorter one (it then
    /// reports the hold lost early, never late).
    pub(crate) async fn extend(self: &Arc<Self>, hold: &Arc<Hold>, lease: Duration) -> Result<()> {
        self.check_running()?;
        let lease_ms = crate::options::lease_millis("lease", lease)?;
        if hold.has_watchdog() {
            return Err(LockError::InvalidOption {
                option: "extend",
                reason: format!(
                    "the watchdog renews lock `{}`; extend is for holds with a fixed lease",
                    hold.names.name
                ),
            });
        }
        let not_held = || hold.not_held();
        let _entry = self.holds.reenter(hold);
        let mut count = hold.lock_ops().await;
        if hold.is_lost() || *count == 0 {
            return Err(not_held());
        }
        let sent_at = Instant::now();
        if !self
            .protocol
            .renew(&hold.names, &hold.owner, lease_ms)
            .await?
        {
            hold.set_count(&mut count, 0);
            drop(count);
            hold.mark_gone("the hold vanished from redis (expired or force-unlocked)");
            return Err(not_held());
        }
        let lease = crate::options::whole_millis(lease_ms);
        hold.set_expiry(sent_at, Some(lease));
        hold.lease_set_now(lease);
        Ok(())
    }

    /// Ends every wait for a lock, waits (up to the connect timeout) for background
    /// releases, then stops every
    /// watchdog, marks every hold lost and closes the connections. Returns `false` if
    /// the engine was already shut down.
    pub(crate) async fn shut_down(&self) -> bool {
        // Waiters give up at once: they would only wait for the connections to close.
        self.waiting.close();
        // Every wait ends now, and leaves its queue; releases and settling finish.
        let flushed = self.chores.all_done();
        let _ = tokio::time::timeout(self.config.connect_timeout, flushed).await;
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.holds.drain("the client was shut down");
        self.watchdogs.stop();
        self.waiting.quit().await;
        self.protocol.quit().await;
        true
    }
}

/// The pauses between tries of a background call (a release owed, a count being read
/// to settle a call): 20 ms, doubling up to 1 s.
#[derive(Debug)]
struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self(Duration::from_millis(20))
    }
}

impl Backoff {
    /// The next pause.
    fn next(&self) -> Duration {
        self.0
    }

    /// Sleeps for the next pause, and makes the one after longer.
    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_secs(1));
    }
}

/// What is left to do after a release that did not complete.
enum Unreleased {
    /// Nothing: the hold is not held, or the client is shut down.
    Final(LockError),
    /// Redis refused the release: nothing changed, and the release is still owed.
    Owed(LockError),
    /// The reply was lost: the release of one of `held` holds is being settled in the
    /// background.
    Settling(LockError, u32),
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.shut_down.load(Ordering::Acquire) {
            return;
        }
        self.holds.drain("the client was dropped");
        self.watchdogs.stop();
        let waiting = Arc::clone(&self.waiting);
        let protocol = Arc::clone(&self.protocol);
        // Closing politely needs the runtime; if it is gone, so are the connections.
        drop(self.runtime.spawn(async move {
            waiting.quit().await;
            protocol.quit().await;
        }));
    }
}
