//! Leader election: [`Election`], [`Leadership`], [`LeaderInfo`] and the stream of
//! [`LeaderChange`]s, built on the fair lock.
//!
//! An election `N` is a fair lock of its own (hash `P{N}:election`, never the fair lock
//! `P{N}:fair` of [`LockClient::fair_lock`]): candidates queue for it in the order their
//! campaigns began, and the one that holds it leads. Each campaign is an owner of its
//! own (an [`owner_scope`]), so a second campaign of one task queues like any other
//! instead of re-entering the first. Once elected, `lua/election_elect.lua` writes the
//! leader's record (owner id, data, since when, fencing token) into the same hash and
//! announces it on the channel `P{N}:election:leader`; the record goes with the hold
//! (the release deletes the hash, a dead leader's lease expires it), so it can never
//! outlive it. Resigning deletes the record and announces that, then releases the lock,
//! which hands it to the next candidate. See `docs/design.md`, "Leader election".

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, ClusterInterface, EventInterface, PubsubInterface};
use fred::types::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::client::{Forever, LockClient};
use crate::engine::Engine;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::held::{Held, Sealed};
use crate::keys::{election_names, leader_channel};
use crate::observe;
use crate::options::{LockOptions, MAX_DATA_LEN};
use crate::owner::owner_scope;
use crate::scripts::LeaderRecord;

/// How soon an observer whose subscription or leader read failed tries again, at first
/// (doubling up to [`RESYNC_MAX`]).
const RESYNC_RETRY: Duration = Duration::from_millis(100);
const RESYNC_MAX: Duration = Duration::from_secs(2);

impl LockClient {
    /// A handle to the election `name`: candidates [campaign](Election::campaign) to
    /// lead it, one at a time, in the order their campaigns began; anyone may ask who
    /// [leads](Election::leader) or [observe](Election::observe) the changes. Nothing
    /// is checked or sent until a call.
    ///
    /// The election `name` has keys of its own (`<prefix>{name}:election`, ...): it
    /// never meets the lock, fair lock, read-write lock or semaphore of the same name.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let election = client.election("scheduler");
    /// let leadership = election.campaign("host-a pid 4242").await?; // waits until elected
    /// tokio::select! {
    ///     () = leadership.lost() => eprintln!("no longer the leader"),
    ///     () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
    /// }
    /// leadership.resign().await?; // the next candidate leads at once
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl Into<String>) -> Election {
        Election {
            client: self.clone(),
            name: name.into(),
        }
    }
}

/// An election of a [`LockClient`] (see [`LockClient::election`]). Cheap to clone.
#[derive(Clone)]
pub struct Election {
    client: LockClient,
    name: String,
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Election {
    /// The election's name.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::LockClient) {
    /// assert_eq!(client.election("scheduler").name(), "scheduler");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs for leader with `data` (what the others are told about this candidate,
    /// e.g. its address): waits until this candidate is elected, then records it as
    /// the leader, announces it to the [observers](Self::observe) and returns its
    /// [`Leadership`]. Candidates of every client are elected in the order their
    /// campaigns began (the election is a fair lock); a leader that dies is succeeded
    /// within its lease.
    ///
    /// Each campaign is a candidate of its own: a second campaign of the same task
    /// waits for the first's leadership to end (it does not re-enter it).
    ///
    /// The leadership is a hold of the client's lease, renewed by the watchdog, with a
    /// fencing token ([`Leadership::fencing_token`]) greater than every earlier
    /// leader's: present it to the resources the leader writes to.
    ///
    /// # Errors
    /// [`LockError::InvalidName`]; [`LockError::InvalidOption`] (option `data`) for
    /// data longer than 1 KiB; [`LockError::Lost`] if the hold was lost before the
    /// leader could be recorded; [`LockError::WrongType`], [`LockError::Redis`],
    /// [`LockError::PermissionDenied`], [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting, the candidate leaves the queue and nothing is
    /// held; dropped once elected, the leadership is resigned in the background (the
    /// record is deleted and the change announced if it was made, and the lock
    /// released).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("10.0.0.7:8080").await?;
    /// assert_eq!(leadership.info().data, "10.0.0.7:8080");
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self, data: impl Into<String>) -> Result<Leadership> {
        let data = data.into();
        check_data(&data)?;
        let engine = self.client.engine();
        engine.check_running()?;
        let names = election_names(&engine.config().prefix, &self.name)?;
        let key = names.key.clone();
        let options = LockOptions::fenced()
            .wait_forever()
            .resolve(engine.config())?;
        let span = observe::lock_span("campaign", &self.name);
        let queued = self.client.queue_at(names, options, Forever);
        let guard = match observe::observed(span, false, owner_scope(queued)).await? {
            Ok(guard) => guard,
            Err(never) => match never {},
        };
        // From here a drop (a cancelled campaign, or a failed record) resigns.
        let term = Term {
            channel: leader_channel(&key),
            key,
            guard: Some(guard),
        };
        let Some(guard) = term.guard.as_ref() else {
            return Err(LockError::Lost {
                name: self.name.clone(),
            });
        };
        let owner = guard.owner().to_owned();
        let (redis, scripts) = (engine.protocol().redis(), engine.protocol().scripts());
        let recorded = scripts.elect(redis, &term.key, &term.channel, &owner, &data);
        let Some((since_us, token)) = recorded.await? else {
            return Err(LockError::Lost {
                name: self.name.clone(),
            });
        };
        let info = LeaderInfo {
            election: self.name.clone(),
            owner,
            data,
            since: since_of(since_us),
            fencing_token: token,
        };
        Ok(Leadership { term, info })
    }

