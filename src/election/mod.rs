//! Leader election: [`Election`], [`Leadership`], [`LeaderInfo`] and the stream of
//! [`LeaderChange`]s, built on the fair lock.
//!
//! An election `N` is a fair lock of its own (hash `P{N}:election`, never the fair lock
//! `P{N}:fair` of [`LockClient::fair_lock`]): candidates queue for it in the order their
//! campaigns began, and the one that holds it leads. Each campaign is an owner of its
//! own (an [`owner_scope`]), so a second campaign of one task queues like any other
//! instead of re-entering the first. Once elected, `lua/election_elect.lua` writes the
//! leader's record (owner id, data, since when, fencing token) into the same hash and
//! announces it on the channel `P{N}:election:leader` (`…:leader:db<n>` in a database
//! `n` > 0, as pub/sub spans a server's databases); the record goes with the hold
//! (the release deletes the hash, a dead leader's lease expires it), so it can never
//! outlive it. Resigning deletes the record and announces that, then releases the lock,
//! which hands it to the next candidate. See `docs/design.md`, "Leader election".

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fred::clients::SubscriberClient;
use fred::interfaces::{ClientLike, EventInterface};
use tokio::sync::mpsc;

use crate::acquire::in_prelude;
use crate::client::LockClient;
use crate::engine::{Engine, Lock};
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::keys::leader_channel;
use crate::observe;
use crate::options::{LockOptions, MAX_DATA_LEN};
use crate::owner::owner_scope;
use crate::scripts::LeaderRecord;
use crate::scripts::election_names;
use crate::waiting::Forever;

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
        let options = LockOptions::fenced()
            .wait_forever()
            .resolve(engine.config())?;
        // A take step of its own (the fair lock's, at the election's names), run in the
        // front door's prelude.
        let names = Arc::new(election_names(&engine.config().prefix, &self.name)?);
        let key = names.key.clone();
        let step = async {
            let taken = engine.take(Lock::At(names), options, Forever).await?;
            Ok(taken.map(LockGuard::new))
        };
        let span = observe::lock_span("campaign", &self.name);
        let queued = in_prelude(&self.client, Some(span), false, step);
        let guard = match owner_scope(queued).await? {
            Ok(guard) => guard,
            Err(never) => match never {},
        };
        // From here a drop (a cancelled campaign, or a failed record) resigns.
        let term = Term {
            channel: announcements(engine, &key),
            key,
            guard: Some(guard),
        };
        let Some(guard) = term.guard.as_ref() else {
            return Err(LockError::Lost {
                name: self.name.clone(),
            });
        };
        let owner = guard.owner().to_owned();
        let (redis, scripts) = (engine.protocol().scripting(), engine.protocol().scripts());
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
        let channel = announcements(engine, &key);
        let redis = engine.protocol().redis();
        let timeout = engine.config().connect_timeout;
        let mut connection = redis.connection_config().clone();
        crate::connection::own_settings(&mut connection, timeout);
        let listener = Listener {
            subscriber: SubscriberClient::new(
                redis.client_config(),
                Some(redis.perf_config()),
                Some(connection),
                redis.client_reconnect_policy(),
            ),
            channel,
            sharded: engine.protocol().scripts().sharded(),
        };
        // Taken before connecting, so that no message or reconnection goes unseen.
        let messages = listener.subscriber.message_rx();
        let mut reconnects = listener.subscriber.reconnect_rx();
        let give_up = tokio::time::Instant::now() + timeout;
        let started = async {
            let subscriber = &listener.subscriber;
            let connecting = crate::connection::connect(subscriber, give_up).await;
            connecting.map_err(|error| {
                let hosts = crate::connection::hosts(subscriber);
                LockError::of_connecting(error, hosts)
            })?;
            // The first connections, made before the subscription: nothing to restore.
            while reconnects.try_recv().is_ok() {}
            listener.listen().await?;
            read_leader(engine, &key).await
        };
        let (now_us, record) = match tokio::time::timeout_at(give_up, started).await {
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

/// The channel the leader changes of the election whose hash is `key` go out on, in
/// the database of `engine`'s connection (see [`leader_channel`]).
fn announcements(engine: &Engine, key: &str) -> String {
    leader_channel(key, engine.protocol().redis().client_config().database)
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
    protocol.scripts().leader(protocol.scripting(), key).await
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
    /// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)).
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

mod changes;
mod leadership;

pub use changes::{LeaderChange, LeaderChanges};
use changes::{Listener, Tracker, Watch};
pub use leadership::Leadership;
use leadership::Term;
