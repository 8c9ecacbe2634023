//! W4p: W4's hand-off with its two workers in two processes, as in production. This
//! process is worker 0; worker 1 is a second process, started by the command the bench
//! was given ([`Bench::with_peer`]), that runs [`serve_peer`]. The two take turns over
//! the second process's stdin and stdout, a line a step, and each times the hand-offs
//! it receives: from the start of the release in the other process to its own take
//! returning, by the system clock both processes read. Next to the same hand-off of the
//! bare lock with `PUBLISH` between the same two processes, in alternating blocks, and
//! with the commands the clients sent a hand-off for each (on a single server).
//!
//! The lines, from this process: `floor <key> <hand-offs>`, `lock <name> <hand-offs>`
//! or `quit`; from the second: `ready` once it can start. Then each worker, on taking
//! the lock, says `acquired`, and on releasing it (but after the last take of a block)
//! `released <unix ns>`, its release's start; the second process ends a block with
//! `samples <ns>,<ns>,…`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fred::clients::{Client, SubscriberClient};
use fred::interfaces::{ClientLike, EventInterface};
use fred::types::scripts::Script;
use fred::types::{InfoKind, Message};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::sync::broadcast;

use super::exclusive::Exclusive;
use super::floors::{BareLock, RELEASE_AND_PUBLISH, subscribed};
use super::samples::Samples;
use super::{Bench, BenchResult, Figure, Goal, Unit, Workload};
use crate::{LockClient, LockGuard};

/// Starts the second process of W4p: a command that runs [`serve_peer`] with a client of
/// the same deployment, reading its stdin and writing its stdout (`holdlock bench`
/// gives its own executable, as `holdlock bench --peer`).
pub type PeerCommand = Arc<dyn Fn() -> std::process::Command + Send + Sync>;

/// How long a worker waits for the other's next line before it gives up on the run.
const LINE_WAIT: Duration = Duration::from_secs(60);

/// Blocks of each kind, alternating (as W4).
const BLOCKS: u64 = 4;

/// How long after a block its commands are counted.
const SETTLE: Duration = Duration::from_millis(500);

/// The floor of W4p.
const FLOOR: &str = "bare lock + PUBLISH, two processes";

impl Bench {
    /// W4p: W4's hand-offs of the mutex between this process and a second one.
    pub(super) async fn handoff_between_processes(&self) -> BenchResult<Vec<Figure>> {
        let Some(command) = &self.peer else {
            return Err("W4p needs a second process: run it with `holdlock bench`".into());
        };
        let mut command = tokio::process::Command::from(command());
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("W4p: the second process has no pipes".into());
        };
        let mut link = Link::new(output, input);

        let workload = Workload::W4p;
        let per_block = self.settings.handoffs.div_ceil(BLOCKS);
        let (name, key) = (self.name("w4p"), self.key("w4p:bare"));
        let mut floor_side = Side::bare(self.redis(), &key, 0).await?;
        let mut lock_side = Side::Lock {
            client: self.clients[0].clone(),
            name: name.clone(),
            guard: None,
        };
        let (mut floor, mut samples) = (Samples::default(), Samples::default());
        let (mut floor_commands, mut lock_commands) = (0, 0);
        for block in 0..BLOCKS {
            (self.progress)(workload, block * per_block, BLOCKS * per_block);
            for (side, what, times, commands) in [
                (
                    &mut floor_side,
                    key.as_str(),
                    &mut floor,
                    &mut floor_commands,
                ),
                (
                    &mut lock_side,
                    name.as_str(),
                    &mut samples,
                    &mut lock_commands,
                ),
            ] {
                let before = commands_sent(self.redis()).await?;
                let word = side.word();
                link.send(&format!("{word} {what} {per_block}")).await?;
                link.expect("ready").await?;
                times.extend(ping_pong(0, per_block, side, &mut link).await?);
                times.extend(link.samples().await?);
                // Counted once what a block leaves to do is done: a waiting room keeps
                // its subscription 200 ms after its last wait, then unsubscribes.
                tokio::time::sleep(SETTLE).await;
                *commands += commands_sent(self.redis()).await?.saturating_sub(before);
            }
        }
        link.send("quit").await?;
        child.wait().await?;
        floor_side.close().await;

        let handoffs = (BLOCKS * per_block) as f64;
        Ok(vec![
            Figure::new(
                workload,
                "hand-off p50",
                samples.percentile(50.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(50.0))
            .goal(Goal::RatioAtMost(1.0)),
            Figure::new(
                workload,
                "hand-off p90",
                samples.percentile(90.0),
                Unit::Millis,
            )
            .floor(FLOOR, floor.percentile(90.0)),
            Figure::new(
                workload,
                "commands sent a hand-off",
                lock_commands as f64 / handoffs,
                Unit::Count,
            )
            .floor(FLOOR, floor_commands as f64 / handoffs),
        ])
    }
}

