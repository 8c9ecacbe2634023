//! The run: two redis-servers (or, with `--cluster`, a Redis Cluster for the locks and
//! a redis-server for the registers), worker processes (behind proxies, on one lock
//! server), a nemesis injecting faults on a seeded schedule, then the final checks and
//! the summary.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdlock::LockClient;
use holdlock::fred::interfaces::{HashesInterface, KeysInterface};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::bank::Workload;
use crate::checker::{self, Final, Summary};
use crate::history::{Entry, Fault, Op, now_us};
use crate::proxy::{Mode, Proxy};
use crate::support::{self, Cluster, Redis};
use crate::topology::Topology;
use crate::worker::LockKind;
use crate::{BoxError, Rng, register_key};

/// What to run.
#[derive(Debug)]
pub struct Plan {
    pub duration: Duration,
    pub seed: u64,
    pub workers: u32,
    /// How many of the workers are Java Redisson processes (the first slots).
    pub java_workers: u32,
    pub tasks: u32,
    pub names: u32,
    pub lease: Duration,
    /// The workers' `deadlock_check` (`None`: the library's default).
    pub deadlock_check: Option<Duration>,
    pub fault_every: Duration,
    pub faults: Vec<FaultKind>,
    pub kind: LockKind,
    pub history: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// The locks on a Redis Cluster of 3 primaries with a replica each.
    pub cluster: bool,
    /// Locks and registers, or the bank's transfers in PostgreSQL.
    pub workload: Workload,
    /// The bank's rounds in a hundred that hold a fixed lease and stall past it.
    pub overruns: u64,
}

impl Plan {
    /// The fair wait of every worker (see `worker::REDISSON_FAIR_WAIT_BESIDE_JAVA`).
    pub fn fair_wait(&self) -> Duration {
        if self.java_workers > 0 {
            crate::worker::REDISSON_FAIR_WAIT_BESIDE_JAVA
        } else {
            crate::worker::REDISSON_FAIR_WAIT
        }
    }
}

/// The faults the nemesis can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Pause,
    Kill,
    ClientKill,
    ScriptFlush,
    Restart,
    BlackHole,
    Reset,
    Reshard,
    Empty,
    Failover,
    NodeRestart,
    RollingRestart,
    DbKill,
}

impl FaultKind {
    const ALL: [(FaultKind, &'static str); 13] = [
        (FaultKind::Pause, "pause"),
        (FaultKind::Kill, "kill"),
        (FaultKind::ClientKill, "client-kill"),
        (FaultKind::ScriptFlush, "script-flush"),
        (FaultKind::Restart, "restart"),
        (FaultKind::BlackHole, "black-hole"),
        (FaultKind::Reset, "reset"),
        (FaultKind::Reshard, "reshard"),
        (FaultKind::Empty, "empty"),
        (FaultKind::Failover, "failover"),
        (FaultKind::NodeRestart, "node-restart"),
        (FaultKind::RollingRestart, "rolling-restart"),
        (FaultKind::DbKill, "db-kill"),
    ];

    /// Whether the fault can be injected on one lock server (`cluster` false) or on
    /// the lock cluster. A cluster's nodes are restarted only in the ways that keep
    /// every acknowledged write (`node-restart`; a primary that comes back empty loses
    /// them by design), and its workers have no proxy to cut: the cluster's redirects
    /// name the nodes' own addresses. Only the bank workload has a database whose
    /// connections to kill.
    fn offered(self, cluster: bool, bank: bool) -> bool {
        match self {
            FaultKind::DbKill => bank,
            FaultKind::Restart | FaultKind::BlackHole | FaultKind::Reset => !cluster,
            FaultKind::Reshard
            | FaultKind::Empty
            | FaultKind::Failover
            | FaultKind::NodeRestart
            | FaultKind::RollingRestart => cluster,
            FaultKind::Pause | FaultKind::Kill | FaultKind::ClientKill | FaultKind::ScriptFlush => {
                true
            }
        }
    }

    /// A topology fault of the cluster: seconds long, run beside the other faults.
    fn is_topology(self) -> bool {
        matches!(
            self,
            FaultKind::Reshard
                | FaultKind::Empty
                | FaultKind::Failover
                | FaultKind::NodeRestart
                | FaultKind::RollingRestart
        )
    }

    /// `all` (every fault offered on one lock server, or on the cluster), `none`, or
    /// a comma-separated list of fault names.
    pub fn parse_list(text: &str, cluster: bool, bank: bool) -> Result<Vec<FaultKind>, BoxError> {
        let offered: Vec<_> = Self::ALL
            .iter()
            .filter(|(kind, _)| kind.offered(cluster, bank))
            .collect();
        let mode = if cluster {
            "with --cluster"
        } else {
            "without --cluster"
        };
        match text {
            "all" => Ok(offered.iter().map(|(kind, _)| *kind).collect()),
            "none" => Ok(Vec::new()),
            _ => text
                .split(',')
                .map(|name| {
                    offered
                        .iter()
                        .find(|(_, known)| *known == name.trim())
                        .map(|(kind, _)| *kind)
                        .ok_or_else(|| {
                            let known: Vec<_> = offered.iter().map(|(_, n)| *n).collect();
                            format!(
                                "unknown fault `{name}` {mode} (known: {})",
                                known.join(", ")
                            )
                            .into()
                        })
                })
                .collect(),
        }
    }
}

/// What holds the locks.
enum LockServer {
    /// One redis-server, which the nemesis may restart; workers reach it through
    /// their proxies.
    Single { redis: Arc<Mutex<Redis>>, port: u16 },
    /// A cluster; workers connect to its nodes directly.
    Cluster(Topology),
}

impl LockServer {
    /// Every lock server's port (every node of a cluster).
    fn ports(&self) -> Vec<u16> {
        match self {
            LockServer::Single { port, .. } => vec![*port],
            LockServer::Cluster(topology) => topology.ports().to_vec(),
        }
    }

