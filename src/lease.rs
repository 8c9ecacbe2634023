//! Lease arithmetic shared by holds, the watchdog and the protocol: when a hold must be
//! taken as lost, and how often a lease is renewed.

use std::time::Duration;

use tokio::time::Instant;

/// When a hold whose expiry was last set by a command sent at `sent_at` must be taken
/// as lost: a tenth of the lease before Redis can expire it (Redis counts from when it
/// ran the command, which is later). The tenth covers clock-rate drift and a late
/// timer or thread, so the holder hears of the loss before anyone else can take the
/// lock; it costs nothing while renewals succeed, as each renewal moves it a third of
/// a lease on.
pub(crate) fn lost_deadline(sent_at: Instant, lease: Duration) -> Instant {
    sent_at + (lease - lease / 10)
}

/// How often a lease is renewed: a third of it, so two renewals may fail in a row.
pub(crate) fn renewal_period(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(1))
}

/// How long a waiter of a fair lock that the lock was handed to has to claim it: a
/// waiter that died holds the queue up for about this long, not for a lease.
pub(crate) const CLAIM_WINDOW: Duration = Duration::from_secs(2);

/// [`CLAIM_WINDOW`] in milliseconds, as the scripts take it.
pub(crate) const CLAIM_WINDOW_MS: u64 = 2_000;

/// How long a client keeps the places of all its waits in a fair lock's queue without
/// an attempt of any of them, in milliseconds (the scripts take it so): a client that
/// died is dropped from the queue after this long. It makes one every
/// [`PLACE_REFRESH`].
pub(crate) const PLACE_WINDOW_MS: u64 = 6_000;

/// How often a client waiting for a fair lock keeps its places there: a third of
/// [`PLACE_WINDOW_MS`], once for all its waits, unless one of them made an attempt
/// meanwhile.
pub(crate) const PLACE_REFRESH: Duration = Duration::from_millis(PLACE_WINDOW_MS / 3);

/// How long a writer refused a read-write lock keeps new readers out without asking
/// again (it asks every third of it while it waits): a writer that went away blocks
/// readers for about this long, not for a lease.
pub(crate) const WRITER_PATIENCE_MS: u64 = 2_000;
