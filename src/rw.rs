//! The reentrant read-write lock: many readers at once, or one writer.
//!
//! A read-write lock is a kind on the shared engine with two sides, each an ordinary
//! engine hold: `lua/rw_acquire.lua` and `rw_release.lua` keep one hash field per
//! holder (`<owner>` counts an owner's read holds, `<owner>:w` the writer's) and each
//! holder's deadline in a sorted set, so every reader expires on its own lease; the
//! engine's exactly-once calls, watchdog, lost signal, waiting rooms and cancel safety
//! are the mutex's.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::client::LockClient;
use crate::engine::{HoldClaim, Lock};
use crate::error::Result;
use crate::guard::LockGuard;
use crate::held::{Held, Sealed, held_methods};
use crate::options::ResolvedOptions;
use crate::scripts::{Kind, rw_names};
use crate::waiting::GiveUp;

impl LockClient {
    /// Takes the `side` of the read-write lock `name` for the current owner, waiting
    /// until `give_up` (the read-write lock's step of the front door, `acquire.rs`).
    pub(crate) async fn take_side<D: GiveUp>(
        &self,
        name: &str,
        side: Kind,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<HoldClaim, D::GaveUp>> {
        let engine = self.engine();
        let names = Arc::new(rw_names(&engine.config().prefix, name, side)?);
        engine.take(Lock::At(names), options, give_up).await
    }
}

macro_rules! side_guard {
    ($(#[$doc:meta])* $guard:ident, $lock:literal) => {
        $(#[$doc])*
        #[must_use = "if unused the lock is released immediately"]
        #[clippy::has_significant_drop]
        pub struct $guard(LockGuard);

        impl $guard {
            /// The lock name.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("assert_eq!(client.", $lock, "(\"a\").await?.name(), \"a\");")]
            /// # Ok(()) }
            /// ```
            pub fn name(&self) -> &str {
                self.0.name()
            }

            /// The owner id this hold belongs to, `<client-uuid>:<task>`.
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("let guard = client.", $lock, "(\"a\").await?;")]
            /// assert_eq!(guard.owner(), client.owner_id());
            /// # Ok(()) }
            /// ```
            pub fn owner(&self) -> &str {
                self.0.owner()
            }

            /// How many holds of this side the owner has on the lock now (shared by
            /// nested guards).
            ///
            /// # Examples
            /// ```no_run
            /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
            #[doc = concat!("assert_eq!(client.", $lock, "(\"a\").await?.hold_count(), 1);")]
            /// # Ok(()) }
            /// ```
            pub fn hold_count(&self) -> u32 {
                self.0.hold_count()
            }

            /// The guard of the hold `claim` took.
            pub(crate) fn new(claim: HoldClaim) -> Self {
                Self(LockGuard::new(claim))
            }
        }

        held_methods!($guard, concat!("client.", $lock, "(\"a\").await?"));

        impl Sealed for $guard {}

        impl Held for $guard {
            fn holds(&self) -> &[LockGuard] {
                std::slice::from_ref(&self.0)
            }

            fn unlock(self) -> impl Future<Output = Result<()>> + Send {
                Held::unlock(self.0)
            }
        }

        impl fmt::Debug for $guard {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($guard))
                    .field("name", &self.name())
                    .field("owner", &self.owner())
                    .field("hold_count", &self.hold_count())
                    .field("lost", &self.is_lost())
                    .finish()
            }
        }
    };
}

side_guard!(
    /// One read hold of a read-write lock (see [`LockClient::read_lock`]). Dropping it
    /// releases the hold in the background; [`unlock`](Self::unlock) releases it and
    /// reports errors. Nested read holds of one owner share one hold and its count;
    /// each reader's hold is renewed, and expires, on its own.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let reading = client.read_lock("balance:7").await?;
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    ReadGuard,
    "read_lock"
);

side_guard!(
    /// The write hold of a read-write lock (see [`LockClient::write_lock`]). Dropping
    /// it releases the hold in the background; [`unlock`](Self::unlock) releases it and
    /// reports errors. The writer may also take the read side; the two are released in
    /// any order.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// let writing = client.write_lock("balance:7").await?;
    /// let reading = client.read_lock("balance:7").await?; // inside the write hold
    /// writing.unlock().await?;
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    WriteGuard,
    "write_lock"
);
