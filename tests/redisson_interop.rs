//! `Compat::Redisson` against a real Redisson-protocol client run as its own process:
//! node-redisson (npm), which keeps locks with Redisson's `RLock` scripts, hash fields
//! and release channel, driven by `tests/interop/peer.js`. Needs Node.js; the npm
//! packages are installed by `.ci/run` (`npm ci` in tests/interop), or here if
//! missing.
//!
//! Each side runs in its own process, on one Redis server: exclusion with a shared
//! counter, re-entry on both sides while the other waits, wake-ups by the other side's
//! release message, a killed holder on either side, and holdlock's watchdog keeping a
//! Redisson waiter out past the lease.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::interfaces::{HashesInterface, KeysInterface};

use common::peer::Peer;

/// The lease of the Redisson peers' watchdog and of holdlock's, unless a test says.
const LEASE: Duration = Duration::from_secs(30);

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// Installs the peer's npm packages once if `.ci/run` has not.
fn npm_packages() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let dir = interop_dir();
        if dir.join("node_modules/node-redisson").is_dir() {
            return;
        }
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("npm (Node.js) is needed for the Redisson interop test");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    });
}

/// Milliseconds since the Unix epoch, the clock the peer reports by.
fn epoch_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// A node-redisson process driven over its stdin (see `tests/interop/peer.js`).
impl Peer {
    fn start(url: &str, watchdog: Duration) -> Self {
        npm_packages();
        let child = Command::new("node")
            .arg("peer.js")
            .arg(url)
            .arg(watchdog.as_millis().to_string())
            .current_dir(interop_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node (Node.js) is needed for the Redisson interop test");
        let (peer, ready) = Peer::new(child, "node-redisson peer", Duration::from_secs(30));
        assert_eq!(ready, "ready");
        peer
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_sides_exclude_each_other_with_no_lost_update() {
    let url = common::url();
    let name = common::unique("counter");
    let counter = common::unique("counter-value");
    const SECTIONS: u64 = 60;

    // node-redisson tries, then subscribes: a release landing between the two is
    // missed, and that thread waits out the lock's time to live (its `tryLock` loop). A
    // short lease bounds such a wait; the wake-ups by release message are the tests
    // below. (Redisson for Java subscribes first; tests/redisson_java_interop.rs.)
    const LEASE: Duration = Duration::from_secs(2);
    // Two Redisson processes, each with two threads of sections.
    let mut peers: Vec<Peer> = (0..2).map(|_| Peer::start(&url, LEASE)).collect();
    let mut running = Vec::new();
    for peer in &mut peers {
        for thread in 1..=2 {
            running.push(peer.send(&format!("count {name} {thread} {counter} {SECTIONS} 1")));
        }
    }
    // Two holdlock clients, each with two tasks of the same sections.
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let client = common::redisson_client(&url, LEASE).await;
        let redis = common::raw(&url).await;
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
    for (index, id) in running.iter().enumerate() {
        let answer = peers[index / 2].answer(*id, Duration::from_secs(25));
        assert_eq!(answer.expect("the Redisson threads finish")[0], "counted");
    }
    let redis = common::raw(&url).await;
    let total: u64 = redis.get(counter.as_str()).await.unwrap();
    assert_eq!(total, 8 * SECTIONS, "a lost update: the sides overlapped");
}

/// How long after `released_ms` (epoch ms) a waiter got the lock at `got_ms`.
fn woke_after(released_ms: u128, got_ms: u128) -> Duration {
    Duration::from_millis(u64::try_from(got_ms.saturating_sub(released_ms)).unwrap())
}

/// A wake-up by the release message: within a second, while the holder's lease had
/// 30 s to run (and no one polls faster than the lease).
const WOKEN_WITHIN: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redisson_holder_reenters_while_we_wait_and_its_last_release_wakes_us() {
    let url = common::url();
    let name = common::unique("reenter-java");
    let client = common::redisson_client(&url, LEASE).await;
    let redis = common::raw(&url).await;
    let mut peer = Peer::start(&url, LEASE);

    peer.call(&format!("lock {name} 7"), Duration::from_secs(10));
    peer.call(&format!("lock {name} 7"), Duration::from_secs(10));
    let fields: Vec<(String, String)> = redis.hgetall(name.as_str()).await.unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert!(
        fields[0].0.ends_with(":7") && fields[0].1 == "2",
        "{fields:?}"
    );
    assert!(client.lock(&name).try_now().await.unwrap().is_none());

    let waiter = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move { client.lock(&name).await.map(|guard| (guard, epoch_ms())) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The inner release leaves the Redisson thread holding it.
    peer.call(&format!("unlock {name} 7"), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiter.is_finished(),
        "granted while the Redisson thread still held it"
    );
    let released = peer.call(&format!("unlock {name} 7"), Duration::from_secs(10));
    let released_ms: u128 = released[1].parse().unwrap();
    let (guard, got_ms) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the Redisson release")
        .unwrap()
        .unwrap();
    let woke = woke_after(released_ms, got_ms);
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after the release");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn we_reenter_while_a_redisson_thread_waits_and_our_last_release_wakes_it() {
    let url = common::url();
    let name = common::unique("reenter-rust");
    let client = common::redisson_client(&url, LEASE).await;
    let mut peer = Peer::start(&url, LEASE);

    let outer = client.lock(&name).await.unwrap();
    let inner = client.lock(&name).await.unwrap();
    let tried = peer.call(&format!("trylock {name} 3 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false", "a Redisson thread took a lock we hold");
    let waiting = peer.send(&format!("lock {name} 3"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    inner.unlock().await.unwrap();
    assert!(
        peer.answer(waiting, Duration::from_millis(500)).is_none(),
        "the Redisson thread got the lock while we still held it once"
    );
    let released_ms = epoch_ms();
    outer.unlock().await.unwrap();
    let got = peer
        .answer(waiting, Duration::from_secs(10))
        .expect("the Redisson thread gets the lock");
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "woke {woke:?} after our release");
    peer.call(&format!("unlock {name} 3"), Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_redisson_holder_frees_the_lock_for_us_within_its_lease() {
    let url = common::url();
    let name = common::unique("killed-java");
    let client = common::redisson_client(&url, LEASE).await;
    let lease = Duration::from_secs(3);
    let mut peer = Peer::start(&url, lease);
    peer.call(&format!("lock {name} 1"), Duration::from_secs(10));
    // Its watchdog keeps it past its lease while it lives.
    tokio::time::sleep(lease + Duration::from_secs(1)).await;
    assert!(client.lock(&name).try_now().await.unwrap().is_none());

    let waiter = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move {
            client
                .lock(&name)
                .await
                .map(|guard| (guard, Instant::now()))
        }
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

/// The holdlock holder of [`a_killed_holdlock_holder_frees_the_lock_for_redisson`],
/// run as a process of its own (this test binary again, with `HOLDLOCK_INTEROP_HOLDER`
/// set to `<url> <name> <lease ms>`): takes the lock, says `locked`, and holds it until
/// it is killed. Without the variable it does nothing.
#[tokio::test]
#[ignore = "a helper process of the interop tests, not a test"]
async fn holdlock_holder_process() {
    let Ok(setting) = std::env::var("HOLDLOCK_INTEROP_HOLDER") else {
        return;
    };
    let [url, name, lease_ms] = setting.split(' ').collect::<Vec<_>>()[..] else {
        panic!("HOLDLOCK_INTEROP_HOLDER is `<url> <name> <lease ms>`");
    };
    let lease = Duration::from_millis(lease_ms.parse().unwrap());
    let client = common::redisson_client(url, lease).await;
    let _guard = client.lock(name).await.unwrap();
    println!("locked");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_holdlock_holder_frees_the_lock_for_redisson_within_its_lease() {
    let url = common::url();
    let name = common::unique("killed-rust");
    let lease = Duration::from_secs(3);
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args([
            "holdlock_holder_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(
            "HOLDLOCK_INTEROP_HOLDER",
            format!("{url} {name} {}", lease.as_millis()),
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
    let mut peer = Peer::start(&url, LEASE);
    // holdlock's watchdog keeps it past its lease while the process lives.
    tokio::time::sleep(lease + Duration::from_secs(1)).await;
    let tried = peer.call(&format!("trylock {name} 1 0"), Duration::from_secs(10));
    assert_eq!(tried[1], "false");

    let waiting = peer.send(&format!("lock {name} 1"));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn our_watchdog_keeps_a_redisson_waiter_out_past_the_lease() {
    let url = common::url();
    let name = common::unique("watchdog");
    let lease = Duration::from_secs(1);
    let client = common::redisson_client(&url, lease).await;
    let redis = common::raw(&url).await;
    let mut peer = Peer::start(&url, LEASE);

    let guard = client.lock(&name).await.unwrap();
    // The Redisson thread tries for three leases and is refused throughout.
    let tried = peer.call(&format!("trylock {name} 2 3000"), Duration::from_secs(10));
    assert_eq!(
        tried[1], "false",
        "a Redisson thread got in while our watchdog held"
    );
    let pttl: i64 = redis.pttl(name.as_str()).await.unwrap();
    assert!(pttl > 0 && pttl <= 1000, "{pttl}");
    let count: String = redis.hget(name.as_str(), guard.owner()).await.unwrap();
    assert_eq!(count, "1");
    assert!(!guard.is_lost());

    let waiting = peer.send(&format!("lock {name} 2"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_ms = epoch_ms();
    guard.unlock().await.unwrap();
    let got = peer.answer(waiting, Duration::from_secs(10)).unwrap();
    let woke = woke_after(released_ms, got[1].parse().unwrap());
    assert!(woke < WOKEN_WITHIN, "{woke:?}");
    peer.call(&format!("unlock {name} 2"), Duration::from_secs(10));
}
