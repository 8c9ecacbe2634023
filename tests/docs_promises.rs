//! Facts the docs state that the code also states, read from both so that they cannot
//! drift apart unnoticed: the README's list of `LockError` variants against the enum,
//! the defaults README.md and docs/ state (the CLI's too) against their constants, and the metrics
//! docs/design.md lists against the ones the code records. Nothing here talks to Redis.

use std::collections::BTreeSet;
use std::time::Duration;

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// The text of `text` between the first `start` and the next `end` after it.
fn between<'t>(text: &'t str, start: &str, end: &str) -> Option<&'t str> {
    let (_, rest) = text.split_once(start)?;
    rest.split_once(end).map(|(inside, _)| inside)
}

/// The `code spans` of `text`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The variants of `pub enum LockError` in src/error.rs.
fn lock_error_variants() -> BTreeSet<String> {
    let source = read("src/error.rs");
    let body = between(&source, "pub enum LockError {", "\n}\n")
        .expect("src/error.rs has `pub enum LockError`");
    body.lines()
        .filter_map(|line| line.strip_prefix("    "))
        .filter(|line| line.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|line| {
            line.chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect()
        })
        .collect()
}

#[test]
fn the_readme_lists_every_lock_error_variant() {
    let readme = read("README.md");
    let list = between(&readme, "`LockError` has one variant", "The enum is")
        .expect("README.md lists LockError's variants");
    let listed: BTreeSet<String> = code_spans(list)
        .into_iter()
        .filter(|span| span.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_owned)
        .collect();
    let variants = lock_error_variants();
    assert!(variants.len() >= 15, "{variants:?}");
    assert_eq!(
        listed, variants,
        "README.md's list of LockError variants (left) against the enum (right)"
    );
}

/// A duration as the docs write it: `30 s`, `5s`, `500 ms`, `5 minutes`, `one second`.
fn duration(stated: &str) -> Duration {
    let stated = stated.trim();
    let split = stated
        .find(|c: char| !c.is_ascii_digit() && c != ' ')
        .filter(|_| stated.starts_with(|c: char| c.is_ascii_digit()));
    let (number, unit) = match split {
        Some(at) => (stated[..at].trim(), stated[at..].trim()),
        None => stated.split_once(' ').expect("`N unit`"),
    };
    let number: u64 = match number {
        "one" => 1,
        digits => digits
            .parse()
            .unwrap_or_else(|_| panic!("a number: {stated}")),
    };
    match unit {
        "s" | "second" | "seconds" => Duration::from_secs(number),
        "ms" => Duration::from_millis(number),
        "minute" | "minutes" => Duration::from_secs(60 * number),
        other => panic!("unit {other} in {stated:?}"),
    }
}

/// What `path` states between `start` and `end`, which must be there.
fn stated(path: &str, start: &str, end: &str) -> String {
    let text = read(path);
    between(&text, start, end)
        .unwrap_or_else(|| panic!("{path} states nothing between {start:?} and {end:?}"))
        .to_owned()
}

#[test]
fn the_defaults_the_docs_state_are_the_constants() {
    let readme = |start: &str, end: &str| duration(&stated("README.md", start, end));
    assert_eq!(
        readme("the lease (", " by default"),
        holdlock::DEFAULT_LEASE
    );
    assert_eq!(
        readme("`deadlock_check` (", " by default"),
        holdlock::DEFAULT_DEADLOCK_CHECK
    );
    assert_eq!(
        duration(&stated(
            "docs/deployments.md",
            "`LockClientBuilder::fair_wait_timeout` (",
            " by default"
        )),
        holdlock::DEFAULT_FAIR_WAIT
    );
    let prefix = stated("README.md", "`$HOLDLOCK_PREFIX`; default", ")");
    assert_eq!(prefix.trim().trim_matches('`'), holdlock::DEFAULT_PREFIX);
}

/// The CLI's defaults are its own (clap's `default_value`), so the README's words, the
/// CLI's and the library's constants are read against each other.
#[test]
fn the_defaults_the_readme_states_for_the_cli_are_the_constants() {
    // (where the README states it, the constant, where the CLI states it)
    let stated_twice = [
        (
            "`$HOLDLOCK_CONNECT_TIMEOUT`, default ",
            holdlock::DEFAULT_CONNECT_TIMEOUT,
            (
                "src/bin/holdlock/connect.rs",
                "env = \"HOLDLOCK_CONNECT_TIMEOUT\", default_value = \"",
                "\"",
            ),
        ),
        (
            "(`--lease`, default ",
            holdlock::DEFAULT_LEASE,
            (
                "src/bin/holdlock/run.rs",
                "within one lease [default: ",
                "]",
            ),
        ),
    ];
    for (readme, constant, (cli, start, end)) in stated_twice {
        assert_eq!(
            duration(&stated("README.md", readme, ")")),
            constant,
            "{readme}"
        );
        assert_eq!(duration(&stated(cli, start, end)), constant, "{cli}");
    }
}

#[cfg(feature = "tower")]
#[test]
fn the_tower_layers_default_retry_after_is_the_readmes() {
    let stated = stated("README.md", "(`.retry_after(..)`: fixed, ", " by default");
    assert_eq!(
        holdlock::tower::RetryAfter::default(),
        holdlock::tower::RetryAfter::Fixed(duration(&stated))
    );
}

/// The metrics docs/design.md lists (its table's rows that begin `| `holdlock_`).
fn listed_metrics() -> BTreeSet<String> {
    read("docs/design.md")
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| name.to_owned())
        .filter(|name| name.starts_with("holdlock_"))
        .collect()
}

#[test]
fn the_metrics_design_md_lists_are_the_ones_recorded() {
    let listed = listed_metrics();
    let source = read("src/observe.rs");
    let recorded: BTreeSet<String> = source
        .split("!(\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"'))
        .map(|(name, _)| name.to_owned())
        .filter(|name| name.starts_with("holdlock_"))
        .collect();
    assert!(recorded.len() >= 10, "{recorded:?}");
    assert_eq!(
        listed, recorded,
        "docs/design.md's metrics (left) against src/observe.rs's (right)"
    );
}

/// Every metric docs/design.md lists is asserted by tests/metrics.rs (by name: the
/// test reads each from a recorder after the event that records it).
#[test]
fn every_listed_metric_is_asserted_by_the_metrics_tests() {
    let tests = read("tests/metrics.rs");
    let unasserted: Vec<String> = listed_metrics()
        .into_iter()
        .filter(|name| {
            !tests.contains(&format!("\"{name}\"")) && !tests.contains(&format!("\"{name}{{"))
        })
        .collect();
    assert!(
        unasserted.is_empty(),
        "not asserted in tests/metrics.rs: {unasserted:?}"
    );
}
