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

use std::future::Future;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::held::{Held, Sealed, held_methods};
use crate::options::ResolvedOptions;
use crate::waiting::GiveUp;

/// Takes every lock of `names` (in lock order) with `options`, until `give_up`: each
/// member with `member` (the mutex's step of the front door, in its own span), every
/// member with the whole call's deadline, and a member asked after the deadline with a
/// single try. What giving up yields, with nothing held, if the set could not be had
/// in time (the multi-lock's step of the front door, `acquire.rs`).
pub(crate) async fn take_all<'n, D, F, Fut>(
    names: &'n [String],
    options: ResolvedOptions,
    give_up: D,
    member: F,
) -> Result<Result<MultiGuard, D::GaveUp>>
where
    D: GiveUp,
    F: Fn(&'n str, ResolvedOptions, D) -> Fut,
    Fut: Future<Output = Result<Result<LockGuard, D::GaveUp>>>,
{
    let mut taken = Taken(Vec::with_capacity(names.len()));
    loop {
        for name in names {
            let mut options = options.clone();
            if give_up.passed().is_some() {
                // Whatever is left of the wait; a single try once it is spent.
                options.wait = Some(Duration::ZERO);
            }
            match member(name, options, give_up).await {
                Ok(Ok(guard)) => taken.0.push(guard),
                Ok(Err(gave_up)) => {
                    taken.give_back().await;
                    return Ok(Err(gave_up));
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
            return Ok(Ok(MultiGuard {
                guards: std::mem::take(&mut taken.0),
            }));
        }
        tracing::debug!(names = ?names, "a member was lost while the others were taken; taking them again");
        taken.give_back().await;
        if let Some(gave_up) = give_up.passed() {
            return Ok(Err(gave_up));
        }
    }
}

/// `names` in the global lock order, checked for `client`: not empty, each usable,
/// none twice.
pub(crate) fn lock_order<I>(client: &LockClient, names: I) -> Result<Vec<String>>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut ordered = Vec::new();
    for name in names {
        let name = name.as_ref();
        client.engine().config().check_name(name)?;
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
/// `fencing_token`, `renewal_margin`, `extend`, `unlock`), over all its members:
/// [`fencing_token`](Self::fencing_token) is `None` for two names or more, as no one
/// token fences them all. Having several names, it has [`names`](Self::names) where
/// the other guards have `name()`, and the per-member accessors take the member's
/// name: [`token_of`](Self::token_of) for a member's fencing token, and
/// [`guard`](Self::guard) for a member's `owner()` and `hold_count()`.
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

    /// The fencing token of the member `name`, if it is one and was taken with fencing
    /// (see [`LockGuard::fencing_token`]): the token to present to the resource that
    /// member guards.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let options = holdlock::LockOptions::fenced();
    /// let both = client.lock_all(["a", "b"]).options(options).await?.expect("waited");
    /// assert!(both.token_of("a").is_some());
    /// assert_eq!(both.fencing_token(), None); // two names: no one token
    /// # Ok(()) }
    /// ```
    pub fn token_of(&self, name: &str) -> Option<u64> {
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
