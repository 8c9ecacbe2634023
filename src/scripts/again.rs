//! A script that Redis did not run, sent again: after a pause, and after `ASK` to the
//! node importing its slot, right after `ASKING`.
//!
//! Redis says that it did not run a script but would (`Cause::TryAgain`) with
//! `TRYAGAIN` (keys of the call half migrated), `CLUSTERDOWN` and `LOADING`: the script
//! is sent again where it was, 1 ms later, doubling to 50 ms, until the call's
//! deadline.
//!
//! Scripts go over a client that follows no redirection (see
//! `connection::scripting_settings`), so fred answers a redirection with an error that
//! does not say where to: "Too many redirections.". After `MOVED`, fred has refreshed
//! its slot map, and the script sent again goes to the slot's new node. After `ASK`
//! (the slot is being migrated and the key is not on its source: a lock's fresh key,
//! or a held one already carried over), it would be refused again until the migration
//! ends. A migration whose tool stopped half way never ends by itself, and a hold
//! whose key was carried over could not be renewed: so a second redirection in a row
//! looks up where the slot is going, in the source's own line of `CLUSTER NODES`
//! (`[slot->-target]`), and the script is sent there after `ASKING`, as Redis asks.

use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{ClientLike, ClusterInterface};
use fred::prelude::Server;
use fred::types::config::Options;
use fred::types::{ClusterHash, CustomCommand, Value};
use fred::util::redis_keyslot;
use tokio::time::Instant;

use super::{Delivery, send_options};
use crate::error::{Cause, classify};

/// Sends `command` (its arguments built by `arguments`, routed by `key`) as `delivery`
/// says, and again as long as Redis did not run it but would (see the module docs),
/// until `deadline`: its reply, or the error that ended the sends.
pub(super) async fn send(
    client: &Client,
    command: &CustomCommand,
    key: &str,
    arguments: &(dyn Fn() -> Vec<Value> + Sync),
    delivery: Delivery,
    deadline: Instant,
) -> Result<Value, fred::error::Error> {
    let mut again = SendAgain::new(deadline, delivery != Delivery::Acquisition);
    loop {
        let options = send_options(delivery, deadline);
        // fred's futures are large; boxing them keeps every lock future small.
        let sent = match again.importing.clone() {
            Some(node) => {
                let call = (command.clone(), arguments());
                Box::pin(send_asking(client, node, call, &options)).await
            }
            None => {
                let sender = client.with_options(&options);
                Box::pin(sender.custom::<Value, Value>(command.clone(), arguments())).await
            }
        };
        let error = match sent {
            Err(error) if classify(&error) == Cause::TryAgain => error,
            reply => return reply,
        };
        if !Box::pin(again.prepare(client, key, &error)).await {
            return Err(error);
        }
        tracing::debug!(%error, "not run; sending it again");
    }
}

/// How fred answers a redirection it did not follow.
const UNFOLLOWED: &str = "Too many redirections.";

/// The sends of one script that Redis did not run: how long to pause, and where to.
struct SendAgain {
    pause: Duration,
    deadline: Instant,
    /// Whether the last send was redirected too.
    redirected: bool,
    /// Whether an `ASK` is followed (not for an acquisition, see
    /// `Delivery::Acquisition`).
    follows_ask: bool,
    /// The node to send to after `ASKING`.
    importing: Option<Server>,
}

impl SendAgain {
    /// Sends until `deadline`; after `ASKING` too if `follows_ask`.
    fn new(deadline: Instant, follows_ask: bool) -> Self {
        Self {
            pause: Duration::from_millis(1),
            deadline,
            redirected: false,
            follows_ask,
            importing: None,
        }
    }

