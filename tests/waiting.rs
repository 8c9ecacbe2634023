//! Waiting for a held lock: shutdown, a lost subscriber connection, and two clients
//! taking turns on one busy lock.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fred::interfaces::{KeysInterface, PubsubInterface};
use holdlock::{LockClient, LockError, LockOptions};

/// How many clients are subscribed to `name`'s release channel: a shard channel, or on
/// Redis 6.2 (which has none) a plain one.
async fn subscribers(client: &LockClient, name: &str) -> i64 {
    let channel = common::release_channel(name);
    let redis = client.redis();
    let counts: Vec<(String, i64)> = match common::server::server_version().before_redis_7() {
        true => redis.pubsub_numsub(channel.as_str()).await.unwrap(),
        false => redis.pubsub_shardnumsub(channel.as_str()).await.unwrap(),
    };
    counts.first().map_or(0, |(_, n)| *n)
}

async fn wait_for_subscribers(client: &LockClient, name: &str, count: i64) {
    let start = Instant::now();
    while subscribers(client, name).await != count {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the release channel never had {count} subscribers"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_wakes_every_waiter_with_shutdown() {
    let holder = common::client().await; // holds with the default 30 s lease
    let client = common::client().await;
    let name = common::unique("shutdown-waiters");
    let held = common::lock_as_another_owner(&holder, &name).await;

    // One head, asleep on the release channel...
    let head = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.map(drop) })
    };
    wait_for_subscribers(&holder, &name, 1).await;
    // ...and two queued behind it, one of them with a (long) timeout.
    let queued = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await.map(drop) })
    };
    let timed = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move {
            client
                .lock(&name)
                .timeout(Duration::from_secs(60))
                .await
                .map(drop)
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;

    shut_down_ends(
        &client,
        [("head", head), ("queued", queued), ("timed", timed)],
    )
    .await;
    held.unlock().await.unwrap();
}

/// Shuts `client` down and checks that each waiter ends with `Shutdown` within a
/// second.
async fn shut_down_ends<const N: usize>(
    client: &LockClient,
    waiters: [(&str, tokio::task::JoinHandle<holdlock::Result<()>>); N],
) {
    let start = Instant::now();
    client.shutdown().await;
    for (which, task) in waiters {
        let result = tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap_or_else(|_| panic!("the {which} waiter still waits after shutdown"))
            .unwrap();
        assert!(
            matches!(result, Err(LockError::Shutdown)),
            "{which}: {result:?}"
        );
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_wakes_waiting_readers_with_shutdown() {
    let holder = common::client().await; // writes with the default 30 s lease
    let client = common::client().await;
    let name = common::unique("shutdown-readers");
    let written = holder.write_lock(&name).await.unwrap();
    let read = || {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.read_lock(&name).await.map(drop) })
    };
    // One reader refused (it asked, then sleeps subscribed), and one that comes while
    // it sleeps and sleeps with it without asking.
    let refused = read();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let alongside = read();
    tokio::time::sleep(Duration::from_millis(100)).await;

    shut_down_ends(&client, [("refused", refused), ("alongside", alongside)]).await;
    written.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_survive_losing_the_subscriber_connection() {
    common::trace();
    let server = common::RedisServer::start();
    let holder = LockClient::connect(&server.url()).await.unwrap(); // 30 s lease
    let client = LockClient::connect(&server.url()).await.unwrap();
    // Two locks with a waiter each, the anchor's channel in a lower hash slot: fred's
    // own resubscription (`manage_subscriptions`) stops after the lowest slot's
    // channels when it fails, so only the anchor would be subscribed again.
    let slot = |name: &str| fred::util::redis_keyslot(common::release_channel(name).as_bytes());
    let name = std::iter::repeat_with(|| common::unique("lost-subscriber"))
        .find(|name| slot(name) > 1_000)
        .unwrap();
    let anchor = std::iter::repeat_with(|| common::unique("lost-subscriber-anchor"))
        .find(|anchor| slot(anchor) < slot(&name))
        .unwrap();
    let held = common::lock_as_another_owner(&holder, &name).await;
    let _anchor_hold = common::lock_as_another_owner(&holder, &anchor).await;
    let anchor_waiter = {
        let (client, anchor) = (client.clone(), anchor.clone());
        tokio::spawn(async move { client.lock(&anchor).await.map(drop) })
    };

    // Waiters that take the lock in turn once it is released...
    let woken = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (client, name, woken) = (client.clone(), name.clone(), Arc::clone(&woken));
            tokio::spawn(async move {
                let guard = client.lock(&name).await?;
                woken.lock().unwrap().push(Instant::now());
                tokio::time::sleep(Duration::from_millis(10)).await;
                guard.unlock().await
            })
        })
        .collect();
    // ...and, on another lock, waiters that keep joining and giving up, so that the
    // subscriber connection is busy subscribing when it is killed.
    let churned = common::unique("lost-subscriber-churn");
    let _churn_hold = common::lock_as_another_owner(&holder, &churned).await;
    let stop = Arc::new(AtomicBool::new(false));
    let churn: Vec<_> = (0..4)
        .map(|i| {
            let (client, name, stop) = (client.clone(), churned.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let wait = Duration::from_millis(5 + 7 * i);
                    let options = LockOptions::new().wait(wait);
                    if let Some(guard) = client.lock(&name).options(options).await? {
                        drop(guard);
                    }
                }
                Ok::<_, LockError>(())
            })
        })
        .collect();
    wait_for_subscribers(&holder, &name, 1).await;
    wait_for_subscribers(&holder, &anchor, 1).await;

    for _ in 0..6 {
        server
            .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for task in churn {
        let result = task.await.unwrap();
        assert!(result.is_ok(), "a waiter failed: {result:?}");
    }

    let released = Instant::now();
    held.unlock().await.unwrap();
    for waiter in waiters {
        let result = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("a waiter never got the lock")
            .unwrap();
        assert!(result.is_ok(), "a waiter failed: {result:?}");
    }
    assert!(!anchor_waiter.is_finished(), "{:?}", anchor_waiter.await);
    anchor_waiter.abort();
    let first = woken.lock().unwrap().iter().min().copied().unwrap();
    assert!(
        first - released < Duration::from_secs(2),
        "the first waiter woke {:?} after the release",
        first - released
    );
}

