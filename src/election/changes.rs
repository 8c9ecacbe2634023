//! [`LeaderChanges`]: the stream of an election's leader changes, from pub/sub.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use fred::bytes_utils::Str;
use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, ClusterInterface, PubsubInterface};
use fred::types::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::engine::Engine;
use crate::error::{LockError, Result};
use crate::scripts::LeaderRecord;

use super::*;

/// A change of an election's leader, from [`Election::observe`].
///
/// # Examples
/// ```
/// use holdlock::LeaderChange;
///
/// assert!(LeaderChange::Vacant.leader().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderChange {
    /// This leader leads from now on; as the stream's first item, it led when the
    /// stream began.
    Elected(LeaderInfo),
    /// This leader stepped down ([`Leadership::resign`], or its [`Leadership`] was
    /// dropped): nobody leads until the next is elected.
    Resigned(LeaderInfo),
    /// This leader's term ended without a resignation the stream heard: it died or
    /// lost its hold (reported when its successor was elected), or it resigned while
    /// the stream was reconnecting.
    Lost(LeaderInfo),
    /// Nobody leads: only as the stream's first item.
    Vacant,
}

impl LeaderChange {
    /// The leader after this change: the elected one, or `None`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use futures::StreamExt;
    /// let mut changes = client.election("scheduler").observe().await?;
    /// if let Some(change) = changes.next().await {
    ///     println!("leader now: {:?}", change?.leader().map(|l| &l.data));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn leader(&self) -> Option<&LeaderInfo> {
        match self {
            LeaderChange::Elected(leader) => Some(leader),
            LeaderChange::Resigned(_) | LeaderChange::Lost(_) | LeaderChange::Vacant => None,
        }
    }
}

/// The changes of an election's leader, a [`Stream`](futures::Stream) from
/// [`Election::observe`]. Dropping it closes its subscriber connection.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use futures::StreamExt;
/// let changes = client.election("scheduler").observe().await?;
/// let firsts: Vec<_> = changes.take(2).collect().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaderChanges {
    pub(super) receiver: mpsc::UnboundedReceiver<Result<LeaderChange>>,
}

impl futures::Stream for LeaderChanges {
    type Item = Result<LeaderChange>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}

/// An observer's subscriber connection and channel.
pub(super) struct Listener {
    pub(super) subscriber: SubscriberClient,
    pub(super) channel: String,
    /// Shard channels (`SSUBSCRIBE`), as the scripts announce with `SPUBLISH`.
    pub(super) sharded: bool,
}

impl Listener {
    /// Subscribes the channel (again: the server ignores a repeat).
    pub(super) async fn listen(&self) -> Result<()> {
        let channel = self.channel.as_str();
        let subscribed = if self.sharded {
            Box::pin(self.subscriber.ssubscribe(channel)).await
        } else {
            Box::pin(self.subscriber.subscribe(channel)).await
        };
        subscribed.map_err(LockError::from)
    }

    /// Whether the subscription may have been on `server`, which just (re)connected:
    /// any server, except on a cluster, where only the node that serves the channel's
    /// slot has it (as far as the slot map says).
    pub(super) fn listens_on(&self, server: &fred::types::config::Server) -> bool {
        if !self.subscriber.is_clustered() {
            return true;
        }
        let slot = fred::util::redis_keyslot(self.channel.as_bytes());
        self.subscriber
            .cached_cluster_state()
            .and_then(|state| state.get_server(slot).cloned())
            .is_none_or(|node| node == *server)
    }

    pub(super) async fn close(&self) {
        crate::connection::close(&self.subscriber).await;
    }
}

/// The task behind a [`LeaderChanges`] stream.
pub(super) struct Watch {
    pub(super) engine: Arc<Engine>,
    /// The election's hash.
    pub(super) key: Str,
    pub(super) listener: Listener,
    pub(super) tracker: Tracker,
    pub(super) sender: mpsc::UnboundedSender<Result<LeaderChange>>,
}

impl Watch {
    /// Hands on the changes until the stream is dropped or the client shut down.
    pub(super) async fn run(
        mut self,
        mut messages: tokio::sync::broadcast::Receiver<fred::types::Message>,
        mut reconnects: tokio::sync::broadcast::Receiver<fred::types::config::Server>,
    ) {
        // A waiting room that is never subscribed, only for the shutdown signal.
        let room = fred::bytes_utils::Str::from([&*self.key, ":observed"].concat());
        let engine = Arc::clone(&self.engine);
        let ticket = engine
            .waiting()
            .join(&room, || crate::keys::release_channel(&room));
        let stream = self.sender.clone();
        loop {
            let resync = tokio::select! {
                // Messages first: those that came before a reconnection are reported
                // as they were announced, not read back as their outcome.
                biased;
                () = self.sender.closed() => break,
                () = ticket.closed() => {
                    let _ = self.sender.send(Err(LockError::Shutdown));
                    break;
                }
                message = messages.recv() => match message {
                    Ok(message) => {
                        if *message.channel == *self.listener.channel {
                            let changes = match Announcement::parse(&message.value) {
                                Some(heard) => self.tracker.heard(heard),
                                None => Vec::new(),
                            };
                            self.send(changes);
                        }
                        false
                    }
                    // Messages were dropped: read the leader again.
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => break,
                },
                reconnect = reconnects.recv() => match reconnect {
                    // A new connection has no subscriptions.
                    Ok(server) => self.listener.listens_on(&server),
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => break,
                },
            };
            if resync {
                tokio::select! {
                    () = stream.closed() => break,
                    () = ticket.closed() => {
                        let _ = stream.send(Err(LockError::Shutdown));
                        break;
                    }
                    () = self.resync() => {}
                }
            }
        }
        drop(ticket);
        self.listener.close().await;
    }

