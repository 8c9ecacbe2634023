//! Semaphores with expiring permits: at most N holders, each permit renewed and
//! expiring on its own, waiting by pub/sub, typed errors, nothing left by cancellation.

mod common;

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fred::interfaces::KeysInterface;
use holdlock::{LockClient, LockError};
use tokio::time::Instant;

common::on_every_topology!(
    at_most_n_permits_are_held_and_n_is_reached,
    a_dead_holders_permit_comes_back_within_its_lease_while_others_renew,
    a_removed_permit_is_told_lost,
    available_counts_the_free_permits,
    bad_permit_numbers_are_typed_errors_and_change_nothing,
    a_waiter_wakes_when_a_permit_is_given_back_not_at_the_lease,
    a_cancelled_acquire_leaves_no_permit_taken,
    permits_are_not_reentrant,
);

/// The semaphore's hash and leases keys under the default prefix.
fn semaphore_keys(name: &str) -> [String; 2] {
    let key = format!("{}:sem", common::key(name));
    [key.clone(), format!("{key}:leases")]
}

/// 2 clients x 16 tasks on 5 permits for 2 s: never more than 5 holders, and 5 at
/// some point.
async fn at_most_n_permits_are_held_and_n_is_reached(url: &str) {
    let name = common::unique("sem-bound");
    let clients = [common::connect(url).await, common::connect(url).await];
    let (current, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut tasks = Vec::new();
    for worker in 0..32 {
        let semaphore = clients[worker % 2].semaphore(name.clone(), 5);
        let (current, most) = (Arc::clone(&current), Arc::clone(&most));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let permit = semaphore.acquire().await.unwrap();
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5 + worker as u64 % 5)).await;
                current.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a task is stuck")
            .unwrap();
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        5,
        "the bound was passed or never reached"
    );
    assert_eq!(
        clients[0]
            .semaphore(name.clone(), 5)
            .available()
            .await
            .unwrap(),
        5
    );
    for key in semaphore_keys(&name) {
        let exists: i64 = clients[0].redis().exists(key.as_str()).await.unwrap();
        assert_eq!(exists, 0, "{key} left behind");
    }
}

/// Two permits: one holder dies (its runtime and connections vanish), the other keeps
/// renewing a 1 s lease. A third caller gets the dead holder's permit within about a
/// lease, while the living holder keeps its own.
async fn a_dead_holders_permit_comes_back_within_its_lease_while_others_renew(url: &str) {
    let lease = Duration::from_secs(1);
    let name = common::unique("sem-crash");
    std::thread::spawn({
        let (url, name) = (url.to_owned(), name.clone());
        move || {
            let doomed = tokio::runtime::Runtime::new().unwrap();
            let permit = doomed.block_on(async {
                let client = LockClient::builder(&url)
                    .lease(lease)
                    .build()
                    .await
                    .unwrap();
                client.semaphore(name, 2).acquire().await.unwrap()
            });
            std::mem::forget(permit);
            drop(doomed);
        }
    })
    .join()
    .unwrap();
    let living = common::client_with_lease(url, lease).await;
    let kept = living.semaphore(name.clone(), 2).acquire().await.unwrap();
    let third = common::client_with_lease(url, lease).await;
    let semaphore = third.semaphore(name.clone(), 2);
    assert!(
        semaphore.acquire().try_now().await.unwrap().is_none(),
        "both permits are held"
    );
    let asked = Instant::now();
    let permit = tokio::time::timeout(lease * 3, semaphore.acquire())
        .await
        .expect("the dead holder's permit came back")
        .unwrap();
    assert!(
        asked.elapsed() <= lease + Duration::from_millis(500),
        "took {:?}",
        asked.elapsed()
    );
    // The living holder renewed through all of it (three of its leases by now).
    tokio::time::sleep(lease * 2).await;
    assert!(!kept.is_lost(), "the living holder's permit expired");
    assert_eq!(semaphore.available().await.unwrap(), 0);
    permit.release().await.unwrap();
    kept.release().await.unwrap();
}

/// Deleting the semaphore's keys (an operator's force) makes the holder's next
/// renewal fail: the permit is told lost.
async fn a_removed_permit_is_told_lost(url: &str) {
    let name = common::unique("sem-lost");
    let client = common::client_with_lease(url, Duration::from_secs(3)).await;
    let permit = client.semaphore(name.clone(), 3).acquire().await.unwrap();
    for key in semaphore_keys(&name) {
        let _: i64 = client.redis().del(key.as_str()).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(5), permit.lost())
        .await
        .expect("the loss is told at the next renewal");
    assert!(permit.is_lost());
    assert!(matches!(
        permit.release().await,
        Err(LockError::NotHeld { .. })
    ));
}

