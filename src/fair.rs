//! The fair lock: the mutex served first come, first served across every client, with
//! the lock handed by the release straight to the first waiter.
//!
//! A fair lock is a kind on the shared engine: the mutex's hash and re-entry, plus a
//! queue in Redis (`lua/fair_queue.lua`). Every wait, of every client, queues itself
//! with its first refused attempt, as an entry of its own (`<owner id> <wait>`: two
//! waits of one owner never share an entry); a release hands the lock to the first
//! live wait (its owner's field is set, with a claim window as TTL) and tells that
//! entry, with Redis's time of the hand-off, on the channel of the wait's client
//! alone, which wakes exactly that waiter (see `Ticket::named`). The waiter takes the
//! lock on the message, with no round trip, and its watchdog extends it to its lease;
//! a fenced or fixed-lease waiter (or one whose message came late) claims it with its
//! next attempt instead. Liveness is per client: one attempt of any of a client's
//! waits keeps all their places for the place window (6 s), and the client makes one
//! every third of it unless one of its waits did meanwhile (`waiting::Places`), or
//! sooner, when the hold runs out: a holder that died or let a fixed lease run out
//! publishes nothing, so the next waiter's client learns each hold's end as it is
//! taken. A client that died drops out of the queue within the window, and a lock
//! handed to it passes on within the claim window. A wait that gives up or is cancelled leaves
//! the queue at once, touching nothing of a later wait of the same owner.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fred::bytes_utils::Str;
use tokio::time::Instant;

use crate::client::LockClient;
use crate::engine::{Attempt, Engine, HoldClaim};
use crate::error::Result;
use crate::guard::LockGuard;
use crate::hold::LocalHolder;
use crate::lease::{CLAIM_WINDOW, PLACE_REFRESH};
use crate::observe;
use crate::options::ResolvedOptions;
use crate::scripts::{Asking, Kind, LockNames, fair_names};
use crate::waiting::{Asked, GiveUp, NamedWaiter, Places, PlacesCheck, Policy, Refusal};

