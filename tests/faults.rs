//! Faults: killed connections, flushed scripts, exactly-once holds.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holdlock::LockClient;

use common::RedisServer;

/// Kills every client connection of `server` every few milliseconds until stopped.
fn start_killer(server: &Arc<RedisServer>) -> (Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (server, stop) = (Arc::clone(server), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut kills = 0;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(3 + kills as u64 % 7));
                let _ = server.command(&["CLIENT", "KILL", "TYPE", "normal"]);
                kills += 1;
            }
            kills
        })
    };
    (stop, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_connections_never_double_or_drop_a_hold() {
    common::trace();
    let server = Arc::new(RedisServer::start());
    let client = LockClient::builder(server.url())
        .lease(Duration::from_secs(30))
        .build()
        .await
        .unwrap();
    let (stop, killer) = start_killer(&server);

    let mut tasks = Vec::new();
    for worker in 0..6 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let name = common::unique(&format!("once-{worker}"));
            let mut mismatches = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(4);
            while Instant::now() < deadline {
                let mut guards = Vec::new();
                for depth in 1..=3u32 {
                    let guard = loop {
                        match client.lock(&name).await {
                            Ok(guard) => break guard,
                            Err(error) => assert!(error.is_redis(), "{error}"),
                        }
                    };
                    assert_eq!(guard.hold_count(), depth);
                    let owner = guard.owner().to_owned();
                    guards.push(guard);
                    let actual = common::hold_count(client.redis(), &name, &owner).await;
                    if actual != Some(i64::from(depth)) {
                        mismatches.push(format!("after lock #{depth}: redis has {actual:?}"));
                    }
                }
                let owner = guards[0].owner().to_owned();
                for remaining in (0..3i64).rev() {
                    guards.pop().unwrap().unlock().await.unwrap();
                    let actual = common::hold_count(client.redis(), &name, &owner).await;
                    let expected = Some(remaining).filter(|&n| n > 0);
                    if actual != expected {
                        mismatches
                            .push(format!("after unlock to {remaining}: redis has {actual:?}"));
                    }
                }
            }
            mismatches
        }));
    }
    let mut mismatches = Vec::new();
    for task in tasks {
        mismatches.extend(task.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let kills = killer.join().unwrap();
    assert!(kills > 100, "the killer barely ran ({kills})");
    assert!(mismatches.is_empty(), "hold counts drifted: {mismatches:?}");
}

/// Many tasks of one client, each on a lock of its own (so that past 16 calls in flight
/// their takes and releases go out in batches), with every connection killed every
/// few milliseconds: a batch whose reply is lost is settled lock by lock. A `lock()`
/// that returns holds its lock once in Redis, never twice, and once the killing stops
/// no hold is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_connections_never_double_or_leave_a_batched_hold() {
    let server = Arc::new(RedisServer::start());
    let client = common::client_with_lease(&server.url(), Duration::from_secs(30)).await;
    let names: Vec<String> = (0..64)
        .map(|i| common::unique(&format!("batched-kill-{i}")))
        .collect();
    let (stop, killer) = start_killer(&server);
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move {
                let mut mismatches = Vec::new();
                let mut held = 0;
                let deadline = Instant::now() + Duration::from_secs(3);
                while Instant::now() < deadline {
                    let guard = match client.lock(&name).await {
                        Ok(guard) => guard,
                        Err(error) => {
                            assert!(error.is_redis(), "{error}");
                            continue;
                        }
                    };
                    held += 1;
                    let actual = common::hold_count(client.redis(), &name, guard.owner()).await;
                    if actual != Some(1) {
                        mismatches.push(format!("{name}: redis has {actual:?}"));
                    }
                    if let Err(error) = guard.unlock().await {
                        assert!(error.is_redis(), "{error}");
                    }
                }
                (held, mismatches)
            })
        })
        .collect();
    let (mut held, mut mismatches) = (0, Vec::new());
    for task in tasks {
        let (task_held, task_mismatches) = task.await.unwrap();
        held += task_held;
        mismatches.extend(task_mismatches);
    }
    stop.store(true, Ordering::Relaxed);
    let kills = killer.join().unwrap();
    assert!(kills > 100, "the killer barely ran ({kills})");
    assert!(held > 0, "no lock taken");
    assert!(mismatches.is_empty(), "hold counts drifted: {mismatches:?}");
    let other = LockClient::connect(&server.url()).await.unwrap();
    for name in &names {
        common::wait_until_free(&other, name, Duration::from_secs(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn script_flush_is_survived_transparently() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("flush");
    client.lock(&name).await.unwrap().unlock().await.unwrap();
    assert_eq!(server.command(&["SCRIPT", "FLUSH"]).unwrap(), "+OK");
    let guard = client.lock(&name).await.unwrap();
    let nested = client.lock(&name).await.unwrap();
    assert_eq!(nested.hold_count(), 2);
    assert_eq!(server.command(&["SCRIPT", "FLUSH"]).unwrap(), "+OK");
    nested.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    assert!(!client.is_locked(&name).await.unwrap());
    assert_eq!(server.command(&["SCRIPT", "FLUSH"]).unwrap(), "+OK");
    assert!(client.inspect(&name).await.unwrap().is_none());
    assert!(!client.force_unlock(&name).await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn renewals_continue_after_the_connection_is_killed() {
    let server = Arc::new(RedisServer::start());
    let client = LockClient::builder(server.url())
        .lease(Duration::from_millis(900))
        .build()
        .await
        .unwrap();
    let name = common::unique("reconnect");
    let guard = client.lock(&name).await.unwrap();
    for _ in 0..4 {
        server.kill_clients();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!guard.is_lost(), "renewals stopped after a reconnect");
    assert!(client.is_locked(&name).await.unwrap());
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_still_wakes_after_its_subscriber_connection_is_killed() {
    let server = Arc::new(RedisServer::start());
    let holder = LockClient::builder(server.url())
        .lease(Duration::from_secs(30))
        .build()
        .await
        .unwrap();
    let waiter = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("resubscribe");
    let held = holder.lock(&name).await.unwrap();
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move { waiter.lock(&name).await.unwrap().unlock().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill_clients();
    tokio::time::sleep(Duration::from_millis(500)).await; // let both reconnect
    let released = Instant::now();
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("waiter slept through")
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lock_call_fails_cleanly_when_the_server_is_gone() {
    let server = RedisServer::start();
    let client = LockClient::builder(server.url())
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    drop(server);
    let start = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), client.lock("gone").try_now())
        .await
        .expect("hung");
    assert!(result.is_err());
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

/// A nested release that Redis refuses (no replicas to write to) changes nothing: the
/// counts here and in Redis stay equal, the refused release is done once writes are
/// allowed again, and the lock ends up free for every task of the same client.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_release_keeps_the_counts_and_is_done_later() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("refused-release");
    let outer = client.lock(&name).await.unwrap();
    let inner = client.lock(&name).await.unwrap();
    let owner = outer.owner().to_owned();
    server
        .command(&["CONFIG", "SET", "min-replicas-to-write", "1"])
        .unwrap();
    let refused = inner.unlock().await;
    assert!(refused.is_err(), "writes are refused: {refused:?}");
    assert_eq!(outer.hold_count(), 2, "nothing changed here");
    assert_eq!(
        common::hold_count(client.redis(), &name, &owner).await,
        Some(2),
        "nor in redis"
    );
    server
        .command(&["CONFIG", "SET", "min-replicas-to-write", "0"])
        .unwrap();
    outer.unlock().await.unwrap();
    let start = Instant::now();
    while common::hold_count(client.redis(), &name, &owner)
        .await
        .is_some()
    {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the refused release was never done"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another task of the same client is not refused by what this one held, once the
    // release's reply is in (Redis may show the field gone a moment before).
    let start = Instant::now();
    let guard = loop {
        let (other_task, other_name) = (client.clone(), name.clone());
        let tried = tokio::spawn(async move { other_task.lock(&other_name).try_now().await });
        if let Some(guard) = tried.await.unwrap().unwrap() {
            break guard;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "still refused to another task of the same client"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    guard.unlock().await.unwrap();
}

/// A guard dropped while Redis refuses writes (no replicas to write to): its release
/// cannot land, and the hold is renewed no more. It is given up at its lost deadline
/// (before the lease runs out), so the owner's next call, which waits for the release,
/// goes on; the lease runs out in Redis, and once writes are allowed the lock is free.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_guard_whose_release_is_refused_is_given_up_by_its_deadline() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(2);
    let client = common::client_with_lease(&server.url(), lease).await;
    let name = common::unique("refused-drop");
    let guard = client.lock(&name).await.unwrap();
    server
        .command(&["CONFIG", "SET", "min-replicas-to-write", "1"])
        .unwrap();
    let dropped = Instant::now();
    drop(guard);
    // The same task (the same owner) asks again: it waits for the release to settle,
    // which it does when the hold is given up, before the lease runs out.
    let next = tokio::time::timeout(lease * 2, client.lock(&name)).await;
    let waited = dropped.elapsed();
    assert!(
        next.is_ok(),
        "the owner's next call still waited after {waited:?}"
    );
    assert!(
        waited < lease,
        "given up only after {waited:?}, past the {lease:?} lease"
    );
    // Nothing renewed it: the lease ran out in Redis while writes were refused.
    tokio::time::sleep((lease + Duration::from_millis(200)).saturating_sub(dropped.elapsed()))
        .await;
    let pttl = server.command(&["PTTL", &common::key(&name)]).unwrap();
    assert_eq!(pttl, ":-2", "the key outlived its lease");
    server
        .command(&["CONFIG", "SET", "min-replicas-to-write", "0"])
        .unwrap();
    let other = common::connect(&server.url()).await;
    let taken = loop {
        if let Some(guard) = other.lock(&name).try_now().await.unwrap() {
            break guard;
        }
        assert!(
            dropped.elapsed() < lease + Duration::from_secs(1),
            "the lock was kept past its lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    taken.unlock().await.unwrap();
}

/// A grant whose reply comes later than a third of the lease (the server slept through
/// it) is renewed before its guard is handed out: the guard is not lost, and releasing
/// it frees the lock.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_grant_hands_out_a_guard_that_holds() {
    let server = Arc::new(RedisServer::start_with(|_| {
        vec!["--enable-debug-command".into(), "local".into()]
    }));
    let lease = Duration::from_secs(3);
    let client = common::client_with_lease(&server.url(), lease).await;
    for options in [
        holdlock::LockOptions::new(),
        holdlock::LockOptions::new().lease(lease),
    ] {
        let name = common::unique("slow-grant");
        let sleeper = std::thread::spawn({
            let server = Arc::clone(&server);
            move || server.command(&["DEBUG", "SLEEP", "3.3"])
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = Instant::now();
        let guard = client.lock(&name).options(options).await.unwrap().unwrap();
        sleeper.join().unwrap().unwrap();
        assert!(
            asked.elapsed() > lease * 3 / 4,
            "the grant should have been slow"
        );
        assert!(!guard.is_lost(), "handed out lost");
        tokio::time::sleep(lease / 2).await;
        assert!(!guard.is_lost(), "lost soon after");
        guard.unlock().await.unwrap();
        assert!(!client.is_locked(&name).await.unwrap(), "left held");
    }
}

/// A script whose reply was lost is sent again only once a read of the owner's count
/// shows it did not run; a count that cannot be read is never taken to mean "did not
/// run". Here the reply of a re-entry times out while the server sleeps (the script
/// runs when it wakes), and the client's user may not `HGET`: the re-entry must run
/// once, not twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_reply_whose_outcome_cannot_be_read_is_never_sent_again() {
    common::trace();
    let server = Arc::new(RedisServer::start_with(|_| {
        vec!["--enable-debug-command".into(), "local".into()]
    }));
    let rule = [
        "ACL", "SETUSER", "no-hget", "on", ">pw", "~*", "&*", "+@all", "-hget",
    ];
    assert_eq!(server.command(&rule).as_deref(), Ok("+OK"));
    let port = server.url().rsplit(':').next().unwrap().to_owned();
    let client = LockClient::builder(format!("redis://no-hget:pw@127.0.0.1:{port}"))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let admin = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("unreadable-outcome");
    let outer = client.lock(&name).await.unwrap();
    let owner = outer.owner().to_owned();
    // Loads the re-entry's script, so that the one below runs when the server wakes.
    client.lock(&name).await.unwrap().unlock().await.unwrap();
    let sleeper = std::thread::spawn({
        let server = Arc::clone(&server);
        move || server.command(&["DEBUG", "SLEEP", "0.8"])
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let reentered = client.lock(&name).await;
    sleeper.join().unwrap().unwrap();
    assert!(reentered.is_err(), "the outcome could not be known");
    // Whatever runs late has run by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        common::hold_count(admin.redis(), &name, &owner).await,
        Some(2),
        "the re-entry ran exactly once"
    );
}

/// Runs one call of every kind with a 500 ms wait, each in a task of its own, and
/// checks that each returned within its wait plus the grace for one round trip (with a
/// timeout error or `None`): Redis is not answering.
async fn every_kind_returns_within_its_budget(client: &LockClient, name: &str, when: &str) {
    use futures::future::BoxFuture;
    use holdlock::LockOptions;
    let wait = Duration::from_millis(500);
    let options = move || LockOptions::new().wait(wait);
    type Call = BoxFuture<'static, holdlock::Result<bool>>;
    let calls: Vec<(&str, Call)> = {
        let c = || client.clone();
        let n = || name.to_owned();
        let (a, b, c2, d, e, f, g) = (c(), c(), c(), c(), c(), c(), c());
        let (na, nb, nc, nd, ne, nf, ng) = (n(), n(), n(), n(), n(), n(), n());
        vec![
            (
                "lock_with",
                Box::pin(async move { a.lock(&na).options(options()).await.map(|g| g.is_some()) }),
            ),
            (
                "try_lock",
                Box::pin(async move { b.lock(&nb).try_now().await.map(|g| g.is_some()) }),
            ),
            (
                "fair_lock_with",
                Box::pin(async move {
                    c2.fair_lock(&nc)
                        .options(options())
                        .await
                        .map(|g| g.is_some())
                }),
            ),
            (
                "read_lock_with",
                Box::pin(async move {
                    d.read_lock(&nd)
                        .options(options())
                        .await
                        .map(|g| g.is_some())
                }),
            ),
            (
                "write_lock_with",
                Box::pin(async move {
                    e.write_lock(&ne)
                        .options(options())
                        .await
                        .map(|g| g.is_some())
                }),
            ),
            (
                "acquire_with",
                Box::pin(async move {
                    f.semaphore(nf, 2)
                        .acquire()
                        .options(options())
                        .await
                        .map(|p| p.is_some())
                }),
            ),
            (
                "lock_all_with",
                Box::pin(async move {
                    g.lock_all([format!("{ng}-1"), format!("{ng}-2")])
                        .options(options())
                        .await
                        .map(|m| m.is_some())
                }),
            ),
        ]
    };
    let tasks: Vec<_> = calls
        .into_iter()
        .map(|(call, future)| {
            tokio::spawn(async move {
                let start = Instant::now();
                let result = future.await;
                (call, start.elapsed(), result)
            })
        })
        .collect();
    for task in tasks {
        let (call, took, result) = task.await.unwrap();
        assert!(
            took < wait + Duration::from_millis(250 + 250),
            "{when}: {call} took {took:?} ({result:?})"
        );
        assert!(
            matches!(result, Ok(false)) || matches!(&result, Err(error) if error.is_redis()),
            "{when}: {call} returned {result:?}"
        );
    }
}

/// A call with a wait returns within its wait (plus a round trip's grace) when Redis
/// does not answer, paused (`CLIENT PAUSE`) or stopped, for every kind; once the pause
/// ends, nothing is left held (attempts whose outcome was unknown were settled).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_wait_honours_its_budget_when_redis_does_not_answer() {
    use fred::interfaces::{ClientLike, KeysInterface};
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("budget");
    server.command(&["CLIENT", "PAUSE", "1500", "ALL"]).unwrap();
    every_kind_returns_within_its_budget(&client, &name, "paused").await;
    // After the pause, every attempt the budget cut short has been settled.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let pattern = format!(
        "{}*",
        common::key(&name).replace('{', "\\{").replace('}', "\\}")
    );
    let left: Vec<String> = client
        .redis()
        .custom(
            fred::types::CustomCommand::new_static(
                "KEYS",
                fred::types::ClusterHash::FirstKey,
                false,
            ),
            vec![pattern],
        )
        .await
        .unwrap();
    assert!(
        left.iter()
            .all(|key| key.ends_with(":token") || key.ends_with(":rw")),
        "left behind: {left:?}"
    );
    for key in left.iter().filter(|key| key.ends_with(":rw")) {
        // A read-write lock's key may outlive its holders as a writer's mark only.
        let fields: Vec<String> = client
            .redis()
            .custom(
                fred::types::CustomCommand::new_static(
                    "HKEYS",
                    fred::types::ClusterHash::FirstKey,
                    false,
                ),
                vec![key.clone()],
            )
            .await
            .unwrap();
        assert!(
            fields.iter().all(|f| f == "writer_waits" || f == "waiting"),
            "{key}: {fields:?}"
        );
    }
    let _: i64 = client
        .redis()
        .exists(common::key(&name).as_str())
        .await
        .unwrap();
    drop(server);
    every_kind_returns_within_its_budget(&client, &name, "stopped").await;
}
