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
//! On Redis 7.0 and later, release channels are shard channels
//! (`SSUBSCRIBE`/`SPUBLISH`, see `shards.rs`): on a cluster a release travels only
//! within the shard that owns the lock's slot.
//!
//! # Handing the lock to another client
//!
//! A mutex's waiting *clients* queue in Redis and a release names the next: see
//! `hand_off.rs`.
//!
//! # Subscriptions that are lost
//!
//! A subscription lives as long as the subscriber connection. After a reconnection
//! every room is woken to try again (a release may have gone by unheard) and its head
//! subscribes again before it sleeps: a room records the connection its subscription
//! was confirmed on, and every reconnection counts as a new connection. fred's own
//! resubscription (`SubscriberClient::manage_subscriptions`) is not used: fred 10
//! sends `SUBSCRIBE` and `PSUBSCRIBE` even with no channels to restore, Redis answers
//! each with an error, and since fred expects no reply to those commands (their
//! confirmations arrive out of band) the errors were taken as the replies to the next
//! `SSUBSCRIBE` on the connection: fred's own, which then gave up on every channel but
//! the lowest slot's, or a waiter's, which failed its `lock()` with "wrong number of
//! arguments for 'subscribe'". A subscription that fails in transit (the connection
//! lost under it, or being restored) leaves the waiter unsubscribed and asleep for at
//! most [`SUBSCRIBE_RETRY`], then it tries again; only a definite refusal
//! (`NOPERM`: the ACL does not allow the channel) fails the wait.
//!
//! # Notices to this client
//!
//! Besides the release channels of the locks it waits for, each client listens on one
//! channel of its own, `<prefix>client:<client id>`, subscribed before the client is
//! built (and again after every reconnection): `lua/force_unlock.lua` tells there each client whose
//! holds it broke, so that they hear it within a round trip instead of at their next
//! renewal (see [`Waiting::listen_for_notices`]).
//!
//! # Shutdown
//!
//! [`Waiting::close`] (the first thing `LockClient::shutdown` does) ends every wait at
//! once, wherever it is: queued for its turn, subscribing, or asleep.

use std::collections::{HashMap, hash_map::Entry};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::bytes_utils::Str;
use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, EventInterface};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::chores::{Chore, Chores};
use crate::connection::Ownership;
use crate::error::{LockError, Result};
use crate::keys::keys_of_channel;

mod give_up;
mod hand_off;
mod line;
mod mark;
mod named;
mod notices;
mod places;
mod release;
mod shards;
mod sharers;
mod wait;

pub(crate) use give_up::{Forever, GiveUp, within_budget};
use hand_off::Due;
use line::Line;
pub(crate) use mark::Mark;
use named::Queue;
pub(crate) use named::{NamedWaiter, PlacesCheck};
use notices::{NoticeHandler, Notices};
pub(crate) use places::Places;
use release::Release;
use sharers::Sharers;
pub(crate) use wait::{Asked, Policy, Refusal, nap_until, wait};

/// How long an emptied waiting room keeps its subscription, for a waiter of this
/// client that comes back soon.
const LINGER: Duration = Duration::from_millis(200);

/// How soon a waiter whose subscription failed in transit tries again (unless the
/// subscriber's reconnection, or the holder's lease, wakes it sooner).
const SUBSCRIBE_RETRY: Duration = Duration::from_millis(100);

/// The waiting rooms of one client, by lock key.
#[derive(Debug)]
pub(crate) struct Waiting {
    subscriber: SubscriberClient,
    /// The connection the scripts go over, to take down a waiter's [`Mark`] after any
    /// attempt sent before (in order, on one connection per node).
    redis: fred::clients::Client,
    /// Counts the waits and what they leave to do (see `chores.rs`).
    chores: Arc<Chores>,
    /// Whether `subscriber` is closed at shutdown (holdlock opened it) or the
    /// application's.
    ownership: Ownership,
    /// Shard channels (cluster) instead of plain ones.
    sharded: bool,
    /// This client's id, as release messages name it.
    client: Uuid,
    /// Counts the subscriber's reconnections: a channel subscribed on an earlier
    /// connection is subscribed again before its waiter sleeps.
    connection: AtomicU64,
    /// Set once by [`close`](Self::close): every waiter gives up.
    closed: watch::Sender<bool>,
    rooms: Mutex<HashMap<Str, Arc<Room>>>,
    /// This client's own channel and what to do with a message on it.
    notices: std::sync::OnceLock<Notices>,
}

