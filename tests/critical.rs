//! The critical section, ready-made (`lock(..).run(..)` and its siblings), the early warning
//! before a lock is lost (`at_risk`), and a fixed lease extended (`extend`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fred::interfaces::{ClientLike, KeysInterface};
use holdlock::{Held, LockError, LockOptions};
use parking_lot::Mutex;
use tokio::time::Instant;

common::on_every_topology!(
    the_body_value_comes_back_and_the_lock_is_released,
    a_nested_critical_section_re_enters,
    a_busy_lock_runs_no_body,
    every_kind_runs_its_critical_section,
    a_body_is_stopped_when_its_lock_is_lost,
    a_fixed_lease_is_extended_while_held,
);

/// `lock(..).run(..)` returns the body's value, and the lock is free when it returns.
async fn the_body_value_comes_back_and_the_lock_is_released(url: &str) {
    let client = common::connect(url).await;
    let other = common::connect(url).await;
    let name = common::unique("with-lock");
    let value = client
        .lock(&name)
        .run(async |guard| {
            assert_eq!(guard.hold_count(), 1);
            assert!(other.is_locked(&name).await.unwrap());
            41 + 1
        })
        .await
        .unwrap();
    assert_eq!(value, 42);
    assert!(
        !other.is_locked(&name).await.unwrap(),
        "released before returning"
    );
    let token = client
        .lock(&name)
        .options(LockOptions::fenced())
        .run(async |guard| guard.fencing_token())
        .await
        .unwrap()
        .expect("waits forever");
    assert!(token.is_some(), "the body sees the guard's token");
}

/// A `lock(..).run(..)` inside another of the same name, in the same task, re-enters it.
async fn a_nested_critical_section_re_enters(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("with-lock-nested");
    let counts = client
        .lock(&name)
        .run(async |outer| {
            let inner = client
                .lock(&name)
                .run(async |inner| inner.hold_count())
                .await
                .unwrap();
            (inner, outer.hold_count())
        })
        .await
        .unwrap();
    assert_eq!(
        counts,
        (2, 1),
        "inside: two holds; after the inner section: one"
    );
}

/// A busy lock: `lock(..).try_now().run(..)` and a timed-out `lock(..).options(..).run(..)` return `None`, and
/// their bodies never run.
async fn a_busy_lock_runs_no_body(url: &str) {
    let client = common::connect(url).await;
    let holder = common::connect(url).await;
    let name = common::unique("with-lock-busy");
    let held = holder.lock(&name).await.unwrap();
    let ran = AtomicBool::new(false);
    let tried = client
        .lock(&name)
        .try_now()
        .run(async |_| ran.store(true, Ordering::SeqCst))
        .await
        .unwrap();
    assert!(tried.is_none());
    let options = LockOptions::new().wait(Duration::from_millis(50));
    let waited = client
        .lock(&name)
        .options(options)
        .run(async |_| ran.store(true, Ordering::SeqCst))
        .await
        .unwrap();
    assert!(waited.is_none());
    assert!(!ran.load(Ordering::SeqCst), "a body ran without the lock");
    held.unlock().await.unwrap();
}