    /// The current leader, if one leads: its data and since when. A leader counts only
    /// while it holds the election's lock (checked in the same script as the record is
    /// read), so a leader that died is never reported once its lease ran out. Between
    /// a leader's end and its successor's record (one round trip after the hand-off),
    /// nobody leads.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::WrongType`], [`LockError::Redis`],
    /// [`LockError::PermissionDenied`], [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// match client.election("scheduler").leader().await? {
    ///     Some(leader) => println!("{} leads since {:?}", leader.data, leader.since),
    ///     None => println!("nobody leads"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<LeaderInfo>> {
        let engine = self.client.engine();
        engine.check_running()?;
        let key = election_names(&engine.config().prefix, &self.name)?.key;
        let (_, record) = read_leader(engine, &key).await?;
        Ok(record.map(|record| self.info_of(record)))
    }

    /// Watches the leader: a stream of [`LeaderChange`]s, first the leader as it is
    /// now ([`LeaderChange::Elected`], or [`LeaderChange::Vacant`] if nobody leads),
    /// then every change in the order it happened, as it is announced (pub/sub: no
    /// polling). Each leader's term ends with one [`LeaderChange::Resigned`] or
    /// [`LeaderChange::Lost`] before its successor's [`LeaderChange::Elected`].
    ///
    /// A leader that dies (or loses its hold) announces nothing: it is reported
    /// [`Lost`](LeaderChange::Lost) when its successor is elected, within a lease of
    /// its death if another candidate waits. With no other candidate, its end is not
    /// seen until the next election (or until the stream reconnects and reads the
    /// leader again): [`leader`](Self::leader) knows sooner.
    ///
    /// Each stream opens a subscriber connection of its own, closed when the stream is
    /// dropped (on a cluster, to the node that serves the election's slot: shard
    /// channels from Redis 7.0). After a reconnection the stream subscribes again and
    /// reads the leader, reporting whatever changed meanwhile as one change (a leader
    /// that resigned unseen is reported [`Lost`](LeaderChange::Lost)). The stream ends
    /// with [`LockError::Shutdown`] when the client is shut down.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::Redis`],
    /// [`LockError::ConnectTimeout`], [`LockError::PermissionDenied`] (the ACL refuses
    /// the channel), [`LockError::WrongType`], [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it returns, its connection is closed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use futures::StreamExt;
    /// use holdlock::LeaderChange;
    ///
    /// let mut changes = client.election("scheduler").observe().await?;
    /// while let Some(change) = changes.next().await {
    ///     match change? {
    ///         LeaderChange::Elected(leader) => println!("{} leads", leader.data),
    ///         LeaderChange::Resigned(leader) => println!("{} resigned", leader.data),
    ///         LeaderChange::Lost(leader) => println!("{} is gone", leader.data),
    ///         LeaderChange::Vacant => println!("nobody leads"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn observe(&self) -> Result<LeaderChanges> {
        let engine = self.client.engine();
        engine.check_running()?;
        let key = election_names(&engine.config().prefix, &self.name)?.key;
        let channel = leader_channel(&key);
        let redis = engine.protocol().redis();
        let listener = Listener {
            subscriber: SubscriberClient::new(
                redis.client_config(),
                Some(redis.perf_config()),
                Some(redis.connection_config().clone()),
                redis.client_reconnect_policy(),
            ),
            channel,
            sharded: engine.protocol().scripts().sharded(),
        };
        // Taken before connecting, so that no message or reconnection goes unseen.
        let messages = listener.subscriber.message_rx();
        let mut reconnects = listener.subscriber.reconnect_rx();
        let timeout = engine.config().connect_timeout;
        let started = async {
            listener.subscriber.init().await?;
            // The first connections, made before the subscription: nothing to restore.
            while reconnects.try_recv().is_ok() {}
            listener.listen().await?;
            read_leader(engine, &key).await
        };
        let (now_us, record) = match tokio::time::timeout(timeout, started).await {
            Ok(Ok(read)) => read,
            failed => {
                listener.close().await;
                return Err(match failed {
                    Ok(Err(error)) => error,
                    _ => LockError::ConnectTimeout { timeout },
                });
            }
        };
        let leader = record.map(|record| self.info_of(record));
        let (tracker, first) = Tracker::start(self.name.clone(), now_us, leader);
        let (sender, receiver) = mpsc::unbounded_channel();
        let _ = sender.send(Ok(first));
        let watch = Watch {
            engine: Arc::clone(engine),
            key,
            listener,
            tracker,
            sender,
        };
        tokio::spawn(watch.run(messages, reconnects));
        Ok(LeaderChanges { receiver })
    }

    /// The leader's info from its record.
    fn info_of(&self, record: LeaderRecord) -> LeaderInfo {
        LeaderInfo {
            election: self.name.clone(),
            owner: record.owner,
            data: record.data,
            since: since_of(record.since_us),
            fencing_token: record.token,
        }
    }
}

