//! `holdlock top`: a live view of the locks under a pattern, refreshed every second,
//! the most contended and longest held first.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use holdlock::{LockClient, LockInfo, LockKind};
use tokio::time::Instant;

use crate::duration::{format_duration, parse_duration};
use crate::exit::{EX_OK, Failure};
use crate::table::render_columns;

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
        let now = Instant::now();
        let held = seen.update(&listing.locks, now);
        let mut rows: Vec<(&LockInfo, Option<Duration>)> = listing.locks.iter().zip(held).collect();
        // Most contended (someone waits) first, then the longest held, then the
        // shortest lease left.
        rows.sort_by(|(a, a_held), (b, b_held)| {
            b.waiting
                .cmp(&a.waiting)
                .then(b_held.cmp(a_held))
                .then(a.ttl.cmp(&b.ttl))
                .then(a.name.cmp(&b.name))
                .then(a.kind.cmp(&b.kind))
        });
        let output = if args.json { json(&rows) } else { table(&rows) };
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

/// NAME, KIND, OWNERS (id x holds), TTL, TOKEN, WAITING, HELD (since first seen).
fn table(rows: &[(&LockInfo, Option<Duration>)]) -> String {
    let mut lines = vec![
        ["NAME", "KIND", "OWNERS", "TTL", "TOKEN", "WAITING", "HELD"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for (info, held) in rows {
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
            if info.waiting { "yes" } else { "-" }.to_owned(),
            held.map_or_else(|| "-".to_owned(), format_duration),
        ]);
    }
    render_columns(&lines)
}

/// `{"locks": [LockInfo + "held_ms"]}`, in the table's order.
fn json(rows: &[(&LockInfo, Option<Duration>)]) -> String {
    let locks: Vec<serde_json::Value> = rows
        .iter()
        .map(|(info, held)| {
            let mut value = serde_json::to_value(info).unwrap_or(serde_json::Value::Null);
            if let Some(object) = value.as_object_mut() {
                let held_ms = held.map(|held| u64::try_from(held.as_millis()).unwrap_or(u64::MAX));
                object.insert("held_ms".to_owned(), held_ms.into());
            }
            value
        })
        .collect();
    serde_json::json!({ "locks": locks }).to_string()
}
