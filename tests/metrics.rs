//! With the `metrics` feature, lock calls, re-entries, releases, renewals and the
//! locks held reach whatever `metrics` recorder the application installed.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test(flavor = "multi_thread")]
async fn lock_calls_are_counted_and_timed() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");

    let client = common::client_with_lease(&common::url(), Duration::from_millis(300)).await;
    let other = common::connect(&common::url()).await;
    let name = common::unique("metrics");
    let outer = client.lock(&name).await.unwrap();
    let inner = client.lock(&name).await.unwrap();
    // Long enough for the watchdog to renew (every 100 ms).
    tokio::time::sleep(Duration::from_millis(350)).await;
    let refused = tokio::spawn({
        let (other, name) = (other.clone(), name.clone());
        async move {
            let busy = other.lock(&name).try_now().await.unwrap().is_none();
            let timed_out = other
                .lock(&name)
                .timeout(Duration::from_millis(50))
                .await
                .unwrap()
                .is_none();
            busy && timed_out
        }
    });
    assert!(refused.await.unwrap());
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();

    // Two tasks crossing two locks: one deadlock broken.
    let checking = holdlock::LockClient::builder(common::url())
        .deadlock_check(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let (x, y) = (common::unique("metrics"), common::unique("metrics"));
    let broken = common::cross_two_locks(&checking, &x, &y).await;
    assert_eq!(broken, [false, true]);

    // A hold broken from outside: lost, and counted so.
    let doomed = common::unique("metrics-lost");
    let guard = client.lock(&doomed).await.unwrap();
    assert!(other.force_unlock(&doomed).await.unwrap());
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the broken hold was reported lost");
    drop(guard);

    let mut counters: HashMap<String, u64> = HashMap::new();
    let mut gauges: HashMap<String, f64> = HashMap::new();
    let mut histograms: HashMap<String, usize> = HashMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        match value {
            DebugValue::Counter(value) => *counters.entry(name).or_default() += value,
            DebugValue::Gauge(value) => *gauges.entry(name).or_default() += value.into_inner(),
            DebugValue::Histogram(values) => *histograms.entry(name).or_default() += values.len(),
        }
    }
    let counter = |name: &str| counters.get(name).copied().unwrap_or(0);
    assert_eq!(counter("holdlock_deadlocks_total{}"), 1, "{counters:?}");
    assert!(
        counter("holdlock_acquisitions_total{outcome=granted}") >= 2,
        "{counters:?}"
    );
    assert!(
        counter("holdlock_acquisitions_total{outcome=busy}") >= 1,
        "{counters:?}"
    );
    assert!(
        counter("holdlock_acquisitions_total{outcome=timed_out}") >= 1,
        "{counters:?}"
    );
    assert!(counter("holdlock_reentries_total{}") >= 1, "{counters:?}");
    assert!(counter("holdlock_locks_lost_total{}") >= 1, "{counters:?}");
    assert!(counter("holdlock_releases_total{}") >= 1, "{counters:?}");
    assert!(
        counter("holdlock_renewals_total{result=ok}") >= 1,
        "{counters:?}"
    );
    assert_eq!(
        gauges.get("holdlock_locks_held{}"),
        Some(&0.0),
        "{gauges:?}"
    );
    assert!(
        histograms
            .get("holdlock_wait_seconds{}")
            .is_some_and(|n| *n >= 4),
        "{histograms:?}"
    );
    assert!(
        histograms
            .get("holdlock_renewal_margin_seconds{}")
            .is_some_and(|n| *n >= 1),
        "{histograms:?}"
    );
    assert!(
        histograms
            .get("holdlock_hold_seconds{}")
            .is_some_and(|n| *n >= 1),
        "{histograms:?}"
    );
}
