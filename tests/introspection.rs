//! Looking at locks and breaking them on purpose.

mod common;

use std::time::{Duration, Instant};

use holdlock::{LockClient, LockInfo, LockKind, LockOptions};

#[tokio::test(flavor = "multi_thread")]
async fn inspect_shows_owner_count_ttl_and_token() {
    let client = LockClient::builder(common::url())
        .lease(Duration::from_secs(10))
        .fencing(true)
        .build()
        .await
        .unwrap();
    let name = common::unique("inspect");
    assert!(client.inspect(&name).await.unwrap().is_none());
    let a = client.lock(&name).await.unwrap();
    let b = client.lock(&name).await.unwrap();
    // Another process was refused: word that it waits is kept in the lock, but it is
    // no owner.
    let other = common::client().await;
    assert!(other.lock(&name).try_now().await.unwrap().is_none());
    let info = client.inspect(&name).await.unwrap().expect("held");
    assert_eq!(info.name, name);
    assert_eq!(info.owners.len(), 1);
    assert_eq!(info.owners[0].id, a.owner());
    assert_eq!(info.owners[0].hold_count, 2);
    let ttl = info.ttl.unwrap();
    assert!(
        ttl > Duration::from_secs(8) && ttl <= Duration::from_secs(10),
        "{ttl:?}"
    );
    assert_eq!(info.fencing_token, a.fencing_token());
    assert!(client.is_locked(&name).await.unwrap());
    let remaining = b.remaining_ttl().await.unwrap().unwrap();
    assert!(remaining <= Duration::from_secs(10));
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread")]
async fn list_scans_by_pattern_and_skips_other_keys() {
    let prefix = format!("list-{}:", uuid::Uuid::new_v4().simple());
    let client = LockClient::builder(common::url())
        .prefix(&prefix)
        .fencing(true)
        .build()
        .await
        .unwrap();
    let mut guards = Vec::new();
    for name in ["job:a", "job:b", "account:1"] {
        guards.push(client.lock(name).await.unwrap());
    }
    let mut jobs: Vec<String> = client
        .list("job:*")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    jobs.sort();
    assert_eq!(jobs, ["job:a", "job:b"]);
    // The token counters (strings) are not listed as locks.
    assert_eq!(client.list("*").await.unwrap().len(), 3);
    drop(guards);
    let start = Instant::now();
    while !client.list("*").await.unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn force_unlock_frees_the_lock_wakes_waiters_and_the_holder_learns_it_lost() {
    let holder = LockClient::builder(common::url())
        .lease(Duration::from_millis(900))
        .build()
        .await
        .unwrap();
    let waiter = common::client().await;
    let operator = common::client().await;
    let name = common::unique("force");
    let guard = holder.lock(&name).await.unwrap();
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move {
            let got = waiter.lock(&name).await.unwrap();
            (Instant::now(), got)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let broke_at = Instant::now();
    assert!(operator.force_unlock(&name).await.unwrap());
    let (woke_at, got) = waiting.await.unwrap();
    assert!(
        woke_at - broke_at < Duration::from_millis(100),
        "waiter was not woken"
    );
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("holder never learned");
    assert!(matches!(
        guard.unlock().await,
        Err(holdlock::LockError::NotHeld { .. })
    ));
    assert!(
        operator.is_locked(&name).await.unwrap(),
        "the stale unlock did not free the new holder's lock"
    );
    got.unlock().await.unwrap();
    assert!(
        !operator.force_unlock(&name).await.unwrap(),
        "nothing left to break"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn list_leaves_out_keys_that_are_not_locks_and_reports_them() {
    use fred::interfaces::{HashesInterface, KeysInterface};
    use holdlock::LockError;
    let prefix = format!("list-{}:", uuid::Uuid::new_v4().simple());
    let client = LockClient::builder(common::url())
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let guards = [
        client.lock("job:a").await.unwrap(),
        client.lock("job:b").await.unwrap(),
    ];
    let raw = common::raw(&common::url()).await;
    let (string, foreign, empty) = (
        format!("{prefix}{{job:string}}"),
        format!("{prefix}{{job:foreign}}"),
        format!("{prefix}{{}}"),
    );
    let _: () = raw
        .set(string.as_str(), "x", None, None, false)
        .await
        .unwrap();
    let _: () = raw.hset(foreign.as_str(), ("owner", "abc")).await.unwrap();
    let _: () = raw.hset(empty.as_str(), ("owner", "1")).await.unwrap();

    let listing = client.list_report("*").await.unwrap();
    let names: Vec<&str> = listing
        .locks
        .iter()
        .map(|info| info.name.as_str())
        .collect();
    assert_eq!(names, ["job:a", "job:b"]);
    let keys: Vec<&str> = listing
        .unreadable
        .iter()
        .map(|bad| bad.key.as_str())
        .collect();
    // Sorted by key (`}` sorts after letters).
    assert_eq!(keys, [foreign.as_str(), string.as_str(), empty.as_str()]);
    let [not_ours, wrong_type, empty_name] = &listing.unreadable[..] else {
        panic!("{:?}", listing.unreadable);
    };
    assert!(
        matches!(&empty_name.error, LockError::InvalidName { .. }),
        "{empty_name:?}"
    );
    assert_eq!(empty_name.name, "");
    assert!(
        matches!(&not_ours.error, LockError::Protocol(_)),
        "{not_ours:?}"
    );
    assert_eq!(not_ours.name, "job:foreign");
    assert!(
        matches!(&wrong_type.error, LockError::WrongType { key } if *key == string),
        "{wrong_type:?}"
    );

    // `list` returns the readable locks alone.
    let names: Vec<String> = client
        .list("job:*")
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.name)
        .collect();
    assert_eq!(names, ["job:a", "job:b"]);
    drop(guards);
}

/// With the `serde` feature, a lock's snapshot serializes with its TTL in whole
/// milliseconds (`ttl_ms`, the CLI's schema) and reads back equal.
#[cfg(feature = "serde")]
#[tokio::test(flavor = "multi_thread")]
async fn lock_info_serializes_and_reads_back() {
    let client = common::client().await;
    let name = common::unique("serde");
    let guard = client
        .lock(&name)
        .options(holdlock::LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let info = client.inspect(&name).await.unwrap().expect("held");
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["name"], name.as_str());
    assert_eq!(json["owners"][0]["id"], guard.owner());
    assert_eq!(json["owners"][0]["hold_count"], 1);
    assert!(json["ttl_ms"].as_u64().is_some_and(|ms| ms > 0), "{json}");
    assert_eq!(json["fencing_token"], guard.fencing_token().unwrap());
    let back: holdlock::LockInfo = serde_json::from_value(json).unwrap();
    assert_eq!(back, info);
    let listing = serde_json::to_value(client.list_report(&name).await.unwrap()).unwrap();
    assert_eq!(listing["locks"][0]["name"], name.as_str());
    assert_eq!(listing["unreadable"], serde_json::json!([]));
    guard.unlock().await.unwrap();
}

common::on_every_topology!(
    a_read_write_lock_shows_its_writer_its_readers_and_a_waiting_writer,
    a_fair_lock_shows_its_queue_in_order_and_its_hand_off,
    a_semaphore_shows_its_permits_and_their_holders,
    each_kind_of_one_name_is_inspected_apart,
    list_shows_every_kind_and_a_fair_queue_without_a_holder,
    force_unlock_of_a_fair_lock_hands_it_to_the_first_waiter,
    force_unlock_of_a_semaphore_frees_every_permit_and_wakes_waiters,
    force_unlock_of_a_read_write_lock_frees_readers_and_writer,
    data_kept_with_a_hold_is_shown_for_every_kind_and_goes_with_it,
    every_kinds_holder_is_told_of_a_force_unlock_at_once,
    a_new_clients_first_hold_is_told_of_a_force_unlock,
);

/// `build()` returns once the client listens on its own channel: the first hold of a
/// client just built is told of a force-unlock at once. (When the subscription was
/// made in the background, or confirmed only by fred, which resolves `SUBSCRIBE` once
/// handed to the connection, a force-unlock right after the build could come before
/// it: about one run in four under load, and the holder heard only at its renewal.)
async fn a_new_clients_first_hold_is_told_of_a_force_unlock(url: &str) {
    let operator = common::connect(url).await;
    let window = notice_window(url);
    for round in 0..16 {
        let holder = common::client_with_lease(url, NOTICE_TEST_LEASE).await;
        let name = common::unique("told-first");
        let guard = holder.lock(&name).await.unwrap();
        assert!(operator.force_unlock(&name).await.unwrap());
        tokio::time::timeout(window, guard.lost())
            .await
            .unwrap_or_else(|_| {
                panic!("round {round}: the new holder was not told within {window:?}")
            });
        holder.shutdown().await;
    }
}

/// The lease of the holders the force-unlock notice tests make: renewed every 2 s, so
/// a hold that hears within 1 s heard the notice, not its renewal.
const NOTICE_TEST_LEASE: Duration = Duration::from_secs(6);

/// How soon a holder of [`NOTICE_TEST_LEASE`] hears of a force-unlock: within 1 s
/// (the notice), or where the server can drop the notice (see
/// `common::drops_cluster_publishes`) by its next renewal, 2 s on, and a second.
fn notice_window(url: &str) -> Duration {
    match common::drops_cluster_publishes(url) {
        true => NOTICE_TEST_LEASE / 3 + Duration::from_secs(1),
        false => Duration::from_secs(1),
    }
}

/// A force-unlock tells the holder's client on its own channel: every kind's guard is
/// lost within a round trip or two, not at its next renewal (10 s away with a 30 s
/// lease), and a hold the same client takes right after is left alone.
async fn every_kinds_holder_is_told_of_a_force_unlock_at_once(url: &str) {
    use holdlock::{Compat, Held};
    async fn told<G: Held>(what: &str, guard: &G, window: Duration) {
        tokio::time::timeout(window, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{what}: the holder was not told within {window:?}"));
    }
    let window = notice_window(url);
    let holder = common::client_with_lease(url, NOTICE_TEST_LEASE).await;
    let operator = common::connect(url).await;

    let name = common::unique("told-mutex");
    let guard = holder.lock(&name).await.unwrap();
    assert!(operator.force_unlock(&name).await.unwrap());
    told("mutex", &guard, window).await;
    // A hold taken after the force-unlock (another task of the same client) stays.
    let again = common::lock_as_another_owner(&holder, &name).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !again.is_lost(),
        "a hold taken after the force-unlock was marked lost"
    );
    again.unlock().await.unwrap();

    let name = common::unique("told-fair");
    let guard = holder.fair_lock(&name).await.unwrap();
    assert!(
        operator
            .force_unlock_kind(LockKind::Fair, &name)
            .await
            .unwrap()
    );
    told("fair lock", &guard, window).await;

    let name = common::unique("told-write");
    let guard = holder.write_lock(&name).await.unwrap();
    assert!(
        operator
            .force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
    told("write lock", &guard, window).await;

    let name = common::unique("told-read");
    let first = holder.read_lock(&name).await.unwrap();
    let second = {
        let (holder, name) = (holder.clone(), name.clone());
        tokio::spawn(async move { holder.read_lock(&name).await.unwrap() })
            .await
            .unwrap()
    };
    assert!(
        operator
            .force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
    told("read lock", &first, window).await;
    told("second reader", &second, window).await;

    let name = common::unique("told-semaphore");
    let permit = holder.semaphore(&name, 2).acquire().await.unwrap();
    assert!(
        operator
            .force_unlock_kind(LockKind::Semaphore, &name)
            .await
            .unwrap()
    );
    told("semaphore permit", &permit, window).await;

    let redisson = |url: &str| {
        LockClient::builder(url)
            .compat(Compat::Redisson)
            .lease(NOTICE_TEST_LEASE)
            .build()
    };
    let (holder, operator) = (redisson(url).await.unwrap(), redisson(url).await.unwrap());
    let name = common::unique("told-redisson");
    let guard = holder.lock(&name).await.unwrap();
    assert!(operator.force_unlock(&name).await.unwrap());
    told("redisson mutex", &guard, window).await;
}

/// Takes a fair lock in a task of its own (its own owner), after sending that owner id
/// back; the task returns the guard.
async fn queue_for_fair(
    client: &LockClient,
    name: &str,
) -> (String, tokio::task::JoinHandle<holdlock::LockGuard>) {
    let (client, name) = (client.clone(), name.to_owned());
    let (owner_tx, owner_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let _ = owner_tx.send(client.owner_id());
        client.fair_lock(&name).await.unwrap()
    });
    (owner_rx.await.unwrap(), task)
}

/// Polls `inspect_kind` until `ready` holds of the snapshot (or 5 s pass).
async fn inspect_until(
    client: &LockClient,
    kind: LockKind,
    name: &str,
    ready: impl Fn(&Option<LockInfo>) -> bool,
) -> Option<LockInfo> {
    let start = Instant::now();
    loop {
        let info = client.inspect_kind(kind, name).await.unwrap();
        if ready(&info) {
            return info;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{name} ({kind}) never got there: {info:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two readers (each with its own lease) and a writer that waits for them; then a
/// writer that also reads: `inspect_kind(ReadWrite)` shows each with its holds and
/// lease, and the waiting writer.
async fn a_read_write_lock_shows_its_writer_its_readers_and_a_waiting_writer(url: &str) {
    let client = common::client_with_lease(url, Duration::from_secs(10)).await;
    let name = common::unique("inspect-rw");
    let long = LockOptions::new().lease(Duration::from_secs(20));
    let first = client.read_lock(&name).await.unwrap();
    let second = {
        let (client, name, long) = (client.clone(), name.clone(), long.clone());
        tokio::spawn(async move {
            client
                .read_lock(&name)
                .options(long)
                .await
                .unwrap()
                .unwrap()
        })
        .await
        .unwrap()
    };
    // The writer waits, then (the same owner) also takes the read side.
    let writer_client = common::connect(url).await;
    let writer = {
        let name = name.clone();
        tokio::spawn(async move {
            let writing = writer_client.write_lock(&name).await.unwrap();
            let reading = writer_client.read_lock(&name).await.unwrap();
            (writing, reading)
        })
    };
    let info = inspect_until(&client, LockKind::ReadWrite, &name, |info| {
        info.as_ref()
            .and_then(|info| info.read_write.as_ref())
            .is_some_and(|rw| rw.writer_waiting)
    })
    .await
    .unwrap();
    assert_eq!(info.kind, LockKind::ReadWrite);
    assert!(info.waiting, "{info:#?}");
    assert!(info.fair.is_none() && info.semaphore.is_none(), "{info:#?}");
    let rw = info.read_write.as_ref().unwrap();
    assert!(rw.writer.is_none(), "{rw:#?}");
    let mut expected = vec![
        (first.owner().to_owned(), Duration::from_secs(10)),
        (second.owner().to_owned(), Duration::from_secs(20)),
    ];
    expected.sort();
    assert_eq!(rw.readers.len(), 2, "{rw:#?}");
    for (reader, (owner, lease)) in rw.readers.iter().zip(&expected) {
        assert_eq!(&reader.owner, owner);
        assert_eq!(reader.hold_count, 1);
        let left = reader.lease.expect("a lease");
        assert!(
            left <= *lease && left > *lease - Duration::from_secs(2),
            "{rw:#?}"
        );
    }
    assert_eq!(info.owners.len(), 2, "{info:#?}");
    assert!(
        info.ttl.unwrap() > Duration::from_secs(18),
        "the longest lease: {info:#?}"
    );
    // Neither is a mutex.
    assert!(client.inspect(&name).await.unwrap().is_none());

    first.unlock().await.unwrap();
    second.unlock().await.unwrap();
    let (writing, reading) = tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .expect("the writer got in")
        .unwrap();
    let owner = writing.owner().to_owned();
    let info = client
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap()
        .expect("written");
    assert_eq!(info.owners.len(), 1, "{info:#?}");
    assert_eq!(
        (info.owners[0].id.as_str(), info.owners[0].hold_count),
        (owner.as_str(), 2),
        "its read and write holds together: {info:#?}"
    );
    let rw = info.read_write.unwrap();
    let writer = rw.writer.expect("a writer");
    assert_eq!(
        (writer.owner.as_str(), writer.hold_count),
        (owner.as_str(), 1)
    );
    assert!(writer.lease.is_some());
    assert_eq!(rw.readers.len(), 1);
    assert_eq!(rw.readers[0].owner, owner);
    assert!(!rw.writer_waiting);
    reading.unlock().await.unwrap();
    writing.unlock().await.unwrap();
    assert!(
        client
            .inspect_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
            .is_none()
    );
}

/// A holder and two waiters that queued one after the other: the queue in order,
/// with how long each has waited; after a force-unlock hands the lock on, the grant
/// names the first waiter's wait.
async fn a_fair_lock_shows_its_queue_in_order_and_its_hand_off(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("inspect-fair");
    let held = client.fair_lock(&name).await.unwrap();
    let waiters = common::connect(url).await;
    let (first, first_task) = queue_for_fair(&waiters, &name).await;
    inspect_until(&client, LockKind::Fair, &name, |info| {
        info.as_ref()
            .is_some_and(|info| info.fair.as_ref().is_some_and(|f| f.queue.len() == 1))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (second, second_task) = queue_for_fair(&waiters, &name).await;
    let info = inspect_until(&client, LockKind::Fair, &name, |info| {
        info.as_ref()
            .is_some_and(|info| info.fair.as_ref().is_some_and(|f| f.queue.len() == 2))
    })
    .await
    .unwrap();
    assert_eq!(info.kind, LockKind::Fair);
    assert!(info.waiting);
    assert_eq!(info.owners.len(), 1);
    assert_eq!(info.owners[0].id, held.owner());
    assert!(info.ttl.is_some());
    let fair = info.fair.unwrap();
    assert!(fair.grant.is_none(), "{fair:#?}");
    let queued: Vec<&str> = fair.queue.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(queued, [first.as_str(), second.as_str()], "in order");
    assert!(fair.queue[0].since_us < fair.queue[1].since_us, "{fair:#?}");
    assert!(fair.queue[0].waited > fair.queue[1].waited, "{fair:#?}");
    assert!(fair.queue.iter().all(|w| w.wait.is_some()), "{fair:#?}");
    // Apart from the mutex of the same name.
    assert!(client.inspect(&name).await.unwrap().is_none());

    assert!(
        client
            .force_unlock_kind(LockKind::Fair, &name)
            .await
            .unwrap()
    );
    let info = client
        .inspect_kind(LockKind::Fair, &name)
        .await
        .unwrap()
        .expect("handed on");
    let fair = info.fair.unwrap();
    let grant = fair.grant.expect("handed to the first wait");
    assert_eq!(grant.owner, first);
    assert!(grant.wait.is_some());
    assert!(
        grant
            .claim_window
            .is_some_and(|left| left <= Duration::from_secs(2)),
        "{grant:?}"
    );
    let queued: Vec<&str> = fair.queue.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(queued, [second.as_str()]);
    assert_eq!(info.owners[0].id, first);
    let got = tokio::time::timeout(Duration::from_secs(5), first_task)
        .await
        .expect("the first waiter got it")
        .unwrap();
    got.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), second_task)
        .await
        .expect("then the second")
        .unwrap();
    got.unlock().await.unwrap();
    drop(held);
}

/// Two of three permits held (one owner holding both): the count, each permit's id,
/// holder and lease.
async fn a_semaphore_shows_its_permits_and_their_holders(url: &str) {
    let client = common::client_with_lease(url, Duration::from_secs(10)).await;
    let name = common::unique("inspect-sem");
    let semaphore = client.semaphore(&name, 3);
    let a = semaphore.acquire().await.unwrap();
    let b = semaphore.acquire().await.unwrap();
    let info = client
        .inspect_kind(LockKind::Semaphore, &name)
        .await
        .unwrap()
        .expect("held");
    assert_eq!(info.kind, LockKind::Semaphore);
    assert!(info.fencing_token.is_none() && !info.waiting);
    let held = info.semaphore.as_ref().unwrap();
    assert_eq!(held.permits, 3);
    let mut ids = vec![a.id().to_owned(), b.id().to_owned()];
    ids.sort();
    let seen: Vec<&str> = held.held.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(seen, ids);
    let owner = client.owner_id();
    for permit in &held.held {
        assert_eq!(permit.owner, owner);
        let left = permit.lease.expect("a lease");
        assert!(left <= Duration::from_secs(10) && left > Duration::from_secs(8));
    }
    assert_eq!(info.owners.len(), 1);
    assert_eq!(
        (info.owners[0].id.as_str(), info.owners[0].hold_count),
        (owner.as_str(), 2)
    );
    a.release().await.unwrap();
    b.release().await.unwrap();
    assert!(
        client
            .inspect_kind(LockKind::Semaphore, &name)
            .await
            .unwrap()
            .is_none()
    );
}

/// A mutex, a fair lock, a read-write lock and a semaphore all named alike: each kind
/// is inspected (and force-unlocked) on its own.
async fn each_kind_of_one_name_is_inspected_apart(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("inspect-apart");
    let mutex = client.lock(&name).await.unwrap();
    let fair = common::connect(url).await.fair_lock(&name).await.unwrap();
    let reading = common::connect(url).await.read_lock(&name).await.unwrap();
    let permit = common::connect(url)
        .await
        .semaphore(&name, 2)
        .acquire()
        .await
        .unwrap();
    let owners = [
        (LockKind::Mutex, mutex.owner().to_owned()),
        (LockKind::Fair, fair.owner().to_owned()),
        (LockKind::ReadWrite, reading.owner().to_owned()),
        (
            LockKind::Semaphore,
            permit.id().rsplit_once(':').unwrap().0.to_owned(),
        ),
    ];
    for (kind, owner) in &owners {
        let info = client.inspect_kind(*kind, &name).await.unwrap().unwrap();
        assert_eq!(info.kind, *kind);
        assert_eq!(info.name, name);
        let ids: Vec<&str> = info.owners.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, [owner.as_str()], "{kind}");
    }
    let (plain, mutex_kind) = (
        client.inspect(&name).await.unwrap().unwrap(),
        client
            .inspect_kind(LockKind::Mutex, &name)
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(
        (plain.kind, plain.owners),
        (mutex_kind.kind, mutex_kind.owners)
    );
    // Breaking one kind leaves the others alone.
    assert!(
        client
            .force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
    assert!(
        client
            .inspect_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
            .is_none()
    );
    for kind in [LockKind::Mutex, LockKind::Fair, LockKind::Semaphore] {
        assert!(client.inspect_kind(kind, &name).await.unwrap().is_some());
    }
    assert!(
        !client
            .force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap(),
        "nothing left to break"
    );
    mutex.unlock().await.unwrap();
    fair.unlock().await.unwrap();
    permit.release().await.unwrap();
    drop(reading);
}

/// Under a prefix of its own: locks of every kind, listed sorted by name then kind;
/// a fair queue whose holder's key is gone is listed too, with nobody owning it.
async fn list_shows_every_kind_and_a_fair_queue_without_a_holder(url: &str) {
    use fred::interfaces::KeysInterface;
    let prefix = format!("list-{}:", uuid::Uuid::new_v4().simple());
    let client = LockClient::builder(url)
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let mutex = client.lock("a").await.unwrap();
    let fair = client.fair_lock("a").await.unwrap();
    let writing = client.write_lock("b").await.unwrap();
    let permit = client.semaphore("c", 4).acquire().await.unwrap();
    let queued = client.fair_lock("d").await.unwrap();
    let waiters = LockClient::builder(url)
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let (waiter, waiting) = queue_for_fair(&waiters, "d").await;
    inspect_until(&client, LockKind::Fair, "d", |info| {
        info.as_ref().is_some_and(|info| info.waiting)
    })
    .await;
    // The holder's key vanishes (as when a hand-off expires unclaimed): the queue stays.
    let raw = common::raw(url).await;
    let _: i64 = raw.del(format!("{prefix}{{d}}:fair")).await.unwrap();

    let listing = client.list_report("*").await.unwrap();
    let found = common::listed(&listing);
    assert_eq!(
        found,
        [
            ("a", LockKind::Mutex),
            ("a", LockKind::Fair),
            ("b", LockKind::ReadWrite),
            ("c", LockKind::Semaphore),
            ("d", LockKind::Fair),
        ],
        "{listing:#?}"
    );
    assert!(listing.unreadable.is_empty(), "{listing:#?}");
    let stuck = &listing.locks[4];
    assert!(stuck.owners.is_empty() && stuck.waiting, "{stuck:#?}");
    let queue = &stuck.fair.as_ref().unwrap().queue;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].owner, waiter);
    let only_b: Vec<String> = client
        .list("b")
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.name)
        .collect();
    assert_eq!(only_b, ["b"]);

    // The stuck queue moves on a force-unlock: its waiter gets the lock. On a busy
    // machine the waiter's own next attempt may come first and find the lock gone,
    // which moves the queue on as well: then the force-unlock finds the waiter's hold.
    let holds_it = |info: Option<LockInfo>| {
        info.is_some_and(|info| info.owners.iter().any(|owner| owner.id == waiter))
    };
    let took_it_itself = holds_it(client.inspect_kind(LockKind::Fair, "d").await.unwrap());
    let forced = match took_it_itself {
        true => false,
        false => client.force_unlock_kind(LockKind::Fair, "d").await.unwrap(),
    };
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiter was handed the lock")
        .unwrap();
    println!("the waiter took the lock itself: {took_it_itself}; forced its hold: {forced}");
    if !forced {
        got.unlock().await.unwrap();
    }
    drop((mutex, fair, writing, permit, queued));
}

/// A fair holder (short lease) and two waiters: a force-unlock hands the lock to the
/// first waiter at once, the holder learns it lost at its next renewal, and the second
/// still waits its turn.
async fn force_unlock_of_a_fair_lock_hands_it_to_the_first_waiter(url: &str) {
    let holder = common::client_with_lease(url, Duration::from_millis(900)).await;
    let name = common::unique("force-fair");
    let guard = holder.fair_lock(&name).await.unwrap();
    let waiters = common::connect(url).await;
    let operator = common::connect(url).await;
    let (first, first_task) = queue_for_fair(&waiters, &name).await;
    inspect_until(&operator, LockKind::Fair, &name, |info| {
        info.as_ref()
            .is_some_and(|info| info.fair.as_ref().is_some_and(|f| f.queue.len() == 1))
    })
    .await;
    let (second, second_task) = queue_for_fair(&waiters, &name).await;
    inspect_until(&operator, LockKind::Fair, &name, |info| {
        info.as_ref()
            .is_some_and(|info| info.fair.as_ref().is_some_and(|f| f.queue.len() == 2))
    })
    .await;
    let broke_at = Instant::now();
    assert!(
        operator
            .force_unlock_kind(LockKind::Fair, &name)
            .await
            .unwrap()
    );
    let got = tokio::time::timeout(Duration::from_secs(2), first_task)
        .await
        .expect("the first waiter was handed the lock")
        .unwrap();
    assert!(broke_at.elapsed() < Duration::from_millis(500));
    assert_eq!(got.owner(), first);
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the holder learned it lost the lock");
    let info = operator
        .inspect_kind(LockKind::Fair, &name)
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<&str> = info.owners.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, [first.as_str()]);
    let queued: Vec<String> = info
        .fair
        .unwrap()
        .queue
        .into_iter()
        .map(|w| w.owner)
        .collect();
    assert_eq!(
        queued,
        std::slice::from_ref(&second),
        "the second still waits its turn"
    );
    assert!(!second_task.is_finished());
    got.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), second_task)
        .await
        .expect("then the second")
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert!(
        !operator
            .force_unlock_kind(LockKind::Fair, &name)
            .await
            .unwrap()
    );
}

/// Both permits of a semaphore held (short lease) and a waiter: a force-unlock frees
/// both at once, the waiter is woken and gets one, the holders learn they lost theirs.
async fn force_unlock_of_a_semaphore_frees_every_permit_and_wakes_waiters(url: &str) {
    let holder = common::client_with_lease(url, Duration::from_millis(900)).await;
    let name = common::unique("force-sem");
    let a = holder.semaphore(&name, 2).acquire().await.unwrap();
    let b = holder.semaphore(&name, 2).acquire().await.unwrap();
    let operator = common::connect(url).await;
    let waiter = common::connect(url).await;
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move { waiter.semaphore(&name, 2).acquire().await.unwrap() })
    };
    inspect_until(&operator, LockKind::Semaphore, &name, |info| {
        info.as_ref().is_some_and(|info| info.waiting)
    })
    .await;
    let broke_at = Instant::now();
    assert!(
        operator
            .force_unlock_kind(LockKind::Semaphore, &name)
            .await
            .unwrap()
    );
    let got = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the waiter was woken")
        .unwrap();
    assert!(
        broke_at.elapsed() < Duration::from_millis(500),
        "woken, not polling"
    );
    for permit in [&a, &b] {
        tokio::time::timeout(Duration::from_secs(2), permit.lost())
            .await
            .expect("the holder learned it lost its permit");
    }
    let info = operator
        .inspect_kind(LockKind::Semaphore, &name)
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<String> = info
        .semaphore
        .unwrap()
        .held
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, [got.id().to_owned()]);
    got.release().await.unwrap();
    assert!(
        !operator
            .force_unlock_kind(LockKind::Semaphore, &name)
            .await
            .unwrap()
    );
    drop((a, b));
}

/// Two readers (short lease) and a waiting writer: a force-unlock lets the writer in
/// at once, and both readers learn they lost their holds.
async fn force_unlock_of_a_read_write_lock_frees_readers_and_writer(url: &str) {
    let holder = common::client_with_lease(url, Duration::from_millis(900)).await;
    let name = common::unique("force-rw");
    let first = holder.read_lock(&name).await.unwrap();
    let second = {
        let (holder, name) = (holder.clone(), name.clone());
        tokio::spawn(async move { holder.read_lock(&name).await.unwrap() })
            .await
            .unwrap()
    };
    let operator = common::connect(url).await;
    let writer = common::connect(url).await;
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move { writer.write_lock(&name).await.unwrap() })
    };
    inspect_until(&operator, LockKind::ReadWrite, &name, |info| {
        info.as_ref().is_some_and(|info| info.waiting)
    })
    .await;
    let broke_at = Instant::now();
    assert!(
        operator
            .force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
    let writing = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the writer was let in")
        .unwrap();
    assert!(
        broke_at.elapsed() < Duration::from_millis(500),
        "woken, not polling"
    );
    for reader in [&first, &second] {
        tokio::time::timeout(Duration::from_secs(2), reader.lost())
            .await
            .expect("the reader learned it lost its hold");
    }
    let info = operator
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap()
        .unwrap();
    let rw = info.read_write.unwrap();
    assert_eq!(rw.writer.unwrap().owner, writing.owner());
    assert!(rw.readers.is_empty());
    // A writer is broken the same way.
    assert!(
        operator
            .force_unlock_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
    );
    assert!(
        operator
            .inspect_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap()
            .is_none()
    );
    drop((first, second, writing));
}