/// Takes `name` in a loop until `stop`: lock; read, increment and write a counter;
/// unlock; sleep 1 ms. Logs `(client, when granted)` for every acquisition.
fn spawn_worker(
    (client, c): (&LockClient, usize),
    (name, counter): (&str, &str),
    stop: &Arc<AtomicBool>,
    log: &Arc<Mutex<Vec<(usize, Instant)>>>,
) -> tokio::task::JoinHandle<()> {
    let (client, name, counter) = (client.clone(), name.to_owned(), counter.to_owned());
    let (stop, log) = (Arc::clone(stop), Arc::clone(log));
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let guard = client.lock(&name).await.unwrap();
            log.lock().unwrap().push((c, Instant::now()));
            let n: Option<i64> = client.redis().get(counter.as_str()).await.unwrap();
            let next = n.unwrap_or(0) + 1;
            let _: () = client
                .redis()
                .set(counter.as_str(), next, None, None, false)
                .await
                .unwrap();
            guard.unlock().await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
}

/// Two clients of one process on a `current_thread` runtime, 16 tasks each, taking
/// turns on one lock: the second joins while the first keeps the lock busy. It gets
/// the lock within a few hand-overs (not once the first stops asking), and from then
/// on they share it. Run both ways round, as which client's waiter wins a race for a
/// release depends on the order of their connections.
#[tokio::test(flavor = "current_thread")]
async fn a_client_joining_a_busy_lock_gets_it_within_a_few_hand_overs() {
    let url = common::url();
    let clients = [
        LockClient::connect(&url).await.unwrap(),
        LockClient::connect(&url).await.unwrap(),
    ];
    for busy in 0..2 {
        let joining = 1 - busy;
        let name = common::unique("join-busy");
        let counter = format!("{name}:counter");
        let (stop, log) = (Arc::default(), Arc::default());
        let worker = |c: usize| spawn_worker((&clients[c], c), (&name, &counter), &stop, &log);
        let mut tasks: Vec<_> = (0..16).map(|_| worker(busy)).collect();
        // One client's tasks keep the lock busy...
        while log.lock().unwrap().len() < 50 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // ...when the other's join.
        let (joined, joined_at) = (log.lock().unwrap().len(), Instant::now());
        tasks.extend((0..16).map(|_| worker(joining)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.unwrap();
        }
        let total: i64 = clients[0].redis().get(counter.as_str()).await.unwrap();
        let log = log.lock().unwrap();
        assert_eq!(
            total as usize,
            log.len(),
            "a lost update: the lock did not exclude"
        );

        let after = &log[joined..];
        let first = after
            .iter()
            .position(|&(c, _)| c == joining)
            .unwrap_or_else(|| {
                panic!(
                    "the joining client never got the lock in {} hand-overs",
                    after.len()
                )
            });
        let waited = after[first].1 - joined_at;
        let shares: Vec<usize> = (0..2)
            .map(|c| after.iter().filter(|&&(who, _)| who == c).count())
            .collect();
        println!(
            "client {joining} joined client {busy}: its first hold was hand-over #{first}, \
             after {waited:?}; holds since it joined: {shares:?}"
        );
        // The lock changes hands about every millisecond here: a fair hand-over lets
        // the newcomer in within a few of them.
        assert!(
            first <= 8 && waited < Duration::from_millis(200),
            "client {joining} first got the lock {first} hand-overs ({waited:?}) after joining"
        );
        for (c, share) in shares.iter().enumerate() {
            assert!(
                *share * 5 >= after.len(),
                "client {c} got {share} of the {} holds since client {joining} joined",
                after.len()
            );
        }
    }
}

/// A refused `lock(..).try_now()` will not wait, so it leaves no `waiting` mark, and the holder's
/// release publishes to nobody; a refused waiting call does leave the mark.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_try_leaves_no_mark_and_its_release_publishes_nothing() {
    use fred::interfaces::HashesInterface;
    let server = common::RedisServer::start();
    let (holder, trier) = (
        LockClient::connect(&server.url()).await.unwrap(),
        LockClient::connect(&server.url()).await.unwrap(),
    );
    let name = common::unique("try-no-mark");
    let publishes = || server.command_calls("publish") + server.command_calls("spublish");
    let held = holder.lock(&name).await.unwrap();
    assert!(trier.lock(&name).try_now().await.unwrap().is_none());
    let marked: bool = holder
        .redis()
        .hexists(common::key(&name), "waiting")
        .await
        .unwrap();
    assert!(!marked, "a refused try left the waiting mark");
    let before = publishes();
    held.unlock().await.unwrap();
    assert_eq!(publishes(), before, "the release published to nobody");

    let held = holder.lock(&name).await.unwrap();
    let waited = trier
        .lock(&name)
        .timeout(Duration::from_millis(50))
        .await
        .unwrap();
    assert!(waited.is_none());
    let marked: bool = holder
        .redis()
        .hexists(common::key(&name), "waiting")
        .await
        .unwrap();
    assert!(marked, "a refused waiting call marks the lock");
    held.unlock().await.unwrap();
}

