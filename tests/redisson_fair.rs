//! `Compat::Redisson`'s fair lock, kept in the layout of Redisson's `RFairLock`
//! (checked from Redis itself; tests/redisson_java_interop.rs runs Java Redisson
//! against it): the hash, the queue and its deadlines, each waiter's own channel, a
//! waiter that gives up or is dropped leaving the queue, and the operator's view.

mod common;

use std::time::Duration;

use fred::interfaces::{
    ClientLike, EventInterface, HashesInterface, KeysInterface, ListInterface, LuaInterface,
    PubsubInterface,
};
use holdlock::{Compat, LockClient, LockGuard, LockKind};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A client in Redisson's layout with the default lease.
async fn redisson_client(url: &str) -> LockClient {
    common::redisson_client(url, holdlock::DEFAULT_LEASE).await
}

/// `N` clients in Redisson's layout.
async fn clients<const N: usize>(url: &str) -> [LockClient; N] {
    let mut clients = Vec::with_capacity(N);
    for _ in 0..N {
        clients.push(redisson_client(url).await);
    }
    clients.try_into().unwrap_or_else(|_| unreachable!())
}

/// Checks that the lock `name`, its queue and its deadlines are all gone.
async fn nothing_left(redis: &fred::clients::Client, name: &str) {
    for key in [name.to_owned(), queue_key(name), deadlines_key(name)] {
        let left: i64 = redis.exists(key.as_str()).await.unwrap();
        assert_eq!(left, 0, "{key}");
    }
}

/// A client in Redisson's layout with a 1 s lease (its waiters ask again at least
/// every second while the lock is held) and a fair wait of 5 s.
async fn short_lease_client(url: &str) -> LockClient {
    LockClient::builder(url)
        .compat(Compat::Redisson)
        .lease(Duration::from_secs(1))
        .fair_wait_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap()
}

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn deadlines_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

async fn queue(redis: &fred::clients::Client, name: &str) -> Vec<String> {
    redis.lrange(queue_key(name), 0, -1).await.unwrap()
}

/// `owner`'s deadline in `name`'s queue (the test client is built without fred's
/// sorted-set commands).
async fn deadline(redis: &fred::clients::Client, name: &str, owner: &str) -> Option<f64> {
    let script = "return redis.call('zscore', KEYS[1], ARGV[1])";
    let score: Option<String> = redis
        .eval(script, deadlines_key(name), owner)
        .await
        .unwrap();
    score.map(|score| score.parse().unwrap())
}

/// A task of its own waiting for the fair lock `name` on `client`: its owner id (told
/// before it waits), and the task, which gives the guard.
async fn waiter(client: &LockClient, name: &str) -> (String, JoinHandle<LockGuard>) {
    let (tell, told) = oneshot::channel();
    let (client, name) = (client.clone(), name.to_owned());
    let task = tokio::spawn(async move {
        tell.send(client.owner_id()).unwrap();
        client.fair_lock(&name).await.unwrap()
    });
    (told.await.unwrap(), task)
}

