//! Waiting for a lock without polling.
//!
//! Each client keeps one subscriber connection. A waiter subscribes to its lock's
//! release channel (once per lock and client, shared by every local waiter) and sleeps
//! until a release message arrives or the holder's remaining lease runs out. Local
//! waiters on one lock line up in FIFO order and only the head talks to Redis, so a
//! release never sets off a stampede.
//!
//! A release is announced only if someone was refused the lock while it was held (a
//! refused `acquire.lua` marks the lock, see `lua/release.lua`). A waiter always sleeps
//! after such a refusal of the very hold it waits for, so it is always told; a lock
//! nobody waited for is released without a message.
//!
//! # Shutdown
//!
//! [`Waiting::close`] (the first thing `LockClient::shutdown` does) ends every wait at
//! once, wherever it is: queued for its turn, subscribing, or asleep.
//!
//! On Redis 7.0 and later, release channels are shard channels
//! (`SSUBSCRIBE`/`SPUBLISH`, see `shards.rs`): on a cluster a release travels only
//! within the shard that owns the lock's slot.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, EventInterface};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, watch};

use crate::config::{key_of_channel, release_channel};
use crate::error::Result;

mod shards;

/// The waiting rooms of one client, by lock key.
#[derive(Debug)]
pub(crate) struct Waiting {
    subscriber: SubscriberClient,
    /// Shard channels (cluster) instead of plain ones.
    sharded: bool,
    /// Set once by [`close`](Self::close): every waiter gives up.
    closed: watch::Sender<bool>,
    rooms: Mutex<HashMap<String, Arc<Room>>>,
}

#[derive(Debug, Default)]
struct Room {
    /// Waiters that joined and have not left; guarded by the `rooms` lock.
    members: Mutex<usize>,
    /// FIFO order among local waiters (tokio's mutex is fair).
    turn: tokio::sync::Mutex<()>,
    /// Woken by a release message (stores one permit if nobody waits yet).
    released: Notify,
    /// Whether the channel is subscribed; the lock serialises SUBSCRIBE and UNSUBSCRIBE.
    subscribed: tokio::sync::Mutex<bool>,
    /// For a shard channel: the cluster node it was subscribed on.
    node: Mutex<Option<fred::types::config::Server>>,
}

impl Waiting {
    /// Starts dispatching release messages from `subscriber`, which must be connected;
    /// `sharded` subscribes shard channels (and, on a cluster, follows them when their
    /// slots move).
    pub(crate) fn start(subscriber: SubscriberClient, sharded: bool) -> Arc<Self> {
        let waiting = Arc::new(Self {
            subscriber,
            sharded,
            closed: watch::Sender::new(false),
            rooms: Mutex::new(HashMap::new()),
        });
        if sharded && waiting.subscriber.is_clustered() {
            shards::follow_slots(Arc::downgrade(&waiting));
        }
        let mut messages = waiting.subscriber.message_rx();
        let mut reconnects = waiting.subscriber.reconnect_rx();
        let weak = Arc::downgrade(&waiting);
        tokio::spawn(async move {
            loop {
                let channel = tokio::select! {
                    message = messages.recv() => match message {
                        Ok(message) => Some(message.channel),
                        Err(RecvError::Lagged(_)) => None,
                        Err(RecvError::Closed) => return,
                    },
                    // Messages published while disconnected are lost: wake everyone to retry.
                    reconnect = reconnects.recv() => match reconnect {
                        Err(RecvError::Closed) => return,
                        _ => None,
                    },
                };
                let Some(waiting) = Weak::upgrade(&weak) else {
                    return;
                };
                waiting.wake(channel.as_ref().map(|channel| key_of_channel(channel)));
            }
        });
        waiting
    }

    /// Wakes the head waiter of the lock at `key`, or of every room if `None`.
    fn wake(&self, key: Option<&str>) {
        let rooms = self.rooms.lock();
        match key {
            Some(key) => {
                if let Some(room) = rooms.get(key) {
                    room.released.notify_one();
                }
            }
            None => rooms.values().for_each(|room| room.released.notify_one()),
        }
    }

