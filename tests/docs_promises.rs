//! Facts the docs state that the code also states, read from both so that they cannot
//! drift apart unnoticed: the README's list of `LockError` variants against the enum;
//! every default README.md, docs/ and CHANGELOG.md's `[Unreleased]` state with a figure
//! (the CLI's too) against its constant; the metrics the docs name and design.md's table
//! of them (types, labels) against the ones the code records, each asserted by
//! tests/metrics.rs; the ACL rules of docs/deployments.md against the commands the
//! scripts call; and the smoke files the docs name against `.ci/run`'s. Nothing
//! here talks to Redis.

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

/// A figure the docs state: a duration, or a share ("a third").
#[derive(Debug, Clone, Copy, PartialEq)]
enum Figure {
    Duration(Duration),
    Share(f64),
}

/// The figures of `text` (as chars), each with where it begins and ends: `30 s`, `5s`,
/// `500 ms`, `5 minutes`, `one second`, `a third`.
fn figures(text: &[char]) -> Vec<(usize, usize, Figure)> {
    let words = [
        ("one second", Figure::Duration(Duration::from_secs(1))),
        ("five minutes", Figure::Duration(Duration::from_secs(300))),
        ("a third", Figure::Share(1.0 / 3.0)),
        ("a quarter", Figure::Share(0.25)),
        ("half", Figure::Share(0.5)),
    ];
    let mut found = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let starts_word = at == 0 || !text[at - 1].is_alphanumeric();
        if let Some((word, figure)) = words.iter().find(|(word, _)| {
            let word: Vec<char> = word.chars().collect();
            starts_word
                && text[at..].starts_with(&word)
                && !text
                    .get(at + word.len())
                    .is_some_and(|c| c.is_alphanumeric())
        }) {
            let end = at + word.chars().count();
            found.push((at, end, *figure));
            at = end;
            continue;
        }
        if !(starts_word && text[at].is_ascii_digit()) {
            at += 1;
            continue;
        }
        let digits_end = (at..text.len())
            .find(|&i| !text[i].is_ascii_digit())
            .unwrap_or(text.len());
        let number: u64 = text[at..digits_end]
            .iter()
            .collect::<String>()
            .parse()
            .expect("digits");
        let unit_start = match text.get(digits_end) {
            Some(' ') => digits_end + 1,
            _ => digits_end,
        };
        let unit_end = (unit_start..text.len())
            .find(|&i| !text[i].is_ascii_alphabetic())
            .unwrap_or(text.len());
        let unit: String = text[unit_start..unit_end].iter().collect();
        let duration = match unit.as_str() {
            "ms" => Some(Duration::from_millis(number)),
            "s" | "second" | "seconds" => Some(Duration::from_secs(number)),
            "minute" | "minutes" => Some(Duration::from_secs(60 * number)),
            _ => None,
        };
        match duration {
            Some(duration) => {
                found.push((at, unit_end, Figure::Duration(duration)));
                at = unit_end;
            }
            None => at = digits_end,
        }
    }
    found
}

