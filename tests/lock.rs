//! Mutual exclusion, waiting, timeouts, owners and bad input.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::interfaces::{HashesInterface, KeysInterface};
use holdlock::{LockClient, LockError, LockGuard, LockOptions, owner_scope};

common::on_every_topology!(
    try_lock_on_a_held_lock_returns_none_without_waiting,
    a_try_to_re_enter_is_not_refused_for_a_local_holder_that_lost_the_lock_unaware,
    lock_timeout_gives_up_after_its_timeout,
    local_waiters_queue_in_fifo_order,
    another_owner_cannot_release_and_a_guard_moves_between_tasks,
    futures_joined_in_one_task_share_an_owner_unless_scoped,
    owner_id_names_the_current_task,
    bad_input_is_rejected_and_changes_nothing,
    a_key_of_another_type_is_wrongtype_and_left_alone,
    a_shut_down_client_refuses_work,
);

#[test]
fn client_guard_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync + 'static>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    fn is_send_sync<T: Send + Sync + 'static>() {}
    is_send_sync::<LockClient>();
    is_send_sync::<LockGuard>();
    is_send_sync::<LockError>();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = common::client().await;
        let future = client.lock("bounds");
        send(&future);
        drop(future);
        send_sync(&client);
    });
}

async fn try_lock_on_a_held_lock_returns_none_without_waiting(url: &str) {
    let name = common::unique("try");
    let (a, b) = (common::connect(url).await, common::connect(url).await);
    let held = a.lock(&name).await.unwrap();
    let start = Instant::now();
    assert!(b.lock(&name).try_now().await.unwrap().is_none());
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "took {:?}",
        start.elapsed()
    );
    held.unlock().await.unwrap();
    let got = b
        .lock(&name)
        .try_now()
        .await
        .unwrap()
        .expect("free after unlock");
    got.unlock().await.unwrap();
}

