//! The front door: one request type, [`Acquire`], for taking a lock of any kind.
//!
//! `client.lock(name)`, `client.fair_lock(name)`, `client.read_lock(name)`,
//! `client.write_lock(name)`, `semaphore.acquire()` and `client.lock_all(names)` each
//! return an [`Acquire`] of their kind. Awaited as it is, it waits as long as it takes
//! and gives the guard; its modes, written once here for every kind, bound the wait
//! ([`timeout`](Acquire::timeout), [`try_now`](Acquire::try_now),
//! [`options`](Acquire::options)) or run a critical section under the lock
//! ([`run`](Acquire::run)).
//!
//! The part every kind shares (the options checked for the kind, the span, the
//! shut-down check, the deadline and the budget that holds a call with a wait to it) is
//! written once, in `take`; a kind brings only its guard type, its span's name and
//! the one step that takes it (the sealed trait [`Acquirable`]), as lock_api's
//! `Mutex<R: RawMutex>` does with its raw locks.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use crate::client::LockClient;
#[cfg(doc)]
use crate::error::LockError;
use crate::error::Result;
use crate::held::{Held, critical_section};
use crate::multi::lock_order;
use crate::observe;
use crate::options::{LockOptions, ResolvedOptions};
use crate::semaphore::Semaphore;
use crate::waiting::{Forever as Endless, GiveUp, within_budget};

mod sealed {
    use super::*;

    /// What a kind of lock brings to the front door: its guard, its options checked
    /// for it, its span's name, and the one step that takes it. Public in a private
    /// module: nameable by no one outside the crate, so only this crate's kinds are
    /// [`Acquirable`](super::Acquirable).
    pub trait Take: Send + Sized {
        /// The guard a granted call gives.
        type Guard: Held;

        /// The lock's name, for the span.
        fn name(&self) -> &str;

        /// `options` checked against `client`'s and against what the kind can honour
        /// (see `LockOptions::resolve_for`).
        fn resolve(&self, client: &LockClient, options: &LockOptions) -> Result<ResolvedOptions>;

        /// The call's name in its span, `None` for a kind whose parts make spans of
        /// their own.
        fn call(&self, single_try: bool) -> Option<&'static str>;

        /// Takes the lock for the current owner, waiting until `give_up`: the guard,
        /// or what giving up yields. The client is running and the options are this
        /// kind's, checked.
        fn take<D: GiveUp + Send>(
            self,
            client: &LockClient,
            options: ResolvedOptions,
            give_up: D,
        ) -> impl Future<Output = Result<Result<Self::Guard, D::GaveUp>>> + Send;
    }

    /// A kind taken by one name (the mutex, the fair lock and the read-write lock's
    /// two sides): one [`Take`] serves them all, with what sets each apart.
    pub trait OneName: Copy + Send {
        /// The kind's guard.
        type Guard: Held;

        /// The lock's name.
        fn lock_name(&self) -> &str;

        /// The call's name in its span.
        fn call(single_try: bool) -> &'static str;

        /// `options` checked against `client`'s and against what the kind can honour:
        /// every option, unless the kind says otherwise.
        fn resolve(client: &LockClient, options: &LockOptions) -> Result<ResolvedOptions> {
            options.resolve(client.engine().config())
        }

        /// As [`Take::take`].
        fn take<D: GiveUp + Send>(
            self,
            client: &LockClient,
            options: ResolvedOptions,
            give_up: D,
        ) -> impl Future<Output = Result<Result<Self::Guard, D::GaveUp>>> + Send;
    }
}
use sealed::Take;

mod kinds;
pub use kinds::{All, Fair, Mutex, Read, SemaphorePermit, Write};

/// A kind of lock the front door takes: [`Mutex`], [`Fair`], [`Read`], [`Write`],
/// [`SemaphorePermit`] and [`All`]. Sealed: only this crate's kinds implement it.
pub trait Acquirable: Take {}

impl<K: Take> Acquirable for K {}

/// The mode of an [`Acquire`] that waits as long as it takes: awaited, it gives the
/// guard (no `Option`).
#[derive(Debug)]
pub enum Forever {}

