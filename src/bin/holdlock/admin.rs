//! The admin commands: `inspect`, `list` and `unlock --force`, with their table and
//! JSON output.

use holdlock::{LockClient, LockInfo};
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

pub(crate) async fn inspect(client: &LockClient, name: &str, json: bool) -> Result<u8, Failure> {
    let info = client
        .inspect(name)
        .await
        .map_err(|error| Failure::from_lock_error(&format!("cannot inspect {name:?}"), &error))?;
    let Some(info) = info else {
        println!(
            "{}",
            if json {
                "null".to_owned()
            } else {
                format!("{} is not locked", escape(name))
            }
        );
        return Ok(EX_NOT_FOUND);
    };
    if json {
        println!("{}", lock_json(&info));
    } else {
        print!("{}", lock_table(std::slice::from_ref(&info)));
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
    name: &str,
    json: bool,
) -> Result<u8, Failure> {
    let was_locked = client
        .force_unlock(name)
        .await
        .map_err(|error| Failure::from_lock_error(&format!("cannot unlock {name:?}"), &error))?;
    if json {
        println!("{}", json!({ "name": name, "was_locked": was_locked }));
    } else if was_locked {
        println!("unlocked {}", escape(name));
    } else {
        println!("{} was not locked", escape(name));
    }
    Ok(EX_OK)
}

fn lock_json(info: &LockInfo) -> serde_json::Value {
    // The library's own serialization (feature `serde`): one schema for both.
    serde_json::to_value(info).unwrap_or(serde_json::Value::Null)
}

/// One row per owner: NAME, OWNER, HOLDS, TTL, TOKEN.
fn lock_table(locks: &[LockInfo]) -> String {
    let mut rows = vec![
        ["NAME", "OWNER", "HOLDS", "TTL", "TOKEN"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for info in locks {
        let ttl = info.ttl.map_or_else(|| "none".to_owned(), format_duration);
        let token = info
            .fencing_token
            .map_or_else(|| "-".to_owned(), |token| token.to_string());
        for owner in &info.owners {
            rows.push(vec![
                info.name.clone(),
                owner.id.clone(),
                owner.hold_count.to_string(),
                ttl.clone(),
                token.clone(),
            ]);
        }
    }
    render_columns(&rows)
}