/// W4p's second process: worker 1 of each block this process's stdin asks for, on
/// `client`, until it says `quit` (see the module docs). Returns when it does, or
/// fails if the other process goes away or breaks the protocol.
///
/// # Errors
/// Redis's or the lock's errors, or a line that is not the protocol's.
pub async fn serve_peer(client: LockClient) -> BenchResult<()> {
    let mut link = Link::new(tokio::io::stdin(), tokio::io::stdout());
    let mut floor_side = None;
    let mut lock_side;
    loop {
        let line = link.recv().await?;
        let mut words = line.split(' ');
        let (word, what, handoffs) = (words.next(), words.next(), words.next());
        let side = match (word, what) {
            (Some("quit"), None) => break,
            (Some("floor"), Some(key)) => match &mut floor_side {
                Some(side) => side,
                None => floor_side.insert(Side::bare(client.redis(), key, 1).await?),
            },
            (Some("lock"), Some(name)) => {
                lock_side = Side::Lock {
                    client: client.clone(),
                    name: name.to_owned(),
                    guard: None,
                };
                &mut lock_side
            }
            _ => return Err(format!("W4p: not a command: {line:?}").into()),
        };
        let handoffs: u64 = handoffs
            .and_then(|count| count.parse().ok())
            .ok_or_else(|| format!("W4p: no count in {line:?}"))?;
        link.send("ready").await?;
        let samples = ping_pong(1, handoffs, side, &mut link).await?;
        let nanos: Vec<String> = samples
            .iter()
            .map(|sample| sample.as_nanos().to_string())
            .collect();
        link.send(&format!("samples {}", nanos.join(","))).await?;
    }
    if let Some(side) = floor_side {
        side.close().await;
    }
    Ok(())
}

/// One block of `handoffs` hand-offs of `side`'s lock, as `worker` (0 takes turns 0, 2,
/// 4…, 1 the odd ones), the other worker at the end of `link`: the hand-offs this
/// worker received.
async fn ping_pong<R, W>(
    worker: u64,
    handoffs: u64,
    side: &mut Side,
    link: &mut Link<R, W>,
) -> BenchResult<Samples>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut samples = Samples::with_capacity(handoffs);
    for turn in 0..=handoffs {
        if turn % 2 != worker {
            // The other's turn: it takes the lock, then this worker asks for it.
            link.expect("acquired").await?;
            continue;
        }
        // The other worker holds the lock (except at turn 0).
        side.take(turn > 0).await?;
        let taken_at = unix_nanos();
        link.send("acquired").await?;
        if turn > 0 {
            let released_at = link.released().await?;
            samples.push(Duration::from_nanos(taken_at.saturating_sub(released_at)));
        }
        // Held 1–10 ms (as W4) while the other worker is already waiting.
        tokio::time::sleep(Duration::from_millis(1 + turn * 7 % 10)).await;
        // The block's last release is waited for by nobody.
        let waited_for = turn < handoffs;
        let released_at = unix_nanos();
        side.release(waited_for).await?;
        if waited_for {
            link.send(&format!("released {released_at}")).await?;
        }
    }
    Ok(samples)
}

/// The lock a worker hands over: the bare one, or holdlock's mutex.
enum Side {
    /// The bare lock; a waiter hears the release on a channel of its own.
    Bare {
        lock: BareLock,
        key: String,
        release: Script,
        /// Where the other worker hears this one's releases.
        to_other: String,
        subscriber: SubscriberClient,
        messages: broadcast::Receiver<Message>,
    },
    /// holdlock's mutex, taken with `lock()`.
    Lock {
        client: LockClient,
        name: String,
        guard: Option<LockGuard>,
    },
}

impl Side {
    /// The bare lock `key` for `worker`, subscribed to its own channel.
    async fn bare(redis: &Client, key: &str, worker: u64) -> BenchResult<Self> {
        let channel = |worker: u64| format!("{key}:to{worker}");
        let subscriber = subscribed(redis, &channel(worker)).await?;
        let release = Script::from_lua(RELEASE_AND_PUBLISH);
        release.load(redis).await?;
        Ok(Self::Bare {
            lock: BareLock::new(redis.clone()).await?,
            key: key.to_owned(),
            release,
            to_other: channel(1 - worker),
            messages: subscriber.message_rx(),
            subscriber,
        })
    }

