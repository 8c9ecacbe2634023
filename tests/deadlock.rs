//! Deadlocks across owners are found and broken: a cycle of waits (each owner holds a
//! lock the next waits for) ends with exactly one `LockError::Deadlock`, for the wait
//! that began last, naming the cycle; the others are granted once it lets go. On a
//! single server and on a cluster (the names in different slots), through every kind
//! but the semaphore, and between two tasks of one client. A wait shorter than the
//! check, and a lock taken at once, send nothing for it.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::KeysInterface;
use holdlock::{DEFAULT_DEADLOCK_CHECK, LockClient, LockError, LockKind};
use tokio::sync::Barrier;
use tokio::time::Instant;

common::on_every_topology!(
    two_clients_crossing_two_mutexes,
    three_clients_in_a_ring,
    a_cycle_through_a_write_lock_and_a_read_lock,
    a_cycle_through_a_fair_lock,
    a_cycle_through_a_lock_all,
    two_tasks_of_one_client,
    a_cancelled_long_wait_takes_its_edge_down,
    operators_see_long_waits_and_a_deadlock_whose_victim_is_stalled,
);

/// The check delay of the tests' clients.
const CHECK: Duration = Duration::from_millis(200);

/// How long after the previous one each owner of a cycle begins to wait: the last to
/// begin is the victim.
const STAGGER: Duration = Duration::from_millis(150);

/// A client of `url` checking waits after [`CHECK`].
async fn checking(url: &str) -> LockClient {
    LockClient::builder(url)
        .deadlock_check(CHECK)
        .build()
        .await
        .expect("connect to the test redis")
}

/// A lock of some kind, for an owner of a cycle to hold or wait for.
#[derive(Debug, Clone)]
enum Lock {
    Mutex(String),
    Read(String),
    Write(String),
    Fair(String),
    All(Vec<String>),
}

impl Lock {
    /// The kind and name a cycle names it by.
    fn waited(&self) -> (LockKind, String) {
        match self {
            Lock::Mutex(name) => (LockKind::Mutex, name.clone()),
            Lock::Read(name) | Lock::Write(name) => (LockKind::ReadWrite, name.clone()),
            Lock::Fair(name) => (LockKind::Fair, name.clone()),
            // The member named first: the one another owner holds.
            Lock::All(names) => (LockKind::Mutex, names[0].clone()),
        }
    }
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = holdlock::Result<T>> + Send + 'a>>;

/// Takes `lock` with `client`, runs `body` under it and lets go.
fn under<'a, T: Send + 'a>(
    client: &'a LockClient,
    lock: &'a Lock,
    body: impl Future<Output = T> + Send + 'a,
) -> Boxed<'a, T> {
    match lock {
        Lock::Mutex(name) => Box::pin(client.lock(name).run(async |_| body.await)),
        Lock::Read(name) => Box::pin(client.read_lock(name).run(async |_| body.await)),
        Lock::Write(name) => Box::pin(client.write_lock(name).run(async |_| body.await)),
        Lock::Fair(name) => Box::pin(client.fair_lock(name).run(async |_| body.await)),
        Lock::All(names) => Box::pin(client.lock_all(names).run(async |_| body.await)),
    }
}

/// What one owner of a cycle saw.
#[derive(Debug)]
struct Outcome {
    owner: String,
    /// The wait for its second lock: granted, or the error.
    second: holdlock::Result<()>,
    /// How long that wait lasted.
    waited: Duration,
}

/// In a task of its own on `client`: takes `first`, meets the others at `all_hold`,
/// waits `delay`, then waits for `then` under it.
fn owner(
    client: LockClient,
    first: Lock,
    then: Lock,
    all_hold: Arc<Barrier>,
    delay: Duration,
) -> tokio::task::JoinHandle<Outcome> {
    tokio::spawn(async move {
        let owner = client.owner_id();
        let held = under(&client, &first, async {
            all_hold.wait().await;
            tokio::time::sleep(delay).await;
            let began = Instant::now();
            let second = under(&client, &then, async {}).await;
            (second, began.elapsed())
        });
        let (second, waited) = held.await.expect("the first lock");
        Outcome {
            owner,
            second,
            waited,
        }
    })
}