    /// The URL to connect to it directly.
    fn url(&self) -> String {
        match self {
            LockServer::Single { redis, .. } => redis.lock().unwrap().url().to_owned(),
            LockServer::Cluster(topology) => topology.url().to_owned(),
        }
    }
}

type History = Arc<Mutex<Vec<Entry>>>;

/// One worker slot: a proxy to the lock server (none in cluster mode), and the worker
/// process using it now.
struct Slot {
    proxy: Option<Proxy>,
    worker: Option<Worker>,
}

struct Worker {
    id: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: tokio::task::JoinHandle<()>,
}

/// Everything the run controls.
struct Lab {
    plan: Plan,
    history: History,
    locks: LockServer,
    /// The topology fault under way, if any (cluster mode).
    topology: Option<tokio::task::JoinHandle<()>>,
    /// How many topology faults have been started: they take turns (reshard, empty,
    /// failover, of those asked for), so that a short run sees each.
    topology_turn: usize,
    resource: Redis,
    /// The bank workload's PostgreSQL.
    database: Option<support::Database>,
    slots: Vec<Slot>,
    next_worker: u32,
    failed_workers: Vec<u32>,
}

impl Lab {
    fn record(&self, fault: Fault) {
        self.history.lock().unwrap().push(Entry::Fault(fault));
    }

