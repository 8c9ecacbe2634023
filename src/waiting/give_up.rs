//! When a caller waiting for a lock gives up: never ([`Forever`]), or at an instant;
//! and the budget that holds a call with a wait to its deadline when Redis does not
//! answer ([`within_budget`]).

use std::convert::Infallible;
use std::future::Future;

use futures::FutureExt;
use tokio::time::Instant;

use crate::error::{LockError, Result};

/// `call`, a lock call with a wait, held to its caller's budget: if it has not
/// returned by `answer_by` (see `ResolvedOptions::answer_by`: Redis did not answer an
/// attempt in time), it is dropped and fails with [`LockError::unanswered`]. Dropping
/// is cancel safe: an attempt whose outcome is unknown is settled in the background,
/// and nothing is left held.
pub(crate) fn within_budget<T>(
    answer_by: Instant,
    call: impl Future<Output = Result<T>>,
) -> impl Future<Output = Result<T>> {
    // Not an `async fn`, which would keep room for `call` twice (see `observe::observed`).
    tokio::time::timeout_at(answer_by, call)
        .map(|answered| answered.unwrap_or_else(|_| Err(LockError::unanswered())))
}

/// When a caller waiting for a lock gives up: never ([`Forever`]), or at an instant.
pub trait GiveUp: Copy + Send + Sync + 'static {
    /// What giving up yields; [`Infallible`] for a caller that never gives up, so that
    /// `lock()` has a guard or an error, with no third case.
    type GaveUp: Send;

    /// `Some` once the deadline has passed.
    fn passed(self) -> Option<Self::GaveUp>;

    /// The output of `future`, unless the deadline comes first.
    fn until<F: Future + Send>(
        self,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::GaveUp>> + Send;

    /// `wake`, or the deadline if that comes first.
    fn cap(self, wake: Instant) -> Instant;
}

/// A caller that waits as long as it takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forever;

impl GiveUp for Forever {
    type GaveUp = Infallible;

    fn passed(self) -> Option<Infallible> {
        None
    }

    async fn until<F: Future + Send>(self, future: F) -> Result<F::Output, Infallible> {
        Ok(future.await)
    }

    fn cap(self, wake: Instant) -> Instant {
        wake
    }
}

impl GiveUp for Instant {
    type GaveUp = ();

    fn passed(self) -> Option<()> {
        (Instant::now() >= self).then_some(())
    }

    async fn until<F: Future + Send>(self, future: F) -> Result<F::Output, ()> {
        tokio::time::timeout_at(self, future).await.map_err(|_| ())
    }

    fn cap(self, wake: Instant) -> Instant {
        wake.min(self)
    }
}
