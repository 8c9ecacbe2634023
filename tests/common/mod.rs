//! Test support: throwaway `redis-server` processes on loopback (started by
//! `server.rs`, which the examples share), throwaway PostgreSQL servers
//! (`postgres.rs`, shared with the examples too), a proxy that injects faults (`proxy.rs`),
//! the lock's key layout, the Redisson interop tests' peer process (`peer.rs`), and
//! small helpers.
//!
//! Every server is stopped by its PID, never by name, and never outlives the test
//! process (see `server.rs`).
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use holdlock::LockClient;

pub mod java;
pub mod peer;
pub mod postgres;
pub mod proxy;
pub mod replication;
pub mod sentinel;
pub mod server;
pub mod tls;

use server::Reply;

/// A redis-server on a free loopback port, stopped when dropped.
pub struct RedisServer {
    pub port: u16,
    pub log: PathBuf,
    process: server::Process,
}

static SHARED: OnceLock<RedisServer> = OnceLock::new();

/// One server shared by every test in this test binary; tests use unique names.
pub fn shared() -> &'static RedisServer {
    SHARED.get_or_init(RedisServer::start)
}

/// The URL of the shared server.
pub fn url() -> String {
    shared().url()
}

static POSTGRES: OnceLock<postgres::Postgres> = OnceLock::new();

/// One PostgreSQL shared by every test in this test binary, started on first use;
/// tests use unique resource and table names.
pub fn shared_postgres() -> &'static postgres::Postgres {
    POSTGRES.get_or_init(|| {
        postgres::Postgres::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"))
    })
}

static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();

/// One three-primary cluster shared by every test in this test binary, started on
/// first use; tests use unique names.
pub fn cluster() -> &'static RedisCluster {
    CLUSTER.get_or_init(|| RedisCluster::start(3))
}

/// The URL of the shared cluster.
pub fn cluster_url() -> String {
    cluster().url()
}