/// The scripts (EVAL and EVALSHA calls) `server` has run so far.
fn scripts_run(server: &common::RedisServer) -> u64 {
    server.command_calls("evalsha") + server.command_calls("eval")
}

/// Many clients of one process, a few tasks each, take one lock in turns: a release
/// wakes only the client it names, so each acquisition costs its own script, the
/// release's, and little more; not one attempt per waiting client (with every
/// client's head asking on each release, this costs about ten times as much).
#[tokio::test(flavor = "current_thread")]
async fn many_clients_on_one_lock_cost_a_few_scripts_per_acquisition() {
    const CLIENTS: usize = 24;
    const TASKS: usize = 3;
    const ROUNDS: usize = 5;
    let server = common::RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(LockClient::connect(&server.url()).await.unwrap());
    }
    let name = common::unique("crowd");
    let before = scripts_run(&server);
    let tasks: Vec<_> = clients
        .iter()
        .flat_map(|client| std::iter::repeat_n(client.clone(), TASKS))
        .map(|client| {
            let name = name.clone();
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    client.lock(&name).await.unwrap().unlock().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("a task is stuck")
            .unwrap();
    }
    let acquisitions = (CLIENTS * TASKS * ROUNDS) as f64;
    let per_acquisition = (scripts_run(&server) - before) as f64 / acquisitions;
    println!("{per_acquisition:.2} scripts per acquisition");
    assert!(
        per_acquisition <= 3.0,
        "{per_acquisition:.2} scripts per acquisition (release included)"
    );
    for client in &clients {
        client.shutdown().await;
    }
}

