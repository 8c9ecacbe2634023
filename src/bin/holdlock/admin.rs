//! The admin commands: `inspect`, `list` and `unlock --force`, with their table and
//! JSON output.

use std::time::Duration;

use holdlock::{LockClient, LockInfo, LockKind};
use serde_json::json;

use crate::duration::format_duration;
use crate::exit::{EX_NOT_FOUND, EX_OK, Failure};
use crate::table::{escape, render_columns, sanitize};

/// Shown after `holdlock list --help`.
pub(crate) const LIST_HELP: &str = "\
A key under the prefix that cannot be read as a lock (a value of another type, a
hash written by someone else) does not stop the listing: it is left out, with a
warning line on stderr naming the key (and, with --json, an entry in \"unreadable\").

Exit status:
  0             the locks were listed (even if some keys could not be read)
  64            usage error
  69            Redis could not be reached";

/// Shown after `holdlock inspect --help` and `holdlock unlock --help`.
pub(crate) const KIND_HELP: &str = "\
Kinds (--kind): mutex (the default; `holdlock run` without --permits), fair, rw
(read-write lock) and semaphore (`holdlock run --permits N`). Each kind has keys of
its own: locks of different kinds may share a name.";

pub(crate) async fn inspect(
    client: &LockClient,
    kind: LockKind,
    name: &str,
    json: bool,
) -> Result<u8, Failure> {
    let info = client
        .inspect_kind(kind, name)
        .await
        .map_err(|error| Failure::from_lock_error(&format!("cannot inspect {name:?}"), &error))?;
    let Some(info) = info else {
        println!(
            "{}",
            if json {
                "null".to_owned()
            } else {
                format!("{} is not locked ({kind})", escape(name))
            }
        );
        return Ok(EX_NOT_FOUND);
    };
    if json {
        println!("{}", lock_json(&info));
    } else {
        print!("{}", lock_table(std::slice::from_ref(&info)));
        print!("{}", kind_details(&info));
    }
    Ok(EX_OK)
}

pub(crate) async fn list(client: &LockClient, pattern: &str, json: bool) -> Result<u8, Failure> {
    let listing = client
        .list_report(pattern)
        .await
        .map_err(|error| Failure::from_lock_error("cannot list locks", &error))?;
    for bad in &listing.unreadable {
        let error = bad.error.to_string();
        eprintln!(
            "holdlock: warning: key {} is not a readable lock, left out: {}",
            escape(&bad.key),
            sanitize(&error)
        );
    }
    if json {
        // The library's serialization of the listing: one schema for both.
        let listing = serde_json::to_value(&listing).unwrap_or(serde_json::Value::Null);
        println!("{listing}");
    } else if listing.locks.is_empty() {
        println!("no locks match {pattern:?}");
    } else {
        print!("{}", lock_table(&listing.locks));
    }
    Ok(EX_OK)
}

pub(crate) async fn force_unlock(
    client: &LockClient,
    kind: LockKind,
    name: &str,
    json: bool,
) -> Result<u8, Failure> {
    let was_locked = client
        .force_unlock_kind(kind, name)
        .await
        .map_err(|error| Failure::from_lock_error(&format!("cannot unlock {name:?}"), &error))?;
    if json {
        println!(
            "{}",
            json!({ "name": name, "kind": kind, "was_locked": was_locked })
        );
    } else if was_locked {
        println!("unlocked {} ({kind})", escape(name));
    } else {
        println!("{} was not locked ({kind})", escape(name));
    }
    Ok(EX_OK)
}

fn lock_json(info: &LockInfo) -> serde_json::Value {
    // The library's own serialization (feature `serde`): one schema for both.
    serde_json::to_value(info).unwrap_or(serde_json::Value::Null)
}

/// One row per owner (one row with `-` for a fair lock only waited for): NAME, KIND,
/// OWNER, HOLDS, TTL, TOKEN, DATA.
fn lock_table(locks: &[LockInfo]) -> String {
    let mut rows = vec![
        ["NAME", "KIND", "OWNER", "HOLDS", "TTL", "TOKEN", "DATA"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for info in locks {
        let row = |owner: String, holds: String, data: Option<&String>| {
            vec![
                info.name.clone(),
                info.kind.to_string(),
                owner,
                holds,
                info.ttl.map_or_else(|| "none".to_owned(), format_duration),
                info.fencing_token
                    .map_or_else(|| "-".to_owned(), |token| token.to_string()),
                data.map_or_else(|| "-".to_owned(), String::clone),
            ]
        };
        if info.owners.is_empty() {
            rows.push(row("-".to_owned(), "-".to_owned(), None));
        }
        for owner in &info.owners {
            let holds = owner.hold_count.to_string();
            rows.push(row(owner.id.clone(), holds, owner.data.as_ref()));
        }
    }
    render_columns(&rows)
}

/// What `inspect` shows after the table for the kinds that have more to say: the
/// read-write lock's holders with their leases, the fair lock's pending hand-off and
/// queue, the semaphore's permits with their leases. Nothing for the mutex.
fn kind_details(info: &LockInfo) -> String {
    let lease = |lease: Option<Duration>| lease.map_or_else(|| "none".to_owned(), format_duration);
    let mut out = String::new();
    if let Some(rw) = &info.read_write {
        let mut rows = vec![
            ["SIDE", "HOLDER", "HOLDS", "LEASE"]
                .map(str::to_owned)
                .to_vec(),
        ];
        let sides = rw.writer.iter().map(|holder| ("write", holder));
        for (side, holder) in sides.chain(rw.readers.iter().map(|holder| ("read", holder))) {
            rows.push(vec![
                side.to_owned(),
                holder.owner.clone(),
                holder.hold_count.to_string(),
                lease(holder.lease),
            ]);
        }
        out.push('\n');
        out.push_str(&render_columns(&rows));
        if rw.writer_waiting {
            out.push_str("a writer waits: new readers are kept out\n");
        }
    }
    if let Some(fair) = &info.fair {
        out.push('\n');
        if let Some(grant) = &fair.grant {
            out.push_str(&format!(
                "handed to {} (wait {}), {} left to claim it\n",
                escape(&grant.owner),
                wait_text(grant.wait),
                lease(grant.claim_window)
            ));
        }
        if fair.queue.is_empty() {
            out.push_str("nobody waits\n");
        } else {
            let mut rows = vec![
                ["PLACE", "WAITER", "WAIT", "WAITED"]
                    .map(str::to_owned)
                    .to_vec(),
            ];
            for (place, waiter) in fair.queue.iter().enumerate() {
                rows.push(vec![
                    (place + 1).to_string(),
                    waiter.owner.clone(),
                    wait_text(waiter.wait),
                    format_duration(waiter.waited),
                ]);
            }
            out.push_str(&render_columns(&rows));
        }
    }
    if let Some(semaphore) = &info.semaphore {
        let mut rows = vec![["PERMIT", "HOLDER", "LEASE"].map(str::to_owned).to_vec()];
        for permit in &semaphore.held {
            rows.push(vec![
                permit.id.clone(),
                permit.owner.clone(),
                lease(permit.lease),
            ]);
        }
        out.push_str(&format!(
            "\n{} of {} permits held\n",
            semaphore.held.len(),
            semaphore.permits
        ));
        out.push_str(&render_columns(&rows));
    }
    out
}

/// A fair wait's number, or `-` if its client gave none.
fn wait_text(wait: Option<u64>) -> String {
    wait.map_or_else(|| "-".to_owned(), |wait| wait.to_string())
}

/// Reads `--kind`: one of the names of [`LockKind::ALL`].
pub(crate) fn kind_parser() -> impl clap::builder::TypedValueParser<Value = LockKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(LockKind::ALL.map(LockKind::as_str))
        .try_map(|name| name.parse::<LockKind>())
}
