//! Replica-acknowledged acquisition (`min_replicas`): `WAIT` after a fresh hold, and
//! a clean refusal (no hold left behind) when the replica is paused or gone.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use holdlock::{LockClient, LockError, LockOptions};

use common::RedisServer;

/// Sends `signal` (STOP or CONT) to the replica's redis-server, by its PID.
fn signal(server: &RedisServer, pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid} ({})", server.port);
}

/// Whether `refused` is the refusal of an acquisition that asked for two replicas and
/// had one.
fn one_of_two_replicas<T>(refused: &holdlock::Result<T>) -> bool {
    matches!(
        refused,
        Err(LockError::NotReplicated {
            acked: 1,
            wanted: 2,
            ..
        })
    )
}

fn acknowledged(replicas: u32) -> LockOptions {
    LockOptions::new()
        .wait(Duration::ZERO)
        .min_replicas(replicas, Duration::from_millis(250))
}

#[tokio::test(flavor = "multi_thread")]
async fn acquisitions_need_the_replicas_they_ask_for() {
    let master = RedisServer::start();
    let replica = master.start_streaming_replica();
    let client = LockClient::builder(master.url())
        .min_replicas(1, Duration::from_millis(250))
        .build()
        .await
        .unwrap();
    let name = common::unique("replicated");

    // Healthy replica: the fresh hold is acknowledged; re-entry needs no WAIT.
    let guard = client.lock(&name).await.unwrap();
    let nested = client.lock(&name).await.unwrap();
    assert_eq!(nested.hold_count(), 2);
    drop(nested);
    guard.unlock().await.unwrap();

    // More replicas than there are: refused, with the count, and nothing left held.
    let refused = client.lock(&name).options(acknowledged(2)).await;
    assert!(one_of_two_replicas(&refused), "{refused:?}");
    assert!(client.inspect(&name).await.unwrap().is_none());

    // Paused replica: nobody acknowledges; the hold is released again.
    let pid = replica.process_id();
    signal(&replica, pid, "STOP");
    let paused = client.lock(&name).options(acknowledged(1)).await;
    let after = client.inspect(&name).await;
    signal(&replica, pid, "CONT");
    assert!(
        matches!(
            paused,
            Err(LockError::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            })
        ),
        "{paused:?}"
    );
    assert!(
        after.unwrap().is_none(),
        "an unreplicated hold was left behind"
    );

    // Turned off per call, the same acquisition succeeds without the replica.
    signal(&replica, pid, "STOP");
    let unchecked = client
        .lock(&name)
        .options(acknowledged(0))
        .await
        .unwrap()
        .expect("free");
    signal(&replica, pid, "CONT");
    unchecked.unlock().await.unwrap();

    // Stopped replica: refused; resumed after a new replica: granted again.
    drop(replica);
    assert!(matches!(
        client.lock(&name).await,
        Err(LockError::NotReplicated { acked: 0, .. })
    ));
    assert!(client.inspect(&name).await.unwrap().is_none());
    let _replica = master.start_streaming_replica();
    client.lock(&name).await.unwrap().unlock().await.unwrap();
}

