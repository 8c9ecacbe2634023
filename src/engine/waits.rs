//! The waits of the kinds whose waiters wake on the lock's release channel: in line
//! (the mutex, the write side, the semaphore: only the head of this client's waiters
//! asks Redis) or alongside (the read side: every waiting reader asks at each release).
//! Each is a [`Policy`] of the one wait loop (`waiting/wait.rs`); the fair lock's queue
//! is in `queue.rs`.

use std::sync::Arc;
use std::time::Duration;

use fred::bytes_utils::Str;
use tokio::sync::MutexGuard;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

use super::acquire::joins_batches;
use super::{Attempt, Engine, HoldClaim};
use crate::error::Result;
use crate::keys::keys_of_channel;
use crate::options::ResolvedOptions;
use crate::scripts::{Asking, HandOff, LockNames};
use crate::waiting::{Asked, GiveUp, Mark, Policy, Refusal, Ticket, nap_until, wait};

impl Engine {
    /// Takes the lock `names` for `owner` afresh, waiting until `give_up`: the hold,
    /// or what giving up yields. `first_try` is false when a single try (a zero wait)
    /// is to be refused without asking Redis (the caller knows the answer). A reader
    /// waits alongside the other readers, every other kind in line.
    pub(crate) async fn wait_for<D: GiveUp>(
        self: &Arc<Self>,
        names: &Arc<LockNames>,
        owner: &Str,
        options: ResolvedOptions,
        give_up: D,
        first_try: bool,
    ) -> Result<Result<HoldClaim, D::GaveUp>> {
        // Asked before any wait: a single try, which never waits (its deadline has
        // passed by now); and a mutex call of a busy client with no waiter of the lock
        // here, in the next batch: the usual free lock then costs no waiting room. Not
        // free, the wait asks again in line (where a refusal queues the client), so
        // that local callers arriving at once still send one attempt in line.
        let single_try = options.is_single_try();
        let before_waiting = Asking {
            before_waiting: true,
            ..Asking::default()
        };
        let ask_first = if single_try {
            first_try.then(Asking::default)
        } else {
            (first_try
                && self.acquisitions.busy()
                && joins_batches(names, &options, &before_waiting)
                && !self.waiting().has_room(&names.key))
            .then_some(before_waiting)
        };
        let asked_first = ask_first.is_some();
        if let Some(asking) = ask_first {
            let asked = (&options, &asking);
            if let Attempt::Granted(claim) = self.acquire(names, owner, asked, None).await? {
                return Ok(Ok(claim));
            }
        }
        // Refused past the wait's end (a single try's always is): no attempt in line,
        // which would queue the client for a wait that is over.
        if single_try || asked_first {
            if let Some(gave_up) = give_up.passed() {
                return Ok(Err(gave_up));
            }
        }
        // An owner told on a channel of its own (Redisson's fair lock) waits in a room
        // of its own, the one that channel's messages reach.
        let own_room = names.own_channel(owner).map(|channel| {
            let room = keys_of_channel(&channel)[0].as_deref().map(Str::from);
            (room.unwrap_or_else(|| Str::from(channel.as_str())), channel)
        });
        let ticket = match &own_room {
            Some((room, channel)) => self.waiting().join(room, || channel.clone()),
            None => self.waiting().join(&names.key, || names.release_channel()),
        };
        let waiter = Waiter {
            engine: self,
            names,
            owner,
            options: &options,
            ticket: &ticket,
        };
        if names.kind.waits_alongside() {
            let mut alongside = Alongside(waiter);
            // Unless other readers here were refused and sleep (this one would be too),
            // the first attempt is made before watching for shutdown: it does not wait,
            // and a free lock (the usual case) then costs no watch registration.
            let first = match ticket.sharers_refused().1 {
                None => Some(alongside.attempt().await?),
                Some(_) => None,
            };
            return wait(
                (&ticket, self.deadlocks.as_ref()),
                alongside,
                first,
                give_up,
            )
            .await;
        }
        // Queue behind the local callers already here (FIFO): only the head talks to
        // Redis, so many callers arriving at once send one attempt, not one each. With
        // nobody ahead, the turn is ours at once, and the first attempt is made before
        // watching for shutdown.
        let mut line = InLine {
            turn: ticket.try_turn(),
            waiter,
            mark: Mark::left_by(names),
            queued: false,
            attempted_at: Instant::now(),
            asked: false,
            named: false,
        };
        let first = match line.turn.is_some() {
            true => {
                let first = line.attempt().await?;
                // What a grant queued for the next head is this head's answer already.
                ticket.take_queued();
                Some(first)
            }
            false => None,
        };
        wait((&ticket, self.deadlocks.as_ref()), line, first, give_up).await
    }
}