#[derive(Debug, Default)]
struct Room {
    /// Waiters that joined and have not left; guarded by the `rooms` lock.
    members: Mutex<usize>,
    /// The lock's release channel, and its subscription.
    channel: Subscription,
    /// The waiters in line, whose head asks (see `line.rs`).
    line: Line,
    /// The waiters who share the lock, woken all at once (see `sharers.rs`).
    sharers: Sharers,
    /// The waiters woken only by a message naming them (see `named.rs`).
    queue: Queue,
}

impl Room {
    /// Wakes every waiter to try again, as after a release nobody may have heard: the
    /// head waiter, every waiter who shares the lock, and every named waiter.
    fn wake_everyone(&self) {
        self.line.wake(Due::Now { named: false });
        self.sharers.wake();
        self.queue.wake_all();
    }
}

/// A room's release channel and its subscription.
#[derive(Debug, Default)]
struct Subscription {
    /// The channel the lock's releases are told on.
    name: String,
    /// Where the subscription stands; the lock serialises SUBSCRIBE and UNSUBSCRIBE.
    state: tokio::sync::Mutex<Channel>,
    /// For a shard channel: the cluster node it was subscribed on.
    node: Mutex<Option<fred::types::config::Server>>,
}

/// Where a room's release channel stands.
#[derive(Debug, Default)]
struct Channel {
    /// A subscription was sent since the last unsubscription, answered or not: the
    /// server may have it, so leaving the room unsubscribes.
    sent: bool,
    /// The subscriber connection (see [`Waiting::connection`]) on which the server
    /// confirmed the subscription, and when: a release told before then went unheard.
    confirmed: Option<(u64, Instant)>,
}

/// Whether a waiter listens to its lock's release channel, from [`Ticket::subscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listening {
    /// Subscribed just now, or (by another waiter of this client) after the caller's
    /// attempt was sent: a release may have gone by unheard, so try again first.
    Now,
    /// Subscribed before the caller's attempt, on the current connection.
    Already,
    /// Not subscribed: the subscription failed in transit (the subscriber connection
    /// was lost, or is being restored). Sleep no longer than this, then try again.
    Not(Duration),
}

impl Waiting {
    /// Starts dispatching release messages from `subscriber`, which must be connected;
    /// `sharded` subscribes shard channels (and, on a cluster, follows them when their
    /// slots move). `client` is this client's id (the first part of its owner ids).
    /// `redis` is the scripts' connection; `chores` counts every wait and the leaving
    /// of a queue it leaves to do, for a clean shutdown.
    pub(crate) fn start(
        (subscriber, ownership): (SubscriberClient, Ownership),
        redis: fred::clients::Client,
        sharded: bool,
        client: Uuid,
        chores: Arc<Chores>,
    ) -> Arc<Self> {
        let waiting = Arc::new(Self {
            subscriber,
            redis,
            chores,
            ownership,
            sharded,
            client,
            connection: AtomicU64::new(0),
            closed: watch::Sender::new(false),
            rooms: Mutex::new(HashMap::new()),
            notices: std::sync::OnceLock::new(),
        });
        if sharded && waiting.subscriber.is_clustered() {
            shards::follow_slots(Arc::downgrade(&waiting));
        }
        let mut messages = waiting.subscriber.message_rx();
        let mut reconnects = waiting.subscriber.reconnect_rx();
        let weak = Arc::downgrade(&waiting);
        tokio::spawn(async move {
            loop {
                let (message, reconnected) = tokio::select! {
                    message = messages.recv() => match message {
                        Ok(message) => (Some(message), false),
                        Err(RecvError::Lagged(_)) => (None, false),
                        Err(RecvError::Closed) => return,
                    },
                    reconnect = reconnects.recv() => match reconnect {
                        Err(RecvError::Closed) => return,
                        // (Lagged: it missed reconnections, so there was at least one.)
                        Ok(_) | Err(RecvError::Lagged(_)) => (None, true),
                    },
                };
                let Some(waiting) = Weak::upgrade(&weak) else {
                    return;
                };
                if reconnected {
                    // The new connection has no subscriptions: each head subscribes
                    // again when woken below, and the client's own channel now.
                    waiting.connection.fetch_add(1, Ordering::AcqRel);
                    tokio::spawn(waiting.subscribe_notices());
                }
                match message {
                    Some(message) => {
                        waiting.dispatch(&message.channel, &message.value);
                    }
                    // Messages published while disconnected (or dropped) are lost:
                    // wake everyone to retry.
                    None => waiting.wake_all(),
                }
            }
        });
        waiting
    }

