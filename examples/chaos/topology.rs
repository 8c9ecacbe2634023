//! Cluster mode's topology faults: slots moved between primaries (`reshard`), a primary
//! emptied and the slots spread again (`empty`, then a rebalance), a replica taking
//! over from its primary by a coordinated `CLUSTER FAILOVER` (`failover`), and a node
//! restarted (`node-restart`: a replica, a primary with its data, or a primary after
//! its replica took over).
//!
//! Each is a `redis-cli --cluster` run, a command or a restart, then a wait until every
//! node reports `cluster_state:ok` and all of them agree on who serves which slots.
//! Each takes seconds; the nemesis runs them in a task of their own (one at a time),
//! and a fault that fails is recorded as failed and logged, never fatal to the run. No
//! `FORCE` or `TAKEOVER` failover and no restart of a primary without its data: those
//! lose acknowledged writes by design (docs/deployments.md).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::time::Instant;

use crate::history::{Fault, Restarted, now_us};
use crate::support::{self, BoxError, Cluster};
use crate::{Rng, nemesis::FaultKind};

/// The longest a `redis-cli --cluster` run may take before it is killed.
const REDIS_CLI_LIMIT: Duration = Duration::from_secs(90);

/// The answer `redis-cli --cluster` reads for each of its questions (4 bytes each).
const YES: &str = "yes\n";