/// A free lock taken and given back costs one script each way and nothing else: no
/// subscription, no queue to leave, no notice (the waiting room's bookkeeping, the
/// shutdown's chores and the client's own channel add no command to this path).
/// Inside the scripts, the take is three commands (the fast path of `acquire.lua`) and
/// the give back two.
#[tokio::test(flavor = "multi_thread")]
async fn an_uncontended_cycle_sends_one_script_each_way_and_nothing_else() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("uncontended");
    // Scripts loaded, the client's own channel subscribed.
    client.lock(&name).await.unwrap().unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    for _ in 0..10 {
        client.lock(&name).await.unwrap().unlock().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // (commandstats counts the commands the scripts call too.)
    let stats = server.command_stats();
    assert_eq!(
        stats.get("evalsha"),
        Some(&20),
        "one acquire and one release script a cycle"
    );
    let extra: Vec<_> = stats
        .keys()
        .filter(|command| {
            [
                "subscribe",
                "ssubscribe",
                "unsubscribe",
                "sunsubscribe",
                "zrem",
                "hexists",
            ]
            .iter()
            .chain(&["publish", "spublish", "zadd", "eval"])
            .any(|extra| command == extra)
        })
        .collect();
    assert!(
        extra.is_empty(),
        "an uncontended cycle sent {extra:?}: {stats:?}"
    );
    let inside: BTreeMap<&str, u64> = stats
        .iter()
        .filter(|(command, _)| {
            [
                "exists", "hset", "pexpire", "hmget", "del", "pttl", "hgetall", "hget", "hincrby",
                "zrange", "zrem",
            ]
            .contains(&command.as_str())
        })
        .map(|(command, calls)| (command.as_str(), *calls))
        .collect();
    let expected: BTreeMap<&str, u64> = [
        ("exists", 10),
        ("hset", 10),
        ("pexpire", 10),
        ("hmget", 10),
        ("del", 10),
    ]
    .into();
    assert_eq!(inside, expected, "the commands the scripts ran: {stats:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tries_against_a_lock_held_in_this_process_cost_redis_nothing() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("local-refusal");
    let held = common::lock_as_another_owner(&client, &name).await;
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let tries: Vec<_> = (0..100)
        .map(|_| {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move { client.lock(&name).try_now().await.unwrap().is_none() })
        })
        .collect();
    for refused in tries {
        assert!(refused.await.unwrap(), "another owner got a held lock");
    }
    assert_eq!(
        server.command_calls("evalsha"),
        0,
        "refused without a round trip"
    );

    // Once released, a try goes to Redis again and wins.
    held.unlock().await.unwrap();
    let got = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move {
            client
                .lock(&name)
                .try_now()
                .await
                .unwrap()
                .map(|g| g.hold_count())
        }
    });
    assert_eq!(got.await.unwrap(), Some(1));
    assert!(server.command_calls("evalsha") >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_arriving_at_once_on_a_held_lock_do_not_stampede_redis() {
    let server = common::RedisServer::start();
    let holder = LockClient::connect(&server.url()).await.unwrap();
    let waiters = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("stampede");
    let held = holder.lock(&name).await.unwrap(); // held elsewhere, for 30 s
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let (client, name, barrier) = (waiters.clone(), name.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                client.lock(&name).await.unwrap().unlock().await.unwrap();
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Only the head of the line has asked Redis (once, and once more after
    // subscribing); the other 49 wait behind it.
    let asked = server.command_calls("evalsha");
    assert!(asked <= 4, "50 callers sent {asked} acquire scripts");
    // On the release they take the lock one after another.
    held.unlock().await.unwrap();
    for call in calls {
        tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("every waiter gets its turn")
            .unwrap();
    }
}

async fn a_try_to_re_enter_is_not_refused_for_a_local_holder_that_lost_the_lock_unaware(url: &str) {
    let client = common::connect(url).await; // 30 s lease: the first holder notices in 10 s
    let name = common::unique("stale-local");
    let stale = common::lock_as_another_owner(&client, &name).await;
    // The lock vanishes behind the first holder's back (a restart, a force unlock).
    let _: i64 = client.redis().del(common::key(&name)).await.unwrap();
    assert!(!stale.is_lost(), "not noticed yet");
    let nested = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move {
            let outer = client.lock(&name).await.unwrap();
            let inner = client.lock(&name).try_now().await.unwrap();
            let count = inner.as_ref().map(LockGuard::hold_count);
            drop(inner);
            outer.unlock().await.unwrap();
            count
        }
    });
    assert_eq!(
        nested.await.unwrap(),
        Some(2),
        "the holder's own try must re-enter, whatever other local owners think they hold"
    );
    drop(stale);
}

async fn lock_timeout_gives_up_after_its_timeout(url: &str) {
    let name = common::unique("timeout");
    let (a, b) = (common::connect(url).await, common::connect(url).await);
    let _held = a.lock(&name).await.unwrap();
    let start = Instant::now();
    let got = b
        .lock(&name)
        .timeout(Duration::from_millis(300))
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(got.is_none());
    assert!(
        waited >= Duration::from_millis(300),
        "gave up early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "gave up late: {waited:?}");
}

async fn local_waiters_queue_in_fifo_order(url: &str) {
    let name = common::unique("fifo");
    let holder = common::connect(url).await;
    let waiters = common::connect(url).await;
    let held = holder.lock(&name).await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let (client, name, order) = (waiters.clone(), name.clone(), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let guard = client.lock(&name).await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(50)).await; // join the queue in turn
    }
    held.unlock().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}

async fn another_owner_cannot_release_and_a_guard_moves_between_tasks(url: &str) {
    let name = common::unique("owner");
    let client = common::connect(url).await;
    let guard = client.lock(&name).await.unwrap();
    let owner = guard.owner().to_owned();
    // Another task (another owner) cannot take it...
    let other = client.clone();
    let name2 = name.clone();
    let blocked =
        tokio::spawn(async move { other.lock(&name2).try_now().await.unwrap().is_none() });
    assert!(blocked.await.unwrap());
    // ...nor release it through the scripts: only the owner's field counts.
    let raw = client.redis();
    let fields: std::collections::HashMap<String, i64> =
        raw.hgetall(common::key(&name).as_str()).await.unwrap();
    assert_eq!(fields.get(&owner), Some(&1));
    // The guard remembers its owner: moved to another task, it still releases.
    tokio::spawn(async move { guard.unlock().await.unwrap() })
        .await
        .unwrap();
    assert!(!client.is_locked(&name).await.unwrap());
}

async fn futures_joined_in_one_task_share_an_owner_unless_scoped(url: &str) {
    let name = common::unique("scope");
    let client = common::connect(url).await;
    // Without scopes, both futures are the same owner: the second re-enters.
    let (a, b) = tokio::join!(client.lock(&name), client.lock(&name));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.owner(), b.owner());
    assert_eq!(b.hold_count(), 2);
    drop((a, b));
    tokio::time::sleep(Duration::from_millis(100)).await;

    // With scopes they exclude each other: the critical sections never overlap.
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let section = |client: LockClient,
                   name: String,
                   inside: Arc<std::sync::atomic::AtomicUsize>| async move {
        let guard = client.lock(&name).await.unwrap();
        let before = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        let owner = guard.owner().to_owned();
        guard.unlock().await.unwrap();
        (before, owner)
    };
    let ((x, ox), (y, oy)) = tokio::join!(
        owner_scope(section(client.clone(), name.clone(), inside.clone())),
        owner_scope(section(client.clone(), name.clone(), inside.clone())),
    );
    assert_eq!((x, y), (0, 0), "the scoped sections overlapped");
    assert_ne!(ox, oy);
}

