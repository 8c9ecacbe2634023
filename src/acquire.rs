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
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;

use crate::client::LockClient;
use crate::error::{LockError, Result};
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
    /// [`Acquirable`](super::Acquirable). A kind owns what it takes (`'static`), so a
    /// request can be spawned, stored or returned.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a kind of lock that holdlock takes",
        note = "the kinds are sealed: requests come from `client.lock(name)`, `client.fair_lock(name)`, `client.read_lock(name)`, `client.write_lock(name)`, `client.lock_all(names)` and `semaphore.acquire()`"
    )]
    pub trait Take: Send + Unpin + Sized + 'static {
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

    /// How an awaited request waits, and what it gives: [`Forever`](super::Forever)
    /// the guard, [`Bounded`](super::Bounded) `Some(guard)` or `None`.
    pub trait Mode: Send + 'static {
        /// What the request gives for a guard `G`.
        type Output<G>;

        /// The call of `target` from `client` with `options`, boxed.
        fn start<K: Take>(
            client: LockClient,
            target: K,
            options: LockOptions,
        ) -> super::Call<Self::Output<K::Guard>>;
    }
}
pub(crate) use sealed::Mode;
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

/// A running request's call: boxed, so a request of any kind is one pointer wide once
/// it runs.
type Call<T> = Pin<Box<dyn Future<Output = Result<T>> + Send>>;

impl Mode for Forever {
    type Output<G> = G;

    fn start<K: Take>(client: LockClient, target: K, options: LockOptions) -> Call<K::Guard> {
        Box::pin(async move {
            let resolved = target.resolve(&client, &options)?;
            match take(&client, target, resolved, Endless).await? {
                Ok(guard) => Ok(guard),
                Err(never) => match never {},
            }
        })
    }
}

impl Mode for Bounded {
    type Output<G> = Option<G>;

    fn start<K: Take>(
        client: LockClient,
        target: K,
        options: LockOptions,
    ) -> Call<Option<K::Guard>> {
        Box::pin(async move {
            let resolved = target.resolve(&client, &options)?;
            match resolved.deadline()? {
                None => Ok(take(&client, target, resolved, Endless).await?.ok()),
                Some(deadline) => {
                    let answer_by = resolved.answer_by(deadline);
                    let call = take(&client, target, resolved, deadline);
                    Ok(within_budget(answer_by, call).await?.ok())
                }
            }
        })
    }
}

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
/// An `Acquire` is a [`Future`] (`Send`, `Unpin` and `'static`): it owns a handle of
/// its client and its own copy of the name, and borrows nothing. So it goes wherever a
/// future goes: `tokio::spawn(client.lock("job"))`,
/// `futures::future::join_all(names.iter().map(|name| client.lock(name)))`, a generic
/// helper over [`IntoFuture`], `tokio::select!` over `&mut
/// request`, a struct field, a function's return value. The name may be any string
/// (`client.lock(format!("account:{id}"))`).
///
/// # Errors
/// [`LockError::InvalidName`], [`LockError::InvalidOption`] for options the kind
/// cannot honour (a fencing token for a shared hold, a zero or overlong lease, a wait
/// longer than ten years), [`LockError::WrongType`] if the key holds something else,
/// [`LockError::Redis`] on connection failure, [`LockError::NotReplicated`] when
/// replicas were asked for and did not acknowledge, [`LockError::Shutdown`]; and the
/// kind's own (see each kind's call). A request polled once and then changed (say,
/// polled by hand, then given a [`timeout`](Self::timeout)) fails with
/// [`LockError::InvalidOption`] for `request`: its call had begun with the old
/// options.
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
/// let balance = client.lock("account:42").run(|_guard| async { 100 }).await?;
///
/// // A request owns what it needs: spawn it as it is.
/// let id = 7;
/// let task = tokio::spawn(client.lock(format!("account:{id}")).try_now());
/// let guard = task.await.expect("the task ran")?;
/// # Ok(()) }
/// ```
#[must_use = "an Acquire does nothing until it is awaited or run"]
pub struct Acquire<K: Acquirable, M: Mode = Forever> {
    state: State<K, M>,
}

