//! The exactly-once protocol: each acquire and release script runs at most once, and
//! a call whose reply was lost finds out from the owner's field whether it ran.
//!
//! `HINCRBY` is not idempotent, and fred writes a command again after a reconnect. So
//! acquire and release are sent at most once (see `scripts/mod.rs`); when one fails in
//! transit, the owner's count in Redis tells whether it ran (`held + 1` after an
//! acquire, `held - 1` after a release), and one that did not run is sent again, until
//! the connect timeout. The caller serialises one owner's calls on one lock (the
//! engine's per-hold operation lock), so `held` is exact. An error Redis replied with
//! means nothing was done ([`CallFailed`] says which it was).
//!
//! Fresh acquisitions that replicas must acknowledge go out with `WAIT` on a
//! connection of their own (see `replicas.rs`).

use std::time::Duration;

use fred::bytes_utils::Str;
use fred::clients::Client;
use fred::error::ErrorKind;
use fred::interfaces::EventInterface;
use fred::types::Value;
use tokio::time::Instant;

use crate::connection::{Ownership, close_if_opened};
use crate::error::{LockError, Result};
use crate::lease::renewal_period;
use crate::options::{MinReplicas, ResolvedOptions};
use crate::replicas::Acknowledging;
use crate::scripts::{
    Acquire, Asking, LockNames, Released, RenewalCall, Renewed, Scripts, Snapshot,
};

/// Whether an acquisition of `owner`, who holds it `held` times, must be acknowledged
/// by replicas (a fresh hold under `min_replicas`, see `replicas.rs`), and by how many.
/// Such an acquisition goes over the acknowledging connection.
pub(crate) fn acknowledged(options: &ResolvedOptions, held: u32) -> Option<MinReplicas> {
    options.min_replicas.filter(|_| held == 0)
}

/// The connection and scripts of one client, and the exactly-once calls made over them.
#[derive(Debug)]
pub(crate) struct Protocol {
    redis: Client,
    /// Whether `redis` is closed at shutdown (holdlock opened it) or the application's.
    ownership: Ownership,
    /// On a cluster, the client the scripts go over (holdlock's own, see
    /// [`scripting`](Self::scripting)).
    scripting: Option<Client>,
    scripts: Scripts,
    /// The connection for replica-acknowledged acquisitions.
    acknowledging: Acknowledging,
    /// How long a call whose reply was lost is resolved and retried.
    connect_timeout: Duration,
}

impl Protocol {
    /// The protocol over `redis` (connected; closed at shutdown if holdlock opened it)
    /// and, on a cluster, `scripting` (connected; closed at shutdown), publishing
    /// releases on shard channels if `sharded`.
    pub(crate) fn new(
        (redis, ownership): (Client, Ownership),
        scripting: Option<Client>,
        sharded: bool,
        connect_timeout: Duration,
    ) -> Self {
        Self {
            redis,
            ownership,
            scripting,
            scripts: Scripts::new(sharded, connect_timeout),
            acknowledging: Acknowledging::default(),
            connect_timeout,
        }
    }

    /// The command connection, for calls that are not scripts.
    pub(crate) fn redis(&self) -> &Client {
        &self.redis
    }

    /// Whether `owner` holds the lock `names` as Redis has it (its field, of its kind:
    /// see [`Kind::field`], or its permit's deadline): one read, retried as reads are.
    pub(crate) async fn holds_field(&self, names: &LockNames, owner: &str) -> Result<bool> {
        Ok(self.count_over(&self.redis, names, owner).await? > 0)
    }

    /// Which node serves each slot, as the scripts' client last learned it (nothing
    /// on a single server): how the batches are grouped.
    pub(crate) fn placement(&self) -> crate::scripts::Placement {
        crate::scripts::Placement::of(self.scripting())
    }

