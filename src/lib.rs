//! Reentrant distributed locks on Redis, with a renewing watchdog, pub/sub wake-ups,
//! fencing tokens, and exactly-once acquire and release.
//!
//! A lock is a Redis hash whose fields are owner ids (`<client-uuid>:<task>`) and whose
//! values are hold counts, changed only by Lua scripts. The same owner may take a lock
//! again (re-entry); a watchdog renews the lease while the holder lives, and the lock
//! frees itself within one lease when the holder dies. Waiters sleep until a release
//! message arrives instead of polling.
//!
//! ```no_run
//! # async fn dox() -> holdlock::Result<()> {
//! let client = holdlock::LockClient::connect("redis://127.0.0.1:6379").await?;
//! let guard = client.lock("account:42").await?;
//! // ... exclusive across every process using the same Redis ...
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! # Owners and reentrancy
//! The owner is the current tokio task ([`tokio::task::try_id`]); code outside any task
//! (inside `block_on`, including the body of `#[tokio::main]` and `#[tokio::test]`) is
//! owned by its thread. Two hazards follow:
//! - Futures joined inside one task (`join!`, `select!`, `FuturesUnordered`) share the
//!   task's owner, so they would all enter the same lock together. Give each its own
//!   owner with [`owner_scope`].
//! - Tokio may reuse a task id once the task and its `JoinHandle`s are gone. A guard
//!   that outlives its task could then be re-entered by an unrelated new task with the
//!   same id. Release guards before their task ends, or use [`owner_scope`] (scope ids
//!   are never reused). Today's tokio counts ids up and does not reuse them.
//!
//! See `docs/design.md` for the data model and the guarantees.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::print_stdout, clippy::panic, clippy::unwrap_used)
)]

// The layers, top down (see docs/design.md, "Layers"): each module imports modules of
// its own layer and of those below it, with no exception (tests/layers.rs checks it).
// tooling: the benchmark workloads, over the public API only
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench;
// integrations: the tower layers, over the public API and three crate internals
// (held::while_held, owner::within_scope, owner::new_scope); the PostgreSQL fence, over
// tokio-postgres alone
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
// API
pub mod acquire;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod builder;
mod client;
mod election;
mod fair;
pub mod fence;
mod inspect;
mod multi;
mod once;
mod rw;
mod semaphore;
// guard
mod guard;
mod held;
// engine
mod engine;
// protocol
mod deadlock;
mod hold;
mod protocol;
mod waiting;
mod watchdog;
// redis
mod connection;
mod replicas;
mod scripts;
#[cfg(feature = "tls-rustls")]
mod tls;
// ground
mod chores;
mod compat;
mod error;
mod keys;
mod lease;
mod lock_kind;
mod observe;
mod options;
mod owner;
#[cfg(feature = "serde")]
mod serde_millis;
mod url;

pub use acquire::Acquire;
pub use builder::LockClientBuilder;
pub use client::LockClient;
pub use compat::Compat;
pub use election::{Election, LeaderChange, LeaderChanges, LeaderInfo, Leadership};
pub use error::{LockError, Result, WaitFor};
/// The Redis client underneath, for commands of your own via [`LockClient::redis`].
pub use fred;
pub use guard::LockGuard;
pub use held::Held;
pub use inspect::{
    FairGrant, FairInfo, FairWaiter, LockInfo, LockListing, LockOwner, LongWait, PermitHolder,
    ReadWriteInfo, RwHolder, SemaphoreInfo, UnreadableLock, WaitGraph,
};
pub use keys::validate_name;
pub use lock_kind::LockKind;
pub use multi::MultiGuard;
pub use once::{Claim, PeriodClaim};
pub use options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_DEADLOCK_CHECK, DEFAULT_FAIR_WAIT, DEFAULT_LEASE,
    DEFAULT_PREFIX, LockOptions, MAX_DATA_LEN, MAX_DURATION, MIN_LEASE,
};
pub use owner::owner_scope;
pub use rw::{ReadGuard, WriteGuard};
pub use semaphore::{Permit, Semaphore};
pub use url::redact_url;

// The Rust blocks of README.md and docs/*.md, compiled as doctests by `cargo test
// --doc` so that they keep up with the API. Each is a whole program, as readers copy
// it. The README's include the `blocking`, `tower` and `postgres` examples, and
// deployments.md's the TLS one, so those two compile only with their features (as
// under `cargo test --all-features`, the README's test command).
#[cfg(all(doctest, feature = "blocking", feature = "tower", feature = "postgres"))]
#[doc = include_str!("../README.md")]
mod readme {}
#[cfg(doctest)]
#[doc = include_str!("../docs/guarantees.md")]
mod guarantees_md {}
#[cfg(all(doctest, feature = "tls-rustls"))]
#[doc = include_str!("../docs/deployments.md")]
mod deployments_md {}
#[cfg(doctest)]
#[doc = include_str!("../docs/design.md")]
mod design_md {}