    /// Listens on `channel`, this client's own (see the module docs), handing each
    /// message there to `handler` (on the task that reads messages: it must not
    /// block). Subscribes now, returning once the server confirmed it (so that a
    /// force-unlock of the client's first hold is heard), and again after every
    /// reconnection (see [`Notices`]).
    pub(crate) async fn listen_for_notices(
        self: &Arc<Self>,
        channel: String,
        handler: NoticeHandler,
    ) {
        if self.notices.set(Notices::new(channel, handler)).is_ok() {
            self.subscribe_notices().await;
        }
    }

    /// Subscribes this client's own channel, if it listens there (see [`Notices`]).
    fn subscribe_notices(&self) -> impl Future<Output = ()> + Send + 'static {
        notices::subscribe(self.subscriber.clone(), self.notices.get())
    }

    /// Hands a release message on `channel` on, in the room of each lock told there
    /// (Redisson's layout gives two names one channel), or a notice on this client's
    /// own channel to its handler.
    fn dispatch(&self, channel: &str, message: &fred::types::Value) {
        if let Some(notices) = self.notices.get().filter(|n| n.channel() == channel) {
            notices.hand_on(message.as_bytes().unwrap_or_default());
            return;
        }
        let rooms = self.rooms.lock();
        for key in keys_of_channel(channel).into_iter().flatten() {
            if let Some(room) = rooms.get(key.as_ref()) {
                self.dispatch_in(room, message);
            }
        }
    }

    /// Hands a release message on in `room` (see `release.rs`): to the waits of the
    /// owner it names (a fair lock hands itself to one owner's wait), else to the line;
    /// and to the waiters who share the lock.
    fn dispatch_in(&self, room: &Room, message: &fred::types::Value) {
        let text = message.as_bytes().unwrap_or_default();
        match Release::read(text) {
            // When the hold just taken runs out: this client's waits are next.
            Release::LeaseEnds {
                server_ms,
                lease_ms,
            } => room.queue.places.told(server_ms, lease_ms),
            Release::Told {
                owner,
                handed,
                writers_only,
            } => {
                if !room.queue.hand(owner, handed) {
                    room.line.heard(text, self.client);
                }
                room.sharers.heard(writers_only);
            }
        }
    }

    /// Wakes every waiter of every lock to try again.
    fn wake_all(&self) {
        self.rooms
            .lock()
            .values()
            .for_each(|room| room.wake_everyone());
    }

    /// Whether a waiter of the lock at `key` is here (its room is open).
    pub(crate) fn has_room(&self, key: &str) -> bool {
        self.rooms.lock().contains_key(key)
    }

    /// Enters the waiting room of the lock at `key` (one lookup, the key cloned by
    /// reference), whose releases are told on `channel` (named if the room is new).
    pub(crate) fn join<'a>(
        self: &Arc<Self>,
        key: &'a Str,
        channel: impl FnOnce() -> String,
    ) -> Ticket<'a> {
        let mut rooms = self.rooms.lock();
        let room = Arc::clone(rooms.entry(key.clone()).or_insert_with(|| {
            Arc::new(Room {
                channel: Subscription {
                    name: channel(),
                    ..Subscription::default()
                },
                ..Room::default()
            })
        }));
        *room.members.lock() += 1;
        Ticket {
            waiting: Arc::clone(self),
            key,
            room,
            _chore: self.chores.begin(),
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
        crate::connection::close_if_opened(&self.subscriber, self.ownership).await;
    }

    /// Subscribes `room`'s release channel, recording it in `state`.
    async fn subscribe_room(
        &self,
        room: &Room,
        state: &mut Channel,
    ) -> fred::prelude::FredResult<()> {
        // Read before sending: a reconnection during the call leaves the subscription
        // recorded on the older connection, to be made again.
        let connection = self.connection.load(Ordering::Acquire);
        state.sent = true;
        state.confirmed = None;
        Box::pin(self.subscribe(&room.channel.name, room)).await?;
        state.confirmed = Some((connection, Instant::now()));
        Ok(())
    }

    fn leave(self: &Arc<Self>, key: &Str, room: &Arc<Room>) {
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
                .channel
                .state
                .try_lock()
                .is_ok_and(|channel| !channel.sent);
            let now = never_subscribed && !room.is_leaving();
            if now || self.is_closed() || tokio::runtime::Handle::try_current().is_err() {
                forget(&mut rooms, key, room);
                drop((members, rooms));
                self.take_down_mark(key, room);
                return;
            }
        }
        let waiting = Arc::clone(self);
        let key = key.clone();
        let room = Arc::clone(room);
        // Taking its mark down is a chore (see `take_down_mark`).
        let chore = room.line.mark.lock().is_some().then(|| self.chores.begin());
        tokio::spawn(async move {
            // Kept a while for a waiter of this client that comes back soon (a task
            // between two sections): it then finds the channel subscribed, and need
            // not subscribe and ask again.
            let mut closed = waiting.closed.subscribe();
            tokio::select! {
                () = tokio::time::sleep(LINGER) => {}
                _ = closed.wait_for(|closed| *closed) => {}
            }
            if *room.members.lock() > 0 {
                return;
            }
            let mut state = room.channel.state.lock().await;
            if state.sent && *room.members.lock() == 0 {
                let channel = &room.channel.name;
                if let Err(error) = waiting.unsubscribe(channel, &room).await {
                    tracing::debug!(%error, %channel, "unsubscribe failed");
                }
                *state = Channel::default();
            }
            drop(state);
            if waiting.forget_if_empty(&key, &room) {
                waiting.take_down_mark(&key, &room);
            }
            drop(chore);
        });
    }

    /// Forgets `room` if nobody is in it and no wait that ended in it is still leaving
    /// its queue (see [`Leaving`]); returns whether it did.
    fn forget_if_empty(&self, key: &Str, room: &Arc<Room>) -> bool {
        let mut rooms = self.rooms.lock();
        let empty = *room.members.lock() == 0 && !room.is_leaving();
        if empty {
            forget(&mut rooms, key, room);
        }
        empty
    }
}

