//! `Compat::Redisson` against Java Redisson itself (`org.redisson:redisson`, the
//! version pinned in `tests/interop-java/pom.xml`), run as a process of its own:
//! `tests/interop-java`'s peer takes Redisson's locks and permits on command, on Java
//! threads of its own, as `tests/interop/peer.js` does with node-redisson for
//! `tests/redisson_interop.rs`. Needs a JDK 17 and Maven: the jar is built by
//! `.ci/run`, or here when it is missing or older than its sources.
//!
//! Every scenario runs on a single server and on a three-primary Redis Cluster, where
//! Redisson's `shardedSubscriptionMode` AUTO (its default) makes release messages go
//! over shard channels (`SSUBSCRIBE`/`SPUBLISH`): exclusion with a shared counter,
//! re-entry on both sides while the other waits, wake-ups by the other side's release
//! within 100 ms while the lease has seconds to run, a killed holder on either side,
//! holdlock's watchdog keeping a Java waiter out past the lease, and `RFencedLock`'s
//! tokens in one increasing sequence across both sides. `RReadWriteLock` against our
//! read-write lock: writers of both sides with a shared counter, readers of both
//! sides inside at once and a writer of either side alone, a writer reading inside
//! its own write lock on each side, wake-ups both ways, our watchdog renewing a read
//! hold's timeout key, and a killed Java reader. `RPermitExpirableSemaphore` against
//! our semaphore: never more permits than the limit across both sides, wake-ups both
//! ways, and an expired permit of either side taken by the other. `RFairLock` against
//! our fair lock: a shared counter, and a queue mixing both sides served in order,
//! each woken by the release before it. `RSemaphore`: a killed Java holder keeps its
//! permit for good (why it stays incompatible).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::interfaces::{HashesInterface, KeysInterface, ListInterface};
use holdlock::{LockError, LockOptions};

use common::java::{INSTALL, peer_jar};
use common::peer::Peer;

common::on_every_topology!(
    both_sides_exclude_each_other_with_no_lost_update,
    a_java_holder_reenters_while_we_wait_and_its_last_release_wakes_us,
    we_reenter_while_a_java_thread_waits_and_our_last_release_wakes_it,
    a_killed_java_holder_frees_the_lock_for_us_within_its_lease,
    a_killed_holdlock_holder_frees_the_lock_for_java_within_its_lease,
    our_watchdog_keeps_a_java_waiter_out_past_the_lease,
    fencing_tokens_form_one_increasing_sequence_across_both_sides,
    read_write_writers_of_both_sides_exclude_each_other_with_no_lost_update,
    read_write_readers_of_both_sides_share_and_a_writer_of_either_side_is_alone,
    read_write_a_java_writer_reads_inside_and_its_last_release_wakes_our_readers,
    read_write_our_writer_reads_inside_and_our_last_release_wakes_a_java_writer,
    read_write_our_watchdog_keeps_a_java_writer_out_past_a_read_lease,
    read_write_a_killed_java_reader_frees_the_lock_for_our_writer_within_its_lease,
    semaphore_permits_of_both_sides_never_exceed_the_limit,
    semaphore_each_sides_release_wakes_the_others_waiter,
    semaphore_an_expired_permit_of_either_side_is_reclaimed_by_the_other,
    rsemaphore_a_killed_java_holder_keeps_its_permit_for_good,
    fair_both_sides_exclude_each_other_with_no_lost_update,
    fair_a_queue_mixing_java_and_rust_waiters_is_served_in_order,
    fair_a_java_holder_reenters_while_we_wait_and_its_last_release_wakes_us,
    fair_we_reenter_while_a_java_thread_waits_and_our_last_release_wakes_it,
    fair_a_killed_java_holder_frees_the_lock_for_us_within_its_lease,
    fair_a_killed_holdlock_holder_frees_the_lock_for_java_within_its_lease,
    fair_our_watchdog_keeps_a_java_waiter_out_past_the_lease,
    fair_a_killed_java_holder_and_a_killed_java_head_are_passed_over_in_time,
);

/// The lease of the Java peers' watchdog (`lockWatchdogTimeout`) and of holdlock's,
/// unless a test says.
const LEASE: Duration = Duration::from_secs(30);

/// A wake-up by the release message: within 100 ms, while the holder's lease had 30 s
/// to run (and no one polls faster than the lease).
const WOKEN_WITHIN: Duration = Duration::from_millis(100);

/// Milliseconds since the Unix epoch, the clock the peer reports by.
fn epoch_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

fn is_cluster(url: &str) -> bool {
    url.starts_with("redis-cluster://")
}

/// A Java Redisson process driven over its stdin (see
/// `tests/interop-java/src/main/java/holdlock/interop/Peer.java`).
impl Peer {
    /// A peer connected to `url` (a single server, or a cluster by its
    /// `redis-cluster://` URL) whose watchdog lease is `watchdog`.
    fn start(url: &str, watchdog: Duration) -> Self {
        Self::start_with(url, watchdog, None)
    }