async fn owner_id_names_the_current_task(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("owner-id");
    let guard = client.lock(&name).await.unwrap();
    assert_eq!(guard.owner(), client.owner_id());
    let other = client.clone();
    let in_task = tokio::spawn(async move { other.owner_id() }).await.unwrap();
    assert_ne!(in_task, client.owner_id());
    assert_eq!(guard.name(), name);
}

async fn bad_input_is_rejected_and_changes_nothing(url: &str) {
    let client = common::connect(url).await;
    assert!(matches!(
        client.lock("").await,
        Err(LockError::InvalidName { .. })
    ));
    assert!(matches!(
        client.lock("a{b}").try_now().await,
        Err(LockError::InvalidName { .. })
    ));
    let name = common::unique("bad");
    let zero = LockOptions::new().lease(Duration::ZERO);
    assert!(matches!(
        client.lock(&name).options(zero).await,
        Err(LockError::InvalidOption {
            option: "lease",
            ..
        })
    ));
    let huge = LockOptions::new().lease(Duration::MAX);
    assert!(matches!(
        client.lock(&name).options(huge).await,
        Err(LockError::InvalidOption { .. })
    ));
    let forever = LockOptions::new().wait(Duration::MAX);
    assert!(matches!(
        client.lock(&name).options(forever).await,
        Err(LockError::InvalidOption { .. })
    ));
    assert!(
        !client.is_locked(&name).await.unwrap(),
        "nothing was written"
    );

    let braces = LockClient::builder(url).prefix("{app}:").build().await;
    assert!(matches!(
        braces,
        Err(LockError::InvalidOption {
            option: "prefix",
            ..
        })
    ));
    let zero_lease = LockClient::builder(url).lease(Duration::ZERO).build().await;
    assert!(matches!(
        zero_lease,
        Err(LockError::InvalidOption {
            option: "lease",
            ..
        })
    ));
    let bad_url = LockClient::connect("not a url at all").await;
    assert!(
        matches!(bad_url, Err(LockError::InvalidOption { option: "url", .. })),
        "{bad_url:?}"
    );
}

