//! Jobs that must run once per period across many instances (cron on every host).
//!
//! Each instance calls [`LockClient::claim_period`] when its timer fires. The first to
//! take the lock for a period that has not yet completed gets a [`PeriodClaim`]; after a
//! successful run it calls [`PeriodClaim::complete`], which records the period as done,
//! so instances whose clocks fire a few seconds later find it done and skip it even
//! though the lock is free again. A run that fails calls [`PeriodClaim::abandon`] (or
//! drops the claim): the period stays open and another instance may retry it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fred::interfaces::KeysInterface;
use fred::types::Expiration;

use crate::client::LockClient;
use crate::config::LockOptions;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;

/// The longest period accepted (ten years), so that every derived duration fits.
const MAX_PERIOD: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The right to run one period's job; see [`LockClient::claim_period`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use std::time::{Duration, SystemTime};
/// let options = holdlock::LockOptions::new().wait(Duration::ZERO);
/// if let Some(claim) = client.claim_period("report", Duration::from_secs(3600), SystemTime::now(), options).await? {
///     println!("running period {}", claim.period());
///     claim.complete().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping a claim abandons the period"]
pub struct PeriodClaim {
    guard: LockGuard,
    marker: String,
    period: u64,
    keep: Duration,
}

impl PeriodClaim {
    /// The index of the claimed period: `floor(unix time / period)`.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The lock held while the job runs.
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Records the period as done (no other instance will run it) and releases the lock.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] if the lock was lost while the job ran (the period is then
    /// not recorded); [`LockError::Redis`].
    pub async fn complete(self) -> Result<()> {
        if self.guard.is_lost() {
            let (name, owner) = (self.guard.name().to_owned(), self.guard.owner().to_owned());
            self.guard.unlock().await.ok();
            return Err(LockError::NotHeld { name, owner });
        }
        let keep_ms = i64::try_from(self.keep.as_millis()).unwrap_or(i64::MAX);
        let client = LockClient::of(&self.guard);
        let set: Result<(), _> = client
            .redis()
            .set(
                self.marker.as_str(),
                "done",
                Some(Expiration::PX(keep_ms)),
                None,
                false,
            )
            .await;
        let released = self.guard.unlock().await;
        set?;
        released
    }

    /// Releases the lock without recording the period, so another instance may run it.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    pub async fn abandon(self) -> Result<()> {
        self.guard.unlock().await
    }
}

impl LockClient {
    /// Claims the period containing `at` for the job `name`: takes the lock (waiting as
    /// `options` say) and checks that no instance has completed this period yet.
    /// `None` if the lock could not be had or the period is already done.
    ///
    /// Periods are aligned to the Unix epoch (UTC): period `n` covers
    /// `[n * period, (n + 1) * period)`. Instances whose clocks differ by less than
    /// half a period agree on the period of a tick.
    ///
    /// # Errors
    /// [`LockError::InvalidOption`] for a zero or overlong period, or a time before 1970;
    /// otherwise as [`lock_with`](Self::lock_with).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// use std::time::{Duration, SystemTime};
    /// let claim = client
    ///     .claim_period("nightly", Duration::from_secs(86_400), SystemTime::now(), holdlock::LockOptions::new())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn claim_period(
        &self,
        name: &str,
        period: Duration,
        at: SystemTime,
        options: LockOptions,
    ) -> Result<Option<PeriodClaim>> {
        let period_ms = period.as_millis();
        if period_ms == 0 || period > MAX_PERIOD {
            return Err(LockError::InvalidOption {
                option: "period",
                reason: format!("{period:?} is not between 1 ms and ten years"),
            });
        }
        let since_epoch = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| LockError::InvalidOption {
                option: "at",
                reason: "is before 1970".to_owned(),
            })?;
        let index = u64::try_from(since_epoch.as_millis() / period_ms).unwrap_or(u64::MAX);
        let names = self.inner.config.names(name)?;
        let Some(guard) = self.lock_with(name, options).await? else {
            return Ok(None);
        };
        let marker = format!("{}:period:{index}", names.key);
        let done: i64 = self.redis().exists(marker.as_str()).await?;
        if done == 1 {
            guard.unlock().await?;
            return Ok(None);
        }
        let keep = (period * 2).max(period + Duration::from_secs(60));
        Ok(Some(PeriodClaim {
            guard,
            marker,
            period: index,
            keep,
        }))
    }
}
