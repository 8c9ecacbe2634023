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
use fred::interfaces::ClientLike;
use tokio::sync::OnceCell;

use crate::error::{LockError, Result};

/// The connection for acknowledged acquisitions, opened on first use.
#[derive(Debug, Default)]
pub(crate) struct Acknowledging {
    client: OnceCell<Client>,
}

impl Acknowledging {
    /// The dedicated client, connecting it (with `template`'s settings and holdlock's
    /// own, see `connection::own_settings`) on first use.
    pub(crate) async fn client(
        &self,
        template: &Client,
        timeout: std::time::Duration,
    ) -> Result<&Client> {
        self.client
            .get_or_try_init(|| async {
                let mut connection = template.connection_config().clone();
                crate::connection::own_settings(&mut connection, timeout);
                let client = Client::new(
                    template.client_config(),
                    Some(template.perf_config()),
                    Some(connection),
                    // fred resets the policy's attempts when the client connects.
                    template.client_reconnect_policy(),
                );
                let give_up = tokio::time::Instant::now() + timeout;
                let connecting = crate::connection::connect(&client, give_up);
                match tokio::time::timeout_at(give_up, connecting).await {
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
            crate::connection::close(client).await;
        }
    }
}
