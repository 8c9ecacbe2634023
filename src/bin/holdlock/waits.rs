//! The `waits` command: who waits for what ([`holdlock::LockClient::waits`]): every
//! wait past its client's deadlock check, and the deadlocks among them.

use holdlock::{LockClient, WaitFor, WaitGraph};

use crate::duration::format_duration;
use crate::exit::{EX_NOT_FOUND, EX_OK, Failure};
use crate::table::{escape, render_columns};

/// Shown after `holdlock waits --help`.
pub(crate) const WAITS_HELP: &str = "\
Lists every wait that has lasted past its client's deadlock check (a client with
`deadlock_check` off records none), longest first, then each deadlock
found among them: a cycle of waits, each owner waiting for a lock the next one holds,
still there on a second look. The first wait of a cycle is the one that is told of
it (`LockError::Deadlock`, the wait that began last) at its next check.

JSON: {\"waits\": [{\"wait\": {\"owner\", \"kind\", \"name\"}, \"waited_ms\"}],
\"deadlocks\": [[{\"owner\", \"kind\", \"name\"}, ...]]}.

Exit status:
  0             no deadlock
  1             a deadlock was found
  64            usage error
  69            Redis could not be reached";

/// Prints the long waits and the deadlocks; exits 1 if there is a deadlock.
pub(crate) async fn waits(client: &LockClient, json: bool) -> Result<u8, Failure> {
    let graph = client
        .waits()
        .await
        .map_err(|error| Failure::from_lock_error("cannot read the waits", &error))?;
    if json {
        // The library's own serialization (feature `serde`).
        let value = serde_json::to_value(&graph).unwrap_or(serde_json::Value::Null);
        println!("{value}");
    } else {
        print!("{}", waits_text(&graph));
    }
    Ok(if graph.deadlocks.is_empty() {
        EX_OK
    } else {
        EX_NOT_FOUND
    })
}

/// OWNER, WAITS FOR, KIND, WAITED; then one line per deadlock.
fn waits_text(graph: &WaitGraph) -> String {
    if graph.waits.is_empty() {
        return "no wait has lasted past its deadlock check\n".to_owned();
    }
    let mut rows = vec![
        ["OWNER", "WAITS FOR", "KIND", "WAITED"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for long in &graph.waits {
        rows.push(vec![
            long.wait.owner.clone(),
            escape(&long.wait.name).into_owned(),
            long.wait.kind.to_string(),
            format_duration(long.waited),
        ]);
    }
    let mut text = render_columns(&rows);
    text.push_str(&deadlock_lines(&graph.deadlocks));
    text
}

/// One line per deadlock: `deadlock: A waits for x -> B waits for y`.
pub(crate) fn deadlock_lines(deadlocks: &[Vec<WaitFor>]) -> String {
    let mut text = String::new();
    for cycle in deadlocks {
        text.push_str("deadlock: ");
        let waits: Vec<String> = cycle
            .iter()
            .map(|wait| format!("{} waits for {}", wait.owner, escape(&wait.name)))
            .collect();
        text.push_str(&waits.join(" -> "));
        text.push('\n');
    }
    text
}
