//! The kind of exclusive lock a workload takes (W3 and W4 the mutex, W3f and W4f the
//! fair lock, W9 both): used by `workloads.rs` and `fair.rs` alike, so it lives
//! below both.

use crate::{LockClient, LockGuard};

/// The exclusive lock a workload takes: W3 and W4 take the mutex, W3f and W4f the
/// fair lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exclusive {
    /// `lock()`.
    Mutex,
    /// `fair_lock()`.
    Fair,
}

impl Exclusive {
    /// Takes the lock `name` of this kind, waiting as long as it takes.
    pub(super) async fn take(self, client: &LockClient, name: &str) -> crate::Result<LockGuard> {
        match self {
            Self::Mutex => client.lock(name).await,
            Self::Fair => client.fair_lock(name).await,
        }
    }
}