impl LockClient {
    /// Takes the fair lock `name` for the current owner, queueing until `give_up` (the
    /// fair lock's step of the front door, `acquire.rs`).
    pub(crate) async fn take_fair<D: GiveUp>(
        &self,
        name: &str,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<LockGuard, D::GaveUp>> {
        let kind = Kind::fair(self.compat());
        let names = fair_names(&self.engine().config().prefix, name, kind)?;
        if kind.waits_on_own_channel() {
            // Redisson's queue: its waiters ask in order, each told on its own channel.
            let guard = self.take_at(Arc::new(names), options, give_up).await?;
            return Ok(guard.map(LockGuard::new));
        }
        self.queue_at(names, options, give_up).await
    }

    /// Takes the fair lock whose keys are `names` (a fair lock's, or an election's:
    /// see `election.rs`) for the current owner, queueing until `give_up`.
    pub(crate) async fn queue_at<D: GiveUp>(
        &self,
        names: LockNames,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<LockGuard, D::GaveUp>> {
        let engine = self.engine();
        engine.check_running()?;
        let names = Arc::new(names);
        let owner = engine.owner();
        observe::record_owner(&owner);
        // Every attempt of this call names its wait: it queues as an entry of its own
        // and claims only a lock handed to it.
        let wait = WAITS.fetch_add(1, Ordering::Relaxed);
        let asking = Asking {
            fair_wait: Some(wait),
            ..Asking::default()
        };
        if let LocalHolder::Owner(entry) = engine
            .local_holder(names.registry_key(), &owner, Kind::FAIR)
            .await
        {
            // A re-entry; if the hold went away meanwhile, the owner queues afresh.
            let attempt = engine.acquire(&names, &owner, (&options, &asking), Some(entry));
            if let Attempt::Granted(claim) = attempt.await? {
                return Ok(Ok(LockGuard::new(claim)));
            }
        }
        // Hand-offs to this client's waits come on a channel of its own.
        let channel = || names.hand_off_channel(engine.id());
        let ticket = engine.waiting().join(&names.key, channel);
        let place = Place {
            engine: Arc::clone(engine),
            names: Arc::clone(&names),
            owner: owner.clone(),
            wait,
            queued: !options.is_single_try(),
            chore: Some(engine.begin_chore()),
        };
        // A hand-off may be taken on its message alone by a waiter whose lease the
        // watchdog keeps, that draws no token (the claim attempt draws it), waits for
        // no replica (the claim attempt is acknowledged) and keeps no data (the claim
        // attempt writes it).
        let may_adopt = options.watchdog
            && !options.fenced
            && options.min_replicas.is_none()
            && options.data.is_none();
        let queue = InQueue {
            woken: ticket.named(&owner, wait),
            places: ticket.places(),
            engine,
            names: &names,
            owner: &owner,
            options: &options,
            asking,
            place,
            may_adopt,
            refresh: None,
        };
        let waited = crate::waiting::wait(&ticket, queue, None, give_up).await?;
        Ok(waited.map(LockGuard::new))
    }
}

/// A wait in a fair lock's queue (a [`Policy`] of the one wait loop): every attempt
/// names the wait; a refusal queues it and keeps its client's places; it sleeps until
/// the lock is handed to it (and takes it on the message when it may), its client's
/// next attempt is due, or the holder's lease runs out.
struct InQueue<'w> {
    engine: &'w Arc<Engine>,
    names: &'w Arc<LockNames>,
    owner: &'w Str,
    options: &'w ResolvedOptions,
    asking: Asking,
    place: Place,
    woken: NamedWaiter,
    places: &'w Places,
    may_adopt: bool,
    /// Set when this wait's next attempt is its client's refresh: it checks the places
    /// of the client's other waits too.
    refresh: Option<PlacesCheck>,
}

/// A fair wait's refused attempt: when it was sent, and the holder's lease left.
struct Queued {
    sent_at: Instant,
    pttl: Option<Duration>,
}

impl Refusal for Queued {
    fn attempted_at(&self) -> Instant {
        self.sent_at
    }
}

impl Policy for InQueue<'_> {
    type Grant = HoldClaim;
    type Refused = Queued;

    fn waiter(&self) -> (&Arc<LockNames>, &str) {
        (self.names, self.owner)
    }

    async fn ask<D: GiveUp>(
        &mut self,
        _: D,
    ) -> Result<Result<Asked<HoldClaim, Queued>, D::GaveUp>> {
        let sent_at = Instant::now();
        let checking = self.refresh.as_ref().map(|check| Asking {
            fair_check: Some(Arc::clone(&check.entries)),
            ..self.asking.clone()
        });
        let asking = checking.as_ref().unwrap_or(&self.asking);
        let attempt = self
            .engine
            .acquire(self.names, self.owner, (self.options, asking), None);
        let pttl = match attempt.await? {
            Attempt::Granted(claim) => {
                self.place.queued = false;
                // The client's other waits try again when this lease runs out.
                self.places.granted(sent_at, self.options.lease());
                return Ok(Ok(Asked::Granted(claim)));
            }
            Attempt::Busy { pttl, queued } => {
                let check = self.refresh.take();
                if let Some(queued) = queued {
                    self.woken.queued(queued.server_ms);
                    self.places.answered(sent_at, queued.server_ms, pttl);
                    if !queued.client_was_alive {
                        // Its other waits' places were dropped: they queue again.
                        self.woken.wake_others(queued.server_ms);
                    } else if let Some(check) = check {
                        // Those no longer queued (passed over, say, as a hand-off's
                        // message went unheard) queue again.
                        check.wake(&queued.not_queued);
                    }
                }
                pttl
            }
        };
        Ok(Ok(Asked::Refused(Queued { sent_at, pttl })))
    }

