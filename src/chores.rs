//! Work a client still owes Redis after its caller has moved on: background releases,
//! the settling of calls whose caller went away, a cancelled wait leaving its queue.
//! `LockClient::shutdown` waits (up to the connect timeout) until none is left, so a
//! clean shutdown leaves nothing of its own behind in Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// A count of outstanding chores, and a way to wait until it is zero.
#[derive(Debug, Default)]
pub(crate) struct Chores {
    count: AtomicUsize,
    done: Notify,
}

impl Chores {
    /// A chore that lasts as long as the returned token.
    pub(crate) fn begin(self: &Arc<Self>) -> Chore {
        self.add();
        Chore(Arc::clone(self))
    }

    /// Counts one more chore; [`finish`](Self::finish) ends it.
    pub(crate) fn add(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends a chore counted by [`add`](Self::add).
    pub(crate) fn finish(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.done.notify_waiters();
        }
    }

    /// Resolves once no chore is outstanding.
    pub(crate) async fn all_done(&self) {
        loop {
            let done = self.done.notified();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            done.await;
        }
    }
}

/// One outstanding chore (see [`Chores::begin`]); ends when dropped. Move it into the
/// task that does the work.
#[must_use = "the chore ends when the token is dropped"]
#[derive(Debug)]
pub(crate) struct Chore(Arc<Chores>);

impl Drop for Chore {
    fn drop(&mut self) {
        self.0.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn all_done_waits_for_every_chore() {
        let chores = Arc::new(Chores::default());
        chores.all_done().await;
        let first = chores.begin();
        chores.add();
        let waiting = tokio::spawn({
            let chores = Arc::clone(&chores);
            async move { chores.all_done().await }
        });
        tokio::task::yield_now().await;
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one chore is left");
        chores.finish();
        waiting.await.unwrap();
    }
}