    /// The connection the scripts go over: on a cluster, a client of holdlock's own that
    /// follows no redirection (`MOVED` and `ASK` come back to `scripts::eval`, which
    /// sends the script again; see `connection::scripting_settings` for why); elsewhere
    /// the command connection.
    pub(crate) fn scripting(&self) -> &Client {
        self.scripting.as_ref().unwrap_or(&self.redis)
    }

    /// The connection of acquisitions that replicas acknowledge (see `replicas.rs`),
    /// opened beside the scripts' on first use.
    async fn acknowledging(&self) -> Result<&Client> {
        let timeout = self.connect_timeout;
        self.acknowledging.client(self.scripting(), timeout).await
    }

    /// The scripts, for calls that change no hold (an election's record).
    pub(crate) fn scripts(&self) -> &Scripts {
        &self.scripts
    }

    /// Extends the lease of `owner`'s hold on the lock `names`; whether it still held it.
    pub(crate) async fn renew(
        &self,
        names: &LockNames,
        owner: &str,
        lease_ms: u64,
    ) -> Result<bool> {
        let (redis, scripts) = (self.scripting(), &self.scripts);
        names.renew(scripts, redis, owner, lease_ms).await
    }

    /// Extends the leases of many holds in one call (`renew_many.lua`); on a cluster,
    /// the holds of one node (a hold its slot has left is answered
    /// [`Renewed::Elsewhere`], untouched). Says per hold what it found.
    pub(crate) async fn renew_many(&self, call: &RenewalCall) -> Result<Vec<Renewed>> {
        Box::pin(self.scripts.renew_many(self.scripting(), call)).await
    }

    /// Takes each of many free mutexes nobody queues for in one call, with the lease
    /// `lease_ms` (`acquire_many.lua`), sent at most once; on a cluster, every lock of
    /// `locks` must be one node's. Says per lock whether it was taken.
    pub(crate) async fn acquire_many(
        &self,
        lease_ms: u64,
        locks: &[(&LockNames, &str)],
    ) -> Result<Vec<bool>> {
        Box::pin(self.scripts.acquire_many(self.scripting(), lease_ms, locks)).await
    }

    /// Drops one hold each of many mutex holds in one call (`release_many.lua`), sent
    /// at most once; on a cluster, every hold of `holds` must be one node's.
    pub(crate) async fn release_many(&self, holds: &[(&LockNames, &Str)]) -> Result<Vec<Released>> {
        Box::pin(self.scripts.release_many(self.scripting(), holds)).await
    }

    /// Ends `owner`'s `wait` in the queue of the fair lock `names` (handing on a lock
    /// handed to that wait and not claimed).
    pub(crate) async fn leave_fair_queue(
        &self,
        names: &LockNames,
        owner: &str,
        wait: u64,
    ) -> Result<()> {
        Box::pin(
            self.scripts
                .fair_leave(self.scripting(), names, owner, wait),
        )
        .await
    }

    /// How many permits of the semaphore `names` are held now (`sem_available.lua`).
    pub(crate) async fn semaphore_held(&self, names: &LockNames) -> Result<u32> {
        Box::pin(self.scripts.sem_held(self.scripting(), names)).await
    }

    /// Reads a lock's owners, TTL and token (`inspect.lua`); `None` if it is free.
    pub(crate) async fn inspect(&self, names: &LockNames) -> Result<Option<Snapshot>> {
        self.scripts.inspect(self.scripting(), names).await
    }

    /// Deletes the lock at `key` whoever holds it; whether there was one.
    pub(crate) async fn force_unlock(&self, names: &LockNames, prefix: &str) -> Result<bool> {
        let force_unlock = self.scripts.force_unlock(self.scripting(), names, prefix);
        force_unlock.await
    }

    /// Reads or writes a fenced value (`fence.lua`): the value after the call, or
    /// `Err(newest)` if `token` is stale.
    pub(crate) async fn fence(
        &self,
        key: &str,
        token: u64,
        value: Option<Value>,
    ) -> Result<Result<Option<String>, u64>> {
        self.scripts
            .fence(self.scripting(), key, token, value)
            .await
    }