/// What both waits need: who waits for which lock, with which options, in which room.
struct Waiter<'w> {
    engine: &'w Arc<Engine>,
    names: &'w Arc<LockNames>,
    owner: &'w Str,
    options: &'w ResolvedOptions,
    ticket: &'w Ticket<'w>,
}

impl Waiter<'_> {
    /// Who waits, for which lock.
    fn who(&self) -> (&Arc<LockNames>, &str) {
        (self.names, self.owner)
    }

    /// One attempt, telling the script `asking`.
    async fn acquire(&self, asking: &Asking) -> Result<Attempt> {
        let options = (self.options, asking);
        self.engine
            .acquire(self.names, self.owner, options, None)
            .await
    }
}

/// A refusal after which the waiter sleeps until a release or the holder's lease.
struct Refused<T> {
    attempted_at: Instant,
    pttl: Option<Duration>,
    /// What the kind's sleep needs beside.
    more: T,
}

impl<T> Refusal for Refused<T> {
    fn attempted_at(&self) -> Instant {
        self.attempted_at
    }
}

/// A wait in line: the head of this client's waiters asks, the others wait for their
/// turn. A mutex's waiting clients queue in Redis (see `waiting/hand_off.rs`): each
/// attempt after the first tells `lua/acquire.lua` what this client knows of the
/// hand-off, and a refused one queues the client (a mark its room takes down when no
/// waiter of it is left).
struct InLine<'w> {
    waiter: Waiter<'w>,
    turn: Option<MutexGuard<'w, ()>>,
    mark: Option<Mark>,
    /// When the last attempt was sent (or the wait began).
    attempted_at: Instant,
    /// Whether an attempt was made already (the first tells no hand-off).
    asked: bool,
    /// Whether the last release message named this client first.
    named: bool,
    /// Whether the owner may be in Redisson's fair queue by an attempt of this wait
    /// (see [`Ticket::leave_owner_queue`]): left when the wait ends without the lock.
    queued: bool,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.queued {
            let waiter = &self.waiter;
            let wait_ms = waiter.options.fair_wait_ms;
            waiter
                .ticket
                .leave_owner_queue(waiter.names, waiter.owner, wait_ms);
        }
    }
}

impl InLine<'_> {
    async fn attempt(&mut self) -> Result<Asked<HoldClaim, Refused<()>>> {
        let ticket = self.waiter.ticket;
        let own_queue = self.waiter.names.kind.waits_on_own_channel();
        if own_queue {
            // Queued afresh, at the tail: never before an earlier wait here has left.
            ticket.after_leaving().await;
        }
        // What a room kept from earlier waiters heard is answered by this attempt.
        ticket.asking();
        self.attempted_at = Instant::now();
        let attempted_at = self.attempted_at;
        let front = std::mem::take(&mut self.named);
        let again = std::mem::replace(&mut self.asked, true);
        let hand_off = match again {
            true if self.waiter.names.queues_clients() => HandOff::Waited {
                requeue: ticket.waiters() > 1,
                front,
            },
            _ => HandOff::First,
        };
        let asking = Asking {
            hand_off,
            again,
            ..Asking::default()
        };
        let marking = ticket.marking(self.mark);
        // An attempt may queue the owner in Redisson's fair queue, which the wait
        // leaves if it ends without the lock.
        self.queued = own_queue;
        Ok(match self.waiter.acquire(&asking).await? {
            Attempt::Granted(claim) => {
                self.queued = false;
                marking.granted(hand_off.requeues());
                if hand_off.requeues() {
                    ticket.queued_again();
                }
                Asked::Granted(claim)
            }
            Attempt::Busy { pttl, .. } => Asked::Refused(Refused {
                attempted_at,
                pttl,
                more: (),
            }),
        })
    }
}