/// The mode of an [`Acquire`] that may give up (after [`timeout`](Acquire::timeout),
/// [`try_now`](Acquire::try_now) or [`options`](Acquire::options)): awaited, it gives
/// `Some(guard)`, or `None` if the lock could not be had within the wait.
#[derive(Debug)]
pub enum Bounded {}

/// A request to take a lock of kind `K`, made by `client.lock(name)` and the other
/// kinds' calls: nothing is sent until it is awaited (or [run](Self::run)).
///
/// | call | output |
/// |---|---|
/// | `client.lock(name).await` | `Result<LockGuard>`: waits as long as it takes |
/// | `client.lock(name).timeout(wait).await` | `Result<Option<LockGuard>>`: `None` if not free within `wait` |
/// | `client.lock(name).try_now().await` | `Result<Option<LockGuard>>`: one try, no waiting |
/// | `client.lock(name).options(options).await` | `Result<Option<LockGuard>>`: per-call [`LockOptions`] |
/// | `client.lock(name).run(body).await` | `Result<T>`: `body`'s value, run under the lock |
/// | `client.lock(name).timeout(wait).run(body).await` | `Result<Option<T>>`: `None` (and `body` not run) if not free within `wait` |
///
/// Every kind has every mode: `client.fair_lock(name)`, `client.read_lock(name)`,
/// `client.write_lock(name)`, `semaphore.acquire()` and `client.lock_all(names)` too.
///
/// An `Acquire` is [`IntoFuture`], not a future itself: where a future value is needed
/// (`Box::pin`, `futures::future::join_all`, `futures::poll!`), call
/// [`into_future`](IntoFuture::into_future). The future is boxed, `Send`, and borrows
/// the client and the name.
///
/// # Errors
/// [`LockError::InvalidName`], [`LockError::InvalidOption`] for options the kind
/// cannot honour (a fencing token for a shared hold, a zero or overlong lease, a wait
/// longer than ten years), [`LockError::WrongType`] if the key holds something else,
/// [`LockError::Redis`] on connection failure, [`LockError::NotReplicated`] when
/// replicas were asked for and did not acknowledge, [`LockError::Shutdown`]; and the
/// kind's own (see each kind's call).
///
/// # Cancel safety
/// Cancel safe: dropping the future at any point leaves no hold behind. If an
/// acquire script had already been sent, its reply is awaited in the background and a
/// granted hold is released at once. A cancelled waiter gives up its place in the
/// queue.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use std::time::Duration;
/// let guard = client.lock("account:42").await?;
/// guard.unlock().await?;
///
/// if let Some(guard) = client.read_lock("balance:7").timeout(Duration::from_secs(1)).await? {
///     guard.unlock().await?;
/// }
///
/// let balance = client.lock("account:42").run(async |_guard| 100).await?;
/// # Ok(()) }
/// ```
#[must_use = "an Acquire does nothing until it is awaited or run"]
pub struct Acquire<'c, K, M = Forever> {
    client: &'c LockClient,
    target: K,
    options: LockOptions,
    mode: PhantomData<fn() -> M>,
}

impl<K: fmt::Debug, M> fmt::Debug for Acquire<'_, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("target", &self.target)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<'c, K: Acquirable> Acquire<'c, K> {
    /// A request for `target` from `client`, waiting as long as it takes.
    fn new(client: &'c LockClient, target: K) -> Self {
        Self {
            client,
            target,
            options: LockOptions::new(),
            mode: PhantomData,
        }
    }
}

impl<'c, K: Acquirable, M> Acquire<'c, K, M> {
    /// The client, the lock, and the request's options checked for its kind.
    fn resolved(self) -> Result<(&'c LockClient, K, ResolvedOptions)> {
        let resolved = self.target.resolve(self.client, &self.options)?;
        Ok((self.client, self.target, resolved))
    }