/// With the `serde` feature, a snapshot of each kind serializes with its `kind` and
/// its kind's facts (and none of another kind's), and reads back equal; a mutex's
/// JSON without `kind` (from before kinds) reads as a mutex.
#[cfg(feature = "serde")]
#[tokio::test(flavor = "multi_thread")]
async fn every_kind_serializes_and_reads_back() {
    let client = common::client().await;
    let name = common::unique("serde-kinds");
    let fair = client.fair_lock(&name).await.unwrap();
    let reading = client.read_lock(&name).await.unwrap();
    let permit = client.semaphore(&name, 2).acquire().await.unwrap();
    for (kind, key) in [
        (LockKind::Fair, "fair"),
        (LockKind::ReadWrite, "rw"),
        (LockKind::Semaphore, "semaphore"),
    ] {
        let info = client.inspect_kind(kind, &name).await.unwrap().unwrap();
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["kind"], kind.as_str());
        assert!(json[key].is_object(), "{json}");
        for other in ["fair", "rw", "semaphore"] {
            assert_eq!(json.get(other).is_some(), other == key, "{json}");
        }
        let back: LockInfo = serde_json::from_value(json).unwrap();
        assert_eq!(back, info);
    }
    let json = serde_json::to_value(
        client
            .inspect_kind(LockKind::ReadWrite, &name)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["rw"]["readers"][0]["owner"], reading.owner());
    assert!(
        json["rw"]["readers"][0]["lease_ms"].as_u64().is_some(),
        "{json}"
    );
    assert_eq!(json["rw"]["writer"], serde_json::Value::Null);
    assert_eq!(json["rw"]["writer_waiting"], false);
    let json = serde_json::to_value(
        client
            .inspect_kind(LockKind::Semaphore, &name)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["semaphore"]["permits"], 2);
    assert_eq!(json["semaphore"]["held"][0]["id"], permit.id());
    let old: LockInfo = serde_json::from_value(serde_json::json!({
        "name": "x", "owners": [], "ttl_ms": null, "fencing_token": null
    }))
    .unwrap();
    assert_eq!(old.kind, LockKind::Mutex);
    fair.unlock().await.unwrap();
    reading.unlock().await.unwrap();
    permit.release().await.unwrap();
}