/// Where a request is: not yet polled (what it will take), running (its call), or
/// spent (it gave its output, or was changed after its call began).
enum State<K: Acquirable, M: Mode> {
    Ready {
        client: LockClient,
        target: K,
        options: LockOptions,
    },
    Running(Call<M::Output<K::Guard>>),
    Spent,
}

impl<K: Acquirable + fmt::Debug, M: Mode> fmt::Debug for Acquire<K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Acquire");
        match &self.state {
            State::Ready {
                target, options, ..
            } => out.field("target", target).field("options", options),
            State::Running(_) => out.field("state", &"running"),
            State::Spent => out.field("state", &"spent"),
        };
        out.finish_non_exhaustive()
    }
}

impl<K: Acquirable> Acquire<K> {
    /// A request for `target` from `client`, waiting as long as it takes.
    fn new(client: &LockClient, target: K) -> Self {
        Self {
            state: State::Ready {
                client: client.clone(),
                target,
                options: LockOptions::new(),
            },
        }
    }
}

impl<K: Acquirable, M: Mode> Acquire<K, M> {
    /// The same request in another mode, with its options changed by `change`.
    fn to<N: Mode>(self, change: impl FnOnce(LockOptions) -> LockOptions) -> Acquire<K, N> {
        let state = match self.state {
            State::Ready {
                client,
                target,
                options,
            } => State::Ready {
                client,
                target,
                options: change(options),
            },
            // The call began with the old options: it cannot be changed, and is
            // dropped (cancel safe) for the error that says so.
            State::Running(_) | State::Spent => State::Spent,
        };
        Acquire { state }
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
    pub fn timeout(self, wait: Duration) -> Acquire<K, Bounded> {
        self.to(|options| options.wait(wait))
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
    pub fn try_now(self) -> Acquire<K, Bounded> {
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
    pub fn options(self, options: LockOptions) -> Acquire<K, Bounded> {
        self.to(|_| options)
    }
}

impl<K: Acquirable> Acquire<K> {
    /// Takes the lock (waiting as long as it takes), runs `body` with the guard, and
    /// releases the lock: the safe shape of a critical section. If the lock is lost
    /// while `body` runs, `body`'s future is dropped at once (it stops at its next
    /// await) and the call fails with [`LockError::Lost`] (naming the member lost, for
    /// a multi-lock); once `body` finishes, the lock is released (and awaited) before
    /// its value is returned.
    ///
    /// `body` gets the guard in an [`Arc`], so both closure styles work:
    /// `|guard| async move { .. }` and `async |guard| { .. }`. The guard's methods are
    /// called on it as they are (`guard.fencing_token()`, `guard.lost()`), and `&guard`
    /// passes for a `&LockGuard`; a nested critical section takes the same lock again
    /// and re-enters. A clone of the `Arc` that `body` keeps past its end (moved into a
    /// task or a struct) keeps the lock: `run` then returns at once, and the lock is
    /// released in the background when the last clone is dropped.
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
    /// let token = client
    ///     .lock("account:42")
    ///     .run(|guard| async move {
    ///         // ... exclusive across every process ...
    ///         guard.fencing_token()
    ///     })
    ///     .await?;
    /// client.semaphore("exports", 5).acquire().run(async |_permit| { /* 5 at once */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<T, F>(self, body: impl FnOnce(Arc<K::Guard>) -> F) -> Result<T>
    where
        F: Future<Output = T>,
    {
        critical_section(self.await?, body).await
    }
}

impl<K: Acquirable> Acquire<K, Bounded> {
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
    pub async fn run<T, F>(self, body: impl FnOnce(Arc<K::Guard>) -> F) -> Result<Option<T>>
    where
        F: Future<Output = T>,
    {
        match self.await? {
            Some(guard) => critical_section(guard, body).await.map(Some),
            None => Ok(None),
        }
    }
}

impl<K: Acquirable, M: Mode> Acquire<K, M> {
    /// The size of the request's call once it runs, the boxed future that its task
    /// carries on the heap (0 for a request that already ran). For tests.
    #[doc(hidden)]
    pub fn call_size(self) -> usize {
        match self.state {
            State::Ready {
                client,
                target,
                options,
            } => mem::size_of_val(&*M::start(client, target, options)),
            State::Running(call) => mem::size_of_val(&*call),
            State::Spent => 0,
        }
    }
}

impl<K: Acquirable, M: Mode> Future for Acquire<K, M> {
    type Output = Result<M::Output<K::Guard>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let state = &mut self.get_mut().state;
        loop {
            match mem::replace(state, State::Spent) {
                State::Ready {
                    client,
                    target,
                    options,
                } => *state = State::Running(M::start(client, target, options)),
                State::Running(mut call) => {
                    let polled = call.as_mut().poll(cx);
                    if polled.is_pending() {
                        *state = State::Running(call);
                    }
                    return polled;
                }
                State::Spent => return Poll::Ready(Err(spent())),
            }
        }
    }
}

/// The error of a request polled after it gave its output, or changed after its call
/// began.
fn spent() -> LockError {
    LockError::InvalidOption {
        option: "request",
        reason: "this request was already polled: await a new request (its call began \
                 with the options it had then, and gave its output or was dropped)"
            .to_owned(),
    }
}

/// Takes `target` for the current owner with `options` (checked for its kind),
/// waiting until `give_up`: the prelude every kind shares, written once
/// ([`in_prelude`]).
async fn take<K: Take, D: GiveUp + Send>(
    client: &LockClient,
    target: K,
    options: ResolvedOptions,
    give_up: D,
) -> Result<Result<K::Guard, D::GaveUp>> {
    let single_try = options.is_single_try();
    let span = target
        .call(single_try)
        .map(|call| observe::lock_span(call, target.name()));
    in_prelude(
        client,
        span,
        single_try,
        target.take(client, options, give_up),
    )
    .await
}

/// Runs `call`, a take step, as every call that takes a lock runs it: failing at once
/// on a client that was shut down (checked now), and in `span` (a call of that name,
/// if anything records it). The front door's kinds and an election's campaign share
/// it.
///
/// A combinator, not an `async` block: one would keep `call` twice (captured, and
/// again once awaited), doubling every lock call's future.
pub(crate) fn in_prelude<G, E>(
    client: &LockClient,
    span: Option<tracing::Span>,
    single_try: bool,
    call: impl Future<Output = Result<std::result::Result<G, E>>>,
) -> impl Future<Output = Result<std::result::Result<G, E>>> {
    if let Err(shut_down) = client.engine().check_running() {
        return Either::Left(std::future::ready(Err(shut_down)));
    }
    Either::Right(match span.filter(observe::records) {
        Some(span) => Either::Left(observe::observed(span, single_try, call)),
        None => Either::Right(call),
    })
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
    pub fn lock(&self, name: impl AsRef<str>) -> Acquire<Mutex> {
        Acquire::new(self, Mutex(name.as_ref().to_owned()))
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
    pub fn fair_lock(&self, name: impl AsRef<str>) -> Acquire<Fair> {
        Acquire::new(self, Fair(name.as_ref().to_owned()))
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
    pub fn read_lock(&self, name: impl AsRef<str>) -> Acquire<Read> {
        Acquire::new(self, Read(name.as_ref().to_owned()))
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
    pub fn write_lock(&self, name: impl AsRef<str>) -> Acquire<Write> {
        Acquire::new(self, Write(name.as_ref().to_owned()))
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
    pub fn lock_all<I>(&self, names: I) -> Acquire<All>
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
    pub fn acquire(&self) -> Acquire<SemaphorePermit> {
        Acquire::new(self.client(), SemaphorePermit(self.clone()))
    }
}
