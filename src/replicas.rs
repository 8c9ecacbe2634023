//! Replica-acknowledged acquisition: `WAIT` right behind the acquire script.
//!
//! `WAIT n t` counts the replicas that have acknowledged every write made *on the
//! connection it runs on*, so it must follow the script on the same connection: a
//! connection of its own, as `WAIT` blocks its connection until the replicas answer
//! or the timeout passes, and on the shared connection it would hold up every renewal
//! and release of the client behind it.
//!
//! Blocking its connection, `WAIT`s run one at a time, and so do the scripts behind
//! them. When the replicas lag (a failover's new replica still syncing, a replica
//! down), every `WAIT` takes its whole timeout: with one `WAIT` per acquisition, the
//! tenth of ten concurrent acquisitions waited ten timeouts, and past the command
//! timeout (the connect timeout, 5 s) failed with "Request timed out". So a `WAIT` is
//! shared ([`Acknowledging::wait`]): one covers every write made on its connection
//! before it, so every acquisition whose script was answered before the next `WAIT`
//! is sent joins that one. At most one `WAIT` per node (and per replica count and
//! timeout) is in flight, and one waits to be sent: an acquisition waits at most two
//! `WAIT` timeouts.
//!
//! If that connection was re-established, or the cluster routing table changed,
//! between the script and its `WAIT`, the `WAIT` may have run somewhere else than the
//! script, so its count is not trusted. fred 10 sends a command that a migrating slot
//! redirects with `ASK` back to the slot's old owner (which answers `ASK` again until
//! fred gives up; seen with a slot left `MIGRATING`), so a script never runs on the
//! target of an `ASK` while its `WAIT` runs on the source; if fred learns to follow
//! `ASK`, this needs another look.
//!
//! A fresh acquisition acknowledged by too few replicas is released again at once
//! (exactly once, like any release) and reported as [`LockError::NotReplicated`]. If
//! that release fails, the call is reported as one that may have left a hold, which
//! the engine settles (and releases) in the background.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{ClientLike, ClusterInterface};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::sync::OnceCell;

use crate::error::{LockError, Result};

use crate::scripts::Scripts;

/// The connection for acknowledged acquisitions, opened on first use, and the
/// `WAIT`s shared on it.
#[derive(Default)]
pub(crate) struct Acknowledging {
    client: OnceCell<Client>,
    waits: Arc<parking_lot::Mutex<HashMap<WaitLine, Line>>>,
}

impl std::fmt::Debug for Acknowledging {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Acknowledging")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// `WAIT`s that may be shared: on one node's connection (`None` on a single server),
/// asking for the same replicas within the same milliseconds.
type WaitLine = (Option<String>, u32, u64);

/// A `WAIT` many acquisitions await: its count, or the error that lost it.
type SharedWait = Shared<BoxFuture<'static, std::result::Result<u32, LockError>>>;

/// The `WAIT` of a line in flight, and the one that waits for it to end, which every
/// acquisition answered meanwhile joins.
#[derive(Default)]
struct Line {
    in_flight: Option<SharedWait>,
    next: Option<SharedWait>,
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
                            Ok(Err(error)) => {
                                let hosts = crate::connection::hosts(&client);
                                LockError::of_connecting(error, hosts)
                            }
                            _ => LockError::ConnectTimeout { timeout },
                        })
                    }
                }
            })
            .await
    }

    /// How many replicas have every write made on `client` (the acknowledging one)
    /// before this call, by a `WAIT replicas wait_ms` (sent once, with `timeout`)
    /// routed to the node of `key`: the next one not yet sent on that node's
    /// connection, joined, or a new one, sent once the one in flight has ended.
    ///
    /// # Cancel safety
    /// Cancel safe: a `WAIT` others await goes on for them; one nobody awaits any more
    /// is sent (or finished) by the next caller that joins it.
    pub(crate) async fn wait(
        &self,
        client: &Client,
        key: &str,
        (replicas, wait_ms): (u32, u64),
        timeout: Duration,
    ) -> Result<u32> {
        let node = client.cached_cluster_state().and_then(|routing| {
            let slot = fred::util::redis_keyslot(key.as_bytes());
            routing.get_server(slot).map(|server| server.to_string())
        });
        let line = (node, replicas, wait_ms);
        let shared = {
            let mut lines = self.waits.lock();
            let waits = lines.entry(line.clone()).or_default();
            match &waits.next {
                Some(next) => next.clone(),
                None => {
                    let before = waits.in_flight.clone();
                    let (lines, client, key) =
                        (Arc::clone(&self.waits), client.clone(), key.to_owned());
                    let wait = async move {
                        if let Some(before) = before {
                            let _ = before.await;
                        }
                        // Sent from here on: later acquisitions make the next one.
                        if let Some(waits) = lines.lock().get_mut(&line) {
                            waits.in_flight = waits.next.take();
                        }
                        let asked = (replicas, wait_ms);
                        Scripts::wait_for_replicas(&client, &key, asked, timeout).await
                    };
                    let next = wait.boxed().shared();
                    waits.next = Some(next.clone());
                    next
                }
            }
        };
        shared.await
    }

    /// Closes the connection if it was ever opened.
    pub(crate) async fn quit(&self) {
        if let Some(client) = self.client.get() {
            crate::connection::close(client).await;
        }
    }
}