    /// Marks a period done if `owner` still holds the lock at `key`; whether it did.
    pub(crate) async fn complete_period(
        &self,
        key: &str,
        marker: &str,
        owner: &str,
        keep_ms: u64,
    ) -> Result<bool> {
        let scripts = &self.scripts;
        Box::pin(scripts.complete_period(self.scripting(), key, marker, owner, keep_ms)).await
    }

    /// Closes the connections holdlock opened (see [`close`](crate::connection::close)).
    pub(crate) async fn quit(&self) {
        self.acknowledging.quit().await;
        if let Some(scripting) = &self.scripting {
            crate::connection::close(scripting).await;
        }
        close_if_opened(&self.redis, self.ownership).await;
    }

    /// Sets the lease of a grant whose reply came late again, from now, so that the
    /// holder gets the whole lease it counts on. Returns when the renewal was sent, or
    /// `None` if the hold expired before the reply arrived. Fails if three renewals in a
    /// row also take longer than a third of the lease: the lease is too short for this
    /// connection.
    pub(crate) async fn confirm_late_grant(
        &self,
        names: &LockNames,
        owner: &str,
        options: &ResolvedOptions,
    ) -> Result<Option<Instant>> {
        let period = renewal_period(options.lease());
        for _ in 0..3 {
            let renewed_at = Instant::now();
            if !self.renew(names, owner, options.lease_ms).await? {
                return Ok(None);
            }
            if renewed_at.elapsed() <= period {
                return Ok(Some(renewed_at));
            }
        }
        Err(LockError::Redis(fred::error::Error::new(
            ErrorKind::Timeout,
            format!(
                "lock `{}`: redis took longer than a third of the {:?} lease to answer, three times in a row",
                names.name,
                options.lease()
            ),
        )))
    }

