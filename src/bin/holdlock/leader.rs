//! The `leader` command: who leads an election ([`holdlock::Election::leader`]), as a
//! table or JSON.

use std::time::SystemTime;

use holdlock::{LeaderInfo, LockClient};

use crate::duration::format_duration;
use crate::exit::{EX_NOT_FOUND, EX_OK, Failure};
use crate::table::{escape, render_columns};

/// Shown after `holdlock leader --help`.
pub(crate) const LEADER_HELP: &str = "\
The leader is the candidate that holds the election's lock and has recorded itself
(`client.election(NAME).campaign(DATA)` in the library); a leader that died is not
shown once its lease ran out. SINCE is when it was elected, by the Redis server's
clock.

JSON: {\"election\", \"owner\", \"data\", \"since_us\" (microseconds since the Unix
epoch), \"fencing_token\"}, or null when nobody leads.

Exit status:
  0             someone leads
  1             nobody leads
  64            usage error
  69            Redis could not be reached";

/// Prints who leads the election `name`; exits 1 if nobody does.
pub(crate) async fn leader(client: &LockClient, name: &str, json: bool) -> Result<u8, Failure> {
    let leader = client.election(name).leader().await.map_err(|error| {
        Failure::from_lock_error(&format!("cannot read the leader of {name:?}"), &error)
    })?;
    if json {
        // The library's own serialization (feature `serde`).
        let value = serde_json::to_value(&leader).unwrap_or(serde_json::Value::Null);
        println!("{value}");
    } else {
        match &leader {
            Some(leader) => print!("{}", leader_table(leader)),
            None => println!("nobody leads {}", escape(name)),
        }
    }
    Ok(if leader.is_some() {
        EX_OK
    } else {
        EX_NOT_FOUND
    })
}

/// ELECTION, OWNER, SINCE, FOR, TOKEN, DATA.
fn leader_table(leader: &LeaderInfo) -> String {
    let led_for = SystemTime::now()
        .duration_since(leader.since)
        .unwrap_or_default();
    let rows = [
        ["ELECTION", "OWNER", "SINCE", "FOR", "TOKEN", "DATA"]
            .map(str::to_owned)
            .to_vec(),
        vec![
            leader.election.clone(),
            leader.owner.clone(),
            humantime::format_rfc3339_millis(leader.since).to_string(),
            format_duration(led_for),
            leader.fencing_token.to_string(),
            leader.data.clone(),
        ],
    ];
    render_columns(&rows)
}
