//! The fair lock's wait (a [`Policy`] of the one wait loop, beside the in-line and
//! alongside waits of `waits.rs`): every wait, of every client, queues itself with its
//! first refused attempt as an entry of its own (`<owner id> <wait>`); a release hands
//! the lock to the first live wait and tells that entry on its client's own channel,
//! which wakes exactly that waiter. The waiter takes the lock on the message, with no
//! round trip, when it may, or claims it with its next attempt. One attempt of any of
//! a client's waits keeps all their places (`waiting::Places`). A wait that gives up
//! or is cancelled leaves the queue at once, touching nothing of a later wait of the
//! same owner.

use std::sync::Arc;
use std::time::Duration;

use fred::bytes_utils::Str;
use tokio::time::Instant;

use super::{Attempt, Engine, HoldClaim};
use crate::error::Result;
use crate::lease::{CLAIM_WINDOW, PLACE_REFRESH};
use crate::options::ResolvedOptions;
use crate::scripts::{Asking, LockNames};
use crate::waiting::{Asked, GiveUp, NamedWaiter, Places, PlacesCheck, Policy, Refusal};

impl Engine {
    /// Waits in the fair lock `names`' queue as `owner`'s wait number `wait` (whose
    /// attempts ask with `asking`), until `give_up`: the hold, or what giving up
    /// yields.
    pub(crate) async fn queue_for<D: GiveUp>(
        self: &Arc<Self>,
        names: Arc<LockNames>,
        owner: Str,
        options: ResolvedOptions,
        give_up: D,
        (wait, asking): (u64, Asking),
    ) -> Result<Result<HoldClaim, D::GaveUp>> {
        // Hand-offs to this client's waits come on a channel of its own.
        let channel = || names.hand_off_channel(self.id());
        let ticket = self.waiting().join(&names.key, channel);
        let place = Place {
            engine: Arc::clone(self),
            names: Arc::clone(&names),
            owner: owner.clone(),
            wait,
            queued: !options.is_single_try(),
            chore: Some(self.begin_chore()),
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
            engine: self,
            names: &names,
            owner: &owner,
            options: &options,
            asking,
            place,
            may_adopt,
            refresh: None,
        };
        let deadlocks = self.deadlocks.as_ref();
        crate::waiting::wait((&ticket, deadlocks), queue, None, give_up).await
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

/// One wait's place in a fair lock's queue: left (in the background) when the wait
/// ends without the lock, however it ends. Leaving touches this wait's entry and grant
/// only, never those of a later wait of the same owner.
struct Place {
    engine: Arc<Engine>,
    names: Arc<LockNames>,
    owner: Str,
    /// This wait's number (see `take.rs`).
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