/// Runs a cycle: owner `i` holds `pairs[i].0` and then waits for `pairs[i].1` (which
/// the next owner holds, the last's the first's), on `clients[i % clients.len()]`,
/// each beginning to wait [`STAGGER`] after the one before. Checks that exactly the
/// last is told of the deadlock, within the check delay and a second of the cycle
/// forming, with the cycle named from its wait on; that the others are granted; and
/// that no edge is left.
async fn cycle(clients: &[LockClient], pairs: &[(Lock, Lock)]) {
    cycle_checked_after(clients, pairs, CHECK).await;
}

/// [`cycle`], for clients whose waits are checked after `check`.
async fn cycle_checked_after(clients: &[LockClient], pairs: &[(Lock, Lock)], check: Duration) {
    let n = pairs.len();
    let all_hold = Arc::new(Barrier::new(n));
    let owners: Vec<_> = (0..n)
        .map(|i| {
            let client = clients[i % clients.len()].clone();
            let (first, then) = pairs[i].clone();
            owner(
                client,
                first,
                then,
                Arc::clone(&all_hold),
                STAGGER * i as u32,
            )
        })
        .collect();
    let mut outcomes = Vec::new();
    for owner in owners {
        outcomes.push(finished(owner).await);
    }
    let victim = outcomes.last().unwrap();
    let Err(LockError::Deadlock { cycle }) = &victim.second else {
        panic!("the last wait was not the victim: {outcomes:#?}");
    };
    assert!(
        victim.waited < check + Duration::from_secs(1),
        "found {:?} after the cycle formed",
        victim.waited
    );
    for outcome in &outcomes[..n - 1] {
        assert!(outcome.second.is_ok(), "{outcomes:#?}");
    }
    // The cycle from the victim's wait on: it waits for what the first owner holds,
    // who waits for what the second holds, ...
    let expected: Vec<(String, LockKind, String)> = (0..n)
        .map(|k| {
            let i = (n - 1 + k) % n;
            let (kind, name) = pairs[i].1.waited();
            (outcomes[i].owner.clone(), kind, name)
        })
        .collect();
    let found: Vec<(String, LockKind, String)> = cycle
        .iter()
        .map(|wait| (wait.owner.clone(), wait.kind, wait.name.clone()))
        .collect();
    assert_eq!(found, expected);
    let message = victim.second.as_ref().unwrap_err().to_string();
    assert!(message.starts_with("deadlock: "), "{message}");
    // Every edge is taken down (in the background, soon after each wait).
    let redis = clients[0].redis();
    for outcome in &outcomes {
        gone(redis, &format!("holdlock:waits:{}", outcome.owner)).await;
    }
}