    /// The same request in another mode.
    fn to<N>(self, options: LockOptions) -> Acquire<'c, K, N> {
        Acquire {
            client: self.client,
            target: self.target,
            options,
            mode: PhantomData,
        }
    }

    /// Waits at most `wait`: awaited, `None` if the lock could not be had in time (a
    /// waiter of a fair lock leaves the queue). Sets only the wait of earlier
    /// [`options`](Self::options).
    ///
    /// # Errors
    /// As [`Acquire`], and [`LockError::InvalidOption`] for a wait longer than ten
    /// years.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// if let Some(guard) = client.lock("account:42").timeout(Duration::from_millis(500)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn timeout(self, wait: Duration) -> Acquire<'c, K, Bounded> {
        let options = self.options.clone().wait(wait);
        self.to(options)
    }

    /// Tries once, without waiting: awaited, `None` if the lock is busy. One round
    /// trip; none at all for a mutex that another owner in this process holds (a burst
    /// of tries in one process costs Redis only the tries that can win). A fair lock
    /// is had only if nobody queues for it; a multi-lock only if every member is free.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// match client.lock("job:nightly").try_now().await? {
    ///     Some(guard) => { /* run the job */ guard.unlock().await? }
    ///     None => println!("another instance is running it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_now(self) -> Acquire<'c, K, Bounded> {
        self.timeout(Duration::ZERO)
    }

    /// Takes the lock with per-call [`LockOptions`] (the wait, a fixed lease instead
    /// of the watchdog, a fencing token, replica acknowledgement, data), replacing the
    /// options and any wait set before: awaited, `None` if the lock could not be had
    /// within the options' wait. Call [`timeout`](Self::timeout) after it to change
    /// only the wait.
    ///
    /// # Errors
    /// As [`Acquire`]; [`LockOptions::fenced`] for a kind shared by several holders (a
    /// read side, a semaphore permit) is refused with [`LockError::InvalidOption`],
    /// never ignored.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::Duration;
    /// use holdlock::LockOptions;
    /// let options = LockOptions::fenced().wait(Duration::from_secs(1)).lease(Duration::from_secs(5));
    /// if let Some(guard) = client.lock("x").options(options).await? {
    ///     let token = guard.fencing_token();
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn options(self, options: LockOptions) -> Acquire<'c, K, Bounded> {
        self.to(options)
    }
}

impl<'c, K: Acquirable + 'c> Acquire<'c, K> {
    /// Takes the lock (waiting as long as it takes), runs `body` with the guard, and
    /// releases the lock: the safe shape of a critical section. If the lock is lost
    /// while `body` runs, `body`'s future is dropped at once (it stops at its next
    /// await) and the call fails with [`LockError::Lost`] (naming the member lost, for
    /// a multi-lock); once `body` finishes, the lock is released (and awaited) before
    /// its value is returned.
    ///
    /// `body` gets the guard, so it can read a fencing token or take the same lock
    /// again (a nested critical section re-enters).
    ///
    /// # Errors
    /// As [`Acquire`]; [`LockError::Lost`] if the lock was lost while `body` ran; an
    /// error of the release (as [`LockGuard::unlock`](crate::LockGuard::unlock)),
    /// which is returned, not swallowed: `body`'s value is then dropped.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting, nothing is held; dropped while `body` runs,
    /// `body` is dropped and the lock released in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let balance = client
    ///     .lock("account:42")
    ///     .run(async |guard| {
    ///         // ... exclusive across every process; `guard.fencing_token()` if fenced ...
    ///         100
    ///     })
    ///     .await?;
    /// client.semaphore("exports", 5).acquire().run(async |_permit| { /* 5 at once */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<T>(self, body: impl AsyncFnOnce(&K::Guard) -> T) -> Result<T> {
        critical_section(self.await?, body).await
    }
}

impl<'c, K: Acquirable + 'c> Acquire<'c, K, Bounded> {
    /// [`run`](Acquire::run) within the wait: `None` if the lock could not be had in
    /// time, and then `body` is not run.
    ///
    /// # Errors
    /// As [`Acquire::run`].
    ///
    /// # Cancel safety
    /// As [`Acquire::run`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// match client.lock("report").try_now().run(async |_| "ran").await? {
    ///     Some(outcome) => println!("{outcome}"),
    ///     None => println!("someone else is on it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn run<T>(self, body: impl AsyncFnOnce(&K::Guard) -> T) -> Result<Option<T>> {
        match self.await? {
            Some(guard) => critical_section(guard, body).await.map(Some),
            None => Ok(None),
        }
    }
}