    /// Subscribes again and reads the leader, reporting what changed meanwhile;
    /// retried (after a growing pause) until both succeed.
    pub(super) async fn resync(&mut self) {
        let mut pause = RESYNC_RETRY;
        loop {
            let read = async {
                self.listener.listen().await?;
                read_leader(&self.engine, &self.key).await
            };
            match read.await {
                Ok((now_us, record)) => {
                    let leader = record.map(|record| self.tracker.info_of(record));
                    let changes = self.tracker.reread(now_us, leader);
                    self.send(changes);
                    return;
                }
                Err(error) => {
                    tracing::debug!(election = %self.tracker.election, %error, "observing: could not read the leader again; will retry");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RESYNC_MAX);
                }
            }
        }
    }

    pub(super) fn send(&self, changes: Vec<LeaderChange>) {
        for change in changes {
            let _ = self.sender.send(Ok(change));
        }
    }
}

/// What a leader change's message says (see `lua/election_elect.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Announcement {
    pub(super) resigned: bool,
    /// When it was announced: the server's clock, in microseconds.
    pub(super) at_us: u64,
    pub(super) record: LeaderRecord,
}

impl Announcement {
    /// Reads `<elected|resigned> <token> <since> <at> <owner> <data>`.
    pub(super) fn parse(message: &Value) -> Option<Self> {
        let text = message.as_str()?;
        let mut parts = text.splitn(6, ' ');
        let resigned = match parts.next()? {
            "elected" => false,
            "resigned" => true,
            _ => return None,
        };
        let token = parts.next()?.parse().ok()?;
        let since_us = parts.next()?.parse().ok()?;
        let at_us = parts.next()?.parse().ok()?;
        let owner = parts.next()?.to_owned();
        let data = parts.next()?.to_owned();
        Some(Self {
            resigned,
            at_us,
            record: LeaderRecord {
                owner,
                data,
                since_us,
                token,
                pttl_ms: None,
            },
        })
    }
}

/// What an observer knows of the leader, and the changes each message or read makes of
/// it. Leaders are told apart by their fencing tokens, which only grow.
#[derive(Debug)]
pub(super) struct Tracker {
    pub(super) election: String,
    pub(super) current: Option<LeaderInfo>,
    /// The greatest token of a leader reported elected (or reported at all).
    pub(super) newest: u64,
    /// The server's clock at the last read of the leader: messages announced before
    /// it are in the read already.
    pub(super) read_at_us: u64,
}

impl Tracker {
    /// The tracker after the first read (at `now_us`, finding `leader`), with the
    /// stream's first item.
    pub(super) fn start(
        election: String,
        now_us: u64,
        leader: Option<LeaderInfo>,
    ) -> (Self, LeaderChange) {
        let first = match &leader {
            Some(leader) => LeaderChange::Elected(leader.clone()),
            None => LeaderChange::Vacant,
        };
        let tracker = Self {
            election,
            newest: leader.as_ref().map_or(0, |leader| leader.fencing_token),
            current: leader,
            read_at_us: now_us,
        };
        (tracker, first)
    }

    pub(super) fn info_of(&self, record: LeaderRecord) -> LeaderInfo {
        LeaderInfo {
            election: self.election.clone(),
            owner: record.owner,
            data: record.data,
            since: since_of(record.since_us),
            fencing_token: record.token,
        }
    }

    /// The changes `heard` makes.
    pub(super) fn heard(&mut self, heard: Announcement) -> Vec<LeaderChange> {
        if heard.at_us <= self.read_at_us {
            return Vec::new();
        }
        let token = heard.record.token;
        let info = self.info_of(heard.record);
        let mut changes = Vec::new();
        if !heard.resigned {
            if token <= self.newest {
                return changes;
            }
            changes.extend(self.current.take().map(LeaderChange::Lost));
            self.newest = token;
            self.current = Some(info.clone());
            changes.push(LeaderChange::Elected(info));
        } else if self
            .current
            .as_ref()
            .is_some_and(|current| current.fencing_token == token)
        {
            changes.extend(self.current.take().map(LeaderChange::Resigned));
        } else if token > self.newest {
            // Its election went unheard (messages were dropped): both, in order.
            changes.extend(self.current.take().map(LeaderChange::Lost));
            self.newest = token;
            changes.push(LeaderChange::Elected(info.clone()));
            changes.push(LeaderChange::Resigned(info));
        }
        changes
    }