    fn spawn_worker(&mut self, slot: usize) -> Result<(), BoxError> {
        let id = self.next_worker;
        self.next_worker += 1;
        let lock_url = match &self.slots[slot].proxy {
            Some(proxy) => format!("redis://127.0.0.1:{}", proxy.port),
            None => self.locks.url(),
        };
        let mut worker = if slot < self.plan.java_workers as usize {
            let mut java = Command::new("java");
            // One collector thread and the quick compiler: a worker starts in about a
            // second on two cores.
            java.args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp"])
                .arg(java_worker_jar()?)
                .arg("holdlock.interop.ChaosWorker")
                .arg("--fence-script")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/fence.lua"));
            java
        } else {
            let mut rust = Command::new(std::env::current_exe()?);
            rust.arg("worker");
            rust
        };
        if let Some(check) = self.plan.deadlock_check {
            worker.args(["--deadlock-check", &format!("{}ms", check.as_millis())]);
        }
        worker
            .args(["--lock-url", &lock_url])
            .args(["--resource-url", self.resource.url()])
            .args(["--names", &self.plan.names.to_string()])
            .args(["--tasks", &self.plan.tasks.to_string()])
            .args(["--lease", &format!("{}ms", self.plan.lease.as_millis())])
            .args([
                "--fair-wait",
                &format!("{}ms", self.plan.fair_wait().as_millis()),
            ])
            .args([
                "--seed",
                &(self
                    .plan
                    .seed
                    .wrapping_mul(1_000)
                    .wrapping_add(u64::from(id)))
                .to_string(),
            ])
            .args(["--lock", self.plan.kind.name()]);
        // Only Rust workers run the bank (a Java worker refuses flags it does not know).
        if let Some(database) = &self.database {
            worker
                .args(["--workload", self.plan.workload.name()])
                .args(["--overruns", &self.plan.overruns.to_string()])
                .args(["--database", database.config()]);
        }
        let mut child = worker
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no worker stdout")?;
        let history = Arc::clone(&self.history);
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<Op>(&line) {
                    Ok(op) => history.lock().unwrap().push(Entry::Op { w: id, op }),
                    Err(_) => eprintln!("chaos: worker {id}: {line}"),
                }
            }
        });
        let stdin = child.stdin.take();
        self.slots[slot].worker = Some(Worker {
            id,
            child,
            stdin,
            reader,
        });
        Ok(())
    }

    fn worker_pid(&self, slot: usize) -> Option<(u32, Pid)> {
        let worker = self.slots[slot].worker.as_ref()?;
        let pid = worker.child.id()?;
        Some((worker.id, Pid::from_raw(i32::try_from(pid).ok()?)))
    }

    /// Injects one fault, and returns once it is over.
    async fn inject(&mut self, kind: FaultKind, rng: &mut Rng) -> Result<(), BoxError> {
        let slot = rng.below(self.slots.len() as u64) as usize;
        let lease_ms = self.plan.lease.as_millis() as u64;
        match kind {
            FaultKind::Pause => {
                let Some((w, pid)) = self.worker_pid(slot) else {
                    return Ok(());
                };
                let t = now_us();
                kill(pid, Signal::SIGSTOP)?;
                tokio::time::sleep(Duration::from_millis(lease_ms + 300 + rng.below(1_200))).await;
                kill(pid, Signal::SIGCONT)?;
                self.record(Fault::Pause {
                    t,
                    until: now_us(),
                    w,
                });
            }
            FaultKind::Kill => {
                let Some(mut worker) = self.slots[slot].worker.take() else {
                    return Ok(());
                };
                let t = now_us();
                worker.child.start_kill()?;
                let _ = worker.child.wait().await;
                let _ = worker.reader.await;
                self.record(Fault::Kill { t, w: worker.id });
                self.spawn_worker(slot)?;
            }
            FaultKind::ClientKill => {
                let t = now_us();
                for port in self.locks.ports() {
                    for kind in ["normal", "pubsub"] {
                        let _ = support::command(port, &["CLIENT", "KILL", "TYPE", kind]);
                    }
                }
                self.record(Fault::ClientKill { t });
            }
            FaultKind::ScriptFlush => {
                let t = now_us();
                for port in self.locks.ports() {
                    let _ = support::command(port, &["SCRIPT", "FLUSH"]);
                }
                if let Some(port) = self.resource.port() {
                    let _ = support::command(port, &["SCRIPT", "FLUSH"]);
                }
                self.record(Fault::ScriptFlush { t });
            }
            FaultKind::DbKill => {
                let Some(database) = &self.database else {
                    return Ok(());
                };
                let t = now_us();
                let killed = crate::bank::kill_connections(database.config()).await?;
                self.record(Fault::DbKill { t, killed });
            }
            FaultKind::Restart => {
                let LockServer::Single { redis, .. } = &self.locks else {
                    return Ok(());
                };
                let t = now_us();
                let locks = Arc::clone(redis);
                tokio::task::spawn_blocking(move || locks.lock().unwrap().restart()).await??;
                self.record(Fault::Restart { t, until: now_us() });
            }
            FaultKind::BlackHole | FaultKind::Reset => {
                let Some(w) = self.slots[slot].worker.as_ref().map(|worker| worker.id) else {
                    return Ok(());
                };
                let Some(proxy) = &self.slots[slot].proxy else {
                    return Ok(());
                };
                let (mode, length) = match kind {
                    FaultKind::BlackHole => (Mode::BlackHole, 300 + rng.below(lease_ms * 5 / 2)),
                    _ => (Mode::Reset, 200 + rng.below(1_300)),
                };
                let t = now_us();
                proxy.set(mode);
                tokio::time::sleep(Duration::from_millis(length)).await;
                proxy.set(Mode::Open);
                let until = now_us();
                self.record(match kind {
                    FaultKind::BlackHole => Fault::BlackHole { t, until, w },
                    _ => Fault::Reset { t, until, w },
                });
            }
            FaultKind::Reshard
            | FaultKind::Empty
            | FaultKind::Failover
            | FaultKind::NodeRestart
            | FaultKind::RollingRestart => {
                let LockServer::Cluster(topology) = &self.locks else {
                    return Ok(());
                };
                // Seconds long: it runs in a task of its own while other faults go on.
                let topology = topology.clone();
                let history = Arc::clone(&self.history);
                let mut rng = Rng::new(rng.next_u64());
                self.topology = Some(tokio::spawn(async move {
                    let record = |fault| history.lock().unwrap().push(Entry::Fault(fault));
                    topology.inject(kind, &mut rng, record).await;
                }));
            }
        }
        Ok(())
    }

    /// Whether a topology fault is under way.
    fn topology_busy(&self) -> bool {
        self.topology
            .as_ref()
            .is_some_and(|task| !task.is_finished())
    }

    /// Waits for the topology fault under way, if any, to end (each of its steps has
    /// a time limit).
    async fn topology_done(&mut self) {
        if let Some(task) = self.topology.take() {
            let _ = task.await;
        }
    }

    /// Asks every worker to stop, and waits for each (killing any that hangs).
    async fn stop_workers(&mut self) -> Vec<u32> {
        let mut hung = Vec::new();
        for slot in &mut self.slots {
            if let Some(worker) = slot.worker.as_mut() {
                worker.stdin.take();
            }
        }
        for slot in &mut self.slots {
            let Some(mut worker) = slot.worker.take() else {
                continue;
            };
            match tokio::time::timeout(Duration::from_secs(30), worker.child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(_) => self.failed_workers.push(worker.id),
                Err(_) => {
                    hung.push(worker.id);
                    let _ = worker.child.start_kill();
                    let _ = worker.child.wait().await;
                }
            }
            let _ = worker.reader.await;
        }
        hung
    }
}