/// Data taken with a hold (`LockOptions::data`) is shown by `inspect_kind` and `list`
/// beside its holder, for every kind; a re-entry keeps the first hold's data; the data
/// goes with the hold; data past 1 KiB is refused and takes nothing.
async fn data_kept_with_a_hold_is_shown_for_every_kind_and_goes_with_it(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("data");
    let with = |data: &str| LockOptions::new().data(data);
    let owner_data = |info: &Option<LockInfo>| {
        let info = info.as_ref().expect("held");
        info.owners
            .iter()
            .map(|owner| owner.data.clone())
            .collect::<Vec<_>>()
    };
    // The mutex, with a re-entry that brings other data.
    let outer = client
        .lock(&name)
        .options(with("web-1 pid 7: export"))
        .await
        .unwrap()
        .unwrap();
    let inner = client
        .lock(&name)
        .options(with("ignored"))
        .await
        .unwrap()
        .unwrap();
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(owner_data(&info), [Some("web-1 pid 7: export".to_owned())]);
    let listed = client.list("*").await.unwrap();
    let mutex = listed
        .iter()
        .find(|info| info.name == name && info.kind == LockKind::Mutex);
    assert_eq!(
        mutex.expect("listed").owners[0].data.as_deref(),
        Some("web-1 pid 7: export")
    );
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    // The fair lock, the read-write lock (a reader and, apart, a writer), a permit.
    let fair = client
        .fair_lock(&name)
        .options(with("fair"))
        .await
        .unwrap()
        .unwrap();
    let info = client.inspect_kind(LockKind::Fair, &name).await.unwrap();
    assert_eq!(owner_data(&info), [Some("fair".to_owned())]);
    fair.unlock().await.unwrap();
    let reading = client
        .read_lock(&name)
        .options(with("reader"))
        .await
        .unwrap()
        .unwrap();
    let info = client
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap();
    let rw = info
        .as_ref()
        .and_then(|info| info.read_write.clone())
        .unwrap();
    assert_eq!(rw.readers[0].data.as_deref(), Some("reader"));
    assert_eq!(owner_data(&info), [Some("reader".to_owned())]);
    reading.unlock().await.unwrap();
    let writing = client
        .write_lock(&name)
        .options(with("writer"))
        .await
        .unwrap()
        .unwrap();
    let info = client
        .inspect_kind(LockKind::ReadWrite, &name)
        .await
        .unwrap();
    let rw = info.and_then(|info| info.read_write).unwrap();
    assert_eq!(rw.writer.unwrap().data.as_deref(), Some("writer"));
    writing.unlock().await.unwrap();
    let semaphore = client.semaphore(name.as_str(), 2);
    let permit = semaphore
        .acquire()
        .options(with("permit"))
        .await
        .unwrap()
        .unwrap();
    let plain = semaphore.acquire().await.unwrap();
    let info = client
        .inspect_kind(LockKind::Semaphore, &name)
        .await
        .unwrap();
    let held = info.and_then(|info| info.semaphore).unwrap().held;
    let mut data: Vec<_> = held.iter().map(|permit| permit.data.clone()).collect();
    data.sort();
    assert_eq!(data, [None, Some("permit".to_owned())]);
    permit.release().await.unwrap();
    // The released permit's data went with it.
    let info = client
        .inspect_kind(LockKind::Semaphore, &name)
        .await
        .unwrap();
    let held = info.and_then(|info| info.semaphore).unwrap().held;
    assert_eq!(
        held.iter()
            .map(|permit| permit.data.clone())
            .collect::<Vec<_>>(),
        [None]
    );
    plain.release().await.unwrap();
    // The released mutex kept nothing: a new hold without data shows none.
    let again = client.lock(&name).await.unwrap();
    assert_eq!(owner_data(&client.inspect(&name).await.unwrap()), [None]);
    again.unlock().await.unwrap();
    // Past 1 KiB: refused, nothing taken.
    let long = "x".repeat(holdlock::MAX_DATA_LEN + 1);
    let refused = client.lock(&name).options(with(&long)).await;
    assert!(
        matches!(
            refused,
            Err(holdlock::LockError::InvalidOption { option: "data", .. })
        ),
        "{refused:?}"
    );
    assert!(client.inspect(&name).await.unwrap().is_none());
}
