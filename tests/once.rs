//! Jobs that run once per period across instances.

mod common;

use std::time::{Duration, SystemTime};

use holdlock::LockOptions;

#[tokio::test(flavor = "multi_thread")]
async fn a_completed_period_is_not_run_again_but_an_abandoned_one_is() {
    let (a, b) = (common::client().await, common::client().await);
    let name = common::unique("cron");
    let period = Duration::from_secs(3600);
    let now = SystemTime::now();
    let no_wait = || LockOptions::new().wait(Duration::ZERO);

    let claim = a
        .claim_period(&name, period, now, no_wait())
        .await
        .unwrap()
        .expect("first claim");
    // While it runs, another instance cannot claim it.
    assert!(
        b.claim_period(&name, period, now, no_wait())
            .await
            .unwrap()
            .is_none()
    );
    claim.abandon().await.unwrap(); // the run failed
    let retry = b
        .claim_period(&name, period, now, no_wait())
        .await
        .unwrap()
        .expect("failed run reopens");
    let index = retry.period();
    retry.complete().await.unwrap();
    // Later in the same period (a slower clock, a late cron): already done.
    let later = now + Duration::from_secs(1);
    assert!(
        a.claim_period(&name, period, later, no_wait())
            .await
            .unwrap()
            .is_none()
    );
    // The next period is open again.
    let next = a
        .claim_period(&name, period, now + period, no_wait())
        .await
        .unwrap()
        .expect("next period");
    assert_eq!(next.period(), index + 1);
    next.complete().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zero_period_is_rejected() {
    let client = common::client().await;
    let result = client
        .claim_period("x", Duration::ZERO, SystemTime::now(), LockOptions::new())
        .await;
    assert!(matches!(
        result,
        Err(holdlock::LockError::InvalidOption {
            option: "period",
            ..
        })
    ));
    let huge = client
        .claim_period("x", Duration::MAX, SystemTime::now(), LockOptions::new())
        .await;
    assert!(matches!(
        huge,
        Err(holdlock::LockError::InvalidOption {
            option: "period",
            ..
        })
    ));
}