    /// The block's first word.
    fn word(&self) -> &'static str {
        match self {
            Self::Bare { .. } => "floor",
            Self::Lock { .. } => "lock",
        }
    }

    /// Takes the lock, after the other worker's release if it `held` it.
    async fn take(&mut self, held: bool) -> BenchResult<()> {
        match self {
            Self::Bare {
                lock,
                key,
                messages,
                ..
            } => {
                if held {
                    messages.recv().await?;
                }
                if !lock.take(key).await? {
                    return Err("bare hand-off: not free after the release".into());
                }
            }
            Self::Lock {
                client,
                name,
                guard,
            } => *guard = Some(Exclusive::Mutex.take(client, name).await?),
        }
        Ok(())
    }

    /// Releases the lock this worker holds, telling the other worker if it `waits`.
    async fn release(&mut self, waits: bool) -> BenchResult<()> {
        match self {
            Self::Bare { lock, key, .. } if !waits => lock.release(key).await?,
            Self::Bare {
                lock,
                key,
                release,
                to_other,
                ..
            } => {
                let released: i64 = release
                    .evalsha(
                        lock.redis(),
                        key.as_str(),
                        vec![lock.token.as_str(), to_other.as_str()],
                    )
                    .await?;
                if released != 1 {
                    return Err("bare hand-off: released a key it did not hold".into());
                }
            }
            Self::Lock { guard, .. } => match guard.take() {
                Some(guard) => guard.unlock().await?,
                None => return Err("W4p: released a lock it did not hold".into()),
            },
        }
        Ok(())
    }

    async fn close(self) {
        if let Self::Bare { subscriber, .. } = self {
            let _ = subscriber.quit().await;
        }
    }
}

/// One end of the two workers' pipe: lines in, lines out.
struct Link<R, W> {
    lines: Lines<BufReader<R>>,
    out: W,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Link<R, W> {
    fn new(input: R, out: W) -> Self {
        Self {
            lines: BufReader::new(input).lines(),
            out,
        }
    }

    async fn send(&mut self, line: &str) -> BenchResult<()> {
        self.out.write_all(format!("{line}\n").as_bytes()).await?;
        Ok(self.out.flush().await?)
    }

    /// The other worker's next line.
    async fn recv(&mut self) -> BenchResult<String> {
        match tokio::time::timeout(LINE_WAIT, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("W4p: the other process went away".into()),
            Ok(Err(error)) => Err(error.into()),
            Err(_) => Err(format!("W4p: no word from the other process in {LINE_WAIT:?}").into()),
        }
    }

    async fn expect(&mut self, word: &str) -> BenchResult<()> {
        match self.recv().await? {
            line if line == word => Ok(()),
            line => Err(format!("W4p: {line:?} where {word:?} was due").into()),
        }
    }

    /// The start of the other worker's release, from its `released` line.
    async fn released(&mut self) -> BenchResult<u64> {
        let line = self.recv().await?;
        line.strip_prefix("released ")
            .and_then(|nanos| nanos.parse().ok())
            .ok_or_else(|| format!("W4p: {line:?} where a release was due").into())
    }

    /// The hand-offs the other worker received in a block, from its `samples` line.
    async fn samples(&mut self) -> BenchResult<Samples> {
        let line = self.recv().await?;
        let nanos = line
            .strip_prefix("samples")
            .ok_or_else(|| format!("W4p: {line:?} where the samples were due"))?;
        let mut samples = Samples::default();
        for sample in nanos
            .trim_start()
            .split(',')
            .filter(|text| !text.is_empty())
        {
            let nanos: u64 = sample
                .parse()
                .map_err(|_| format!("W4p: {sample:?} is no sample"))?;
            samples.push(Duration::from_nanos(nanos));
        }
        Ok(samples)
    }
}

/// Now by the system clock, which both processes read, in nanoseconds.
fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// The commands a client sends, and nothing but a client, in W4p's hand-offs: the
/// scripts, the bare lock's `SET` and the subscription changes (the commands scripts call
/// are counted by `INFO` as well, so they are left out).
const SENT: [&str; 11] = [
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "fcall",
    "fcall_ro",
    "set",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
];

/// The commands of [`SENT`] the server `redis` is connected to has served
/// (`INFO commandstats`).
async fn commands_sent(redis: &Client) -> BenchResult<u64> {
    let stats: String = redis.info(Some(InfoKind::CommandStats)).await?;
    let mut sent = 0;
    for line in stats.lines() {
        let Some((name, counts)) = line
            .strip_prefix("cmdstat_")
            .and_then(|line| line.split_once(':'))
        else {
            continue;
        };
        if SENT.contains(&name) {
            sent += counts
                .strip_prefix("calls=")
                .and_then(|counts| counts.split(',').next())
                .and_then(|calls| calls.parse::<u64>().ok())
                .ok_or_else(|| format!("INFO commandstats: {line:?}"))?;
        }
    }
    Ok(sent)
}
