//! [`Leadership`]: an elected candidate's hold of the election.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use fred::bytes_utils::Str;

use crate::engine::Engine;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::held::{Held, Sealed, held_methods};

use super::*;

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
    pub(super) term: Term,
    pub(super) info: LeaderInfo,
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

    /// The election's name.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// assert_eq!(leadership.name(), "scheduler");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.info.election
    }

    /// The leader's owner id, `<client-uuid>:<scope>` (each campaign is an owner of its
    /// own).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// assert!(leadership.owner().starts_with(&client.owner_id()[..36]));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.info.owner
    }

    /// Steps down: [`unlock`](Self::unlock) under the election's word.
    ///
    /// # Errors
    /// As [`unlock`](Self::unlock): [`LockError::NotHeld`] if the leadership was
    /// already lost.
    ///
    /// # Cancel safety
    /// As [`unlock`](Self::unlock): dropped before it finishes, the rest is done in the
    /// background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let leadership = client.election("scheduler").campaign("host-a").await?;
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resign(self) -> Result<()> {
        self.unlock().await
    }
}

held_methods!(
    Leadership,
    "client.election(\"scheduler\").campaign(\"host-a\").await?",
    unlock:
    /// A leadership steps down first: the leader's record is deleted and the change
    /// announced (if the record is still this leader's); then the election's lock is
    /// released, which hands it to the next candidate at once.
    /// [`resign`](Self::resign) is the same. If Redis cannot be reached, the
    /// leadership ends within its lease all the same.
);

impl Sealed for Leadership {}

impl Held for Leadership {
    fn holds(&self) -> &[LockGuard] {
        self.term.guard.as_slice()
    }

    /// The leadership's token, always: greater than every earlier leader's of the
    /// election (the leader's record keeps it, see [`LeaderInfo::fencing_token`]).
    fn fencing_token(&self) -> Option<u64> {
        Some(self.info.fencing_token)
    }

    fn unlock(self) -> impl Future<Output = Result<()>> + Send {
        let Leadership { mut term, .. } = self;
        async move {
            let Some(guard) = term.guard.as_ref() else {
                return Ok(());
            };
            let (engine, owner) = (Arc::clone(guard.engine()), guard.owner().to_owned());
            // Dropped meanwhile, the term still has the guard and resigns in the
            // background.
            let cleared = term.clear(&engine, &owner).await;
            let Some(guard) = term.guard.take() else {
                return cleared;
            };
            guard.unlock().await.and(cleared)
        }
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
pub(super) struct Term {
    /// The election's hash.
    pub(super) key: Str,
    /// Where its changes are announced.
    pub(super) channel: String,
    /// `None` once released.
    pub(super) guard: Option<LockGuard>,
}

impl Term {
    /// Deletes `owner`'s record and announces that it resigned, if the record is its.
    pub(super) async fn clear(&self, engine: &Engine, owner: &str) -> Result<()> {
        let (redis, scripts) = (engine.protocol().scripting(), engine.protocol().scripts());
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
