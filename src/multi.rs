//! [`MultiGuard`]: several locks taken together, all or nothing, without deadlock.
//!
//! A multi-lock is the mutex taken once per name, in one global order: the names sorted
//! by their keys (the same order on every client, whatever order each caller gives).
//! Two callers whose name sets overlap therefore wait for their common names in the
//! same order, so neither can hold a name the other waits for while waiting for one the
//! other holds: no cycle, no deadlock. Every member is an ordinary hold (reentrant,
//! renewed by the watchdog, waited for by pub/sub, released exactly once), so a
//! multi-lock keeps every guarantee of the mutex; this module only orders the names
//! and gives back what it took when it cannot take everything.

use std::time::Duration;

use tokio::time::Instant;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::held::{Held, Sealed, held_methods};
use crate::options::LockOptions;
use crate::waiting::within_budget;

impl LockClient {
    /// Takes every lock in `names`, waiting as long as it takes: all of them, or (on an
    /// error) none. Names the owner already holds are re-entered.
    ///
    /// The names are taken one by one in a global order (sorted by key), whatever order
    /// they are given in, so callers whose sets overlap never deadlock each other. Names
    /// the owner already held *before* the call are outside that order: holding one
    /// while waiting for another can deadlock like any nested locks do, so take related
    /// names in one call.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an empty list, a bad name or a name given twice
    /// (nothing is taken); otherwise as [`lock`](Self::lock). A failure releases the
    /// members taken so far before it returns.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future releases the members taken so far in the
    /// background (see [`LockGuard`]'s drop) and cancels the member being taken (see
    /// [`lock`](Self::lock)); nothing is left held.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all(["account:1", "account:2"]).await?;
    /// // ... move money between the two accounts ...
    /// both.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_all<I>(&self, names: I) -> Result<MultiGuard>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let taken = self.lock_all_with(names, LockOptions::new().wait_forever());
        match taken.await? {
            Some(guards) => Ok(guards),
            // Waiting forever never gives up.
            None => Err(LockError::Protocol(
                "a lock_all() without a deadline gave up".into(),
            )),
        }
    }

    /// Takes every lock in `names` if each is free (or held by this owner) now, without
    /// waiting; `None`, with nothing held, if any of them is not.
    ///
    /// # Errors
    /// As [`lock_all`](Self::lock_all).
    ///
    /// # Cancel safety
    /// As [`lock_all`](Self::lock_all).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// if let Some(both) = client.try_lock_all(["account:1", "account:2"]).await? {
    ///     both.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_all<I>(&self, names: I) -> Result<Option<MultiGuard>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.lock_all_with(names, LockOptions::new().wait(Duration::ZERO))
            .await
    }

    /// Takes every lock of `names` as [`lock_all`](Self::lock_all) does, waiting at most
    /// `wait` in all; `None` (and nothing held) if they could not all be had in time.
    ///
    /// # Errors
    /// As [`lock_all`](Self::lock_all).
    ///
    /// # Cancel safety
    /// As [`lock_all`](Self::lock_all).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let wait = std::time::Duration::from_secs(1);
    /// if let Some(both) = client.lock_all_timeout(["account:1", "account:2"], wait).await? {
    ///     both.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lock_all_timeout<I>(&self, names: I, wait: Duration) -> Result<Option<MultiGuard>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.lock_all_with(names, LockOptions::new().wait(wait))
            .await
    }

    /// Takes every lock in `names` with per-call [`LockOptions`], for every member: the
    /// wait bounds the whole call (`None` if the set could not be taken within it, with
    /// nothing held), and the lease and fencing apply to each member.
    ///
    /// # Errors
    /// As [`lock_all`](Self::lock_all), and [`LockError::InvalidOption`] for bad options.
    ///
    /// # Cancel safety
    /// As [`lock_all`](Self::lock_all).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// let options = holdlock::LockOptions::fenced().wait(Duration::from_secs(1));
    /// if let Some(both) = client.lock_all_with(["account:1", "account:2"], options).await? {
    ///     let token = both.fencing_token("account:1");
    ///     both.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lock_all_with<I>(
        &self,
        names: I,
        options: LockOptions,
    ) -> Result<Option<MultiGuard>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let names = self.lock_order(names)?;
        let resolved = options.resolve(self.engine().config())?;
        match resolved.deadline()? {
            Some(deadline) => {
                let call = self.take_all(&names, &options, Some(deadline));
                within_budget(resolved.answer_by(deadline), call).await
            }
            None => self.take_all(&names, &options, None).await,
        }
    }

    /// Takes every lock of `names` (in lock order) with `options`, giving up at
    /// `deadline`.
    async fn take_all(
        &self,
        names: &[String],
        options: &LockOptions,
        deadline: Option<Instant>,
    ) -> Result<Option<MultiGuard>> {
        let mut taken = Taken(Vec::with_capacity(names.len()));
        loop {
            for name in names {
                let member = match deadline {
                    // Whatever is left of the wait; a single try once it is spent.
                    Some(deadline) => options
                        .clone()
                        .wait(deadline.saturating_duration_since(Instant::now())),
                    None => options.clone(),
                };
                match self.lock_with(name, member).await {
                    Ok(Some(guard)) => taken.0.push(guard),
                    Ok(None) => {
                        taken.give_back().await;
                        return Ok(None);
                    }
                    Err(error) => {
                        taken.give_back().await;
                        return Err(error);
                    }
                }
            }
            // A member taken early may have been lost while a later one was waited
            // for (its lease ran out in a pause, a failover lost it): never hand out a
            // set with a member that is not held. Start over, within the wait.
            if !taken.0.iter().any(LockGuard::is_lost) {
                return Ok(Some(MultiGuard {
                    guards: std::mem::take(&mut taken.0),
                }));
            }
            tracing::debug!(names = ?names, "a member was lost while the others were taken; taking them again");
            taken.give_back().await;
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Ok(None);
            }
        }
    }

    /// `names` in the global lock order, checked: not empty, each usable, none twice.
    fn lock_order<I>(&self, names: I) -> Result<Vec<String>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut ordered = Vec::new();
        for name in names {
            let name = name.as_ref();
            self.engine().config().check_name(name)?;
            ordered.push(name.to_owned());
        }
        if ordered.is_empty() {
            return Err(LockError::InvalidName {
                name: String::new(),
                reason: "no names were given",
            });
        }
        // Every key is the client's prefix and the name (in braces in holdlock's
        // layout): ordering the names orders the keys.
        ordered.sort_unstable();
        if let Some(twice) = ordered.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(LockError::InvalidName {
                name: twice[0].clone(),
                reason: "the name is given twice; a multi-lock takes each name once",
            });
        }
        Ok(ordered)
    }
}