/// Clients queued for a lock whose waiters then gave up are still named by releases
/// (a client leaves the queue only when named): the clients queued behind them get
/// the lock soon all the same, as backups or by the fallback, not once the holder's
/// long lease would have run out.
#[tokio::test(flavor = "multi_thread")]
async fn clients_that_stopped_waiting_do_not_strand_the_others() {
    let url = common::url();
    for gone in [1, 4] {
        let name = common::unique("gone");
        let holder = LockClient::connect(&url).await.unwrap();
        let held = holder.lock(&name).await.unwrap();
        // `gone` clients queue, then give up.
        let mut quitters = Vec::new();
        for _ in 0..gone {
            let quitter = LockClient::connect(&url).await.unwrap();
            let waited = quitter
                .lock(&name)
                .timeout(Duration::from_millis(20))
                .await
                .unwrap();
            assert!(waited.is_none());
            quitters.push(quitter);
        }
        // One more queues behind them and keeps waiting.
        let waiter = LockClient::connect(&url).await.unwrap();
        let waiting = tokio::spawn({
            let (waiter, name) = (waiter.clone(), name.clone());
            async move {
                let guard = waiter.lock(&name).await.unwrap();
                (guard, Instant::now())
            }
        });
        wait_for_subscribers(&holder, &name, 1).await;
        // Its first attempt and subscription are done by now.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let released = Instant::now();
        held.unlock().await.unwrap();
        let (guard, granted) = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiter was stranded")
            .unwrap();
        let waited = granted - released;
        println!("behind {gone} gone: granted {waited:?} after the release");
        assert!(
            waited < Duration::from_millis(1_000),
            "behind {gone} clients gone, granted {waited:?} after the release"
        );
        guard.unlock().await.unwrap();
        for client in quitters.iter().chain([&holder, &waiter]) {
            client.shutdown().await;
        }
    }
}

