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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::bytes_utils::Str;
use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, EventInterface};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use uuid::Uuid;

use crate::chores::{Chore, Chores};
use crate::connection::Ownership;
use crate::error::{LockError, Result};
use crate::hold::Holds;
use crate::keys::keys_of_channel;

mod deadlock;
mod give_up;
mod hand_off;
mod mark;
mod named;
mod notices;
mod places;
mod shards;
mod wait;

pub(crate) use deadlock::{Detection, Walker, second_look};
use deadlock::{LocalWait, Walks};
pub(crate) use give_up::{Forever, GiveUp, within_budget};
use hand_off::Due;
use mark::Leaving;
pub(crate) use mark::Mark;
use named::Named;
pub(crate) use named::{Handed, NamedWaiter, PlacesCheck};
use notices::{NoticeHandler, Notices};
pub(crate) use places::Places;
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
    /// The deadlock checks of long waits, unless they are off (see `deadlock.rs`).
    deadlock: Option<Arc<Detection>>,
    /// This client's holds (the engine's), and its waits being checked, by owner: a
    /// cycle among its own tasks is found without asking Redis.
    holds: Arc<Holds>,
    local_waits: Mutex<HashMap<String, LocalWait>>,
    /// The deadlock checks' recent walks, by lock (see [`Waiting::explored`]).
    walks: Mutex<Walks>,
}

#[derive(Debug, Default)]
struct Room {
    /// The channel the lock's releases are told on.
    release_channel: String,
    /// Waiters that joined and have not left; guarded by the `rooms` lock.
    members: Mutex<usize>,
    /// FIFO order among local waiters (tokio's mutex is fair).
    turn: tokio::sync::Mutex<()>,
    /// Woken by a release message (stores one permit if nobody waits yet).
    released: Notify,
    /// When the head should ask again, after the release messages heard so far.
    due: Mutex<Due>,
    /// The last release message's arrival, and the moving average of the gaps ([`Room::step`]).
    pace: Mutex<Option<(Instant, Duration)>>,
    /// Set by a grant that queued this client again for its next waiter
    /// (`HandOff::Waited`'s `requeue`): the next head waits for its name without asking.
    queued: AtomicBool,
    /// What a refused attempt of a waiter here left in Redis for this client's waits
    /// (see [`Mark`]): taken down when the room is forgotten.
    mark: Mutex<Option<Mark>>,
    /// The waits that ended here still leaving a Redisson fair queue.
    leaving: Leaving,
    /// The release channel's subscription; the lock serialises SUBSCRIBE and UNSUBSCRIBE.
    channel: tokio::sync::Mutex<Channel>,
    /// For a shard channel: the cluster node it was subscribed on.
    node: Mutex<Option<fred::types::config::Server>>,
    /// Waiters woken only by a message that names them (a fair lock's waits).
    named: Mutex<Vec<Arc<Named>>>,
    /// The named waiters' shared schedule of attempts in a fair lock's queue.
    places: Places,
    /// Woken, all at once, by every release message: waiters who share the lock (the
    /// readers of a read-write lock) and so do not line up ([`Ticket::any_release`]).
    sharers: Notify,
    /// Until when a sharer refused since the last release message sleeps (a sharer that
    /// comes meanwhile need not ask, see [`Ticket::sharers_refused`]), and how many
    /// messages have come (a refusal that was answered before the last one is stale).
    sharers_refused: Mutex<(u64, Option<Instant>)>,
}

/// What a release message of a read-write lock that lets in only a writer starts with
/// (`writer <ms>`, see `lua/rw_release.lua`): waiting readers sleep on for `<ms>`.
const FOR_WRITERS: &[u8] = b"writer";

/// How a fair lock's message telling the next waiter's client when the hold just taken
/// runs out starts (`lease <server ms> <lease ms>`, `lua/fair_queue.lua`): no wait is
/// woken, their next attempt is due then.
const FAIR_LEASE: &[u8] = b"lease";

impl Room {
    /// Has the head waiter (or the next to become head) ask when `due` says (see
    /// [`Ticket::released`]).
    fn wake(&self, due: Due) {
        {
            let mut current = self.due.lock();
            *current = current.merge(due);
        }
        self.released.notify_one();
    }

