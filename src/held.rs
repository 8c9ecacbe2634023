//! [`Held`]: what every kind of guard has in common (the lost and at-risk signals, the
//! fencing token, a fixed lease's extension, release), written once over a guard's
//! holds; [`held_methods!`], which gives every guard these methods of its own from
//! that one definition; and the critical section written once over it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::select_all;

use crate::error::{LockError, Result};
use crate::guard::LockGuard;

mod sealed {
    /// Only this crate's guards are [`Held`](super::Held).
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A held lock of any kind: [`LockGuard`] (the mutex and the fair lock),
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard),
/// [`Permit`](crate::Permit), [`MultiGuard`](crate::MultiGuard) and
/// [`Leadership`](crate::Leadership). Sealed: only this crate's guards implement it.
///
/// Every guard also has each of these methods of its own, with the same name and
/// behaviour, so calling them needs no import: `guard.is_at_risk()` works on any guard
/// as it is. The trait is for code written once for every kind, such as a function
/// generic over `G: Held`.
///
/// A guard is made of one hold, or (a [`MultiGuard`](crate::MultiGuard)) of several;
/// the signals below fire for any of them.
///
/// # Examples
/// ```no_run
/// use holdlock::Held;
///
/// async fn guarded_work<G: Held>(guard: G) -> holdlock::Result<()> {
///     tokio::select! {
///         () = guard.lost() => return Err(holdlock::LockError::Lost { name: "job".into() }),
///         () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
///     }
///     guard.unlock().await
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a held lock",
    label = "expected a guard here",
    note = "a request (`client.lock(name)`, ...) gives its guard once awaited: `client.lock(name).await?`"
)]
pub trait Held: Sealed + Boxed + Send + Sync + fmt::Debug {
    /// The holds the guard is made of: one, or a multi-lock's members.
    #[doc(hidden)]
    fn holds(&self) -> &[LockGuard];

    /// Releases the guard's holds (for a semaphore permit, gives it back; for a
    /// leadership, resigns), as the guard's own [`unlock`](LockGuard::unlock) does.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`]: whatever is not released by the time the future is
    /// dropped is released in the background.
    fn unlock(self) -> impl Future<Output = Result<()>> + Send
    where
        Self: Sized;

    /// Whether a hold of the guard is known to be lost (see [`LockGuard::is_lost`]).
    fn is_lost(&self) -> bool {
        self.holds().iter().any(|guard| guard.hold().is_lost())
    }

    /// Resolves when a hold of the guard is lost (see [`LockGuard::lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn lost(&self) -> impl Future<Output = ()> + Send + '_
    where
        Self: Sized,
    {
        first_of(self.holds(), |guard| Box::pin(hold_lost(guard)))
    }

    /// Whether a hold of the guard has been warned at risk (see
    /// [`LockGuard::is_at_risk`]).
    fn is_at_risk(&self) -> bool {
        self.holds().iter().any(|guard| guard.hold().is_at_risk())
    }

    /// Resolves when a hold of the guard is at risk of being lost (see
    /// [`LockGuard::at_risk`]): an early warning, before [`lost`](Self::lost).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn at_risk(&self) -> impl Future<Output = ()> + Send + '_
    where
        Self: Sized,
    {
        first_of(self.holds(), |guard| {
            Box::pin(guard.hold().warned_at_risk())
        })
    }

    /// The fencing token that stands for the guard, if it has one (see
    /// [`LockGuard::fencing_token`]): its one hold's, if that was taken with fencing;
    /// a leadership's, always. `None` for a guard of several holds (a
    /// [`MultiGuard`](crate::MultiGuard) of two names or more): no one token fences
    /// them all, each member's is [`MultiGuard::token_of`](crate::MultiGuard::token_of).
    fn fencing_token(&self) -> Option<u64> {
        match self.holds() {
            [one] => one.hold().token(),
            _ => None,
        }
    }

    /// The smallest lease left when the holds' last renewals landed (see
    /// [`LockGuard::renewal_margin`]).
    fn renewal_margin(&self) -> Option<Duration> {
        self.holds()
            .iter()
            .filter_map(|guard| guard.hold().margin())
            .min()
    }

    /// Sets the fixed lease of every hold of the guard to `lease` from now (see
    /// [`LockGuard::extend`]).
    ///
    /// # Errors
    /// As [`LockGuard::extend`], for the first hold that failed (the ones before it
    /// were extended).
    ///
    /// # Cancel safety
    /// As [`LockGuard::extend`].
    fn extend(&self, lease: Duration) -> impl Future<Output = Result<()>> + Send + '_
    where
        Self: Sized,
    {
        async move {
            for guard in self.holds() {
                guard.engine().extend(guard.hold(), lease).await?;
            }
            Ok(())
        }
    }
}

