//! `Send` and `Sync`, checked at compile time: every public future (each kind's
//! `Acquire` in every mode and its `run` critical section, the guards' async methods,
//! inspection, fencing,
//! `claim_period`, ...) is `Send`, so it can run on a multi-thread runtime and inside
//! `tokio::spawn`; every guard, client and handle, async and blocking, is
//! `Send + Sync`. This file fails to compile if one is not; nothing here talks to Redis.
//!
//! The futures are made in `_futures`, which is type-checked and never called. A new
//! public `async fn` belongs there (`grep -rn 'pub async fn' src` lists them, less
//! `src/bench` and `src/bin`), and a new kind of lock in `every_mode!`.

use std::future::{Future, IntoFuture};
use std::time::{Duration, SystemTime};

use holdlock::{
    Claim, Compat, Election, FairGrant, FairInfo, FairWaiter, Held, LeaderChange, LeaderChanges,
    LeaderInfo, Leadership, LockClient, LockClientBuilder, LockError, LockGuard, LockInfo,
    LockKind, LockListing, LockOptions, LockOwner, MultiGuard, PeriodClaim, Permit, PermitHolder,
    ReadGuard, ReadWriteInfo, RwHolder, Semaphore, SemaphoreInfo, UnreadableLock, WriteGuard,
};

/// The future (or value) `_` is `Send`.
#[allow(dead_code)]
fn send<T: Send>(_: &T) {}

/// `T` is `Send` and borrows nothing.
#[allow(dead_code)]
fn send_owned<T: Send + 'static>() {}

/// `T` is `Send + Sync`.
fn send_sync<T: Send + Sync>() {}

/// The async methods every guard has of its own, called on each of `$guard`, and the
/// trait's.
macro_rules! guard_futures {
    ($($guard:ident),*) => {$(
        send(&$guard.lost());
        send(&$guard.at_risk());
        send(&$guard.extend(Duration::from_secs(1)));
        held_futures(&$guard);
        send(&$guard.unlock());
    )*};
}

/// `request` (an acquire request) is a future of its own, `Send`, `Unpin` and
/// `'static` (it borrows nothing), and so is the future it becomes.
#[allow(dead_code)]
fn awaited<R: Future + IntoFuture + Send + Unpin + 'static>(request: R)
where
    R::IntoFuture: Send + 'static,
{
    send(&request.into_future());
}

/// Every mode of each request `$request`, as a future, and each mode's critical
/// section.
macro_rules! every_mode {
    ($($request:expr),*) => {$(
        awaited($request);
        awaited($request.try_now());
        awaited($request.timeout(Duration::from_secs(1)));
        awaited($request.options(LockOptions::new()));
        send(&$request.run(async |_| 1));
        send(&$request.try_now().run(async |_| 1));
        send(&$request.timeout(Duration::from_secs(1)).run(async |_| 1));
        send(&$request.options(LockOptions::new()).run(async |_| 1));
    )*};
}

/// Every public future, made and dropped unpolled.
#[allow(dead_code)]
#[allow(clippy::too_many_arguments)]
fn _futures(
    client: &LockClient,
    guard: LockGuard,
    read: ReadGuard,
    write: WriteGuard,
    permit: Permit,
    multi: MultiGuard,
    leadership: Leadership,
    period: PeriodClaim,
) {
    let name = "a";
    let wait = Duration::from_secs(1);

    // Connecting.
    send(&LockClient::connect("redis://127.0.0.1"));
    send(&LockClient::builder("redis://127.0.0.1").build());
    send(&client.shutdown());

    // Every kind in every mode of the front door (acquire.rs): the request, the
    // future it becomes when awaited, and its critical section.
    let semaphore = client.semaphore(name, 2);
    every_mode!(
        client.lock(name),
        client.fair_lock(name),
        client.read_lock(name),
        client.write_lock(name),
        client.lock_all(["a", "b"]),
        semaphore.acquire()
    );
    send(&semaphore.available());

    // Elections (election/).
    let election = client.election(name);
    send(&election.campaign("data"));
    send(&election.leader());
    send(&election.observe());

    // Inspection and operator commands (inspect/).
    send(&client.inspect(name));
    send(&client.inspect_kind(LockKind::Mutex, name));
    send(&client.list("*"));
    send(&client.list_report("*"));
    send(&client.force_unlock(name));
    send(&client.force_unlock_kind(LockKind::Mutex, name));
    send(&client.is_locked(name));

    // Once per period (once.rs).
    send(&client.claim_period(name, wait, SystemTime::now(), LockOptions::new()));

    // Fencing (fence.rs).
    send(&holdlock::fence::set(client, "k", "v", 1));
    send(&holdlock::fence::read(client, "k", 1));
    send(&holdlock::fence::set_with(&guard, "k", "v"));
    send(&holdlock::fence::read_with(&guard, "k"));
    send(&holdlock::fence::get(client, "k"));
    send(&holdlock::fence::newest_token(client, "k"));

    // Owners (owner.rs).
    send(&holdlock::owner_scope(async {}));

    // The guards' own async methods, the same on every guard (see `held_methods!`),
    // and the trait's, for code generic over the guards.
    send(&guard.remaining_ttl());
    guard_futures!(guard, read, write, permit, multi, leadership);
    send(&value::<Permit>().release());
    send(&value::<Leadership>().resign());

    // A won period's ends.
    send(&period.complete());
    send(&value::<PeriodClaim>().abandon());
}

