//! fred connections: started and kept running, and closed without waiting on one
//! that is gone.

use std::time::Duration;

use fred::interfaces::ClientLike;
use fred::types::ConnectHandle;
use fred::types::config::ConnectionConfig;
use tokio::time::Instant;

/// Who closes a connection: holdlock, which opened it, or the application, which lent
/// it (see `LockClientBuilder::fred_clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Opened by holdlock: closed at shutdown.
    Opened,
    /// The application's: left open at shutdown.
    Lent,
}

/// Closes `client` (see [`close`]) if holdlock opened it.
pub(crate) async fn close_if_opened(client: &impl ClientLike, ownership: Ownership) {
    if ownership == Ownership::Opened {
        close(client).await;
    }
}

/// Closes one of the client's connections with `QUIT`, waiting for the reply only while
/// the client is connected. A client that is not (Redis went away and fred is
/// reconnecting) has nobody to say goodbye to, and its `QUIT` may never be answered:
/// fred holds it until a reconnection succeeds, or leaves it in the channel of a router
/// that the same `QUIT` has just stopped; either way `quit()` would wait out the whole
/// command timeout (the connect timeout). So it is only sent: the first poll of `quit()`
/// marks the client as closing, stops its reconnection loop and sends the command,
/// before it waits for anything.
pub(crate) async fn close(client: &impl ClientLike) {
    let quit = client.quit();
    if client.is_connected() {
        let _ = quit.await;
    } else {
        let _ = futures::FutureExt::now_or_never(quit);
    }
}

/// Sets up the connection settings of a connection holdlock opens (its command and
/// subscriber clients, and those it opens beside a lent client): `timeout` to connect
/// and for fred's own commands, and no check of each Redis Cluster node's state.
///
/// fred 10 checks each node's `cluster_state` when it connects, and refuses a node
/// that is not `ok`. A restarted primary reports `fail` for its rejoin delay (up to
/// 5 s), and a cluster client reconnects all its nodes together: with the check, every
/// command of the client, on every primary, waited until the restarted node was `ok`
/// again, and holds on primaries the restart never touched were lost. Without it, a
/// node that is not ready answers `CLUSTERDOWN` for its own slots, which the scripts
/// take as "not run" and send again within their time, and the other nodes serve as
/// usual.
pub(crate) fn own_settings(connection: &mut ConnectionConfig, timeout: Duration) {
    connection.connection_timeout = timeout;
    connection.internal_command_timeout = timeout;
    connection.disable_cluster_health_check = true;
}

/// Sets up the client holdlock sends its scripts on over a Redis Cluster (see
/// `Protocol::scripting`): no redirection is followed by fred, for any command.
///
/// A script sent at most once has one write attempt, and fred 10 follows an `ASK`
/// (a script on a fresh key whose slot is being migrated: a routine reshard) only
/// with a write attempt left: for such a script it ends the client's connection task.
/// Asking for no redirection per command does not help: fred reads a command's
/// `max_redirections` of 0 as "the client's default". A client whose default is 0
/// answers a redirection with an error instead (after refreshing its slot map on
/// `MOVED`), and the script is sent again by `scripts::eval`.
///
/// Ending the task is not harmless, even though [`connect`] starts it again: the
/// commands queued at that moment are cancelled without being taken off fred's count
/// of queued commands, and while that count is above zero fred does not flush what it
/// writes. Every call of the client then waited for its timeout (5 s in
/// `tests/cluster_topology.rs`, emptying a primary).
pub(crate) fn scripting_settings(connection: &mut ConnectionConfig) {
    connection.max_redirections = 0;
}

/// Connects `client` (fred's `init`: the first connections are made before this
/// returns) and keeps its connection task running until the client is closed.
///
/// fred's connection task (its router) ends for good on some errors, although its
/// reconnection policy never gives up: fred 10 ends it when a command that has no
/// write attempt left is answered `ASK` (a script sent at most once, whose key's slot
/// is migrating between Redis Cluster nodes: a routine reshard). Every later command
/// then waits out its timeout, renewals included, and every hold is lost. So the
/// task is watched, and started again at once when it ends with an error; commands
/// queued meanwhile are sent by the new one. The new connections are announced like
/// any reconnection, so watchdogs renew and waiting rooms subscribe again.
///
/// The hosts `client` connects to, `host:port` each, for an error that names them.
pub(crate) fn hosts(client: &impl ClientLike) -> String {
    let server = client.client_config().server;
    let hosts: Vec<String> = server.hosts().iter().map(ToString::to_string).collect();
    hosts.join(", ")
}

/// A cluster client's first connection fails while one of the primaries is down for
/// a moment, as in every restart and every failover: fred connects to every primary
/// its first node names, and fails on the first it cannot reach (refused, or reset by
/// a node shutting down). A lent client that keeps fred's check of each Redis Cluster
/// node's state (see [`own_settings`]) is also refused while a node reports a
/// `cluster_state` other than `ok` ("Invalid or missing cluster state"): a restart or
/// a reshard that left a slot uncovered for a moment. A node that knows no slots yet
/// (started a moment ago, it has not heard from the others: its `CLUSTER SLOTS` is
/// empty) is refused too. All are tried again, with a
/// growing pause, until `give_up` (the caller's connect deadline) is near; every other
/// error, and any error of a client of one server, is returned at once. The caller
/// bounds the whole call by the same deadline (`tokio::time::timeout_at`).
pub(crate) async fn connect<C>(client: &C, give_up: Instant) -> Result<(), fred::error::Error>
where
    C: ClientLike + Clone + Send + Sync + 'static,
{
    let mut pause = Duration::from_millis(50);
    let task = loop {
        match client.init().await {
            Ok(task) => break task,
            Err(error) if is_node_not_ready(client, &error) && Instant::now() + pause < give_up => {
                tracing::debug!(%error, "a cluster node is not ready; connecting again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(error) => return Err(error),
        }
    };
    tokio::spawn(keep_running(client.clone(), task));
    Ok(())
}

/// Whether a cluster client's first connection failed because a node was not ready:
/// down or going down (an I/O error), or its state not `ok` (fred 10 says so only in
/// the message of a protocol error).
fn is_node_not_ready(client: &impl ClientLike, error: &fred::error::Error) -> bool {
    use fred::error::ErrorKind;
    client.is_clustered()
        && match error.kind() {
            ErrorKind::IO => true,
            // A node that is not `ok`, or that knows no slots yet (it has just started
            // and not yet heard from the others: "Invalid or missing CLUSTER SLOTS
            // response").
            ErrorKind::Protocol | ErrorKind::Cluster => {
                error.details().contains("cluster state")
                    || error.details().contains("CLUSTER SLOTS")
            }
            _ => false,
        }
}

/// Restarts `client`'s connection task each time it ends with an error, pausing
/// (20 ms, doubling to 1 s) when it ended soon after it was started. Ends when the
/// task ends without one: the client was closed (`QUIT`).
async fn keep_running<C: ClientLike>(client: C, mut task: ConnectHandle) {
    let mut pause = Duration::from_millis(20);
    loop {
        let started = Instant::now();
        let ended = match task.await {
            Ok(Err(error)) if !error.is_canceled() => error,
            // Closed by holdlock or the application (or the runtime is going away).
            _ => return,
        };
        tracing::warn!(error = %ended, "the redis client's connection task stopped; starting it again");
        if started.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        } else {
            pause = Duration::from_millis(20);
        }
        task = client.connect();
    }
}