    /// As [`start`](Self::start), with Redisson's `fairLockWaitTimeout` set to
    /// `fair_wait` if given (5 minutes otherwise).
    fn start_with(url: &str, watchdog: Duration, fair_wait: Option<Duration>) -> Self {
        let jar = peer_jar();
        let child = Command::new("java")
            // A short-lived test process: start fast, stay small.
            .args([
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Xmx256m",
                "-jar",
            ])
            .arg(&jar)
            .arg(url)
            .arg(watchdog.as_millis().to_string())
            .args(fair_wait.map(|wait| wait.as_millis().to_string()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{INSTALL}; starting `java` failed: {e}"));
        let (peer, ready) = Peer::new(child, "Java peer", Duration::from_secs(60));
        // Redisson's choice of publish command: shard channels on a Redis 7 cluster
        // (shardedSubscriptionMode AUTO), plain ones on a single server.
        let expected = if is_cluster(url) {
            "ready SPUBLISH"
        } else {
            "ready PUBLISH"
        };
        assert_eq!(ready, expected);
        peer
    }
}

/// How long after `released_ms` (epoch ms) a waiter got the lock at `got_ms`.
fn woke_after(released_ms: u128, got_ms: u128) -> Duration {
    Duration::from_millis(u64::try_from(got_ms.saturating_sub(released_ms)).unwrap())
}

/// How many clients listen on the release channel of the Redisson lock `name`: shard
/// subscribers on the node that serves its slot on a cluster, plain ones on a server.
fn listeners(url: &str, name: &str) -> i64 {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let reply = if is_cluster(url) {
        let node = common::cluster().primary_of(&channel);
        node.array(&["PUBSUB", "SHARDNUMSUB", &channel])
    } else {
        common::shared().array(&["PUBSUB", "NUMSUB", &channel])
    };
    common::integer(&reply.unwrap()[1])
}

/// The two Redisson locks kept as an owner's hash at the name, `RLock` (our mutex)
/// and `RFairLock` (our fair lock): the scenarios they share run for each.
#[derive(Debug, Clone, Copy)]
enum Family {
    Mutex,
    Fair,
}

impl Family {
    /// The peer's command to take it, waiting: `lock` or `flock`.
    fn java_lock(self) -> &'static str {
        match self {
            Family::Mutex => "lock",
            Family::Fair => "flock",
        }
    }

    /// The peer's command to try it: `trylock` or `tryflock`.
    fn java_try(self) -> &'static str {
        match self {
            Family::Mutex => "trylock",
            Family::Fair => "tryflock",
        }
    }

    /// Our call to take it, waiting.
    async fn take(self, client: &holdlock::LockClient, name: &str) -> holdlock::LockGuard {
        match self {
            Family::Mutex => client.lock(name).await,
            Family::Fair => client.fair_lock(name).await,
        }
        .unwrap()
    }

    /// Our call to try it once.
    async fn try_take(
        self,
        client: &holdlock::LockClient,
        name: &str,
    ) -> Option<holdlock::LockGuard> {
        match self {
            Family::Mutex => client.lock(name).try_now().await,
            Family::Fair => client.fair_lock(name).try_now().await,
        }
        .unwrap()
    }

    /// How many of the channels its waiters are woken on have a listener: the lock's
    /// one channel for `RLock`, each waiter's own for `RFairLock`.
    fn listeners(self, url: &str, name: &str) -> i64 {
        match self {
            Family::Mutex => listeners(url, name),
            Family::Fair => {
                let pattern = format!("redisson_lock__channel:{{{name}}}:*");
                let reply = if is_cluster(url) {
                    let node = common::cluster().primary_of(&pattern);
                    node.array(&["PUBSUB", "SHARDCHANNELS", &pattern])
                } else {
                    common::shared().array(&["PUBSUB", "CHANNELS", &pattern])
                };
                i64::try_from(reply.unwrap().len()).unwrap()
            }
        }
    }

    /// The word [`holdlock_holder_process`] is told it by.
    fn word(self) -> &'static str {
        match self {
            Family::Mutex => "mutex",
            Family::Fair => "fair",
        }
    }
}