    /// `acquire.lua`, written at most once per try. When a reply is lost, the owner's
    /// field tells whether the script ran: `held` + 1 means it did.
    pub(crate) async fn acquire(
        &self,
        names: &LockNames,
        owner: &str,
        (options, asking): (&ResolvedOptions, &Asking),
        held: u32,
        keep_lease: bool,
    ) -> Result<Acquire, CallFailed> {
        if !names.kind.keeps_data() && options.data.is_some() {
            return Err(CallFailed::from(LockError::InvalidOption {
                option: "data",
                reason: "Redisson's layout keeps nothing but its holders in a lock's hash"
                    .to_owned(),
            }));
        }
        let give_up = Instant::now() + self.connect_timeout;
        let acknowledged = acknowledged(options, held);
        loop {
            let reply = match acknowledged {
                Some(min) => {
                    // Boxed: the rare call that waits for replicas would make every
                    // acquire future (and each move of it) larger by its size.
                    let options = (options, asking);
                    Box::pin(self.acquire_acknowledged(names, owner, options, min)).await
                }
                None if held > 0 && names.kind.reenters_apart() => {
                    let lease_ms = (!keep_lease).then_some(options.lease_ms);
                    let reenter =
                        self.scripts
                            .reenter(self.scripting(), &names.key, owner, lease_ms);
                    reenter.await.map_err(CallFailed::from)
                }
                None => {
                    let options = (options, asking);
                    let acquire = names.acquire(&self.scripts, self.scripting(), owner, options);
                    acquire.await.map_err(CallFailed::from)
                }
            };
            let error = match reply {
                Err(failed) if failed.error.outcome_unknown() => failed.error,
                done => return done,
            };
            tracing::debug!(lock = %names.name, %error, "acquire reply lost; checking whether it ran");
            let read = self.count_patiently(names, owner, acknowledged.is_some(), give_up);
            match read.await {
                Some(count) if count == held + 1 => {
                    if let Some(min) = acknowledged {
                        // It ran, but nobody counted the replicas that have it.
                        return Err(self.undo_unacknowledged(names, owner, 0, min).await);
                    }
                    // It ran. What follows is idempotent, and retried while in transit;
                    // a failure leaves the grant to be settled (undone) by the caller.
                    loop {
                        match self
                            .complete_lost_grant(names, owner, options, held, count)
                            .await
                        {
                            Err(error) if error.outcome_unknown() && Instant::now() < give_up => {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            done => return done.map_err(CallFailed::maybe_ran),
                        }
                    }
                }
                // It did not run: send it again.
                Some(_) if Instant::now() < give_up => {}
                _ => return Err(CallFailed::maybe_ran(error)),
            }
        }
    }

    /// The reply of an acquire that ran but whose reply was lost: `count` holds.
    async fn complete_lost_grant(
        &self,
        names: &LockNames,
        owner: &str,
        options: &ResolvedOptions,
        held: u32,
        count: u32,
    ) -> Result<Acquire> {
        if held == 0 {
            // A fresh hold's field may also be one this owner gave up as lost, its lease
            // about to run out, if the script did not run: set the lease from now, so
            // that Redis keeps the hold at least as long as the watchdog will assume.
            if !self.renew(names, owner, options.lease_ms).await? {
                return Ok(Acquire::Vanished);
            }
        }
        let token = if options.fenced && count == 1 {
            // Kept in the hold's hash, or in Redisson's layout its counter, which
            // nobody else can draw from while this hold lasts.
            let (command, key, field) = names.token_read();
            let read = self.scripts.read(self.scripting(), command, &key, field);
            let token: Option<u64> = Box::pin(read).await?.convert()?;
            token.unwrap_or(0)
        } else {
            0
        };
        Ok(Acquire::Granted { count, token })
    }

    /// `release.lua`, written at most once per try. When a reply is lost, the owner's
    /// field tells whether the script ran: `held` - 1 means it did.
    pub(crate) async fn release(
        &self,
        names: &LockNames,
        owner: &str,
        held: u32,
    ) -> Result<Option<u32>> {
        let give_up = Instant::now() + self.connect_timeout;
        loop {
            let (redis, scripts) = (self.scripting(), &self.scripts);
            let released = names.release(scripts, redis, owner, held).await;
            let error = match released {
                Err(error) if error.outcome_unknown() => error,
                done => return done,
            };
            tracing::debug!(lock = %names.name, %error, "release reply lost; checking whether it ran");
            match self.count_patiently(names, owner, false, give_up).await {
                Some(count) if count + 1 == held => return Ok(Some(count)),
                Some(count) if count != held => return Ok(None),
                // It did not run: send it again.
                Some(_) if Instant::now() < give_up => {}
                _ => return Err(error),
            }
        }
    }

    /// The owner's count after a script whose reply was lost, read until a read
    /// succeeds or `give_up` passes (`None`). Only a count actually read may decide
    /// that the script did not run and may be sent again: sending it again because
    /// the read failed would run it twice if the first one had run.
    async fn count_patiently(
        &self,
        names: &LockNames,
        owner: &str,
        acknowledged: bool,
        give_up: Instant,
    ) -> Option<u32> {
        loop {
            match self.count(names, owner, acknowledged).await {
                Ok(count) => return Some(count),
                Err(error) if Instant::now() < give_up => {
                    tracing::debug!(lock = %names.name, %error, "reading the count after a lost reply failed; reading again");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => return None,
            }
        }
    }

    /// The owner's hold count as Redis has it (0 if none), read over the connection the
    /// call being settled went over: the acknowledging one after an `acknowledged`
    /// acquisition, the scripts' otherwise. A connection runs its commands in order; a
    /// read on another one may overtake a script still waiting in the server (see
    /// [`Scripts::read`]).
    pub(crate) async fn count(
        &self,
        names: &LockNames,
        owner: &str,
        acknowledged: bool,
    ) -> Result<u32> {
        let client = match acknowledged {
            true => Box::pin(self.acknowledging()).await?,
            false => self.scripting(),
        };
        self.count_over(client, names, owner).await
    }

    /// The owner's hold count as Redis has it (0 if none), read over `client`.
    async fn count_over(&self, client: &Client, names: &LockNames, owner: &str) -> Result<u32> {
        let (command, key, member) = names.count_read(owner);
        let read = self.scripts.read(client, command, &key, Some(&member));
        let value = Box::pin(read).await?;
        names
            .hold_count(&value)
            .ok_or_else(|| LockError::Protocol(format!("hold count {value:?}")))
    }

    /// Runs `acquire.lua` and `WAIT` (see the module docs). A fresh hold that fewer
    /// than `min.replicas` replicas acknowledged is released, and the call fails with
    /// [`LockError::NotReplicated`]. Busy replies and re-entries are returned as they are.
    async fn acquire_acknowledged(
        &self,
        names: &LockNames,
        owner: &str,
        (options, asking): (&ResolvedOptions, &Asking),
        min: MinReplicas,
    ) -> Result<Acquire, CallFailed> {
        let client = self.acknowledging().await?;
        let reconnects = client.reconnect_rx();
        let reroutes = client.cluster_change_rx();
        let wait = (min.replicas, min.timeout_ms());
        let timeout = min.timeout + self.connect_timeout;
        let acquired = names.acquire(&self.scripts, client, owner, (options, asking));
        let acquired = acquired.await?;
        if !matches!(acquired, Acquire::Granted { count: 1, .. }) {
            return Ok(acquired);
        }
        // Behind the script on the same connection: a `WAIT` shared with the other
        // acquisitions answered there before it was sent (see `replicas.rs`).
        let acked = self.acknowledging.wait(client, &names.key, wait, timeout);
        let acked = Box::pin(acked).await;
        let same_connection = reconnects.is_empty() && reroutes.is_empty();
        let acked = match acked {
            Ok(acked) if same_connection => acked,
            Ok(_) => 0,
            Err(error) => {
                tracing::debug!(lock = %names.name, %error, "WAIT failed after a fresh acquisition");
                0
            }
        };
        if acked >= min.replicas {
            return Ok(acquired);
        }
        Err(self.undo_unacknowledged(names, owner, acked, min).await)
    }

    /// Releases a fresh hold (count 1) that too few replicas acknowledged, and returns
    /// the error to report: one that may have left the hold if the release failed.
    async fn undo_unacknowledged(
        &self,
        names: &LockNames,
        owner: &str,
        acked: u32,
        min: MinReplicas,
    ) -> CallFailed {
        let released = self.release(names, owner, 1).await;
        let error = LockError::NotReplicated {
            name: names.name.clone(),
            acked,
            wanted: min.replicas,
        };
        match released {
            Ok(_) => CallFailed::from(error),
            Err(failure) => {
                tracing::debug!(lock = %names.name, error = %failure, "could not release an unreplicated hold yet; settling it");
                CallFailed::maybe_ran(error)
            }
        }
    }
}

/// An exactly-once call that failed, and whether it may have left a hold in Redis.
pub(crate) struct CallFailed {
    pub(crate) error: LockError,
    pub(crate) maybe_ran: bool,
}

impl CallFailed {
    /// The script ran, or may have: its reply was lost, or what had to follow it (an
    /// undo, a read) failed.
    pub(crate) fn maybe_ran(error: LockError) -> Self {
        Self {
            error,
            maybe_ran: true,
        }
    }
}

impl From<LockError> for CallFailed {
    /// A failed call: it may have run only if the failure was in transit.
    fn from(error: LockError) -> Self {
        Self {
            maybe_ran: error.outcome_unknown(),
            error,
        }
    }
}