/// The fair lock, both sides of the read-write lock, the multi-lock and a semaphore's
/// permit each run a body under their guard and release it.
async fn every_kind_runs_its_critical_section(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("with-every-kind");
    let fair = client
        .fair_lock(&name)
        .run(async |guard| guard.hold_count())
        .await
        .unwrap();
    let read = client
        .read_lock(&name)
        .run(async |guard| guard.hold_count())
        .await
        .unwrap();
    let write = client
        .write_lock(&name)
        .run(async |guard| guard.hold_count())
        .await
        .unwrap();
    let (a, b) = (format!("{name}-a"), format!("{name}-b"));
    let members = client
        .lock_all([&b, &a])
        .run(async |guard| guard.names().count())
        .await
        .unwrap();
    let semaphore = client.semaphore(name.as_str(), 1);
    let permit = semaphore
        .acquire()
        .run(async |permit| permit.name().to_owned())
        .await
        .unwrap();
    assert_eq!((fair, read, write, members), (1, 1, 1, 2));
    assert_eq!(permit, name);
    // Everything was released: each can be taken at once by another owner.
    let other = common::connect(url).await;
    assert!(other.fair_lock(&name).try_now().await.unwrap().is_some());
    assert!(other.write_lock(&name).try_now().await.unwrap().is_some());
    assert!(other.lock_all([&a, &b]).try_now().await.unwrap().is_some());
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

/// A lock force-unlocked while its body runs: the body's future is dropped as soon as
/// the holder learns of the loss (its next renewal, a third of the 600 ms lease), and
/// `lock(..).run(..)` fails with `Lost` naming the lock; the body never reaches its end.
/// The lock is broken from outside the body, once the body runs: a renewal can learn
/// of the loss before the force-unlock's own reply arrives, and would drop a body that
/// awaited it.
async fn a_body_is_stopped_when_its_lock_is_lost(url: &str) {
    let client = common::client_with_lease(url, Duration::from_millis(600)).await;
    let breaker = common::connect(url).await;
    let name = common::unique("with-lock-lost");
    let stopped_at = Arc::new(Mutex::new(None));
    let finished = AtomicBool::new(false);
    let (inside, entered) = tokio::sync::oneshot::channel();
    let inside = Mutex::new(Some(inside));
    let section = client.lock(&name).run(async |guard| {
        // Records when the body's future is dropped.
        struct Stopped(Arc<Mutex<Option<Instant>>>);
        impl Drop for Stopped {
            fn drop(&mut self) {
                *self.0.lock() = Some(Instant::now());
            }
        }
        let _stopped = Stopped(Arc::clone(&stopped_at));
        if let Some(inside) = inside.lock().take() {
            let _ = inside.send(guard.name().to_owned());
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        finished.store(true, Ordering::SeqCst);
    });
    let breaking = async {
        let held = entered.await.expect("the body ran");
        let breaking_at = Instant::now();
        assert!(breaker.force_unlock(&held).await.unwrap());
        breaking_at
    };
    let section = async { (section.await, Instant::now()) };
    let ((result, returned_at), broken_at) = tokio::join!(section, breaking);
    assert!(
        matches!(&result, Err(LockError::Lost { name: lost }) if *lost == name),
        "{result:?}"
    );
    assert!(!finished.load(Ordering::SeqCst), "the body ran to its end");
    let stopped_at = stopped_at.lock().expect("the body was dropped");
    let noticed = stopped_at - broken_at;
    assert!(
        noticed < Duration::from_millis(200 + 100),
        "stopped {noticed:?} after the loss (renewals every 200 ms)"
    );
    assert!(returned_at - stopped_at < Duration::from_millis(50));
}

/// A hold with a fixed lease is extended while held: it outlives its first lease, is
/// not reported lost, and Redis keeps it; a hold the watchdog renews refuses, and a
/// hold already lost is `NotHeld`.
async fn a_fixed_lease_is_extended_while_held(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("extend");
    let options = LockOptions::new().lease(Duration::from_millis(400));
    let guard = client
        .lock(&name)
        .options(options.clone())
        .await
        .unwrap()
        .unwrap();
    guard.extend(Duration::from_secs(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !guard.is_lost(),
        "lost after the first lease although extended"
    );
    let pttl: i64 = client
        .redis()
        .pttl(common::key(&name).as_str())
        .await
        .unwrap();
    assert!(pttl > 3_000, "redis has {pttl} ms left");
    guard.unlock().await.unwrap();

    let renewed = client.lock(&name).await.unwrap();
    let refused = renewed.extend(Duration::from_secs(5)).await;
    assert!(
        matches!(
            refused,
            Err(LockError::InvalidOption {
                option: "extend",
                ..
            })
        ),
        "{refused:?}"
    );
    renewed.unlock().await.unwrap();

    let short = client.lock(&name).options(options).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    let late = short.extend(Duration::from_secs(5)).await;
    assert!(matches!(late, Err(LockError::NotHeld { .. })), "{late:?}");
    // The other kinds extend through `Held`.
    let reading = client
        .read_lock(&name)
        .options(LockOptions::new().lease(Duration::from_millis(400)))
        .await
        .unwrap()
        .unwrap();
    Held::extend(&reading, Duration::from_secs(5))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!Held::is_lost(&reading));
    reading.unlock().await.unwrap();
}

/// A holder that blocks its runtime's only worker past two thirds of the lease: the
/// renewal comes late, lands with less than a third of the lease left, and the guard
/// is warned at risk; it is not lost (the renewal landed before the lease ran out).
#[test]
fn a_starved_runtime_warns_at_risk_before_any_loss() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = common::client_with_lease(&common::url(), Duration::from_secs(3)).await;
        let name = common::unique("at-risk-starved");
        let guard = client.lock(&name).await.unwrap();
        assert!(!guard.is_at_risk());
        // Blocks the only worker: the renewal due at 1 s runs at 2.2 s.
        std::thread::sleep(Duration::from_millis(2_200));
        tokio::time::timeout(Duration::from_secs(2), guard.at_risk())
            .await
            .expect("warned at risk");
        assert!(!guard.is_lost(), "lost: the warning came too late");
        let margin = guard.renewal_margin().expect("a renewal landed");
        assert!(margin < Duration::from_secs(1), "margin {margin:?}");
        guard.unlock().await.unwrap();
    });
}

