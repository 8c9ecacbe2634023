//! W11: a per-account service. Many tasks of one process cycle through many
//! independent locks (`lock(account:<random>)`, `unlock`), next to the same loop on the
//! bare lock (`SET NX PX` to take, an `EVALSHA` compare-and-delete to release) on plain
//! fred clients, in one run. With one client, then with the tasks split over two, then
//! one client with 1, 16 and 1,024 tasks. The figures: cycles per second, Redis's CPU
//! time per cycle (`INFO cpu`, the server's whole time, every primary's on a cluster:
//! run it on otherwise idle servers), this process's CPU time per cycle, and a cycle's
//! p50 and p99.
//!
//! Each size runs on one `current_thread` runtime in a thread of its own, as a
//! single-threaded service would, with clients built there from the first client's
//! fred configuration (the same servers, credentials and TLS).

use std::time::{Duration, Instant};

use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::config::Config;

use super::floors::BareLock;
use super::samples::{Random, Samples, cpu_time, millis};
use super::server::{redis_cpu, script_calls};
use super::{Bench, BenchError, BenchResult, Figure, Goal, Unit, Workload, on_own_runtime};
use crate::LockClient;

/// One size of W11: how many clients share how many tasks, and its figures' labels.
struct Size {
    clients: usize,
    /// `None`: the settings' `account_tasks` (256).
    tasks: Option<usize>,
    /// cycles/s, Redis CPU per cycle, client CPU per cycle, scripts per cycle, p50,
    /// p99.
    labels: [&'static str; 6],
}

/// A [`Size`] whose labels end with `$of` ("1 client", "1 client, 16 tasks").
macro_rules! size {
    ($clients:literal, $tasks:expr, $of:literal) => {
        Size {
            clients: $clients,
            tasks: $tasks,
            labels: [
                concat!("cycles/s, ", $of),
                concat!("Redis CPU per cycle, ", $of),
                concat!("client CPU per cycle, ", $of),
                concat!("scripts per cycle, ", $of),
                concat!("cycle p50, ", $of),
                concat!("cycle p99, ", $of),
            ],
        }
    };
}

/// The service's size (256 tasks) on one client and on two, then one client with a
/// lone task, with a handful of tasks (16), and with four times the service's tasks.
const SIZES: [Size; 5] = [
    size!(1, None, "1 client"),
    size!(2, None, "2 clients"),
    size!(1, Some(1), "1 client, 1 task"),
    size!(1, Some(16), "1 client, 16 tasks"),
    size!(1, Some(1024), "1 client, 1,024 tasks"),
];

/// The floor's name in W11's figures.
const BARE: &str = "bare lock";

/// What one size needs to run, owned (it moves to a thread of its own).
#[derive(Clone)]
struct Setup {
    config: Config,
    /// The start of every name (an account's name is `<stem>:<n>`).
    stem: String,
    tasks: usize,
    accounts: u64,
    time: Duration,
}

/// What one loop measured.
struct Measured {
    cycles: u64,
    elapsed: Duration,
    samples: Samples,
    redis_cpu: Option<Duration>,
    client_cpu: Option<Duration>,
    /// The scripts Redis ran meanwhile.
    scripts: Option<u64>,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64()
    }

    /// `cpu` per cycle, in milliseconds.
    fn per_cycle(&self, cpu: Option<Duration>) -> Option<f64> {
        cpu.map(|cpu| millis(cpu) / self.cycles.max(1) as f64)
    }
}

/// Which lock a loop takes.
#[derive(Clone, Copy)]
enum Side {
    Bare,
    Holdlock,
}

impl Bench {
    /// W11: `account_tasks` tasks cycling through `accounts` names for `account_time`,
    /// on the bare lock and then on holdlock's mutex, with one client and then two.
    pub(super) async fn accounts(&self) -> BenchResult<Vec<Figure>> {
        let mut figures = Vec::new();
        for (index, size) in SIZES.iter().enumerate() {
            let setup = Setup {
                config: self.redis().client_config(),
                stem: self.name(&format!("w11-{index}")),
                tasks: size.tasks.unwrap_or(self.settings.account_tasks),
                accounts: self.settings.accounts,
                time: self.settings.account_time,
            };
            let clients = size.clients;
            let (floor, ours) = on_own_runtime("W11", move || async move {
                let floor = measure(&setup, Side::Bare, clients).await?;
                let ours = measure(&setup, Side::Holdlock, clients).await?;
                Ok((floor, ours))
            })
            .await?;
            (self.progress)(Workload::W11, index as u64 + 1, SIZES.len() as u64);
            figures.extend(size_figures(size, &floor, &ours));
        }
        Ok(figures)
    }
}

