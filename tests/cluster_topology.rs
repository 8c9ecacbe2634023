//! Routine Redis Cluster topology changes under load (three primaries with a replica
//! each): slots moved, a primary emptied, a primary added and the slots rebalanced
//! onto it, a replica promoted by each kind of `CLUSTER FAILOVER`.
//!
//! Throughout each change one client holds locks on every primary under the
//! watchdog (a lease of 3 s: a renewal gap of a lease loses them), and it and two
//! other clients take and release locks on a few names in turn (so waiters are woken
//! by release messages) and on fresh names (whose keys are created wherever their
//! slots are, also in slots on the move). Every scenario asserts that no hold was
//! lost, no call failed or took longer than the connect timeout, the turns went on
//! after the change, no two owners were ever inside one lock at once, and every hold
//! is still in Redis. (A `FORCE` or `TAKEOVER` failover may undo the latest writes:
//! there, an unlock may find its hold gone, and only then may owners have overlapped.)
//!
//! Scenarios run one at a time (each starts its own cluster of six servers). Emptying
//! a primary made fred end a client's connection task for good before holdlock
//! restarted it (see `src/connection.rs`): every hold of that client was lost.
//!
//! A rolling restart (every node in turn) runs the same way twice: each primary after
//! its replica took over (3 s leases), and each primary with its data (10 s leases, as
//! Redis refuses a restarted primary's slots for 2 s after it starts); both also check
//! that no turn on a primary that was not restarting took longer than a second.
//!
//! More, on three primaries without replicas: a primary restarted with its data
//! (holds on the other primaries keep renewing), and clients built while a node
//! reports `cluster_state:fail`; and on three with replicas, clients built during a
//! failover and during a restart.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::interfaces::KeysInterface;
use holdlock::{LockClient, LockGuard};

use common::RedisCluster;

/// The holder's lease: renewed every second.
const LEASE: Duration = Duration::from_secs(3);
const HELD: usize = 60;
const CONTENDED: usize = 16;

/// One scenario at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A turn that took longer than half a second: its name, when it began, how long.
struct SlowTurn {
    name: String,
    began: Instant,
    took: Duration,
}

/// The load of every scenario: held locks and turns.
struct Load {
    holder: LockClient,
    /// The lease of every client.
    lease: Duration,
    guards: Vec<LockGuard>,
    stop: Arc<AtomicBool>,
    turns: Arc<AtomicU64>,
    errors: Arc<parking_lot::Mutex<HashMap<String, u64>>>,
    /// Whether the clients are lent (and the turns send the application's commands).
    lent: bool,
    /// The application's own commands over lent clients that succeeded, and failed.
    application_done: Arc<AtomicU64>,
    application_failed: Arc<AtomicU64>,
    overlaps: Arc<AtomicU64>,
    slow: Arc<parking_lot::Mutex<Vec<SlowTurn>>>,
    workers: Vec<tokio::task::JoinHandle<Duration>>,
}