    /// Takes in `error` (Redis did not run the script on `key`), pauses, and says
    /// whether to send again; `false` (at once) if the send would be past the deadline.
    async fn prepare(&mut self, client: &Client, key: &str, error: &fred::error::Error) -> bool {
        if Instant::now() + self.pause >= self.deadline {
            return false;
        }
        // The first redirection may be a `MOVED`, after which fred routes anew; a
        // second in a row (also one after `ASKING`) asks where the slot is going. A
        // `TRYAGAIN` is sent where it was, until the migration ends.
        let redirected = error.details() == UNFOLLOWED;
        if redirected && self.redirected && self.follows_ask {
            let left = self.deadline.saturating_duration_since(Instant::now());
            self.importing = Box::pin(importing_node(client, key, left)).await;
        }
        self.redirected = redirected;
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(50));
        true
    }
}

/// The node importing the slot of `key`, if its source says one is: asked of the
/// node fred routes the slot to, within `timeout`.
async fn importing_node(client: &Client, key: &str, timeout: Duration) -> Option<Server> {
    let slot = redis_keyslot(key.as_bytes());
    let routing = client.cached_cluster_state()?;
    let source = routing.get_server(slot)?.clone();
    let options = Options {
        cluster_node: Some(source),
        timeout: Some(timeout),
        ..Options::default()
    };
    let nodes: String = client.with_options(&options).cluster_nodes().await.ok()?;
    let (host, port) = importing_address(&nodes, slot)?;
    // fred's own entry for the node (with its TLS name, if any).
    routing
        .unique_primary_nodes()
        .into_iter()
        .find(|server| server.port == port && *server.host == *host)
}

/// The address (`host`, `port`) of the node that the node whose `CLUSTER NODES` is
/// `nodes` is migrating `slot` to.
fn importing_address(nodes: &str, slot: u16) -> Option<(&str, u16)> {
    let own = nodes.lines().find(|line| {
        line.split(' ')
            .nth(2)
            .is_some_and(|flags| flags.contains("myself"))
    })?;
    let marker = format!("[{slot}->-");
    let target = own
        .split(' ')
        .skip(8)
        .find_map(|field| field.strip_prefix(marker.as_str())?.strip_suffix(']'))?;
    let line = nodes
        .lines()
        .find(|line| line.split(' ').next() == Some(target))?;
    // `host:port@cluster-port[,hostname]`
    let address = line.split(' ').nth(1)?.split(['@', ',']).next()?;
    let (host, port) = address.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

/// Sends `command` to `node` right after `ASKING`, on one connection, with `options`
/// (the script's attempts and time); the command's reply.
async fn send_asking(
    client: &Client,
    node: Server,
    (command, arguments): (CustomCommand, Vec<Value>),
    options: &Options,
) -> Result<Value, fred::error::Error> {
    let options = Options {
        cluster_node: Some(node),
        ..options.clone()
    };
    let pipeline = client.pipeline();
    let sender = pipeline.with_options(&options);
    let asking = CustomCommand::new_static("ASKING", ClusterHash::FirstKey, false);
    Box::pin(sender.custom::<(), Value>(asking, Vec::new())).await?;
    Box::pin(sender.custom::<(), Value>(command, arguments)).await?;
    let mut replies = Box::pin(pipeline.try_all::<Value>()).await;
    match replies.pop() {
        Some(reply) if replies.len() == 1 => reply,
        _ => Err(fred::error::Error::new(
            fred::error::ErrorKind::Protocol,
            "ASKING: no reply to the script",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_importing_node_is_read_from_the_sources_own_line() {
        let nodes = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [866->-b2] [900-<-c3]
b2 127.0.0.1:7002@17002,node-b master - 0 1 2 connected 5461-10922
c3 ::1:7003@17003 master - 0 1 3 connected 10923-16383
";
        assert_eq!(importing_address(nodes, 866), Some(("127.0.0.1", 7002)));
        // Importing, not migrating; and a slot that is not on the move.
        assert_eq!(importing_address(nodes, 900), None);
        assert_eq!(importing_address(nodes, 5), None);
        let to_v6 = nodes.replace("[866->-b2]", "[866->-c3]");
        assert_eq!(importing_address(&to_v6, 866), Some(("::1", 7003)));
        // A line of another node that names the slot says nothing.
        let elsewhere = nodes
            .replace(" [866->-b2]", "")
            .replace("16383", "16383 [866->-b2]");
        assert_eq!(importing_address(&elsewhere, 866), None);
    }
}