/// Redis paused (`CLIENT PAUSE`) past a renewal's time limit: the renewal times out,
/// the guard is warned at risk, and the next renewal keeps the lock (never lost).
#[tokio::test(flavor = "multi_thread")]
async fn a_paused_server_warns_at_risk_and_the_lock_survives() {
    let server = common::RedisServer::start();
    let client = common::client_with_lease(&server.url(), Duration::from_secs(3)).await;
    let name = common::unique("at-risk-paused");
    let guard = client.lock(&name).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.command(&["CLIENT", "PAUSE", "1400", "ALL"]).unwrap();
    tokio::time::timeout(Duration::from_secs(3), guard.at_risk())
        .await
        .expect("warned at risk");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!guard.is_lost(), "lost although redis came back in time");
    guard.unlock().await.unwrap();
    let _ = client.redis().ping::<String>(None).await;
}

/// Every kind has its `*_timeout`: `None` after about its wait while another owner
/// holds the lock, the guard once it is free.
#[tokio::test(flavor = "multi_thread")]
async fn every_kind_has_a_timeout_variant() {
    let client = common::client().await;
    let holder = common::client().await;
    let name = common::unique("timeout-grid");
    let wait = Duration::from_millis(150);
    let fair = holder.fair_lock(&name).await.unwrap();
    let writing = holder.write_lock(&name).await.unwrap();
    let member = holder.lock(format!("{name}-b")).await.unwrap();
    let started = Instant::now();
    assert!(
        client
            .fair_lock(&name)
            .timeout(wait)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        client
            .read_lock(&name)
            .timeout(wait)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        client
            .write_lock(&name)
            .timeout(wait)
            .await
            .unwrap()
            .is_none()
    );
    let (a, b) = (format!("{name}-a"), format!("{name}-b"));
    assert!(
        client
            .lock_all([&a, &b])
            .timeout(wait)
            .await
            .unwrap()
            .is_none()
    );
    let took = started.elapsed();
    assert!(
        took >= wait * 4 && took < wait * 4 + Duration::from_secs(1),
        "{took:?}"
    );
    assert!(
        !client.is_locked(&a).await.unwrap(),
        "a timed-out lock_all kept a member"
    );
    fair.unlock().await.unwrap();
    writing.unlock().await.unwrap();
    member.unlock().await.unwrap();
    let fair = client
        .fair_lock(&name)
        .timeout(wait)
        .await
        .unwrap()
        .expect("free");
    fair.unlock().await.unwrap();
    // The writer first: the timed-out writer above keeps new readers out for a while
    // (writer preference), not writers.
    let writing = client
        .write_lock(&name)
        .timeout(wait)
        .await
        .unwrap()
        .expect("free");
    writing.unlock().await.unwrap();
    let reading = client
        .read_lock(&name)
        .timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free");
    reading.unlock().await.unwrap();
    let both = client
        .lock_all([&a, &b])
        .timeout(wait)
        .await
        .unwrap()
        .expect("free");
    both.unlock().await.unwrap();
}

/// `run`'s body gets its guard in an `Arc`: a clone it keeps past its end keeps the
/// lock (so `run` returns at once with the body's value), and the lock is released
/// when that clone is dropped.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_the_body_keeps_holds_the_lock_until_it_is_dropped() {
    let client = common::client().await;
    let other = common::connect(&common::url()).await;
    let name = common::unique("kept-guard");
    let kept = Arc::new(Mutex::new(None));
    let ran = client
        .lock(&name)
        .run(|guard| {
            let kept = Arc::clone(&kept);
            async move {
                *kept.lock() = Some(guard);
                7
            }
        })
        .await
        .unwrap();
    assert_eq!(ran, 7);
    let busy = other.lock(&name).try_now().await.unwrap();
    assert!(busy.is_none(), "the kept guard no longer held the lock");
    drop(kept.lock().take());
    common::wait_until_free(&other, &name, Duration::from_secs(5)).await;
}
