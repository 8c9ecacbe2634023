//! [`Semaphore`] and [`Permit`]: at most N holders at once across every client, each
//! permit renewed by the watchdog and expiring on its own lease when its holder dies.
//!
//! A semaphore is a kind of lock on the shared engine: its scripts
//! (`lua/sem_acquire.lua`, `sem_release.lua`, `lease_renew.lua`) keep one hash field
//! per permit and each permit's deadline in a sorted set, and every permit is an
//! ordinary hold of the engine (exactly-once take and give back, watchdog, lost
//! signal, waiting by pub/sub, cancel safety), whose owner id is the permit's own.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::client::LockClient;
use crate::engine::Lock;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::held::{Held, Sealed, held_methods};
use crate::options::{LockOptions, ResolvedOptions};
use crate::scripts::{Kind, LockNames, semaphore_names};
use crate::waiting::GiveUp;

impl LockClient {
    /// A handle to the semaphore `name` with `permits` permits: at most that many
    /// holders at once, across every client. Nothing is checked or sent until a call.
    ///
    /// Every caller naming one semaphore must give the same number of permits: while
    /// any permit is held, asking with another number fails with
    /// [`LockError::InvalidOption`] (once none is held, the next caller's number
    /// counts). The semaphore `name` and the mutex `name` are different locks (the
    /// semaphore's key is `<prefix>{name}:sem`; in [`Compat::Redisson`](crate::Compat),
    /// Redisson's `RPermitExpirableSemaphore` layout: the key `<prefix><name>` and the
    /// permits' deadlines in `{<prefix><name>}:timeout`).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let exports = client.semaphore("exports", 5);
    /// let permit = exports.acquire().await?; // one of 5
    /// // ... run one export ...
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore {
            client: self.clone(),
            name: name.into(),
            permits,
        }
    }
}

/// A semaphore of a [`LockClient`]: a name and a number of permits (see
/// [`LockClient::semaphore`]). Cheap to clone.
///
/// Permits are not reentrant: a second `acquire` by the same task takes a second
/// permit (and waits for one if none is free, even if the task holds one already).
#[derive(Clone)]
pub struct Semaphore {
    client: LockClient,
    name: String,
    permits: u32,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    /// The semaphore's name.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::LockClient) {
    /// assert_eq!(client.semaphore("exports", 5).name(), "exports");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many permits it has.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::LockClient) {
    /// assert_eq!(client.semaphore("exports", 5).permits(), 5);
    /// # }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// How many permits are free now: the number of permits less those held (a
    /// permit whose holder died counts as free once its lease has run out).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let free: u32 = client.semaphore("exports", 5).available().await?;
    /// # Ok(()) }
    /// ```
    pub async fn available(&self) -> Result<u32> {
        let names = self.names()?;
        let engine = self.client.engine();
        engine.check_running()?;
        let held = engine.protocol().semaphore_held(&names).await?;
        Ok(self.permits.saturating_sub(held))
    }

    /// The client the semaphore belongs to.
    pub(crate) fn client(&self) -> &LockClient {
        &self.client
    }

    /// `options` checked for a permit of this semaphore.
    pub(crate) fn resolve(&self, options: &LockOptions) -> Result<ResolvedOptions> {
        options.resolve_for(self.client.engine().config(), self.kind())
    }

    /// The semaphore's keys, checked.
    fn names(&self) -> Result<LockNames> {
        if self.permits == 0 {
            return Err(LockError::InvalidOption {
                option: "permits",
                reason: "a semaphore needs at least one permit".into(),
            });
        }
        let prefix = &self.client.engine().config().prefix;
        semaphore_names(prefix, &self.name, self.permits, self.kind())
    }

    /// The semaphore's descriptor, in its client's layout.
    fn kind(&self) -> Kind {
        Kind::semaphore(self.client.compat())
    }

    /// Takes a permit of its own (a fresh owner id) until `give_up` (the semaphore's
    /// step of the front door, `acquire.rs`).
    pub(crate) async fn take<D: GiveUp>(
        &self,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<Permit, D::GaveUp>> {
        let names = Arc::new(self.names()?);
        let taken = self.client.engine().take(Lock::At(names), options, give_up);
        Ok(taken.await?.map(|claim| Permit {
            guard: LockGuard::new(claim),
        }))
    }
}

/// One permit of a [`Semaphore`]. Dropping it gives the permit back in the background;
/// [`release`](Self::release) gives it back and reports errors.
///
/// The watchdog renews the permit while it is held (unless it was taken with a fixed
/// lease); if its holder dies, the permit frees itself within one lease, while other
/// permits of the semaphore are renewed on their own.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let permit = client.semaphore("exports", 5).acquire().await?;
/// tokio::select! {
///     () = permit.lost() => eprintln!("lost the permit: stop"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
/// }
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the permit is given back immediately"]
#[clippy::has_significant_drop]
pub struct Permit {
    guard: LockGuard,
}

impl Permit {
    /// The semaphore's name.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// assert_eq!(client.semaphore("exports", 5).acquire().await?.name(), "exports");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// The permit's id: the owner id of the task that took it (see
    /// [`LockClient::owner_id`]) and `:p<n>`, unique to this permit.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("exports", 5).acquire().await?;
    /// assert!(permit.id().starts_with(&client.owner_id()));
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        self.guard.owner()
    }

    /// The owner id of the task that took the permit, `<client-uuid>:<task>` (see
    /// [`LockClient::owner_id`]): its [`id`](Self::id) without the `:p<n>` that makes
    /// the id unique to this permit.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("exports", 5).acquire().await?;
    /// assert_eq!(permit.owner(), client.owner_id());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        let id = self.id();
        id.rsplit_once(":p").map_or(id, |(owner, _)| owner)
    }

    /// Gives the permit back: [`unlock`](Self::unlock) under the semaphore's word.
    ///
    /// # Errors
    /// As [`unlock`](Self::unlock): [`LockError::NotHeld`] if the permit was lost.
    ///
    /// # Cancel safety
    /// As [`unlock`](Self::unlock): dropping the future still gives the permit back.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// client.semaphore("exports", 5).acquire().await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        self.unlock().await
    }
}

held_methods!(
    Permit,
    "client.semaphore(\"exports\", 5).acquire().await?",
    unlock:
    /// A permit is given back to its semaphore ([`release`](Self::release) is the same).
);

impl Sealed for Permit {}

impl Held for Permit {
    fn holds(&self) -> &[LockGuard] {
        std::slice::from_ref(&self.guard)
    }

    fn unlock(self) -> impl Future<Output = Result<()>> + Send {
        Held::unlock(self.guard)
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("name", &self.name())
            .field("id", &self.id())
            .field("lost", &self.is_lost())
            .finish()
    }
}
