//! Jobs that must run once per period across many instances (cron on every host).
//!
//! Each instance calls [`LockClient::claim_period`] when its timer fires. The first to
//! take the lock for a period that has not yet completed gets [`Claim::Won`] with a
//! [`PeriodClaim`]; after a successful run it calls [`PeriodClaim::complete`], which
//! records the period as done,
//! so instances whose clocks fire a few seconds later find it done and skip it even
//! though the lock is free again. A run that fails calls [`PeriodClaim::abandon`] (or
//! drops the claim): the period stays open and another instance may retry it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fred::interfaces::KeysInterface;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::options::LockOptions;

/// The longest period accepted (ten years), so that every derived duration fits.
const MAX_PERIOD: Duration = crate::options::MAX_DURATION;

/// What [`LockClient::claim_period`] found.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use std::time::{Duration, SystemTime};
/// use holdlock::{Claim, LockOptions};
/// let options = LockOptions::new().wait(Duration::from_millis(500));
/// match client.claim_period("report", Duration::from_secs(3600), SystemTime::now(), options).await? {
///     Claim::Won(claim) => {
///         println!("running period {}", claim.period());
///         claim.complete().await?;
///     }
///     Claim::AlreadyDone { period } => println!("period {period} already ran elsewhere"),
///     Claim::Busy => println!("another instance is running it"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a won claim must be completed or abandoned"]
pub enum Claim {
    /// This caller holds the lock and the period is open: run the job.
    Won(PeriodClaim),
    /// Another instance has already completed this period.
    AlreadyDone {
        /// The period's index.
        period: u64,
    },
    /// The lock could not be had within the wait (another instance is running the job,
    /// or a run that may still fail).
    Busy,
}

impl Claim {
    /// The claim, if this caller won the period.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
    /// # use std::time::{Duration, SystemTime};
    /// let claim = client
    ///     .claim_period("report", Duration::from_secs(60), SystemTime::now(), holdlock::LockOptions::new())
    ///     .await?
    ///     .won();
    /// # Ok(()) }
    /// ```
    pub fn won(self) -> Option<PeriodClaim> {
        match self {
            Claim::Won(claim) => Some(claim),
            _ => None,
        }
    }
}

/// The right to run one period's job; see [`LockClient::claim_period`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use std::time::{Duration, SystemTime};
/// let options = holdlock::LockOptions::new().wait(Duration::from_millis(500));
/// if let holdlock::Claim::Won(claim) =
///     client.claim_period("report", Duration::from_secs(3600), SystemTime::now(), options).await?
/// {
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
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(claim: holdlock::PeriodClaim) {
    /// println!("period {}", claim.period());
    /// # }
    /// ```
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The lock held while the job runs (select on its `lost()` to stop a job whose
    /// lock was lost).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(claim: holdlock::PeriodClaim) {
    /// assert!(!claim.guard().is_lost());
    /// # }
    /// ```
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Records the period as done (no other instance will run it) and releases the lock.
    /// The record is written only if the lock is still held, in one script.
    ///
    /// # Errors
    /// [`LockError::NotHeld`] if the lock was lost while the job ran (the period is then
    /// left open); [`LockError::Redis`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(claim: holdlock::PeriodClaim) -> holdlock::Result<()> {
    /// claim.complete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete(self) -> Result<()> {
        let client = LockClient::of(&self.guard);
        let engine = client.engine();
        let names = engine.config().names(self.guard.name())?;
        let keep_ms = u64::try_from(self.keep.as_millis()).unwrap_or(u64::MAX);
        let owner = self.guard.owner();
        let recorded = engine
            .protocol()
            .complete_period(&names.key, &self.marker, owner, keep_ms)
            .await;
        if !matches!(recorded, Ok(true)) {
            let (name, owner) = (self.guard.name().to_owned(), self.guard.owner().to_owned());
            let _ = self.guard.unlock().await;
            recorded?;
            return Err(LockError::NotHeld { name, owner });
        }
        self.guard.unlock().await
    }

    /// Releases the lock without recording the period, so another instance may run it.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(claim: holdlock::PeriodClaim) -> holdlock::Result<()> {
    /// claim.abandon().await?; // the job failed; let another instance retry
    /// # Ok(()) }
    /// ```
    pub async fn abandon(self) -> Result<()> {
        self.guard.unlock().await
    }
}

impl LockClient {
    /// Claims the period containing `at` for the job `name`: takes the lock (waiting as
    /// `options` say) and checks that no instance has completed this period yet.
    ///
    /// Periods are aligned to the Unix epoch (UTC): period `n` covers
    /// `[n * period, (n + 1) * period)`. Each instance passes the time its own timer
    /// fired; clocks that disagree by less than the time from a boundary to the next
    /// tick still name the same period.
    ///
    /// Prefer a short wait to none: with a zero wait, an instance that fires while
    /// another holds the lock gives up at once, and if that other run then fails and
    /// abandons the period, nobody runs it.
    ///
    /// # Errors
    /// [`LockError::InvalidOption`] for a zero or overlong period, or a time before 1970;
    /// otherwise as [`Acquire::options`](crate::Acquire::options).
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
    ) -> Result<Claim> {
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
        let names = self.engine().config().names(name)?;
        let Some(guard) = self.lock(name).options(options).await? else {
            return Ok(Claim::Busy);
        };
        let marker = names.beside(&format!("period:{index}"));
        let done: i64 = self.redis().exists(marker.as_str()).await?;
        if done == 1 {
            guard.unlock().await?;
            return Ok(Claim::AlreadyDone { period: index });
        }
        let keep = (period * 2).max(period + Duration::from_secs(60));
        Ok(Claim::Won(PeriodClaim {
            guard,
            marker,
            period: index,
            keep,
        }))
    }
}