    async fn sleep<D: GiveUp>(
        &mut self,
        refused: Queued,
        retry: Option<Duration>,
        give_up: D,
    ) -> Result<Option<HoldClaim>> {
        let places = self.places;
        let retry_at = retry.map(|retry| Instant::now() + retry);
        let fallback = Instant::now() + next_attempt_in(refused.pttl);
        let handed = loop {
            let sooner = places.sooner();
            tokio::pin!(sooner);
            sooner.as_mut().enable();
            let due = places.due().unwrap_or(fallback);
            let wake = retry_at.map_or(due, |retry_at| due.min(retry_at));
            tokio::select! {
                handed = self.woken.named() => break handed,
                () = &mut sooner => {}
                () = tokio::time::sleep_until(give_up.cap(wake)) => {
                    let now = Instant::now();
                    // One wait of this client makes the attempt that is due.
                    let retry = retry_at.is_some_and(|at| at <= now);
                    if retry || give_up.passed().is_some() {
                        break None;
                    }
                    if places.take_due(now) {
                        self.refresh = Some(self.woken.others_to_check());
                        break None;
                    }
                }
            }
        };
        // The message names this wait and when Redis handed the lock to it, so Redis
        // keeps it for the claim window from then. Taken on the message while at least
        // half of that is left by the latest clock sample; else (or if the message
        // names another wait, or no time) the next attempt claims or queues.
        let handed_at = handed
            .filter(|handed| self.may_adopt && handed.wait == Some(self.place.wait))
            .and_then(|handed| places.local_time_of(handed.server_ms?))
            .filter(|at| at.elapsed() < CLAIM_WINDOW / 2);
        let Some(handed_at) = handed_at else {
            return Ok(None);
        };
        let adopted = self
            .engine
            .adopt_handed(self.names, self.owner, self.options, handed_at);
        let Some(claim) = adopted.await else {
            return Ok(None);
        };
        self.place.queued = false;
        // Redis keeps it for a claim window until its first renewal.
        self.places
            .granted(handed_at, CLAIM_WINDOW.min(self.options.lease()));
        Ok(Some(claim))
    }
}

/// How soon after an attempt that found the lock held for `pttl` the next attempt is
/// due, when the client's schedule has none (no attempt of its waits was answered as
/// queued: `waiting::Places` keeps it otherwise).
fn next_attempt_in(pttl: Option<Duration>) -> Duration {
    pttl.map_or(PLACE_REFRESH, |pttl| pttl.min(PLACE_REFRESH))
}

/// The waits of this process, numbered: a wait's number with its owner id names its
/// entry in a fair lock's queue (see `lua/fair_queue.lua`), so no two waits share one.
static WAITS: AtomicU64 = AtomicU64::new(1);

/// One wait's place in a fair lock's queue: left (in the background) when the wait
/// ends without the lock, however it ends. Leaving touches this wait's entry and grant
/// only, never those of a later wait of the same owner.
struct Place {
    engine: Arc<Engine>,
    names: Arc<LockNames>,
    owner: Str,
    /// This wait's number (see [`WAITS`]).
    wait: u64,
    /// Whether the wait may still be queued (or handed the lock unclaimed).
    queued: bool,
    /// Leaving the queue is a chore that `shutdown` waits for (see `chores.rs`).
    chore: Option<crate::chores::Chore>,
}

impl Drop for Place {
    fn drop(&mut self) {
        if !self.queued || self.engine.check_running().is_err() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (engine, names) = (Arc::clone(&self.engine), Arc::clone(&self.names));
        let (owner, wait) = (std::mem::take(&mut self.owner), self.wait);
        let chore = self.chore.take();
        drop(runtime.spawn(async move {
            // Retried while in transit; a place left behind expires within the claim
            // window anyway.
            if let Err(error) = engine
                .protocol()
                .leave_fair_queue(&names, &owner, wait)
                .await
            {
                tracing::debug!(lock = %names.name, %error, "leaving a fair lock's queue failed");
            }
            drop(chore);
        }));
    }
}
