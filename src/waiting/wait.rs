//! The one wait loop of every kind: ask, and if refused, subscribe to the lock's
//! channel and sleep until a release (or the holder's lease, or the caller's deadline)
//! says to ask again; all of it ended at once by `shutdown`.
//!
//! What differs between kinds is a small [`Policy`]: how an attempt is made (a mutex
//! waiter waits for its turn in line and tells `lua/acquire.lua` what it knows of the
//! hand-off; a reader asks alongside the other readers; a fair waiter names its wait
//! and refreshes its client's places) and how it sleeps (a fair waiter may take a
//! hand-off on its message alone). The loop around them is written once, here.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::give_up::GiveUp;
use super::{Listening, Ticket};
use crate::deadlock::Detector;
use crate::error::{LockError, Result};
use crate::scripts::LockNames;

/// The answer to one attempt: the grant, or a refusal with what the sleep after it
/// needs.
#[derive(Debug)]
pub(crate) enum Asked<G, R> {
    Granted(G),
    Refused(R),
}

/// What [`Policy::ask`] answers: an attempt's answer, or the caller gave up first.
pub(crate) type AskAnswer<G, R, GaveUp> = Result<Result<Asked<G, R>, GaveUp>>;

/// What a refused attempt tells the loop: when it was sent (a subscription confirmed
/// later may have missed a release told in between).
pub(crate) trait Refusal {
    fn attempted_at(&self) -> Instant;
}

/// How one kind asks and sleeps (see the module docs).
pub(crate) trait Policy {
    /// What an attempt that succeeds hands back.
    type Grant;
    /// What a refused attempt leaves for the sleep after it.
    type Refused: Refusal;

    /// Who waits, for which lock (for the deadlock check, see `deadlock.rs`).
    fn waiter(&self) -> (&Arc<LockNames>, &str);

    /// Makes the next attempt (or answers it without asking, from what the client
    /// already knows), unless the caller gives up first.
    fn ask<D: GiveUp>(
        &mut self,
        give_up: D,
    ) -> impl Future<Output = AskAnswer<Self::Grant, Self::Refused, D::GaveUp>>;

    /// Sleeps after `refused` until the next attempt is due: subscribed to the lock's
    /// channel, or (`retry`) not, and asking again after that long at most. A grant
    /// taken without an attempt while asleep (a fair lock handed over) ends the wait.
    fn sleep<D: GiveUp>(
        &mut self,
        refused: Self::Refused,
        retry: Option<Duration>,
        give_up: D,
    ) -> impl Future<Output = Result<Option<Self::Grant>>>;
}

/// Waits on `ticket` with `policy` until granted, or `give_up`. `first` is an attempt
/// already answered (made before this call, so that the usual free lock costs no
/// shutdown watch); the loop starts from its refusal. A wait that lasts is checked for
/// deadlocks by `deadlocks`, if the client checks (see `deadlock.rs`).
///
/// # Errors
/// [`LockError::Shutdown`], [`LockError::Deadlock`] if this wait is a deadlock's
/// victim, and the policy's.
///
/// # Cancel safety
/// Dropping it drops the attempt or sleep in progress; an attempt in flight is settled
/// by the engine (see `engine::InFlight`).
pub(crate) async fn wait<P: Policy, D: GiveUp>(
    (ticket, deadlocks): (&Ticket<'_>, Option<&Arc<Detector>>),
    mut policy: P,
    first: Option<Asked<P::Grant, P::Refused>>,
    give_up: D,
) -> Result<Result<P::Grant, D::GaveUp>> {
    let mut answered = match first {
        Some(Asked::Granted(grant)) => return Ok(Ok(grant)),
        Some(Asked::Refused(refused)) => Some(refused),
        None => None,
    };
    let (names, owner) = policy.waiter();
    let watch = deadlocks.and_then(|deadlocks| deadlocks.watch(names, owner));
    let deadlock = async move {
        match watch {
            // Boxed and erased: the check's future is deep, and inline it would make
            // every lock call's future type too deep for the compiler's default
            // recursion limit in code that nests it (the chaos example's did).
            Some(watch) => {
                let run: Pin<Box<dyn Future<Output = LockError> + Send>> = Box::pin(watch.run());
                run.await
            }
            None => std::future::pending().await,
        }
    };
    // Boxed: the wait is the rare path, and inline it would make every call's future
    // (and so every task that takes a lock) several times larger.
    let waiting = Box::pin(async {
        loop {
            let refused = match answered.take() {
                Some(refused) => refused,
                None => match policy.ask(give_up).await? {
                    Ok(Asked::Granted(grant)) => return Ok(Ok(grant)),
                    Ok(Asked::Refused(refused)) => refused,
                    Err(gave_up) => return Ok(Err(gave_up)),
                },
            };
            if let Some(gave_up) = give_up.passed() {
                return Ok(Err(gave_up));
            }
            // Subscribe before sleeping; a release between the attempt and the
            // subscription would be missed, so a fresh subscription asks again first.
            // One lost in transit is tried again soon.
            let retry = match give_up
                .until(ticket.subscribe(refused.attempted_at()))
                .await
            {
                Ok(Ok(Listening::Now)) => continue,
                Ok(Ok(Listening::Already)) => None,
                Ok(Ok(Listening::Not(retry))) => Some(retry),
                Ok(Err(error)) => return Err(error),
                Err(gave_up) => return Ok(Err(gave_up)),
            };
            if let Some(grant) = policy.sleep(refused, retry, give_up).await? {
                return Ok(Ok(grant));
            }
        }
    });
    // `shutdown` ends the wait wherever it is: in line, subscribing, asleep (an acquire
    // in flight is settled as if cancelled); so does a deadlock this wait is the victim
    // of, unless the wait has just ended otherwise.
    tokio::select! {
        biased;
        () = ticket.closed() => Err(LockError::Shutdown),
        result = waiting => result,
        deadlock = deadlock => Err(deadlock),
    }
}

/// How long to sleep after a refusal that found the holder's lease ending in `pttl`
/// (`None`: no expiry, so `lease`), no longer than `retry` when not subscribed, and at
/// least a millisecond: the instant to wake at.
pub(crate) fn nap_until(
    pttl: Option<Duration>,
    lease: Duration,
    retry: Option<Duration>,
) -> Instant {
    let nap = pttl.unwrap_or(lease);
    let nap = retry.map_or(nap, |retry| nap.min(retry));
    Instant::now() + nap.max(Duration::from_millis(1))
}