    /// Wakes every waiter to try again, as after a release nobody may have heard: the
    /// head waiter, every waiter who shares the lock, and every named waiter.
    fn wake_everyone(&self) {
        self.wake(Due::Now { named: false });
        self.wake_sharers();
        self.named.lock().iter().for_each(|named| named.wake());
    }

    /// Wakes every waiter who shares the lock, to ask again.
    fn wake_sharers(&self) {
        let mut refused = self.sharers_refused.lock();
        *refused = (refused.0 + 1, None);
        drop(refused);
        self.sharers.notify_waiters();
    }
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
    /// of a queue it leaves to do, for a clean shutdown; `deadlock` checks long waits
    /// for deadlocks, unless it is `None`.
    pub(crate) fn start(
        (subscriber, ownership): (SubscriberClient, Ownership),
        redis: fred::clients::Client,
        sharded: bool,
        client: Uuid,
        chores: Arc<Chores>,
        (deadlock, holds): (Option<Detection>, Arc<Holds>),
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
            deadlock: deadlock.map(Arc::new),
            holds,
            local_waits: Mutex::default(),
            walks: Mutex::default(),
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

    /// Hands a release message on in `room`: to the waiters of the owner it names (a
    /// fair lock hands itself to one owner's wait), else to the head waiter.
    fn dispatch_in(&self, room: &Room, message: &fred::types::Value) {
        // A fair lock's message is "<owner id> <wait> <server ms>", or "lease <server
        // ms> <lease ms>" (see `lua/fair_queue.lua`); a read-write lock's may be
        // "writer <ms>".
        let text = message.as_bytes().unwrap_or_default();
        let mut parts = text.splitn(3, |&byte| byte == b' ');
        let owner = parts.next().unwrap_or_default();
        let wait = parts.next().and_then(parse_number);
        if owner == FAIR_LEASE {
            // When the hold just taken runs out: this client's waits are next.
            if let Some((server_ms, lease_ms)) = wait.zip(parts.next().and_then(parse_number)) {
                room.places.told(server_ms, lease_ms);
            }
            return;
        }
        let handed = Handed {
            wait,
            server_ms: parts.next().and_then(parse_number),
        };
        // Each wait of the owner checks whether the message names it.
        let mut named = false;
        for waiter in room.named.lock().iter().filter(|n| n.owner() == owner) {
            waiter.hand(handed);
            named = true;
        }
        if !named {
            let now = Instant::now();
            let step = room.step(now);
            room.wake(Due::of_message(text, self.client, now, step));
        }
        match wait.filter(|_| owner == FOR_WRITERS) {
            // A writer's mark keeps sharers out for `wait` ms more: they sleep on.
            Some(wait) => {
                let until = Instant::now() + Duration::from_millis(wait);
                let mut refused = room.sharers_refused.lock();
                *refused = (refused.0 + 1, Some(until));
                drop(refused);
                room.sharers.notify_waiters();
            }
            None => room.wake_sharers(),
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
                release_channel: channel(),
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
        Box::pin(self.subscribe(&room.release_channel, room)).await?;
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
            let never_subscribed = room.channel.try_lock().is_ok_and(|channel| !channel.sent);
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
        let chore = room.mark.lock().is_some().then(|| self.chores.begin());
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
            let mut state = room.channel.lock().await;
            if state.sent && *room.members.lock() == 0 {
                let channel = &room.release_channel;
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
    /// Waits for this waiter's turn to talk to Redis (FIFO among local waiters).
    pub(crate) async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.room.turn.lock().await
    }

    /// This waiter's turn, if nobody is ahead of it.
    pub(crate) fn try_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.room.turn.try_lock().ok()
    }

    /// Subscribes to the release channel unless it is subscribed on the subscriber's
    /// current connection; `attempted_at` is when the caller's last attempt was sent.
    ///
    /// # Errors
    /// Only a definite refusal ([`LockError::PermissionDenied`]). A subscription that
    /// failed in transit is [`Listening::Not`]: after a lost connection fred answers
    /// `SSUBSCRIBE` with an I/O error, or, while it restores its own subscriptions,
    /// with a reply meant for another command.
    pub(crate) async fn subscribe(&self, attempted_at: Instant) -> Result<Listening> {
        let mut state = self.room.channel.lock().await;
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

    /// Resolves when this waiter should ask again after the release messages heard
    /// (at once for one heard before): at once if a message named this client first,
    /// or nobody in particular; after a delay if it named this client as a backup, or
    /// named other clients only, unless a newer message says otherwise (see the module
    /// docs). Returns whether a message named this client first.
    ///
    /// # Cancel safety
    /// What is due stays with the room until a call returns it, so a waiter dropped
    /// here leaves it to the next head.
    pub(crate) async fn released(&self) -> bool {
        loop {
            let notified = self.room.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let at = {
                let mut due = self.room.due.lock();
                match *due {
                    Due::Now { named } => {
                        *due = Due::Idle;
                        return named;
                    }
                    Due::At(at) if at <= Instant::now() => {
                        *due = Due::Idle;
                        return false;
                    }
                    Due::At(at) => Some(at),
                    Due::Idle => None,
                }
            };
            match at {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = &mut notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Resolves at the next release message of the lock (or reconnection), for a waiter
    /// who shares the lock and so does not wait for its turn: every such waiter is woken
    /// by every message. Call it before the attempt whose refusal it waits after: a
    /// message that comes between the two is not missed.
    pub(crate) fn any_release(&self) -> tokio::sync::futures::Notified<'_> {
        self.room.sharers.notified()
    }

    /// Until when the sharers refused since the last release message that woke them
    /// sleep, if it is later than now: a sharer that comes meanwhile would be refused
    /// as well, and can sleep without asking (woken with them).
    /// Also the count of messages so far, to hand to
    /// [`sharer_refused`](Self::sharer_refused) after an attempt made now.
    pub(crate) fn sharers_refused(&self) -> (u64, Option<Instant>) {
        let (messages, until) = *self.room.sharers_refused.lock();
        (messages, until.filter(|until| *until > Instant::now()))
    }

    /// Records that a subscribed sharer was refused and sleeps until `until` at the
    /// latest (see [`sharers_refused`](Self::sharers_refused)), unless a release message
    /// came since the attempt (the `messages` count read before it): the refusal may
    /// be stale then.
    pub(crate) fn sharer_refused(&self, messages: u64, until: Instant) {
        let mut refused = self.room.sharers_refused.lock();
        if refused.0 == messages {
            refused.1 = Some(refused.1.map_or(until, |earlier| earlier.min(until)));
        }
    }

    /// Forgets the release messages heard so far: the head is about to ask, and its
    /// answer covers them.
    pub(crate) fn asking(&self) {
        *self.room.due.lock() = Due::Idle;
    }

    /// How many waiters of this client are in the room, this one included.
    pub(crate) fn waiters(&self) -> usize {
        *self.room.members.lock()
    }

    /// Records that a grant queued this client again for its other waiters.
    pub(crate) fn queued_again(&self) {
        self.room.queued.store(true, Ordering::Release);
    }

    /// Whether a grant queued this client again since the last call: the head then
    /// waits for its name without asking first.
    pub(crate) fn take_queued(&self) -> bool {
        self.room.queued.swap(false, Ordering::AcqRel)
    }

    /// The schedule of attempts shared by this client's named waiters (see
    /// [`Places`]).
    pub(crate) fn places(&self) -> &Places {
        &self.room.places
    }

    /// Has release messages that name `owner` wake the returned waiter (and no waiter
    /// of another owner), until it is dropped; `wait` is its wait's number.
    pub(crate) fn named(&self, owner: &str, wait: u64) -> NamedWaiter {
        NamedWaiter::register(&self.room, owner, wait)
    }

    /// Resolves once the client is shut down (at once if it is).
    pub(crate) async fn closed(&self) {
        let mut closed = self.waiting.closed.subscribe();
        // Fails only if the sender is gone, and this ticket keeps it.
        let _ = closed.wait_for(|closed| *closed).await;
    }
}

/// A number in a release message (a fair lock's wait or time, a writer's delay).
fn parse_number(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.waiting.leave(self.key, &self.room);
    }
}