/// The futures of the trait [`Held`].
#[allow(dead_code)]
fn held_futures<G: Held>(guard: &G) {
    send(&guard.lost());
    send(&guard.at_risk());
    send(&guard.extend(Duration::from_secs(1)));
}

/// A value of any type, for `_futures`, which is never called.
#[allow(dead_code)]
fn value<T>() -> T {
    unreachable!("type-checked only")
}

#[test]
fn guards_clients_and_handles_are_send_and_sync() {
    send_sync::<LockClient>();
    send_sync::<LockClientBuilder>();
    send_sync::<LockGuard>();
    send_sync::<ReadGuard>();
    send_sync::<WriteGuard>();
    send_sync::<Permit>();
    send_sync::<MultiGuard>();
    send_sync::<Leadership>();
    send_sync::<Semaphore>();
    send_sync::<Election>();
    send_sync::<LeaderChanges>();
    send_sync::<Claim>();
    send_sync::<PeriodClaim>();
    send_sync::<LockOptions>();
    send_sync::<LockError>();
    send_sync::<Compat>();
    send_sync::<LockKind>();
    send_sync::<LockInfo>();
    send_sync::<LockListing>();
    send_sync::<LockOwner>();
    send_sync::<FairInfo>();
    send_sync::<FairGrant>();
    send_sync::<FairWaiter>();
    send_sync::<ReadWriteInfo>();
    send_sync::<RwHolder>();
    send_sync::<SemaphoreInfo>();
    send_sync::<PermitHolder>();
    send_sync::<UnreadableLock>();
    send_sync::<LeaderInfo>();
    send_sync::<LeaderChange>();
    send_sync::<holdlock::fence::Fenced>();
}

/// The blocking client's types: its guards move between threads as the async ones do.
#[cfg(feature = "blocking")]
#[test]
fn blocking_types_are_send_and_sync() {
    use holdlock::blocking;

    send_sync::<blocking::LockClient>();
    send_sync::<blocking::LockClientBuilder>();
    send_sync::<blocking::Semaphore>();
    send_sync::<blocking::Claim>();
    send_sync::<blocking::PeriodClaim>();
    send_sync::<blocking::LockGuard>();
    send_sync::<blocking::ReadGuard>();
    send_sync::<blocking::WriteGuard>();
    send_sync::<blocking::MultiGuard>();
    send_sync::<blocking::Permit>();
    send_sync::<blocking::Guard<Leadership>>();
    // A request is `Send` (and `'static`): it can be made on one thread and blocked on
    // in another.
    send_owned::<blocking::Acquire<holdlock::acquire::Mutex>>();
    send_owned::<blocking::Acquire<holdlock::acquire::All, holdlock::acquire::Bounded>>();
    send_owned::<blocking::Acquire<holdlock::acquire::SemaphorePermit>>();
}

/// The tower layers and services, which servers clone into their worker threads.
#[cfg(feature = "tower")]
#[test]
fn tower_types_are_send_and_sync() {
    use holdlock::tower;

    type KeyOf = fn(&()) -> Option<String>;
    send_sync::<tower::LockLayer<KeyOf>>();
    send_sync::<tower::Lock<(), KeyOf>>();
    send_sync::<tower::ConcurrencyLimitLayer>();
    send_sync::<tower::ConcurrencyLimit<()>>();
    send_sync::<tower::OwnerScopeLayer>();
    send_sync::<tower::OwnerScope<()>>();
    send_sync::<tower::OwnerScopeFuture<std::future::Ready<()>>>();
    send_sync::<tower::RetryAfter>();
}

/// Every guard has the shared methods of its own: this module does not import the
/// trait `Held`, so it fails to compile if a guard lacks one of them.
#[allow(dead_code)]
mod without_the_trait {
    use std::time::Duration;

    use holdlock::{Leadership, LockGuard, MultiGuard, Permit, ReadGuard, WriteGuard};

    macro_rules! shared_methods {
        ($($guard:ty),*) => {$(
            let _ = |guard: $guard| async move {
                let _: bool = guard.is_lost();
                guard.lost().await;
                let _: bool = guard.is_at_risk();
                guard.at_risk().await;
                let _: Option<Duration> = guard.renewal_margin();
                let _ = guard.extend(Duration::from_secs(1)).await;
                let _ = guard.unlock().await;
            };
        )*};
    }

    fn every_guard() {
        shared_methods!(
            LockGuard, ReadGuard, WriteGuard, Permit, MultiGuard, Leadership
        );
    }
}