async fn a_key_of_another_type_is_wrongtype_and_left_alone(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("wrongtype");
    let key = common::key(&name);
    let _: () = client
        .redis()
        .set(key.as_str(), "not a lock", None, None, false)
        .await
        .unwrap();
    assert!(matches!(
        client.lock(&name).await,
        Err(LockError::WrongType { .. })
    ));
    let second = client.lock(&name).try_now().await;
    assert!(
        matches!(second, Err(LockError::WrongType { .. })),
        "{second:?}"
    );
    let value: String = client.redis().get(key.as_str()).await.unwrap();
    assert_eq!(value, "not a lock");

    let name = common::unique("wrongtype-list");
    let list = common::key(&name);
    let _: () = fred::interfaces::ListInterface::rpush(client.redis(), list.as_str(), "x")
        .await
        .unwrap();
    assert!(matches!(
        client.lock(&name).await,
        Err(LockError::WrongType { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn connecting_to_a_dead_port_fails_within_the_connect_timeout() {
    let port = common::server::free_port().unwrap();
    let start = Instant::now();
    let result = LockClient::builder(format!("redis://127.0.0.1:{port}"))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await;
    assert!(result.is_err(), "connected to nothing?");
    assert!(result.unwrap_err().is_redis());
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
}

async fn a_shut_down_client_refuses_work(url: &str) {
    let client = common::connect(url).await;
    client.shutdown().await;
    assert!(matches!(client.lock("x").await, Err(LockError::Shutdown)));
    assert!(matches!(
        client.is_locked("x").await,
        Err(LockError::Shutdown)
    ));
}

/// A client built from a fred `Config` (and a reconnect policy of its own) locks like
/// one built from a URL, on the same keys.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_built_from_a_fred_config_locks_the_same_keys() {
    use holdlock::fred::types::config::{Config, ReconnectPolicy};
    let config = Config::from_url(&common::url()).unwrap();
    let client = LockClient::builder_from_config(config)
        .reconnect_policy(ReconnectPolicy::new_constant(0, 100))
        .build()
        .await
        .unwrap();
    let name = common::unique("from-config");
    let guard = client.lock(&name).await.unwrap();
    let other = common::client().await;
    assert!(
        other.lock(&name).try_now().await.unwrap().is_none(),
        "the same key"
    );
    guard.unlock().await.unwrap();
    assert!(!other.is_locked(&name).await.unwrap());
}

/// A lock client over the application's own fred clients: a client of its pool for
/// commands (connected already), holdlock's own subscriber beside it, then a lent
/// command client and subscriber not yet connected (build connects them). Locks and
/// wake-ups work, the application's commands share the connection, and `shutdown`
/// leaves the lent clients open.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_over_the_applications_own_fred_clients() {
    use fred::prelude::{Builder, ClientLike, Config};
    let config = Config::from_url(&common::url()).unwrap();
    let pool = Builder::from_config(config.clone()).build_pool(3).unwrap();
    pool.init().await.unwrap();
    let lent = pool.next().clone();
    let fresh = Builder::from_config(config.clone()).build().unwrap();
    let fresh_subscriber = Builder::from_config(config)
        .build_subscriber_client()
        .unwrap();
    let other = common::client().await;
    for (redis, subscriber) in [
        (lent.clone(), None),
        (fresh.clone(), Some(fresh_subscriber.clone())),
    ] {
        let client = LockClient::builder("redis://lent.invalid:1")
            .fred_clients(redis.clone(), subscriber)
            .build()
            .await
            .unwrap();
        assert_eq!(client.redis().id(), redis.id(), "not the lent client");
        let name = common::unique("lent");
        let guard = client.lock(&name).await.unwrap();
        let waiter = {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move { common::lock_as_another_owner(&client, &name).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished());
        guard.unlock().await.unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken by the release")
            .unwrap();
        woken.unlock().await.unwrap();
        assert!(!other.is_locked(&name).await.unwrap());
        client.shutdown().await;
        let pong: String = redis.ping(None).await.unwrap();
        assert_eq!(pong, "PONG", "shutdown closed the lent client");
    }
    assert!(
        fresh_subscriber.is_connected(),
        "shutdown closed the lent subscriber"
    );
}

#[tokio::test]
async fn lock_call_futures_stay_small() {
    // Every task that takes a lock carries its call's future; a future that kept room
    // for an inner future twice (an `async fn` awaiting its argument) was 14 KiB for
    // `lock(..).try_now()`, which made a burst of a thousand tries spend its time allocating.
    // The calls are boxed (an `Acquire` holds its call once it runs): what counts is
    // the size of the box's content, the future itself, and the request's own.
    let client = common::client().await;
    let sizes = [
        ("lock", client.lock("a").call_size()),
        ("try_lock", client.lock("a").try_now().call_size()),
        (
            "lock_timeout",
            client.lock("a").timeout(Duration::from_secs(1)).call_size(),
        ),
        ("fair_lock", client.fair_lock("a").call_size()),
        ("read_lock", client.read_lock("a").call_size()),
        ("write_lock", client.write_lock("a").call_size()),
        ("lock_all", client.lock_all(["a", "b"]).call_size()),
    ];
    println!("{sizes:?}");
    // About 4 KiB each (lock_all 5 KiB) on 2026-12-06; a call that keeps its take step
    // twice (an argument or capture awaited by value) is 7 KiB and more.
    for (call, size) in sizes {
        assert!(size <= 6 * 1024, "{call}: {size} bytes");
    }
    let request = std::mem::size_of_val(&client.lock("a").timeout(Duration::from_secs(1)));
    assert!(request <= 256, "a request: {request} bytes");
}

/// A burst of tries of one free lock from one process has one winner, and the tries
/// that a batch found taken by it are refused here, as a try is refused before asking
/// when another owner in this process holds the lock: 200 tries cost Redis a few
/// scripts, not one more for each loser.
#[tokio::test(flavor = "current_thread")]
async fn a_burst_of_tries_costs_redis_a_few_scripts_and_has_one_winner() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("try-burst");
    // The scripts loaded, alone and batched, before counting.
    let warm = common::unique("try-burst-warm");
    let burst = |name: String| {
        let tries: Vec<_> = (0..200)
            .map(|_| {
                let (client, name) = (client.clone(), name.clone());
                tokio::spawn(async move { client.lock(&name).try_now().await })
            })
            .collect();
        async move {
            let mut winners = Vec::new();
            for tried in tries {
                winners.extend(tried.await.unwrap().unwrap());
            }
            winners
        }
    };
    for guard in burst(warm).await {
        guard.unlock().await.unwrap();
    }
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let winners = burst(name.clone()).await;
    let scripts = server.command_calls("evalsha");
    assert_eq!(winners.len(), 1, "one winner of 200 tries");
    assert!(
        scripts <= 10,
        "200 tries of one lock sent {scripts} scripts"
    );
    for guard in winners {
        guard.unlock().await.unwrap();
    }
    client.shutdown().await;
}

/// A handful of tasks on as many free locks already share their scripts: of 8
/// `lock()`s started at once only the first two go out alone (the client keeps two
/// calls of a sort in flight alone) and the rest in one batch, and so do their 8
/// `unlock()`s. A service with a few requests at a time pays Redis a script call per
/// batch, not per lock.
#[tokio::test(flavor = "current_thread")]
async fn a_few_calls_at_once_go_out_together() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let names: Vec<String> = (0..8)
        .map(|i| common::unique(&format!("few-at-once-{i}")))
        .collect();
    common::load_lock_scripts(&client).await;
    let (taken, released) =
        common::scripts_to_take_and_release_at_once(&client, &server, &names).await;
    assert!(
        taken <= 4 && released <= 4,
        "8 locks at once: {taken} scripts to take, {released} to release"
    );
    client.shutdown().await;
}

/// Acquisitions of different fixed leases that go out together each get their own
/// lease: the batch script names one lease per call, so a batch of mixed leases goes
/// out a call per lease (here 40 locks at once, 20 s and 40 s alternating).
#[tokio::test(flavor = "current_thread")]
async fn acquisitions_of_mixed_leases_that_go_out_together_each_get_their_own() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    common::load_lock_scripts(&client).await;
    let lease = |i: usize| Duration::from_secs(if i % 2 == 0 { 20 } else { 40 });
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let takes: Vec<_> = (0..40)
        .map(|i| {
            let (client, name) = (client.clone(), common::unique(&format!("mixed-{i}")));
            let options = LockOptions::new().lease(lease(i));
            tokio::spawn(async move { client.lock(&name).options(options).await })
        })
        .collect();
    let mut guards = Vec::new();
    for take in takes {
        guards.push(take.await.unwrap().unwrap().expect("a free lock refused"));
    }
    let scripts = server.command_calls("evalsha");
    assert!(scripts < 20, "40 locks at once sent {scripts} scripts");
    for (i, guard) in guards.iter().enumerate() {
        let pttl = common::integer(&server.query(&["PTTL", &common::key(guard.name())]).unwrap());
        let lease = i64::try_from(lease(i).as_millis()).unwrap();
        assert!(
            pttl <= lease && pttl > lease - 5_000,
            "{i}: PTTL {pttl} ms for a lease of {lease} ms"
        );
    }
    common::unlock_each_at_once(guards).await;
    client.shutdown().await;
}

/// Unlocks beyond the release calls a client keeps in flight alone (2) join one batch:
/// 100 unlocks at once cost far fewer than 100 scripts, and each hears its own outcome,
/// as it would alone: released, not held (its key deleted meanwhile), or a key of the
/// wrong type.
#[tokio::test(flavor = "current_thread")]
async fn unlocks_beyond_the_calls_in_flight_go_out_together_and_each_hears_its_own() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let names: Vec<String> = (0..100)
        .map(|i| common::unique(&format!("batched-unlock-{i}")))
        .collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).await.unwrap());
    }
    // Both release scripts loaded: one alone, one in a background batch (a dropped guard).
    let warm = common::unique("batched-unlock-warm");
    client.lock(&warm).await.unwrap().unlock().await.unwrap();
    drop(client.lock(&warm).await.unwrap());
    common::wait_until_free(&client, &warm, Duration::from_secs(3)).await;
    // Spawned last, so batched: holds 50..60 vanish, keys 80..83 become strings.
    for name in &names[50..60] {
        server.query(&["DEL", &common::key(name)]).unwrap();
    }
    for name in &names[80..83] {
        server.query(&["SET", &common::key(name), "x"]).unwrap();
    }
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let unlocks: Vec<_> = guards
        .into_iter()
        .map(|guard| tokio::spawn(guard.unlock()))
        .collect();
    let mut outcomes = Vec::new();
    for unlock in unlocks {
        outcomes.push(unlock.await.unwrap());
    }
    let scripts = server.command_calls("evalsha");
    for (i, outcome) in outcomes.iter().enumerate() {
        match i {
            50..60 => assert!(
                matches!(outcome, Err(LockError::NotHeld { .. })),
                "{i}: {outcome:?}"
            ),
            80..83 => assert!(
                matches!(outcome, Err(LockError::WrongType { .. })),
                "{i}: {outcome:?}"
            ),
            _ => {
                assert!(outcome.is_ok(), "{i}: {outcome:?}");
                let exists = server.query(&["EXISTS", &common::key(&names[i])]).unwrap();
                assert_eq!(exists, ":0", "{i} still in redis");
            }
        }
    }
    assert!(
        scripts < 40,
        "100 unlocks at once sent {scripts} scripts: {:?}",
        server.command_stats()
    );
    // The releases Redis refused are owed in the background: let them find nothing.
    for name in &names[80..83] {
        server.query(&["DEL", &common::key(name)]).unwrap();
    }
    client.shutdown().await;
}

