//! [`Held`]: what every kind of guard has in common (the lost and at-risk signals, a
//! fixed lease's extension, release), and the critical section written once over it.

use std::fmt;
use std::future::Future;
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
/// [`Leadership`](crate::Leadership). Each guard also has these methods of its own;
/// the trait is for code written once for every kind. Sealed: only this crate's
/// guards implement it.
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
pub trait Held: Sealed + Send + Sync + fmt::Debug + Sized {
    /// The holds the guard is made of: one, or a multi-lock's members.
    #[doc(hidden)]
    fn holds(&self) -> &[LockGuard];

    /// Releases the guard's holds (for a semaphore permit, gives it back), as the
    /// guard's own `unlock` (or `release`) does.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`]: whatever is not released by the time the future is
    /// dropped is released in the background.
    fn unlock(self) -> impl Future<Output = Result<()>> + Send;

    /// Whether a hold of the guard is known to be lost (see [`LockGuard::is_lost`]).
    fn is_lost(&self) -> bool {
        self.holds().iter().any(LockGuard::is_lost)
    }

    /// Resolves when a hold of the guard is lost (see [`LockGuard::lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        first_of(self.holds(), |hold| Box::pin(hold.lost()))
    }

    /// Whether a hold of the guard has been warned at risk (see
    /// [`LockGuard::is_at_risk`]).
    fn is_at_risk(&self) -> bool {
        self.holds().iter().any(LockGuard::is_at_risk)
    }

    /// Resolves when a hold of the guard is at risk of being lost (see
    /// [`LockGuard::at_risk`]): an early warning, before [`lost`](Self::lost).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn at_risk(&self) -> impl Future<Output = ()> + Send + '_ {
        first_of(self.holds(), |hold| Box::pin(hold.at_risk()))
    }

    /// The smallest lease left when the holds' last renewals landed (see
    /// [`LockGuard::renewal_margin`]).
    fn renewal_margin(&self) -> Option<Duration> {
        self.holds()
            .iter()
            .filter_map(LockGuard::renewal_margin)
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
    fn extend(&self, lease: Duration) -> impl Future<Output = Result<()>> + Send + '_ {
        async move {
            for hold in self.holds() {
                hold.extend(lease).await?;
            }
            Ok(())
        }
    }
}

impl Sealed for LockGuard {}

impl Held for LockGuard {
    fn holds(&self) -> &[LockGuard] {
        std::slice::from_ref(self)
    }

    fn unlock(self) -> impl Future<Output = Result<()>> + Send {
        LockGuard::unlock(self)
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

/// Runs `body` under `guard`, the critical section of every `with_*` call: the body's
/// future is dropped at once if a hold is lost meanwhile ([`LockError::Lost`]);
/// otherwise its value is returned once the guard is released, and an error of the
/// release is returned, not swallowed.
///
/// Cancel safe: dropped, the body is dropped and the guard released in the
/// background.
pub(crate) async fn critical_section<G: Held, T>(
    guard: G,
    body: impl AsyncFnOnce(&G) -> T,
) -> Result<T> {
    let finished = while_held(&guard, body(&guard)).await;
    end_section(guard, finished).await
}

/// How every critical section ends: with `finished`, the body's value (`None`: the
/// body was stopped because a hold was lost), the guard is released; the value is
/// returned once the release succeeded, and an error of the release is returned, not
/// swallowed. A loss is [`LockError::Lost`], naming the hold lost.
pub(crate) async fn end_section<G: Held, T>(guard: G, finished: Option<T>) -> Result<T> {
    match finished {
        Some(value) => guard.unlock().await.map(|()| value),
        None => {
            let holds = guard.holds();
            let lost = holds.iter().find(|hold| hold.is_lost()).or(holds.first());
            let name = lost.map_or_else(String::new, |hold| hold.name().to_owned());
            // Whatever is left of the holds (a member not lost, a hold Redis still
            // keeps) goes; the loss is the error to report.
            let _ = guard.unlock().await;
            Err(LockError::Lost { name })
        }
    }
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
