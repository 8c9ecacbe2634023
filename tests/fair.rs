//! Fair locks: first come, first served across clients, hand-off by grant, dead and
//! cancelled waiters leave the queue, re-entry, and a key space of their own.

mod common;

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{ClientLike, HashesInterface, KeysInterface, LuaInterface, PubsubInterface};
use holdlock::{LockClient, LockError, LockOptions, fence};
use parking_lot::Mutex;
use tokio::time::Instant;

common::on_every_topology!(
    waiters_of_three_clients_are_served_in_the_order_they_queued,
    // One thread: a wait's start is stamped on the thread that sends its attempt, so a
    // busy machine that stalls the thread between the two stalls every wait alike;
    // with several threads, one stalled after stamping is overtaken by waits that
    // began later, and the test would judge the machine's scheduler, not the queue.
    #[tokio::test(flavor = "current_thread")]
    under_steady_contention_nobody_is_passed_over_more_than_once,
    a_waiter_that_dies_in_the_queue_is_dropped_within_a_place_window,
    a_waiter_that_dies_when_handed_the_lock_holds_it_up_for_a_claim_window,
    a_cancelled_waiter_leaves_the_queue_at_once,
    a_fair_lock_is_reentrant_and_apart_from_the_mutex,
    a_try_neither_waits_nor_queues,
    fenced_fair_locks_draw_rising_tokens_and_hand_offs_carry_their_own,
    a_hand_off_is_taken_on_its_message_and_renewed_to_the_lease,
    a_hand_off_message_for_another_wait_is_not_trusted,
    a_wait_right_after_an_abandoned_wait_keeps_its_turn,
    an_abandoned_wait_never_shares_the_lock_with_the_next_waiter,
    a_fenced_fair_lock_after_a_dropped_guard_is_a_new_hold,
    a_client_whose_places_were_dropped_queues_all_its_waits_again,
    waits_passed_over_queue_again_at_their_clients_next_refresh,
    holders_whose_fixed_leases_run_out_pass_the_lock_on_in_turn,
    holders_of_two_clients_whose_fixed_leases_run_out_pass_the_lock_on_in_turn,
    a_lost_queue_is_rebuilt_within_a_refresh_and_every_waiter_served,
);

/// A holder holds; waiters of three clients queue one after another; each release
/// serves the next in that order, whether the waiters take each hand-off on its
/// message or (fenced) claim it with an attempt that names their place.
async fn waiters_of_three_clients_are_served_in_the_order_they_queued(url: &str) {
    for options in [LockOptions::new(), LockOptions::fenced()] {
        let name = common::unique("fair-order");
        let holder = common::connect(url).await;
        let held = holder.fair_lock(&name).await.unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for waiter in 0..3 {
            let (client, name, served, options) = (
                common::connect(url).await,
                name.clone(),
                Arc::clone(&served),
                options.clone(),
            );
            waiters.push(tokio::spawn(async move {
                let guard = client.fair_lock(&name).options(options).await.unwrap();
                let guard = guard.expect("no wait limit");
                served.lock().push(waiter);
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.unlock().await.unwrap();
            }));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        held.unlock().await.unwrap();
        for waiter in waiters {
            tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("served")
                .unwrap();
        }
        assert_eq!(*served.lock(), [0, 1, 2], "{options:?}");
    }
}

/// Workers take one fair lock over and over for 2 s: 12 in one client and one in each
/// of 4 others (a lock that took turns between clients, as the mutex's hand-off does,
/// would pass the crowded client's waits over again and again). Ordering the
/// acquisitions by when they were granted, no wait that began more than the tie window
/// after another's is served before it more than once.
async fn under_steady_contention_nobody_is_passed_over_more_than_once(url: &str) {
    const TIE: Duration = Duration::from_millis(15);
    let name = common::unique("fair-hammer");
    let mut clients = Vec::new();
    for _ in 0..5 {
        let client = common::connect(url).await;
        // Warm up (scripts loaded, hand-off channel subscribed, lingering a while
        // after): a client's first wait does that before its first attempt, which
        // the start of every wait here would otherwise have to allow for.
        client
            .fair_lock(&name)
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        clients.push(client);
    }
    let grants = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut workers = Vec::new();
    for worker in 0..16_usize {
        let (client, name, grants) = (
            clients[worker.saturating_sub(11)].clone(),
            name.clone(),
            Arc::clone(&grants),
        );
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let began = Instant::now();
                let guard = client.fair_lock(&name).await.unwrap();
                grants.lock().push(began);
                tokio::time::sleep(Duration::from_millis(1)).await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(60), worker)
            .await
            .expect("stuck")
            .unwrap();
    }
    let grants = grants.lock();
    assert!(
        grants.len() > 64,
        "too little work to judge: {}",
        grants.len()
    );
    let mut worst = 0;
    for (i, &began) in grants.iter().enumerate() {
        let overtaken = grants[..i]
            .iter()
            .filter(|&&earlier| earlier > began + TIE)
            .count();
        worst = worst.max(overtaken);
    }
    assert!(worst <= 1, "a waiter was passed over {worst} times");
}

