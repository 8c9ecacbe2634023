//! Lease renewal, loss detection, and locks freeing themselves when holders die.

mod common;

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use fred::interfaces::{HashesInterface, KeysInterface};
use holdlock::{LockClient, LockError, LockOptions};

common::on_every_topology!(
    a_fixed_lease_is_not_renewed_and_reports_lost_when_it_runs_out,
    lost_does_not_fire_while_the_lock_is_held,
    a_shut_down_client_frees_its_lock_within_the_lease,
    a_dropped_client_and_runtime_free_the_lock_within_the_lease,
    no_renewal_outlives_the_last_unlock,
    nested_holds_share_one_watchdog,
    shutdown_finishes_releases_that_dropped_guards_started,
    a_hold_past_its_max_hold_is_no_longer_renewed_and_told_lost,
    a_late_unlock_of_a_fixed_lease_still_releases_every_kind,
    a_late_unlock_never_touches_the_owners_newer_hold,
    a_late_unlock_after_the_lease_ran_out_is_not_held,
);

async fn a_fixed_lease_is_not_renewed_and_reports_lost_when_it_runs_out(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("fixed");
    let options = LockOptions::new().lease(Duration::from_millis(400));
    let guard = client.lock(&name).options(options).await.unwrap().unwrap();
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost fires");
    // Lost a tenth of the lease before Redis expires it, not earlier.
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert!(guard.is_lost());
    common::wait_until_free(&client, &name, Duration::from_secs(1)).await;
}