/// One test per topology for each scenario named: each scenario is an `async
/// fn(url: &str)`, run as `single::NAME` on the shared server and as `cluster::NAME`
/// on the shared cluster, by default in `#[tokio::test(flavor = "multi_thread",
/// worker_threads = 4)]`. A scenario may name its own test attribute instead:
///
/// ```ignore
/// common::on_every_topology!(
///     a_scenario,
///     #[tokio::test(flavor = "current_thread")]
///     another_scenario,
/// );
/// ```
#[allow(unused_macros)]
macro_rules! on_every_topology {
    ($($(#[$test:meta])* $scenario:ident),* $(,)?) => {
        mod single {
            $(
                $crate::common::on_every_topology!(
                    @test [$(#[$test])*] $scenario, $crate::common::url()
                );
            )*
        }
        mod cluster {
            $(
                $crate::common::on_every_topology!(
                    @test [$(#[$test])*] $scenario, $crate::common::cluster_url()
                );
            )*
        }
    };
    (@test [] $scenario:ident, $url:expr) => {
        $crate::common::on_every_topology!(
            @test [#[tokio::test(flavor = "multi_thread", worker_threads = 4)]] $scenario, $url
        );
    };
    (@test [$(#[$test:meta])+] $scenario:ident, $url:expr) => {
        $(#[$test])+
        async fn $scenario() {
            super::$scenario(&$url).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_every_topology;

/// The lock's hash key for `name` under the default prefix: `holdlock:{name}`.
pub fn key(name: &str) -> String {
    format!("holdlock:{{{name}}}")
}

/// The fencing token key for `name`: `holdlock:{name}:token`.
pub fn token_key(name: &str) -> String {
    format!("{}:token", key(name))
}

/// The channel a release of `name` is published on: `holdlock:{name}:released`.
pub fn release_channel(name: &str) -> String {
    format!("{}:released", key(name))
}

/// A lock name no other test uses.
pub fn unique(test: &str) -> String {
    format!("test:{test}:{}", uuid::Uuid::new_v4().simple())
}

/// The `ACL SETUSER` rules that `docs/deployments.md` gives for the user it calls
/// `documented`, in the page's order.
pub fn documented_rules_of(documented: &str) -> Vec<String> {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployments.md"))
        .unwrap();
    let start = format!("ACL SETUSER {documented} ");
    docs.lines()
        .filter(|line| line.starts_with(&start))
        .map(str::to_owned)
        .collect()
}

/// The two `ACL SETUSER` rules that `docs/deployments.md` gives for a holdlock user:
/// the rule, and the one for Redis 6.2.
pub fn documented_rules() -> [String; 2] {
    documented_rules_of("holdlock")
        .try_into()
        .expect("docs/deployments.md gives the ACL rule, and the one for Redis 6.2")
}

/// `rule`, a documented rule for the user the page calls `documented`, as command
/// arguments for `user` with `password`.
pub fn rule_words(rule: &str, documented: &str, user: &str, password: &str) -> Vec<String> {
    rule.split_whitespace()
        .map(|word| match word {
            _ if word == documented => user.to_owned(),
            ">PASSWORD" => format!(">{password}"),
            other => other.to_owned(),
        })
        .collect()
}

/// The `ACL SETUSER` rule that `docs/deployments.md` gives for a holdlock user on the
/// test server (the one for Redis 6.2 there), for `user` with `password`, as command
/// arguments.
pub fn documented_rule(user: &str, password: &str) -> Vec<String> {
    let [rule, rule_6] = documented_rules();
    let line = match server::server_version().before_redis_7() {
        true => rule_6,
        false => rule,
    };
    rule_words(&line, "holdlock", user, password)
}

/// A client of `url` with default settings.
pub async fn connect(url: &str) -> LockClient {
    LockClient::connect(url)
        .await
        .expect("connect to the test redis")
}

/// A client of the shared server with default settings.
pub async fn client() -> LockClient {
    connect(&url()).await
}

/// A client of `url` with a lease of its own.
pub async fn client_with_lease(url: &str, lease: Duration) -> LockClient {
    LockClient::builder(url)
        .lease(lease)
        .build()
        .await
        .expect("connect to the test redis")
}

/// Takes `name` in a task of its own, so that the guard has another owner than the
/// calling task.
pub async fn lock_as_another_owner(client: &LockClient, name: &str) -> holdlock::LockGuard {
    let (client, name) = (client.clone(), name.to_owned());
    tokio::spawn(async move { client.lock(&name).await.unwrap() })
        .await
        .unwrap()
}

/// Takes every one of `names` at once, each in a task of its own (past the calls a
/// client keeps in flight alone, they go out in batches): the guards, in order.
pub async fn lock_each_at_once(client: &LockClient, names: &[String]) -> Vec<holdlock::LockGuard> {
    let takes: Vec<_> = names
        .iter()
        .map(|name| {
            let (client, name) = (client.clone(), name.clone());
            tokio::spawn(async move { client.lock(&name).await.unwrap() })
        })
        .collect();
    let mut guards = Vec::new();
    for take in takes {
        guards.push(take.await.unwrap());
    }
    guards
}

/// `(command, calls)` pairs as a map, to compare with
/// [`RedisServer::script_commands_since`].
pub fn counts(expected: &[(&str, u64)]) -> BTreeMap<String, u64> {
    expected
        .iter()
        .map(|(name, n)| ((*name).to_owned(), *n))
        .collect()
}

/// Loads the mutex's scripts into `client`'s server before a test counts them: 8 free
/// locks taken at once and released one by one (alone), then taken and released at
/// once (in batches).
pub async fn load_lock_scripts(client: &LockClient) {
    let warm: Vec<String> = (0..8).map(|i| unique(&format!("warm-{i}"))).collect();
    for guard in lock_each_at_once(client, &warm).await {
        guard.unlock().await.unwrap();
    }
    unlock_each_at_once(lock_each_at_once(client, &warm).await).await;
}

/// Lets every guard go at once, each `unlock()` in a task of its own (past the calls in
/// flight alone, the releases go out in batches); each must answer `Ok`.
pub async fn unlock_each_at_once(guards: Vec<holdlock::LockGuard>) {
    let releases: Vec<_> = guards
        .into_iter()
        .map(|guard| tokio::spawn(guard.unlock()))
        .collect();
    for release in releases {
        release.await.unwrap().unwrap();
    }
}

/// Takes every lock of `names` at once with `client` and lets them all go at once
/// (`lock_each_at_once`, `unlock_each_at_once`), checking on `server` (which serves
/// every one of them) that each was held, then that each is gone: the `EVALSHA` calls
/// `server` counted to take them, and to release them.
pub async fn scripts_to_take_and_release_at_once(
    client: &LockClient,
    server: &RedisServer,
    names: &[String],
) -> (u64, u64) {
    server.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let guards = lock_each_at_once(client, names).await;
    let taken = server.command_calls("evalsha");
    for guard in &guards {
        let field = server
            .query(&["HGET", &key(guard.name()), guard.owner()])
            .unwrap();
        assert_eq!(field, "1", "{}: not held in redis", guard.name());
    }
    unlock_each_at_once(guards).await;
    let released = server.command_calls("evalsha") - taken;
    for name in names {
        let exists = server.query(&["EXISTS", &key(name)]).unwrap();
        assert_eq!(exists, ":0", "{name} still in redis");
    }
    (taken, released)
}

/// `owner`'s hold count on `name` as Redis has it (`None`: no field), read through
/// `redis`. Read errors (a killed connection) are retried for 5 s.
pub async fn hold_count(redis: &fred::clients::Client, name: &str, owner: &str) -> Option<i64> {
    use fred::interfaces::HashesInterface;
    let start = Instant::now();
    loop {
        match redis.hget(key(name).as_str(), owner).await {
            Ok(count) => return count,
            Err(e) if start.elapsed() > Duration::from_secs(5) => {
                panic!("could not read the hold count of {name}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Polls `client.is_locked(name)` until the lock is free, failing the test after
/// `limit`; returns how long that took.
pub async fn wait_until_free(client: &LockClient, name: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while client.is_locked(name).await.unwrap() {
        assert!(
            start.elapsed() < limit,
            "{name} is still locked after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

/// Starts `tracing` output for a test when `RUST_LOG` is set.
/// Runs `client.lock(name)` while `server` (the lock's primary) holds writes back
/// (`CLIENT PAUSE WRITE`) past the call's time (the client's connect timeout must be
/// well under 2.5 s): the call fails, its script waits in the server, and once the
/// pause is lifted the failed call's settling must leave no hold behind.
pub async fn lock_through_a_write_pause(client: &LockClient, server: &RedisServer, name: &str) {
    let key = key(name);
    // The scripts are loaded (a fresh server answers `NOSCRIPT` after the pause), and
    // any connection of the client's own is open.
    client.lock(name).await.unwrap().unlock().await.unwrap();
    let pause = Duration::from_millis(2500);
    let millis = pause.as_millis().to_string();
    let paused_at = Instant::now();
    let paused = server.query(&["CLIENT", "PAUSE", &millis, "WRITE"]);
    assert_eq!(paused.as_deref(), Ok("+OK"));
    let locked = client.lock(name).await;
    assert!(locked.is_err(), "granted while writes were paused");
    assert!(paused_at.elapsed() < pause, "the call outlasted the pause");

    // The pause ends (Redis lifts it on its next tick), the waiting script runs.
    let lifted = pause + Duration::from_millis(300);
    tokio::time::sleep(lifted.saturating_sub(paused_at.elapsed())).await;
    let after = Instant::now();
    while server.query(&["EXISTS", &key]).as_deref() == Ok(":1") {
        assert!(
            after.elapsed() < Duration::from_secs(3),
            "the failed lock's hold stayed after the pause: {:?}",
            server.query(&["HGETALL", &key])
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn trace() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

impl RedisServer {
    /// Starts a fresh server of our own (for tests that kill connections or flush scripts).
    pub fn start() -> Self {
        Self::start_with(|_| Vec::new())
    }

    /// Starts a server with extra arguments, computed from its port.
    pub fn start_with(extra: impl Fn(u16) -> Vec<String>) -> Self {
        Self::start_program(&server::server_program(), |_| Vec::new(), extra)
    }

    /// Starts `bin` (redis-server, or redis-sentinel) with `leading(port)` arguments
    /// first (a config file must come first), then the usual ones, then `extra(port)`.
    pub fn start_program(
        bin: &str,
        leading: impl Fn(u16) -> Vec<String>,
        extra: impl Fn(u16) -> Vec<String>,
    ) -> Self {
        if server::which(bin).is_none() {
            panic!(
                "`{bin}` was not found on PATH. Install Redis first, e.g. \
                 `apt-get install -y redis-server redis-tools redis-sentinel` \
                 (or set HOLDLOCK_TEST_SERVER to a server's path: README, \"Run the tests\")."
            );
        }
        let options = server::Options {
            log_file: true,
            ignore_interrupts: false,
        };
        let process = server::start(bin, leading, extra, options).unwrap_or_else(|e| panic!("{e}"));
        RedisServer {
            port: process.port,
            log: process.log.clone().expect("a log file"),
            process,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The URL of the server's database `database` (the URL's path).
    pub fn database_url(&self, database: u8) -> String {
        format!("{}/{database}", self.url())
    }

    /// Sends one command over a fresh connection and returns the first reply line
    /// (enough for PING, CLIENT KILL, SCRIPT FLUSH, DEBUG SLEEP).
    pub fn command(&self, args: &[&str]) -> Result<String, String> {
        let mut line = String::new();
        server::send(self.port, args)?
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        Ok(line.trim_end().to_owned())
    }

    /// Sends one command and returns its whole reply as text (bulk strings included).
    pub fn query(&self, args: &[&str]) -> Result<String, String> {
        text(server::read_reply(&mut server::send(self.port, args)?)?)
    }

    /// Sends one command and returns an array reply of bulk strings (any other reply
    /// as the only element).
    pub fn array(&self, args: &[&str]) -> Result<Vec<String>, String> {
        let mut reader = server::send(self.port, args)?;
        let header = text(server::read_reply(&mut reader)?)?;
        let Some(count) = header.strip_prefix('*') else {
            return Ok(vec![header]);
        };
        let count: i64 = count.parse().map_err(|_| header.clone())?;
        (0..count)
            .map(|_| text(server::read_reply(&mut reader)?))
            .collect()
    }

    /// How many times each command ran since the server started or its last `CONFIG
    /// RESETSTAT`, by the name `INFO commandstats` gives it (`evalsha`, `hget`,
    /// `config|resetstat`).
    pub fn command_stats(&self) -> BTreeMap<String, u64> {
        let stats = self.query(&["INFO", "commandstats"]).unwrap();
        stats
            .lines()
            .filter_map(|line| {
                let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = fields.strip_prefix("calls=")?.split(',').next()?;
                Some((name.to_owned(), calls.parse().unwrap()))
            })
            .collect()
    }

    /// How many times `command` (as named by [`command_stats`](Self::command_stats))
    /// ran since the server started or its last `CONFIG RESETSTAT`. Redis 6.2 counts
    /// no subcommands: there `script|load` is every `SCRIPT` call.
    pub fn command_calls(&self, command: &str) -> u64 {
        let command = match server::server_version().before_redis_7() {
            true => command.split('|').next().unwrap_or(command),
            false => command,
        };
        self.command_stats().get(command).copied().unwrap_or(0)
    }

    /// The commands scripts ran since the last call (or `CONFIG RESETSTAT`), by name:
    /// [`command_stats`](Self::command_stats) without the script calls themselves and
    /// `CONFIG`; then resets the counts for the next.
    pub fn script_commands_since(&self) -> BTreeMap<String, u64> {
        let mut calls = self.command_stats();
        calls.retain(|name, _| name != "evalsha" && name != "eval" && !name.starts_with("config"));
        self.command(&["CONFIG", "RESETSTAT"]).unwrap();
        calls
    }

    /// Kills every normal client connection (ours included) on the server.
    pub fn kill_clients(&self) {
        let _ = self.command(&["CLIENT", "KILL", "TYPE", "normal"]);
        let _ = self.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    }
}

/// A reply as [`RedisServer::query`] gives it: a bulk string's contents, or any other
/// reply's first line; nil is an error.
fn text(reply: Reply) -> Result<String, String> {
    match reply {
        Reply::Line(line) => Ok(line),
        Reply::Bulk(Some(contents)) => Ok(contents),
        Reply::Bulk(None) => Err("$-1".into()),
    }
}

/// The number in an integer reply (`:123`) of [`RedisServer::query`].
pub fn integer(reply: &str) -> i64 {
    reply.trim_start_matches(':').parse().unwrap()
}

/// Polls `ready` until it holds, failing the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < limit,
            "gave up waiting for {what} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `url` is a Valkey cluster, whose cluster bus can drop a plain `PUBLISH`
/// between nodes: Valkey 8.1 sends it with a "light" header, and a node that gets one
/// as the first message on a link it has just accepted closes the link and drops the
/// message ("Closing link for node that sent a lightweight message of type publish as
/// its first message on the link", seen in this suite's logs). A force-unlock's notice
/// to a holder on another node is then missed, and the holder learns at its next
/// renewal, as documented.
pub fn drops_cluster_publishes(url: &str) -> bool {
    // Read from the test's own settings, not the server: an ACL user may not run INFO.
    url.contains("-cluster") && server::server_program().contains("valkey")
}

/// Each listed lock as (name, kind), in the listing's order.
pub fn listed(listing: &holdlock::LockListing) -> Vec<(&str, holdlock::LockKind)> {
    listing
        .locks
        .iter()
        .map(|info| (info.name.as_str(), info.kind))
        .collect()
}

/// A plain fred client of the same server, for checking Redis behind the lock's back.
pub async fn raw(url: &str) -> fred::clients::Client {
    use fred::interfaces::ClientLike;
    let config = fred::types::config::Config::from_url(url).unwrap();
    let client = fred::types::Builder::from_config(config).build().unwrap();
    client.init().await.unwrap();
    client
}

/// A Redis Cluster of primaries (and maybe replicas) on loopback.
pub struct RedisCluster {
    /// Every node, primaries and replicas (see [`primaries`](Self::primaries)).
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// `masters` primaries and no replicas.
    pub fn start(masters: usize) -> Self {
        Self::start_with_replicas(masters, 0)
    }

    /// `masters` primaries with `replicas` replicas each, every replica in sync.
    pub fn start_with_replicas(masters: usize, replicas: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| Self::start_node())
            .collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        server::create_cluster(&ports, replicas)
            .unwrap_or_else(|e| panic!("cluster create failed: {e}"));
        wait_until("the cluster to settle", Duration::from_secs(30), || {
            server::cluster_settled(&ports)
        });
        Self { nodes }
    }

    /// A cluster-enabled server of its own, not yet part of any cluster.
    pub fn start_node() -> RedisServer {
        RedisServer::start_with(server::cluster_node_args)
    }

    /// Adds an empty primary (`redis-cli --cluster add-node`) and waits until every
    /// node knows it; returns its index in [`nodes`](Self::nodes).
    pub fn add_primary(&mut self) -> usize {
        let node = Self::start_node();
        let new = format!("127.0.0.1:{}", node.port);
        let existing = format!("127.0.0.1:{}", self.nodes[0].port);
        redis_cli_cluster(&["add-node", &new, &existing]);
        self.nodes.push(node);
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        wait_until(
            "the new primary to be known",
            Duration::from_secs(20),
            || {
                self.is_ok()
                    && self.nodes.iter().all(|node| {
                        node.query(&["CLUSTER", "INFO"])
                            .unwrap_or_default()
                            .contains(&known)
                    })
            },
        );
        self.nodes.len() - 1
    }

    /// Moves `slots` slots, keys and all, from `from` to `to` (`redis-cli --cluster
    /// reshard`), and waits until the cluster is ok.
    pub fn reshard(&self, from: &RedisServer, to: &RedisServer, slots: usize) {
        let (from_id, to_id) = (node_id(from), node_id(to));
        redis_cli_cluster(&[
            "reshard",
            &format!("127.0.0.1:{}", from.port),
            "--cluster-from",
            &from_id,
            "--cluster-to",
            &to_id,
            "--cluster-slots",
            &slots.to_string(),
            "--cluster-yes",
        ]);
        wait_until("the cluster to be ok", Duration::from_secs(20), || {
            self.is_ok()
        });
    }

    /// Spreads the slots evenly over every primary, empty ones included (`redis-cli
    /// --cluster rebalance --cluster-use-empty-masters`).
    pub fn rebalance(&self) {
        redis_cli_cluster(&[
            "rebalance",
            &format!("127.0.0.1:{}", self.nodes[0].port),
            "--cluster-use-empty-masters",
        ]);
        wait_until("the cluster to be ok", Duration::from_secs(20), || {
            self.is_ok()
        });
    }

    /// How many slots `node` serves, by its own view.
    pub fn slot_count(&self, node: &RedisServer) -> usize {
        (0..=16383u16)
            .filter(|slot| self.serves_in(&own_line(node), *slot))
            .count()
    }

    /// `CLUSTER FAILOVER [mode]` on `replica` (mode `""`, `"FORCE"` or `"TAKEOVER"`),
    /// waiting until the whole cluster agrees and `primary` has stepped down. A
    /// manual failover that does not win its election in time is abandoned by Redis (a
    /// young cluster may not have agreed on its members yet), so it is asked again.
    pub fn fail_over(&self, primary: &RedisServer, replica: &RedisServer, mode: &str) {
        let done = || self.is_primary(replica) && !self.is_primary(primary) && self.is_ok();
        let mut command = vec!["CLUSTER", "FAILOVER"];
        if !mode.is_empty() {
            command.push(mode);
        }
        for _ in 0..4 {
            assert_eq!(replica.query(&command).as_deref(), Ok("+OK"));
            let asked = Instant::now();
            while !done() && asked.elapsed() < Duration::from_secs(8) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if done() {
                return;
            }
        }
        panic!("the failover did not complete");
    }

    /// Whether every node reports `cluster_state:ok`.
    pub fn is_ok(&self) -> bool {
        self.nodes.iter().all(|node| {
            node.query(&["CLUSTER", "INFO"])
                .unwrap_or_default()
                .contains("cluster_state:ok")
        })
    }

    /// Whether `node` is a primary now (a failover changes it).
    pub fn is_primary(&self, node: &RedisServer) -> bool {
        node.query(&["INFO", "replication"])
            .unwrap_or_default()
            .contains("role:master")
    }

    /// The primaries, as they are now.
    pub fn primaries(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .filter(|node| self.is_primary(node))
            .collect()
    }

    /// The primary that serves `key`'s slot now.
    pub fn primary_of(&self, key: &str) -> &RedisServer {
        let slot = self.nodes[0].query(&["CLUSTER", "KEYSLOT", key]).unwrap();
        let slot: u16 = slot.trim_start_matches(':').parse().unwrap();
        self.primaries()
            .into_iter()
            .find(|node| self.serves(node, slot))
            .expect("a primary serves every slot")
    }

    /// The first slot `node` serves, by its own view of the cluster.
    pub fn first_slot(&self, node: &RedisServer) -> u16 {
        own_line(node)
            .and_then(|line| {
                let range = line.split(' ').nth(8)?.to_owned();
                range.split('-').next()?.parse().ok()
            })
            .expect("the node serves a slot")
    }

    /// Whether `node` serves `slot`, by its own view of the cluster.
    pub fn serves(&self, node: &RedisServer, slot: u16) -> bool {
        self.serves_in(&own_line(node), slot)
    }

    /// Whether the `CLUSTER NODES` line `line` lists `slot`.
    fn serves_in(&self, line: &Option<String>, slot: u16) -> bool {
        line.as_deref().is_some_and(|line| {
            line.split(' ').skip(8).any(|range| {
                let mut ends = range.split('-').map(|end| end.parse::<u16>());
                match (ends.next(), ends.next()) {
                    (Some(Ok(from)), Some(Ok(to))) => (from..=to).contains(&slot),
                    (Some(Ok(only)), None) => only == slot,
                    _ => false,
                }
            })
        })
    }

    /// A replica of `primary`, if it has one.
    pub fn try_replica_of(&self, primary: &RedisServer) -> Option<&RedisServer> {
        self.nodes.iter().find(|node| {
            !self.is_primary(node)
                && node
                    .query(&["INFO", "replication"])
                    .unwrap_or_default()
                    .contains(&format!("master_port:{}", primary.port))
        })
    }

    /// A replica of `primary`.
    pub fn replica_of(&self, primary: &RedisServer) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| {
                !self.is_primary(node)
                    && node
                        .query(&["INFO", "replication"])
                        .unwrap_or_default()
                        .contains(&format!("master_port:{}", primary.port))
            })
            .unwrap_or_else(|| panic!("no replica of the primary on port {}", primary.port))
    }

    /// The fred URL of the cluster.
    pub fn url(&self) -> String {
        self.url_from(self.nodes[0].port)
    }

    /// The fred URL of the cluster with `first` (a node's port, or any other) as its
    /// first node, the one a new client asks first, and every node after it.
    pub fn url_from(&self, first: u16) -> String {
        let others: Vec<String> = self
            .nodes
            .iter()
            .filter(|node| node.port != first)
            .map(|node| format!("node=127.0.0.1:{}", node.port))
            .collect();
        format!("redis-cluster://127.0.0.1:{first}?{}", others.join("&"))
    }

    /// The node on `port`.
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| node.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The node on `port`, to restart it.
    pub fn node_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|node| node.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// A fresh name (`common::unique(stem)`) whose lock `primary` serves now.
    pub fn name_on(&self, primary: &RedisServer, stem: &str) -> String {
        std::iter::repeat_with(|| unique(stem))
            .find(|name| self.primary_of(&key(name)).port == primary.port)
            .unwrap()
    }
}

/// The node's own line of `CLUSTER NODES`.
fn own_line(node: &RedisServer) -> Option<String> {
    let nodes = node.query(&["CLUSTER", "NODES"]).ok()?;
    nodes
        .lines()
        .find(|line| line.contains("myself"))
        .map(str::to_owned)
}

/// The node's cluster id (`CLUSTER MYID`).
pub fn node_id(node: &RedisServer) -> String {
    node.query(&["CLUSTER", "MYID"])
        .unwrap()
        .trim_start_matches(['+', '$'])
        .trim_matches('"')
        .to_owned()
}

/// `redis-cli --cluster <args>`, which must succeed.
pub fn redis_cli_cluster(args: &[&str]) {
    server::redis_cli_cluster(args).unwrap_or_else(|e| panic!("{e}"));
}

/// A client in Redisson's layout (`Compat::Redisson`) whose watchdog keeps `lease`.
pub async fn redisson_client(url: &str, lease: Duration) -> LockClient {
    LockClient::builder(url)
        .compat(holdlock::Compat::Redisson)
        .lease(lease)
        .build()
        .await
        .unwrap()
}

/// Two tasks of `client` that cross the locks `x` and `y`: the first takes `x`, the
/// second `y`, then (once both hold) the first asks for `y` and, 100 ms later, the
/// second for `x`. Whether each task's second call failed with
/// `LockError::Deadlock`: `[false, true]` when the later wait is the victim.
pub async fn cross_two_locks(client: &LockClient, x: &str, y: &str) -> [bool; 2] {
    let both_hold = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let cross = |first: &str, then: &str, delay: u64| {
        let (client, both_hold) = (client.clone(), both_hold.clone());
        let (first, then) = (first.to_owned(), then.to_owned());
        tokio::spawn(async move {
            let held = client.lock(&first).await.unwrap();
            both_hold.wait().await;
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let broken = match client.lock(&then).await {
                Ok(second) => {
                    second.unlock().await.unwrap();
                    false
                }
                Err(error) => matches!(error, holdlock::LockError::Deadlock { .. }),
            };
            held.unlock().await.unwrap();
            broken
        })
    };
    let (a, b) = (cross(x, y, 0), cross(y, x, 100));
    [a.await.unwrap(), b.await.unwrap()]
}
