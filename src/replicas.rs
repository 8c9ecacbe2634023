//! Replica-acknowledged acquisition: `WAIT` right behind the acquire script.
//!
//! `WAIT n t` counts the replicas that have acknowledged every write made *on the
//! connection it runs on*, so it must follow the script on the same connection. The
//! script and the `WAIT` go out in one pipeline on a connection of their own:
//!
//! - one pipeline: fred writes both to the connection of the lock's slot, back to
//!   back, each at most once;
//! - a connection of their own: `WAIT` blocks its connection until the replicas answer
//!   or the timeout passes, and on the shared connection it would hold up every
//!   renewal and release of the client behind it.
//!
//! If that connection was re-established, or the cluster routing table changed, while
//! the pipeline was out, the `WAIT` may have run somewhere else than the script, so
//! its count is not trusted. fred 10 sends a command that a migrating slot redirects
//! with `ASK` back to the slot's old owner (which answers `ASK` again until fred gives
//! up; seen with a slot left `MIGRATING`), so a script never runs on the target of an
//! `ASK` while its `WAIT` runs on the source; if fred learns to follow `ASK`, this needs
//! another look.
//!
//! A fresh acquisition acknowledged by too few replicas is released again at once
//! (exactly once, like any release) and reported as [`LockError::NotReplicated`]. If
//! that release fails, the call is reported as one that may have left a hold, which
//! the engine settles (and releases) in the background.

use fred::clients::Client;
use fred::interfaces::{ClientLike, EventInterface};
use tokio::sync::OnceCell;

use crate::client::{CallFailed, Inner};
use crate::config::{LockNames, MinReplicas, ResolvedOptions};
use crate::error::{LockError, Result};
use crate::scripts::{Acquire, AcquireCall};

/// The connection for acknowledged acquisitions, opened on first use.
#[derive(Debug, Default)]
pub(crate) struct Acknowledging {
    client: OnceCell<Client>,
}

impl Acknowledging {
    /// The dedicated client, connecting it (like `template`) on first use.
    pub(crate) async fn client(
        &self,
        template: &Client,
        timeout: std::time::Duration,
    ) -> Result<&Client> {
        self.client
            .get_or_try_init(|| async {
                let client = template.clone_new();
                match tokio::time::timeout(timeout, client.init()).await {
                    Ok(Ok(_)) => Ok(client),
                    failed => {
                        let _ = client.quit().await;
                        Err(match failed {
                            Ok(Err(error)) => LockError::from(error),
                            _ => LockError::ConnectTimeout { timeout },
                        })
                    }
                }
            })
            .await
    }

    /// Closes the connection if it was ever opened.
    pub(crate) async fn quit(&self) {
        if let Some(client) = self.client.get() {
            crate::client::close(client).await;
        }
    }
}

impl Inner {
    /// Runs `acquire.lua` and `WAIT` (see the module docs). A fresh hold that fewer
    /// than `min.replicas` replicas acknowledged is released, and the call fails with
    /// [`LockError::NotReplicated`]. Busy replies and re-entries are returned as they are.
    pub(crate) async fn acquire_acknowledged(
        &self,
        names: &LockNames,
        owner: &str,
        options: ResolvedOptions,
        min: MinReplicas,
    ) -> Result<Acquire, CallFailed> {
        let client = self
            .acknowledging
            .client(&self.redis, self.config.connect_timeout)
            .await?;
        let reconnects = client.reconnect_rx();
        let reroutes = client.cluster_change_rx();
        let (acquired, acked) = self
            .scripts
            .acquire_then_wait(
                client,
                &AcquireCall::of(names, owner, &options), // fresh acquisitions only
                (min.replicas, min.timeout_ms()),
                min.timeout + self.config.connect_timeout,
            )
            .await?;
        if !matches!(acquired, Acquire::Granted { count: 1, .. }) {
            return Ok(acquired);
        }
        let same_connection = reconnects.is_empty() && reroutes.is_empty();
        let acked = match acked {
            Ok(acked) if same_connection => acked,
            Ok(_) => 0,
            Err(error) => {
                tracing::debug!(lock = %names.name, %error, "WAIT failed after a fresh acquisition");
                0
            }
        };
        if acked >= min.replicas {
            return Ok(acquired);
        }
        Err(self.undo_unacknowledged(names, owner, acked, min).await)
    }

    /// Releases a fresh hold (count 1) that too few replicas acknowledged, and returns
    /// the error to report: one that may have left the hold if the release failed.
    pub(crate) async fn undo_unacknowledged(
        &self,
        names: &LockNames,
        owner: &str,
        acked: u32,
        min: MinReplicas,
    ) -> CallFailed {
        let released = self.release_exactly_once(names, owner, 1).await;
        let error = LockError::NotReplicated {
            name: names.name.clone(),
            acked,
            wanted: min.replicas,
        };
        match released {
            Ok(_) => CallFailed::from(error),
            Err(failure) => {
                tracing::debug!(lock = %names.name, error = %failure, "could not release an unreplicated hold yet; settling it");
                CallFailed::maybe_ran(error)
            }
        }
    }
}