    /// The changes a read of the leader (at `now_us`, finding `leader`) makes, after
    /// messages may have gone unheard.
    pub(super) fn reread(&mut self, now_us: u64, leader: Option<LeaderInfo>) -> Vec<LeaderChange> {
        self.read_at_us = self.read_at_us.max(now_us);
        let same = match (&self.current, &leader) {
            (Some(current), Some(leader)) => current.fencing_token == leader.fencing_token,
            (None, None) => true,
            _ => false,
        };
        if same {
            return Vec::new();
        }
        let mut changes: Vec<LeaderChange> = self
            .current
            .take()
            .map(LeaderChange::Lost)
            .into_iter()
            .collect();
        if let Some(leader) = leader {
            self.newest = self.newest.max(leader.fencing_token);
            self.current = Some(leader.clone());
            changes.push(LeaderChange::Elected(leader));
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn message(text: &str) -> Announcement {
        Announcement::parse(&Value::from(text)).unwrap()
    }

    pub(super) fn tracker(leader: Option<(&str, u64)>) -> Tracker {
        let leader = leader.map(|(owner, token)| LeaderInfo {
            election: "e".into(),
            owner: owner.into(),
            data: String::new(),
            since: since_of(token),
            fencing_token: token,
        });
        Tracker::start("e".into(), 100, leader).0
    }

    pub(super) fn owners(changes: &[LeaderChange]) -> Vec<String> {
        changes
            .iter()
            .map(|change| match change {
                LeaderChange::Elected(l) => format!("elected {}", l.owner),
                LeaderChange::Resigned(l) => format!("resigned {}", l.owner),
                LeaderChange::Lost(l) => format!("lost {}", l.owner),
                LeaderChange::Vacant => "vacant".into(),
            })
            .collect()
    }

    #[test]
    pub(super) fn messages_are_read_with_spaces_in_the_data() {
        let heard = message("elected 7 5 6 c:scope-1 host a: pid 1");
        assert!(!heard.resigned);
        assert_eq!(heard.at_us, 6);
        assert_eq!(heard.record.token, 7);
        assert_eq!(heard.record.since_us, 5);
        assert_eq!(heard.record.owner, "c:scope-1");
        assert_eq!(heard.record.data, "host a: pid 1");
        assert_eq!(message("resigned 7 5 8 c:scope-1 ").record.data, "");
        assert!(Announcement::parse(&Value::from("elected 7 5")).is_none());
        assert!(Announcement::parse(&Value::from("hello 1 2 3 a b")).is_none());
    }

    #[test]
    pub(super) fn every_term_ends_before_the_next_begins() {
        let mut tracker = tracker(Some(("a", 50)));
        // Announced before the read: already in it.
        assert!(tracker.heard(message("elected 50 50 50 a ")).is_empty());
        assert!(tracker.heard(message("resigned 40 40 90 z ")).is_empty());
        let changes = tracker.heard(message("resigned 50 50 150 a "));
        assert_eq!(owners(&changes), ["resigned a"]);
        let changes = tracker.heard(message("elected 200 200 200 b "));
        assert_eq!(owners(&changes), ["elected b"]);
        // b died; c is elected: b's end comes first.
        let changes = tracker.heard(message("elected 300 300 300 c "));
        assert_eq!(owners(&changes), ["lost b", "elected c"]);
        // A repeat changes nothing.
        assert!(tracker.heard(message("elected 300 300 301 c ")).is_empty());
        // An unheard election, then its resignation.
        let changes = tracker.heard(message("resigned 400 400 450 d "));
        assert_eq!(owners(&changes), ["lost c", "elected d", "resigned d"]);
    }

    #[test]
    pub(super) fn a_read_after_a_reconnection_reports_what_changed() {
        let mut tracker = tracker(None);
        assert!(tracker.reread(150, None).is_empty());
        let read = tracker.info_of(message("elected 200 200 200 b ").record);
        assert_eq!(
            owners(&tracker.reread(250, Some(read.clone()))),
            ["elected b"]
        );
        assert!(tracker.reread(260, Some(read)).is_empty());
        // The message of b's election arrives late: already reported.
        assert!(tracker.heard(message("elected 200 200 200 b ")).is_empty());
        assert_eq!(owners(&tracker.reread(300, None)), ["lost b"]);
    }

    #[test]
    pub(super) fn data_is_at_most_a_kibibyte() {
        assert!(check_data(&"x".repeat(MAX_DATA_LEN)).is_ok());
        assert!(matches!(
            check_data(&"é".repeat(MAX_DATA_LEN / 2 + 1)),
            Err(LockError::InvalidOption { option: "data", .. })
        ));
    }
}
