//! Read-write locks: readers share, a writer excludes everyone, writers are not starved,
//! each reader expires on its own, re-entry and read-inside-write, `WouldDeadlock`,
//! the lost signal, cancellation and waking by message.

mod common;

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fred::interfaces::{HashesInterface, KeysInterface};
use holdlock::{LockClient, LockError};
use tokio::time::Instant;

common::on_every_topology!(
    readers_hold_the_lock_together,
    a_writer_never_overlaps_a_reader_or_another_writer,
    a_stream_of_readers_cannot_keep_a_waiting_writer_out,
    a_dead_readers_share_expires_within_its_lease_while_another_renews,
    a_writer_may_read_and_release_both_in_any_order,
    an_upgrade_is_refused_at_once,
    a_removed_lock_is_told_lost,
    cancelled_calls_leave_nothing_held,
    a_waiting_writer_wakes_on_the_last_readers_release,
    the_read_write_lock_and_the_mutex_of_a_name_are_apart,
);

/// The read-write lock's hash and leases keys under the default prefix.
fn rw_keys(name: &str) -> [String; 2] {
    let key = format!("{}:rw", common::key(name));
    [key.clone(), format!("{key}:leases")]
}

/// Eight readers over two clients, each holding 50 ms: more than one holds at once.
async fn readers_hold_the_lock_together(url: &str) {
    let name = common::unique("rw-share");
    let clients = [common::connect(url).await, common::connect(url).await];
    let (current, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut readers = Vec::new();
    for reader in 0..8 {
        let (client, name) = (clients[reader % 2].clone(), name.clone());
        let (current, most) = (Arc::clone(&current), Arc::clone(&most));
        readers.push(tokio::spawn(async move {
            let guard = client.read_lock(&name).await.unwrap();
            most.fetch_max(current.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            current.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    for reader in readers {
        reader.await.unwrap();
    }
    assert!(most.load(Ordering::SeqCst) > 1, "readers never overlapped");
}

/// 2 clients x 16 tasks, a fifth of the holds writes, for 2 s: a writer finds nobody
/// else inside, a reader finds no writer, and the counter the writers increment with
/// GET and SET ends at the number of writes.
async fn a_writer_never_overlaps_a_reader_or_another_writer(url: &str) {
    let name = common::unique("rw-exclude");
    let counter = format!("{name}:counter");
    let clients = [common::connect(url).await, common::connect(url).await];
    let (readers, writers) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let writes = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut tasks = Vec::new();
    for task in 0..32usize {
        let (client, name, counter) = (clients[task % 2].clone(), name.clone(), counter.clone());
        let (readers, writers, writes) = (readers.clone(), writers.clone(), writes.clone());
        tasks.push(tokio::spawn(async move {
            let mut round = task;
            while Instant::now() < deadline {
                round += 1;
                if round % 5 == 0 {
                    let guard = client.write_lock(&name).await.unwrap();
                    assert_eq!(writers.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                    assert_eq!(readers.load(Ordering::SeqCst), 0, "a writer among readers");
                    let value: Option<i64> = client.redis().get(&counter).await.unwrap();
                    tokio::task::yield_now().await;
                    let next = value.unwrap_or(0) + 1;
                    let _: () = client
                        .redis()
                        .set(&counter, next, None, None, false)
                        .await
                        .unwrap();
                    writes.fetch_add(1, Ordering::SeqCst);
                    writers.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                } else {
                    let guard = client.read_lock(&name).await.unwrap();
                    readers.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(writers.load(Ordering::SeqCst), 0, "a reader with a writer");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("stuck")
            .unwrap();
    }
    let value: Option<i64> = clients[0].redis().get(&counter).await.unwrap();
    let writes = writes.load(Ordering::SeqCst);
    assert!(writes > 5, "too few writes to judge: {writes}");
    assert_eq!(value, Some(writes as i64), "a write was lost");
}

/// Readers keep coming (each holding 30 ms, always some inside) for 3 s; a writer that
/// starts waiting after 300 ms gets in long before the stream ends.
async fn a_stream_of_readers_cannot_keep_a_waiting_writer_out(url: &str) {
    let name = common::unique("rw-preference");
    let clients = [common::connect(url).await, common::connect(url).await];
    let stream_ends = Instant::now() + Duration::from_secs(3);
    let mut readers = Vec::new();
    for reader in 0..8 {
        let (client, name) = (clients[reader % 2].clone(), name.clone());
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(reader as u64 * 5)).await;
            while Instant::now() < stream_ends {
                let guard = client.read_lock(&name).await.unwrap();
                tokio::time::sleep(Duration::from_millis(30)).await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writer = common::connect(url).await;
    let asked = Instant::now();
    let guard = writer.write_lock(&name).await.unwrap();
    let waited = asked.elapsed();
    guard.unlock().await.unwrap();
    assert!(
        waited < Duration::from_secs(1),
        "the writer waited {waited:?} for the readers"
    );
    for reader in readers {
        reader.await.unwrap();
    }
}

/// One reader dies (its runtime and connections vanish) while another keeps renewing
/// a 1 s lease: the dead reader's share is gone within about its lease, the living one
/// still holds, and a writer waiting for both gets in once the living one leaves.
async fn a_dead_readers_share_expires_within_its_lease_while_another_renews(url: &str) {
    let lease = Duration::from_secs(1);
    let name = common::unique("rw-dead-reader");
    let dead_owner = std::thread::spawn({
        let (url, name) = (url.to_owned(), name.clone());
        move || {
            let doomed = tokio::runtime::Runtime::new().unwrap();
            let owner = doomed.block_on(async {
                let client = LockClient::builder(&url)
                    .lease(lease)
                    .build()
                    .await
                    .unwrap();
                let guard = client.read_lock(&name).await.unwrap();
                let owner = guard.owner().to_owned();
                std::mem::forget(guard);
                std::mem::forget(client);
                owner
            });
            drop(doomed);
            owner
        }
    })
    .join()
    .unwrap();
    let living = common::client_with_lease(url, lease).await;
    let kept = living.read_lock(&name).await.unwrap();
    let writer_client = common::connect(url).await;
    let writer = tokio::spawn({
        let name = name.clone();
        async move { writer_client.write_lock(&name).await.unwrap() }
    });
    let [key, _] = rw_keys(&name);
    let start = Instant::now();
    loop {
        let share: Option<String> = living
            .redis()
            .hget(key.as_str(), dead_owner.as_str())
            .await
            .unwrap();
        if share.is_none() {
            break;
        }
        assert!(
            start.elapsed() < lease * 2,
            "the dead reader's share outlived its lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(lease).await;
    assert!(!kept.is_lost(), "the living reader's share expired");
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    kept.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(2), writer)
        .await
        .expect("writer")
        .unwrap();
    guard.unlock().await.unwrap();
}

/// The writer takes the read side too; with the write hold released first, the owner
/// still reads: other readers may join, writers may not.
async fn a_writer_may_read_and_release_both_in_any_order(url: &str) {
    let name = common::unique("rw-read-in-write");
    let (client, other) = (common::connect(url).await, common::connect(url).await);
    holdlock::owner_scope(async {
        let writing = client.write_lock(&name).await.unwrap();
        let reading = client.read_lock(&name).await.unwrap();
        let nested = client.write_lock(&name).await.unwrap();
        assert_eq!(nested.hold_count(), 2);
        nested.unlock().await.unwrap();
        assert!(
            other.read_lock(&name).try_now().await.unwrap().is_none(),
            "a writer holds"
        );
        writing.unlock().await.unwrap();
        other
            .read_lock(&name)
            .try_now()
            .await
            .unwrap()
            .expect("readers share")
            .unlock()
            .await
            .unwrap();
        assert!(
            other.write_lock(&name).try_now().await.unwrap().is_none(),
            "the owner still reads"
        );
        reading.unlock().await.unwrap();
    })
    .await;
    other
        .write_lock(&name)
        .try_now()
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();
}

/// An owner holding only the read side asks for the write side: `WouldDeadlock`, at
/// once, with nothing changed.
async fn an_upgrade_is_refused_at_once(url: &str) {
    let name = common::unique("rw-upgrade");
    let client = common::connect(url).await;
    holdlock::owner_scope(async {
        let reading = client.read_lock(&name).await.unwrap();
        let asked = Instant::now();
        match client.write_lock(&name).await {
            Err(LockError::WouldDeadlock { name: named }) => assert_eq!(named, name),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            client.write_lock(&name).try_now().await,
            Err(LockError::WouldDeadlock { .. })
        ));
        assert!(asked.elapsed() < Duration::from_millis(500));
        assert_eq!(reading.hold_count(), 1);
        reading.unlock().await.unwrap();
    })
    .await;
}

/// Deleting the lock's keys makes each holder's next renewal fail: the guard is told.
async fn a_removed_lock_is_told_lost(url: &str) {
    let name = common::unique("rw-lost");
    let client = common::client_with_lease(url, Duration::from_secs(3)).await;
    let reading = client.read_lock(&name).await.unwrap();
    for key in rw_keys(&name) {
        let _: i64 = client.redis().del(key.as_str()).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(5), reading.lost())
        .await
        .expect("told lost");
    assert!(matches!(
        reading.unlock().await,
        Err(LockError::NotHeld { .. })
    ));
}

/// `write_lock()` and `read_lock()` futures polled once and dropped, and one dropped
/// while it waits, leave nothing held.
async fn cancelled_calls_leave_nothing_held(url: &str) {
    let name = common::unique("rw-cancel");
    let client = common::connect(url).await;
    for round in 0..40 {
        if round % 2 == 0 {
            let mut call = Box::pin(client.write_lock(&name).into_future());
            let _ = futures::poll!(&mut call);
        } else {
            let mut call = Box::pin(client.read_lock(&name).into_future());
            let _ = futures::poll!(&mut call);
        }
    }
    let holder = common::connect(url).await;
    let start = Instant::now();
    let held = loop {
        if let Some(held) = holder.write_lock(&name).try_now().await.unwrap() {
            break held;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "a cancelled call kept its hold"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let waited = tokio::time::timeout(Duration::from_millis(100), client.read_lock(&name)).await;
    assert!(waited.is_err(), "a writer holds");
    held.unlock().await.unwrap();
    let [key, leases] = rw_keys(&name);
    let start = Instant::now();
    loop {
        let exists: i64 = client
            .redis()
            .exists(vec![key.as_str(), leases.as_str()])
            .await
            .unwrap();
        if exists == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "a cancelled call left a hold"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two readers hold on a 20 s lease; a writer waits; it is woken within 50 ms of the
/// last reader's release (a message, not the lease or a poll).
async fn a_waiting_writer_wakes_on_the_last_readers_release(url: &str) {
    let name = common::unique("rw-wake");
    let readers = common::client_with_lease(url, Duration::from_secs(20)).await;
    let first = read_as_another_owner(&readers, &name).await;
    let second = read_as_another_owner(&readers, &name).await;
    let writer_client = common::connect(url).await;
    let writer = tokio::spawn({
        let name = name.clone();
        async move {
            let guard = writer_client.write_lock(&name).await.unwrap();
            (Instant::now(), guard)
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writer.is_finished(), "a reader still holds");
    let released = Instant::now();
    second.unlock().await.unwrap();
    let (woke, guard) = writer.await.unwrap();
    let after = woke.duration_since(released);
    assert!(
        after < Duration::from_millis(50),
        "woke {after:?} after the release"
    );
    guard.unlock().await.unwrap();
}

/// Takes the read side of `name` in a task of its own (another owner).
async fn read_as_another_owner(client: &LockClient, name: &str) -> holdlock::ReadGuard {
    let (client, name) = (client.clone(), name.to_owned());
    tokio::spawn(async move { client.read_lock(&name).await.unwrap() })
        .await
        .unwrap()
}

/// The read-write lock `x` and the mutex `x` are different locks.
async fn the_read_write_lock_and_the_mutex_of_a_name_are_apart(url: &str) {
    let name = common::unique("rw-apart");
    let (client, other) = (common::connect(url).await, common::connect(url).await);
    let writing = client.write_lock(&name).await.unwrap();
    other
        .lock(&name)
        .try_now()
        .await
        .unwrap()
        .expect("the mutex is free")
        .unlock()
        .await
        .unwrap();
    writing.unlock().await.unwrap();
}