/// Takes `name` with a fixed `lease` on `holder`, then tries it from `rival` as fast as
/// Redis answers; returns whether the holder's guard knew itself lost by the time the
/// rival had the lock.
async fn lost_by_the_time_another_takes_it(
    holder: &LockClient,
    rival: &LockClient,
    name: &str,
    lease: Duration,
) -> bool {
    let fixed = LockOptions::new().lease(lease);
    let guard = holder.lock(name).options(fixed).await.unwrap().unwrap();
    let taken = loop {
        if let Some(taken) = rival.lock(name).try_now().await.unwrap() {
            break taken;
        }
    };
    let lost = guard.is_lost();
    drop(guard);
    taken.unlock().await.unwrap();
    lost
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fixed_lease_guard_is_lost_before_another_client_can_take_the_lock() {
    let (holder, rival) = (common::client().await, common::client().await);
    let name = common::unique("lost-before-taken");
    // Redis keeps 100 ms of it: the most a fraction of a millisecond weighs in a lease.
    let lease = Duration::from_micros(100_900);
    for run in 0..10 {
        assert!(
            lost_by_the_time_another_takes_it(&holder, &rival, &name, lease).await,
            "run {run}: another client took the lock while the guard was not lost yet"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fixed_lease_guard_counts_the_whole_milliseconds_redis_keeps() {
    // Redis keeps whole milliseconds of a lease (PEXPIRE 100 for 100.999 ms). The guard
    // must count the same 100 ms, and be lost a tenth of them before Redis expires the
    // hold: 90 ms after the acquire was sent at the latest (so before it returned).
    let client = common::client().await;
    let name = common::unique("whole-ms");
    let fixed = LockOptions::new().lease(Duration::from_micros(100_999));
    let kept = Duration::from_millis(100);
    // Counting 100.999 ms would be caught only when the acquire returned within 0.9 ms
    // of being sent: on a loaded machine not every time, hence many runs.
    for run in 0..30 {
        let guard = client
            .lock(&name)
            .options(fixed.clone())
            .await
            .unwrap()
            .unwrap();
        let due = Instant::now() + (kept - kept / 10);
        tokio::time::sleep_until((due - Duration::from_millis(3)).into()).await;
        while Instant::now() < due {
            std::thread::yield_now(); // to the very instant: timers are 1 ms coarse
        }
        assert!(
            guard.is_lost(),
            "run {run}: not lost 90 ms after the grant (counted from the lease given, \
             not the whole milliseconds Redis keeps?)"
        );
        drop(guard);
        common::wait_until_free(&client, &name, Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_below_the_minimum_is_refused_and_changes_nothing() {
    let client = common::client().await;
    let raw = common::raw(&common::url()).await;
    let name = common::unique("too-short");
    let too_short = [
        Duration::from_millis(3),
        Duration::from_micros(3_990),
        Duration::from_millis(10),
        holdlock::MIN_LEASE - Duration::from_micros(1),
    ];
    for short in too_short {
        let refused = client
            .lock(&name)
            .options(LockOptions::new().lease(short))
            .await;
        assert!(
            matches!(&refused, Err(LockError::InvalidOption { option: "lease", reason })
                if reason.contains("minimum")),
            "{short:?}: {refused:?}"
        );
        let exists: i64 = raw.exists(common::key(&name).as_str()).await.unwrap();
        assert_eq!(exists, 0, "{short:?}: the lock was written");
    }
    // A held lock keeps its hold count and its lease when a re-entry is refused.
    let guard = client.lock(&name).await.unwrap();
    for short in too_short {
        let refused = client
            .lock(&name)
            .options(LockOptions::new().lease(short))
            .await;
        assert!(refused.is_err(), "{short:?}: {refused:?}");
    }
    let count: Option<u32> = raw
        .hget(common::key(&name).as_str(), guard.owner())
        .await
        .unwrap();
    assert_eq!(count, Some(1));
    let pttl: i64 = raw.pttl(common::key(&name).as_str()).await.unwrap();
    assert!(pttl > 20_000, "the lease was cut to {pttl} ms");
    guard.unlock().await.unwrap();

    for short in too_short {
        let built = LockClient::builder(common::url())
            .lease(short)
            .build()
            .await;
        assert!(
            matches!(
                built,
                Err(LockError::InvalidOption {
                    option: "lease",
                    ..
                })
            ),
            "{short:?}: a client was built"
        );
    }
    let shortest = client
        .lock(&name)
        .options(LockOptions::new().lease(holdlock::MIN_LEASE))
        .await
        .unwrap();
    assert!(shortest.is_some(), "the minimum itself is accepted");
}

async fn lost_does_not_fire_while_the_lock_is_held(url: &str) {
    let client = common::client_with_lease(url, Duration::from_millis(600)).await;
    let name = common::unique("not-lost");
    let guard = client.lock(&name).await.unwrap();
    let fired = tokio::time::timeout(Duration::from_millis(1500), guard.lost()).await;
    assert!(fired.is_err(), "lost fired while held");
    guard.unlock().await.unwrap();
}

async fn a_shut_down_client_frees_its_lock_within_the_lease(url: &str) {
    let lease = Duration::from_secs(1);
    let client = common::client_with_lease(url, lease).await;
    let observer = common::connect(url).await;
    let name = common::unique("shutdown");
    let guard = client.lock(&name).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await; // past one renewal
    client.shutdown().await;
    assert!(
        guard.is_lost(),
        "a shut-down client's guards know they are lost"
    );
    let freed = common::wait_until_free(&observer, &name, lease * 2).await;
    assert!(
        freed <= lease + Duration::from_millis(200),
        "freed after {freed:?}"
    );
    drop(guard); // releases nothing, panics nowhere
}

async fn a_dropped_client_and_runtime_free_the_lock_within_the_lease(url: &str) {
    // A crash, as far as Redis can tell: the runtime (and every task and connection
    // in it) disappears while the lock is held. It runs in a thread of its own: a
    // runtime cannot be dropped inside another.
    let lease = Duration::from_secs(1);
    let name = common::unique("crash");
    std::thread::spawn({
        let (url, name) = (url.to_owned(), name.clone());
        move || {
            let doomed = tokio::runtime::Runtime::new().unwrap();
            let guard = doomed.block_on(async {
                let client = LockClient::builder(&url)
                    .lease(lease)
                    .build()
                    .await
                    .unwrap();
                client.lock(&name).await.unwrap()
            });
            std::mem::forget(guard);
            drop(doomed);
        }
    })
    .join()
    .unwrap();

    let client = common::connect(url).await;
    assert!(
        client.is_locked(&name).await.unwrap(),
        "the lease outlives the crash briefly"
    );
    let freed = common::wait_until_free(&client, &name, lease * 2).await;
    assert!(
        freed <= lease + Duration::from_millis(200),
        "freed after {freed:?}"
    );
}

async fn no_renewal_outlives_the_last_unlock(url: &str) {
    let client = common::client_with_lease(url, Duration::from_millis(300)).await;
    let name = common::unique("no-late-renewal");
    for _ in 0..20 {
        let guard = client.lock(&name).await.unwrap();
        tokio::time::sleep(Duration::from_millis(95)).await; // straddle renewal ticks
        guard.unlock().await.unwrap();
    }
    // Re-create the hold by hand, under the same owner, with a short TTL: a stray
    // renewal (which extends only a key with its owner's field) would extend it.
    let raw = common::raw(url).await;
    let _: () = raw
        .hset(common::key(&name).as_str(), (client.owner_id(), 1))
        .await
        .unwrap();
    let _: bool = raw
        .pexpire(common::key(&name).as_str(), 200, None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let exists: i64 = raw.exists(common::key(&name).as_str()).await.unwrap();
    assert_eq!(exists, 0, "something renewed a key nobody here holds");
}

async fn nested_holds_share_one_watchdog(url: &str) {
    let client = common::client_with_lease(url, Duration::from_millis(600)).await;
    let name = common::unique("one-watchdog");
    let a = client.lock(&name).await.unwrap();
    let b = client.lock(&name).await.unwrap();
    a.unlock().await.unwrap();
    // The remaining hold is still renewed after the first guard is gone.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!b.is_lost());
    assert!(client.is_locked(&name).await.unwrap());
    b.unlock().await.unwrap();
    assert!(!client.is_locked(&name).await.unwrap());
}

async fn shutdown_finishes_releases_that_dropped_guards_started(url: &str) {
    let client = common::connect(url).await;
    let observer = common::connect(url).await;
    let names: Vec<String> = (0..20).map(|_| common::unique("flush")).collect();
    for name in &names {
        drop(client.lock(name).await.unwrap());
    }
    client.shutdown().await; // right away: the background releases must still land
    for name in &names {
        assert!(
            !observer.is_locked(name).await.unwrap(),
            "{name} was left held"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_cut_off_from_redis_hears_of_the_loss_before_its_lease_runs_out() {
    // A server of our own: CLIENT PAUSE stops every client of it. Its WRITE mode holds
    // back scripts (so renewals) but answers reads, and Redis keeps expiring keys.
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(3);
    let client = LockClient::builder(server.url())
        .lease(lease)
        .build()
        .await
        .unwrap();
    let name = common::unique("cut-off");
    let guard = client.lock(&name).await.unwrap();
    // Wait for a renewal (the TTL jumps back up), then cut the holder off at once.
    wait_for_a_renewal(&guard).await;
    assert_eq!(
        server
            .command(&["CLIENT", "PAUSE", "6000", "WRITE"])
            .unwrap(),
        "+OK"
    );
    tokio::time::timeout(Duration::from_secs(6), guard.lost())
        .await
        .expect("lost fires while Redis cannot answer");
    assert!(guard.is_lost());
    // Redis counts the lease from the last renewal it ran, just before the cut: the
    // holder must hear of the loss while Redis still keeps its hold (before anyone
    // else could take the lock), not at the next renewal after the expiry.
    let pttl = server.command(&["PTTL", &common::key(&name)]).unwrap();
    let pttl: i64 = pttl.trim_start_matches(':').parse().unwrap();
    assert!(
        pttl > 0,
        "told only after Redis had expired the hold (PTTL {pttl})"
    );
    server.command(&["CLIENT", "UNPAUSE"]).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn renewals_that_fall_due_together_go_out_together_and_survive_a_pause() {
    // 400 holds taken together fall due together: their renewals go out in a few
    // script calls (one per hold would be 400), and a server that stops answering
    // across their first renewal loses none of them.
    const HOLDS: usize = 400;
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(3); // renewed at 1 s, taken as lost at 2.7 s
    let client = common::client_with_lease(&server.url(), lease).await;
    let names: Vec<String> = (0..HOLDS).map(|_| common::unique("due-together")).collect();
    let first_grant = Instant::now();
    // Taken at once (pipelined), so that a busy machine does not spread them out.
    let taken =
        futures::future::join_all(names.iter().map(|name| client.lock(name).into_future())).await;
    let guards: Vec<_> = taken.into_iter().map(Result::unwrap).collect();
    assert!(
        first_grant.elapsed() < Duration::from_millis(700),
        "taking the locks took {:?}: they would not fall due together",
        first_grant.elapsed()
    );
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();

    // Pause every write from 0.8 s to 1.8 s: across every first renewal.
    tokio::time::sleep_until((first_grant + Duration::from_millis(800)).into()).await;
    server.query(&["CLIENT", "PAUSE", "1000", "WRITE"]).unwrap();
    tokio::time::sleep_until((first_grant + Duration::from_millis(1_500)).into()).await;
    let clients = server.query(&["CLIENT", "LIST"]).unwrap();
    assert!(
        clients.contains("cmd=evalsha"),
        "no renewal waits on the server:\n{clients}"
    );

    // Every hold is renewed once the server is back: none is lost.
    tokio::time::sleep_until((first_grant + Duration::from_millis(2_300)).into()).await;
    assert!(
        guards.iter().all(|guard| !guard.is_lost()),
        "a hold was lost"
    );
    for name in &names {
        let ttl = common::integer(&server.query(&["PTTL", &common::key(name)]).unwrap());
        assert!(ttl > 1_500, "{name} was not renewed: {ttl} ms left");
    }
    let calls = server.command_calls("evalsha");
    assert!(
        calls <= (HOLDS / 20) as u64,
        "{calls} script calls renewed {HOLDS} holds"
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn holds_of_many_owners_due_together_are_each_renewed_for_their_own_owner() {
    // Four tasks (four owners) take their locks at once, so their renewals fall due
    // together and go out in shared calls, which name each owner once per run of its
    // holds: a hold renewed under another owner's field would be found gone and lost.
    const TASKS: usize = 4;
    const EACH: usize = 40;
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(3); // renewed at 1 s
    let client = common::client_with_lease(&server.url(), lease).await;
    let first_grant = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let names: Vec<String> = (0..EACH).map(|_| common::unique("many-owners")).collect();
                let taken = futures::future::join_all(
                    names.iter().map(|name| client.lock(name).into_future()),
                )
                .await;
                taken.into_iter().map(Result::unwrap).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut guards = Vec::with_capacity(TASKS * EACH);
    for task in tasks {
        guards.extend(task.await.unwrap());
    }
    assert!(
        first_grant.elapsed() < Duration::from_millis(700),
        "taking the locks took {:?}: they would not fall due together",
        first_grant.elapsed()
    );
    let owners: std::collections::HashSet<&str> = guards.iter().map(|g| g.owner()).collect();
    assert_eq!(owners.len(), TASKS, "one owner per task");
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();

    tokio::time::sleep_until((first_grant + Duration::from_millis(1_600)).into()).await;
    for guard in &guards {
        assert!(!guard.is_lost(), "{} reports lost", guard.name());
        assert!(
            guard.renewal_margin().is_some(),
            "{} was not renewed",
            guard.name()
        );
        let ttl = common::integer(&server.query(&["PTTL", &common::key(guard.name())]).unwrap());
        assert!(
            ttl > 2_000,
            "{} was not renewed: {ttl} ms left",
            guard.name()
        );
    }
    let calls = server.command_calls("evalsha");
    assert!(
        calls <= (TASKS * EACH / 20) as u64,
        "{calls} script calls renewed {} holds",
        TASKS * EACH
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_gone_from_a_batch_fires_only_its_own_lost() {
    const HOLDS: usize = 50;
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(3);
    let client = common::client_with_lease(&server.url(), lease).await;
    let mut guards = Vec::with_capacity(HOLDS);
    for _ in 0..HOLDS {
        guards.push(client.lock(common::unique("batch-gone")).await.unwrap());
    }
    let (gone, kept) = guards.split_first().unwrap();
    assert_eq!(
        server.query(&["DEL", &common::key(gone.name())]).as_deref(),
        Ok(":1")
    );
    tokio::time::timeout(Duration::from_secs(3), gone.lost())
        .await
        .expect("the deleted hold is told lost at its first renewal");
    // Its batch-mates were renewed by the same calls, and are not lost.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for guard in kept {
        assert!(!guard.is_lost(), "{} reports lost", guard.name());
        assert!(
            guard.renewal_margin().is_some(),
            "{} was not renewed",
            guard.name()
        );
    }
    for guard in guards.into_iter().skip(1) {
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_that_fails_in_transit_loses_nothing_before_the_deadline() {
    // Renewals at 1 s time out (the server is paused), are retried at 2 s and time out
    // again: the holds are at risk, not lost, until their deadline (2.7 s), and lost
    // right after it.
    const HOLDS: usize = 30;
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(3);
    let client = common::client_with_lease(&server.url(), lease).await;
    let first_grant = Instant::now();
    let mut guards = Vec::with_capacity(HOLDS);
    for _ in 0..HOLDS {
        guards.push(client.lock(common::unique("batch-stalled")).await.unwrap());
    }
    tokio::time::sleep_until((first_grant + Duration::from_millis(800)).into()).await;
    server.query(&["CLIENT", "PAUSE", "3000", "WRITE"]).unwrap();
    tokio::time::sleep_until((first_grant + Duration::from_millis(2_450)).into()).await;
    for guard in &guards {
        assert!(
            !guard.is_lost(),
            "{} lost before its deadline",
            guard.name()
        );
        assert!(guard.is_at_risk(), "{} not warned at risk", guard.name());
    }
    tokio::time::sleep_until((first_grant + Duration::from_millis(3_100)).into()).await;
    for guard in &guards {
        assert!(
            guard.is_lost(),
            "{} not lost after its deadline",
            guard.name()
        );
    }
}

/// Waits (up to 5 s) until no key of `names` is left on `server`.
fn wait_until_gone(server: &common::RedisServer, what: &str, names: &[String]) {
    let keys: Vec<String> = names.iter().map(|name| common::key(name)).collect();
    let exists: Vec<&str> = std::iter::once("EXISTS")
        .chain(keys.iter().map(String::as_str))
        .collect();
    common::wait_until(what, Duration::from_secs(5), || {
        server.query(&exists).as_deref() == Ok(":0")
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_guards_pending_together_are_released_together_and_tell_waiters() {
    // 500 guards dropped at once free their keys in a few script calls, and a waiter
    // on one of them is told by its release message (the lease is 30 s: without the
    // message it would wait for it).
    const HOLDS: usize = 500;
    let server = common::RedisServer::start();
    let client = common::connect(&server.url()).await;
    let other = common::connect(&server.url()).await;
    let names: Vec<String> = (0..HOLDS)
        .map(|_| common::unique("drop-together"))
        .collect();
    // The batch script loaded first: the batches of a first burst each meet
    // `NOSCRIPT`, load it and go again (38 calls for 500 guards once, 17 of them
    // loads), which is what a first use costs, not what batching does.
    let warm = common::lock_each_at_once(&client, &names[..64]).await;
    drop(warm);
    wait_until_gone(&server, "the warm-up keys are gone", &names[..64]);
    let mut guards = Vec::with_capacity(HOLDS);
    for name in &names {
        guards.push(client.lock(name).await.unwrap());
    }
    let wanted = names[HOLDS / 2].clone();
    let waiter = tokio::spawn(async move {
        let asked = Instant::now();
        let guard = other
            .lock(&wanted)
            .timeout(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("the waiter gets the lock");
        let waited = asked.elapsed();
        guard.unlock().await.unwrap();
        waited
    });
    // The waiter has been refused once (its refusal marks the lock `waiting`).
    common::wait_until("the waiter is refused", Duration::from_secs(5), || {
        server
            .query(&["HGET", &common::key(&names[HOLDS / 2]), "waiting"])
            .is_ok()
    });
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let dropped = Instant::now();
    drop(guards);
    // Every key but the one the waiter takes next.
    let others: Vec<String> = names
        .iter()
        .filter(|name| **name != names[HOLDS / 2])
        .cloned()
        .collect();
    wait_until_gone(&server, "every key is gone", &others);
    let freed_after = dropped.elapsed();
    let waited = waiter.await.unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "the waiter waited {waited:?}"
    );
    let calls = server.command_calls("evalsha");
    assert!(
        calls <= 30,
        "{calls} script calls released {HOLDS} dropped guards (in {freed_after:?})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_hold_is_renewed_as_soon_as_the_connection_is_back() {
    // After a reconnection the server may keep an older expiry than the one the client
    // last set (a failover, see tests/sentinel.rs). Here the server's copies are cut
    // short by hand before the connection is killed: a holder that waited for its
    // next renewal period would lose them.
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(6); // renewed every 2 s; booked watchdogs start at 1 s
    let client = common::client_with_lease(&server.url(), lease).await;
    let running = client.lock(common::unique("running")).await.unwrap();
    // Wait for the first renewal (the TTL jumps back up): its watchdog runs, and its
    // next renewal is 2 s away.
    wait_for_a_renewal(&running).await;
    // Taken now: its watchdog is booked, to start in 1 s and renew in 2 s.
    let booked = client.lock(common::unique("booked")).await.unwrap();
    let cut = Instant::now();
    for guard in [&running, &booked] {
        assert_eq!(
            server
                .command(&["PEXPIRE", &common::key(guard.name()), "800"])
                .as_deref(),
            Ok(":1")
        );
    }
    server.kill_clients();

    // The copies would expire 0.8 s from now, and the periodic renewals are 2 s away:
    // look in between.
    tokio::time::sleep_until((cut + Duration::from_millis(1_400)).into()).await;
    for guard in [&running, &booked] {
        let ttl = common::integer(&server.query(&["PTTL", &common::key(guard.name())]).unwrap());
        assert!(
            ttl > 4_000,
            "{} was not renewed after the reconnection (PTTL {ttl} ms)",
            guard.name()
        );
        assert!(!guard.is_lost(), "{} reports lost", guard.name());
    }
    running.unlock().await.unwrap();
    booked.unlock().await.unwrap();
}

/// Returns right after the watchdog of `guard` has renewed its lease (its TTL in Redis
/// jumps back up).
async fn wait_for_a_renewal(guard: &holdlock::LockGuard) {
    let mut last = guard.remaining_ttl().await.unwrap().unwrap();
    loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let ttl = guard.remaining_ttl().await.unwrap().unwrap();
        if ttl > last {
            return;
        }
        last = ttl;
    }
}

/// With a 1 s lease and a 1.5 s `max_hold`, the watchdog renews the hold at first,
/// then stops: the guard is told lost before Redis expires the key, and nobody renews
/// it after; without the cap the same hold lives on.
async fn a_hold_past_its_max_hold_is_no_longer_renewed_and_told_lost(url: &str) {
    let lease = Duration::from_secs(1);
    let client = common::client_with_lease(url, lease).await;
    let (capped, free) = (common::unique("max-hold"), common::unique("no-max-hold"));
    let asked = Instant::now();
    let options = LockOptions::new().max_hold(Duration::from_millis(1_500));
    let guard = client
        .lock(&capped)
        .options(options)
        .await
        .unwrap()
        .unwrap();
    let uncapped = client.lock(&free).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("told lost");
    let lost_after = asked.elapsed();
    assert!(
        lost_after >= Duration::from_millis(1_500),
        "lost after {lost_after:?}"
    );
    assert!(
        client.is_locked(&capped).await.unwrap(),
        "told only after redis expired it"
    );
    common::wait_until_free(&client, &capped, lease).await;
    assert!(!uncapped.is_lost(), "the uncapped hold is still renewed");
    assert!(client.is_locked(&free).await.unwrap());
    uncapped.unlock().await.unwrap();
    assert!(matches!(
        guard.unlock().await,
        Err(LockError::NotHeld { .. })
    ));
    let zero = LockOptions::new().max_hold(Duration::ZERO);
    assert!(matches!(
        client.lock(&capped).options(zero).await,
        Err(LockError::InvalidOption {
            option: "max_hold",
            ..
        })
    ));
}

/// A fixed lease past 90 % (the guard reports it lost) whose holder unlocks late but
/// before Redis expires it: the owner-checked release is still sent, `unlock()` is
/// `Ok`, and the lock is free at once for another client, for every kind.
async fn a_late_unlock_of_a_fixed_lease_still_releases_every_kind(url: &str) {
    use holdlock::Held;
    let client = common::connect(url).await;
    let other = common::connect(url).await;
    let name = common::unique("late-unlock");
    let lease = Duration::from_millis(1_000);
    let options = || LockOptions::new().lease(lease);
    let late = Duration::from_millis(930);
    // The mutex.
    let guard = client
        .lock(&name)
        .options(options())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(late).await;
    assert!(guard.is_lost(), "given up at 90 %");
    guard.unlock().await.expect("released late");
    assert!(
        other.lock(&name).try_now().await.unwrap().is_some(),
        "still held after a late unlock"
    );
    // The fair lock, both sides of the read-write lock, a semaphore permit.
    let fair = client
        .fair_lock(&name)
        .options(options())
        .await
        .unwrap()
        .unwrap();
    let read = client
        .read_lock(&name)
        .options(options())
        .await
        .unwrap()
        .unwrap();
    let permit = client
        .semaphore(name.as_str(), 1)
        .acquire()
        .options(options())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(late).await;
    assert!(fair.is_lost() && read.is_lost() && Held::is_lost(&permit));
    fair.unlock().await.expect("fair released late");
    read.unlock().await.expect("read released late");
    permit.release().await.expect("permit released late");
    assert!(other.fair_lock(&name).try_now().await.unwrap().is_some());
    let write = client
        .write_lock(&name)
        .options(options())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(late).await;
    write.unlock().await.expect("write released late");
    assert!(other.write_lock(&name).try_now().await.unwrap().is_some());
    assert!(
        other
            .semaphore(name.as_str(), 1)
            .acquire()
            .try_now()
            .await
            .unwrap()
            .is_some()
    );
}

/// An owner whose fixed-lease guard was given up as lost takes the lock again (a new
/// hold), then unlocks the old guard late: the late release must not touch the new
/// hold, which stays held with its count.
async fn a_late_unlock_never_touches_the_owners_newer_hold(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("late-unlock-newer");
    let options = LockOptions::new().lease(Duration::from_millis(1_000));
    let old = client.lock(&name).options(options).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(930)).await;
    assert!(old.is_lost());
    let new = client.lock(&name).await.unwrap();
    assert_eq!(new.hold_count(), 1);
    let late = old.unlock().await;
    assert!(matches!(late, Err(LockError::NotHeld { .. })), "{late:?}");
    let held = common::hold_count(client.redis(), &name, new.owner()).await;
    assert_eq!(held, Some(1), "the late release touched the new hold");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!new.is_lost());
    new.unlock().await.unwrap();
}

/// A late unlock after Redis has expired the hold is `NotHeld`, and changes nothing.
async fn a_late_unlock_after_the_lease_ran_out_is_not_held(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("late-unlock-expired");
    let options = LockOptions::new().lease(Duration::from_millis(300));
    let guard = client.lock(&name).options(options).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let late = guard.unlock().await;
    assert!(matches!(late, Err(LockError::NotHeld { .. })), "{late:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_is_renewed_in_one_batch_and_a_broken_key_fails_only_its_own() {
    // A mutex, a fair lock, a semaphore permit and both sides of read-write locks fall
    // due together: one call renews the lot (both key layouts). One mutex whose key
    // was overwritten with a string fails its own renewals (at risk, then lost at its
    // deadline); its batch-mates are renewed all the same.
    use holdlock::Held;
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(3);
    let client = common::client_with_lease(&server.url(), lease).await;
    let first_grant = Instant::now();
    let mutex = client.lock(common::unique("kinds-mutex")).await.unwrap();
    let fair = client
        .fair_lock(common::unique("kinds-fair"))
        .await
        .unwrap();
    let permit = client
        .semaphore(common::unique("kinds-sem"), 2)
        .acquire()
        .await
        .unwrap();
    let read = client.read_lock(common::unique("kinds-rw")).await.unwrap();
    let write = client
        .write_lock(common::unique("kinds-rw2"))
        .await
        .unwrap();
    let broken = client.lock(common::unique("kinds-broken")).await.unwrap();
    assert!(first_grant.elapsed() < Duration::from_millis(300));
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    assert_eq!(
        server
            .query(&[
                "SET",
                &common::key(broken.name()),
                "not a lock",
                "PX",
                "10000"
            ])
            .as_deref(),
        Ok("+OK")
    );
    tokio::time::sleep_until((first_grant + Duration::from_millis(1_400)).into()).await;
    // (renewed, at risk, lost) of each hold of every kind.
    fn state<H: Held>(held: &H) -> (bool, bool, bool) {
        (
            held.renewal_margin().is_some(),
            held.is_at_risk(),
            held.is_lost(),
        )
    }
    let states = || {
        [
            state(&mutex),
            state(&fair),
            state(&permit),
            state(&read),
            state(&write),
        ]
    };
    for (index, (renewed, at_risk, _)) in states().into_iter().enumerate() {
        assert!(renewed, "hold {index} was not renewed");
        assert!(!at_risk, "hold {index} is at risk");
    }
    assert!(
        broken.is_at_risk(),
        "the broken hold's renewal did not fail"
    );
    assert!(!broken.is_lost(), "lost before its deadline");
    let calls = server.command_calls("evalsha");
    assert!(calls <= 2, "{calls} calls renewed 6 holds");
    tokio::time::sleep_until((first_grant + Duration::from_millis(3_000)).into()).await;
    assert!(broken.is_lost(), "the broken hold is lost at its deadline");
    for (index, (_, _, lost)) in states().into_iter().enumerate() {
        assert!(!lost, "hold {index} is lost");
    }
}