/// A waiter queues in a client that then dies (its runtime and connections vanish);
/// a live waiter queues after it. The holder (20 s lease) releases once the dead
/// client's places have expired (6 s without an attempt): the live waiter is served
/// at once.
async fn a_waiter_that_dies_in_the_queue_is_dropped_within_a_place_window(url: &str) {
    let name = common::unique("fair-dead-waiter");
    let holder = common::client_with_lease(url, Duration::from_secs(20)).await;
    let held = holder.fair_lock(&name).await.unwrap();
    queue_and_die(url, &name);
    let waiter = queue_in_a_client_of_its_own(url, &name).await;
    tokio::time::sleep(Duration::from_millis(6_500)).await; // past the place window
    let (guard, after) = release_and_time_the_hand_off(held, waiter).await;
    assert!(after < Duration::from_millis(500), "served {after:?} after");
    guard.unlock().await.unwrap();
}

/// The holder releases while the dead waiter is still first in line: the lock is
/// handed to it, it never claims it, and the live waiter behind it is served within
/// about a claim window (2 s), not the holder's 20 s lease.
async fn a_waiter_that_dies_when_handed_the_lock_holds_it_up_for_a_claim_window(url: &str) {
    let name = common::unique("fair-dead-grant");
    let holder = common::client_with_lease(url, Duration::from_secs(20)).await;
    let held = holder.fair_lock(&name).await.unwrap();
    queue_and_die(url, &name);
    let waiter = queue_in_a_client_of_its_own(url, &name).await;
    let (guard, after) = release_and_time_the_hand_off(held, waiter).await;
    assert!(
        after < Duration::from_secs(4),
        "served {after:?} after the release"
    );
    guard.unlock().await.unwrap();
}