/// How long the cluster may take to report ok, and agree, after a change.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// The lock cluster's `cluster-node-timeout` (Redis's default, given explicitly: the
/// failover waits below follow from it).
pub const NODE_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a coordinated failover may take before it counts as failed (Redis
/// abandons a manual failover that has not completed within 5 s).
const FAILOVER_ATTEMPT: Duration = Duration::from_secs(8);

/// How many times a coordinated failover is asked, each when Redis would run it.
const FAILOVER_ASKS: u32 = 3;

/// How long after its last election a replica starts a new one: Redis sets one up
/// only once 4 node timeouts have passed since the last began, won or not. Asked
/// sooner, a replica that lost its last election waits for votes it never asked for
/// until the manual failover times out; one that won it (and became a replica again
/// since) "wins" again at once with its old epoch, and the cluster turns it back into
/// a replica (the newer epoch of the primary wins).
const ELECTION_RETRY: Duration = Duration::from_secs(4 * NODE_TIMEOUT.as_secs());

/// How long after voting about a primary's replacement a primary votes about the same
/// primary again: Redis refuses ("can't vote about this master before ...") for 2 node
/// timeouts.
const VOTE_AGAIN: Duration = Duration::from_secs(2 * NODE_TIMEOUT.as_secs());

/// Added to [`ELECTION_RETRY`] and [`VOTE_AGAIN`] (the times recorded are when a
/// failover ended, not when Redis's clocks began).
const MARGIN: Duration = Duration::from_secs(1);

/// One node, as `CLUSTER NODES` lists it.
#[derive(Debug, Clone)]
struct Node {
    id: String,
    port: u16,
    primary: bool,
    /// A replica's primary's id.
    primary_id: Option<String>,
    /// How many slots it serves.
    slots: u32,
    /// Its slot ranges as listed (the agreement check compares them).
    ranges: String,
    /// When the listing node last heard a pong from it (Unix ms; 0 for itself).
    pong_received: u64,
    /// Whether the listing node has a cluster-bus link to it (or it is itself), and
    /// does not take it for failing (`fail?`, `fail`), in a handshake or without an
    /// address.
    reachable: bool,
}

/// The lock cluster, and its nodes' loopback ports.
#[derive(Debug, Clone)]
pub struct Topology {
    cluster: Arc<Mutex<Cluster>>,
    ports: Vec<u16>,
    url: String,
    /// Each node's log file, by port (for the lines of a failover that did not
    /// complete).
    logs: Vec<(u16, std::path::PathBuf)>,
    /// What Redis remembers of the failovers asked so far.
    failovers: Arc<Mutex<Failovers>>,
}

/// The failovers' traces that decide when Redis runs another: by node port, when a
/// node last ran an election (or may have: a failed ask counts), and when a primary
/// was last replaced (the other primaries voted about it). A node's own election is
/// forgotten when it restarts; the votes are kept (other voters remember them).
#[derive(Debug, Default)]
struct Failovers {
    elected: HashMap<u16, Instant>,
    replaced: HashMap<u16, Instant>,
}

impl Failovers {
    /// When Redis would run an election of `replica` to replace `primary`: `now`, or
    /// later.
    fn ready_at(&self, replica: u16, primary: u16, now: Instant) -> Instant {
        let elected = self.elected.get(&replica).map(|&at| at + ELECTION_RETRY);
        let replaced = self.replaced.get(&primary).map(|&at| at + VOTE_AGAIN);
        [elected, replaced]
            .into_iter()
            .flatten()
            .map(|at| at + MARGIN)
            .fold(now, Instant::max)
    }
}

impl Topology {
    pub fn new(cluster: Cluster) -> Self {
        let logs = cluster
            .ports()
            .into_iter()
            .filter_map(|port| Some((port, cluster.log(port)?)))
            .collect();
        Topology {
            ports: cluster.ports(),
            url: cluster.url(),
            logs,
            failovers: Arc::default(),
            cluster: Arc::new(Mutex::new(cluster)),
        }
    }

    /// Every node's port (a restarted node keeps its port).
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The `redis-cluster://` URL naming every node.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The cluster's state at the end of a run: `ok` once it has settled (see
    /// [`settle`](Self::settle)), else each node's `cluster_state`.
    pub async fn final_state(&self) -> String {
        if self.settle().await.is_ok() {
            return "ok (every node cluster_state:ok, all agreeing)".into();
        }
        let mut states = Vec::new();
        for &port in &self.ports {
            let state = bulk(port, &["CLUSTER", "INFO"]).await.and_then(|info| {
                info.lines()
                    .find_map(|line| line.strip_prefix("cluster_state:"))
                    .map(|state| state.trim().to_owned())
            });
            states.push(format!(
                "{port}: {}",
                state.as_deref().unwrap_or("no answer")
            ));
        }
        format!(
            "NOT settled within {SETTLE_LIMIT:?} ({})",
            states.join(", ")
        )
    }

    /// Injects the topology fault `kind`, passing each finished change to `record`
    /// (`empty` makes two: the emptying and the rebalance after it).
    pub async fn inject(&self, kind: FaultKind, rng: &mut Rng, record: impl Fn(Fault)) {
        // A primary left empty by a rebalance that failed gets its share back first.
        let view = self.view().await;
        if view.is_ok_and(|nodes| nodes.iter().any(|node| node.primary && node.slots == 0)) {
            record(self.rebalance().await);
        }
        match kind {
            FaultKind::Reshard => record(self.reshard(rng).await),
            FaultKind::Empty => {
                let emptied = self.empty(rng).await;
                let ok = matches!(emptied, Fault::Empty { ok: true, .. });
                record(emptied);
                if ok {
                    // Let the workers run on one primary fewer for a while.
                    tokio::time::sleep(Duration::from_millis(500 + rng.below(2_500))).await;
                }
                record(self.rebalance().await);
            }
            FaultKind::Failover => record(self.failover(rng).await),
            FaultKind::NodeRestart => record(self.restart(rng).await),
            FaultKind::RollingRestart => record(self.rolling_restart().await),
            _ => {}
        }
    }

    /// Moves 500 to 3,000 slots (fewer if it has fewer, never all) from one random
    /// primary to another.
    async fn reshard(&self, rng: &mut Rng) -> Fault {
        let t = now_us();
        let result = async {
            let primaries = self.primaries().await?;
            let sources: Vec<&Node> = primaries.iter().filter(|node| node.slots >= 2).collect();
            let from = pick(&sources, rng).ok_or("no primary with slots to move")?;
            let targets: Vec<&Node> = primaries.iter().filter(|n| n.id != from.id).collect();
            let to = pick(&targets, rng).ok_or("no other primary")?;
            let slots = (500 + rng.below(2_501) as u32).min(from.slots - 1);
            self.move_slots(from, to, slots).await?;
            Ok::<_, BoxError>(slots)
        }
        .await;
        let ok = self.finish("reshard", result.as_ref().map(drop)).await;
        Fault::Reshard {
            t,
            until: now_us(),
            slots: result.unwrap_or(0),
            ok,
        }
    }

    /// Moves every slot of one random primary to another random one. (The lock
    /// cluster runs with `cluster-allow-replica-migration no`, so the emptied node
    /// stays a primary, of no slots, for the rebalance to give slots back to.)
    async fn empty(&self, rng: &mut Rng) -> Fault {
        let t = now_us();
        let result = async {
            let primaries = self.primaries().await?;
            let sources: Vec<&Node> = primaries.iter().filter(|node| node.slots > 0).collect();
            let from = pick(&sources, rng).ok_or("no primary with slots")?;
            let targets: Vec<&Node> = primaries.iter().filter(|n| n.id != from.id).collect();
            let to = pick(&targets, rng).ok_or("no other primary")?;
            self.move_slots(from, to, from.slots).await?;
            Ok::<_, BoxError>(from.slots)
        }
        .await;
        let ok = self.finish("empty", result.as_ref().map(drop)).await;
        Fault::Empty {
            t,
            until: now_us(),
            slots: result.unwrap_or(0),
            ok,
        }
    }

    /// Spreads the slots evenly over every primary, empty ones included.
    async fn rebalance(&self) -> Fault {
        let t = now_us();
        let result = async {
            let entry = format!("127.0.0.1:{}", self.primaries().await?[0].port);
            redis_cli(&["rebalance", &entry, "--cluster-use-empty-masters"]).await
        }
        .await;
        let ok = self.finish("rebalance", result.as_ref().copied()).await;
        Fault::Rebalance {
            t,
            until: now_us(),
            ok,
        }
    }

    /// A coordinated `CLUSTER FAILOVER` on the replica of a random primary, asked up to
    /// four times; done when the replica is the primary, the old primary its replica,
    /// and every node reports ok.
    async fn failover(&self, rng: &mut Rng) -> Fault {
        let t = now_us();
        let result = self.fail_over_some_primary(rng).await;
        let ok = self.finish("failover", result.as_ref().map(drop)).await;
        Fault::Failover {
            t,
            until: now_us(),
            ok,
        }
    }

    /// Restarts one node, in one of the three ways that lose no acknowledged write: a
    /// random replica (without saving: it copies its primary again); a random primary
    /// with its data (`SHUTDOWN SAVE`, back well within the node timeout, so its
    /// replica does not take over); or a random primary after a coordinated failover
    /// made it a replica (the order docs/deployments.md gives operators).
    async fn restart(&self, rng: &mut Rng) -> Fault {
        let t = now_us();
        let how = match rng.below(3) {
            0 => Restarted::Replica,
            1 => Restarted::PrimaryWithItsData,
            _ => Restarted::PrimaryAfterFailover,
        };
        let result = async {
            let nodes = self.view().await?;
            let port = match how {
                Restarted::Replica => {
                    let replicas: Vec<&Node> = nodes.iter().filter(|node| !node.primary).collect();
                    pick(&replicas, rng).ok_or("no replica")?.port
                }
                Restarted::PrimaryWithItsData => {
                    let primaries: Vec<&Node> = nodes
                        .iter()
                        .filter(|node| node.primary && node.slots > 0)
                        .collect();
                    pick(&primaries, rng).ok_or("no primary with slots")?.port
                }
                Restarted::PrimaryAfterFailover => {
                    let old_primary = self.fail_over_some_primary(rng).await?;
                    self.settle().await?;
                    old_primary
                }
            };
            self.restart_node(port, how == Restarted::PrimaryWithItsData)
                .await
        }
        .await;
        let ok = self.finish("node restart", result.as_ref().copied()).await;
        Fault::NodeRestart {
            t,
            until: now_us(),
            how,
            ok,
        }
    }

    /// Restarts every node in turn, the way docs/deployments.md gives operators, and
    /// waits for the cluster to settle after each: every replica (without saving: it
    /// copies its primary again), then every primary after a coordinated failover made
    /// it a replica.
    async fn rolling_restart(&self) -> Fault {
        let t = now_us();
        let result = async {
            let nodes = self.view().await?;
            let replicas = nodes
                .iter()
                .filter(|node| !node.primary)
                .map(|node| node.port);
            let primaries: Vec<u16> = nodes
                .iter()
                .filter(|node| node.primary)
                .map(|node| node.port)
                .collect();
            for port in replicas {
                self.restart_node(port, false).await?;
                self.settle().await?;
            }
            for port in primaries {
                // A primary an `empty` left without slots has nothing to hand over,
                // and Redis never fails such a primary over (a replica of a primary
                // of no slots does not start a failover, manual or not): it restarts
                // as a replica does.
                let serves_slots = self
                    .view()
                    .await?
                    .iter()
                    .any(|node| node.port == port && node.primary && node.slots > 0);
                if serves_slots {
                    self.fail_over(port).await?;
                    self.settle().await?;
                }
                self.restart_node(port, false).await?;
                self.settle().await?;
            }
            Ok::<_, BoxError>(())
        }
        .await;
        let ok = self
            .finish("rolling restart", result.as_ref().copied())
            .await;
        Fault::RollingRestart {
            t,
            until: now_us(),
            ok,
        }
    }

    /// Stops the node on `port` and starts it again, with its data if `keep_data`.
    async fn restart_node(&self, port: u16, keep_data: bool) -> Result<(), BoxError> {
        // A restarted node starts with no election behind it.
        self.failovers().elected.remove(&port);
        let stopped = unix_ms();
        let cluster = Arc::clone(&self.cluster);
        blocking(move || {
            let mut cluster = cluster
                .lock()
                .map_err(|_| "the cluster's lock is poisoned")?;
            cluster.restart(port, keep_data).map_err(|e| e.to_string())
        })
        .await?;
        self.heard_since(port, stopped).await
    }

    /// Waits until every other node has heard a pong from the node on `port` since
    /// `since` (Unix ms), over a link of its own: until then the others may still
    /// hold their links to the process that stopped, or none, and the settling
    /// checks could pass on their old view.
    async fn heard_since(&self, port: u16, since: u64) -> Result<(), BoxError> {
        let started = Instant::now();
        loop {
            let mut heard = true;
            for &other in self.ports.iter().filter(|&&other| other != port) {
                let listed = bulk(other, &["CLUSTER", "NODES"])
                    .await
                    .map(|nodes| parse(&nodes))
                    .unwrap_or_default();
                heard &= listed
                    .iter()
                    .any(|node| node.port == port && node.reachable && node.pong_received >= since);
            }
            if heard {
                return Ok(());
            }
            if started.elapsed() > SETTLE_LIMIT {
                return Err(format!(
                    "the other nodes did not hear from the node on port {port} within \
                     {SETTLE_LIMIT:?} of its restart"
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn failovers(&self) -> std::sync::MutexGuard<'_, Failovers> {
        self.failovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fails a random primary over to its replica (see [`fail_over`](Self::fail_over)),
    /// and returns the old primary's port. The primary is drawn among those Redis
    /// would fail over now; if there is none, it is the one Redis would fail over
    /// first, and the failover waits.
    async fn fail_over_some_primary(&self, rng: &mut Rng) -> Result<u16, BoxError> {
        let nodes = self.view().await?;
        let now = Instant::now();
        let primaries: Vec<(&Node, Instant)> = nodes
            .iter()
            .filter(|node| node.primary)
            .filter_map(|primary| {
                let replica = replica_of(&nodes, primary)?;
                Some((
                    primary,
                    self.failovers().ready_at(replica.port, primary.port, now),
                ))
            })
            .collect();
        let soonest = primaries
            .iter()
            .map(|&(_, ready)| ready)
            .min()
            .ok_or("no primary with a replica")?;
        let ready: Vec<&Node> = primaries
            .iter()
            .filter(|&&(_, ready)| ready == soonest)
            .map(|&(primary, _)| primary)
            .collect();
        let primary = pick(&ready, rng).ok_or("no primary")?.port;
        self.fail_over(primary).await?;
        Ok(primary)
    }

    /// Fails the primary on `primary` over to its replica by a coordinated `CLUSTER
    /// FAILOVER`; done once the replica is the primary and the old primary its
    /// replica. Asked when Redis would run it (see [`ELECTION_RETRY`] and
    /// [`VOTE_AGAIN`]), up to [`FAILOVER_ASKS`] times.
    async fn fail_over(&self, primary: u16) -> Result<(), BoxError> {
        let nodes = self.view().await?;
        let primary = nodes
            .iter()
            .find(|node| node.port == primary)
            .ok_or_else(|| format!("no node on port {primary}"))?;
        let replica = replica_of(&nodes, primary)
            .ok_or_else(|| format!("no replica of the primary on port {}", primary.port))?;
        let (old, new) = (primary.port, replica.port);
        let mut waited = Duration::ZERO;
        let mut failed = String::new();
        for ask in 1..=FAILOVER_ASKS {
            let ready = self.failovers().ready_at(new, old, Instant::now());
            let wait = ready.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                eprintln!(
                    "chaos: the failover to {new} waits {:.1} s for Redis to run it",
                    wait.as_secs_f64()
                );
            }
            waited += wait;
            tokio::time::sleep_until(ready).await;
            let logged = self.log_sizes();
            let reply = blocking(move || {
                support::command(new, &["CLUSTER", "FAILOVER"]).map_err(|e| e.to_string())
            })
            .await?;
            if reply != "OK" {
                return Err(format!("CLUSTER FAILOVER: {reply}").into());
            }
            let asked = Instant::now();
            let mut done = false;
            while asked.elapsed() < FAILOVER_ATTEMPT {
                if role(new).await.as_deref() == Some("master")
                    && role(old).await.as_deref() == Some("slave")
                {
                    done = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // Won or not, the replica ran (or may have run) an election, and the
            // primaries may have voted about the old primary.
            {
                let mut failovers = self.failovers();
                failovers.elected.insert(new, Instant::now());
                failovers.replaced.insert(old, Instant::now());
            }
            if done {
                return Ok(());
            }
            failed = format!(
                "replica {new} of {old}; {}; the nodes' logs since the ask: {}",
                replication_state(new, old).await,
                self.failover_lines(&logged),
            );
            if ask < FAILOVER_ASKS {
                eprintln!(
                    "chaos: the failover to {new} did not complete in {FAILOVER_ATTEMPT:?} \
                     (ask {ask} of {FAILOVER_ASKS}): {failed}"
                );
            }
        }
        Err(format!(
            "the failover did not complete in {FAILOVER_ASKS} asks of {FAILOVER_ATTEMPT:?} \
             ({waited:.1?} waited before them for Redis to run it); the last: {failed}"
        )
        .into())
    }

    /// How long each node's log is now.
    fn log_sizes(&self) -> Vec<(u16, u64)> {
        self.logs
            .iter()
            .map(|(port, log)| (*port, std::fs::metadata(log).map_or(0, |m| m.len())))
            .collect()
    }

    /// The lines about failovers and elections that the nodes logged after `since`
    /// (from [`log_sizes`](Self::log_sizes)), each after its node's port.
    fn failover_lines(&self, since: &[(u16, u64)]) -> String {
        let mut lines = Vec::new();
        for (port, log) in &self.logs {
            let from = since
                .iter()
                .find(|(p, _)| p == port)
                .map_or(0, |(_, len)| *len as usize);
            let text = std::fs::read(log).unwrap_or_default();
            let text = String::from_utf8_lossy(text.get(from..).unwrap_or_default());
            for line in text.lines() {
                let line = line.trim();
                if line.contains("ailover") || line.contains("election") {
                    // `pid:role dd Mon yyyy hh:mm:ss.mmm # message`: keep the time on,
                    // after the port and the role (M or S).
                    let fields: Vec<&str> = line.splitn(5, ' ').collect();
                    let role = fields[0].rsplit(':').next().unwrap_or("?");
                    let rest = fields.get(4).copied().unwrap_or(line);
                    lines.push((rest.to_owned(), format!("{port}{role} {rest}")));
                }
            }
        }
        lines.sort();
        let lines: Vec<String> = lines.into_iter().map(|(_, line)| line).collect();
        lines.join(" | ")
    }

    /// `redis-cli --cluster reshard` of `slots` slots from `from` to `to`.
    async fn move_slots(&self, from: &Node, to: &Node, slots: u32) -> Result<(), BoxError> {
        redis_cli(&[
            "reshard",
            &format!("127.0.0.1:{}", from.port),
            "--cluster-from",
            &from.id,
            "--cluster-to",
            &to.id,
            "--cluster-slots",
            &slots.to_string(),
            "--cluster-yes",
        ])
        .await
    }

    /// After a change: waits for the cluster to settle, and reports whether the change
    /// and the wait succeeded. A failed change is logged, and `redis-cli --cluster fix`
    /// closes any slot it left half moved.
    async fn finish(&self, what: &str, result: Result<(), &BoxError>) -> bool {
        let error = match result {
            Ok(()) => match self.settle().await {
                Ok(()) => return true,
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        eprintln!("chaos: {what} failed: {}", error.trim());
        let entry = format!("127.0.0.1:{}", self.ports[0]);
        if let Err(e) = redis_cli(&["fix", &entry, "--cluster-yes"]).await {
            eprintln!(
                "chaos: redis-cli --cluster fix failed too: {}",
                e.to_string().trim()
            );
        }
        let _ = self.settle().await;
        false
    }

    /// Waits until every node reports `cluster_state:ok` and lists the same primaries
    /// with the same slots, and every replica's link to its primary is up.
    async fn settle(&self) -> Result<(), BoxError> {
        let started = tokio::time::Instant::now();
        loop {
            if self.settled().await {
                return Ok(());
            }
            if started.elapsed() > SETTLE_LIMIT {
                return Err(format!("the cluster did not settle within {SETTLE_LIMIT:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn settled(&self) -> bool {
        let mut agreed: Option<Vec<String>> = None;
        for &port in &self.ports {
            // A replica counts once it is in sync (a restarted one copies its primary
            // first): a failover of its shard right after would be refused.
            let ok = bulk(port, &["CLUSTER", "INFO"])
                .await
                .is_some_and(|info| info.contains("cluster_state:ok"))
                && (role(port).await.as_deref() == Some("master")
                    || replication(port, "master_link_status").await.as_deref() == Some("up"));
            let Some(nodes) = bulk(port, &["CLUSTER", "NODES"]).await else {
                return false;
            };
            let listed = parse(&nodes);
            // Every node linked to every other over the cluster bus: a node that
            // votes in an election sends its vote over its own link to the candidate,
            // and without one (a node just restarted, not yet reconnected to) the
            // vote is lost though logged as granted.
            if listed.len() != self.ports.len() || listed.iter().any(|node| !node.reachable) {
                return false;
            }
            let mut layout: Vec<String> = listed
                .into_iter()
                .filter(|node| node.primary)
                .map(|node| format!("{} {}", node.id, node.ranges))
                .collect();
            layout.sort();
            if !ok || agreed.as_ref().is_some_and(|first| *first != layout) {
                return false;
            }
            agreed = Some(layout);
        }
        true
    }

    /// The nodes as the first node that answers lists them.
    async fn view(&self) -> Result<Vec<Node>, BoxError> {
        for &port in &self.ports {
            if let Some(nodes) = bulk(port, &["CLUSTER", "NODES"]).await {
                return Ok(parse(&nodes));
            }
        }
        Err("no node of the cluster answers CLUSTER NODES".into())
    }

    async fn primaries(&self) -> Result<Vec<Node>, BoxError> {
        let primaries: Vec<Node> = self
            .view()
            .await?
            .into_iter()
            .filter(|node| node.primary)
            .collect();
        if primaries.is_empty() {
            return Err("no primary".into());
        }
        Ok(primaries)
    }
}

/// Parses `CLUSTER NODES`: `id host:port@bus flags primary ping pong epoch link slot...`.
fn parse(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let address = fields.get(1)?.split(['@', ',']).next()?;
            let port = address.rsplit(':').next()?.parse().ok()?;
            let flags = fields.get(2)?;
            let slot_fields: Vec<&str> = fields
                .iter()
                .skip(8)
                .copied()
                .filter(|range| !range.starts_with('['))
                .collect();
            let slots = slot_fields
                .iter()
                .map(|range| match range.split_once('-') {
                    Some((from, to)) => match (from.parse::<u32>(), to.parse::<u32>()) {
                        (Ok(from), Ok(to)) => to.saturating_sub(from) + 1,
                        _ => 0,
                    },
                    None => u32::from(range.parse::<u32>().is_ok()),
                })
                .sum();
            let primary = flags.split(',').any(|flag| flag == "master");
            let troubled = flags
                .split(',')
                .any(|flag| matches!(flag, "fail?" | "fail" | "handshake" | "noaddr"));
            Some(Node {
                id: fields[0].to_owned(),
                port,
                primary,
                primary_id: fields
                    .get(3)
                    .filter(|id| !primary && **id != "-")
                    .map(|id| (*id).to_owned()),
                slots,
                ranges: slot_fields.join(" "),
                pong_received: fields.get(5).and_then(|ms| ms.parse().ok()).unwrap_or(0),
                reachable: !troubled && fields.get(7) == Some(&"connected"),
            })
        })
        .collect()
}

/// The time as Redis's `CLUSTER NODES` gives it (Unix ms).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// The replica of `primary` among `nodes`.
fn replica_of<'a>(nodes: &'a [Node], primary: &Node) -> Option<&'a Node> {
    nodes
        .iter()
        .find(|node| node.primary_id.as_deref() == Some(primary.id.as_str()))
}

fn pick<'a>(nodes: &[&'a Node], rng: &mut Rng) -> Option<&'a Node> {
    if nodes.is_empty() {
        None
    } else {
        Some(nodes[rng.below(nodes.len() as u64) as usize])
    }
}

/// Runs `redis-cli --cluster <args>`, killed after [`REDIS_CLI_LIMIT`].
async fn redis_cli(args: &[&str]) -> Result<(), BoxError> {
    let mut child = Command::new(support::cli_program())
        .arg("--cluster")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    // `--cluster-yes` does not answer every question: `fix` still asks on stdin
    // whether to cover slots that no node serves (after a failover that did not
    // settle), and without an answer the cluster stays down. Answer yes to each.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(YES.repeat(16).as_bytes()).await;
    }
    let run = child.wait_with_output();
    let out = tokio::time::timeout(REDIS_CLI_LIMIT, run)
        .await
        .map_err(|_| {
            format!(
                "redis-cli --cluster {} took over {REDIS_CLI_LIMIT:?}",
                args[0]
            )
        })??;
    if out.status.success() {
        return Ok(());
    }
    // redis-cli reports most failures ("[ERR] ...") on stdout; keep its last lines.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tail: Vec<&str> = stdout.lines().rev().take(4).collect();
    Err(format!(
        "redis-cli --cluster {}: {} {}",
        args.join(" "),
        tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
        String::from_utf8_lossy(&out.stderr).trim()
    )
    .into())
}

/// Runs a blocking call (a command over a fresh loopback connection) off the runtime.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, BoxError> {
    Ok(tokio::task::spawn_blocking(call).await??)
}

async fn bulk(port: u16, args: &'static [&'static str]) -> Option<String> {
    tokio::task::spawn_blocking(move || support::bulk(port, args))
        .await
        .ok()
        .flatten()
}

/// The node's `INFO replication` field `name` (`role`: `master` or `slave`;
/// `master_link_status`: `up` or `down`).
async fn replication(port: u16, name: &str) -> Option<String> {
    let info = bulk(port, &["INFO", "replication"]).await?;
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
}

async fn role(port: u16) -> Option<String> {
    replication(port, "role").await
}

/// The replica's link and offset and its primary's offset, for an error message.
async fn replication_state(replica: u16, primary: u16) -> String {
    let field = |port, name| async move {
        replication(port, name)
            .await
            .unwrap_or_else(|| "?".to_owned())
    };
    format!(
        "replica: role {}, link {}, offset {}; primary: role {}, offset {}",
        field(replica, "role").await,
        field(replica, "master_link_status").await,
        field(replica, "slave_repl_offset").await,
        field(primary, "role").await,
        field(primary, "master_repl_offset").await,
    )
}