async fn both_sides_exclude_each_other_with_no_lost_update(url: &str) {
    let name = common::unique("counter");
    let counter = common::unique("counter-value");
    const SECTIONS: u64 = 60;

    // Two Java processes, each with two threads of sections.
    let mut peers: Vec<Peer> = (0..2).map(|_| Peer::start(url, LEASE)).collect();
    let mut running = Vec::new();
    for peer in &mut peers {
        for thread in 1..=2 {
            running.push(peer.send(&format!("count {name} {thread} {counter} {SECTIONS} 1")));
        }
    }
    // Two holdlock clients, each with two tasks of the same sections.
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let client = common::redisson_client(url, LEASE).await;
        let redis = common::raw(url).await;
        for _ in 0..2 {
            let (client, redis, name, counter) =
                (client.clone(), redis.clone(), name.clone(), counter.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = client.lock(&name).await.unwrap();
                    let value: Option<u64> = redis.get(counter.as_str()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let next = value.unwrap_or(0) + 1;
                    let _: () = redis
                        .set(counter.as_str(), next, None, None, false)
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    // Every wait was ended by a release message: waiting out a 30 s lease even once
    // would not fit in this limit.
    for (index, id) in running.iter().enumerate() {
        let answer = peers[index / 2].answer(*id, Duration::from_secs(25));
        assert_eq!(answer.expect("the Java threads finish")[0], "counted");
    }
    let redis = common::raw(url).await;
    let total: u64 = redis.get(counter.as_str()).await.unwrap();
    assert_eq!(total, 8 * SECTIONS, "a lost update: the sides overlapped");
}

async fn a_java_holder_reenters_while_we_wait_and_its_last_release_wakes_us(url: &str) {
    java_holder_reenters_while_we_wait(url, Family::Mutex).await;
}

async fn fair_a_java_holder_reenters_while_we_wait_and_its_last_release_wakes_us(url: &str) {
    java_holder_reenters_while_we_wait(url, Family::Fair).await;
}

async fn java_holder_reenters_while_we_wait(url: &str, family: Family) {
    let name = common::unique("reenter-java");
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let mut peer = Peer::start(url, LEASE);
    let lock = family.java_lock();

    let first = peer.call(&format!("{lock} {name} 7"), Duration::from_secs(10));
    peer.call(&format!("{lock} {name} 7"), Duration::from_secs(10));
    // One field, the Java thread's owner id, counting two holds.
    let fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    assert_eq!(fields, vec![(first[2].clone(), "2".to_owned())]);
    let pttl: i64 = redis.pttl(name.as_str()).await.unwrap();
    assert!(pttl > 20_000 && pttl <= 30_000, "{pttl}");
    assert!(family.try_take(&client, &name).await.is_none());

    let waiter = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move { Ok::<_, ()>((family.take(&client, &name).await, epoch_ms())) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The inner release leaves the Java thread holding it.
    peer.call(&format!("unlock {name} 7"), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiter.is_finished(),
        "granted while the Java thread still held it"
    );
    let released = peer.call(&format!("unlock {name} 7"), Duration::from_secs(10));
    let released_ms: u128 = released[1].parse().unwrap();
    let (guard, got_ms) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the Java release")
        .unwrap()
        .unwrap();
    let woke = woke_after(released_ms, got_ms);
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after the Java release");
    guard.unlock().await.unwrap();
}

async fn we_reenter_while_a_java_thread_waits_and_our_last_release_wakes_it(url: &str) {
    we_reenter_while_a_java_thread_waits(url, Family::Mutex).await;
}

async fn fair_we_reenter_while_a_java_thread_waits_and_our_last_release_wakes_it(url: &str) {
    we_reenter_while_a_java_thread_waits(url, Family::Fair).await;
}

async fn we_reenter_while_a_java_thread_waits(url: &str, family: Family) {
    let name = common::unique("reenter-rust");
    let client = common::redisson_client(url, LEASE).await;
    let mut peer = Peer::start(url, LEASE);
    let (lock, try_lock) = (family.java_lock(), family.java_try());

    let outer = family.take(&client, &name).await;
    let inner = family.take(&client, &name).await;
    assert_eq!(inner.hold_count(), 2);
    let tried = peer.call(&format!("{try_lock} {name} 3 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false", "a Java thread took a lock we hold");
    let waiting = peer.send(&format!("{lock} {name} 3"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The Java thread waits on the release channel (its own, in a fair lock's queue):
    // a shard channel on the cluster.
    assert_eq!(
        family.listeners(url, &name),
        1,
        "the Java waiter is not subscribed"
    );
    inner.unlock().await.unwrap();
    assert!(
        peer.answer(waiting, Duration::from_millis(500)).is_none(),
        "the Java thread got the lock while we still held it once"
    );
    let released_ms = epoch_ms();
    outer.unlock().await.unwrap();
    let got = peer
        .answer(waiting, Duration::from_secs(10))
        .expect("the Java thread gets the lock");
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after our release");
    peer.call(&format!("unlock {name} 3"), Duration::from_secs(10));
}

async fn a_killed_java_holder_frees_the_lock_for_us_within_its_lease(url: &str) {
    killed_java_holder_frees_the_lock_for_us(url, Family::Mutex).await;
}

async fn fair_a_killed_java_holder_frees_the_lock_for_us_within_its_lease(url: &str) {
    killed_java_holder_frees_the_lock_for_us(url, Family::Fair).await;
}

async fn killed_java_holder_frees_the_lock_for_us(url: &str, family: Family) {
    let name = common::unique("killed-java");
    let client = common::redisson_client(url, LEASE).await;
    let lease = Duration::from_secs(3);
    let mut peer = Peer::start(url, lease);
    let lock = family.java_lock();
    peer.call(&format!("{lock} {name} 1"), Duration::from_secs(10));
    // Its watchdog keeps it past its lease while it lives.
    tokio::time::sleep(lease + Duration::from_secs(1)).await;
    assert!(family.try_take(&client, &name).await.is_none());

    let waiter = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move { Ok::<_, ()>((family.take(&client, &name).await, Instant::now())) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = Instant::now();
    peer.kill();
    let (guard, got) = tokio::time::timeout(lease * 3, waiter)
        .await
        .expect("the lock freed within the killed holder's lease")
        .unwrap()
        .unwrap();
    assert!(
        got - killed <= lease + Duration::from_secs(1),
        "{:?}",
        got - killed
    );
    guard.unlock().await.unwrap();
}

/// The holdlock holder of [`a_killed_holdlock_holder_frees_the_lock_for_java_within_its_lease`],
/// run as a process of its own (this test binary again, with
/// `HOLDLOCK_JAVA_INTEROP_HOLDER` set to `<url> <name> <lease ms> <mutex|fair>`): takes
/// the lock (our mutex or fair lock),
/// says `locked`, and holds it until it is killed. Without the variable it does
/// nothing.
#[tokio::test]
#[ignore = "a helper process of the interop tests, not a test"]
async fn holdlock_holder_process() {
    let Ok(setting) = std::env::var("HOLDLOCK_JAVA_INTEROP_HOLDER") else {
        return;
    };
    let [url, name, lease_ms, family] = setting.split(' ').collect::<Vec<_>>()[..] else {
        panic!("HOLDLOCK_JAVA_INTEROP_HOLDER is `<url> <name> <lease ms> <mutex|fair>`");
    };
    let family = [Family::Mutex, Family::Fair]
        .into_iter()
        .find(|known| known.word() == family)
        .expect("mutex or fair");
    let lease = Duration::from_millis(lease_ms.parse().unwrap());
    let client = common::redisson_client(url, lease).await;
    let _guard = family.take(&client, name).await;
    println!("locked");
    std::future::pending::<()>().await;
}

async fn a_killed_holdlock_holder_frees_the_lock_for_java_within_its_lease(url: &str) {
    killed_holdlock_holder_frees_the_lock_for_java(url, Family::Mutex).await;
}

async fn fair_a_killed_holdlock_holder_frees_the_lock_for_java_within_its_lease(url: &str) {
    killed_holdlock_holder_frees_the_lock_for_java(url, Family::Fair).await;
}

async fn killed_holdlock_holder_frees_the_lock_for_java(url: &str, family: Family) {
    let name = common::unique("killed-rust");
    let (lock, try_lock) = (family.java_lock(), family.java_try());
    let lease = Duration::from_secs(3);
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args([
            "holdlock_holder_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(
            "HOLDLOCK_JAVA_INTEROP_HOLDER",
            format!("{url} {name} {} {}", lease.as_millis(), family.word()),
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    tokio::task::block_in_place(|| {
        assert!(
            lines.any(|line| line.is_ok_and(|line| line == "locked")),
            "the holdlock holder process did not take the lock"
        );
    });
    let mut peer = Peer::start(url, LEASE);
    // holdlock's watchdog keeps it past its lease while the process lives.
    tokio::time::sleep(lease + Duration::from_secs(1)).await;
    let tried = peer.call(&format!("{try_lock} {name} 1 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false");

    let waiting = peer.send(&format!("{lock} {name} 1"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed_ms = epoch_ms();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let got = peer
        .answer(waiting, lease * 3)
        .expect("the lock freed within the killed holder's lease");
    let after = woke_after(killed_ms, got[1].parse().unwrap());
    assert!(after <= lease + Duration::from_secs(1), "{after:?}");
    peer.call(&format!("unlock {name} 1"), Duration::from_secs(10));
}

async fn our_watchdog_keeps_a_java_waiter_out_past_the_lease(url: &str) {
    our_watchdog_keeps_a_java_waiter_out(url, Family::Mutex).await;
}

async fn fair_our_watchdog_keeps_a_java_waiter_out_past_the_lease(url: &str) {
    our_watchdog_keeps_a_java_waiter_out(url, Family::Fair).await;
}

async fn our_watchdog_keeps_a_java_waiter_out(url: &str, family: Family) {
    let name = common::unique("watchdog");
    let lease = Duration::from_secs(1);
    let client = common::redisson_client(url, lease).await;
    let redis = common::raw(url).await;
    let mut peer = Peer::start(url, LEASE);
    let (lock, try_lock) = (family.java_lock(), family.java_try());

    let guard = family.take(&client, &name).await;
    // The Java thread tries for three leases and is refused throughout.
    let tried = peer.call(
        &format!("{try_lock} {name} 2 3000"),
        Duration::from_secs(10),
    );
    assert_eq!(
        tried[1], "false",
        "a Java thread got in while our watchdog held"
    );
    let pttl: i64 = redis.pttl(name.as_str()).await.unwrap();
    assert!(pttl > 0 && pttl <= 1000, "{pttl}");
    let count: String = redis.hget(name.as_str(), guard.owner()).await.unwrap();
    assert_eq!(count, "1");
    assert!(!guard.is_lost());

    let waiting = peer.send(&format!("{lock} {name} 2"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_ms = epoch_ms();
    guard.unlock().await.unwrap();
    let got = peer.answer(waiting, Duration::from_secs(10)).unwrap();
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "{woke:?}");
    peer.call(&format!("unlock {name} 2"), Duration::from_secs(10));
}

async fn fencing_tokens_form_one_increasing_sequence_across_both_sides(url: &str) {
    let name = common::unique("fenced");
    let counter = format!("redisson_lock_token:{{{name}}}");
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let mut peer = Peer::start(url, LEASE);
    let fenced = || client.lock(&name).options(LockOptions::fenced());

    // Taken in turn: each side's token is above the other's last one, and Java's
    // INCR continues right above ours.
    let mut last = 0;
    for _ in 0..3 {
        let java = peer.call(&format!("fenced {name} 1"), Duration::from_secs(10));
        let java: u64 = java[1].parse().unwrap();
        assert!(java > last, "Java's token {java} after {last}");
        if last > 0 {
            assert_eq!(java, last + 1, "Java's INCR continues above ours");
        }
        peer.call(&format!("unlock {name} 1"), Duration::from_secs(10));
        let guard = fenced().await.unwrap().unwrap();
        let ours = guard.fencing_token().unwrap();
        assert!(ours > java, "our token {ours} after Java's {java}");
        let counted: u64 = redis.get(counter.as_str()).await.unwrap();
        assert_eq!(counted, ours, "both sides draw from Redisson's counter");
        guard.unlock().await.unwrap();
        last = ours;
    }

    // Taken by both sides at once, each holder appending its token under the lock:
    // the list, in the order the lock was held, is increasing.
    let list = common::unique("fenced-tokens");
    const SECTIONS: usize = 25;
    let running: Vec<u64> = (1..=2)
        .map(|thread| peer.send(&format!("fencedcount {name} {thread} {list} {SECTIONS}")))
        .collect();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (client, redis, name, list) =
                (client.clone(), redis.clone(), name.clone(), list.clone());
            tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = client
                        .lock(&name)
                        .options(LockOptions::fenced())
                        .await
                        .unwrap()
                        .unwrap();
                    let token = guard.fencing_token().unwrap();
                    let _: i64 = redis
                        .rpush(list.as_str(), format!("rust:{token}"))
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for id in running {
        let answer = peer.answer(id, Duration::from_secs(25));
        assert_eq!(answer.expect("the Java threads finish")[0], "fencedcounted");
    }
    let held: Vec<String> = redis.lrange(list.as_str(), 0, -1).await.unwrap();
    assert_eq!(held.len(), 4 * SECTIONS);
    let tokens: Vec<(&str, u64)> = held
        .iter()
        .map(|entry| {
            let (side, token) = entry.split_once(':').unwrap();
            (side, token.parse().unwrap())
        })
        .collect();
    for pair in tokens.windows(2) {
        assert!(pair[1].1 > pair[0].1, "a token went back: {pair:?}");
    }
    assert!(tokens[0].1 > last);
    let java = tokens.iter().filter(|(side, _)| *side == "java").count();
    assert_eq!(java, 2 * SECTIONS);
}

/// Whether a read of `name` by another owner than our tasks' is refused now, and a
/// write too (tried by a client of its own; a hold it gets is given back at once).
async fn others_refused(url: &str, name: &str) -> (bool, bool) {
    let other = common::redisson_client(url, LEASE).await;
    let read = other.read_lock(name).try_now().await.unwrap();
    let refused_read = read.is_none();
    if let Some(read) = read {
        read.unlock().await.unwrap();
    }
    let write = other.write_lock(name).try_now().await.unwrap();
    let refused_write = write.is_none();
    if let Some(write) = write {
        write.unlock().await.unwrap();
    }
    (refused_read, refused_write)
}

async fn read_write_writers_of_both_sides_exclude_each_other_with_no_lost_update(url: &str) {
    let name = common::unique("rw-counter");
    let counter = common::unique("rw-counter-value");
    const SECTIONS: u64 = 40;
    let mut peer = Peer::start(url, LEASE);
    // One Java thread: two would wait on each other's releases, whose `1` Redisson
    // gives only to threads already waiting, so one between its attempt and its wait
    // sleeps for the lease (Redisson's own race; ours publish a `0` after it).
    let running = [peer.send(&format!("rwcount {name} 1 {counter} {} 1", 2 * SECTIONS))];
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (client, redis, name, counter) =
                (client.clone(), redis.clone(), name.clone(), counter.clone());
            tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = client.write_lock(&name).await.unwrap();
                    let value: Option<u64> = redis.get(counter.as_str()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let next = value.unwrap_or(0) + 1;
                    let _: () = redis
                        .set(counter.as_str(), next, None, None, false)
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // Every wait was ended by a release message: one 30 s lease waited out would
    // not fit.
    for id in running {
        let answer = peer.answer(id, Duration::from_secs(25));
        assert_eq!(answer.expect("the Java threads finish")[0], "counted");
    }
    let total: u64 = redis.get(counter.as_str()).await.unwrap();
    assert_eq!(total, 4 * SECTIONS, "a lost update: two writers overlapped");
    let left: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(left, 0);
}

async fn read_write_readers_of_both_sides_share_and_a_writer_of_either_side_is_alone(url: &str) {
    let name = common::unique("rw-share");
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let mut peer = Peer::start(url, LEASE);

    // A Java reader and ours inside at once, each in its own field.
    let java = peer.call(&format!("rlock {name} 1"), Duration::from_secs(10));
    let ours = client.read_lock(&name).await.unwrap();
    let mode: String = redis.hget(name.as_str(), "mode").await.unwrap();
    assert_eq!(mode, "read");
    for owner in [java[2].as_str(), ours.owner()] {
        let count: String = redis.hget(name.as_str(), owner).await.unwrap();
        assert_eq!(count, "1", "{owner}");
    }
    // Operators see both readers, each with its lease (Java's from its timeout key).
    let info = client
        .inspect_kind(holdlock::LockKind::ReadWrite, &name)
        .await
        .unwrap()
        .expect("held");
    let rw = info.read_write.unwrap();
    let mut seen: Vec<&str> = rw.readers.iter().map(|r| r.owner.as_str()).collect();
    seen.sort_unstable();
    let mut both = vec![java[2].as_str(), ours.owner()];
    both.sort_unstable();
    assert_eq!(seen, both);
    assert!(
        rw.readers
            .iter()
            .all(|r| r.lease.is_some_and(|l| l > Duration::from_secs(20)))
    );
    // Neither side's writer gets in.
    let tried = peer.call(&format!("trywlock {name} 2 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false", "a Java writer got in beside two readers");
    assert!(others_refused(url, &name).await.1);
    peer.call(&format!("unlock {name} 1"), Duration::from_secs(10));
    assert!(others_refused(url, &name).await.1, "our reader still reads");
    ours.unlock().await.unwrap();

    // Our writer alone: no Java reader, no Java writer.
    let writer = client.write_lock(&name).await.unwrap();
    let tried = peer.call(&format!("tryrlock {name} 1 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false", "a Java reader got in beside our writer");
    let tried = peer.call(&format!("trywlock {name} 2 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false", "a Java writer got in beside ours");
    writer.unlock().await.unwrap();

    // A Java writer alone: none of ours.
    let java = peer.call(&format!("wlock {name} 2"), Duration::from_secs(10));
    assert!(java[2].ends_with(":write"), "{java:?}");
    assert_eq!(others_refused(url, &name).await, (true, true));
    peer.call(&format!("unlock {name} 2"), Duration::from_secs(10));
    assert_eq!(others_refused(url, &name).await, (false, false));
    let left: i64 = redis.exists(name.as_str()).await.unwrap();
    assert_eq!(left, 0);
}

async fn read_write_a_java_writer_reads_inside_and_its_last_release_wakes_our_readers(url: &str) {
    let name = common::unique("rw-java-writer");
    let client = common::redisson_client(url, LEASE).await;
    let mut peer = Peer::start(url, LEASE);
    peer.call(&format!("wlock {name} 4"), Duration::from_secs(10));
    peer.call(&format!("rlock {name} 4"), Duration::from_secs(10));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move {
                let guard = client.read_lock(&name).await.unwrap();
                let got = epoch_ms();
                (guard, got)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The Java thread gives up its write lock and still reads: our readers get in.
    peer.call(&format!("unlock {name} 4"), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        readers.iter().all(|reader| !reader.is_finished()),
        "a reader got in while the Java thread still wrote"
    );
    // (`unlock` takes back the Java thread's latest lock: its read hold first.)
    let released = peer.call(&format!("unlock {name} 4"), Duration::from_secs(10));
    let released_ms: u128 = released[1].parse().unwrap();
    for reader in readers {
        let (guard, got) = tokio::time::timeout(Duration::from_secs(10), reader)
            .await
            .expect("woken by the Java release")
            .unwrap();
        let woke = woke_after(released_ms, got);
        assert!(woke < WOKEN_WITHIN, "woke {woke:?} after the Java release");
        guard.unlock().await.unwrap();
    }
}

async fn read_write_our_writer_reads_inside_and_our_last_release_wakes_a_java_writer(url: &str) {
    let name = common::unique("rw-rust-writer");
    let client = common::redisson_client(url, LEASE).await;
    let mut peer = Peer::start(url, LEASE);
    let write = client.write_lock(&name).await.unwrap();
    let rewrite = client.write_lock(&name).await.unwrap();
    let read = client.read_lock(&name).await.unwrap();
    let waiting = peer.send(&format!("wlock {name} 5"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    rewrite.unlock().await.unwrap();
    write.unlock().await.unwrap();
    assert!(
        peer.answer(waiting, Duration::from_millis(500)).is_none(),
        "the Java writer got in while we still read"
    );
    let released_ms = epoch_ms();
    read.unlock().await.unwrap();
    let got = peer
        .answer(waiting, Duration::from_secs(10))
        .expect("the Java writer gets the lock");
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after our release");
    peer.call(&format!("unlock {name} 5"), Duration::from_secs(10));
}

async fn read_write_our_watchdog_keeps_a_java_writer_out_past_a_read_lease(url: &str) {
    let name = common::unique("rw-watchdog");
    let lease = Duration::from_secs(1);
    let client = common::redisson_client(url, lease).await;
    let redis = common::raw(url).await;
    let mut peer = Peer::start(url, LEASE);
    let read = client.read_lock(&name).await.unwrap();
    let tried = peer.call(&format!("trywlock {name} 6 3000"), Duration::from_secs(10));
    assert_eq!(
        tried[1], "false",
        "a Java writer got in while our watchdog held"
    );
    // Redisson reads a reader's life from its timeout key: ours is renewed.
    let timeout_key = format!("{{{name}}}:{}:rwlock_timeout:1", read.owner());
    let pttl: i64 = redis.pttl(timeout_key.as_str()).await.unwrap();
    assert!(pttl > 0 && pttl <= 1000, "{pttl}");
    assert!(!read.is_lost());
    let waiting = peer.send(&format!("wlock {name} 6"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_ms = epoch_ms();
    read.unlock().await.unwrap();
    let got = peer.answer(waiting, Duration::from_secs(10)).unwrap();
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "{woke:?}");
    peer.call(&format!("unlock {name} 6"), Duration::from_secs(10));
}

async fn read_write_a_killed_java_reader_frees_the_lock_for_our_writer_within_its_lease(url: &str) {
    let name = common::unique("rw-killed-java");
    let client = common::redisson_client(url, LEASE).await;
    let lease = Duration::from_secs(3);
    let mut peer = Peer::start(url, lease);
    peer.call(&format!("rlock {name} 1"), Duration::from_secs(10));
    // Redisson's watchdog keeps the read hold past its lease while the process lives.
    tokio::time::sleep(lease + Duration::from_secs(1)).await;
    assert!(client.write_lock(&name).try_now().await.unwrap().is_none());
    let writer = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move {
            client
                .write_lock(&name)
                .await
                .map(|guard| (guard, Instant::now()))
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = Instant::now();
    peer.kill();
    let (guard, got) = tokio::time::timeout(lease * 3, writer)
        .await
        .expect("the lock freed within the killed reader's lease")
        .unwrap()
        .unwrap();
    assert!(
        got - killed <= lease + Duration::from_secs(1),
        "{:?}",
        got - killed
    );
    guard.unlock().await.unwrap();
}

async fn semaphore_permits_of_both_sides_never_exceed_the_limit(url: &str) {
    let name = common::unique("sem-limit");
    let inside = common::unique("sem-inside");
    let most = common::unique("sem-most");
    const PERMITS: u32 = 2;
    const ROUNDS: u64 = 15;
    let mut peer = Peer::start(url, LEASE);
    let set = peer.call(
        &format!("psetpermits {name} 1 {PERMITS}"),
        Duration::from_secs(10),
    );
    assert_eq!(set[1], "true");
    let running: Vec<u64> = (1..=2)
        .map(|thread| {
            peer.send(&format!(
                "pcount {name} {thread} {inside} {most} {ROUNDS} 5 30000"
            ))
        })
        .collect();
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (semaphore, redis, inside, most) = (
                client.semaphore(&name, PERMITS),
                redis.clone(),
                inside.clone(),
                most.clone(),
            );
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let permit = semaphore.acquire().await.unwrap();
                    let now: i64 = redis.incr(inside.as_str()).await.unwrap();
                    let seen: Option<i64> = redis.get(most.as_str()).await.unwrap();
                    if now > seen.unwrap_or(0) {
                        let _: () = redis
                            .set(most.as_str(), now, None, None, false)
                            .await
                            .unwrap();
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let _: i64 = redis.decr(inside.as_str()).await.unwrap();
                    permit.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for id in running {
        let answer = peer.answer(id, Duration::from_secs(25));
        assert_eq!(answer.expect("the Java threads finish")[0], "pcounted");
    }
    let most: i64 = redis.get(most.as_str()).await.unwrap();
    assert!(
        (1..=i64::from(PERMITS)).contains(&most),
        "{most} holders at once with {PERMITS} permits"
    );
    let available = peer.call(&format!("pavailable {name} 1"), Duration::from_secs(10));
    assert_eq!(available[1], PERMITS.to_string());
    assert_eq!(
        client.semaphore(&name, PERMITS).available().await.unwrap(),
        PERMITS
    );
}

async fn semaphore_each_sides_release_wakes_the_others_waiter(url: &str) {
    let name = common::unique("sem-wake");
    let client = common::redisson_client(url, LEASE).await;
    let semaphore = client.semaphore(&name, 1);
    let mut peer = Peer::start(url, LEASE);

    // Ours held: a Java waiter is woken by our release.
    let permit = semaphore.acquire().await.unwrap();
    let waiting = peer.send(&format!("pacquire {name} 1 30000"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_ms = epoch_ms();
    permit.release().await.unwrap();
    let got = peer
        .answer(waiting, Duration::from_secs(10))
        .expect("the Java waiter gets the permit");
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after our release");
    assert!(semaphore.acquire().try_now().await.unwrap().is_none());

    // Java's held: our waiter is woken by its release.
    let waiter = tokio::spawn({
        let semaphore = semaphore.clone();
        async move {
            let permit = semaphore.acquire().await.unwrap();
            (permit, epoch_ms())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = peer.call(
        &format!("prelease {name} 1 {}", got[2]),
        Duration::from_secs(10),
    );
    assert_eq!(released[1], "true");
    let (permit, got_ms) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the Java release")
        .unwrap();
    let woke = woke_after(released[2].parse().unwrap(), got_ms);
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after the Java release");
    permit.release().await.unwrap();
}

async fn semaphore_an_expired_permit_of_either_side_is_reclaimed_by_the_other(url: &str) {
    let name = common::unique("sem-expired");
    let client = common::redisson_client(url, LEASE).await;
    let semaphore = client.semaphore(&name, 1);
    let mut peer = Peer::start(url, LEASE);
    let lease = Duration::from_secs(1);

    // (Redisson's acquire waits until someone sets the semaphore's permits up.)
    let set = peer.call(&format!("psetpermits {name} 1 1"), Duration::from_secs(10));
    assert_eq!(set[1], "true");
    // A Java permit with a 1 s lease, never given back: ours gets it once it runs out.
    let java = peer.call(
        &format!("pacquire {name} 1 {}", lease.as_millis()),
        Duration::from_secs(10),
    );
    assert_eq!(java[0], "acquired");
    let taken_at = Instant::now();
    assert!(semaphore.acquire().try_now().await.unwrap().is_none());
    let permit = tokio::time::timeout(lease * 4, semaphore.acquire())
        .await
        .expect("the expired Java permit is reclaimed")
        .unwrap();
    assert!(taken_at.elapsed() >= lease - Duration::from_millis(100));
    assert!(
        taken_at.elapsed() <= lease + Duration::from_secs(1),
        "{:?}",
        taken_at.elapsed()
    );
    permit.release().await.unwrap();

    // Ours with a fixed 1 s lease, kept but not renewed: Java gets it once it runs out.
    let fixed = semaphore
        .acquire()
        .options(LockOptions::new().lease(lease))
        .await
        .unwrap()
        .expect("a free permit");
    let tried = peer.call(
        &format!("ptryacquire {name} 2 0 30000"),
        Duration::from_secs(10),
    );
    assert_eq!(tried[1], "none", "a Java thread got a permit we hold");
    let tried = peer.call(
        &format!("ptryacquire {name} 2 4000 30000"),
        Duration::from_secs(10),
    );
    assert_ne!(
        tried[1], "none",
        "our expired permit was not reclaimed by Java"
    );
    tokio::time::timeout(Duration::from_secs(5), fixed.lost())
        .await
        .expect("our permit is lost once its lease ran out");
    drop(fixed);
    peer.call(
        &format!("prelease {name} 2 {}", tried[1]),
        Duration::from_secs(10),
    );
}

/// Why `RSemaphore` is not compatible (docs/deployments.md): its permits have no ids
/// and no leases, so a Java holder killed while holding one keeps it for good. Nothing
/// in Redis says the permit's holder died (the count has no expiry and there is no
/// deadline anywhere), so no client can ever take it back; our semaphore in Redisson's
/// layout (`RPermitExpirableSemaphore`'s keys) reads such a name as a semaphore with
/// no permits at all and refuses it.
async fn rsemaphore_a_killed_java_holder_keeps_its_permit_for_good(url: &str) {
    use fred::interfaces::KeysInterface;
    let name = common::unique("rsemaphore");
    let mut peer = Peer::start(url, LEASE);
    let set = peer.call(&format!("ssetpermits {name} 1 1"), Duration::from_secs(10));
    assert_eq!(set[1], "true");
    let taken = peer.call(&format!("sacquire {name} 1"), Duration::from_secs(10));
    assert_eq!(taken[0], "sacquired");
    peer.kill();

    // Three of our 1 s leases on, the dead holder's permit is still taken.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let redis = common::raw(url).await;
    let free: String = redis.get(name.as_str()).await.unwrap();
    assert_eq!(free, "0", "a killed RSemaphore holder's permit came back");
    let ttl: i64 = redis.pttl(name.as_str()).await.unwrap();
    assert_eq!(ttl, -1, "the count has no expiry");
    let client = common::redisson_client(url, Duration::from_secs(1)).await;
    let refused = client.semaphore(&name, 1).acquire().try_now().await;
    assert!(
        matches!(
            refused,
            Err(LockError::InvalidOption {
                option: "permits",
                ..
            })
        ),
        "{refused:?}"
    );
    let _: i64 = redis.del(name.as_str()).await.unwrap();
}

async fn fair_both_sides_exclude_each_other_with_no_lost_update(url: &str) {
    let name = common::unique("fair-counter");
    let counter = common::unique("fair-counter-value");
    const SECTIONS: u64 = 30;
    let mut peer = Peer::start(url, LEASE);
    let running: Vec<u64> = (1..=2)
        .map(|thread| peer.send(&format!("fcount {name} {thread} {counter} {SECTIONS} 1")))
        .collect();
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (client, redis, name, counter) =
                (client.clone(), redis.clone(), name.clone(), counter.clone());
            tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = client.fair_lock(&name).await.unwrap();
                    let value: Option<u64> = redis.get(counter.as_str()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let next = value.unwrap_or(0) + 1;
                    let _: () = redis
                        .set(counter.as_str(), next, None, None, false)
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // Every wait was ended by a message to its own channel: one 30 s lease waited out
    // would not fit.
    for id in running {
        let answer = peer.answer(id, Duration::from_secs(25));
        assert_eq!(answer.expect("the Java threads finish")[0], "counted");
    }
    let total: u64 = redis.get(counter.as_str()).await.unwrap();
    assert_eq!(total, 4 * SECTIONS, "a lost update: two holders overlapped");
    for key in [
        name.clone(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
    ] {
        let left: i64 = redis.exists(key.as_str()).await.unwrap();
        assert_eq!(left, 0, "{key}");
    }
}

async fn fair_a_queue_mixing_java_and_rust_waiters_is_served_in_order(url: &str) {
    let name = common::unique("fair-order");
    let queue_key = format!("redisson_lock_queue:{{{name}}}");
    let client = common::redisson_client(url, LEASE).await;
    let redis = common::raw(url).await;
    let mut peer = Peer::start(url, LEASE);
    let queue = || {
        let (redis, key) = (redis.clone(), queue_key.clone());
        async move { redis.lrange::<Vec<String>, _>(key, 0, -1).await.unwrap() }
    };
    let queued = |n: usize| {
        let queue = &queue;
        async move {
            for _ in 0..100 {
                if queue().await.len() == n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("the queue never had {n} waiters: {:?}", queue().await);
        }
    };
    let rust_waiter = || {
        let (client, name) = (client.clone(), name.clone());
        let (tell, told) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            tell.send(client.owner_id()).unwrap();
            let guard = client.fair_lock(&name).await.unwrap();
            (guard, epoch_ms())
        });
        (told, task)
    };

    // Ours holds; a Java thread, one of ours, another Java thread and another of ours
    // queue in turn, each after the one before it is in the queue.
    let holder = client.fair_lock(&name).await.unwrap();
    let java_first = peer.send(&format!("flock {name} 1"));
    queued(1).await;
    let (told, rust_first) = rust_waiter();
    let rust_first_owner = told.await.unwrap();
    queued(2).await;
    let java_second = peer.send(&format!("flock {name} 2"));
    queued(3).await;
    let (told, rust_second) = rust_waiter();
    let rust_second_owner = told.await.unwrap();
    queued(4).await;
    let order = queue().await;
    assert_eq!(order[1], rust_first_owner);
    assert_eq!(order[3], rust_second_owner);

    // Each release wakes the next in that order, by its own channel, at once.
    let released_ms = epoch_ms();
    holder.unlock().await.unwrap();
    let got = peer
        .answer(java_first, Duration::from_secs(10))
        .expect("the first Java thread gets the lock");
    assert_eq!(got[2], order[0]);
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(
        woke < WOKEN_WITHIN,
        "the Java head woke {woke:?} after our release"
    );

    let released = peer.call(&format!("unlock {name} 1"), Duration::from_secs(10));
    let (guard, got_ms) = tokio::time::timeout(Duration::from_secs(10), rust_first)
        .await
        .expect("our first waiter gets the lock")
        .unwrap();
    let woke = woke_after(released[1].parse().unwrap(), got_ms);
    assert!(
        woke < WOKEN_WITHIN,
        "our head woke {woke:?} after the Java release"
    );
    assert!(
        peer.answer(java_second, Duration::from_millis(300))
            .is_none(),
        "the second Java thread got in while ours held"
    );
    assert!(!rust_second.is_finished());

    let released_ms = epoch_ms();
    guard.unlock().await.unwrap();
    let got = peer
        .answer(java_second, Duration::from_secs(10))
        .expect("the second Java thread gets the lock");
    assert_eq!(got[2], order[2]);
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(
        woke < WOKEN_WITHIN,
        "the Java head woke {woke:?} after our release"
    );
    assert!(!rust_second.is_finished());

    let released = peer.call(&format!("unlock {name} 2"), Duration::from_secs(10));
    let (guard, got_ms) = tokio::time::timeout(Duration::from_secs(10), rust_second)
        .await
        .expect("our second waiter gets the lock")
        .unwrap();
    let woke = woke_after(released[1].parse().unwrap(), got_ms);
    assert!(
        woke < WOKEN_WITHIN,
        "our head woke {woke:?} after the Java release"
    );
    guard.unlock().await.unwrap();
    assert!(queue().await.is_empty());
}

async fn fair_a_killed_java_holder_and_a_killed_java_head_are_passed_over_in_time(url: &str) {
    let name = common::unique("fair-killed");
    let queue_key = format!("redisson_lock_queue:{{{name}}}");
    // Every side keeps a waiter's place at the head for 5 s without asking
    // (`fairLockWaitTimeout`, 5 minutes by default).
    let fair_wait = Duration::from_secs(5);
    let client = holdlock::LockClient::builder(url)
        .compat(holdlock::Compat::Redisson)
        .lease(LEASE)
        .fair_wait_timeout(fair_wait)
        .build()
        .await
        .unwrap();
    let redis = common::raw(url).await;
    let lease = Duration::from_secs(3);
    // One Java process holds, another waits at the head of the queue; ours waits
    // behind it. Both Java processes are killed.
    let mut holder = Peer::start_with(url, lease, Some(fair_wait));
    holder.call(&format!("flock {name} 1"), Duration::from_secs(10));
    let mut head = Peer::start_with(url, lease, Some(fair_wait));
    head.send(&format!("flock {name} 1"));
    let queued = |n: usize| {
        let (redis, key) = (redis.clone(), queue_key.clone());
        async move {
            for _ in 0..100 {
                let queue: Vec<String> = redis.lrange(key.as_str(), 0, -1).await.unwrap();
                if queue.len() == n {
                    return queue;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("the queue never had {n} waiters");
        }
    };
    queued(1).await;
    let waiter = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move {
            let guard = client.fair_lock(&name).await.unwrap();
            (guard, Instant::now())
        }
    });
    let queue = queued(2).await;
    let killed = Instant::now();
    holder.kill();
    head.kill();
    // The hold runs out within its lease; the dead head keeps its place until its
    // deadline (the fair wait after the hold it queued behind), then ours is next:
    // seconds, not the 30 s lease ours would have waited out without asking again.
    let (guard, got) = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("our waiter gets the lock once the dead head's deadline passed")
        .unwrap();
    let waited = got - killed;
    assert!(
        waited <= lease + Duration::from_secs(5 + 2),
        "{waited:?} (queue was {queue:?})"
    );
    let held: i64 = redis.hlen(name.as_str()).await.unwrap();
    assert_eq!(held, 1);
    guard.unlock().await.unwrap();
    let left: Vec<String> = redis.lrange(queue_key.as_str(), 0, -1).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
