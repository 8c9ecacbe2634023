//! [`Coalesce`]: calls of one sort that go out alone while few are in flight, and
//! together past that. A call that finds [`ALONE`] calls of its sort in flight queues
//! its item instead, and a task sends the whole queue as soon as it runs (after the
//! tasks that are ready then, so a burst of calls goes out as one). A batch forms only
//! from what waits to be sent: a lone call waits for nobody, and a queued one waits for
//! no reply, only for a batch call to be free ([`BATCHES`] may be in flight).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::LockError;

/// How many calls of one sort may be in flight before the next joins a batch. Two: a
/// lone call, and one beside it, go out at once; from the third on, calls share their
/// script call. With 16, a service with a handful of requests at a time paid Redis a
/// script call per lock, and 256 tasks paid 0.27 script calls a cycle against 0.05 now
/// (W11 in docs/performance.md). On a cluster a batch carries the locks of one node
/// (of any of its slots), so the same holds there.
pub(super) const ALONE: usize = 2;

/// How many batch calls of one sort may be in flight at once.
pub(super) const BATCHES: usize = 16;

/// The calls in flight of one sort, and the items waiting to go out together.
pub(super) struct Coalesce<T> {
    queue: Mutex<Queue<T>>,
    /// Calls in flight, alone or batches.
    in_flight: Arc<AtomicUsize>,
    /// One permit per batch call in flight.
    batches: Arc<Semaphore>,
}

struct Queue<T> {
    items: Vec<T>,
    /// Whether a task sends the queue.
    sending: bool,
}

/// A call in flight; it counts as one until dropped.
pub(super) struct Call {
    in_flight: Arc<AtomicUsize>,
    _batch: Option<OwnedSemaphorePermit>,
}

impl Drop for Call {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T> Coalesce<T> {
    /// Calls of one sort of a client, none in flight.
    pub(super) fn new() -> Self {
        Self {
            queue: Mutex::new(Queue {
                items: Vec::new(),
                sending: false,
            }),
            in_flight: Arc::default(),
            batches: Arc::new(Semaphore::new(BATCHES)),
        }
    }

    /// A call sent alone now, if fewer than [`ALONE`] are in flight; else the item
    /// should be [queued](Self::push).
    pub(super) fn alone_now(&self) -> Option<Call> {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) < ALONE {
            return Some(self.counted(None));
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        None
    }

    /// Whether the next call would join a batch: [`ALONE`] calls are in flight.
    pub(super) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) >= ALONE
    }

    /// Queues `item`. Returns whether the caller must start the task that sends the
    /// queue (with [`next`](Self::next)): none runs.
    #[must_use]
    pub(super) fn push(&self, item: T) -> bool {
        let mut queue = self.queue.lock();
        queue.items.push(item);
        !std::mem::replace(&mut queue.sending, true)
    }

    /// For the sending task: waits until a batch call may go out, then takes up to
    /// `most` of the queue (the last queued) with that call. `None` when nothing is
    /// queued: the task ends, and the next [`push`](Self::push) starts another.
    pub(super) async fn next(&self, most: usize) -> Option<(Call, Vec<T>)> {
        let call = self.call().await?;
        let mut queue = self.queue.lock();
        if queue.items.is_empty() {
            queue.sending = false;
            return None;
        }
        let keep = queue.items.len().saturating_sub(most);
        Some((call, queue.items.split_off(keep)))
    }

    /// Sends each of `batches` (a batch's calls: on a cluster, one per node) with
    /// `send`, in a task of its own: the first on `first` (from [`next`](Self::next)),
    /// each other once another batch call is free.
    pub(super) async fn send_each<B, F>(&self, first: Call, batches: Vec<B>, send: impl Fn(B) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut first = Some(first);
        for batch in batches {
            let call = match first.take() {
                Some(call) => call,
                None => match self.call().await {
                    Some(call) => call,
                    None => return,
                },
            };
            let sent = send(batch);
            drop(tokio::spawn(async move {
                sent.await;
                drop(call);
            }));
        }
    }

    /// One more batch call, for a batch that goes out in several (on a cluster, one per
    /// slot). `None` only if the semaphore were closed, which it never is.
    async fn call(&self) -> Option<Call> {
        let permit = Arc::clone(&self.batches).acquire_owned().await.ok()?;
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Some(self.counted(Some(permit)))
    }

    /// A call already counted in flight.
    fn counted(&self, batch: Option<OwnedSemaphorePermit>) -> Call {
        Call {
            in_flight: Arc::clone(&self.in_flight),
            _batch: batch,
        }
    }
}

/// What a queued call hears when the task of its batch ended without an answer (its
/// runtime shut down): the in-flight call was dropped with the batch, and is being
/// settled.
pub(super) fn batch_ended() -> LockError {
    LockError::Redis(fred::error::Error::new(
        fred::error::ErrorKind::Canceled,
        "the task of a batch ended before its reply",
    ))
}

impl<T> fmt::Debug for Coalesce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let queue = self.queue.lock();
        f.debug_struct("Coalesce")
            .field("queued", &queue.items.len())
            .field("sending", &queue.sending)
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_go_alone_up_to_the_limit_then_queue_and_leave_together() {
        let calls: Coalesce<u32> = Coalesce::new();
        let alone: Vec<Call> = (0..ALONE).map_while(|_| calls.alone_now()).collect();
        assert_eq!(alone.len(), ALONE);
        assert!(calls.alone_now().is_none(), "past the limit, a call queues");
        assert!(calls.push(1), "the first item starts the sender");
        assert!(!calls.push(2), "a sender already runs");
        // A batch does not wait for a call alone to end.
        let (batch, items) = calls.next(10).await.unwrap();
        assert_eq!(items, [1, 2]);
        assert!(
            calls.next(10).await.is_none(),
            "nothing left: the sender ends"
        );
        assert!(calls.push(3), "the next item starts a sender again");
        drop((alone, batch));
        assert!(calls.alone_now().is_some(), "calls ended: alone again");
        // At most `most` are taken at once, the last queued first.
        assert!(!calls.push(4));
        let (_batch, items) = calls.next(1).await.unwrap();
        assert_eq!(items, [4]);
    }
}