/// Acquisitions beyond the acquire calls a client keeps in flight alone (2) join one batch:
/// 100 `lock()`s of free locks at once cost far fewer than 100 scripts, and each gets
/// its lock; a try of a lock another client holds, batched, is refused as it would be
/// alone, and a wait that joined a batch for such a lock is told of its release long
/// before the holder's lease could run out.
#[tokio::test(flavor = "current_thread")]
async fn acquisitions_beyond_the_calls_in_flight_go_out_together() {
    let server = common::RedisServer::start();
    let client = LockClient::connect(&server.url()).await.unwrap();
    let other = LockClient::connect(&server.url()).await.unwrap();
    let names: Vec<String> = (0..100)
        .map(|i| common::unique(&format!("batched-lock-{i}")))
        .collect();
    // Spawned last, so batched: 80..90 are held by another client.
    let mut held = Vec::new();
    for name in &names[80..90] {
        held.push(other.lock(name).await.unwrap());
    }
    // The scripts loaded: one acquisition alone, one batch.
    let warm: Vec<_> = (0..20)
        .map(|i| {
            let (client, name) = (client.clone(), common::unique(&format!("warm-{i}")));
            tokio::spawn(async move { client.lock(&name).await })
        })
        .collect();
    for guard in warm {
        guard.await.unwrap().unwrap().unlock().await.unwrap();
    }
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let locks: Vec<_> = names
        .iter()
        .map(|name| {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move { client.lock(&name).try_now().await })
        })
        .collect();
    let mut guards = Vec::new();
    for (i, lock) in locks.into_iter().enumerate() {
        let guard = lock.await.unwrap().unwrap();
        match i {
            80..90 => assert!(guard.is_none(), "{i}: taken from its holder"),
            _ => guards.push(guard.unwrap_or_else(|| panic!("{i}: a free lock refused"))),
        }
    }
    let scripts = server.command_calls("evalsha");
    assert!(
        scripts < 50,
        "100 locks at once sent {scripts} scripts: {:?}",
        server.command_stats()
    );
    // A wait that joins a batch (the client's calls in flight taken by 16 more) for a
    // lock another client holds, with a 30 s lease.
    let busy = names[80].clone();
    let burst: Vec<_> = (0..16)
        .map(|i| {
            let (client, name) = (client.clone(), common::unique(&format!("burst-{i}")));
            tokio::spawn(async move { client.lock(&name).await })
        })
        .collect();
    let waiter = tokio::spawn({
        let client = client.clone();
        async move { client.lock(&busy).await }
    });
    for guard in burst {
        guard.await.unwrap().unwrap().unlock().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "the waiter got a held lock");
    let released = Instant::now();
    held.remove(0).unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("the batched waiter was not told of the release")
        .unwrap()
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(3));
    got.unlock().await.unwrap();
    for guard in &guards {
        let field = server
            .query(&["HGET", &common::key(guard.name()), guard.owner()])
            .unwrap();
        assert_eq!(field, "1", "{}: not held in redis", guard.name());
    }
    for guard in guards.into_iter().chain(held) {
        guard.unlock().await.unwrap();
    }
}
