//! Lease renewal: one task per held lock and owner, however deeply it is nested.
//!
//! Every `lease / 3` the task runs `renew.lua`. If the owner's field is gone (the key
//! was deleted or expired behind our back), or renewals keep failing until a whole
//! lease has passed since the last success, the hold is lost: the guard's
//! [`lost`](crate::LockGuard::lost) signal fires and a warning is logged.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::client::Inner;
use crate::hold::Hold;

/// Starts renewing `hold` every `lease / 3`; `granted_at` is when the acquire that
/// set the current expiry was sent.
pub(crate) fn spawn(
    inner: &Arc<Inner>,
    hold: &Arc<Hold>,
    lease: Duration,
    granted_at: Instant,
) -> JoinHandle<()> {
    let inner = Arc::clone(inner);
    let hold = Arc::clone(hold);
    let period = renewal_period(lease);
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    tokio::spawn(async move {
        let mut expires = granted_at + lease;
        let mut ticks = tokio::time::interval_at(granted_at + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let sent_at = Instant::now();
            let renewal = inner
                .scripts
                .renew(&inner.redis, &hold.names.key, &hold.owner, lease_ms);
            match tokio::time::timeout(period, renewal).await {
                Ok(Ok(true)) => expires = sent_at + lease,
                Ok(Ok(false)) => {
                    hold.mark_lost("the lock's key or owner field is gone (deleted, force-unlocked or expired)");
                    return;
                }
                Ok(Err(error)) => {
                    tracing::debug!(lock = %hold.names.name, %error, "renewal failed; will retry")
                }
                Err(_) => tracing::debug!(lock = %hold.names.name, "renewal timed out; will retry"),
            }
            if Instant::now() >= expires {
                hold.mark_lost("renewals failed for a whole lease");
                return;
            }
        }
    })
}

/// How often a lease is renewed: a third of it, so two renewals may fail in a row.
pub(crate) fn renewal_period(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(1))
}
