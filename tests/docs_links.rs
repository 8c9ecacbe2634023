//! Every relative link of README.md, CHANGELOG.md and docs/*.md leads somewhere: to a
//! file of the repository and, with `#anchor`, to a heading of that file (or, for
//! `(#anchor)`, of the same file), by GitHub's anchor rules.
//!
//! Links in code (fenced blocks, `code spans`) are not links and are skipped, as are
//! links with a scheme (`https:`, `mailto:`).
//!
//! The documents also name tests as evidence (`a_cancelled_waiter_leaves_the_queue_at_once`):
//! each function they name that way exists; and each file of the repository they name
//! (`src/held.rs`, `lua/redisson/`) is there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents whose links are checked, relative to the repository root.
fn documents() -> Vec<PathBuf> {
    let mut documents = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| Path::new("docs").join(path.file_name().unwrap()))
        .collect();
    docs.sort();
    documents.extend(docs);
    documents
}

/// The lines of `markdown` outside fenced code blocks, with their line numbers
/// (1-based) and with code spans blanked out.
fn prose_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"]
            .into_iter()
            .find(|marker| trimmed.starts_with(marker));
        match (fence, marker) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            (None, None) => lines.push((index + 1, without_code_spans(line))),
            _ => {}
        }
    }
    lines
}

/// `line` with the text of each code span replaced by spaces.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(c);
        } else if in_code {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links `[text](target)` (and images) of `line`, and of a
/// reference definition `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_owned());
        rest = &after[end..];
    }
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        if let Some((_, target)) = trimmed.split_once("]: ") {
            if let Some(target) = target.split_whitespace().next() {
                targets.push(target.to_owned());
            }
        }
    }
    targets
}

/// GitHub's anchor of a heading's text: the rendered text lowercased, every character
/// but letters, digits, spaces, `-` and `_` dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    // A link in a heading renders as its text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|at| open + at) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|at| close + at) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings (a repeated heading's later anchors get
/// `-1`, `-2`, ... as on GitHub).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    let mut fence: Option<&str> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"]
            .into_iter()
            .find(|marker| trimmed.starts_with(marker));
        match (fence, marker) {
            (None, Some(marker)) => {
                fence = Some(marker);
                continue;
            }
            (Some(open), Some(marker)) if open == marker => {
                fence = None;
                continue;
            }
            (Some(_), _) => continue,
            (None, None) => {}
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let text = line[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(text);
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        anchors.insert(anchor);
    }
    anchors
}

/// `path` with `.` and `..` resolved, without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with the link `target` of `document` (a path relative to `root`),
/// if anything.
fn broken(root: &Path, document: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        root.join(document)
    } else {
        lexical(&root.join(document.parent().unwrap()).join(path))
    };
    if !file.starts_with(root) {
        return Some(format!("{target}: outside the repository"));
    }
    if !file.exists() {
        return Some(format!("{target}: no file {}", file.display()));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|ext| ext != "md") {
        return Some(format!(
            "{target}: an anchor into a file that is not markdown"
        ));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let known = anchors(&text);
    (!known.contains(anchor)).then(|| {
        format!(
            "{target}: no heading with the anchor `{anchor}` in {}",
            file.strip_prefix(root).unwrap().display()
        )
    })
}

/// Every relative link of the documents resolves.
#[test]
fn every_relative_link_of_the_docs_resolves() {
    let root = root();
    let mut failures = Vec::new();
    let mut checked = 0;
    for document in documents() {
        let text = std::fs::read_to_string(root.join(&document)).unwrap();
        for (line, prose) in prose_lines(&text) {
            for target in link_targets(&prose) {
                checked += 1;
                if let Some(problem) = broken(&root, &document, &target) {
                    failures.push(format!("{}:{line}: {problem}", document.display()));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the parser broken?"
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The functions the documents name in code spans: snake_case words of five parts or
/// more (test names; metric names and options are shorter), with their places.
fn named_functions(markdown: &str) -> Vec<(usize, String)> {
    let mut names = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        for (at, span) in line.split('`').enumerate() {
            let is_name = at % 2 == 1
                && span.split('_').count() >= 5
                && span.split('_').all(|part| {
                    !part.is_empty()
                        && part
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                });
            if is_name {
                names.push((index + 1, span.to_owned()));
            }
        }
    }
    names
}

/// The text of every Rust file under `dir`.
fn rust_sources(dir: &Path, into: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, into);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            into.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// Every test (or other function) the documents name exists in the code.
#[test]
fn every_test_the_docs_name_exists() {
    let root = root();
    let mut sources = String::new();
    for dir in ["src", "tests", "examples", "benches"] {
        rust_sources(&root.join(dir), &mut sources);
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for document in documents() {
        let text = std::fs::read_to_string(root.join(&document)).unwrap();
        for (line, name) in named_functions(&text) {
            checked += 1;
            let defined = sources
                .match_indices(&format!("fn {name}"))
                .any(|(at, found)| {
                    sources[at + found.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| !(c.is_alphanumeric() || c == '_'))
                });
            if !defined {
                failures.push(format!("{}:{line}: no fn {name}", document.display()));
            }
        }
    }
    assert!(
        checked > 5,
        "only {checked} names found: is the parser broken?"
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The anchor rules, on headings of these documents.
#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(
        slug("Observability (`src/observe.rs`)"),
        "observability-srcobservers"
    );
    assert_eq!(
        slug("Topology changes: what holds, and in what order to make them"),
        "topology-changes-what-holds-and-in-what-order-to-make-them"
    );
    assert_eq!(slug("Coming from Redisson"), "coming-from-redisson");
    assert_eq!(slug("[Unreleased]"), "unreleased");
    assert_eq!(slug("Scripts (`lua/`)"), "scripts-lua");
    let repeated = anchors("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n");
    let expected: BTreeSet<String> = ["a", "notes", "notes-1"].map(str::to_owned).into();
    assert_eq!(repeated, expected);
    let line = without_code_spans("see [the design](docs/design.md#layers), not `[x](nowhere)`");
    assert_eq!(link_targets(&line), ["docs/design.md#layers"]);
}

/// The paths of the repository's files and folders that `text` names (`src/held.rs`,
/// `tests/common/`, `.ci/run`), globs (`lua/*.lua`) left out.
fn named_paths(text: &str) -> BTreeSet<String> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-' | '*');
    let mut paths = BTreeSet::new();
    for top in [
        "src/",
        "tests/",
        "lua/",
        "examples/",
        "benches/",
        "docs/",
        ".ci/",
    ] {
        for (at, _) in text.match_indices(top) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(path_char) {
                continue;
            }
            let path: String = text[at..].chars().take_while(|c| path_char(*c)).collect();
            let path = path.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            if path.len() > top.len() && !path.contains('*') {
                paths.insert(path.to_owned());
            }
        }
    }
    paths
}

/// Every file or folder of the repository the documents (and CONTRIBUTING.md) name,
/// in prose or in code, exists: a module that moved leaves no path behind.
#[test]
fn every_file_the_docs_name_exists() {
    let root = root();
    let mut documents = documents();
    documents.push(PathBuf::from("CONTRIBUTING.md"));
    let (mut checked, mut missing) = (0, Vec::new());
    for document in documents {
        let text = std::fs::read_to_string(root.join(&document)).unwrap();
        for path in named_paths(&text) {
            checked += 1;
            if !root.join(&path).exists() {
                missing.push(format!("{}: {path}", document.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the parser broken?"
    );
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}