/// The part of [`Held`] a trait object calls through its vtable: the release of a
/// boxed guard. Given to every guard by the blanket impl below.
#[doc(hidden)]
pub trait Boxed {
    /// Releases the boxed guard, as [`Held::unlock`].
    fn unlock_boxed(self: Box<Self>) -> Pin<Box<dyn Future<Output = Result<()>> + Send>>;
}

impl<G: Held + 'static> Boxed for G {
    fn unlock_boxed(self: Box<Self>) -> Pin<Box<dyn Future<Output = Result<()>> + Send>> {
        Box::pin(Held::unlock(*self))
    }
}

/// A guard of any kind as a trait object, for code that keeps guards of several kinds
/// together: a `Box<dyn Held>` is [`Held`] itself, so it has every method of the
/// trait, the async ones and `unlock` included.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::Held;
/// let guards: Vec<Box<dyn Held>> = vec![
///     Box::new(client.lock("a").await?),
///     Box::new(client.read_lock("b").await?),
///     Box::new(client.semaphore("c", 2).acquire().await?),
/// ];
/// for guard in guards {
///     assert!(!guard.is_lost());
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
impl Held for Box<dyn Held> {
    fn holds(&self) -> &[LockGuard] {
        (**self).holds()
    }

    fn fencing_token(&self) -> Option<u64> {
        (**self).fencing_token()
    }

    fn unlock(self) -> impl Future<Output = Result<()>> + Send {
        self.unlock_boxed()
    }
}

impl Sealed for Box<dyn Held> {}

