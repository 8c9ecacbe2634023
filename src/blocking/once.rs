//! Jobs run once per period across instances, for blocking code: [`Claim`] and
//! [`PeriodClaim`], the async [`holdlock::Claim`](crate::Claim) and
//! [`holdlock::PeriodClaim`](crate::PeriodClaim) with calls that block.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{LockClient, Shared};
use crate::error::Result;
use crate::options::LockOptions;

/// What [`LockClient::claim_period`] found (see [`holdlock::Claim`](crate::Claim)).
///
/// # Examples
/// ```no_run
/// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
/// use std::time::{Duration, SystemTime};
/// use holdlock::blocking::Claim;
/// let options = holdlock::LockOptions::new().wait(Duration::from_millis(500));
/// match client.claim_period("report", Duration::from_secs(3600), SystemTime::now(), options)? {
///     Claim::Won(claim) => {
///         println!("running period {}", claim.period());
///         claim.complete()?;
///     }
///     Claim::AlreadyDone { period } => println!("period {period} already ran elsewhere"),
///     Claim::Busy => println!("another instance is running it"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a won claim must be completed or abandoned"]
pub enum Claim {
    /// This thread holds the lock and the period is open: run the job.
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
    /// The claim, if this thread won the period.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// # use std::time::{Duration, SystemTime};
    /// let claim = client
    ///     .claim_period("report", Duration::from_secs(60), SystemTime::now(), holdlock::LockOptions::new())?
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

/// The right to run one period's job, for blocking code (see
/// [`holdlock::PeriodClaim`](crate::PeriodClaim)). Dropping it abandons the period:
/// its lock is released in the background, as a dropped guard's is.
///
/// # Examples
/// ```no_run
/// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
/// use std::time::{Duration, SystemTime};
/// let options = holdlock::LockOptions::new().wait(Duration::from_millis(500));
/// if let Some(claim) = client.claim_period("report", Duration::from_secs(3600), SystemTime::now(), options)?.won() {
///     println!("running period {}", claim.period());
///     claim.complete()?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping a claim abandons the period"]
pub struct PeriodClaim {
    /// Dropped first: its release is spawned on the runtime `shared` keeps alive.
    claim: crate::PeriodClaim,
    shared: Arc<Shared>,
}

impl fmt::Debug for PeriodClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.claim.fmt(f)
    }
}

impl PeriodClaim {
    /// The index of the claimed period: `floor(unix time / period)`.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(claim: holdlock::blocking::PeriodClaim) {
    /// println!("period {}", claim.period());
    /// # }
    /// ```
    pub fn period(&self) -> u64 {
        self.claim.period()
    }

    /// The async claim underneath, and through it the lock held while the job runs
    /// (`claim.as_async().guard().is_lost()` tells whether it was lost).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(claim: holdlock::blocking::PeriodClaim) {
    /// assert!(!claim.as_async().guard().is_lost());
    /// # }
    /// ```
    pub fn as_async(&self) -> &crate::PeriodClaim {
        &self.claim
    }

    /// Records the period as done (no other instance will run it) and releases the
    /// lock (see [`PeriodClaim::complete`](crate::PeriodClaim::complete)).
    ///
    /// # Errors
    /// As [`PeriodClaim::complete`](crate::PeriodClaim::complete);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime (the period is then left open and the lock released in the
    /// background).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(claim: holdlock::blocking::PeriodClaim) -> holdlock::Result<()> {
    /// claim.complete()?;
    /// # Ok(()) }
    /// ```
    pub fn complete(self) -> Result<()> {
        let Self { claim, shared } = self;
        shared.block(claim.complete())
    }

    /// Releases the lock without recording the period, so another instance may run
    /// it (see [`PeriodClaim::abandon`](crate::PeriodClaim::abandon)).
    ///
    /// # Errors
    /// As [`PeriodClaim::abandon`](crate::PeriodClaim::abandon);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(claim: holdlock::blocking::PeriodClaim) -> holdlock::Result<()> {
    /// claim.abandon()?; // the job failed; let another instance retry
    /// # Ok(()) }
    /// ```
    pub fn abandon(self) -> Result<()> {
        let Self { claim, shared } = self;
        shared.block(claim.abandon())
    }
}

impl LockClient {
    /// Claims the period containing `at` for the job `name`: takes the lock (waiting as
    /// `options` say) and checks that no instance has completed this period yet (see
    /// [`LockClient::claim_period`](crate::LockClient::claim_period)).
    ///
    /// # Errors
    /// As [`LockClient::claim_period`](crate::LockClient::claim_period);
    /// [`LockError::BlockingInRuntime`](crate::LockError::BlockingInRuntime) inside a
    /// tokio runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::blocking::LockClient) -> holdlock::Result<()> {
    /// use std::time::{Duration, SystemTime};
    /// let claim = client.claim_period(
    ///     "nightly",
    ///     Duration::from_secs(86_400),
    ///     SystemTime::now(),
    ///     holdlock::LockOptions::new(),
    /// )?;
    /// # Ok(()) }
    /// ```
    pub fn claim_period(
        &self,
        name: &str,
        period: Duration,
        at: SystemTime,
        options: LockOptions,
    ) -> Result<Claim> {
        let claim = self.block(self.client().claim_period(name, period, at, options))?;
        Ok(match claim {
            crate::Claim::Won(claim) => Claim::Won(PeriodClaim {
                claim,
                shared: Arc::clone(&self.shared),
            }),
            crate::Claim::AlreadyDone { period } => Claim::AlreadyDone { period },
            crate::Claim::Busy => Claim::Busy,
        })
    }
}