/// The future of an awaited [`Acquire`].
pub type AcquireFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

impl<'c, K: Acquirable + 'c> IntoFuture for Acquire<'c, K> {
    type Output = Result<K::Guard>;
    type IntoFuture = AcquireFuture<'c, K::Guard>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let (client, target, resolved) = self.resolved()?;
            match take(client, target, resolved, Endless).await? {
                Ok(guard) => Ok(guard),
                Err(never) => match never {},
            }
        })
    }
}

impl<'c, K: Acquirable + 'c> IntoFuture for Acquire<'c, K, Bounded> {
    type Output = Result<Option<K::Guard>>;
    type IntoFuture = AcquireFuture<'c, Option<K::Guard>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let (client, target, resolved) = self.resolved()?;
            match resolved.deadline()? {
                None => Ok(take(client, target, resolved, Endless).await?.ok()),
                Some(deadline) => {
                    let answer_by = resolved.answer_by(deadline);
                    let call = take(client, target, resolved, deadline);
                    Ok(within_budget(answer_by, call).await?.ok())
                }
            }
        })
    }
}

/// Takes `target` for the current owner with `options` (checked for its kind),
/// waiting until `give_up`: the prelude every kind shares, written once. The call runs
/// in the kind's span, and fails at once on a client that was shut down.
async fn take<K: Take, D: GiveUp + Send>(
    client: &LockClient,
    target: K,
    options: ResolvedOptions,
    give_up: D,
) -> Result<Result<K::Guard, D::GaveUp>> {
    let single_try = options.is_single_try();
    let span = target
        .call(single_try)
        .map(|call| observe::lock_span(call, target.name()))
        .filter(observe::records);
    let taken = async move {
        client.engine().check_running()?;
        target.take(client, options, give_up).await
    };
    match span {
        Some(span) => observe::observed(span, single_try, taken).await,
        None => taken.await,
    }
}