/// The text of every page that states defaults, as one line each (a phrase broken
/// across lines is whole): README.md, docs/*.md, and CHANGELOG.md's `[Unreleased]`
/// (released entries are history, and may state a default as it was then).
fn pages() -> Vec<(String, String)> {
    let mut paths = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/docs"))
        .expect("docs/")
        .map(|entry| entry.expect("an entry of docs/").file_name())
        .map(|name| format!("docs/{}", name.to_string_lossy()))
        .filter(|path| path.ends_with(".md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    let mut pages: Vec<(String, String)> = paths
        .into_iter()
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect();
    let changelog = read("CHANGELOG.md");
    let unreleased = between(&changelog, "## [Unreleased]", "\n## [")
        .expect("CHANGELOG.md has an [Unreleased] section")
        .to_owned();
    pages.push(("CHANGELOG.md [Unreleased]".to_owned(), unreleased));
    pages
        .into_iter()
        .map(|(path, text)| (path, text.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

/// A constant of the crate that is not public, read from its source: `const NAME: T =
/// VALUE;` in `path`, as written (`3`, `1.0 / 3.0`).
fn private_constant(path: &str, name: &str) -> String {
    let source = read(path);
    let start = format!("const {name}: ");
    let (_, rest) = source
        .split_once(&start)
        .unwrap_or_else(|| panic!("{path} has no `{start}`"));
    let (_, rest) = rest.split_once("= ").expect("`= VALUE;`");
    rest.split_once(';').expect("`VALUE;`").0.trim().to_owned()
}

/// What a default the docs state belongs to, named by words near it.
#[derive(Debug)]
enum Subject {
    /// Someone else's default (Redis's, Sentinel's), or a figure that is not a default.
    NotOurs,
    /// One of holdlock's, with its value.
    Is(Figure),
    /// A deadlock edge's expiry, a range of the check delay ("6 s to 24 s by default").
    EdgeExpiry,
}

/// The subjects of the defaults the docs state, the first whose words are near the
/// default winning: every stated default with a figure must be one of these.
fn subjects() -> Vec<(&'static [&'static str], Subject)> {
    let share: Vec<f64> = private_constant("src/options.rs", "DEFAULT_AT_RISK_SHARE")
        .split(" / ")
        .map(|part| part.parse().expect("`A / B`, two floats"))
        .collect();
    let at_risk = share[0] / share[1];
    #[cfg(feature = "tower")]
    let retry_after = match holdlock::tower::RetryAfter::default() {
        holdlock::tower::RetryAfter::Fixed(after) => Subject::Is(Figure::Duration(after)),
        other => panic!("the tower layer's default retry_after is {other:?}"),
    };
    #[cfg(not(feature = "tower"))]
    let retry_after = Subject::NotOurs;
    let d = Figure::Duration;
    vec![
        (
            &["cluster-node-timeout", "down-after-milliseconds"][..],
            Subject::NotOurs,
        ),
        // "`--deadlock-check 100ms` (ten times the default's rate of checks)"
        (&["default's rate"], Subject::NotOurs),
        (
            &["fair_wait_timeout", "fairLockWaitTimeout"],
            Subject::Is(d(holdlock::DEFAULT_FAIR_WAIT)),
        ),
        (&["check delays"], Subject::EdgeExpiry),
        (
            &["deadlock_check", "deadlock-check", "DEFAULT_DEADLOCK_CHECK"],
            Subject::Is(d(holdlock::DEFAULT_DEADLOCK_CHECK)),
        ),
        (&["retry_after"], retry_after),
        (
            &["connect timeout", "connect-timeout", "CONNECT_TIMEOUT"],
            Subject::Is(d(holdlock::DEFAULT_CONNECT_TIMEOUT)),
        ),
        (
            &["at_risk_share", "at-risk"],
            Subject::Is(Figure::Share(at_risk)),
        ),
        (&["lease"], Subject::Is(d(holdlock::DEFAULT_LEASE))),
    ]
}

/// Every default the docs state with a figure (the word "default" with a duration or a
/// share at most 40 characters from it, in README.md, docs/ and CHANGELOG.md's
/// `[Unreleased]`) is the constant it names: the lease, `deadlock_check`, the fair
/// wait, the connect timeout, the at-risk share, tower's `retry_after`, a deadlock
/// edge's expiry; or it is named as someone else's. A stated default whose subject no
/// rule knows fails too, so a new one is read from here on.
#[test]
fn every_default_the_docs_state_with_a_figure_is_its_constant() {
    let subjects = subjects();
    let edge_checks: u32 = private_constant("src/deadlock.rs", "EDGE_CHECKS")
        .parse()
        .expect("EDGE_CHECKS is a number");
    let longest_gap: u32 = private_constant("src/deadlock.rs", "LONGEST_GAP")
        .parse()
        .expect("LONGEST_GAP is a number");
    let (mut checked, mut wrong, mut unknown) = (0, Vec::new(), Vec::new());
    for (path, text) in pages() {
        let text: Vec<char> = text.chars().collect();
        let lower: Vec<char> = text.iter().map(char::to_ascii_lowercase).collect();
        let found = figures(&text);
        let word: Vec<char> = "default".chars().collect();
        for at in (0..lower.len()).filter(|&at| lower[at..].starts_with(&word)) {
            let end = at + word.len();
            let distance = |(start, stop, _): &&(usize, usize, Figure)| match *stop <= at {
                true => at - stop,
                false => start.saturating_sub(end),
            };
            let Some(nearest) = found
                .iter()
                .filter(|figure| distance(figure) <= 40)
                .min_by_key(distance)
            else {
                continue;
            };
            let window: String = text[at.saturating_sub(100)..(end + 100).min(text.len())]
                .iter()
                .collect();
            let stated: String = text[nearest.0..nearest.1].iter().collect();
            let said = format!("{path}: {stated:?} in \"…{window}…\"");
            let Some((_, subject)) = subjects
                .iter()
                .find(|(words, _)| words.iter().any(|word| window.contains(word)))
            else {
                unknown.push(said);
                continue;
            };
            checked += 1;
            match subject {
                Subject::NotOurs => {}
                Subject::Is(value) if *value == nearest.2 => {}
                Subject::Is(value) => wrong.push(format!("{said}: the constant is {value:?}")),
                Subject::EdgeExpiry => {
                    let check = holdlock::DEFAULT_DEADLOCK_CHECK;
                    let (first, longest) = (edge_checks * 2, edge_checks * longest_gap);
                    let range = format!(
                        "{} s to {} s by default",
                        (check * first).as_secs(),
                        (check * longest).as_secs()
                    );
                    let delays =
                        format!("{first} check delays after the first write, up to {longest}");
                    if !window.contains(&range) || !window.contains(&delays) {
                        wrong.push(format!("{said}: the constants make it {delays} ({range})"));
                    }
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "defaults stated with a figure that no rule of this test reads (add a subject): {unknown:#?}"
    );
    assert!(
        wrong.is_empty(),
        "defaults the docs state that are not the constants: {wrong:#?}"
    );
    assert!(checked >= 20, "only {checked} stated defaults found");
}

/// The metrics src/observe.rs records, each with its macro (`counter`, `gauge`,
/// `histogram`) and its label keys.
fn recorded_metrics() -> Vec<(String, String, BTreeSet<String>)> {
    let source = read("src/observe.rs");
    source
        .split("::metrics::")
        .skip(1)
        .filter_map(|call| {
            let (kind, rest) = call.split_once("!(\"")?;
            let (name, rest) = rest.split_once('"')?;
            let arguments = rest.split_once(')').map_or(rest, |(inside, _)| inside);
            let labels = arguments
                .split(" => ")
                .filter_map(|before| before.rsplit_once('"'))
                .filter_map(|(before, _)| before.rsplit_once('"'))
                .map(|(_, key)| key.to_owned())
                .collect();
            Some((kind.to_owned(), name.to_owned(), labels))
        })
        .filter(|(_, name, _)| name.starts_with("holdlock_"))
        .map(|(kind, name, labels)| (name, kind, labels))
        .collect()
}

/// Each row of docs/design.md's metrics table gives the type and the label the code
/// records the metric with, and each label value it lists is one the code gives
/// (`=> "busy"`, `("ok")`).
#[test]
fn the_metrics_table_gives_each_its_type_and_labels() {
    let design = read("docs/design.md");
    let recorded = recorded_metrics();
    let mut sources = String::new();
    for path in ["src/observe.rs", "src/watchdog.rs"] {
        sources.push_str(&read(path));
    }
    let mut rows = 0;
    for row in design
        .lines()
        .filter(|line| line.starts_with("| `holdlock_"))
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let [_, name, kind, labels, ..] = cells[..] else {
            panic!("a row of four cells: {row}");
        };
        let name = name.trim_matches('`');
        let calls: Vec<_> = recorded.iter().filter(|(n, ..)| n == name).collect();
        assert!(!calls.is_empty(), "{name} is not recorded");
        for (_, macro_kind, keys) in &calls {
            assert_eq!(macro_kind, kind, "{name}'s type");
            let spans = code_spans(labels);
            let documented: BTreeSet<String> =
                spans.first().map(|k| k.to_string()).into_iter().collect();
            assert_eq!(keys, &documented, "{name}'s labels");
            for value in spans.iter().skip(1) {
                assert!(
                    sources.contains(&format!("=> \"{value}\""))
                        || sources.contains(&format!("(\"{value}\")")),
                    "{name}'s label value {value} is never given"
                );
            }
        }
        rows += 1;
    }
    assert!(rows >= 10, "{rows} rows");
}

/// Every `holdlock_…` name the docs give in code (README.md, docs/, CHANGELOG.md's
/// `[Unreleased]`) is a metric the code records, or the PostgreSQL table of
/// `holdlock::postgres`.
#[test]
fn every_metric_the_docs_name_is_recorded() {
    let recorded: BTreeSet<String> = recorded_metrics()
        .into_iter()
        .map(|(name, ..)| name)
        .collect();
    let mut named = 0;
    for (path, text) in pages() {
        for span in code_spans(&text) {
            let Some(rest) = span.strip_prefix("holdlock_") else {
                continue;
            };
            if rest.is_empty() || !rest.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                continue;
            }
            #[cfg(feature = "postgres")]
            if span == holdlock::postgres::TABLE {
                continue;
            }
            assert!(
                recorded.contains(span),
                "{path} names `{span}`, which is not a metric the code records: {recorded:?}"
            );
            named += 1;
        }
    }
    assert!(named >= 12, "only {named} metrics named");
}

/// The commands the scripts of `folder` (`lua/`, `lua/redisson/`; not its subfolders)
/// call by name (`redis.call('zadd', ..)`, `redis.pcall(..)`), and `publish` and
/// `spublish` for the scripts that pick one of the two by an argument.
fn script_commands(folder: &str) -> BTreeSet<String> {
    let dir = format!("{}/{folder}", env!("CARGO_MANIFEST_DIR"));
    let mut commands = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|error| panic!("{folder}: {error}")) {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|ext| ext != "lua") {
            continue;
        }
        let script = std::fs::read_to_string(&path).expect("a script");
        for call in ["redis.call(", "redis.pcall("] {
            for (at, _) in script.match_indices(call) {
                let rest = &script[at + call.len()..];
                let Some(rest) = rest.strip_prefix('\'').or_else(|| rest.strip_prefix('"')) else {
                    // A variable: the scripts pick `publish` or `spublish` so.
                    commands.extend(["publish".to_owned(), "spublish".to_owned()]);
                    continue;
                };
                let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
                commands.insert(name.to_ascii_lowercase());
            }
        }
    }
    assert!(commands.len() > 10, "{folder}: {commands:?}");
    commands
}

/// The commands a rule of docs/deployments.md grants (`+zadd`), for the user it calls
/// `user`.
fn granted(user: &str) -> BTreeSet<String> {
    let page = read("docs/deployments.md");
    let rule = page
        .lines()
        .find(|line| line.starts_with(&format!("ACL SETUSER {user} ")))
        .unwrap_or_else(|| panic!("docs/deployments.md has no rule for {user}"));
    rule.split_whitespace()
        .filter_map(|word| word.strip_prefix('+'))
        .map(str::to_owned)
        .collect()
}

/// The words of the code spans of `text` (`del exists get` is three).
fn span_words(text: &str) -> BTreeSet<String> {
    code_spans(text)
        .into_iter()
        .flat_map(str::split_whitespace)
        .map(str::to_owned)
        .collect()
}

/// The ACL rules of docs/deployments.md grant every command a script calls, so a
/// script that calls a new one fails here even where no test takes that path: the
/// holdlock rule those of `lua/`, the Redisson rule those of `lua/` and
/// `lua/redisson/` (it grants the holdlock rule's and more). And the page's lists of
/// them are the scripts' own: the holdlock rule's (beside it), and the nine that
/// Redisson's scripts call and the holdlock rule does not grant.
#[test]
fn the_acl_rules_grant_every_command_the_scripts_call() {
    let (own, redissons) = (script_commands("lua"), script_commands("lua/redisson"));
    let (holdlock, redisson) = (granted("holdlock"), granted("holdlock-redisson"));
    let lacking: Vec<_> = own.difference(&holdlock).collect();
    assert!(lacking.is_empty(), "the holdlock rule lacks {lacking:?}");
    let lacking: Vec<_> = holdlock
        .union(&redissons)
        .filter(|command| !redisson.contains(*command))
        .collect();
    assert!(lacking.is_empty(), "the Redisson rule lacks {lacking:?}");

    let page = read("docs/deployments.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let listed = between(
        &page,
        "Redis checks the commands a script calls against the user too:",
        "(the fair lock's queue",
    )
    .expect("docs/deployments.md lists the scripts' commands");
    assert_eq!(
        span_words(listed),
        own,
        "docs/deployments.md's list of the scripts' commands (left) against lua/'s (right)"
    );
    let only_redissons = between(
        &page,
        "Its scripts (`lua/redisson/`) also call",
        "which the rule does not grant",
    )
    .expect("docs/deployments.md lists the commands only Redisson's scripts call");
    let expected: BTreeSet<String> = redissons.difference(&holdlock).cloned().collect();
    assert_eq!(
        span_words(only_redissons),
        expected,
        "what docs/deployments.md says lua/redisson/ calls beyond the holdlock rule (left) against the scripts (right)"
    );
}

/// The words of the bash array `name=(...)` in `.ci/run` (over several lines).
fn ci_array(name: &str) -> Vec<String> {
    let run = read(".ci/run");
    let words = between(&run, &format!("\n{name}=("), ")")
        .unwrap_or_else(|| panic!(".ci/run has the array {name}"));
    words.split_whitespace().map(str::to_owned).collect()
}

/// The names of the `code spans` of `text` that are test files (`tests/x.rs` or
/// `x.rs`), as `--test` takes them.
fn test_files_named(text: &str) -> BTreeSet<String> {
    code_spans(text)
        .into_iter()
        .filter(|span| span.ends_with(".rs"))
        .map(|span| {
            span.trim_start_matches("tests/")
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect()
}

/// docs/deployments.md names the smoke files `.ci/run` runs on every server of its
/// matrix (its `SMOKE`), all of them and how many, and the extra files of Redis 6.2
/// and Valkey 9.0 (`SMOKE_6`, `SMOKE_9`); README.md says how many and its excerpt of
/// the command shows the first of them.
#[test]
fn the_smoke_files_the_docs_name_are_the_ones_ci_runs() {
    let files = ci_array("SMOKE");
    assert!(files.len() >= 4, ".ci/run's SMOKE, read as {files:?}");
    let page = read("docs/deployments.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let listed = between(&page, "Cluster and Sentinel smoke files", " files,")
        .expect("docs/deployments.md lists the smoke files");
    let (names, count) = listed
        .rsplit_once('(')
        .expect("the list ends with `(N files`");
    let run: BTreeSet<String> = files.iter().cloned().collect();
    assert_eq!(
        test_files_named(names),
        run,
        "docs/deployments.md's smoke files (left) against .ci/run's"
    );
    assert_eq!(
        count.trim(),
        files.len().to_string(),
        "docs/deployments.md's count"
    );
    for (server, end, array) in [
        ("Redis 6.2", ", on Valkey", "SMOKE_6"),
        ("Valkey 9.0", ". Sentinel is", "SMOKE_9"),
    ] {
        let extra = between(&page, &format!("on {server} also "), end)
            .unwrap_or_else(|| panic!("docs/deployments.md names {server}'s extra files"));
        let run: BTreeSet<String> = ci_array(array).into_iter().collect();
        assert_eq!(
            test_files_named(extra),
            run,
            "docs/deployments.md's extra files on {server} (left) against .ci/run's {array}"
        );
    }

    let readme = read("README.md");
    let readme_words = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for (start, end) in [
        ("it names ", " `--test` files, of which these are the first"),
        (
            "\"The smoke files\" are the ",
            " single-server, Cluster and Sentinel files",
        ),
    ] {
        let said = between(&readme_words, start, end)
            .unwrap_or_else(|| panic!("README.md says how many smoke files: {start:?}"));
        assert_eq!(said.trim(), files.len().to_string(), "README.md's count");
    }
    let shown = between(&readme, "HOLDLOCK_TEST_SERVER=", "\n```")
        .expect("README.md shows the Valkey command");
    let shown: Vec<&str> = shown
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|pair| pair[0] == "--test")
        .map(|pair| pair[1])
        .collect();
    assert_eq!(
        shown,
        files[..shown.len()],
        "README.md's excerpt is not the command's start"
    );
}
