//! `holdlock top`: a live view of the locks under a pattern, refreshed every second,
//! the most contended and longest held first, with the waits that have lasted past
//! their deadlock check and any deadlock among them.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use holdlock::{LockClient, LockInfo, LockKind, LongWait, WaitGraph};
use tokio::time::Instant;

use crate::duration::{format_duration, parse_duration};
use crate::exit::{EX_OK, Failure};
use crate::table::render_columns;
use crate::waits::deadlock_lines;

#[derive(Debug, Args)]
pub(crate) struct TopArgs {
    /// Glob over lock names (`*`, `?`, `[abc]`).
    #[arg(default_value = "*")]
    pub(crate) pattern: String,
    /// Print one snapshot and exit.
    #[arg(long)]
    once: bool,
    /// Print JSON (with --once: the snapshot; else one line per refresh).
    #[arg(long)]
    json: bool,
    /// Time between refreshes.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
}

/// When each (lock, kind, owners) hold was first seen, so that "held" counts across
/// refreshes (Redis does not keep when a hold began).
#[derive(Default)]
struct FirstSeen(HashMap<(String, LockKind, Vec<String>), Instant>);

impl FirstSeen {
    /// Forgets holds no longer seen, and returns how long each of `locks` has been seen.
    fn update(&mut self, locks: &[LockInfo], now: Instant) -> Vec<Option<Duration>> {
        let keys: Vec<_> = locks.iter().map(hold_key).collect();
        self.0.retain(|key, _| keys.contains(key));
        keys.into_iter()
            .map(|key| {
                let first = *self.0.entry(key).or_insert(now);
                (first < now).then(|| now - first)
            })
            .collect()
    }
}

fn hold_key(info: &LockInfo) -> (String, LockKind, Vec<String>) {
    let owners = info.owners.iter().map(|owner| owner.id.clone()).collect();
    (info.name.clone(), info.kind, owners)
}

pub(crate) async fn top(client: &LockClient, args: &TopArgs) -> Result<u8, Failure> {
    let mut seen = FirstSeen::default();
    let live = !args.once && !args.json && io::stdout().is_terminal();
    loop {
        let listing = client
            .list_report(&args.pattern)
            .await
            .map_err(|error| Failure::from_lock_error("cannot list locks", &error))?;
        let graph = client
            .waits()
            .await
            .map_err(|error| Failure::from_lock_error("cannot read the waits", &error))?;
        let now = Instant::now();
        let held = seen.update(&listing.locks, now);
        let mut rows: Vec<Row<'_>> = listing
            .locks
            .iter()
            .zip(held)
            .map(|(info, held)| Row {
                info,
                held,
                long_waits: long_waits_for(&graph, info),
            })
            .collect();
        // Most contended (someone waits; longest first) first, then the longest held,
        // then the shortest lease left.
        rows.sort_by(|a, b| {
            let longest = |row: &Row<'_>| row.long_waits.first().map(|wait| wait.waited);
            (b.info.waiting, longest(b))
                .cmp(&(a.info.waiting, longest(a)))
                .then(b.held.cmp(&a.held))
                .then(a.info.ttl.cmp(&b.info.ttl))
                .then(a.info.name.cmp(&b.info.name))
                .then(a.info.kind.cmp(&b.info.kind))
        });
        let output = if args.json {
            json(&rows, &graph)
        } else {
            table(&rows) + deadlock_lines(&graph.deadlocks).trim_end()
        };
        let mut stdout = io::stdout().lock();
        if live {
            // Home and clear, then the table.
            let _ = write!(stdout, "\x1b[H\x1b[2J");
        }
        let _ = writeln!(stdout, "{output}");
        let _ = stdout.flush();
        drop(stdout);
        if args.once {
            return Ok(EX_OK);
        }
        tokio::time::sleep(args.interval).await;
    }
}

/// One lock in the view.
struct Row<'a> {
    info: &'a LockInfo,
    /// Since the hold was first seen.
    held: Option<Duration>,
    /// The waits for it past their deadlock check, longest first.
    long_waits: Vec<&'a LongWait>,
}

/// The waits in `graph` for the lock `info`, longest first (as `graph` lists them).
fn long_waits_for<'a>(graph: &'a WaitGraph, info: &LockInfo) -> Vec<&'a LongWait> {
    graph
        .waits
        .iter()
        .filter(|long| long.wait.kind == info.kind && long.wait.name == info.name)
        .collect()
}

/// NAME, KIND, OWNERS (id x holds), TTL, TOKEN, WAITING (`yes`, or how many waits
/// have lasted past their deadlock check and the longest), HELD (since first seen).
fn table(rows: &[Row<'_>]) -> String {
    let mut lines = vec![
        ["NAME", "KIND", "OWNERS", "TTL", "TOKEN", "WAITING", "HELD"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for Row {
        info,
        held,
        long_waits,
    } in rows
    {
        let owners: Vec<String> = info
            .owners
            .iter()
            .map(|owner| match &owner.data {
                Some(data) => format!("{} x{} ({data})", owner.id, owner.hold_count),
                None => format!("{} x{}", owner.id, owner.hold_count),
            })
            .collect();
        lines.push(vec![
            info.name.clone(),
            info.kind.to_string(),
            if owners.is_empty() {
                "-".to_owned()
            } else {
                owners.join(", ")
            },
            info.ttl.map_or_else(|| "none".to_owned(), format_duration),
            info.fencing_token
                .map_or_else(|| "-".to_owned(), |token| token.to_string()),
            match long_waits.first() {
                Some(longest) => format!(
                    "{} for {}",
                    long_waits.len(),
                    format_duration(longest.waited)
                ),
                None if info.waiting => "yes".to_owned(),
                None => "-".to_owned(),
            },
            held.map_or_else(|| "-".to_owned(), format_duration),
        ]);
    }
    render_columns(&lines)
}

/// `{"locks": [LockInfo + "held_ms" + "long_waits": [LongWait]], "deadlocks":
/// [[WaitFor]]}`, in the table's order.
fn json(rows: &[Row<'_>], graph: &WaitGraph) -> String {
    let locks: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let mut value = serde_json::to_value(row.info).unwrap_or(serde_json::Value::Null);
            if let Some(object) = value.as_object_mut() {
                let held_ms =
                    (row.held).map(|held| u64::try_from(held.as_millis()).unwrap_or(u64::MAX));
                object.insert("held_ms".to_owned(), held_ms.into());
                let long_waits = serde_json::to_value(&row.long_waits);
                object.insert("long_waits".to_owned(), long_waits.unwrap_or_default());
            }
            value
        })
        .collect();
    let deadlocks = serde_json::to_value(&graph.deadlocks).unwrap_or_default();
    serde_json::json!({ "locks": locks, "deadlocks": deadlocks }).to_string()
}