/// Waits until `name`'s queue is `expected`, for up to 5 s.
async fn queue_becomes(redis: &fred::clients::Client, name: &str, expected: &[&str]) {
    for _ in 0..100 {
        if queue(redis, name).await == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(queue(redis, name).await, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fair_lock_looks_in_redis_as_redissons_fair_lock_does() {
    let url = common::url();
    let [one, two, three] = clients(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("fair-layout");

    // The holder: RLock's hash, `<owner>` -> 1, with the lease.
    let held = one.fair_lock(&name).await.unwrap();
    let fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    assert_eq!(fields, [(held.owner().to_owned(), "1".to_owned())]);
    let pttl: i64 = redis.pttl(name.as_str()).await.unwrap();
    assert!((20_000..=30_000).contains(&pttl), "{pttl}");

    // Two waiters queue in the order they came, each deadline one wait after the one
    // before it (`fairLockWaitTimeout`, 5 minutes by default), the first's after the
    // holder's lease.
    let (second, second_task) = waiter(&two, &name).await;
    queue_becomes(&redis, &name, &[&second]).await;
    let (third, third_task) = waiter(&three, &name).await;
    queue_becomes(&redis, &name, &[&second, &third]).await;
    let first_deadline = deadline(&redis, &name, &second).await.unwrap();
    let third_deadline = deadline(&redis, &name, &third).await.unwrap();
    // (Give or take a millisecond: the first's deadline is the holder's expiry plus a
    // wait, the second's at least that expiry, read later, plus two.)
    let spacing = third_deadline - first_deadline;
    assert!((299_998.0..=300_002.0).contains(&spacing), "{spacing}");

    // The release tells the head alone, on its own channel, with Redisson's "0".
    let subscriber = common::raw(&url).await;
    let mut messages = subscriber.message_rx();
    for owner in [&second, &third] {
        let channel = format!("redisson_lock__channel:{{{name}}}:{owner}");
        subscriber.subscribe(channel).await.unwrap();
    }
    let _: () = subscriber.ping(None).await.unwrap();
    held.unlock().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv())
        .await
        .expect("the head is told")
        .unwrap();
    assert_eq!(
        message.channel.to_string(),
        format!("redisson_lock__channel:{{{name}}}:{second}")
    );
    assert_eq!(message.value.as_str().unwrap(), "0");
    // The head takes it within a round trip or two of the message (the lease had 20 s
    // and more to run); the next waiter's deadline moves one wait earlier.
    let second_guard = tokio::time::timeout(Duration::from_secs(1), second_task)
        .await
        .expect("the head is woken by its message")
        .unwrap();
    assert_eq!(second_guard.owner(), second);
    queue_becomes(&redis, &name, &[&third]).await;
    let moved = deadline(&redis, &name, &third).await.unwrap();
    assert_eq!(third_deadline - moved, 300_000.0);
    assert!(!third_task.is_finished());

    // The next release hands it on; nothing is left behind after the last.
    second_guard.unlock().await.unwrap();
    let third_guard = tokio::time::timeout(Duration::from_secs(1), third_task)
        .await
        .expect("the next head is woken by its message")
        .unwrap();
    third_guard.unlock().await.unwrap();
    nothing_left(&redis, &name).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_that_gives_up_or_is_dropped_leaves_redissons_queue() {
    let url = common::url();
    let [one, two, three] = clients(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("fair-leave");
    let held = one.fair_lock(&name).await.unwrap();

    // A single try is refused and queues nothing.
    assert!(two.fair_lock(&name).try_now().await.unwrap().is_none());
    assert!(queue(&redis, &name).await.is_empty());

    // A wait that times out leaves; the deadline behind it moves its wait earlier.
    let (tell, told) = oneshot::channel();
    let timed = tokio::spawn({
        let (two, name) = (two.clone(), name.clone());
        async move {
            tell.send(two.owner_id()).unwrap();
            two.fair_lock(&name)
                .timeout(Duration::from_millis(1_500))
                .await
                .unwrap()
        }
    });
    let gives_up = told.await.unwrap();
    queue_becomes(&redis, &name, &[&gives_up]).await;
    let (stays, stays_task) = waiter(&three, &name).await;
    queue_becomes(&redis, &name, &[&gives_up, &stays]).await;
    let before = deadline(&redis, &name, &stays).await.unwrap();
    assert!(timed.await.unwrap().is_none());
    queue_becomes(&redis, &name, &[&stays]).await;
    assert_eq!(deadline(&redis, &name, &gives_up).await, None);
    // By the wait of the one that left (a call with a wait uses it, as Redisson's
    // `tryLock(waitTime, ..)` does).
    assert_eq!(
        before - deadline(&redis, &name, &stays).await.unwrap(),
        1_500.0
    );

    // A dropped wait leaves too, and the queue goes on without it.
    let (dropped, dropped_task) = waiter(&two, &name).await;
    queue_becomes(&redis, &name, &[&stays, &dropped]).await;
    dropped_task.abort();
    queue_becomes(&redis, &name, &[&stays]).await;
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(1), stays_task)
        .await
        .expect("the head is woken by its message")
        .unwrap();
    guard.unlock().await.unwrap();
    nothing_left(&redis, &name).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_after_one_that_gave_up_queues_at_the_tail() {
    let url = common::url();
    let [one, two, three] = clients(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("fair-rewait");
    let held = one.fair_lock(&name).await.unwrap();
    // A task whose wait gives up and waits again at once, as a retry loop does: the
    // second wait does not keep the first one's place ahead of a waiter that came
    // between them (a Java thread's next tryLock queues at the tail too).
    let (tell, told) = oneshot::channel();
    let (gave_up_tell, gave_up_told) = oneshot::channel();
    let retrying = tokio::spawn({
        let (two, name) = (two.clone(), name.clone());
        async move {
            tell.send(two.owner_id()).unwrap();
            let first = two
                .fair_lock(&name)
                .timeout(Duration::from_millis(1_000))
                .await;
            assert!(first.unwrap().is_none());
            gave_up_tell.send(()).unwrap();
            two.fair_lock(&name).await.unwrap()
        }
    });
    let retrier = told.await.unwrap();
    queue_becomes(&redis, &name, &[&retrier]).await;
    let (between, between_task) = waiter(&three, &name).await;
    queue_becomes(&redis, &name, &[&retrier, &between]).await;
    gave_up_told.await.unwrap();
    queue_becomes(&redis, &name, &[&between, &retrier]).await;
    held.unlock().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(1), between_task)
        .await
        .expect("the waiter that came between is served first")
        .unwrap();
    assert!(!retrying.is_finished());
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(1), retrying)
        .await
        .expect("the retry is served next")
        .unwrap();
    second.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_head_that_leaves_a_free_lock_tells_the_next_waiter() {
    let url = common::url();
    let [one, two, three] = clients(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("fair-head-leaves");
    // The head gives up just as the release tells it (it leaves the queue a moment
    // later, once its client has let go of its channel): the lock is free, and the
    // next waiter is told when the head leaves, not at the end of the lease it saw.
    let held = one.fair_lock(&name).await.unwrap();
    let (head, head_task) = waiter(&two, &name).await;
    queue_becomes(&redis, &name, &[&head]).await;
    let (next, next_task) = waiter(&three, &name).await;
    queue_becomes(&redis, &name, &[&head, &next]).await;
    head_task.abort();
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(3), next_task)
        .await
        .expect("the next waiter is told when the head leaves")
        .unwrap();
    assert_eq!(guard.owner(), next);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_read_and_break_a_fair_lock_in_redissons_layout() {
    let url = common::url();
    let (one, two) = (redisson_client(&url).await, redisson_client(&url).await);
    let redis = common::raw(&url).await;
    let name = common::unique("fair-operator");
    let held = one.fair_lock(&name).await.unwrap();
    let (waiting, waiting_task) = waiter(&two, &name).await;
    queue_becomes(&redis, &name, &[&waiting]).await;

    // The holder and the queue, in order.
    let info = one
        .inspect_kind(LockKind::Fair, &name)
        .await
        .unwrap()
        .expect("held");
    let owners: Vec<&str> = info.owners.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(owners, [held.owner()]);
    let fair = info.fair.expect("a fair lock's queue");
    let queued: Vec<&str> = fair.queue.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(queued, [waiting.as_str()]);
    assert_eq!(fair.queue[0].since_us, 0);

    // Broken by force: the holder is told, the head is told and takes the lock.
    assert!(one.force_unlock_kind(LockKind::Fair, &name).await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("the holder is told");
    let guard = tokio::time::timeout(Duration::from_secs(1), waiting_task)
        .await
        .expect("the head is told")
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(!one.force_unlock_kind(LockKind::Fair, &name).await.unwrap());
    let info = one.inspect_kind(LockKind::Fair, &name).await.unwrap();
    assert!(info.is_none(), "{info:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fair_lock_in_redissons_layout_re_enters_and_refuses_fencing() {
    let url = common::url();
    let client = redisson_client(&url).await;
    let redis = common::raw(&url).await;
    let name = common::unique("fair-reenter");
    let outer = client.fair_lock(&name).await.unwrap();
    let inner = client.fair_lock(&name).await.unwrap();
    let count: String = redis.hget(name.as_str(), outer.owner()).await.unwrap();
    assert_eq!(count, "2");
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    let left: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(left, 0);

    let fenced = client
        .fair_lock(&name)
        .options(holdlock::LockOptions::fenced())
        .await;
    assert!(
        matches!(
            fenced,
            Err(holdlock::LockError::InvalidOption {
                option: "fenced",
                ..
            })
        ),
        "{fenced:?}"
    );
    let left: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(left, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_fair_calls_leave_no_hold_no_place_and_no_subscription_behind() {
    let url = common::url();
    let (holder, waiters) = (redisson_client(&url).await, redisson_client(&url).await);
    let redis = common::raw(&url).await;
    let name = common::unique("fair-cancel");
    let channels = || async {
        let pattern = format!("redisson_lock__channel:{{{name}}}*");
        let open: Vec<String> = redis.pubsub_channels(pattern).await.unwrap();
        open.len()
    };
    let nothing_left = || async {
        let start = std::time::Instant::now();
        loop {
            let queued = queue(&redis, &name).await;
            let deadlines: i64 = redis.exists(deadlines_key(&name)).await.unwrap();
            if queued.is_empty() && deadlines == 0 && channels().await == 0 {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(3),
                "left behind: queue {queued:?}, deadlines {deadlines}, {} channels",
                channels().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // Waiters dropped at every point of their wait, 200 of them, each an owner.
    let held = holder.fair_lock(&name).await.unwrap();
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            let (client, name) = (waiters.clone(), name.clone());
            tokio::spawn(async move {
                let wait = Duration::from_millis(1 + i % 100);
                let _ = tokio::time::timeout(wait, client.fair_lock(&name)).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    nothing_left().await;
    held.unlock().await.unwrap();

    // Calls on a free lock dropped at every point, some granted in flight: none
    // leaves a hold that no guard owns.
    let tasks: Vec<_> = (0..100u64)
        .map(|i| {
            let (client, name) = (waiters.clone(), name.clone());
            tokio::spawn(async move {
                let wait = Duration::from_micros(100 + 97 * i);
                if let Ok(Ok(guard)) = tokio::time::timeout(wait, client.fair_lock(&name)).await {
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    common::wait_until_free(&waiters, &name, Duration::from_secs(3)).await;
    nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn our_waiter_keeps_its_place_behind_a_holder_that_holds_past_the_queues_deadlines() {
    let url = common::url();
    let short = || short_lease_client(&url);
    let (one, two, three) = (short().await, short().await, short().await);
    let redis = common::raw(&url).await;
    let name = common::unique("fair-long-holder");
    // The holder's watchdog keeps a 1 s lease for 8 s: the first waiter's deadline
    // by Redisson's rule (the lease, plus the fair wait of 5 s) passes while it still
    // waits.
    let held = one.fair_lock(&name).await.unwrap();
    let (first, first_task) = waiter(&two, &name).await;
    queue_becomes(&redis, &name, &[&first]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (second, second_task) = waiter(&three, &name).await;
    queue_becomes(&redis, &name, &[&first, &second]).await;
    // Past the first's deadline by that rule, the first is still ahead (it asked
    // again at each PTTL, moving its deadline on), not dropped as stale by the next
    // script (the second's next attempt, or its own) and queued again behind.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        queue(&redis, &name).await,
        [first.as_str(), second.as_str()]
    );
    released_serves_in_order(held, first_task, second_task).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_dropped_as_a_stale_head_takes_the_head_back_when_it_asks_again() {
    let url = common::url();
    let (one, two, three) = (
        short_lease_client(&url).await,
        short_lease_client(&url).await,
        short_lease_client(&url).await,
    );
    let redis = common::raw(&url).await;
    let name = common::unique("fair-stale-head");
    let held = one.fair_lock(&name).await.unwrap();
    let (first, first_task) = waiter(&two, &name).await;
    queue_becomes(&redis, &name, &[&first]).await;
    let (second, second_task) = waiter(&three, &name).await;
    queue_becomes(&redis, &name, &[&first, &second]).await;
    let second_before = deadline(&redis, &name, &second).await.unwrap();
    // The head's deadline runs out under it (as uneven waits make Redisson's
    // arithmetic do): the next script, whoever's, drops it.
    let script = "return redis.call('zadd', KEYS[1], 1, ARGV[1])";
    let _: i64 = redis
        .eval(script, deadlines_key(&name), first.as_str())
        .await
        .unwrap();
    // Within a lease both ask again: the first is first in line again, not behind
    // the second.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        queue(&redis, &name).await,
        [first.as_str(), second.as_str()]
    );
    // Taking the head back put the second one place further back: its deadline moved
    // a wait later then, so the first's grant (which moves it a wait earlier) leaves
    // it no sooner than before the reclaim (without that, 5 s sooner).
    let guard = served_at_release(held, first_task, "the first waiter is served first").await;
    let second_after = deadline(&redis, &name, &second).await.unwrap();
    assert!(
        second_after >= second_before,
        "the second's deadline moved from {second_before} to {second_after}"
    );
    assert!(!second_task.is_finished());
    let guard = served_at_release(guard, second_task, "then the second").await;
    guard.unlock().await.unwrap();
}

/// `held`'s release serves the first waiter within a second, the second still waiting,
/// and the first's release then the second.
async fn released_serves_in_order(
    held: LockGuard,
    first_task: JoinHandle<LockGuard>,
    second_task: JoinHandle<LockGuard>,
) {
    let guard = served_at_release(held, first_task, "the first waiter is served first").await;
    assert!(!second_task.is_finished());
    let guard = served_at_release(guard, second_task, "then the second").await;
    guard.unlock().await.unwrap();
}

/// `held` released, the guard `waiter` gets within a second (else fails with `what`).
async fn served_at_release(
    held: LockGuard,
    waiter: JoinHandle<LockGuard>,
    what: &str,
) -> LockGuard {
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect(what)
        .unwrap()
}