/// Every kind waits for the replicas it asks for: the fair lock, both sides of the
/// read-write lock and a semaphore's permit are acknowledged like the mutex, and one
/// that too few replicas acknowledged is released again (nothing left in Redis).
#[tokio::test(flavor = "multi_thread")]
async fn every_kind_needs_the_replicas_it_asks_for() {
    use fred::interfaces::KeysInterface;
    let master = RedisServer::start();
    let _replica = master.start_streaming_replica();
    let client = LockClient::connect(&master.url()).await.unwrap();
    let name = common::unique("replicated-kinds");
    let key = common::key(&name);
    let keys_left = || async {
        let mut left = Vec::new();
        for suffix in [":fair", ":rw", ":sem"] {
            let key = format!("{key}{suffix}");
            let exists: i64 = client.redis().exists(key.as_str()).await.unwrap();
            if exists > 0 {
                left.push(key);
            }
        }
        left
    };
    let semaphore = client.semaphore(name.as_str(), 2);
    for wanted in [2, 1] {
        let options = acknowledged(wanted);
        let results = [
            client
                .fair_lock(&name)
                .options(options.clone())
                .await
                .map(|g| g.map(drop)),
            client
                .read_lock(&name)
                .options(options.clone())
                .await
                .map(|g| g.map(drop)),
            client
                .write_lock(&name)
                .options(options.clone())
                .await
                .map(|g| g.map(drop)),
            semaphore
                .acquire()
                .options(options.clone())
                .await
                .map(|p| p.map(drop)),
        ];
        for (kind, result) in ["fair", "read", "write", "permit"].iter().zip(results) {
            match (wanted, result) {
                (
                    2,
                    Err(LockError::NotReplicated {
                        acked: 1,
                        wanted: 2,
                        ..
                    }),
                ) => {}
                (1, Ok(Some(()))) => {}
                (_, other) => panic!("{kind} asking for {wanted}: {other:?}"),
            }
        }
        if wanted == 2 {
            assert_eq!(
                keys_left().await,
                Vec::<String>::new(),
                "unreplicated holds left"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_wait_does_not_hold_up_other_locks_of_the_client() {
    let master = RedisServer::start();
    let replica = master.start_streaming_replica();
    let client = LockClient::connect(&master.url()).await.unwrap();
    let pid = replica.process_id();
    signal(&replica, pid, "STOP");
    let waiting = {
        let (client, name) = (client.clone(), common::unique("slow-wait"));
        let options = LockOptions::new().min_replicas(1, Duration::from_millis(1500));
        tokio::spawn(async move { client.lock(&name).options(options).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // WAIT blocks its own connection only: plain locks go on meanwhile.
    let other = common::unique("unblocked");
    for _ in 0..20 {
        client.lock(&other).await.unwrap().unlock().await.unwrap();
    }
    let still_waiting = !waiting.is_finished();
    let refused = waiting.await.unwrap();
    signal(&replica, pid, "CONT");
    assert!(still_waiting, "the plain locks waited behind WAIT");
    assert!(
        matches!(refused, Err(LockError::NotReplicated { .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_connections_leave_acknowledged_holds_exactly_once() {
    let master = Arc::new(RedisServer::start());
    let _replica = master.start_streaming_replica();
    let client = LockClient::builder(master.url())
        .min_replicas(1, Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let killer = {
        let (master, stop) = (Arc::clone(&master), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut kills = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10 + kills % 17));
                let _ = master.command(&["CLIENT", "KILL", "TYPE", "normal"]);
                kills += 1;
            }
            kills
        })
    };
    let mut outcomes = [0usize; 3]; // granted, refused, failed
    let names: Vec<String> = (0..4)
        .map(|i| common::unique(&format!("ack-{i}")))
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        for name in &names {
            let result = client
                .lock(name)
                .options(LockOptions::new().wait(Duration::ZERO))
                .await;
            let held = common::hold_count(client.redis(), name, &client.owner_id()).await;
            match result {
                Ok(Some(guard)) => {
                    outcomes[0] += 1;
                    assert_eq!(held, Some(1), "a granted hold is counted once");
                    while let Err(error) = client.force_unlock(name).await {
                        assert!(error.is_redis(), "{error}");
                    }
                    drop(guard);
                }
                Ok(None) => panic!("nobody else holds {name}"),
                Err(LockError::NotReplicated { .. }) => {
                    outcomes[1] += 1;
                    assert_eq!(held, None, "a refused hold was left behind");
                }
                Err(error) => {
                    // The outcome stayed unknown for the whole connect timeout: a hold
                    // may exist (it would expire with its lease). Clear it.
                    assert!(error.is_redis(), "{error}");
                    outcomes[2] += 1;
                    while client.force_unlock(name).await.is_err() {}
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let kills = killer.join().unwrap();
    println!("granted, refused, failed: {outcomes:?} with {kills} connection kills");
    assert!(outcomes[0] > 0, "nothing was ever granted: {outcomes:?}");
}

/// An acknowledged acquisition whose server holds writes back (`CLIENT PAUSE WRITE`)
/// past the call's time: the script waits in the server on the acknowledging
/// connection, and the call's settling reads the owner's count. Read over another
/// connection, the count would overtake the waiting script, say "not run", and the
/// script would run after the pause: a hold no guard owns, for a whole lease.
#[tokio::test(flavor = "multi_thread")]
async fn an_acknowledged_lock_that_times_out_while_writes_are_paused_leaves_nothing_behind() {
    let master = RedisServer::start();
    let _replica = master.start_streaming_replica();
    let client = LockClient::builder(master.url())
        .min_replicas(1, Duration::from_millis(250))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let name = common::unique("acknowledged-paused");
    common::lock_through_a_write_pause(&client, &master, &name).await;
}

/// A `WAIT` blocks its connection for its whole timeout when the replicas lag (here:
/// two are asked for, one exists), and `WAIT`s run one at a time. Concurrent
/// acquisitions share them: each waits at most two timeouts, and the server sees a
/// few `WAIT`s, not one per acquisition. (With one each, the twentieth acquisition
/// waited twenty timeouts, and past the command timeout failed with "Request timed
/// out": issue 46's `min_replicas` failover timeouts.)
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_acquisitions_share_their_waits_when_replicas_lag() {
    let master = RedisServer::start();
    let _replica = master.start_streaming_replica();
    acquisitions_share_waits(&master.url(), &[&master]).await;
}

/// The same on a cluster of three primaries with a replica each: `WAIT`s are shared
/// per primary.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_acquisitions_share_their_waits_on_each_primary_of_a_cluster() {
    let cluster = common::RedisCluster::start_with_replicas(3, 1);
    acquisitions_share_waits(&cluster.url(), &cluster.primaries()).await;
}

/// Twenty concurrent acquisitions through `url` that ask for one replica more than
/// each primary (`primaries`) has: each is refused within two `WAIT` timeouts (and the
/// round trips around them), and the primaries see a few `WAIT`s each.
async fn acquisitions_share_waits(url: &str, primaries: &[&RedisServer]) {
    let client = LockClient::connect(url).await.unwrap();
    let wait = Duration::from_millis(300);
    let lagging = LockOptions::new().min_replicas(2, wait);
    // The scripts loaded, on every primary.
    for i in 0..12 {
        let warm = client
            .lock(format!("warm-{i}"))
            .options(lagging.clone())
            .await;
        assert!(
            matches!(warm, Err(LockError::NotReplicated { .. })),
            "{warm:?}"
        );
    }
    for primary in primaries {
        primary.query(&["CONFIG", "RESETSTAT"]).unwrap();
    }

    const CALLS: usize = 20;
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let (client, options) = (client.clone(), lagging.clone());
            let name = common::unique(&format!("lagging-{i}"));
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let refused = client.lock(&name).options(options).await;
                (refused.map(|guard| guard.is_some()), started.elapsed())
            })
        })
        .collect();
    for call in calls {
        let (refused, took) = call.await.unwrap();
        assert!(one_of_two_replicas(&refused), "{refused:?}");
        // Two timeouts and the round trips around them; twenty one after another
        // would take 6 s.
        assert!(took < wait * 5, "an acquisition took {took:?}");
    }
    for primary in primaries {
        let waits = primary.command_calls("wait");
        assert!(
            waits <= 6,
            "{waits} WAITs on one primary for {CALLS} acquisitions"
        );
        let left = primary.array(&["KEYS", "*lagging-*"]).unwrap();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// Acquisitions dropped while they wait for a shared `WAIT` (their tasks aborted)
/// leave nothing held, and the ones still waiting are answered as usual: a `WAIT`
/// nobody awaits any more is finished by the next acquisition that joins it.
#[tokio::test(flavor = "multi_thread")]
async fn acquisitions_dropped_while_they_share_a_wait_leave_nothing_held() {
    let master = RedisServer::start();
    let _replica = master.start_streaming_replica();
    let client = LockClient::connect(&master.url()).await.unwrap();
    let wait = Duration::from_millis(300);
    let lagging = LockOptions::new().min_replicas(2, wait);
    let warm = client
        .lock(common::unique("warm"))
        .options(lagging.clone())
        .await;
    assert!(
        matches!(warm, Err(LockError::NotReplicated { .. })),
        "{warm:?}"
    );

    for round in 0..3 {
        let calls: Vec<_> = (0..10)
            .map(|i| {
                let (client, options) = (client.clone(), lagging.clone());
                let name = common::unique(&format!("dropped-{round}-{i}"));
                tokio::spawn(async move { client.lock(&name).options(options).await })
            })
            .collect();
        // Mid-way through the first `WAIT`, every other call is dropped.
        tokio::time::sleep(wait / 2).await;
        let mut kept = Vec::new();
        for (i, call) in calls.into_iter().enumerate() {
            match i % 2 {
                0 => call.abort(),
                _ => kept.push(call),
            }
        }
        for call in kept {
            let refused = tokio::time::timeout(wait * 5, call)
                .await
                .expect("answered within two timeouts")
                .unwrap();
            assert!(
                matches!(refused, Err(LockError::NotReplicated { .. })),
                "{refused:?}"
            );
        }
    }
    // What the dropped calls took is settled in the background.
    let started = std::time::Instant::now();
    loop {
        let left = master.array(&["KEYS", "*dropped-*"]).unwrap();
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "left held: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