impl Load {
    /// Starts the load: with `lent`, every client is built over a fred client of the
    /// application's own (`fred_clients`, fred's default settings), and each turn also
    /// sends the application's own command over it.
    async fn start(url: &str, lent: bool, lease: Duration) -> Load {
        let client = || async {
            let builder = match lent {
                false => LockClient::builder(url),
                true => {
                    let config = fred::types::config::Config::from_url(url).unwrap();
                    let application = fred::types::Builder::from_config(config).build().unwrap();
                    LockClient::builder("redis://unused").fred_clients(application, None)
                }
            };
            builder.lease(lease).build().await
        };
        let holder = client().await.unwrap();
        let mut guards = Vec::new();
        for i in 0..HELD {
            guards.push(holder.lock(format!("held:{i}")).await.unwrap());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let turns = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(parking_lot::Mutex::new(HashMap::new()));
        let application_done = Arc::new(AtomicU64::new(0));
        let application_failed = Arc::new(AtomicU64::new(0));
        let overlaps = Arc::new(AtomicU64::new(0));
        let slow = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let inside: Arc<Vec<AtomicU32>> =
            Arc::new((0..CONTENDED).map(|_| AtomicU32::new(0)).collect());
        let mut workers = Vec::new();
        let others = [client().await.unwrap(), client().await.unwrap()];
        // The holder takes turns too (one client per service, as applications do).
        for (client_no, client) in std::iter::once(holder.clone()).chain(others).enumerate() {
            let client_no = client_no as u64;
            for worker in 0..4u64 {
                let (client, stop, turns) = (client.clone(), stop.clone(), turns.clone());
                let (errors, overlaps, inside) = (errors.clone(), overlaps.clone(), inside.clone());
                let slow = slow.clone();
                let (application_done, application_failed) =
                    (application_done.clone(), application_failed.clone());
                workers.push(tokio::spawn(async move {
                    let mut slowest = Duration::ZERO;
                    let mut n = worker * 5 + client_no;
                    while !stop.load(Ordering::Relaxed) {
                        n += 7;
                        let which = ((n / 2) % CONTENDED as u64) as usize;
                        // Every other turn is on a name never used before: its key is
                        // created wherever its slot is, also in a slot on the move.
                        let name = match n % 2 {
                            0 => format!("turn:{which}"),
                            _ => format!("fresh:{}", uuid::Uuid::new_v4().simple()),
                        };
                        let began = Instant::now();
                        let failed = match client.lock(&name).await {
                            Ok(guard) => {
                                let turn = n % 2 == 0;
                                if turn && inside[which].fetch_add(1, Ordering::SeqCst) != 0 {
                                    overlaps.fetch_add(1, Ordering::SeqCst);
                                }
                                tokio::time::sleep(Duration::from_millis(2)).await;
                                if turn {
                                    inside[which].fetch_sub(1, Ordering::SeqCst);
                                }
                                guard.unlock().await.err().map(|e| format!("unlock: {e}"))
                            }
                            Err(error) => Some(format!("lock: {error}")),
                        };
                        if let Some(failed) = failed {
                            *errors.lock().entry(failed).or_insert(0) += 1;
                        }
                        if lent {
                            let incr = client
                                .redis()
                                .incr::<u64, _>(format!("application:{which}"));
                            let counter = match incr.await {
                                Ok(_) => &application_done,
                                Err(_) => &application_failed,
                            };
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                        let took = began.elapsed();
                        slowest = slowest.max(took);
                        if took > Duration::from_millis(500) {
                            slow.lock().push(SlowTurn { name, began, took });
                        }
                        turns.fetch_add(1, Ordering::Relaxed);
                    }
                    slowest
                }));
            }
        }
        // The load runs before the change begins.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Load {
            holder,
            lease,
            guards,
            stop,
            turns,
            errors,
            lent,
            application_done,
            application_failed,
            overlaps,
            slow,
            workers,
        }
    }

    /// Goes on for two leases after the change, then checks everything.
    /// Checks the load after a change. `refusals` are the failures allowed (errors
    /// whose text contains one of them).
    /// Returns the turns that took longer than half a second.
    async fn check(self, cluster: &RedisCluster, refusals: &[&str]) -> Vec<SlowTurn> {
        let turns_at_change = self.turns.load(Ordering::Relaxed);
        let application_at_change = self.application_done.load(Ordering::Relaxed);
        tokio::time::sleep(self.lease * 2).await;
        let turns_after = self.turns.load(Ordering::Relaxed) - turns_at_change;
        let application_after =
            self.application_done.load(Ordering::Relaxed) - application_at_change;
        self.stop.store(true, Ordering::Relaxed);
        let mut slowest = Duration::ZERO;
        for worker in self.workers {
            slowest = slowest.max(worker.await.unwrap());
        }
        let lost: Vec<&str> = self
            .guards
            .iter()
            .filter(|guard| guard.is_lost())
            .map(|guard| guard.name())
            .collect();
        assert!(lost.is_empty(), "holds lost in the change: {lost:?}");
        let errors = self.errors.lock().clone();
        let failed: Vec<_> = errors
            .iter()
            .filter(|(error, _)| !refusals.iter().any(|allowed| error.contains(allowed)))
            .collect();
        assert!(failed.is_empty(), "calls failed: {failed:?}");
        // Only a hold that the change undid may have let a second owner in.
        let undone = errors.len() > failed.len();
        let overlaps = self.overlaps.load(Ordering::SeqCst);
        assert!(overlaps == 0 || undone, "two owners inside one lock");
        assert!(
            turns_after > 100,
            "the turns stalled after the change: {turns_after}"
        );
        // The application's own commands over a lent client are fred's: with fred's
        // default of 3 write attempts some may run out of them while a node changes
        // role (more than 3 of some thousands in 2 runs of 6). holdlock must leave the
        // lent client working: its commands go on after the change.
        if self.lent {
            let application_failed = self.application_failed.load(Ordering::Relaxed);
            if application_failed > 0 {
                eprintln!("{application_failed} of the application's own commands failed in fred");
            }
            assert!(
                application_after > 100,
                "the application's commands stalled after the change: {application_after}"
            );
        }
        eprintln!("the slowest turn took {slowest:?}");
        // A longer lease is for a change that keeps a primary away longer: its calls
        // may wait that out, and a waiter for their releases too.
        let longest = match self.lease > LEASE {
            true => self.lease * 2,
            false => holdlock::DEFAULT_CONNECT_TIMEOUT,
        };
        assert!(slowest < longest, "a turn took {slowest:?}");
        // Every hold is still in Redis, on whichever primary serves it now.
        let redis = common::raw(&cluster.url()).await;
        for guard in &self.guards {
            let owner = common::hold_count(&redis, guard.name(), guard.owner()).await;
            assert_eq!(owner, Some(1), "{} is gone from redis", guard.name());
        }
        for guard in self.guards {
            guard.unlock().await.unwrap();
        }
        self.holder.shutdown().await;
        std::mem::take(&mut *self.slow.lock())
    }
}

/// Runs `change` on a fresh cluster under load, then checks the load.
async fn under_load(change: impl FnOnce(&mut RedisCluster) + Send + 'static) {
    changed_under_load(change, false, false, LEASE).await;
}

/// [`under_load`], with every client built over a fred client the application lends
/// (`fred_clients`), which also carries the application's own commands.
async fn under_load_with_lent_clients(change: impl FnOnce(&mut RedisCluster) + Send + 'static) {
    changed_under_load(change, false, true, LEASE).await;
}

/// [`under_load`], for a failover that does not wait for the replica to catch up
/// (`FORCE`, `TAKEOVER`): it loses the primary's latest writes, so a hold granted or
/// released just before it may be undone (an unlock then finds the hold gone, and in
/// that moment another owner may be let in: docs/deployments.md says how
/// `min_replicas` and fencing cover it). Holds older than the failover survive.
async fn under_load_losing_latest_writes(change: impl FnOnce(&mut RedisCluster) + Send + 'static) {
    changed_under_load(change, true, false, LEASE).await;
}

async fn changed_under_load(
    change: impl FnOnce(&mut RedisCluster) + Send + 'static,
    loses_latest_writes: bool,
    lent: bool,
    lease: Duration,
) -> Vec<SlowTurn> {
    let _one = ONE_AT_A_TIME.lock().await;
    common::trace();
    let mut cluster = RedisCluster::start_with_replicas(3, 1);
    let load = Load::start(&cluster.url(), lent, lease).await;
    let cluster = tokio::task::spawn_blocking(move || {
        change(&mut cluster);
        cluster
    })
    .await
    .unwrap();
    let refusals: &[&str] = match loses_latest_writes {
        true => &["is not held"],
        false => &[],
    };
    load.check(&cluster, refusals).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partial_reshard() {
    under_load(|cluster| {
        let primaries = cluster.primaries();
        cluster.reshard(primaries[0], primaries[1], 2000);
    })
    .await;
}

/// Moves every slot of the first primary to the second.
fn empty_a_primary(cluster: &mut RedisCluster) {
    let primaries = cluster.primaries();
    let (emptied, to) = (primaries[0], primaries[1]);
    cluster.reshard(emptied, to, cluster.slot_count(emptied));
    assert_eq!(cluster.slot_count(emptied), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn emptying_a_primary() {
    under_load(empty_a_primary).await;
}

/// The same, with the clients over fred clients the application lends: holdlock's
/// scripts go over a client of its own beside each lent one (which follows
/// redirections for the application's commands).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn emptying_a_primary_under_lent_clients() {
    under_load_with_lent_clients(empty_a_primary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn adding_a_primary_and_rebalancing_onto_it() {
    under_load(|cluster| {
        let added = cluster.add_primary();
        cluster.rebalance();
        assert!(cluster.slot_count(&cluster.nodes[added]) > 0);
    })
    .await;
}

/// `CLUSTER FAILOVER` on the replica of the primary serving the first held lock.
fn promote(cluster: &mut RedisCluster, mode: &str) {
    let primary = cluster.primary_of(&common::key("held:0"));
    let replica = cluster.replica_of(primary);
    cluster.fail_over(primary, replica, mode);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_promoted_by_a_coordinated_failover() {
    under_load(|cluster| promote(cluster, "")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_promoted_by_a_forced_failover() {
    under_load_losing_latest_writes(|cluster| promote(cluster, "FORCE")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_promoted_by_a_takeover() {
    under_load_losing_latest_writes(|cluster| promote(cluster, "TAKEOVER")).await;
}

/// When a primary was being restarted (or failed over, then restarted): the slots it
/// served, and the moments the change began and the cluster was settled again.
type Windows = Arc<parking_lot::Mutex<Vec<(Vec<u16>, Instant, Instant)>>>;

/// Restarts every node in turn, as a rolling upgrade does, waiting after each until
/// the cluster is settled again: first the replicas (each comes back empty and syncs
/// from its primary again), then the primaries, each either after its replica took it
/// over (`CLUSTER FAILOVER`; it comes back as a replica) or with its data: saved as it
/// shuts down, as `SHUTDOWN SAVE` or a save point does, so that no write is lost (a
/// `SAVE` before the restart lost the releases made after it, and their holds came
/// back with the data to block their names for a lease).
/// Records each primary's window in `windows`.
fn restart_every_node(cluster: &mut RedisCluster, fail_over_first: bool, windows: &Windows) {
    let ports: Vec<u16> = cluster.nodes.iter().map(|node| node.port).collect();
    let (primaries, replicas): (Vec<u16>, Vec<u16>) = ports
        .iter()
        .partition(|&&port| cluster.is_primary(cluster.node(port)));
    let restart = |cluster: &mut RedisCluster, port: u16| {
        cluster.node_mut(port).restart();
        common::wait_until("the cluster to settle", Duration::from_secs(30), || {
            common::server::cluster_settled(&ports)
        });
    };
    for port in replicas {
        restart(cluster, port);
    }
    for port in primaries {
        let began = Instant::now();
        let primary = cluster.node(port);
        let slots: Vec<u16> = (0..=16383)
            .filter(|&slot| cluster.serves(primary, slot))
            .collect();
        if fail_over_first {
            cluster.fail_over(primary, cluster.replica_of(primary), "");
        } else {
            let save_on_shutdown = primary.command(&["CONFIG", "SET", "save", "3600 1"]);
            assert_eq!(save_on_shutdown.unwrap(), "+OK");
        }
        restart(cluster, port);
        windows.lock().push((slots, began, Instant::now()));
    }
}

/// Runs a rolling restart under load with `lease`, and checks that no turn on a
/// primary that was not restarting took longer than a second.
async fn rolling_restart(fail_over_first: bool, lease: Duration) {
    let windows = Windows::default();
    let change = {
        let windows = Arc::clone(&windows);
        move |cluster: &mut RedisCluster| restart_every_node(cluster, fail_over_first, &windows)
    };
    let slow = changed_under_load(change, false, false, lease).await;
    let windows = windows.lock();
    let elsewhere: Vec<String> = slow
        .iter()
        .filter(|turn| turn.took > Duration::from_secs(1))
        .filter(|turn| {
            let slot = fred::util::redis_keyslot(common::key(&turn.name).as_bytes());
            !windows.iter().any(|(slots, began, ended)| {
                slots.contains(&slot) && *began < turn.began + turn.took && turn.began < *ended
            })
        })
        .map(|turn| format!("{} took {:?}", turn.name, turn.took))
        .collect();
    let took: Vec<Duration> = slow.iter().map(|turn| turn.took).collect();
    eprintln!("turns over 0.5 s: {took:?}");
    assert!(
        elsewhere.is_empty(),
        "turns on primaries that were not restarting: {elsewhere:?}"
    );
}

/// A rolling restart the way docs/deployments.md recommends: replicas, then each
/// primary once its replica has taken over. The 3 s leases ride it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_with_a_failover_before_each_primary() {
    rolling_restart(true, LEASE).await;
}

/// A rolling restart that restarts each primary with its data, its replica left a
/// replica. Redis refuses a restarted primary's slots (`CLUSTERDOWN`) for 2 s after it
/// has loaded its data (`CLUSTER_WRITABLE_DELAY`), on top of its shutdown and start:
/// no renewal can land meanwhile, so a 3 s lease cannot ride it out (every hold was
/// lost) and the load runs with 10 s leases here. Calls on the restarting primary wait
/// it out; those on the others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_of_primaries_with_their_data() {
    rolling_restart(false, Duration::from_secs(10)).await;
}

/// A client built while a node reports `cluster_state:fail` (here: a slot its primary
/// gave up, as a node may report for a moment during a failover, a restart or a
/// reshard). holdlock's own connections skip fred's check of each node's state: the
/// client connects at once and serves the healthy nodes' slots. A lent fred client
/// that keeps the check connects once the cluster is whole again, within the connect
/// timeout, instead of failing at once; one whose timeout runs out first says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_built_while_a_node_is_not_ready_connects() {
    use fred::interfaces::ClientLike;
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = RedisCluster::start(3);
    let url = cluster.url();
    let node = &cluster.nodes[0];
    let slot = cluster.first_slot(node).to_string();
    assert_eq!(
        node.command(&["CLUSTER", "DELSLOTS", &slot]).unwrap(),
        "+OK"
    );
    common::wait_until(
        "the node to report a failed state",
        Duration::from_secs(10),
        || {
            node.query(&["CLUSTER", "INFO"])
                .is_ok_and(|info| info.contains("cluster_state:fail"))
        },
    );
    let healthy = (0..)
        .map(|i| format!("healthy:{i}"))
        .find(|name| cluster.primary_of(&common::key(name)).port != node.port)
        .unwrap();

    // holdlock's own connections.
    let started = Instant::now();
    let client = LockClient::builder(&url)
        .connect_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect("connected while a node was not ready");
    client.lock(&healthy).await.unwrap().unlock().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // A lent fred client with fred's defaults, which check every node's state.
    let lent = || {
        let config = fred::types::config::Config::from_url(&url).unwrap();
        fred::types::Builder::from_config(config).build().unwrap()
    };
    let refused = LockClient::builder("redis://unused")
        .fred_clients(lent(), None)
        // Long enough for fred's refusal to come first on a loaded machine.
        .connect_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect_err("no lent client while a node's state is fail");
    assert!(refused.to_string().contains("cluster state"), "{refused}");
    let waiting = lent();
    let building = tokio::spawn({
        let waiting = waiting.clone();
        async move {
            LockClient::builder("redis://unused")
                .fred_clients(waiting, None)
                .connect_timeout(Duration::from_secs(20))
                .build()
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        !building.is_finished(),
        "connected while a node was not ready"
    );
    assert_eq!(
        node.command(&["CLUSTER", "ADDSLOTS", &slot]).unwrap(),
        "+OK"
    );
    let lent_client = building
        .await
        .unwrap()
        .expect("connected once the cluster was whole");
    for client in [&client, &lent_client] {
        let guard = client.lock("ready").await.unwrap();
        guard.unlock().await.unwrap();
    }
    lent_client.shutdown().await;
    client.shutdown().await;
    let _ = waiting.quit().await;
}

/// Starts building a client of `url` every `every` until `change` (run on a blocking
/// thread) has ended: each must connect within its connect timeout. Returns the
/// cluster and the clients.
async fn build_clients_during(
    url: &str,
    cluster: RedisCluster,
    every: Duration,
    change: impl FnOnce(&mut RedisCluster) + Send + 'static,
) -> (RedisCluster, Vec<LockClient>) {
    let changing = tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        change(&mut cluster);
        cluster
    });
    let mut builds = Vec::new();
    while !changing.is_finished() {
        let url = url.to_owned();
        builds.push(tokio::spawn(async move {
            let started = Instant::now();
            LockClient::builder(url)
                .connect_timeout(Duration::from_secs(10))
                .build()
                .await
                .unwrap_or_else(|error| panic!("built after {:?}: {error}", started.elapsed()))
        }));
        tokio::time::sleep(every).await;
    }
    // Some of them started while the change was under way.
    assert!(builds.len() >= 3, "{} clients", builds.len());
    let mut clients = Vec::new();
    for build in builds {
        clients.push(build.await.unwrap());
    }
    (changing.await.unwrap(), clients)
}

/// Every client takes and releases a lock on every primary of `cluster`.
async fn every_client_locks_on_every_primary(cluster: &RedisCluster, clients: &[LockClient]) {
    for primary in cluster.primaries() {
        let name = cluster.name_on(primary, "built-during");
        for client in clients {
            let guard = tokio::time::timeout(LEASE, client.lock(&name))
                .await
                .unwrap_or_else(|_| panic!("{name} on {} timed out", primary.port))
                .unwrap();
            guard.unlock().await.unwrap();
        }
    }
}

/// Clients built while a replica takes over its primary, and while a primary restarts
/// with its data (down for 1.5 s), each with the affected node first in its URL: every
/// one connects within its connect timeout, and once the change is done, serves every
/// primary. (fred connects to every primary when a cluster client starts, and failed
/// at once on the one restarting: "Connection refused".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_built_during_a_failover_and_a_restart_connect_and_serve_every_primary() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = RedisCluster::start_with_replicas(3, 1);

    let primary = cluster.primaries()[0].port;
    let url = cluster.url_from(primary);
    // A coordinated failover can be over within 40 ms (a CI run built only 2 clients
    // at one every 20 ms).
    let every = Duration::from_millis(5);
    let (cluster, clients) = build_clients_during(&url, cluster, every, move |cluster| {
        let primary = cluster.node(primary);
        cluster.fail_over(primary, cluster.replica_of(primary), "");
    })
    .await;
    every_client_locks_on_every_primary(&cluster, &clients).await;

    let restarted = cluster.primaries()[1].port;
    let url = cluster.url_from(restarted);
    let every = Duration::from_millis(20);
    let (cluster, clients) = build_clients_during(&url, cluster, every, move |cluster| {
        let node = cluster.node_mut(restarted);
        assert_eq!(node.command(&["SAVE"]).unwrap(), "+OK");
        // Down long enough for dozens of clients to start meanwhile, well within the
        // cluster's node timeout (no failover).
        node.restart_after(Duration::from_millis(1_500));
        common::wait_until(
            "the cluster to be whole again",
            Duration::from_secs(30),
            || cluster.is_ok(),
        );
    })
    .await;
    every_client_locks_on_every_primary(&cluster, &clients).await;
    for client in clients {
        client.shutdown().await;
    }
}

/// A primary restarted with its data and no replica to take over: Redis keeps it in
/// `cluster_state:fail` for its rejoin delay (5 s here), and its own holds with a
/// lease shorter than that may be lost, but the holds on the other primaries keep
/// renewing and calls on them go on. (With fred's check of each node's state, every
/// command of the client waited out the rejoin delay, and the holds on every primary
/// were lost.) fred still reconnects the client's nodes together, so calls elsewhere
/// may wait while the restarted node is down (its restart, well under a second on an
/// idle machine): the lease is 6 s here, and a turn may take up to 2.5 s (with the
/// check, turns took 3.5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_primary_leaves_the_other_primaries_locks_alone() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut cluster = RedisCluster::start(3);
    let url = cluster.url();
    let restarted = cluster
        .nodes
        .iter()
        .position(|node| node.port == cluster.primary_of(&common::key("held:0")).port)
        .unwrap();
    let restarted_port = cluster.nodes[restarted].port;
    let elsewhere = |name: &str, cluster: &RedisCluster| {
        cluster.primary_of(&common::key(name)).port != restarted_port
    };
    let lease = LEASE * 2;
    let client = LockClient::builder(&url)
        .lease(lease)
        .build()
        .await
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..HELD {
        guards.push(client.lock(format!("held:{i}")).await.unwrap());
    }
    let turn_names: Vec<String> = (0..CONTENDED)
        .map(|i| format!("turn:{i}"))
        .filter(|name| elsewhere(name, &cluster))
        .collect();
    assert!(!turn_names.is_empty());
    let stop = Arc::new(AtomicBool::new(false));
    // Two clients take turns on the same names, each holding a few milliseconds: a
    // waiter is woken by the other client's release message (its subscriber's
    // connection is one holdlock opens, like the command client's).
    let other = LockClient::builder(&url).build().await.unwrap();
    let turn_names = Arc::new(turn_names);
    let turns: Vec<_> = [client.clone(), other.clone()]
        .into_iter()
        .map(|client| {
            let (stop, turn_names) = (Arc::clone(&stop), Arc::clone(&turn_names));
            tokio::spawn(async move {
                let (mut slowest, mut done) = (Duration::ZERO, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    for name in turn_names.iter() {
                        let began = Instant::now();
                        let guard = client.lock(name).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        guard.unlock().await.unwrap();
                        slowest = slowest.max(began.elapsed());
                        done += 1;
                    }
                }
                (slowest, done)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(cluster.nodes[restarted].command(&["SAVE"]).unwrap(), "+OK");
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.nodes[restarted].restart();
        common::wait_until(
            "the cluster to be whole again",
            Duration::from_secs(30),
            || cluster.is_ok(),
        );
        cluster
    })
    .await
    .unwrap();
    tokio::time::sleep(lease * 2).await;
    stop.store(true, Ordering::Relaxed);
    let (mut slowest, mut done) = (Duration::ZERO, 0);
    for turns in turns {
        let (slowest_here, done_here) = turns.await.unwrap();
        slowest = slowest.max(slowest_here);
        done += done_here;
    }

    let redis = common::raw(&cluster.url()).await;
    let mut kept = 0;
    for guard in &guards {
        if !elsewhere(guard.name(), &cluster) {
            continue;
        }
        assert!(!guard.is_lost(), "{} was lost", guard.name());
        let count = common::hold_count(&redis, guard.name(), guard.owner()).await;
        assert_eq!(count, Some(1), "{} is gone from redis", guard.name());
        kept += 1;
    }
    assert!(kept > HELD / 3, "{kept} holds elsewhere");
    assert!(done > 100, "the turns stalled: {done}");
    assert!(
        slowest < Duration::from_millis(2_500),
        "a turn elsewhere took {slowest:?}"
    );
    drop(guards);
    other.shutdown().await;
    client.shutdown().await;
}
