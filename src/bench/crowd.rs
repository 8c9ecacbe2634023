//! W9: many clients on one lock, the mutex and then the fair lock, at two sizes and
//! on two kinds of runtime. The figures are the scripts Redis ran per acquisition
//! (the release's included, so 2 at the least) and acquisitions per second.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::clients::{Client, WithOptions};
use fred::interfaces::{ClientLike, ClusterInterface};
use fred::types::InfoKind;
use fred::types::config::{Config, Options};
use futures::StreamExt;

use super::exclusive::Exclusive;
use super::{
    Bench, BenchError, BenchResult, Figure, Goal, Progress, Unit, Workload, on_own_runtime,
};
use crate::LockClient;

/// Acquisitions per task.
const ROUNDS: u64 = 4;
/// The target of both locks, in scripts per acquisition (the release included).
const SCRIPTS_TARGET: f64 = 3.0;
/// How long a task may take before the workload is deemed stuck.
const STUCK: Duration = Duration::from_secs(300);

/// One size of W9, and the labels of its figures.
struct Crowd {
    clients: usize,
    tasks: usize,
    /// Whether its clients run on one `current_thread` runtime of their own (as many
    /// clients of one single-threaded process would), rather than on the bench's.
    own_runtime: bool,
    /// Its figures: scripts per acquisition (mutex, fair), acquisitions/s (mutex, fair).
    labels: [&'static str; 4],
}

/// The sizes W9 runs, in order.
const CROWDS: [Crowd; 3] = [
    Crowd {
        clients: 200,
        tasks: 5,
        own_runtime: false,
        labels: [
            "mutex scripts/acq, 200x5",
            "fair scripts/acq, 200x5",
            "mutex acq/s, 200x5",
            "fair acq/s, 200x5",
        ],
    },
    Crowd {
        clients: 200,
        tasks: 5,
        own_runtime: true,
        labels: [
            "mutex scripts/acq, 200x5, 1 thread",
            "fair scripts/acq, 200x5, 1 thread",
            "mutex acq/s, 200x5, 1 thread",
            "fair acq/s, 200x5, 1 thread",
        ],
    },
    Crowd {
        clients: 500,
        tasks: 2,
        own_runtime: true,
        labels: [
            "mutex scripts/acq, 500x2, 1 thread",
            "fair scripts/acq, 500x2, 1 thread",
            "mutex acq/s, 500x2, 1 thread",
            "fair acq/s, 500x2, 1 thread",
        ],
    },
];

/// What every size needs to run, owned (it may move to another thread).
#[derive(Clone)]
struct Setup {
    config: Config,
    /// The lock's name.
    name: String,
    work: Duration,
    progress: Progress,
}

impl Bench {
    /// W9: for each size, `clients` clients of the deployment with `tasks` tasks each,
    /// every task taking one lock 4 times (lock; unlock; `work` outside): with the
    /// mutex, then with the fair lock; first 200 clients × 5 tasks on the bench's own
    /// runtime, then 200 × 5 and 500 × 2 on one `current_thread` runtime of their own.
    /// Scripts are counted server-wide from `INFO commandstats` (every primary's on a
    /// cluster): run it on otherwise idle servers. The clients are built from the first client's fred
    /// configuration (the same servers, credentials, TLS and delay proxy) with the
    /// default prefix, and shut down at the end of each size.
    pub(super) async fn crowd(&self) -> BenchResult<Vec<Figure>> {
        let mut figures = Vec::new();
        for (index, crowd) in CROWDS.iter().enumerate() {
            let setup = Setup {
                config: self.redis().client_config(),
                name: self.name(&format!("w9-{index}")),
                work: self.settings.work,
                progress: Arc::clone(&self.progress),
            };
            let measured = if crowd.own_runtime {
                on_own_runtime(
                    "W9",
                    move || async move { run(&setup, &CROWDS[index]).await },
                )
                .await?
            } else {
                run(&setup, crowd).await?
            };
            figures.extend(measured);
        }
        Ok(figures)
    }
}

/// Connects the clients of `crowd`, runs both phases and shuts the clients down.
async fn run(setup: &Setup, crowd: &Crowd) -> BenchResult<Vec<Figure>> {
    let built: Vec<_> = futures::stream::iter(0..crowd.clients)
        .map(|_| LockClient::builder_from_config(setup.config.clone()).build())
        .buffer_unordered(16)
        .collect()
        .await;
    let mut clients = Vec::with_capacity(crowd.clients);
    let mut failed = None;
    for client in built {
        match client {
            Ok(client) => clients.push(client),
            Err(error) => failed = Some(error),
        }
    }
    let measured = match failed {
        Some(error) => Err(format!("W9: connecting a client failed: {error}").into()),
        None => phases(setup, crowd, &clients).await,
    };
    futures::future::join_all(clients.iter().map(LockClient::shutdown)).await;
    measured
}

/// The mutex's phase, then the fair lock's, on `clients`.
async fn phases(setup: &Setup, crowd: &Crowd, clients: &[LockClient]) -> BenchResult<Vec<Figure>> {
    let (mutex_scripts, mutex_rate) = phase(setup, crowd, clients, Exclusive::Mutex).await?;
    let (fair_scripts, fair_rate) = phase(setup, crowd, clients, Exclusive::Fair).await?;
    let [
        mutex_scripts_label,
        fair_scripts_label,
        mutex_rate_label,
        fair_rate_label,
    ] = crowd.labels;
    const MUTEX: &str = "the mutex";
    Ok(vec![
        Figure::new(
            Workload::W9,
            mutex_scripts_label,
            mutex_scripts,
            Unit::PerOp,
        )
        .goal(Goal::AtMost(SCRIPTS_TARGET)),
        Figure::new(Workload::W9, fair_scripts_label, fair_scripts, Unit::PerOp)
            .floor(MUTEX, mutex_scripts)
            .goal(Goal::AtMost(SCRIPTS_TARGET)),
        Figure::new(Workload::W9, mutex_rate_label, mutex_rate, Unit::PerSecond),
        Figure::new(Workload::W9, fair_rate_label, fair_rate, Unit::PerSecond)
            .floor(MUTEX, mutex_rate),
    ])
}

/// Every task of every client takes the lock of `kind` [`ROUNDS`] times; returns the
/// scripts run per acquisition and the acquisitions per second.
async fn phase(
    setup: &Setup,
    crowd: &Crowd,
    clients: &[LockClient],
    kind: Exclusive,
) -> BenchResult<(f64, f64)> {
    let redis = clients.first().ok_or("W9: no clients")?.redis().clone();
    let name = Arc::new(setup.name.clone());
    let work = setup.work;
    let acquisitions = (clients.len() * crowd.tasks) as u64 * ROUNDS;
    let offset = match kind {
        Exclusive::Mutex => 0,
        Exclusive::Fair => acquisitions,
    };
    let done = Arc::new(AtomicU64::new(0));
    let scripts_before = script_calls(&redis).await?;
    let started = Instant::now();
    let handles: Vec<_> = clients
        .iter()
        .flat_map(|client| std::iter::repeat_n(client, crowd.tasks))
        .map(|client| {
            let (client, name) = (client.clone(), Arc::clone(&name));
            let (done, progress) = (Arc::clone(&done), Arc::clone(&setup.progress));
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    kind.take(&client, &name).await?.unlock().await?;
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if finished % 500 == 0 {
                        progress(Workload::W9, offset + finished, 2 * acquisitions);
                    }
                    tokio::time::sleep(work).await;
                }
                Ok::<_, BenchError>(())
            })
        })
        .collect();
    for handle in handles {
        tokio::time::timeout(STUCK, handle)
            .await
            .map_err(|_| "W9: a task is stuck")???;
    }
    let rate = acquisitions as f64 / started.elapsed().as_secs_f64();
    let scripts = script_calls(&redis).await? - scripts_before;
    Ok((scripts as f64 / acquisitions as f64, rate))
}