/// The figures of one size: holdlock against the bare lock.
fn size_figures(size: &Size, floor: &Measured, ours: &Measured) -> Vec<Figure> {
    let [rate, redis_cpu, client_cpu, scripts, p50, p99] = size.labels;
    let mut figures = vec![
        Figure::new(Workload::W11, rate, ours.rate(), Unit::PerSecond)
            .floor(BARE, floor.rate())
            .goal(Goal::RatioAtLeast(1.0)),
    ];
    let cpus = [
        (redis_cpu, floor.redis_cpu, ours.redis_cpu),
        (client_cpu, floor.client_cpu, ours.client_cpu),
    ];
    for (label, floor_cpu, our_cpu) in cpus {
        if let (Some(floor_cpu), Some(our_cpu)) =
            (floor.per_cycle(floor_cpu), ours.per_cycle(our_cpu))
        {
            figures.push(
                Figure::new(Workload::W11, label, our_cpu, Unit::Millis)
                    .floor(BARE, floor_cpu)
                    .goal(Goal::RatioAtMost(1.0)),
            );
        }
    }
    if let (Some(floor_scripts), Some(our_scripts)) = (floor.scripts, ours.scripts) {
        let per_cycle = |calls: u64, of: &Measured| calls as f64 / of.cycles.max(1) as f64;
        figures.push(
            Figure::new(
                Workload::W11,
                scripts,
                per_cycle(our_scripts, ours),
                Unit::PerOp,
            )
            .floor(BARE, per_cycle(floor_scripts, floor)),
        );
    }
    for (label, p) in [(p50, 50.0), (p99, 99.0)] {
        figures.push(
            Figure::new(
                Workload::W11,
                label,
                ours.samples.percentile(p),
                Unit::Millis,
            )
            .floor(BARE, floor.samples.percentile(p)),
        );
    }
    figures
}

/// `setup.tasks` tasks over `clients` new clients, each taking and releasing random
/// names of `setup.accounts` on `side` until `setup.time` has passed.
async fn measure(setup: &Setup, side: Side, clients: usize) -> BenchResult<Measured> {
    let mut locks = Vec::with_capacity(clients);
    let mut bares = Vec::with_capacity(clients);
    for _ in 0..clients {
        match side {
            Side::Holdlock => {
                let client = LockClient::builder_from_config(setup.config.clone());
                locks.push(client.build().await?);
            }
            Side::Bare => {
                let client = Client::new(setup.config.clone(), None, None, None);
                client.init().await?;
                bares.push(BareLock::new(client).await?);
            }
        }
    }
    let probe = match side {
        Side::Holdlock => locks[0].redis().clone(),
        Side::Bare => bares[0].redis().clone(),
    };
    let locks: Vec<_> = locks.into_iter().map(std::sync::Arc::new).collect();
    let bares: Vec<_> = bares.into_iter().map(std::sync::Arc::new).collect();
    let redis_before = redis_cpu(&probe).await;
    let scripts_before = script_calls(&probe).await.ok();
    let client_before = cpu_time();
    let started = Instant::now();
    let until = started + setup.time;
    let tasks: Vec<_> = (0..setup.tasks)
        .map(|task| {
            let (stem, accounts) = (setup.stem.clone(), setup.accounts);
            let mut random = Random::new((task as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let lock = locks.get(task % clients.max(1)).cloned();
            let bare = bares.get(task % clients.max(1)).cloned();
            tokio::spawn(async move {
                let mut samples = Samples::default();
                while Instant::now() < until {
                    let name = format!("{stem}:{}", random.below(accounts));
                    let cycle = Instant::now();
                    if let Some(lock) = &lock {
                        lock.lock(&name).await?.unlock().await?;
                    } else if let Some(bare) = &bare {
                        // A name another task holds is skipped, as a refused take.
                        if !bare.take(&name).await? {
                            continue;
                        }
                        bare.release(&name).await?;
                    }
                    samples.push(cycle.elapsed());
                }
                Ok::<_, BenchError>(samples)
            })
        })
        .collect();
    let mut samples = Samples::default();
    for task in tasks {
        samples.extend(task.await??);
    }
    let elapsed = started.elapsed();
    let client_cpu = client_before
        .zip(cpu_time())
        .map(|(before, after)| after.saturating_sub(before));
    let redis_cpu = redis_before
        .zip(redis_cpu(&probe).await)
        .map(|(before, after)| after.saturating_sub(before));
    let scripts = scripts_before
        .zip(script_calls(&probe).await.ok())
        .map(|(before, after)| after.saturating_sub(before));
    for lock in &locks {
        lock.shutdown().await;
    }
    for bare in &bares {
        let _ = bare.redis().quit().await;
    }
    Ok(Measured {
        cycles: samples.len() as u64,
        elapsed,
        samples,
        redis_cpu,
        client_cpu,
        scripts,
    })
}
