//! Facts the docs state that the code also states, read from both so that they cannot
//! drift apart unnoticed: the README's list of `LockError` variants against the enum,
//! the defaults the README names against their constants, and the metrics
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

/// The duration the README states right before ` by default` after `what (`, as in
/// "the lease (30 s by default)".
fn readme_default(readme: &str, what: &str) -> Duration {
    let stated = between(readme, &format!("{what} ("), " by default")
        .unwrap_or_else(|| panic!("README.md names no default for {what}"));
    let (number, unit) = stated.split_once(' ').expect("`N unit`");
    let number: u64 = number.parse().expect("a number");
    match unit {
        "s" => Duration::from_secs(number),
        "ms" => Duration::from_millis(number),
        other => panic!("unit {other}"),
    }
}

#[test]
fn the_defaults_the_readme_states_are_the_constants() {
    let readme = read("README.md");
    assert_eq!(
        readme_default(&readme, "the lease"),
        holdlock::DEFAULT_LEASE
    );
    assert_eq!(
        readme_default(&readme, "`deadlock_check`"),
        holdlock::DEFAULT_DEADLOCK_CHECK
    );
}

#[test]
fn the_metrics_design_md_lists_are_the_ones_recorded() {
    let design = read("docs/design.md");
    let listed: BTreeSet<&str> = design
        .lines()
        .filter_map(|line| line.strip_prefix("| `holdlock_"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| name)
        .collect();
    let source = read("src/observe.rs");
    let recorded: BTreeSet<&str> = source
        .split("!(\"holdlock_")
        .skip(1)
        .filter_map(|rest| rest.split_once('"'))
        .map(|(name, _)| name)
        .collect();
    assert!(recorded.len() >= 10, "{recorded:?}");
    assert_eq!(
        listed, recorded,
        "docs/design.md's metrics (left) against src/observe.rs's (right)"
    );
}
