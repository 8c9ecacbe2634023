//! `holdlock bench`: the workloads of the library's `bench` module (`src/bench/`, with
//! the `bench` feature) on two clients of the deployment given by the connection
//! options, with progress on stderr.

use std::io::{self, IsTerminal};
use std::time::Duration;

use clap::Args;
use holdlock::LockClient;
use holdlock::bench::{
    self as workloads, Bench, DelayProxy, Figure, Goal, Settings, Workload, ping_cost,
};

use crate::connect::{ConnectionArgs, connect, connect_at};
use crate::duration::parse_duration;
use crate::exit::{EX_NOT_FOUND, EX_OK, EX_SOFTWARE, EX_USAGE, Failure};

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Which workloads to run, comma-separated: W1, W1r, W1s, W2, W3, W3f, W4, W4f, W6, W7,
    /// W8, and W4p (W4 between this process and a second one), W9 (200 clients), W10 (1,000,000 held locks; 100,000 with --quick) and
    /// W11 (256, then 1, 16 and 1,024 tasks over 100,000 names, 5 s a loop; 1 s with
    /// --quick), only when named [default: all but W9, W10 and W11]
    #[arg(long, value_delimiter = ',', value_parser = parse_workload)]
    workloads: Vec<Workload>,
    /// Run a tenth of the default sizes.
    #[arg(long)]
    quick: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Measure at a network distance: every connection goes through a local proxy that
    /// delays each direction by DUR (e.g. 100us; a single server's redis:// URL only).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    latency: Option<Duration>,
    /// Be W4p's second process: the worker its first process talks to over stdin and
    /// stdout (started by `holdlock bench` itself).
    #[arg(long, hide = true)]
    peer: bool,
}

/// `holdlock bench`: runs the workloads on two clients of this Redis and prints the
/// figures. Exits 1 if a correctness check failed (a lost increment, two winners).
pub(crate) async fn bench(
    client: &LockClient,
    connection: &ConnectionArgs,
    args: &BenchArgs,
) -> Result<u8, Failure> {
    if args.peer {
        return match workloads::serve_peer(client.clone()).await {
            Ok(()) => Ok(EX_OK),
            Err(error) => Err(Failure::new(
                EX_SOFTWARE,
                format!("W4p's second process: {error}"),
            )),
        };
    }
    // In the network-distance mode both clients (and so every floor measured on their
    // connections) reach Redis through the delay proxy, which is measured first.
    let mut proxy_figure = None;
    let (_proxy, first, second, second_url) = match args.latency {
        None => (
            None,
            client.clone(),
            connect(connection, None).await?,
            connection.resolved_url(),
        ),
        Some(latency) => {
            let url = connection.resolved_url();
            let (upstream, through) = DelayProxy::upstream_of(&url)
                .map_err(|reason| Failure::new(EX_USAGE, format!("--latency: {reason}")))?;
            let proxy = DelayProxy::start(upstream, latency).map_err(|error| {
                Failure::new(
                    EX_SOFTWARE,
                    format!("cannot start the delay proxy: {error}"),
                )
            })?;
            let proxied = through(proxy.address());
            let first = connect_at(connection, &proxied, None).await?;
            let second = connect_at(connection, &proxied, None).await?;
            let cost = ping_cost(client.redis(), first.redis(), 2_000).await;
            proxy_figure = Some(cost.map_err(|error| {
                Failure::new(EX_SOFTWARE, format!("measuring the proxy failed: {error}"))
            })?);
            (Some(proxy), first, second, proxied)
        }
    };
    let settings = if args.quick {
        Settings::quick()
    } else {
        Settings::default()
    };
    let workloads = if args.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.workloads.clone()
    };
    let bench = Bench::new(
        [first.clone(), second.clone()],
        settings,
        progress_printer(),
    )
    .with_peer(peer_command(connection, second_url));
    let figures = bench.run(&workloads).await;
    second.shutdown().await;
    if args.latency.is_some() {
        first.shutdown().await;
    }
    let mut figures =
        figures.map_err(|error| Failure::new(EX_SOFTWARE, format!("benchmark failed: {error}")))?;
    figures.splice(0..0, proxy_figure);
    eprint!(
        "{}",
        if io::stderr().is_terminal() {
            "\r\x1b[K"
        } else {
            ""
        }
    );
    if args.json {
        println!("{}", workloads::json(&figures));
    } else {
        print!("{}", workloads::table(&figures));
    }
    let broken = figures.iter().any(|figure: &Figure| {
        matches!(figure.goal, Some(Goal::Exactly(_))) && figure.met() == Some(false)
    });
    Ok(if broken { EX_NOT_FOUND } else { EX_OK })
}

/// W4p's second process: this executable as `holdlock bench --peer`, connected as the
/// second client is (at `url`, given in its environment: a password stays out of the
/// process list).
fn peer_command(connection: &ConnectionArgs, url: String) -> workloads::PeerCommand {
    let args = connection.args();
    std::sync::Arc::new(move || {
        let program = std::env::current_exe().unwrap_or_else(|_| "holdlock".into());
        let mut command = std::process::Command::new(program);
        command.args(&args).args(["bench", "--peer"]);
        command.env("HOLDLOCK_URL", &url);
        command
    })
}

/// Reports progress on stderr at most twice a second: in place on a terminal, else a line each.
fn progress_printer() -> workloads::Progress {
    let terminal = io::stderr().is_terminal();
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    std::sync::Arc::new(move |workload: Workload, done: u64, total: u64| {
        let Ok(mut last) = last.lock() else { return };
        if last.is_some_and(|at| at.elapsed() < Duration::from_millis(500)) {
            return;
        }
        *last = Some(std::time::Instant::now());
        if terminal {
            eprint!("\r\x1b[K{} {done}/{total}", workload.label());
        } else {
            eprintln!("{} {done}/{total}", workload.label());
        }
    })
}

/// The workloads `holdlock bench --workload` runs (W5 runs in `cargo bench` only, `net`
/// is `--latency`'s).
fn runnable(workload: Workload) -> bool {
    !matches!(workload, Workload::W5 | Workload::Net)
}

fn parse_workload(text: &str) -> Result<Workload, String> {
    match Workload::parse(text) {
        Some(Workload::W5) => Err("W5 runs only in `cargo bench --bench lock`".into()),
        Some(Workload::Net) => Err("`net` is measured by --latency".into()),
        Some(workload) => Ok(workload),
        None => {
            let labels: Vec<&str> = Workload::EVERY
                .into_iter()
                .filter(|workload| runnable(*workload))
                .map(Workload::label)
                .collect();
            let (last, rest) = labels.split_last().unwrap_or((&"", &[]));
            Err(format!(
                "unknown workload {text:?}; expected {} or {last}",
                rest.join(", ")
            ))
        }
    }
}