/// Refuses data longer than [`MAX_DATA_LEN`].
fn check_data(data: &str) -> Result<()> {
    if data.len() > MAX_DATA_LEN {
        return Err(LockError::InvalidOption {
            option: "data",
            reason: format!(
                "{} bytes is longer than the maximum of {MAX_DATA_LEN} bytes",
                data.len()
            ),
        });
    }
    Ok(())
}

/// The instant `since_us` microseconds after the Unix epoch.
fn since_of(since_us: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(since_us)
}

/// The server's clock and the leader of the election whose hash is `key`.
async fn read_leader(engine: &Engine, key: &str) -> Result<(u64, Option<LeaderRecord>)> {
    let protocol = engine.protocol();
    protocol.scripts().leader(protocol.redis(), key).await
}

/// Who leads an election, and since when (from [`Election::leader`],
/// [`Leadership::info`] and [`LeaderChange`]).
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// if let Some(leader) = client.election("scheduler").leader().await? {
///     println!(
///         "{} ({}) leads with token {}",
///         leader.data, leader.owner, leader.fencing_token
///     );
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The election's name.
    pub election: String,
    /// The leader's owner id, `<client-uuid>:<scope>` (each campaign is an owner of
    /// its own).
    pub owner: String,
    /// The data the leader campaigned with.
    pub data: String,
    /// When it was elected, by the Redis server's clock. Serialized as `since_us`,
    /// microseconds since the Unix epoch.
    #[cfg_attr(feature = "serde", serde(rename = "since_us", with = "since_micros"))]
    pub since: SystemTime,
    /// Its fencing token: greater than every earlier leader's (see
    /// [`LockGuard::fencing_token`]).
    pub fencing_token: u64,
}

/// [`LeaderInfo::since`] as microseconds since the Unix epoch (feature `serde`).
#[cfg(feature = "serde")]
mod since_micros {
    use std::time::{Duration, SystemTime};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        since: &SystemTime,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let micros = since
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
            });
        serializer.serialize_u64(micros)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SystemTime, D::Error> {
        let micros = u64::deserialize(deserializer)?;
        Ok(SystemTime::UNIX_EPOCH + Duration::from_micros(micros))
    }
}

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
    receiver: mpsc::UnboundedReceiver<Result<LeaderChange>>,
}

impl futures::Stream for LeaderChanges {
    type Item = Result<LeaderChange>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}

