//! Release channels as shard channels, and following them when their slot moves.
//!
//! From Redis 7.0 on, `release.lua` announces a release with `SPUBLISH` and waiters
//! `SSUBSCRIBE`. On a cluster a shard message stays within the shard that owns the
//! lock's slot (a plain `PUBLISH` is copied to every node of the cluster), and the
//! subscription goes to the node that owns the slot. On a single server (or behind
//! Sentinel) shard channels behave like plain ones; they are used there too because
//! fred 10 reports a refused `SSUBSCRIBE` (an ACL without the channel) but swallows a
//! refused `SUBSCRIBE`, which would leave a waiter to sleep until the holder's lease
//! ends. Servers before 7.0 get plain `PUBLISH`/`SUBSCRIBE`.
//!
//! When a slot moves to another node (resharding, failover), the old node drops its
//! shard subscriptions with an unsolicited `SUNSUBSCRIBE`, which fred 10 swallows. So
//! on a cluster, while any shard channel is subscribed, the client re-reads the slot
//! map every [`SLOT_CHECK`]; a channel whose slot now has another owner is subscribed
//! again (on the new owner) and its waiters are woken to try once, in case a release
//! went by while nobody listened. A waiter also wakes when the holder's lease
//! would end, so even without this a missed release costs at most one lease.

use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, ClusterInterface, PubsubInterface};
use fred::types::config::Server;
use fred::types::{ClusterHash, CustomCommand, Value};
use fred::util::redis_keyslot;
use tokio::time::MissedTickBehavior;

use super::{Room, Waiting};

/// Subscribes `subscriber` to the plain channel `channel`, returning once the server
/// has subscribed it. fred 10 expects no reply to `SUBSCRIBE` (its confirmation comes
/// out of band) and resolves the call as soon as the command is handed to the
/// connection, possibly before it was even written; a `PING` on the same connection
/// (the node of the client's id on a cluster, where fred sends plain subscriptions)
/// answers only after Redis ran the `SUBSCRIBE` before it. Any answer will do: an ACL
/// without `ping` refuses it, after the subscription. (A `SUBSCRIBE` the ACL refuses
/// is not reported reliably: fred takes its error as the answer to whichever command
/// waits next on the connection, so the waiter sleeps until the holder's lease ends,
/// as before; the documented rule grants the channels.)
pub(super) async fn subscribe_plain(
    subscriber: &SubscriberClient,
    channel: &str,
) -> fred::prelude::FredResult<()> {
    subscriber.subscribe(channel).await?;
    let slot = redis_keyslot(subscriber.id().as_bytes());
    let ping = CustomCommand::new_static("PING", ClusterHash::Custom(slot), false);
    match subscriber
        .custom::<Value, _>(ping, Vec::<Value>::new())
        .await
    {
        Err(error) if !error.details().contains("'ping'") => Err(error),
        _ => Ok(()),
    }
}

/// How often the slot map is re-read while shard channels are subscribed.
pub(super) const SLOT_CHECK: Duration = Duration::from_secs(1);

impl Waiting {
    /// Subscribes `channel` (a shard channel on a cluster) for `room`.
    pub(super) async fn subscribe(
        &self,
        channel: &str,
        room: &Room,
    ) -> fred::prelude::FredResult<()> {
        if !self.sharded {
            return subscribe_plain(&self.subscriber, channel).await;
        }
        Box::pin(self.subscriber.ssubscribe(channel)).await?;
        *room.channel.node.lock() = self.node_of(channel);
        Ok(())
    }

    /// Unsubscribes `channel` for `room`.
    pub(super) async fn unsubscribe(
        &self,
        channel: &str,
        room: &Room,
    ) -> fred::prelude::FredResult<()> {
        if !self.sharded {
            return self.subscriber.unsubscribe(channel).await;
        }
        *room.channel.node.lock() = None;
        self.subscriber.sunsubscribe(channel).await
    }

    /// The node that owns `channel`'s slot, as the subscriber last read the slot map.
    fn node_of(&self, channel: &str) -> Option<Server> {
        let slot = redis_keyslot(channel.as_bytes());
        self.subscriber
            .cached_cluster_state()
            .and_then(|state| state.get_server(slot).cloned())
    }

    /// Re-reads the slot map and subscribes again every shard channel whose slot has
    /// moved since it was subscribed, waking its head waiter.
    async fn follow_moved_channels(&self) {
        let rooms: Vec<Arc<Room>> = self
            .rooms
            .lock()
            .values()
            .filter(|room| room.channel.node.lock().is_some())
            .map(Arc::clone)
            .collect();
        if rooms.is_empty() {
            return;
        }
        if let Err(error) = Box::pin(self.subscriber.sync_cluster()).await {
            tracing::debug!(%error, "could not read the cluster's slot map");
            return;
        }
        for room in rooms {
            let mut state = room.channel.state.lock().await;
            let channel = &room.channel.name;
            let moved =
                state.confirmed.is_some() && *room.channel.node.lock() != self.node_of(channel);
            if !moved {
                continue;
            }
            tracing::debug!(%channel, "the lock's slot moved; subscribing on its new node");
            if let Err(error) = self.subscribe_room(&room, &mut state).await {
                // Its head subscribes again when it wakes.
                tracing::debug!(%error, %channel, "could not subscribe again");
            }
            drop(state);
            room.wake_everyone();
        }
    }
}

/// Checks the slot map every [`SLOT_CHECK`] until the waiting rooms are gone.
pub(super) fn follow_slots(waiting: Weak<Waiting>) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(SLOT_CHECK);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(waiting) = waiting.upgrade() else {
                return;
            };
            waiting.follow_moved_channels().await;
        }
    });
}