impl Policy for InLine<'_> {
    type Grant = HoldClaim;
    type Refused = Refused<()>;

    fn waiter(&self) -> (&Arc<LockNames>, &str) {
        self.waiter.who()
    }

    async fn ask<D: GiveUp>(
        &mut self,
        give_up: D,
    ) -> Result<Result<Asked<HoldClaim, Refused<()>>, D::GaveUp>> {
        if self.turn.is_none() {
            match give_up.until(self.waiter.ticket.turn()).await {
                Ok(turn) => self.turn = Some(turn),
                Err(gave_up) => return Ok(Err(gave_up)),
            }
            // A grant that queued this client again for this waiter: its name comes
            // with a release, so wait for it without asking first.
            if self.waiter.ticket.take_queued() {
                self.asked = true;
                return Ok(Ok(Asked::Refused(Refused {
                    attempted_at: self.attempted_at,
                    pttl: None,
                    more: (),
                })));
            }
        }
        self.attempt().await.map(Ok)
    }

    async fn sleep<D: GiveUp>(
        &mut self,
        refused: Refused<()>,
        retry: Option<Duration>,
        give_up: D,
    ) -> Result<Option<HoldClaim>> {
        let wake = nap_until(refused.pttl, self.waiter.options.lease(), retry);
        tokio::select! {
            first = self.waiter.ticket.released() => self.named = first,
            () = tokio::time::sleep_until(give_up.cap(wake)) => {}
        }
        Ok(None)
    }
}

/// A reader's wait: readers share the lock, so each asks Redis when it comes and again
/// at every release message (all of this client's waiting readers at once), instead of
/// one at a time in line: after a writer leaves, every waiting reader is back in within
/// one round trip, not one round trip each. Writer preference stays Redis's: while a
/// writer waits, each new reader is refused once and sleeps until a release lets
/// someone in (or the writer's mark runs out).
struct Alongside<'w>(Waiter<'w>);

/// What a reader's refusal leaves: the release it waits for (registered before the
/// attempt was sent, so that a release between the refusal and the sleep still wakes
/// it), and the count of release messages heard before it.
struct Shared<'w> {
    released: Notified<'w>,
    messages: u64,
}

impl<'w> Alongside<'w> {
    async fn attempt(&mut self) -> Result<Asked<HoldClaim, Refused<Shared<'w>>>> {
        let ticket: &'w Ticket<'w> = self.0.ticket;
        let released = ticket.any_release();
        let (messages, _) = ticket.sharers_refused();
        let attempted_at = Instant::now();
        Ok(match self.0.acquire(&Asking::default()).await? {
            Attempt::Granted(claim) => Asked::Granted(claim),
            Attempt::Busy { pttl, .. } => Asked::Refused(Refused {
                attempted_at,
                pttl,
                more: Shared { released, messages },
            }),
        })
    }
}

impl<'w> Policy for Alongside<'w> {
    type Grant = HoldClaim;
    type Refused = Refused<Shared<'w>>;

    fn waiter(&self) -> (&Arc<LockNames>, &str) {
        self.0.who()
    }

    async fn ask<D: GiveUp>(
        &mut self,
        give_up: D,
    ) -> Result<Result<Asked<HoldClaim, Self::Refused>, D::GaveUp>> {
        let ticket = self.0.ticket;
        loop {
            // Registered before the check: a release after it wakes this.
            let released = ticket.any_release();
            let Some(until) = ticket.sharers_refused().1 else {
                return self.attempt().await.map(Ok);
            };
            // Another reader here was refused and sleeps (subscribed): so would this
            // one be. It sleeps with it instead of asking.
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep_until(give_up.cap(until)) => {}
            }
            if let Some(gave_up) = give_up.passed() {
                return Ok(Err(gave_up));
            }
        }
    }

    async fn sleep<D: GiveUp>(
        &mut self,
        refused: Self::Refused,
        retry: Option<Duration>,
        give_up: D,
    ) -> Result<Option<HoldClaim>> {
        let wake = nap_until(refused.pttl, self.0.options.lease(), retry);
        let Shared { released, messages } = refused.more;
        self.0.ticket.sharer_refused(messages, wake);
        tokio::select! {
            () = released => {}
            () = tokio::time::sleep_until(give_up.cap(wake)) => {}
        }
        Ok(None)
    }
}
