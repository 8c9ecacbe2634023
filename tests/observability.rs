//! What a lock call tells `tracing`: a `holdlock.lock` span with the lock, the owner,
//! the outcome and the wait, a `released` event with the hold time, and nothing above
//! `debug` on the success path.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_subscriber::fmt::format::FmtSpan;

/// Everything logged while the returned guard lives, on this thread.
fn capture() -> (Arc<Mutex<Vec<u8>>>, tracing::subscriber::DefaultGuard) {
    let logs = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(Arc::clone(&logs));
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The target docs/design.md's events table gives the event whose row begins with
/// `event`.
fn documented_target(event: &str) -> String {
    let design = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/design.md"))
        .expect("docs/design.md");
    let row = design
        .lines()
        .find(|line| line.starts_with(&format!("| {event}")))
        .unwrap_or_else(|| panic!("docs/design.md's events table has no row for {event:?}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    cells[3].trim_matches('`').to_owned()
}

/// The line of `text` that logs `message` (at `level`), which must be there, checked to
/// come from the target docs/design.md gives it (its events table's row `event`).
fn logged<'t>(text: &'t str, level: &str, message: &str, event: &str) -> &'t str {
    let line = text
        .lines()
        .find(|line| line.contains(&format!(" {level} ")) && line.contains(message))
        .unwrap_or_else(|| panic!("no {level} {message:?}:\n{text}"));
    let target = documented_target(event);
    assert!(
        line.contains(&format!(" {target}: {message}")),
        "not logged from {target}, as docs/design.md says: {line}"
    );
    line
}

#[tokio::test(flavor = "current_thread")]
async fn lock_calls_run_in_a_span_with_their_outcome() {
    let (logs, _guard) = capture();
    let client = common::client().await;
    let name = common::unique("spans");
    let guard = client.lock(&name).await.unwrap();
    let owner = guard.owner().to_owned();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let other = common::connect(&common::url()).await;
    let refused = tokio::spawn({
        let name = name.clone();
        async move { other.lock(&name).try_now().await.unwrap().is_none() }
    });
    assert!(refused.await.unwrap());
    guard.unlock().await.unwrap();
    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let closes: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("holdlock.lock{"))
        .collect();
    let granted = closes
        .iter()
        .find(|line| line.contains("call=\"lock\"") && line.contains("outcome=\"granted\""))
        .unwrap_or_else(|| panic!("no granted lock span:\n{text}"));
    assert!(granted.contains(&format!("lock={name}")), "{granted}");
    assert!(granted.contains(&format!("owner={owner}")), "{granted}");
    assert!(granted.contains("waited_ms="), "{granted}");
    assert!(
        closes
            .iter()
            .any(|line| line.contains("call=\"try_lock\"") && line.contains("outcome=\"gave up\"")),
        "no refused try span:\n{text}"
    );
    let released = logged(&text, "DEBUG", "released", "released");
    assert!(released.contains(&name), "{released}");
    assert!(released.contains("held_ms=Some("), "{released}");
    for line in text.lines() {
        assert!(
            !line.contains(" WARN ") && !line.contains(" INFO ") && !line.contains(" ERROR "),
            "above debug on the success path: {line}"
        );
    }
}

/// Each deadlock broken is a `tracing` warning naming the cycle (README, "Deadlocks
/// across processes"; design.md's events table).
#[tokio::test(flavor = "current_thread")]
async fn a_broken_deadlock_is_a_warning_naming_the_cycle() {
    let (logs, _guard) = capture();
    let client = holdlock::LockClient::builder(common::url())
        .deadlock_check(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let (x, y) = (common::unique("warned"), common::unique("warned"));
    let broken = common::cross_two_locks(&client, &x, &y).await;
    assert_eq!(broken, [false, true]);
    client.shutdown().await;
    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let warning = logged(
        &text,
        "WARN",
        "a deadlock was found",
        "a deadlock was found",
    );
    assert!(warning.contains("cycle"), "{warning}");
    assert!(warning.contains(&x) && warning.contains(&y), "{warning}");
}

/// A hold past its `max_hold` is warned of by the watchdog, which stops renewing it,
/// and its loss by the hold, each from the target docs/design.md gives it.
#[tokio::test(flavor = "current_thread")]
async fn a_capped_and_lost_hold_is_warned_of_where_the_docs_say() {
    let (logs, _guard) = capture();
    let client = holdlock::LockClient::builder(common::url())
        .lease(Duration::from_millis(300))
        .max_hold(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let name = common::unique("capped");
    let guard = client.lock(&name).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the capped hold was not lost");
    drop(guard);
    client.shutdown().await;
    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let capped = logged(
        &text,
        "WARN",
        "held for its max_hold",
        "held for its max_hold",
    );
    assert!(capped.contains(&name), "{capped}");
    let lost = logged(&text, "WARN", "lock lost", "lock lost");
    assert!(lost.contains(&name), "{lost}");
}
