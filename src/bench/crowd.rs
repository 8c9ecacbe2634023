//! W9: many clients on one lock, the mutex and then the fair lock, at two sizes and
//! on two kinds of runtime. The figures are the scripts Redis ran per acquisition
//! (the release's included, so 2 at the least) and acquisitions per second.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::interfaces::ClientLike;
use fred::types::config::Config;
use futures::StreamExt;

use super::exclusive::Exclusive;
use super::server::script_calls;
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