/// The members a multi-lock has taken so far: released in the background if the call
/// is dropped, and released before the call returns if it fails.
struct Taken(Vec<LockGuard>);

impl Taken {
    /// Releases every member taken, waiting for the releases (errors are left to the
    /// background retry that a failed release starts).
    async fn give_back(&mut self) {
        for guard in self.0.drain(..).rev() {
            let _ = guard.unlock().await;
        }
    }
}

/// Every lock of a [`LockClient::lock_all`] call, held by one owner. Dropping it
/// releases every member in the background; [`unlock`](Self::unlock) releases them
/// and reports errors.
///
/// Each member is an ordinary hold: nested `lock()` calls of the same owner re-enter
/// it, the watchdog renews it, and it can be lost on its own (see
/// [`is_lost`](Self::is_lost)).
///
/// It has the methods every guard has (`is_lost`, `lost`, `is_at_risk`, `at_risk`,
/// `renewal_margin`, `extend`, `unlock`), over all its members. Having several names,
/// it has [`names`](Self::names) where the other guards have `name()`, and the
/// per-member accessors take the member's name: [`fencing_token`](Self::fencing_token),
/// and [`guard`](Self::guard) for a member's `owner()` and `hold_count()`.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let both = client.lock_all(["account:2", "account:1"]).await?;
/// assert_eq!(both.names().collect::<Vec<_>>(), ["account:1", "account:2"]);
/// let inner = client.lock("account:1").await?; // a re-entry
/// inner.unlock().await?;
/// both.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the locks are released immediately"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct MultiGuard {
    /// In lock order (sorted by name).
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// The names held, in lock order (sorted).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all(["b", "a"]).await?;
    /// assert_eq!(both.names().collect::<Vec<_>>(), ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.guards.iter().map(LockGuard::name)
    }

    /// The guard of the member `name`, if it is one.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all(["a", "b"]).await?;
    /// assert_eq!(both.guard("a").map(|g| g.hold_count()), Some(1));
    /// # Ok(()) }
    /// ```
    pub fn guard(&self, name: &str) -> Option<&LockGuard> {
        // Sorted by name (see `lock_order`).
        let index = self
            .guards
            .binary_search_by(|guard| guard.name().cmp(name))
            .ok()?;
        self.guards.get(index)
    }

    /// The fencing token of the member `name`, if it was taken with fencing (see
    /// [`LockGuard::fencing_token`]).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let options = holdlock::LockOptions::fenced();
    /// let both = client.lock_all_with(["a", "b"], options).await?.expect("waited");
    /// assert!(both.fencing_token("a").is_some());
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self, name: &str) -> Option<u64> {
        self.guard(name)?.fencing_token()
    }

    /// The members' guards, in lock order, to release them one at a time.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let mut guards = client.lock_all(["a", "b"]).await?.into_guards();
    /// guards.pop().expect("b").unlock().await?; // b released, a still held
    /// # Ok(()) }
    /// ```
    pub fn into_guards(mut self) -> Vec<LockGuard> {
        std::mem::take(&mut self.guards)
    }
}

impl Sealed for MultiGuard {}

impl Held for MultiGuard {
    fn holds(&self) -> &[LockGuard] {
        &self.guards
    }

    async fn unlock(mut self) -> Result<()> {
        let mut first_error = None;
        while let Some(guard) = self.guards.pop() {
            if let Err(error) = guard.unlock().await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

held_methods!(
    MultiGuard,
    "client.lock_all([\"a\", \"b\"]).await?",
    unlock:
    /// A multi-lock's members are released one by one, the last one taken first.
);
