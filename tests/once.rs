//! Jobs that run once per period across instances.

mod common;

use std::time::{Duration, SystemTime};

use holdlock::{Claim, LockError, LockOptions};

fn no_wait() -> LockOptions {
    LockOptions::new().wait(Duration::ZERO)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completed_period_is_not_run_again_but_an_abandoned_one_is() {
    let (a, b) = (common::client().await, common::client().await);
    let name = common::unique("cron");
    let period = Duration::from_secs(3600);
    let now = SystemTime::now();

    let claim = a.claim_period(&name, period, now, no_wait()).await.unwrap();
    let claim = claim.won().expect("first claim");
    // While it runs, another instance cannot claim it.
    let busy = b.claim_period(&name, period, now, no_wait()).await.unwrap();
    assert!(matches!(busy, Claim::Busy), "{busy:?}");
    claim.abandon().await.unwrap(); // the run failed

    let retry = b.claim_period(&name, period, now, no_wait()).await.unwrap();
    let retry = retry.won().expect("a failed run reopens the period");
    let index = retry.period();
    retry.complete().await.unwrap();

    // Later in the same period (a slower clock, a late cron): already done.
    let later = now + Duration::from_secs(1);
    match a
        .claim_period(&name, period, later, no_wait())
        .await
        .unwrap()
    {
        Claim::AlreadyDone { period } => assert_eq!(period, index),
        other => panic!("expected AlreadyDone, got {other:?}"),
    }
    // The next period is open again.
    let next = a
        .claim_period(&name, period, now + period, no_wait())
        .await
        .unwrap();
    let next = next.won().expect("the next period is open");
    assert_eq!(next.period(), index + 1);
    next.complete().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_lost_its_lock_does_not_mark_the_period_done() {
    let client = common::client().await;
    let name = common::unique("cron-lost");
    let period = Duration::from_secs(3600);
    let now = SystemTime::now();
    let claim = client
        .claim_period(&name, period, now, LockOptions::new())
        .await
        .unwrap();
    let claim = claim.won().unwrap();
    client.force_unlock(&name).await.unwrap(); // an operator broke the lock mid-run
    assert!(matches!(
        claim.complete().await,
        Err(LockError::NotHeld { .. })
    ));
    let again = client
        .claim_period(&name, period, now, LockOptions::new())
        .await
        .unwrap();
    assert!(
        matches!(again, Claim::Won(_)),
        "the period must stay open: {again:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_and_overlong_periods_are_rejected() {
    let client = common::client().await;
    for period in [Duration::ZERO, Duration::MAX] {
        let result = client
            .claim_period("x", period, SystemTime::now(), LockOptions::new())
            .await;
        assert!(matches!(
            result,
            Err(LockError::InvalidOption {
                option: "period",
                ..
            })
        ));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_marker_fails_completion_and_is_left_alone() {
    use fred::interfaces::HashesInterface;
    let client = common::client().await;
    let name = common::unique("cron-foreign");
    let claim = client
        .claim_period(
            &name,
            Duration::from_secs(3600),
            SystemTime::now(),
            no_wait(),
        )
        .await
        .unwrap();
    let claim = claim.won().unwrap();
    let marker = format!("{}:period:{}", common::key(&name), claim.period());
    let raw = common::raw(&common::url()).await;
    let _: () = raw
        .hset(marker.as_str(), ("someone", "else"))
        .await
        .unwrap();
    match claim.complete().await {
        Err(LockError::WrongType { key }) => assert_eq!(key, marker),
        other => panic!("expected WrongType for the marker, got {other:?}"),
    }
    let foreign: std::collections::HashMap<String, String> =
        raw.hgetall(marker.as_str()).await.unwrap();
    assert_eq!(foreign["someone"], "else");
    assert!(
        !client.is_locked(&name).await.unwrap(),
        "the lock was released"
    );
}