/// Removes `room` from `rooms` unless another room has taken its place meanwhile.
fn forget(rooms: &mut HashMap<Str, Arc<Room>>, key: &Str, room: &Arc<Room>) {
    if let Entry::Occupied(entry) = rooms.entry(key.clone())
        && Arc::ptr_eq(entry.get(), room)
    {
        entry.remove();
    }
}

/// A place in a lock's waiting room; leaving (dropping it) unsubscribes the channel
/// once the room is empty.
#[derive(Debug)]
pub(crate) struct Ticket<'a> {
    waiting: Arc<Waiting>,
    key: &'a Str,
    room: Arc<Room>,
    /// A wait is a chore: `shutdown` waits for it to end (and leave its queues).
    _chore: Chore,
}

impl Ticket<'_> {
    /// Subscribes to the release channel unless it is subscribed on the subscriber's
    /// current connection; `attempted_at` is when the caller's last attempt was sent.
    ///
    /// # Errors
    /// Only a definite refusal ([`LockError::PermissionDenied`]). A subscription that
    /// failed in transit is [`Listening::Not`]: after a lost connection fred answers
    /// `SSUBSCRIBE` with an I/O error, or, while it restores its own subscriptions,
    /// with a reply meant for another command.
    pub(crate) async fn subscribe(&self, attempted_at: Instant) -> Result<Listening> {
        let mut state = self.room.channel.state.lock().await;
        let connection = self.waiting.connection.load(Ordering::Acquire);
        match state.confirmed {
            // Confirmed since the attempt: a release told in between went unheard.
            Some((on, at)) if on == connection && at > attempted_at => {
                return Ok(Listening::Now);
            }
            Some((on, _)) if on == connection => return Ok(Listening::Already),
            _ => {}
        }
        let subscribed = self.waiting.subscribe_room(&self.room, &mut state).await;
        match subscribed.map_err(LockError::from) {
            Ok(()) => Ok(Listening::Now),
            Err(refused @ LockError::PermissionDenied { .. }) => Err(refused),
            Err(error) => {
                tracing::debug!(lock = %self.key, %error, "could not subscribe; will retry");
                Ok(Listening::Not(SUBSCRIBE_RETRY))
            }
        }
    }

    /// How many waiters of this client are in the room, this one included.
    pub(crate) fn waiters(&self) -> usize {
        *self.room.members.lock()
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