/// `available()` follows acquisitions and releases.
async fn available_counts_the_free_permits(url: &str) {
    let name = common::unique("sem-available");
    let client = common::connect(url).await;
    let semaphore = client.semaphore(name.clone(), 3);
    assert_eq!(semaphore.available().await.unwrap(), 3);
    let first = semaphore.acquire().await.unwrap();
    let second = semaphore.acquire().try_now().await.unwrap().unwrap();
    assert_eq!(semaphore.available().await.unwrap(), 1);
    assert_ne!(first.id(), second.id());
    first.release().await.unwrap();
    assert_eq!(semaphore.available().await.unwrap(), 2);
    drop(second); // given back in the background
    let start = Instant::now();
    while semaphore.available().await.unwrap() != 3 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the dropped permit stayed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// No permits at all, or another number than the semaphore is held with, is an
/// `InvalidOption` error that takes nothing.
async fn bad_permit_numbers_are_typed_errors_and_change_nothing(url: &str) {
    let name = common::unique("sem-bad");
    let client = common::connect(url).await;
    for result in [
        client.semaphore(name.clone(), 0).acquire().await.map(drop),
        client
            .semaphore(name.clone(), 0)
            .available()
            .await
            .map(drop),
    ] {
        assert!(
            matches!(
                result,
                Err(LockError::InvalidOption {
                    option: "permits",
                    ..
                })
            ),
            "{result:?}"
        );
    }
    let held = client.semaphore(name.clone(), 5).acquire().await.unwrap();
    match client.semaphore(name.clone(), 3).acquire().try_now().await {
        Err(LockError::InvalidOption {
            option: "permits",
            reason,
        }) => {
            assert!(reason.contains('5'), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        client.semaphore(name.clone(), 5).available().await.unwrap(),
        4
    );
    match client.semaphore("a{b}", 2).acquire().await {
        Err(LockError::InvalidName { .. }) => {}
        other => panic!("{other:?}"),
    }
    held.release().await.unwrap();
}

/// With the only permit held on a 20 s lease, a waiter wakes within 50 ms of the
/// release (a message, not a poll or the lease running out).
async fn a_waiter_wakes_when_a_permit_is_given_back_not_at_the_lease(url: &str) {
    let name = common::unique("sem-wake");
    let holder_client = common::client_with_lease(url, Duration::from_secs(20)).await;
    let held = holder_client
        .semaphore(name.clone(), 1)
        .acquire()
        .await
        .unwrap();
    let waiter_client = common::connect(url).await;
    let semaphore = waiter_client.semaphore(name.clone(), 1);
    let waiter = tokio::spawn(async move {
        let permit = semaphore.acquire().await.unwrap();
        (Instant::now(), permit)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the permit is held");
    let released = Instant::now();
    held.release().await.unwrap();
    let (woke, permit) = waiter.await.unwrap();
    let after = woke.duration_since(released);
    assert!(
        after < Duration::from_millis(50),
        "woke {after:?} after the release"
    );
    permit.release().await.unwrap();
}

/// An `acquire()` dropped while it waits, and one dropped right after it was sent,
/// leave every permit free.
async fn a_cancelled_acquire_leaves_no_permit_taken(url: &str) {
    let name = common::unique("sem-cancel");
    let client = common::connect(url).await;
    let semaphore = client.semaphore(name.clone(), 1);
    let held = semaphore.acquire().await.unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(100), semaphore.acquire()).await;
    assert!(waited.is_err(), "the only permit is held");
    held.release().await.unwrap();
    for _ in 0..50 {
        // Polled once: the script is sent, then the future is dropped.
        let mut acquire = Box::pin(semaphore.acquire().into_future());
        let _ = futures::poll!(&mut acquire);
        drop(acquire);
    }
    let start = Instant::now();
    while semaphore.available().await.unwrap() != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "a cancelled acquire kept a permit"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    semaphore
        .acquire()
        .try_now()
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();
}

/// A second `acquire` by the same task takes a second permit: with one permit, it is
/// refused.
async fn permits_are_not_reentrant(url: &str) {
    let name = common::unique("sem-not-reentrant");
    let client = common::connect(url).await;
    let semaphore = client.semaphore(name.clone(), 1);
    let first = semaphore.acquire().await.unwrap();
    assert!(semaphore.acquire().try_now().await.unwrap().is_none());
    first.release().await.unwrap();
}