/// Waits until `key` is gone (five seconds at most).
async fn gone(redis: &fred::clients::Client, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Option<String> = redis.get(key).await.unwrap();
        if left.is_none() {
            return;
        }
        assert!(Instant::now() < deadline, "{key} was left: {left:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A ring: owner `i` holds `locks[i]` and waits for the next.
fn ring(locks: Vec<Lock>) -> Vec<(Lock, Lock)> {
    let next = locks.iter().cycle().skip(1).cloned();
    locks.iter().cloned().zip(next).collect()
}

/// What `owner` saw, once the cycle it is part of was broken.
async fn finished(owner: tokio::task::JoinHandle<Outcome>) -> Outcome {
    tokio::time::timeout(Duration::from_secs(20), owner)
        .await
        .expect("the cycle was not broken")
        .unwrap()
}

/// `n` lock names no other test uses (in different slots of a cluster, mostly).
fn names(n: usize) -> Vec<String> {
    (0..n).map(|_| common::unique("deadlock")).collect()
}

async fn two_clients_crossing_two_mutexes(url: &str) {
    let clients = [checking(url).await, checking(url).await];
    cycle(
        &clients,
        &ring(names(2).into_iter().map(Lock::Mutex).collect()),
    )
    .await;
}

async fn three_clients_in_a_ring(url: &str) {
    let clients = [
        checking(url).await,
        checking(url).await,
        checking(url).await,
    ];
    cycle(
        &clients,
        &ring(names(3).into_iter().map(Lock::Mutex).collect()),
    )
    .await;
}

/// A writer waits for a mutex whose holder waits for the read side: a reader waits
/// for the writer that waits for it.
async fn a_cycle_through_a_write_lock_and_a_read_lock(url: &str) {
    let clients = [checking(url).await, checking(url).await];
    let [x, y] = <[String; 2]>::try_from(names(2)).unwrap();
    let pairs = [
        (Lock::Write(x.clone()), Lock::Mutex(y.clone())),
        (Lock::Mutex(y), Lock::Read(x)),
    ];
    cycle(&clients, &pairs).await;
}

async fn a_cycle_through_a_fair_lock(url: &str) {
    let clients = [checking(url).await, checking(url).await];
    let [x, y] = <[String; 2]>::try_from(names(2)).unwrap();
    cycle(&clients, &ring(vec![Lock::Fair(x), Lock::Mutex(y)])).await;
}

/// The member of a multi-lock waited for takes part like any mutex: owner 0 holds x
/// and waits for {y, z} (z is free, y is held by owner 1); owner 1 holds y and waits
/// for x.
async fn a_cycle_through_a_lock_all(url: &str) {
    let clients = [checking(url).await, checking(url).await];
    let [x, y, z] = <[String; 3]>::try_from(names(3)).unwrap();
    let pairs = [
        (Lock::Mutex(x.clone()), Lock::All(vec![y.clone(), z])),
        (Lock::Mutex(y), Lock::Mutex(x)),
    ];
    cycle(&clients, &pairs).await;
}

async fn two_tasks_of_one_client(url: &str) {
    let client = checking(url).await;
    let locks: Vec<Lock> = names(2).into_iter().map(Lock::Mutex).collect();
    cycle(&[client], &ring(locks)).await;
}

/// A wait dropped after its edge was written takes it down; the next wait of the same
/// owner writes its own.
async fn a_cancelled_long_wait_takes_its_edge_down(url: &str) {
    let (holder, waiter) = (checking(url).await, checking(url).await);
    let name = common::unique("deadlock");
    let held = holder.lock(&name).await.unwrap();
    let key = format!("holdlock:waits:{}", waiter.owner_id());
    let redis = waiter.redis().clone();
    // The edge of a wait that lasts past the check, read while it waits.
    let edge_while_waiting = async || {
        tokio::select! {
            granted = waiter.lock(&name) => panic!("granted a held lock: {granted:?}"),
            edge = async {
                tokio::time::sleep(CHECK * 3 / 2).await;
                redis.get::<Option<String>, _>(&key).await.unwrap()
            } => edge.expect("no edge after the check"),
        }
    };
    let first = edge_while_waiting().await;
    // Dropped: the edge is taken down soon after.
    gone(&redis, &key).await;
    let second = edge_while_waiting().await;
    assert_ne!(first, second, "the second wait's edge is its own");
    held.unlock().await.unwrap();
}

/// A wait shorter than the check, and a lock taken at once, send nothing for the
/// check; a wait longer than it writes its edge once per check.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_waits_single_tries_and_free_locks_send_nothing_for_the_check() {
    let server = common::RedisServer::start();
    let url = server.url();
    let (holder, waiter) = (checking(&url).await, checking(&url).await);
    let name = common::unique("deadlock");
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    for _ in 0..20 {
        waiter.lock(&name).await.unwrap().unlock().await.unwrap();
    }
    let held = holder.lock(&name).await.unwrap();
    // Single tries of the busy lock, past the check's delay: no wait, nothing sent.
    for _ in 0..3 {
        assert!(waiter.lock(&name).try_now().await.unwrap().is_none());
        tokio::time::sleep(CHECK / 2).await;
    }
    let short = tokio::spawn({
        let (waiter, name) = (waiter.clone(), name.clone());
        async move { waiter.lock(&name).await.unwrap().unlock().await.unwrap() }
    });
    tokio::time::sleep(CHECK / 2).await;
    held.unlock().await.unwrap();
    short.await.unwrap();
    tokio::time::sleep(CHECK * 2).await;
    let stats = server.command_stats();
    for command in ["set", "get"] {
        assert_eq!(stats.get(command), None, "{command}: {stats:?}");
    }
    // (Without the check in the first place, a long wait would not write either.)
    let held = holder.lock(&name).await.unwrap();
    let long = tokio::spawn({
        let (waiter, name) = (waiter.clone(), name.clone());
        async move { waiter.lock(&name).await.unwrap().unlock().await.unwrap() }
    });
    tokio::time::sleep(CHECK * 3).await;
    held.unlock().await.unwrap();
    long.await.unwrap();
    assert!(
        server.command_calls("set") >= 1,
        "a long wait wrote no edge"
    );
}

/// Detection is on unless turned off: two clients built with the defaults, crossing
/// two mutexes, are told within [`DEFAULT_DEADLOCK_CHECK`] and a second.
#[tokio::test(flavor = "multi_thread")]
async fn detection_is_on_by_default_after_a_second() {
    let url = common::url();
    let default = || async { LockClient::builder(&url).build().await.unwrap() };
    let clients = [default().await, default().await];
    let locks = names(2).into_iter().map(Lock::Mutex).collect();
    cycle_checked_after(&clients, &ring(locks), DEFAULT_DEADLOCK_CHECK).await;
}

/// With the check off, a cycle is not broken (the waits last until their timeout), and
/// no edge is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_check_off_nothing_is_sent_and_nothing_is_broken() {
    let url = common::url();
    let client = LockClient::builder(&url)
        .deadlock_check(None)
        .build()
        .await
        .unwrap();
    let [x, y] = <[String; 2]>::try_from(names(2)).unwrap();
    let all_hold = Arc::new(Barrier::new(2));
    let wait = |first: &String, then: &String| {
        let (client, all_hold) = (client.clone(), Arc::clone(&all_hold));
        let (first, then) = (first.clone(), then.clone());
        tokio::spawn(async move {
            let held = client.lock(&first).await.unwrap();
            all_hold.wait().await;
            let second = client.lock(&then).timeout(CHECK * 4).await;
            held.unlock().await.unwrap();
            second.map(|granted| granted.is_some())
        })
    };
    let (a, b) = (wait(&x, &y), wait(&y, &x));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert!(
        matches!(a, Ok(false)) || matches!(b, Ok(false)),
        "{a:?} {b:?}"
    );
    assert!(!matches!(a, Err(LockError::Deadlock { .. })), "{a:?}");
    assert!(!matches!(b, Err(LockError::Deadlock { .. })), "{b:?}");
}