impl LockClient {
    /// Takes the lock `name`: awaited as it is, waits as long as it takes and gives the
    /// guard. Re-entry by the same owner returns at once with the hold count raised.
    /// For a bounded wait, a single try, per-call options or a critical section, see
    /// the modes of [`Acquire`].
    ///
    /// # Errors
    /// As [`Acquire`].
    ///
    /// # Cancel safety
    /// As [`Acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.lock("account:42").await?;
    /// let nested = client.lock("account:42").await?; // same task: re-entry
    /// assert_eq!(nested.hold_count(), 2);
    /// # Ok(()) }
    /// ```
    pub fn lock<'c>(&'c self, name: &'c str) -> Acquire<'c, Mutex<'c>> {
        Acquire::new(self, Mutex(name))
    }

    /// Takes the fair lock `name`: waiters of every client are served in the order
    /// their waits began. Reentrant like [`lock`](Self::lock); a single try
    /// ([`try_now`](Acquire::try_now)) has it only if it is free and nobody queues.
    ///
    /// The fair lock `name` and the mutex `name` are different locks (the fair lock's
    /// key is `<prefix>{name}:fair`). Waits that began within a millisecond or so of
    /// each other (one round trip to Redis) may be served either way round: the order
    /// is that of their first attempts' arrival at Redis. Fair locks draw fencing
    /// tokens when asked (every fresh hold, a hand-off included, from a floor of their
    /// own at `<prefix>{name}:fair:token`), and wait for replicas when asked
    /// (`min_replicas`: then a hand-off is claimed with an acknowledged attempt, never
    /// taken on its message alone).
    ///
    /// In [`Compat::Redisson`](crate::Compat::Redisson) the fair lock is Redisson's
    /// `RFairLock` instead: the mutex's hash at the name (so it and the mutex `name`
    /// are one lock there), with Redisson's queue beside it, each waiter woken on a
    /// channel of its own; no fencing tokens. docs/deployments.md, "The fair lock
    /// (`RFairLock`)", says how it differs.
    ///
    /// # Errors
    /// As [`Acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no hold behind, and takes the waiter out
    /// of the queue (in the background; in Redisson's layout the owner's next wait for
    /// the lock asks only once it is out); a lock already handed to it passes on.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let guard = client.fair_lock("account:42").await?;
    /// guard.unlock().await?; // handed to the longest waiter, if any
    /// # Ok(()) }
    /// ```
    pub fn fair_lock<'c>(&'c self, name: &'c str) -> Acquire<'c, Fair<'c>> {
        Acquire::new(self, Fair(name))
    }

    /// Takes the read side of the read-write lock `name`. Many owners may hold it
    /// together; it waits while a writer holds the lock, and while a writer waits for
    /// it (writers are not starved). Reentrant; an owner holding the write side may
    /// take the read side too. A read hold is shared with other readers, so it draws
    /// no fencing token ([`LockOptions::fenced`] is refused).
    ///
    /// The read-write lock `name` and the mutex `name` are different locks (its key is
    /// `<prefix>{name}:rw`).
    ///
    /// # Errors
    /// As [`Acquire`].
    ///
    /// # Cancel safety
    /// As [`Acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let reading = client.read_lock("balance:7").await?;
    /// // ... read; other readers may read at the same time ...
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock<'c>(&'c self, name: &'c str) -> Acquire<'c, Read<'c>> {
        Acquire::new(self, Read(name))
    }

    /// Takes the write side of the read-write lock `name`: once every reader and any
    /// other writer has left. Reentrant; draws a fencing token when asked (see
    /// [`WriteGuard::fencing_token`](crate::WriteGuard::fencing_token)).
    ///
    /// # Errors
    /// As [`Acquire`], and [`LockError::WouldDeadlock`] at once if the owner holds the
    /// read side (and not the write side) of this lock.
    ///
    /// # Cancel safety
    /// As [`Acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let writing = client.write_lock("balance:7").await?;
    /// // ... nobody else reads or writes meanwhile ...
    /// writing.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock<'c>(&'c self, name: &'c str) -> Acquire<'c, Write<'c>> {
        Acquire::new(self, Write(name))
    }

    /// Takes every lock in `names`: all of them, or (on an error, or giving up) none.
    /// Names the owner already holds are re-entered. The options (see
    /// [`Acquire::options`]) apply to every member, and the wait bounds the whole
    /// call.
    ///
    /// The names are taken one by one in a global order (sorted by key), whatever order
    /// they are given in, so callers whose sets overlap never deadlock each other. Names
    /// the owner already held *before* the call are outside that order: holding one
    /// while waiting for another can deadlock like any nested locks do, so take related
    /// names in one call.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an empty list, a bad name or a name given twice
    /// (nothing is taken); otherwise as [`Acquire`]. A failure releases the members
    /// taken so far before it returns.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future releases the members taken so far in the
    /// background (see [`LockGuard`](crate::LockGuard)'s drop) and cancels the member
    /// being taken; nothing is left held.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let both = client.lock_all(["account:1", "account:2"]).await?;
    /// // ... move money between the two accounts ...
    /// both.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I>(&self, names: I) -> Acquire<'_, All>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let names = lock_order(self, names);
        Acquire::new(self, All { names })
    }
}

impl Semaphore {
    /// Takes a permit: awaited as it is, waits (asleep until a permit is given back or
    /// expires) as long as it takes. Permits are not reentrant: a second `acquire` by
    /// the same task takes a second permit. A permit is shared with the other permits'
    /// holders, so it draws no fencing token ([`LockOptions::fenced`] is refused).
    ///
    /// # Errors
    /// As [`Acquire`]; [`LockError::InvalidOption`] for 0 permits or a number of
    /// permits other than the one the semaphore is held with.
    ///
    /// # Cancel safety
    /// As [`Acquire`]: dropping the future leaves no permit taken.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let permit = client.semaphore("partner-api", 3).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Acquire<'_, SemaphorePermit<'_>> {
        Acquire::new(self.client(), SemaphorePermit(self))
    }
}