/// Redisson's subscriptions-per-connection case: after many lock/unlock jobs of 32
/// tasks over 5 names, once every lock is released, a release channel stays subscribed
/// only for the documented linger (200 ms, for a waiter of this client that comes
/// back), then is unsubscribed, with the client still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn release_channels_are_unsubscribed_within_the_linger_after_the_last_waiter() {
    let client = common::client().await;
    let names: Vec<String> = (0..5).map(|_| common::unique("linger")).collect();
    let jobs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..32)
        .map(|task| {
            let (client, names, jobs) = (client.clone(), names.clone(), Arc::clone(&jobs));
            tokio::spawn(async move {
                let mut n = task;
                while jobs.fetch_add(1, Ordering::Relaxed) < 2_000 {
                    n += 7;
                    let guard = client.lock(&names[n % names.len()]).await.unwrap();
                    tokio::task::yield_now().await;
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let ended = Instant::now();
    let mut subscribed = Vec::new();
    for name in &names {
        // The linger, a round trip for the unsubscription, and a margin for a busy
        // machine: well under the seconds a lease lasts.
        while subscribers(&client, name).await > 0 {
            if ended.elapsed() > Duration::from_secs(1) {
                subscribed.push(name.clone());
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(
        subscribed.is_empty(),
        "still subscribed 1 s after the last release: {subscribed:?}"
    );
    let redis = client.redis();
    let channels: Vec<String> = match common::server::server_version().before_redis_7() {
        true => redis.pubsub_channels("*linger*").await.unwrap(),
        false => redis.pubsub_shardchannels("*linger*").await.unwrap(),
    };
    assert!(
        channels
            .iter()
            .all(|channel| !names.iter().any(|name| channel.contains(name.as_str()))),
        "{channels:?}"
    );
}

/// A waiter of this client that comes back within the linger (a task between two
/// critical sections) finds the release channel still subscribed: it sleeps after
/// one refused attempt, without subscribing and asking again, and is woken by the
/// next release.
#[tokio::test(flavor = "current_thread")]
async fn a_waiter_back_within_the_linger_sleeps_after_one_attempt_without_subscribing() {
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(20);
    let holder = common::client_with_lease(&server.url(), lease).await;
    let client = common::client_with_lease(&server.url(), lease).await;
    common::load_lock_scripts(&client).await;
    let name = common::unique("linger-back");
    let take = |client: &LockClient| {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await })
    };
    // A first wait, granted on the holder's release: the room empties and lingers.
    let held = holder.lock(&name).await.unwrap();
    let first = take(&client);
    tokio::time::sleep(Duration::from_millis(20)).await;
    held.unlock().await.unwrap();
    first.await.unwrap().unwrap().unlock().await.unwrap();
    let held = holder.lock(&name).await.unwrap();
    // Long enough for an unsubscription to land, well inside the 200 ms linger.
    tokio::time::sleep(Duration::from_millis(30)).await;
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let again = take(&client);
    // Its attempt is in; then long enough for a subscription and a second attempt.
    let asked = Instant::now();
    while server.command_calls("evalsha") == 0 && asked.elapsed() < lease / 4 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let subscribed = server.command_calls("ssubscribe") + server.command_calls("subscribe");
    assert_eq!(subscribed, 0, "the waiter back subscribed again");
    let scripts = server.command_calls("evalsha");
    assert_eq!(
        scripts, 1,
        "the waiter back asked {scripts} times before sleeping"
    );
    let released = Instant::now();
    held.unlock().await.unwrap();
    let guard = again.await.unwrap().unwrap();
    assert!(released.elapsed() < lease / 2, "{:?}", released.elapsed());
    guard.unlock().await.unwrap();
    client.shutdown().await;
    holder.shutdown().await;
}

/// Keeps `client` busy: two of its lock calls held in flight by a pause of `server`'s
/// writes for `pause_ms`, sent by the time this returns.
async fn keep_busy(
    server: &common::RedisServer,
    client: &LockClient,
    pause_ms: u32,
) -> Vec<tokio::task::JoinHandle<holdlock::LockGuard>> {
    let pause = pause_ms.to_string();
    server.query(&["CLIENT", "PAUSE", &pause, "WRITE"]).unwrap();
    let busy = (0..2)
        .map(|i| {
            let (client, name) = (client.clone(), common::unique(&format!("busy-{i}")));
            tokio::spawn(async move { client.lock(&name).await.unwrap() })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    busy
}

/// Releases the locks [`keep_busy`]'s calls took.
async fn unlock_busy(busy: Vec<tokio::task::JoinHandle<holdlock::LockGuard>>) {
    for taken in busy {
        taken.await.unwrap().unlock().await.unwrap();
    }
}

/// A busy client's waits for a held lock ask together in one batch before they wait,
/// then in line: a burst of 50 costs Redis that batch and the head's one attempt (which
/// queues the client), not an attempt each, and the holder's release wakes them in
/// turn, long before its 20 s lease would have run out.
#[tokio::test(flavor = "current_thread")]
async fn a_busy_clients_burst_of_waits_asks_once_in_line_and_is_woken_by_the_release() {
    const WAITS: usize = 50;
    let server = common::RedisServer::start();
    let lease = Duration::from_secs(20);
    let holder = common::client_with_lease(&server.url(), lease).await;
    let client = common::client_with_lease(&server.url(), lease).await;
    common::load_lock_scripts(&client).await;
    let name = common::unique("busy-burst");
    let held = holder.lock(&name).await.unwrap();
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let busy = keep_busy(&server, &client, 400).await;
    let started = Instant::now();
    let waits: Vec<_> = (0..WAITS)
        .map(|_| {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move {
                let guard = client.lock(&name).await.unwrap();
                guard.unlock().await.unwrap();
            })
        })
        .collect();
    // The pause ends; the batch finds the lock taken and the waits line up.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let scripts = scripts_run(&server);
    assert!(
        scripts <= 6,
        "two calls and a burst of {WAITS} waits sent {scripts} scripts before the release"
    );
    held.unlock().await.unwrap();
    for wait in waits {
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("a wait missed the release")
            .unwrap();
    }
    assert!(started.elapsed() < lease / 2, "{:?}", started.elapsed());
    unlock_busy(busy).await;
    client.shutdown().await;
    holder.shutdown().await;
}

/// A busy client's wait whose batched first attempt is refused only after the wait
/// has ended gives up without asking in line: the lock is not marked for a waiter,
/// and the client is not queued for a wait that is over.
#[tokio::test(flavor = "current_thread")]
async fn a_busy_clients_wait_refused_past_its_end_gives_up_without_queuing() {
    let server = common::RedisServer::start();
    let holder = common::connect(&server.url()).await;
    let client = common::connect(&server.url()).await;
    common::load_lock_scripts(&client).await;
    let name = common::unique("busy-late");
    let held = holder.lock(&name).await.unwrap();
    // The wait's batch is answered once its 20 ms are over.
    let busy = keep_busy(&server, &client, 200).await;
    let waited = client
        .lock(&name)
        .timeout(Duration::from_millis(20))
        .await
        .unwrap();
    assert!(waited.is_none(), "the lock is held");
    use fred::interfaces::HashesInterface;
    let redis = holder.redis();
    let marked: bool = redis.hexists(common::key(&name), "waiting").await.unwrap();
    assert!(!marked, "a wait that was over asked in line");
    let queued: i64 = redis
        .exists(format!("{}:clients", common::key(&name)))
        .await
        .unwrap();
    assert_eq!(queued, 0, "a wait that was over queued its client");
    held.unlock().await.unwrap();
    unlock_busy(busy).await;
    client.shutdown().await;
    holder.shutdown().await;
}