/// The leadership of a candidate that was elected (see [`Election::campaign`]): a
/// hold of the election's fair lock, renewed by the watchdog. [`resign`](Self::resign)
/// ends it and hands the election to the next candidate; dropping it resigns in the
/// background.
///
/// Watch [`lost`](Self::lost): a leader whose hold is lost (a starved runtime, a
/// partition longer than the lease) must stop acting as the leader, for another may
/// be elected. [`at_risk`](Self::at_risk) warns before.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient, work: impl std::future::Future<Output = ()>) -> holdlock::Result<()> {
/// let leadership = client.election("scheduler").campaign("host-a").await?;
/// tokio::select! {
///     () = work => leadership.resign().await?,
///     () = leadership.lost() => eprintln!("deposed: stop acting as the leader"),
/// }
/// # Ok(()) }
/// ```
#[must_use = "if unused the leadership is resigned immediately"]
#[clippy::has_significant_drop]
pub struct Leadership {
    term: Term,
    info: LeaderInfo,
}

impl Leadership {
    /// Who leads (this candidate): its owner id, data, since when, fencing token.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// println!("leading since {:?}", leadership.info().since);
    /// # Ok(()) }
    /// ```
    pub fn info(&self) -> &LeaderInfo {
        &self.info
    }

    /// The leadership's fencing token: greater than every earlier leader's of the
    /// election. Present it to the resources the leader writes to (see
    /// [`fence`](crate::fence)).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// let token: u64 = leadership.fencing_token();
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.info.fencing_token
    }

    /// Whether the leadership's hold is known to be lost (see [`LockGuard::is_lost`]).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// assert!(!leadership.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        Held::is_lost(self)
    }

    /// Resolves when the leadership's hold is lost (see [`LockGuard::lost`]): stop
    /// acting as the leader.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// leadership.lost().await;
    /// eprintln!("no longer the leader");
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        Held::lost(self).await;
    }

    /// Whether the leadership has been warned at risk (see [`LockGuard::is_at_risk`]).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// assert!(!leadership.is_at_risk());
    /// # Ok(()) }
    /// ```
    pub fn is_at_risk(&self) -> bool {
        Held::is_at_risk(self)
    }

    /// Resolves when the leadership is at risk of being lost (see
    /// [`LockGuard::at_risk`]): renewals land late. Stop taking new work and
    /// checkpoint; [`lost`](Self::lost) may follow.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// leadership.at_risk().await;
    /// eprintln!("renewals are late: checkpoint now");
    /// # Ok(()) }
    /// ```
    pub async fn at_risk(&self) {
        Held::at_risk(self).await;
    }

    /// Steps down: deletes the leader's record and announces the change (if the record
    /// is still this leader's), then releases the election's lock, which hands it to
    /// the next candidate at once.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] if the leadership was already lost; [`LockError::Redis`]
    /// (the leadership then ends within its lease all the same),
    /// [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it finishes, the rest is done in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resign(self) -> Result<()> {
        let Leadership { mut term, .. } = self;
        let Some(guard) = term.guard.as_ref() else {
            return Ok(());
        };
        let (engine, owner) = (Arc::clone(guard.engine()), guard.owner().to_owned());
        // Dropped meanwhile, the term still has the guard and resigns in the background.
        let cleared = term.clear(&engine, &owner).await;
        let Some(guard) = term.guard.take() else {
            return cleared;
        };
        guard.unlock().await.and(cleared)
    }
}

impl Sealed for Leadership {}

impl Held for Leadership {
    fn holds(&self) -> &[LockGuard] {
        self.term.guard.as_slice()
    }

    fn unlock(self) -> impl Future<Output = Result<()>> + Send {
        self.resign()
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.info.election)
            .field("owner", &self.info.owner)
            .field("fencing_token", &self.info.fencing_token)
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// A leader's hold of the election's lock, resigned in the background when dropped
/// with it.
struct Term {
    /// The election's hash.
    key: String,
    /// Where its changes are announced.
    channel: String,
    /// `None` once released.
    guard: Option<LockGuard>,
}

impl Term {
    /// Deletes `owner`'s record and announces that it resigned, if the record is its.
    async fn clear(&self, engine: &Engine, owner: &str) -> Result<()> {
        let (redis, scripts) = (engine.protocol().redis(), engine.protocol().scripts());
        scripts
            .resign(redis, &self.key, &self.channel, owner)
            .await
            .map(drop)
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let engine = Arc::clone(guard.engine());
        // Without a runtime, or once the client is shut down, the guard's own drop does
        // what can be done (the record goes with the hold).
        if engine.check_running().is_err() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (key, channel) = (
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.channel),
        );
        drop(runtime.spawn(async move {
            let (name, owner) = (guard.name().to_owned(), guard.owner().to_owned());
            let term = Term {
                key,
                channel,
                guard: None,
            };
            if let Err(error) = term.clear(&engine, &owner).await {
                tracing::debug!(election = %name, %error, "announcing a resignation failed");
            }
            if let Err(error) = guard.unlock().await {
                tracing::debug!(election = %name, %error, "resigning in the background failed");
            }
        }));
    }
}