/// The runnable jar of `tests/interop-java`, whose `ChaosWorker` is the Java Redisson
/// worker.
///
/// # Errors
/// When it was not built, saying how to build it.
pub fn java_worker_jar() -> Result<PathBuf, BoxError> {
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop-java");
    let jar = project.join("target/redisson-peer.jar");
    if jar.is_file() {
        Ok(jar)
    } else {
        Err(format!(
            "--java-workers needs {}: build it with `mvn -q -B package -DskipTests` in {} \
             (a JDK 17 and Maven)",
            jar.display(),
            project.display()
        )
        .into())
    }
}

/// Runs the plan and prints the summary.
pub async fn run(plan: Plan) -> Result<Summary, BoxError> {
    let started = std::time::Instant::now();
    let locks = if plan.cluster {
        // Replica migration off: a primary emptied of its slots stays a primary (of
        // none), for the rebalance after it to give slots back to; with it on, Redis
        // makes the emptied primary a replica, and the cluster would shrink to one
        // primary over a long run.
        let cluster = tokio::task::spawn_blocking(|| {
            let timeout = crate::topology::NODE_TIMEOUT.as_millis().to_string();
            Cluster::start(
                3,
                1,
                &[
                    "--cluster-allow-replica-migration",
                    "no",
                    "--cluster-node-timeout",
                    &timeout,
                ],
            )
        })
        .await??;
        LockServer::Cluster(Topology::new(cluster))
    } else {
        let redis = Redis::start()?;
        let port = redis.port().ok_or("no port")?;
        LockServer::Single {
            redis: Arc::new(Mutex::new(redis)),
            port,
        }
    };
    let resource = Redis::start()?;
    let database = if plan.workload.is_bank() {
        let database = tokio::task::spawn_blocking(support::Database::start).await??;
        crate::bank::prepare(database.config(), plan.names).await?;
        Some(database)
    } else {
        None
    };
    let mut slots = Vec::new();
    for _ in 0..plan.workers {
        let proxy = match &locks {
            LockServer::Single { port, .. } => {
                let upstream: SocketAddr = ([127, 0, 0, 1], *port).into();
                Some(Proxy::start(upstream).await?)
            }
            LockServer::Cluster(_) => None,
        };
        slots.push(Slot {
            proxy,
            worker: None,
        });
    }
    eprintln!(
        "chaos: {} workers{} x {} tasks on {} locks ({}{} lock{}), lease {:?}, faults every ~{:?}, seed {}, for {:?}",
        plan.workers,
        if plan.java_workers > 0 {
            format!(" ({} of them Java Redisson)", plan.java_workers)
        } else {
            String::new()
        },
        plan.tasks,
        plan.names,
        if plan.workload.is_bank() {
            format!(
                "{} workload: transfers between accounts in PostgreSQL, under ",
                plan.workload.name()
            )
        } else {
            String::new()
        },
        plan.kind.name(),
        if plan.cluster {
            ", on a cluster of 3 primaries + 3 replicas"
        } else {
            ""
        },
        plan.lease,
        plan.fault_every,
        plan.seed,
        plan.duration
    );
    let mut lab = Lab {
        history: Arc::default(),
        locks,
        topology: None,
        topology_turn: 0,
        resource,
        database,
        slots,
        next_worker: 0,
        failed_workers: Vec::new(),
        plan,
    };
    for slot in 0..lab.slots.len() {
        lab.spawn_worker(slot)?;
    }

    // The nemesis: a fault, a calm gap, another fault, until the time is up.
    let mut rng = Rng::new(lab.plan.seed);
    let end = tokio::time::Instant::now() + lab.plan.duration;
    let mut last_report = std::time::Instant::now();
    let gap_ms = lab.plan.fault_every.as_millis() as u64;
    while tokio::time::Instant::now() < end {
        let gap = Duration::from_millis(gap_ms / 2 + rng.below(gap_ms.max(1)));
        tokio::time::sleep_until((tokio::time::Instant::now() + gap).min(end)).await;
        if tokio::time::Instant::now() >= end {
            break;
        }
        if !lab.plan.faults.is_empty() {
            let mut kind = lab.plan.faults[rng.below(lab.plan.faults.len() as u64) as usize];
            // One topology fault at a time; and no CLIENT KILL during one, which would
            // cut redis-cli's own connections halfway through moving a slot. Another
            // fault instead.
            if lab.topology_busy() && (kind.is_topology() || kind == FaultKind::ClientKill) {
                let others: Vec<FaultKind> = lab
                    .plan
                    .faults
                    .iter()
                    .copied()
                    .filter(|other| !other.is_topology() && *other != FaultKind::ClientKill)
                    .collect();
                if others.is_empty() {
                    continue;
                }
                kind = others[rng.below(others.len() as u64) as usize];
            } else if kind.is_topology() {
                let turns: Vec<FaultKind> = lab
                    .plan
                    .faults
                    .iter()
                    .copied()
                    .filter(|kind| kind.is_topology())
                    .collect();
                kind = turns[lab.topology_turn % turns.len()];
                lab.topology_turn += 1;
            }
            lab.inject(kind, &mut rng).await?;
        }
        if last_report.elapsed() >= Duration::from_secs(60) {
            last_report = std::time::Instant::now();
            let (ops, faults) = {
                let history = lab.history.lock().unwrap();
                let faults = history
                    .iter()
                    .filter(|e| matches!(e, Entry::Fault(_)))
                    .count();
                (history.len() - faults, faults)
            };
            eprintln!(
                "chaos: {:>4} s: {ops} operations, {faults} faults",
                started.elapsed().as_secs()
            );
        }
    }

    // Calm down, stop the workers, let leftover leases run out, then look.
    for proxy in lab.slots.iter().filter_map(|slot| slot.proxy.as_ref()) {
        proxy.set(Mode::Open);
    }
    lab.topology_done().await;
    if let LockServer::Cluster(topology) = &lab.locks {
        eprintln!(
            "chaos: the cluster at the end: {}",
            topology.final_state().await
        );
    }
    let hung_workers = lab.stop_workers().await;
    let last = final_state(&lab, hung_workers).await?;
    let history = std::mem::take(&mut *lab.history.lock().unwrap());
    let mut summary = checker::check(&history, &last, lab.plan.lease);
    if let Some(database) = &lab.database {
        let ledger = crate::bank::ledger(database.config()).await?;
        let (workload, accounts) = (lab.plan.workload, lab.plan.names);
        crate::bank::check(&history, Some(&ledger), workload, accounts, &mut summary);
    }
    print_summary(&lab.plan, &summary, started.elapsed());
    if let Some(path) = &lab.plan.history {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        for entry in &history {
            serde_json::to_writer(&mut file, entry)?;
            file.write_all(b"\n")?;
        }
        eprintln!("chaos: history written to {}", path.display());
    }
    if let Some(path) = &lab.plan.json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
    }
    Ok(summary)
}