/// A waiter for `name` in a client of its own, queued by the time this returns.
async fn queue_in_a_client_of_its_own(
    url: &str,
    name: &str,
) -> tokio::task::JoinHandle<holdlock::LockGuard> {
    let (client, name) = (common::connect(url).await, name.to_owned());
    let waiter = tokio::spawn(async move { client.fair_lock(&name).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(100)).await;
    waiter
}

/// Releases `held` and returns the guard `waiter` was served, and how long after the
/// release that was.
async fn release_and_time_the_hand_off(
    held: holdlock::LockGuard,
    waiter: tokio::task::JoinHandle<holdlock::LockGuard>,
) -> (holdlock::LockGuard, Duration) {
    let released = Instant::now();
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("served")
        .unwrap();
    (guard, released.elapsed())
}

/// Queues for `name` in a client of its own runtime, then drops the runtime: a waiter
/// that died, as far as Redis can tell.
fn queue_and_die(url: &str, name: &str) {
    let (url, name) = (url.to_owned(), name.to_owned());
    std::thread::spawn(move || {
        let doomed = tokio::runtime::Runtime::new().unwrap();
        doomed.block_on(async {
            let client = LockClient::connect(&url).await.unwrap();
            let waiting = client.fair_lock(&name);
            assert!(
                tokio::time::timeout(Duration::from_millis(200), waiting)
                    .await
                    .is_err()
            );
            // Queued. Stay queued when dropped: no goodbye from a dead process.
            std::mem::forget(client);
        });
        drop(doomed);
    })
    .join()
    .unwrap();
}

/// A waiter whose wait is cancelled leaves the queue: the waiter after it is served
/// the moment the holder releases.
async fn a_cancelled_waiter_leaves_the_queue_at_once(url: &str) {
    let name = common::unique("fair-cancel");
    let holder = common::connect(url).await;
    let held = holder.fair_lock(&name).await.unwrap();
    let quitter = common::connect(url).await;
    let cut = tokio::time::timeout(Duration::from_millis(200), quitter.fair_lock(&name)).await;
    assert!(cut.is_err(), "the lock is held");
    let waiter = queue_in_a_client_of_its_own(url, &name).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (guard, after) = release_and_time_the_hand_off(held, waiter).await;
    assert!(after < Duration::from_millis(500), "served {after:?} after");
    guard.unlock().await.unwrap();
}

/// The same owner re-enters; the fair lock `x` and the mutex `x` are different locks.
async fn a_fair_lock_is_reentrant_and_apart_from_the_mutex(url: &str) {
    let name = common::unique("fair-reenter");
    let client = common::connect(url).await;
    holdlock::owner_scope(async {
        let outer = client.fair_lock(&name).await.unwrap();
        let inner = client.fair_lock(&name).await.unwrap();
        assert_eq!(inner.hold_count(), 2);
        let mutex = client
            .lock(&name)
            .try_now()
            .await
            .unwrap()
            .expect("a different lock");
        mutex.unlock().await.unwrap();
        inner.unlock().await.unwrap();
        outer.unlock().await.unwrap();
    })
    .await;
    let other = common::connect(url).await;
    other
        .fair_lock(&name)
        .try_now()
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();
}

/// `fair_lock(..).try_now()` on a held lock returns `None` at once and leaves no place in the
/// queue behind.
async fn a_try_neither_waits_nor_queues(url: &str) {
    let name = common::unique("fair-try");
    let client = common::connect(url).await;
    let held = common::lock_as_another_owner(&client, &name).await;
    drop(held);
    let holder = common::connect(url).await;
    let held = holder.fair_lock(&name).await.unwrap();
    let asked = Instant::now();
    assert!(client.fair_lock(&name).try_now().await.unwrap().is_none());
    assert!(asked.elapsed() < Duration::from_secs(1));
    let queue = format!("{}:fair:queue", common::key(&name));
    let queued: i64 = client.redis().exists(queue.as_str()).await.unwrap();
    assert_eq!(queued, 0, "a try queued");
    held.unlock().await.unwrap();
}

/// Asked for fencing, a fair lock draws a token with every fresh hold, a hand-off by
/// grant included: the waiter's token is newer, and the resource refuses the old one.
/// The fair lock's tokens have a floor key of their
/// own, apart from the mutex of the same name.
async fn fenced_fair_locks_draw_rising_tokens_and_hand_offs_carry_their_own(url: &str) {
    let name = common::unique("fair-fenced");
    let resource = common::unique("fair-fenced-resource");
    let fenced = LockOptions::fenced();
    let holder = common::connect(url).await;
    let first = holder
        .fair_lock(&name)
        .options(fenced.clone())
        .await
        .unwrap()
        .expect("free");
    let first_token = first.fencing_token().expect("a token");
    let floor = format!("{}:fair:token", common::key(&name));
    // The floor expires once the server's clock passes it (about 1 ms after the draw),
    // so it may be gone already; the token is also kept in the fair lock's hash.
    let floor_value: Option<u64> = holder.redis().get(floor.as_str()).await.unwrap();
    assert!(
        floor_value.is_none_or(|floor| floor == first_token),
        "{floor_value:?}"
    );
    let fair_key = format!("{}:fair", common::key(&name));
    let kept: Option<u64> = holder
        .redis()
        .hget(fair_key.as_str(), "token")
        .await
        .unwrap();
    assert_eq!(kept, Some(first_token));
    let mutex_floor: i64 = holder
        .redis()
        .exists(common::token_key(&name))
        .await
        .unwrap();
    assert_eq!(mutex_floor, 0, "the mutex's floor was touched");
    fence::set_with(&first, &resource, "first").await.unwrap();

    let waiter = common::connect(url).await;
    let waiting = tokio::spawn({
        let (name, fenced) = (name.clone(), fenced.clone());
        async move {
            waiter
                .fair_lock(&name)
                .options(fenced)
                .await
                .unwrap()
                .unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("handed on")
        .unwrap();
    let second_token = second.fencing_token().expect("a token for the hand-off");
    assert!(
        second_token > first_token,
        "{second_token} after {first_token}"
    );
    // A fenced waiter claims the hand-off with an attempt (which draws the token and
    // clears the grant's mark).
    let lock_key = format!("{}:fair", common::key(&name));
    let marked: i64 = holder
        .redis()
        .hexists(lock_key.as_str(), "claim")
        .await
        .unwrap();
    assert_eq!(marked, 0, "the hand-off was not claimed with an attempt");
    fence::set_with(&second, &resource, "second").await.unwrap();
    let late = fence::set(&holder, &resource, "late", first_token).await;
    assert!(
        matches!(late, Err(LockError::StaleToken { .. })),
        "{late:?}"
    );
    second.unlock().await.unwrap();
}

/// An unfenced waiter whose lease the watchdog keeps takes a hand-off on the message
/// alone: the grant's `claim` mark, which a claim attempt would clear, is still there
/// when the guard is handed out. The hold then outlives the claim window: its
/// watchdog renewed it to the owner's lease at once.
async fn a_hand_off_is_taken_on_its_message_and_renewed_to_the_lease(url: &str) {
    let name = common::unique("fair-on-message");
    let lock_key = format!("{}:fair", common::key(&name));
    let holder = common::connect(url).await;
    let held = holder.fair_lock(&name).await.unwrap();
    let waiter = queue_in_a_client_of_its_own(url, &name).await;
    let (guard, _) = release_and_time_the_hand_off(held, waiter).await;
    let mark: Option<String> = holder
        .redis()
        .hget(lock_key.as_str(), "claim")
        .await
        .unwrap();
    let mark = mark.expect("the grant's mark was cleared: the waiter made a claim attempt");
    assert!(
        mark.starts_with(&format!("{} ", guard.owner())),
        "{mark} names {}",
        guard.owner()
    );

    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!guard.is_lost(), "lost after the claim window");
    let pttl: i64 = holder.redis().pttl(lock_key.as_str()).await.unwrap();
    assert!(
        pttl > 10_000,
        "not renewed to the 30 s lease: {pttl} ms left"
    );
    guard.unlock().await.unwrap();
    let left: i64 = holder.redis().exists(lock_key.as_str()).await.unwrap();
    assert_eq!(left, 0, "the release deleted the lock, mark and all");
}

/// How many subscribers the plain `channel` has on the server, or on every primary of
/// a cluster together.
async fn plain_subscribers(client: &fred::clients::Client, channel: &str) -> i64 {
    use fred::interfaces::{ClusterInterface, PubsubInterface};
    use fred::types::Value;
    let count = |reply: Vec<Value>| reply.get(1).and_then(Value::as_i64).unwrap_or(0);
    let Some(state) = client.cached_cluster_state() else {
        return count(client.pubsub_numsub(channel).await.unwrap());
    };
    let mut total = 0;
    for node in state.unique_primary_nodes() {
        let reply: Vec<Value> = client
            .with_cluster_node(node)
            .pubsub_numsub(channel)
            .await
            .unwrap();
        total += count(reply);
    }
    total
}

/// A message naming a waiter's owner with another wait than its own (a stale grant's,
/// or a forged one), or with no wait, or naming its wait but with a hand-off time
/// more than half a claim window old, or with none, does not make it take the lock:
/// it keeps waiting, and is served by the real release.
async fn a_hand_off_message_for_another_wait_is_not_trusted(url: &str) {
    let name = common::unique("fair-stale");
    let lock_key = format!("{}:fair", common::key(&name));
    let holder = common::connect(url).await;
    let held = holder.fair_lock(&name).await.unwrap();
    let waiter = queue_in_a_client_of_its_own(url, &name).await;
    let queue = format!("{lock_key}:queue");
    let zrange =
        fred::types::CustomCommand::new_static("ZRANGE", fred::types::ClusterHash::FirstKey, false);
    let queued: Vec<String> = holder
        .redis()
        .custom(zrange, vec![queue.as_str(), "0", "-1"])
        .await
        .unwrap();
    let [entry] = queued.as_slice() else {
        panic!("one waiter queued: {queued:?}");
    };
    let (owner, wait) = entry.split_once(' ').expect("\"<owner> <wait>\"");
    let wait: u64 = wait.parse().unwrap();
    let owner = owner.to_owned();
    // Hand-offs to a client come on its own channel.
    let client = owner.split(':').next().unwrap();
    let channel = format!("{lock_key}:released:{client}");
    let server_ms: i64 = holder
        .redis()
        .eval(
            "local t = redis.call('time') return t[1] * 1000 + math.floor(t[2] / 1000)",
            lock_key.as_str(),
            (),
        )
        .await
        .unwrap();
    let messages = [
        format!("{owner} {} {server_ms}", wait + 1),
        owner.clone(),
        format!("{owner} {wait} {}", server_ms - 5_000),
        format!("{owner} {wait}"),
    ];
    for message in messages {
        // A shard channel on a cluster, a plain one on a single server: send both.
        let heard: i64 = holder
            .redis()
            .publish(channel.as_str(), message.as_str())
            .await
            .unwrap();
        let heard = match common::server::server_version().before_redis_7() {
            // Redis 6.2 has no shard channels (nor SPUBLISH), and a cluster's plain
            // PUBLISH reaches every node but counts the subscribers of the one it was
            // sent to: count them on every node.
            true => plain_subscribers(holder.redis(), &channel).await,
            false => {
                let on_shard: i64 = holder
                    .redis()
                    .spublish(channel.as_str(), message.as_str())
                    .await
                    .unwrap();
                heard + on_shard
            }
        };
        assert_eq!(heard, 1, "{message:?} was not heard");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the waiter took a lock still held");
    assert!(!held.is_lost());
    let (guard, _) = release_and_time_the_hand_off(held, waiter).await;
    assert_eq!(guard.owner(), owner.as_str());
    guard.unlock().await.unwrap();
}

/// A task whose wait gave up and that waits again at once queues its new wait at once,
/// as an entry of its own: a waiter that came later is served after it. (The late leave
/// of the first wait used to take the owner's entry out of the queue, so the new wait
/// lost its place until its next refresh, 667 ms later.)
async fn a_wait_right_after_an_abandoned_wait_keeps_its_turn(url: &str) {
    let (holder, b, c) = (
        common::connect(url).await,
        common::connect(url).await,
        common::connect(url).await,
    );
    for round in 0..2 {
        let name = common::unique("fair-rewait");
        let held = holder.fair_lock(&name).await.unwrap();
        let start = Instant::now();
        let served = Arc::new(Mutex::new(Vec::new()));
        let second_wait = tokio::spawn({
            let (b, name, served) = (b.clone(), name.clone(), Arc::clone(&served));
            async move {
                let wait = LockOptions::new().wait(Duration::from_millis(200));
                let first = b.fair_lock(&name).options(wait).await.unwrap();
                assert!(first.is_none(), "served while the lock was held");
                // The same task (owner) waits again at once.
                let guard = b.fair_lock(&name).await.unwrap();
                served.lock().push("b");
                guard.unlock().await.unwrap();
            }
        });
        tokio::time::sleep_until(start + Duration::from_millis(350)).await;
        let later = tokio::spawn({
            let (c, name, served) = (c.clone(), name.clone(), Arc::clone(&served));
            async move {
                let guard = c.fair_lock(&name).await.unwrap();
                served.lock().push("c");
                guard.unlock().await.unwrap();
            }
        });
        tokio::time::sleep_until(start + Duration::from_millis(600)).await;
        held.unlock().await.unwrap();
        second_wait.await.unwrap();
        later.await.unwrap();
        assert_eq!(*served.lock(), ["b", "c"], "round {round}");
    }
}

/// H holds; B waits 100 ms and gives up, then waits again at once in the same task; C
/// waits from 20 ms. H releases around the moment B's first wait gives up, swept in
/// 40 µs steps over 99-101 ms. B and C never hold the lock together. (The late leave
/// of B's first wait used to find the grant to B's second wait, which had inherited
/// its place, and hand the lock on to C while B held it.) `HOLDLOCK_SWEEP_ROUNDS`
/// sets the number of rounds (default 40).
async fn an_abandoned_wait_never_shares_the_lock_with_the_next_waiter(url: &str) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let rounds: u64 = std::env::var("HOLDLOCK_SWEEP_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(40);
    let (holder, b, c) = (
        common::connect(url).await,
        common::connect(url).await,
        common::connect(url).await,
    );
    let inside = Arc::new(AtomicU32::new(0));
    let overlaps = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&overlaps);
    let section = move |guard: holdlock::LockGuard| {
        let (inside, overlaps) = (Arc::clone(&inside), Arc::clone(&overlaps));
        async move {
            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            // NotHeld if the hold was taken away meanwhile: the overlap says so.
            let _ = guard.unlock().await;
        }
    };
    for round in 0..rounds {
        let name = common::unique("fair-sweep");
        let held = holder.fair_lock(&name).await.unwrap();
        let start = Instant::now();
        let b_task = tokio::spawn({
            let (b, name, section) = (b.clone(), name.clone(), section.clone());
            async move {
                let wait = LockOptions::new().wait(Duration::from_millis(100));
                let guard = match b.fair_lock(&name).options(wait).await.unwrap() {
                    Some(guard) => guard,
                    None => b.fair_lock(&name).await.unwrap(),
                };
                section(guard).await;
            }
        });
        let c_task = tokio::spawn({
            let (c, name, section) = (c.clone(), name.clone(), section.clone());
            async move {
                tokio::time::sleep_until(start + Duration::from_millis(20)).await;
                section(c.fair_lock(&name).await.unwrap()).await;
            }
        });
        let release_at = start + Duration::from_micros(99_000 + (round % 50) * 40);
        tokio::time::sleep_until(release_at).await;
        held.unlock().await.unwrap();
        b_task.await.unwrap();
        c_task.await.unwrap();
        assert_eq!(
            counted.load(Ordering::SeqCst),
            0,
            "two holders in round {round}"
        );
    }
}

/// A fair guard dropped and the same task's fenced fair lock at once: the new call
/// waits for the release and takes a new hold (count 1, a new and greater token), not
/// the hold being released.
async fn a_fenced_fair_lock_after_a_dropped_guard_is_a_new_hold(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("fair-drop-fenced");
    let mut last = 0;
    for round in 0..20 {
        let first = client
            .fair_lock(&name)
            .options(LockOptions::fenced())
            .await
            .unwrap()
            .unwrap();
        last = last.max(first.fencing_token().unwrap());
        drop(first);
        let again = client
            .fair_lock(&name)
            .options(LockOptions::fenced())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again.hold_count(), 1, "round {round}: joined the old hold");
        let token = again.fencing_token().expect("a fenced hold has a token");
        assert!(token > last, "round {round}: token {token} after {last}");
        last = token;
        again.unlock().await.unwrap();
    }
}

/// The waits of one client on a fair lock's queue, in their order there.
async fn queued_waits(redis: &fred::clients::Client, queue: &str) -> Vec<String> {
    let zrange = "return redis.call('zrange', KEYS[1], 0, -1)";
    redis.eval(zrange, queue, ()).await.unwrap()
}

/// Polls the queue `queue` until `done` says so, or `limit` passes.
async fn poll_queue(
    redis: &fred::clients::Client,
    queue: &str,
    limit: Duration,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let give_up = Instant::now() + limit;
    loop {
        let queued = queued_waits(redis, queue).await;
        if done(&queued) || Instant::now() > give_up {
            return queued;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Spawns `count` tasks that take the fair lock `name` in `client` and release it.
fn spawn_waits(client: &LockClient, name: &str, count: usize) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let (client, name) = (client.clone(), name.to_owned());
            tokio::spawn(async move {
                let guard = client.fair_lock(&name).await.unwrap();
                guard.unlock().await.unwrap();
            })
        })
        .collect()
}

/// A fair lock held by a client of its own, and `count` waits of another client
/// queued behind it.
struct Queued {
    queue: String,
    redis: fred::clients::Client,
    held: holdlock::LockGuard,
    waits: Vec<tokio::task::JoinHandle<()>>,
    /// The waits' entries, in queue order.
    queued: Vec<String>,
}

/// Holds a fair lock named after `tag` and queues `count` waits of another client
/// behind it (all in the queue within 5 s).
async fn held_with_waits(url: &str, tag: &str, count: usize) -> Queued {
    let name = common::unique(tag);
    let queue = format!("{}:fair:queue", common::key(&name));
    let holder = common::connect(url).await;
    let redis = holder.redis().clone();
    let held = holder.fair_lock(&name).await.unwrap();
    let waiter = common::connect(url).await;
    let waits = spawn_waits(&waiter, &name, count);
    let queued = poll_queue(&redis, &queue, Duration::from_secs(5), |q| q.len() == count).await;
    assert_eq!(queued.len(), count, "{queued:?}");
    Queued {
        queue,
        redis,
        held,
        waits,
        queued,
    }
}

/// Waits for each of `waits` to be served and done, within 10 s.
async fn all_served(waits: Vec<tokio::task::JoinHandle<()>>) {
    for wait in waits {
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("served")
            .unwrap();
    }
}

/// A client whose places were dropped (its liveness ran out, as in a long pause)
/// queues all its waits again with its next attempt, not only the wait that makes
/// it: the others are told at once, rather than at their own next attempt (a refresh
/// period later, or never if another wait always makes it).
async fn a_client_whose_places_were_dropped_queues_all_its_waits_again(url: &str) {
    let name = common::unique("fair-lapse");
    let queue = format!("{}:fair:queue", common::key(&name));
    let alive = format!("{}:fair:alive", common::key(&name));
    let holder = common::connect(url).await;
    let redis = holder.redis().clone();
    let held = holder.fair_lock(&name).await.unwrap();
    let paused = common::connect(url).await;
    let paused_id = paused.owner_id();
    let paused_client = paused_id.split(':').next().unwrap().to_owned();
    let mut waits = spawn_waits(&paused, &name, 2);
    let queued = poll_queue(&redis, &queue, Duration::from_secs(5), |q| q.len() == 2).await;
    assert_eq!(queued.len(), 2, "{queued:?}");
    let other = common::connect(url).await;
    waits.extend(spawn_waits(&other, &name, 1));
    let queued = poll_queue(&redis, &queue, Duration::from_secs(5), |q| q.len() == 3).await;
    assert_eq!(queued.len(), 3, "{queued:?}");
    // The paused client's liveness ran out: the next script drops both its places.
    let zadd = "return redis.call('zadd', KEYS[1], 'XX', 1, ARGV[1])";
    let _: i64 = redis
        .eval(zadd, alive.as_str(), paused_client.as_str())
        .await
        .unwrap();
    let of_paused = |queued: &[String]| {
        queued
            .iter()
            .filter(|wait| wait.starts_with(&paused_client))
            .count()
    };
    // Its next attempt (within a refresh period) queues one wait behind the other
    // client's...
    let requeued = poll_queue(&redis, &queue, Duration::from_secs(5), |q| {
        q.first()
            .is_some_and(|first| !first.starts_with(&paused_client))
            && of_paused(q) > 0
    })
    .await;
    assert!(of_paused(&requeued) > 0, "never queued again: {requeued:?}");
    // ... and the other wait at once.
    let both = poll_queue(&redis, &queue, Duration::from_millis(300), |q| {
        of_paused(q) == 2
    })
    .await;
    assert_eq!(of_paused(&both), 2, "one wait was left out: {both:?}");
    held.unlock().await.unwrap();
    all_served(waits).await;
}

/// One client with 20 waits on a held fair lock keeps all their places with one
/// attempt per refresh period (2 s), not an attempt per wait: over 7 s, longer than
/// the place window (6 s), Redis runs a handful of scripts, and all 20 are still
/// queued. (Before, each wait made an attempt every 667 ms: 210 scripts.)
#[tokio::test]
async fn a_clients_waits_keep_their_places_with_one_attempt_between_them() {
    let server = common::RedisServer::start();
    let Queued {
        queue,
        redis,
        held,
        waits,
        queued: _,
    } = held_with_waits(&server.url(), "fair-refresh", 20).await;
    let scripts = || server.command_calls("evalsha") + server.command_calls("eval");
    // Each wait asks once more when it finds the client's subscription made after its
    // first attempt (a hand-off may have gone by unheard); on a busy machine those
    // second attempts come after all 20 are queued. The count starts once they are
    // done: no script for 300 ms (the refresh period is 2 s).
    let mut before = scripts();
    let settling = Instant::now();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(300) {
        assert!(
            settling.elapsed() < Duration::from_secs(10),
            "never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = scripts();
        if now != before {
            (before, quiet_since) = (now, Instant::now());
        }
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    let ran = scripts() - before;
    let queued = queued_waits(&redis, &queue).await;
    assert_eq!(queued.len(), 20, "places were lost");
    assert!(ran <= 8, "{ran} scripts in 7 s");
    held.unlock().await.unwrap();
    all_served(waits).await;
}

/// A burst of 20 waits of one client on a held fair lock queues with at most two
/// attempts each: the first, and one more for a wait whose client subscribed after it
/// was sent (a hand-off may have gone by unheard). The first wait's answer says the
/// client was not alive in the queue before, yet the other waits had no place to lose:
/// their attempts ran after it, and none of them is woken to queue again. (Before,
/// each was: a third attempt per wait, 60 scripts in all.)
#[tokio::test]
async fn a_burst_of_waits_of_one_client_queues_with_two_attempts_each_at_most() {
    let server = common::RedisServer::start();
    let scripts = || server.command_calls("evalsha") + server.command_calls("eval");
    let before = scripts();
    let Queued {
        redis: _,
        queue: _,
        held,
        waits,
        queued: _,
    } = held_with_waits(&server.url(), "fair-burst", 20).await;
    // Settled: no script for 300 ms (the refresh period is 2 s).
    let mut ran = scripts();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(300) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if scripts() != ran {
            (ran, quiet_since) = (scripts(), Instant::now());
        }
    }
    // The holder's take, then the waits' (each client's first script is answered
    // NOSCRIPT and sent again: 2 more; and 2 to spare).
    let waited = ran - before - 1;
    assert!(waited <= 20 * 2 + 2 + 2, "{waited} attempts for 20 waits");
    held.unlock().await.unwrap();
    all_served(waits).await;
}

/// Waits of a client that are no longer queued while their client lives (passed over
/// when a hand-off's message went unheard, say: here their entries are simply
/// removed) queue again at the client's next refresh (within 2 s), whichever of the
/// client's waits makes it: the refresh checks the places of all of them.
async fn waits_passed_over_queue_again_at_their_clients_next_refresh(url: &str) {
    let Queued {
        queue,
        redis,
        held,
        waits,
        queued,
    } = held_with_waits(url, "fair-passed-over", 10).await;
    let zrem = "return redis.call('zrem', KEYS[1], ARGV[1], ARGV[2], ARGV[3])";
    let removed = (queued[2].as_str(), queued[5].as_str(), queued[8].as_str());
    let gone: i64 = redis.eval(zrem, queue.as_str(), removed).await.unwrap();
    assert_eq!(gone, 3);
    let back = poll_queue(&redis, &queue, Duration::from_secs(3), |q| q.len() == 10).await;
    assert_eq!(back.len(), 10, "not queued again: {back:?}");
    held.unlock().await.unwrap();
    all_served(waits).await;
}

/// The whole queue lost, as in a failover to a replica that never had it (both of its
/// keys gone, the holder's hash kept; tests/sentinel.rs fails over for real): no
/// connection drops to wake the waiters, so each client queues all its waits again
/// with its next refresh, within 2 s (3 s here, for a busy machine). The order is
/// forgotten, the waiters are not: every wait is back under its own entry, and all
/// are served.
async fn a_lost_queue_is_rebuilt_within_a_refresh_and_every_waiter_served(url: &str) {
    let name = common::unique("fair-queue-lost");
    let key = format!("{}:fair", common::key(&name));
    let (queue, alive) = (format!("{key}:queue"), format!("{key}:alive"));
    let holder = common::connect(url).await;
    let redis = holder.redis().clone();
    let held = holder.fair_lock(&name).await.unwrap();
    let mut waits = Vec::new();
    for _ in 0..2 {
        waits.extend(spawn_waits(&common::connect(url).await, &name, 2));
    }
    let mut before = poll_queue(&redis, &queue, Duration::from_secs(5), |q| q.len() == 4).await;
    assert_eq!(before.len(), 4, "{before:?}");
    before.sort();

    let del = "return redis.call('del', KEYS[1], KEYS[2])";
    let deleted: i64 = redis
        .eval(del, vec![queue.clone(), alive], ())
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    let lost = Instant::now();
    let mut back = poll_queue(&redis, &queue, Duration::from_secs(3), |q| q.len() == 4).await;
    let took = lost.elapsed();
    back.sort();
    assert_eq!(back, before, "not every wait queued again within {took:?}");
    println!("every wait queued again {took:?} after the queue was lost");
    assert!(!held.is_lost());
    assert!(waits.iter().all(|wait| !wait.is_finished()));
    held.unlock().await.unwrap();
    all_served(waits).await;
}

/// A hand-off told while the waiter's subscriber connection is down goes unheard; the
/// reconnection wakes the waiter, which subscribes again and asks at once, rather
/// than at its client's next refresh (2 s later).
#[tokio::test]
async fn a_waiter_whose_subscriber_reconnects_is_served_at_once() {
    let server = common::RedisServer::start();
    let url = server.url();
    let name = common::unique("fair-reconnect");
    let holder = common::connect(&url).await;
    let held = holder.fair_lock(&name).await.unwrap();
    let waiter = queue_in_a_client_of_its_own(&url, &name).await;
    server
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    let (guard, after) = release_and_time_the_hand_off(held, waiter).await;
    assert!(
        after < Duration::from_secs(1),
        "served {after:?} after the release"
    );
    guard.unlock().await.unwrap();
}

/// Redisson's `RedissonFairLockTest` lease-timeout case: 8 tasks of one client come
/// 100 ms apart, each takes the fair lock with a 1 s fixed lease (10 s wait) and never
/// unlocks. See [`leases_run_out_in_turn`].
async fn holders_whose_fixed_leases_run_out_pass_the_lock_on_in_turn(url: &str) {
    let client = common::connect(url).await;
    leases_run_out_in_turn("fair-lease-out", &[client]).await;
}

/// As [`holders_whose_fixed_leases_run_out_pass_the_lock_on_in_turn`], the tasks taking
/// turns between two clients: the last holder's client has no wait left to hand the
/// lock on when its lease runs out, so the other client must learn when that is.
async fn holders_of_two_clients_whose_fixed_leases_run_out_pass_the_lock_on_in_turn(url: &str) {
    let clients = [common::connect(url).await, common::connect(url).await];
    leases_run_out_in_turn("fair-lease-out-2", &clients).await;
}

/// 8 tasks (taking turns between `clients`) come 100 ms apart, each takes a fair lock
/// with a 1 s fixed lease and a 10 s wait, and keeps its guard without unlocking: each
/// hold simply runs out. All 8 are served, in the order they came, each as its
/// predecessor's lease ends (two grants a lease apart, within 300 ms either way): an
/// expiry publishes nothing, so the waiters must wake when the lease ends, not at
/// their client's next attempt to keep their places (every 2 s).
async fn leases_run_out_in_turn(tag: &str, clients: &[LockClient]) {
    const LEASE: Duration = Duration::from_secs(1);
    const OFF: Duration = Duration::from_millis(300);
    let name = common::unique(tag);
    let options = LockOptions::new()
        .wait(Duration::from_secs(10))
        .lease(LEASE);
    let mut tasks = Vec::new();
    for task in 0..8 {
        let (client, name, options) = (
            clients[task % clients.len()].clone(),
            name.clone(),
            options.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let guard = client.fair_lock(&name).options(options).await.unwrap();
            (Instant::now(), guard)
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut served = Vec::new();
    let mut guards = Vec::new();
    let mut gave_up = Vec::new();
    for (task, handle) in tasks.into_iter().enumerate() {
        let (at, guard) = tokio::time::timeout(Duration::from_secs(15), handle)
            .await
            .expect("the wait returns within its 10 s")
            .unwrap();
        match guard {
            Some(guard) => {
                served.push((at, task));
                guards.push(guard);
            }
            None => gave_up.push(task),
        }
    }
    served.sort();
    let start = served.first().map_or_else(Instant::now, |(at, _)| *at);
    let timeline: Vec<_> = served
        .iter()
        .map(|(at, task)| (*task, *at - start))
        .collect();
    assert!(
        gave_up.is_empty(),
        "{gave_up:?} gave up; served: {timeline:?}"
    );
    let order: Vec<usize> = served.iter().map(|(_, task)| *task).collect();
    assert_eq!(order, (0..8).collect::<Vec<_>>(), "{timeline:?}");
    for pair in served.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap <= LEASE + OFF,
            "task {} took over {gap:?} after task {}'s grant, its lease being {LEASE:?}: \
             {timeline:?}",
            pair[1].1,
            pair[0].1,
        );
        assert!(
            gap >= LEASE - OFF,
            "task {} took over {gap:?} after task {}'s grant, before its lease ended: \
             {timeline:?}",
            pair[1].1,
            pair[0].1,
        );
    }
    drop(guards);
}