/// A check shorter than a millisecond is refused at build.
#[tokio::test]
async fn a_zero_check_is_refused() {
    let built = LockClient::builder(common::url())
        .deadlock_check(Duration::ZERO)
        .build()
        .await;
    assert!(
        matches!(
            built,
            Err(LockError::InvalidOption {
                option: "deadlock_check",
                ..
            })
        ),
        "{built:?}"
    );
}

/// `waits()` lists each wait past its check, and a cycle whose victim has not acted
/// yet (its process stalled: here, its wait's record is written as its client would
/// and nothing else happens on its side). The other waiter of that cycle goes on
/// waiting, and is granted once the victim lets go.
async fn operators_see_long_waits_and_a_deadlock_whose_victim_is_stalled(url: &str) {
    let (a, b) = (checking(url).await, checking(url).await);
    let [x, y] = <[String; 2]>::try_from(names(2)).unwrap();
    // A holds x and waits for y; B holds y.
    let b_holds = b.lock(&y).await.unwrap();
    let b_owner = b.owner_id();
    let a_waits = tokio::spawn({
        let (a, x, y) = (a.clone(), x.clone(), y.clone());
        async move {
            let held = a.lock(&x).await.unwrap();
            let owner = a.owner_id();
            let second = a.lock(&y).await.map(drop);
            held.unlock().await.unwrap();
            (owner, second)
        }
    });
    tokio::time::sleep(CHECK * 2).await;
    let graph = a.waits().await.unwrap();
    let wait = graph
        .waits
        .iter()
        .find(|wait| wait.wait.name == y)
        .unwrap_or_else(|| panic!("A's wait is not listed: {graph:?}"));
    assert_eq!(wait.wait.kind, LockKind::Mutex);
    assert!(wait.waited >= CHECK, "{wait:?}");
    assert!(graph.deadlocks.is_empty(), "{graph:?}");
    // B "waits" for x, since after A began: B is the victim, stalled.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let key = format!("holdlock:waits:{b_owner}");
    let write_record = |record: String| {
        let (b, key) = (b.clone(), key.clone());
        async move {
            let expiry = Some(fred::types::Expiration::PX(20_000));
            let _: () = b
                .redis()
                .set(&key, record, expiry, None, false)
                .await
                .unwrap();
        }
    };
    // Its record says that it holds nothing, as when its client has let go of y while
    // Redis still lists it (its release held up by a failover, say): no deadlock.
    let waits_for_x = format!("{since} 1 mutex {}:{x}", x.len());
    write_record(waits_for_x.clone()).await;
    let graph = b.waits().await.unwrap();
    assert!(graph.deadlocks.is_empty(), "{graph:?}");
    // It lists y as held: a deadlock.
    write_record(format!("{waits_for_x} mutex {}:{y}", y.len())).await;
    let graph = b.waits().await.unwrap();
    assert_eq!(graph.deadlocks.len(), 1, "{graph:?}");
    let cycle: Vec<_> = graph.deadlocks[0]
        .iter()
        .map(|wait| (wait.owner.as_str(), wait.name.as_str()))
        .collect();
    assert_eq!(cycle[0], (b_owner.as_str(), x.as_str()), "{cycle:?}");
    assert_eq!(cycle[1].1, y.as_str(), "{cycle:?}");
    // A is not the victim: it goes on waiting through several checks.
    tokio::time::sleep(CHECK * 4).await;
    assert!(!a_waits.is_finished(), "the older wait gave up");
    let _: i64 = b.redis().del(&key).await.unwrap();
    b_holds.unlock().await.unwrap();
    let (a_owner, second) = tokio::time::timeout(Duration::from_secs(10), a_waits)
        .await
        .unwrap()
        .unwrap();
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(cycle[1].0, a_owner.as_str());
}

/// A cycle between two tasks of one client is found from what the client knows: no
/// edge is written, no holder read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cycle_of_one_clients_tasks_is_found_without_asking_redis() {
    let server = common::RedisServer::start();
    let client = checking(&server.url()).await;
    let locks: Vec<Lock> = names(2).into_iter().map(Lock::Mutex).collect();
    let pairs = ring(locks);
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let all_hold = Arc::new(Barrier::new(2));
    let first = owner(
        client.clone(),
        pairs[0].0.clone(),
        pairs[0].1.clone(),
        Arc::clone(&all_hold),
        Duration::ZERO,
    );
    let second = owner(
        client,
        pairs[1].0.clone(),
        pairs[1].1.clone(),
        all_hold,
        STAGGER,
    );
    let (first, second) = (finished(first).await, finished(second).await);
    assert!(first.second.is_ok(), "{first:?}");
    assert!(
        matches!(second.second, Err(LockError::Deadlock { .. })),
        "{second:?}"
    );
    let stats = server.command_stats();
    for command in ["set", "get"] {
        assert_eq!(stats.get(command), None, "{command}: {stats:?}");
    }
}