/// The registers' values, and the lock keys still there once every lease has run out.
async fn final_state(lab: &Lab, hung_workers: Vec<u32>) -> Result<Final, BoxError> {
    let resource = LockClient::connect(lab.resource.url()).await?;
    let mut registers = BTreeMap::new();
    for n in 0..lab.plan.names {
        let name = format!("chaos:{n}");
        let value: Option<String> = resource.redis().hget(register_key(&name), "value").await?;
        registers.insert(name, value.and_then(|v| v.parse().ok()).unwrap_or(0));
    }
    resource.shutdown().await;

    // Killed or paused workers' holds expire within a lease; give them two, and a fair
    // lock's queue the 12 s its keys outlive the last attempt of a waiting client (twice
    // the place window, see src/lease.rs): a killed worker never leaves the queue.
    let url = lab.locks.url();
    let locks = LockClient::connect(&url).await?;
    let deadline = tokio::time::Instant::now() + lab.plan.lease * 2 + Duration::from_millis(12_500);
    let keys_left = loop {
        let mut left = Vec::new();
        for lock in locks.list("*").await? {
            left.push(format!("{} (owners {:?})", lock.name, lock.owners));
        }
        for n in 0..lab.plan.names {
            // The naive lock's key, and the other kinds' and layouts' keys (which
            // `list` does not show); a writer's mark outlives a release by at most 2 s, and a fair
            // lock's queue a waiter by at most 4 s, within the wait below.
            let keys = [
                format!("naive:{{chaos:{n}}}"),
                // Redisson's layout: the mutex's or the read-write lock's hash (a read
                // hold's timeout key carries its own expiry).
                format!("chaos:{n}"),
                format!("holdlock:{{chaos:{n}}}:rw"),
                format!("holdlock:{{chaos:{n}}}:rw:leases"),
                format!("holdlock:{{chaos:{n}}}:sem"),
                format!("holdlock:{{chaos:{n}}}:sem:leases"),
                format!("holdlock:{{chaos:{n}}}:fair"),
                format!("holdlock:{{chaos:{n}}}:fair:queue"),
                format!("holdlock:{{chaos:{n}}}:fair:alive"),
            ];
            for key in keys {
                if locks.redis().exists::<u32, _>(key.as_str()).await? > 0 {
                    left.push(key);
                }
            }
            // Redisson's semaphore keeps its count of free permits for good: every
            // permit must be back, and no permit's deadline left.
            let count = format!("chaos:{n}");
            if let Some(at) = left.iter().position(|key| *key == count) {
                let value: Option<String> = locks.redis().get(count.as_str()).await.ok().flatten();
                if value.as_deref() == Some(&crate::worker::PERMITS.to_string()) {
                    left.remove(at);
                } else if let Some(value) = value {
                    left[at] = format!(
                        "{count} (free permits {value} of {})",
                        crate::worker::PERMITS
                    );
                }
            }
            let deadlines = format!("{{chaos:{n}}}:timeout");
            if locks.redis().exists::<u32, _>(deadlines.as_str()).await? > 0 {
                left.push(deadlines);
            }
        }
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    locks.shutdown().await;
    Ok(Final {
        registers: Some(registers),
        keys_left,
        hung_workers,
        failed_workers: lab.failed_workers.clone(),
    })
}

/// Checks a history written by `--history` again, and prints the summary (without
/// the final state, which is not in it: the registers' values and the keys left are
/// not checked).
pub fn recheck(path: &Path, plan: &Plan) -> Result<Summary, BoxError> {
    let text = std::fs::read_to_string(path)?;
    let history = text
        .lines()
        .map(serde_json::from_str::<Entry>)
        .collect::<Result<Vec<_>, _>>()?;
    let mut summary = checker::check(&history, &Final::default(), plan.lease);
    if plan.workload.is_bank() {
        crate::bank::check(&history, None, plan.workload, plan.names, &mut summary);
    }
    print_summary(plan, &summary, Duration::ZERO);
    if let Some(path) = &plan.json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
    }
    Ok(summary)
}