/// Resolves when the one hold of `guard` is lost: marked lost, or its fixed lease
/// (nearly) ran out.
async fn hold_lost(guard: &LockGuard) {
    let hold = guard.hold();
    loop {
        if hold.is_lost() {
            return;
        }
        match hold.expires_at() {
            Some(at) => {
                tokio::select! {
                    () = hold.marked_lost() => {}
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            None => hold.marked_lost().await,
        }
    }
}

/// Resolves when `signal` resolves for any of `holds` (never for none).
async fn first_of<'a, F>(holds: &'a [LockGuard], signal: impl Fn(&'a LockGuard) -> F) -> ()
where
    F: Future<Output = ()> + Unpin + 'a,
{
    match holds {
        [] => std::future::pending().await,
        [one] => signal(one).await,
        many => drop(select_all(many.iter().map(signal)).await),
    }
}

/// Gives the guard type `$guard` the methods of [`Held`] as methods of its own, so that
/// they need no import: `is_lost`, `lost`, `is_at_risk`, `at_risk`, `fencing_token`,
/// `renewal_margin`, `extend` and `unlock`, each forwarding to the trait's. Written once here, with their
/// docs, for every guard: a capability added to [`Held`] is added here too, and every
/// guard has it.
///
/// `$take` is an expression that takes such a guard from `client`, for the examples;
/// the doc lines after `unlock:` say what releasing means for this kind, and go into
/// `unlock`'s doc.
macro_rules! held_methods {
    ($guard:ident, $take:expr $(, unlock: $(#[$unlock:meta])*)? $(,)?) => {
        impl $guard {
            /// Whether a hold of the guard is known to be lost: its key or field
            /// vanished, renewals failed until the lease was about to run out, a fixed
            /// lease (nearly) ran out, or the client was shut down. A guard of several
            /// holds ([`MultiGuard`](crate::MultiGuard)) is lost when any of them is.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// assert!(!guard.is_lost());
            /// # Ok(()) }
            /// ```
            pub fn is_lost(&self) -> bool {
                $crate::held::Held::is_lost(self)
            }

            /// Resolves when a hold of the guard is lost; never while it is held. Select
            /// on it to stop work that must not continue without the lock.
            ///
            /// # Cancel safety
            /// Cancel safe: it only watches.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient, work: impl std::future::Future<Output = ()>) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// tokio::select! {
            ///     () = work => guard.unlock().await?,
            ///     () = guard.lost() => eprintln!("lock lost; work abandoned"),
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn lost(&self) {
                $crate::held::Held::lost(self).await;
            }

            /// Whether a hold of the guard has been warned at risk of being lost: a
            /// renewal landed with less than the client's at-risk share of the lease
            /// left (a third by default, see
            /// [`LockClientBuilder::at_risk_share`](crate::LockClientBuilder::at_risk_share)),
            /// or a renewal failed, while the hold was not lost. The warning stays.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// assert!(!guard.is_at_risk());
            /// # Ok(()) }
            /// ```
            pub fn is_at_risk(&self) -> bool {
                $crate::held::Held::is_at_risk(self)
            }

            /// Resolves when a hold of the guard is [at risk](Self::is_at_risk): an
            /// early warning, before [`lost`](Self::lost), that the holder's runtime or
            /// Redis is too slow for the lease (a starved tokio worker, a paused server).
            /// Stop taking new work and checkpoint; the lock may still be kept
            /// (`lost()` fires later, or never). A hold with a fixed lease has no
            /// renewals and is never warned.
            ///
            /// # Cancel safety
            /// Cancel safe: it only watches.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// tokio::select! {
            ///     () = guard.at_risk() => eprintln!("renewals are late: checkpoint now"),
            ///     () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn at_risk(&self) {
                $crate::held::Held::at_risk(self).await;
            }

            /// The fencing token of the guard, if it has one: strictly greater than
            /// every token handed to earlier holders of the same lock. Present it to
            /// the resources the lock guards (see [`fence`](crate::fence)).
            ///
            /// A mutex's or fair lock's hold and a write hold have one if taken with
            /// fencing ([`LockOptions::fenced`](crate::LockOptions::fenced), or a
            /// client that fences every lock; in Redisson's layout only the mutex
            /// draws tokens, from `RFencedLock`'s counter); a write hold's is drawn
            /// from a floor of the read-write lock's own (`<prefix>{name}:rw:token`).
            /// A [`Leadership`](crate::Leadership) always has one, greater than every
            /// earlier leader's of the election. Nested holds share the token of the
            /// first. A read hold and a semaphore permit, shared with other holders,
            /// have none; nor has a [`MultiGuard`](crate::MultiGuard) of several
            /// names, for no one token fences them all: each member's is
            /// [`MultiGuard::token_of`](crate::MultiGuard::token_of) (a multi-guard of
            /// one name has its member's).
            ///
            /// A token is the Redis server's clock in microseconds, or one more than
            /// the last token if that is larger, so tokens keep increasing across
            /// Redis restarts and failovers as long as the servers' clocks are roughly
            /// in sync and never stepped back by more than the outage lasted (see
            /// `docs/guarantees.md`). Tokens are sparse: compare them, do not count on
            /// consecutive values.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// if let Some(token) = guard.fencing_token() {
            ///     println!("writes go out with token {token}");
            /// }
            /// # Ok(()) }
            /// ```
            pub fn fencing_token(&self) -> Option<u64> {
                $crate::held::Held::fencing_token(self)
            }

            /// The lease that was left in Redis when the last renewal landed (the margin
            /// the watchdog had), the smallest of the guard's holds; `None` before the
            /// first renewal and for a fixed lease.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// if let Some(margin) = guard.renewal_margin() {
            ///     println!("the last renewal landed with {margin:?} to spare");
            /// }
            /// # Ok(()) }
            /// ```
            pub fn renewal_margin(&self) -> Option<std::time::Duration> {
                $crate::held::Held::renewal_margin(self)
            }

            /// Sets the lease of each hold of the guard, taken with a fixed lease
            /// ([`LockOptions::lease`](crate::LockOptions::lease)), to `lease` from now,
            /// if it is still held. No watchdog is started. Nested holds share the
            /// lease, so this sets theirs too.
            ///
            /// # Errors
            /// [`LockError::NotHeld`](crate::LockError::NotHeld) if a hold was lost (its
            /// lease ran out, or it was force-unlocked);
            /// [`LockError::InvalidOption`](crate::LockError::InvalidOption) for a zero
            /// or overlong lease, or for a hold the watchdog renews;
            /// [`LockError::Redis`](crate::LockError::Redis),
            /// [`LockError::Shutdown`](crate::LockError::Shutdown). For a guard of
            /// several holds, the error of the first that failed (the ones before it
            /// were extended).
            ///
            /// # Cancel safety
            /// Cancel safe: dropped while the renewal is in flight, Redis may keep the
            /// longer lease while the guard counts the shorter one, so the guard reports
            /// the hold lost early, never late.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            /// use holdlock::LockError;
            #[doc = concat!("let guard = ", $take, ";")]
            /// // ... the job needs longer than planned ...
            /// match guard.extend(std::time::Duration::from_secs(30)).await {
            ///     Ok(()) => {}                              // a fixed lease, 30 s from now
            ///     Err(LockError::InvalidOption { .. }) => {} // the watchdog renews it
            ///     Err(error) => return Err(error),
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn extend(&self, lease: std::time::Duration) -> $crate::error::Result<()> {
                $crate::held::Held::extend(self, lease).await
            }

            /// Releases the guard now. A lock is deleted (and its waiters woken) when
            /// the owner's last hold of it is released.
            ///
            $($(#[$unlock])*)?
            ///
            /// A hold the guard has given up as [lost](Self::is_lost) may still be in
            /// Redis (a fixed lease past nine tenths, renewals that kept failing): it is
            /// released all the same, checked against the owner, so a job that overran
            /// its planned lease frees the lock at once instead of leaving it held until
            /// the lease runs out.
            ///
            /// If Redis refuses the release (it changed nothing, e.g. `NOREPLICAS` or
            /// `OOM`), the error is returned and the hold is released in the background,
            /// as a dropped guard's is: retried until it succeeds, the hold is lost or
            /// the client shuts down. Nested guards of the same hold are not affected:
            /// the hold count in Redis and here stay equal.
            ///
            /// A mutex's release goes out alone while its client has fewer than 2
            /// release calls in flight; past that, it joins a batch (one script call
            /// for all the releases queued then, per node on a cluster) that goes out
            /// as soon as the client's task for it runs. Its outcome and errors are its
            /// own, as if it had gone alone.
            ///
            /// # Errors
            /// [`LockError::NotHeld`](crate::LockError::NotHeld) if a hold was gone from
            /// Redis (expired, force-unlocked, or replaced by a newer hold of the same
            /// owner); [`LockError::Redis`](crate::LockError::Redis) if Redis could not
            /// be reached (the hold then expires within its lease);
            /// [`LockError::Shutdown`](crate::LockError::Shutdown). For a guard of
            /// several holds, the first error; the others are still released.
            ///
            /// # Cancel safety
            /// Cancel safe: dropping the future at any point releases the guard all the
            /// same. Dropped before a release was sent (it may wait behind another call
            /// of the same owner on the same lock), what is left of the guard is dropped
            /// with it and released in the background; dropped after, the outcome is
            /// read from Redis in the background and the release completed if it did not
            /// run. Dropped while it waits in a batch, the batch still sends and records
            /// it.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = ", $take, ";")]
            /// guard.unlock().await?;
            /// # Ok(()) }
            /// ```
            pub async fn unlock(self) -> $crate::error::Result<()> {
                $crate::held::Held::unlock(self).await
            }
        }
    };
}
pub(crate) use held_methods;

impl Sealed for LockGuard {}

impl Held for LockGuard {
    fn holds(&self) -> &[LockGuard] {
        std::slice::from_ref(self)
    }

    fn unlock(self) -> impl Future<Output = Result<()>> + Send {
        self.release_hold()
    }
}

held_methods!(LockGuard, "client.lock(\"a\").await?");

/// Runs `body` under `guard`, the critical section of every `Acquire::run`: the body's
/// future is dropped at once if a hold is lost meanwhile ([`LockError::Lost`]);
/// otherwise its value is returned once the guard is released, and an error of the
/// release is returned, not swallowed. The body gets the guard in an `Arc` (so a
/// `|guard| async move { .. }` closure can own it); a clone it keeps past its end keeps
/// the guard, which is then released when that clone is dropped.
///
/// Cancel safe: dropped, the body is dropped and the guard released in the
/// background.
pub(crate) async fn critical_section<G: Held, T, F: Future<Output = T>>(
    guard: G,
    body: impl FnOnce(Arc<G>) -> F,
) -> Result<T> {
    let guard = Arc::new(guard);
    // The body's future is dropped when `while_held` returns, and its clone with it.
    let finished = while_held(&*guard, body(Arc::clone(&guard))).await;
    match Arc::try_unwrap(guard) {
        Ok(guard) => end_section(guard, finished).await,
        Err(kept) => match finished {
            // The body kept a clone: the guard lives as long as it does.
            Some(value) => Ok(value),
            None => Err(LockError::Lost {
                name: lost_name(kept.holds()),
            }),
        },
    }
}

/// How every critical section ends: with `finished`, the body's value (`None`: the
/// body was stopped because a hold was lost), the guard is released; the value is
/// returned once the release succeeded, and an error of the release is returned, not
/// swallowed. A loss is [`LockError::Lost`], naming the hold lost.
pub(crate) async fn end_section<G: Held, T>(guard: G, finished: Option<T>) -> Result<T> {
    match finished {
        Some(value) => guard.unlock().await.map(|()| value),
        None => {
            let name = lost_name(guard.holds());
            // Whatever is left of the holds (a member not lost, a hold Redis still
            // keeps) goes; the loss is the error to report.
            let _ = guard.unlock().await;
            Err(LockError::Lost { name })
        }
    }
}

/// The name of the hold of `holds` that was lost (the first, if none is known lost).
fn lost_name(holds: &[LockGuard]) -> String {
    let lost = holds.iter().find(|hold| hold.is_lost()).or(holds.first());
    lost.map_or_else(String::new, |hold| hold.name().to_owned())
}

/// Runs `body` while `guard` holds: its value, or `None` (and `body`'s future dropped
/// at once) if a hold is lost first. The race at the heart of [`critical_section`];
/// releasing is the caller's.
///
/// Cancel safe: it only watches and polls `body`.
pub(crate) async fn while_held<G: Held, F: Future>(guard: &G, body: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        () = guard.lost() => None,
        value = body => Some(value),
    }
}