/// An observer's subscriber connection and channel.
struct Listener {
    subscriber: SubscriberClient,
    channel: String,
    /// Shard channels (`SSUBSCRIBE`), as the scripts announce with `SPUBLISH`.
    sharded: bool,
}

impl Listener {
    /// Subscribes the channel (again: the server ignores a repeat).
    async fn listen(&self) -> Result<()> {
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
    fn listens_on(&self, server: &fred::types::config::Server) -> bool {
        if !self.subscriber.is_clustered() {
            return true;
        }
        let slot = fred::util::redis_keyslot(self.channel.as_bytes());
        self.subscriber
            .cached_cluster_state()
            .and_then(|state| state.get_server(slot).cloned())
            .is_none_or(|node| node == *server)
    }

    async fn close(&self) {
        crate::connection::close(&self.subscriber).await;
    }
}

/// The task behind a [`LeaderChanges`] stream.
struct Watch {
    engine: Arc<Engine>,
    /// The election's hash.
    key: String,
    listener: Listener,
    tracker: Tracker,
    sender: mpsc::UnboundedSender<Result<LeaderChange>>,
}

impl Watch {
    /// Hands on the changes until the stream is dropped or the client shut down.
    async fn run(
        mut self,
        mut messages: tokio::sync::broadcast::Receiver<fred::types::Message>,
        mut reconnects: tokio::sync::broadcast::Receiver<fred::types::config::Server>,
    ) {
        // A waiting room that is never subscribed, only for the shutdown signal.
        let room = [self.key.as_str(), ":observed"].concat();
        let engine = Arc::clone(&self.engine);
        let ticket = engine.waiting().join(&room);
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
    async fn resync(&mut self) {
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

    fn send(&self, changes: Vec<LeaderChange>) {
        for change in changes {
            let _ = self.sender.send(Ok(change));
        }
    }
}

/// What a leader change's message says (see `lua/election_elect.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Announcement {
    resigned: bool,
    /// When it was announced: the server's clock, in microseconds.
    at_us: u64,
    record: LeaderRecord,
}

impl Announcement {
    /// Reads `<elected|resigned> <token> <since> <at> <owner> <data>`.
    fn parse(message: &Value) -> Option<Self> {
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
struct Tracker {
    election: String,
    current: Option<LeaderInfo>,
    /// The greatest token of a leader reported elected (or reported at all).
    newest: u64,
    /// The server's clock at the last read of the leader: messages announced before
    /// it are in the read already.
    read_at_us: u64,
}

impl Tracker {
    /// The tracker after the first read (at `now_us`, finding `leader`), with the
    /// stream's first item.
    fn start(election: String, now_us: u64, leader: Option<LeaderInfo>) -> (Self, LeaderChange) {
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

    fn info_of(&self, record: LeaderRecord) -> LeaderInfo {
        LeaderInfo {
            election: self.election.clone(),
            owner: record.owner,
            data: record.data,
            since: since_of(record.since_us),
            fencing_token: record.token,
        }
    }

    /// The changes `heard` makes.
    fn heard(&mut self, heard: Announcement) -> Vec<LeaderChange> {
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
    fn reread(&mut self, now_us: u64, leader: Option<LeaderInfo>) -> Vec<LeaderChange> {
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

    fn message(text: &str) -> Announcement {
        Announcement::parse(&Value::from(text)).unwrap()
    }

    fn tracker(leader: Option<(&str, u64)>) -> Tracker {
        let leader = leader.map(|(owner, token)| LeaderInfo {
            election: "e".into(),
            owner: owner.into(),
            data: String::new(),
            since: since_of(token),
            fencing_token: token,
        });
        Tracker::start("e".into(), 100, leader).0
    }

    fn owners(changes: &[LeaderChange]) -> Vec<String> {
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
    fn messages_are_read_with_spaces_in_the_data() {
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
    fn every_term_ends_before_the_next_begins() {
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
    fn a_read_after_a_reconnection_reports_what_changed() {
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
    fn data_is_at_most_a_kibibyte() {
        assert!(check_data(&"x".repeat(MAX_DATA_LEN)).is_ok());
        assert!(matches!(
            check_data(&"é".repeat(MAX_DATA_LEN / 2 + 1)),
            Err(LockError::InvalidOption { option: "data", .. })
        ));
    }
}