/// The scripts the server has run so far (see [`count_scripts`]); on a cluster, every
/// primary's summed.
pub(super) async fn script_calls(redis: &Client) -> BenchResult<u64> {
    let mut scripts = 0;
    for node in each_primary(redis)? {
        let stats: String = node.info(Some(InfoKind::CommandStats)).await?;
        scripts += count_scripts(&stats);
    }
    Ok(scripts)
}

/// `redis` as it sends to each primary in turn: the server itself on a single server,
/// every primary of the routing table on a cluster (so that a server-wide count, of
/// scripts, keys or CPU time, covers the whole cluster, not the node one command
/// happens to reach).
///
/// # Errors
///
/// A cluster whose routing table the client does not know.
pub(super) fn each_primary(redis: &Client) -> BenchResult<Vec<WithOptions<Client>>> {
    if !redis.is_clustered() {
        return Ok(vec![redis.with_options(&Options::default())]);
    }
    let primaries = redis
        .cached_cluster_state()
        .map(|state| state.unique_primary_nodes())
        .unwrap_or_default();
    if primaries.is_empty() {
        return Err("the cluster's primaries are not known".into());
    }
    Ok(primaries
        .into_iter()
        .map(|primary| redis.with_cluster_node(primary))
        .collect())
}

/// The calls of `EVAL`, `EVALSHA` and `FCALL` (and their read-only forms) in the text
/// of `INFO commandstats`.
fn count_scripts(stats: &str) -> u64 {
    const SCRIPTS: [&str; 6] = [
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ];
    stats
        .lines()
        .filter_map(|line| {
            let (command, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            if !SCRIPTS.contains(&command) {
                return None;
            }
            let calls = fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="));
            calls?.parse::<u64>().ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_calls_are_read_from_commandstats() {
        let stats = "# Commandstats\r\n\
            cmdstat_get:calls=7,usec=3,usec_per_call=0.43,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=2\r\n\
            cmdstat_eval:calls=3,usec=40,usec_per_call=13.33,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_fcall:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha_ro:calls=1,usec=1,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_script|load:calls=9,usec=99,usec_per_call=11.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(super::count_scripts(stats), 129);
        assert_eq!(super::count_scripts(""), 0);
    }
}