fn print_summary(plan: &Plan, summary: &Summary, took: Duration) {
    let mut out = String::new();
    let mut row = |label: &str, value: String| out.push_str(&format!("  {label:<44} {value}\n"));
    row("lock", plan.kind.name().to_owned());
    row("seed", plan.seed.to_string());
    if plan.cluster {
        row(
            "lock server",
            "cluster: 3 primaries, 1 replica each".to_owned(),
        );
    }
    row("ran for", format!("{:.0} s", took.as_secs_f64()));
    let counts = [
        (
            "worker processes (incl. replacements)",
            u64::from(summary.workers_started),
        ),
        (
            "  of them Java Redisson workers",
            u64::from(summary.java_workers_started),
        ),
        ("operations recorded", summary.operations),
        ("lock calls", summary.lock_calls),
        ("acquisitions", summary.acquisitions),
        (
            "  of them by Java Redisson workers",
            summary.java_acquisitions,
        ),
        ("nested acquisitions", summary.nested_acquisitions),
        (
            "nested acquisitions that failed (error)",
            summary.nested_errors,
        ),
        ("timed out waiting (busy)", summary.busy),
        ("lock call errors", summary.errors),
        (
            "lock calls cut off at their deadline",
            summary.cut_off_at_deadline,
        ),
        ("lost signals", summary.lost_signals),
        (
            "releases that found the hold gone",
            summary.releases_not_held,
        ),
        (
            "holds that spanned a restart",
            summary.holds_across_restarts,
        ),
        ("renewals seen to land", summary.renewals_seen),
        ("worker stalls (both probes, not paused)", summary.stalls),
        ("  the longest of them, ms", summary.longest_stall_ms),
    ];
    for (label, count) in counts {
        row(label, count.to_string());
    }
    for (what, outcomes) in [("reads", &summary.reads), ("writes", &summary.writes)] {
        for (outcome, count) in outcomes {
            row(&format!("fenced {what}: {outcome}"), count.to_string());
        }
    }
    row("registers' final total", summary.register_total.to_string());
    if let Some(bank) = &summary.bank {
        row("bank workload", bank.workload.to_owned());
        row("bank accounts", bank.accounts.to_string());
        row("transfers begun", bank.transfers_begun.to_string());
        for (outcome, count) in &bank.outcomes {
            row(&format!("transfers: {outcome}"), count.to_string());
        }
        row(
            "  unknown or unreported, in the ledger",
            bank.unknown_in_the_ledger.to_string(),
        );
        row("ledger rows", bank.ledger_rows.to_string());
        row(
            "balances' total (expected)",
            match bank.final_total {
                Some(total) => format!("{total} ({})", bank.expected_total),
                None => format!("not read ({})", bank.expected_total),
            },
        );
    }
    for (fault, count) in &summary.faults {
        row(&format!("fault: {fault}"), count.to_string());
    }
    let counts = [
        (
            "overlaps excused: a holder was paused",
            summary.overlaps_after_pause,
        ),
        (
            "overlaps excused: the lock server restarted",
            summary.overlaps_after_restart,
        ),
        (
            "overlaps excused: a holder's process stalled",
            summary.overlaps_after_stall,
        ),
        (
            "overlaps excused: a Redisson holder cut off",
            summary.overlaps_java_not_told,
        ),
        ("token regressions", summary.token_regressions),
        (
            "Redisson tokens started over after a restart",
            summary.java_tokens_started_over,
        ),
        (
            "fair calls: pairs whose order was checked",
            summary.fifo_pairs_checked,
        ),
        (
            "fair calls served out of order after a fault",
            summary.passed_over_after_fault,
        ),
        (
            "fair calls passed over behind a Redisson waiter cut off",
            summary.passed_over_behind_java_cut_off,
        ),
        (
            "Java fair waits served from a place kept",
            summary.java_waits_in_a_kept_place,
        ),
        (
            "Java fair releases that could not tell",
            summary.java_fair_releases_not_told,
        ),
    ];
    for (label, count) in counts {
        row(label, count.to_string());
    }
    for (kind, count) in &summary.violations {
        row(&format!("VIOLATION: {kind}"), count.to_string());
    }
    row("violations", summary.violation_count().to_string());
    println!("chaos summary\n{out}");
    for example in &summary.examples {
        println!("  e.g. {example}");
    }
    let verdict = if summary.violation_count() == 0 {
        "0 violations"
    } else {
        "VIOLATIONS FOUND"
    };
    println!("chaos: {verdict}");
}