    /// Enters the waiting room of the lock at `key`.
    pub(crate) fn join<'a>(self: &Arc<Self>, key: &'a str) -> Ticket<'a> {
        let mut rooms = self.rooms.lock();
        let room = match rooms.get(key) {
            Some(room) => Arc::clone(room),
            None => Arc::clone(rooms.entry(key.to_owned()).or_default()),
        };
        *room.members.lock() += 1;
        Ticket {
            waiting: Arc::clone(self),
            key,
            room,
        }
    }

    /// Ends every wait: each waiter's [`Ticket::closed`] resolves, now and on joining.
    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }

    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Closes the rooms and the subscriber connection.
    pub(crate) async fn quit(&self) {
        self.close();
        crate::client::close(&self.subscriber).await;
    }

    fn leave(self: &Arc<Self>, key: &str, room: &Arc<Room>) {
        {
            let mut rooms = self.rooms.lock();
            let mut members = room.members.lock();
            *members -= 1;
            if *members > 0 {
                return;
            }
            // Never subscribed (the usual case for a lock that was free): forget the
            // room now rather than in a task. After `close` the subscriber is going
            // away with its subscriptions.
            let never_subscribed = room
                .subscribed
                .try_lock()
                .is_ok_and(|subscribed| !*subscribed);
            if never_subscribed
                || self.is_closed()
                || tokio::runtime::Handle::try_current().is_err()
            {
                forget(&mut rooms, key, room);
                return;
            }
        }
        let waiting = Arc::clone(self);
        let key = key.to_owned();
        let room = Arc::clone(room);
        tokio::spawn(async move {
            let mut subscribed = room.subscribed.lock().await;
            if *subscribed && *room.members.lock() == 0 {
                let channel = release_channel(&key);
                if let Err(error) = waiting.unsubscribe(&channel, &room).await {
                    tracing::debug!(%error, %channel, "unsubscribe failed");
                }
                *subscribed = false;
            }
            drop(subscribed);
            waiting.forget_if_empty(&key, &room);
        });
    }

    fn forget_if_empty(&self, key: &str, room: &Arc<Room>) {
        let mut rooms = self.rooms.lock();
        if *room.members.lock() == 0 {
            forget(&mut rooms, key, room);
        }
    }
}

/// Removes `room` from `rooms` unless another room has taken its place meanwhile.
fn forget(rooms: &mut HashMap<String, Arc<Room>>, key: &str, room: &Arc<Room>) {
    if rooms.get(key).is_some_and(|r| Arc::ptr_eq(r, room)) {
        rooms.remove(key);
    }
}

/// A place in a lock's waiting room; leaving (dropping it) unsubscribes the channel
/// once the room is empty.
#[derive(Debug)]
pub(crate) struct Ticket<'a> {
    waiting: Arc<Waiting>,
    key: &'a str,
    room: Arc<Room>,
}

impl Ticket<'_> {
    /// Waits for this waiter's turn to talk to Redis (FIFO among local waiters).
    pub(crate) async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.room.turn.lock().await
    }

    /// This waiter's turn, if nobody is ahead of it.
    pub(crate) fn try_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.room.turn.try_lock().ok()
    }

    /// Subscribes to the release channel if no waiter has yet. Returns `true` if this
    /// call subscribed (so the caller should try again before sleeping).
    pub(crate) async fn subscribe(&self) -> Result<bool> {
        let mut subscribed = self.room.subscribed.lock().await;
        if *subscribed {
            return Ok(false);
        }
        let channel = release_channel(self.key);
        Box::pin(self.waiting.subscribe(&channel, &self.room)).await?;
        *subscribed = true;
        Ok(true)
    }

    /// Resolves at the next release message (or a stored one).
    pub(crate) async fn released(&self) {
        self.room.released.notified().await;
    }

    /// Resolves once the client is shut down (at once if it is).
    pub(crate) async fn closed(&self) {
        let mut closed = self.waiting.closed.subscribe();
        // Fails only if the sender is gone, and this ticket keeps it.
        let _ = closed.wait_for(|closed| *closed).await;
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.waiting.leave(self.key, &self.room);
    }
}
