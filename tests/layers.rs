//! The layering rule of `src/lib.rs` and docs/design.md ("Layers"), checked: a module
//! imports modules of its own layer and of the layers below it, and no modules import
//! each other, directly or through others.
//!
//! The layers are read from `src/lib.rs`: a comment that is one word, or one word and a
//! colon (`// API`, `// tooling: ...`), starts a layer, top down, and the `mod` and
//! `pub mod` declarations under it are its modules. Then every `.rs` file under `src/`
//! (but `src/bin/`, a client of the library) is read without its comments and string
//! literals, and every path into the crate is resolved to the module it names:
//! `crate::m::..` (in `use` and in expressions, `crate::{a, b}` groups too),
//! `crate::Name` through the `pub use` lines of `src/lib.rs` to the module `Name` is
//! re-exported from, and `super::` that climbs out of a module's files to the crate
//! root. Each file belongs to its top-level module (`src/m.rs`, `src/m/..`). There are
//! no exceptions: a test failure lists every import that climbs, and every cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers of `src/lib.rs`, top down, with their modules; and the crate root's
/// re-exports (name → the module it comes from, `None` for another crate).
struct Layout {
    layers: Vec<(String, Vec<String>)>,
    reexports: BTreeMap<String, Option<String>>,
}

impl Layout {
    fn read(lib: &str) -> Self {
        let mut layers: Vec<(String, Vec<String>)> = Vec::new();
        for line in lib.lines().map(str::trim) {
            if let Some(layer) = layer_comment(line) {
                layers.push((layer.to_owned(), Vec::new()));
            } else if let Some(module) = module_declaration(line) {
                let (_, modules) = layers
                    .last_mut()
                    .unwrap_or_else(|| panic!("src/lib.rs declares `{module}` above any layer"));
                modules.push(module.to_owned());
            }
        }
        assert!(!layers.is_empty(), "src/lib.rs names no layers");
        let modules: BTreeSet<&str> = layers
            .iter()
            .flat_map(|(_, modules)| modules.iter().map(String::as_str))
            .collect();
        let mut reexports = BTreeMap::new();
        let tokens = tokens(&strip(lib));
        let mut at = 0;
        while at + 2 < tokens.len() {
            if tokens[at].text == "pub" && tokens[at + 1].text == "use" {
                let end = (at..tokens.len())
                    .find(|&i| tokens[i].text == ";")
                    .expect("a `pub use` ends");
                let source = &tokens[at + 2].text;
                let from = modules.contains(source.as_str()).then(|| source.clone());
                for name in exported_names(&tokens[at + 2..end]) {
                    reexports.insert(name, from.clone());
                }
                at = end;
            }
            at += 1;
        }
        Self { layers, reexports }
    }

    /// The layer of `module`: its index, top down, and its name.
    fn layer(&self, module: &str) -> Option<(usize, &str)> {
        self.layers
            .iter()
            .position(|(_, modules)| modules.iter().any(|m| m == module))
            .map(|index| (index, self.layers[index].0.as_str()))
    }

    /// The module the crate-root name `name` is, or is re-exported from; `Ok(None)`
    /// for another crate's.
    fn resolve(&self, name: &str) -> Result<Option<String>, ()> {
        if self.layer(name).is_some() {
            return Ok(Some(name.to_owned()));
        }
        self.reexports.get(name).cloned().ok_or(())
    }
}

/// The layer a line of `src/lib.rs` starts, if it is a layer comment: `// word` or
/// `// word: what it holds`.
fn layer_comment(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("// ")?;
    let word = rest.split(':').next()?;
    let is_word = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic());
    (is_word && (word.len() == rest.len() || rest[word.len()..].starts_with(':'))).then_some(word)
}

/// The module a line of `src/lib.rs` declares with a file of its own (`mod m;`,
/// `pub mod m;`, `pub(crate) mod m;`); inline `mod m {}` blocks are not layered.
fn module_declaration(line: &str) -> Option<&str> {
    let line = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let name = line.strip_prefix("mod ")?.strip_suffix(';')?;
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(name)
}

/// The names a `pub use` brings to the crate root, from its tokens after `pub use`:
/// `m::{A, B as C}` gives `A` and `C`, `m::A` gives `A`, `fred` gives `fred`.
fn exported_names(tokens: &[Token]) -> Vec<String> {
    let mut names = Vec::new();
    let mut last = None;
    let mut renamed = false;
    for token in tokens {
        match token.text.as_str() {
            "," | "}" => {
                names.extend(last.take());
                renamed = false;
            }
            "as" => renamed = true,
            "::" | "{" => last = None,
            text if is_ident(text) && (renamed || last.is_none()) => {
                last = Some(text.to_owned());
            }
            _ => {}
        }
    }
    names.extend(last);
    names
}

/// `source` without its comments (doc comments included) and with each string and
/// character literal emptied, so that neither is read as a path; lines are kept.
fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    // Newlines inside what is dropped, kept so that line numbers stay right.
    let keep_lines = |out: &mut String, dropped: &[char]| {
        out.extend(dropped.iter().filter(|&&c| c == '\n'));
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let (start, mut depth) = (i, 0);
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            keep_lines(&mut out, &chars[start..i]);
        } else if c == 'r'
            && !after_ident
            && matches!(next, Some('"' | '#'))
            && raw_string(&chars[i + 1..]).is_some()
        {
            let length = raw_string(&chars[i + 1..]).expect("checked");
            keep_lines(&mut out, &chars[i..i + 1 + length]);
            out.push_str("\"\"");
            i += 1 + length;
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            let literal: String = chars[start + 1..(i - 1).min(chars.len())].iter().collect();
            keep_lines(&mut out, &chars[start..i.min(chars.len())]);
            if is_crate_path(&literal) {
                // A path in an attribute, e.g. serde's `with = "crate::serde_millis"`.
                out.push_str(&literal);
            } else {
                out.push_str("\"\"");
            }
        } else if c == '\'' && next == Some('\\') {
            // An escaped character: '\n', '\'', '\u{..}'.
            i += 3;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            // A lifetime's quote, or code.
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether a string literal's text is a path into the crate (`crate::a::b`).
fn is_crate_path(text: &str) -> bool {
    let mut segments = text.split("::");
    segments.next() == Some("crate")
        && text.contains("::")
        && segments.all(|s| is_ident(s) && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
}

/// The length of the raw string starting after its `r` (`#"..."#`), if it is one.
fn raw_string(chars: &[char]) -> Option<usize> {
    let hashes = chars.iter().take_while(|&&c| c == '#').count();
    if chars.get(hashes) != Some(&'"') {
        return None;
    }
    let body = hashes + 1;
    (body..chars.len())
        .find(|&i| {
            chars[i] == '"'
                && chars[i + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == '#')
                    .count()
                    == hashes
        })
        .map(|end| end + 1 + hashes)
}

/// A token of stripped code: an identifier (with `$crate`'s `crate`), `::`, or one
/// other character; with its line.
#[derive(Debug)]
struct Token {
    text: String,
    line: usize,
}

fn is_ident(text: &str) -> bool {
    text.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

fn tokens(code: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let start = i;
            if c.is_alphabetic() || c == '_' {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                i += 2;
            } else if c.is_whitespace() {
                i += 1;
                continue;
            } else {
                i += 1;
            }
            tokens.push(Token {
                text: chars[start..i].iter().collect(),
                line: index + 1,
            });
        }
    }
    tokens
}

/// A path of a file into the crate root: where, the text (`crate::compat::Compat`),
/// and the crate-root segment it starts from (`compat`).
#[derive(Debug)]
struct RootPath {
    line: usize,
    text: String,
    first: String,
}

/// Every path of `code` into the crate root, for a file `depth` modules below its
/// top-level module (`src/m.rs` and `src/m/mod.rs`: 0; `src/m/a.rs`: 1). A `super::`
/// that stays inside the top-level module (counting inline `mod x { .. }` blocks) is
/// no path into the root.
fn root_paths(code: &str, depth: usize) -> Vec<RootPath> {
    let tokens = tokens(code);
    let mut paths = Vec::new();
    // The brace depths at which inline modules opened.
    let mut inline = Vec::new();
    let mut braces = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let text = tokens[i].text.as_str();
        match text {
            "{" => braces += 1,
            "}" => {
                braces = braces.saturating_sub(1);
                while inline.last().is_some_and(|&opened| opened > braces) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline.push(braces + 1);
            }
            _ => {}
        }
        let start = i;
        let after = if text == "crate" && tokens.get(i + 1).is_some_and(|t| t.text == "::") {
            Some(i + 2)
        } else if text == "super" && tokens.get(i + 1).is_some_and(|t| t.text == "::") {
            let mut supers = 0;
            let mut j = i;
            while tokens.get(j).is_some_and(|t| t.text == "super")
                && tokens.get(j + 1).is_some_and(|t| t.text == "::")
            {
                supers += 1;
                j += 2;
            }
            i = j - 1;
            (supers > depth + inline.len()).then_some(j)
        } else {
            None
        };
        if let Some(after) = after {
            let line = tokens[start].line;
            let shown = |end: usize| {
                tokens[start..end.min(tokens.len())]
                    .iter()
                    .map(|t| t.text.as_str())
                    .collect::<String>()
            };
            match tokens.get(after).map(|t| t.text.as_str()) {
                Some("{") => {
                    // `crate::{a::X, b, c::{..}}`: the first segment of each item.
                    let mut level = 0;
                    let mut expecting = true;
                    let mut j = after;
                    while let Some(token) = tokens.get(j) {
                        match token.text.as_str() {
                            "{" => level += 1,
                            "}" => {
                                level -= 1;
                                if level == 0 {
                                    break;
                                }
                            }
                            "," if level == 1 => expecting = true,
                            name if level == 1 && expecting && is_ident(name) => {
                                expecting = false;
                                paths.push(RootPath {
                                    line,
                                    text: format!("{}{{{name}..}}", shown(after)),
                                    first: name.to_owned(),
                                });
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                }
                Some(name) if is_ident(name) => {
                    let mut end = after + 1;
                    while tokens.get(end).is_some_and(|t| t.text == "::")
                        && tokens.get(end + 1).is_some_and(|t| is_ident(&t.text))
                    {
                        end += 2;
                    }
                    paths.push(RootPath {
                        line,
                        text: shown(end),
                        first: name.to_owned(),
                    });
                }
                _ => {}
            }
        }
        i += 1;
    }
    paths
}

/// The `.rs` files under `dir`, sorted.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// An import of one module by another: the file and line, and the path as written.
#[derive(Debug, Clone)]
struct Import {
    from: String,
    to: String,
    at: String,
    path: String,
}

/// The imports between the crate's modules, and the problems found reading them.
fn imports(src: &Path, layout: &Layout) -> (Vec<Import>, Vec<String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let (mut imports, mut problems) = (Vec::new(), Vec::new());
    for file in files {
        let relative = file.strip_prefix(src).expect("under src/");
        let parts: Vec<String> = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if parts == ["lib.rs"] || parts[0] == "bin" {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs").to_owned();
        // Modules below the top-level one: `m.rs` and `m/mod.rs` are 0, `m/a.rs` 1.
        let depth = parts.len() - 1 - usize::from(parts.last().is_some_and(|p| p == "mod.rs"));
        let shown = format!("src/{}", parts.join("/"));
        if layout.layer(&module).is_none() {
            problems.push(format!(
                "{shown}: module `{module}` is declared under no layer of src/lib.rs"
            ));
            continue;
        }
        let code = strip(&fs::read_to_string(&file).expect("a source file"));
        for path in root_paths(&code, depth) {
            let at = format!("{shown}:{}", path.line);
            match layout.resolve(&path.first) {
                Ok(Some(to)) if to != module => imports.push(Import {
                    from: module.clone(),
                    to,
                    at,
                    path: path.text,
                }),
                Ok(_) => {}
                Err(()) => problems.push(format!(
                    "{at}: `{}` names `{}`, neither a module of src/lib.rs nor one of its `pub use`s",
                    path.text, path.first
                )),
            }
        }
    }
    (imports, problems)
}

/// The imports that climb: from a module to one of a higher layer.
fn climbing<'a>(imports: &'a [Import], layout: &Layout) -> Vec<&'a Import> {
    imports
        .iter()
        .filter(|import| {
            let layer = |module: &str| layout.layer(module).expect("layered").0;
            layer(&import.to) < layer(&import.from)
        })
        .collect()
}

/// The cycles between modules: each strongly connected group of more than one module
/// (Tarjan), as one cycle through it.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Search<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        groups: Vec<Vec<&'a str>>,
    }
    impl<'a> Search<'a> {
        fn visit(&mut self, module: &'a str) {
            let n = self.index.len();
            self.index.insert(module, n);
            self.low.insert(module, n);
            self.stack.push(module);
            for next in self.edges.get(module).into_iter().flatten() {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[module].min(self.low[next.as_str()]);
                    self.low.insert(module, low);
                } else if self.stack.contains(&next.as_str()) {
                    let low = self.low[module].min(self.index[next.as_str()]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let at = self
                    .stack
                    .iter()
                    .position(|&m| m == module)
                    .expect("on the stack");
                let group = self.stack.split_off(at);
                if group.len() > 1 {
                    self.groups.push(group);
                }
            }
        }
    }
    let mut search = Search {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        groups: Vec::new(),
    };
    for module in edges.keys() {
        if !search.index.contains_key(module.as_str()) {
            search.visit(module);
        }
    }
    // One cycle through each group: from its first module, the shortest way back.
    search
        .groups
        .iter()
        .map(|group| {
            let members: BTreeSet<&str> = group.iter().copied().collect();
            let start = *members.first().expect("not empty");
            let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
            let mut frontier = vec![start];
            'search: while !frontier.is_empty() {
                let mut next_frontier = Vec::new();
                for module in frontier {
                    for next in edges.get(module).into_iter().flatten() {
                        let next = next.as_str();
                        if !members.contains(next) || previous.contains_key(next) {
                            continue;
                        }
                        previous.insert(next, module);
                        if next == start {
                            break 'search;
                        }
                        next_frontier.push(next);
                    }
                }
                frontier = next_frontier;
            }
            let mut cycle = vec![start.to_owned()];
            let mut at = previous[start];
            while at != start {
                cycle.push(at.to_owned());
                at = previous[at];
            }
            cycle.push(start.to_owned());
            cycle.reverse();
            cycle
        })
        .collect()
}

#[test]
fn modules_import_only_their_own_layer_and_those_below_without_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let layout = Layout::read(&lib);
    let (imports, problems) = imports(&root.join("src"), &layout);
    assert!(
        imports.len() > 50,
        "only {} imports between modules found: is the reader broken?",
        imports.len()
    );

    let mut report = String::new();
    let order: Vec<&str> = layout
        .layers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    let climbs = climbing(&imports, &layout);
    if !climbs.is_empty() {
        let _ = writeln!(
            report,
            "{} imports climb to a higher layer (src/lib.rs's layers, top down: {}):",
            climbs.len(),
            order.join(", ")
        );
        for import in &climbs {
            let layer = |module: &str| layout.layer(module).expect("layered").1.to_owned();
            let _ = writeln!(
                report,
                "  {}: {} ({}) -> {} ({}): {}",
                import.at,
                import.from,
                layer(&import.from),
                import.to,
                layer(&import.to),
                import.path
            );
        }
    }

    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for import in &imports {
        edges
            .entry(import.from.clone())
            .or_default()
            .insert(import.to.clone());
    }
    let cycles = cycles(&edges);
    if !cycles.is_empty() {
        let _ = writeln!(report, "{} cycles between modules:", cycles.len());
        for cycle in &cycles {
            let _ = writeln!(report, "  {}", cycle.join(" -> "));
            for pair in cycle.windows(2) {
                let first = imports
                    .iter()
                    .find(|i| i.from == pair[0] && i.to == pair[1])
                    .expect("an edge of the cycle");
                let _ = writeln!(
                    report,
                    "    {} -> {}: {} ({})",
                    pair[0], pair[1], first.path, first.at
                );
            }
        }
    }

    if !problems.is_empty() {
        let _ = writeln!(report, "{} paths could not be checked:", problems.len());
        for problem in &problems {
            let _ = writeln!(report, "  {problem}");
        }
    }
    assert!(report.is_empty(), "the layering rule is broken\n{report}");
}

/// The reader itself: comments, doc comments and strings are not paths; `crate::`
/// groups, re-exported names and `super::` out of a module's files are.
#[test]
fn the_reader_finds_paths_in_code_only() {
    let code = strip(
        r##"//! [`x`](crate::doc_link)
/// crate::doc_comment
use crate::{error::Result, keys::{Kind, LockNames}};
/* crate::block /* nested crate::block */ */
let url = "redis://crate::in_a_string"; let raw = r#"crate::raw"#;
let c = '"'; let l: &'static str = crate::expression::call();
use super::sibling;
mod tests { use super::*; }
#[serde(with = "crate::serde_millis")] let e = '\''; let f = crate::after_escape;
"##,
    );
    let found: Vec<(usize, String)> = root_paths(&code, 1)
        .into_iter()
        .map(|path| (path.line, path.first))
        .collect();
    let expected = [
        (3, "error"),
        (3, "keys"),
        (6, "expression"),
        (9, "serde_millis"),
        (9, "after_escape"),
    ];
    let expected: Vec<(usize, String)> = expected.iter().map(|&(l, m)| (l, m.to_owned())).collect();
    assert_eq!(found, expected);
    // A top-level module's file: `super::` leaves it.
    let top: Vec<String> = root_paths("use super::LockClient;\n", 0)
        .into_iter()
        .map(|path| path.first)
        .collect();
    assert_eq!(top, ["LockClient"]);

    let layout = Layout::read(
        "// The layers, top down.\n// API\nmod client;\n#[cfg(x)]\npub mod fence;\n// ground: below\nmod error;\nmod readme {}\npub use client::{LockClient, Other as Renamed};\npub use error::{LockError,\n    Result};\npub use fred;\n",
    );
    let layers: Vec<(&str, Vec<&str>)> = layout
        .layers
        .iter()
        .map(|(name, modules)| (name.as_str(), modules.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        layers,
        [("API", vec!["client", "fence"]), ("ground", vec!["error"])]
    );
    assert_eq!(layout.resolve("Renamed"), Ok(Some("client".to_owned())));
    assert_eq!(layout.resolve("Result"), Ok(Some("error".to_owned())));
    assert_eq!(layout.resolve("fred"), Ok(None));
    assert_eq!(layout.resolve("Other"), Err(()));

    let edges: BTreeMap<String, BTreeSet<String>> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
            .iter()
            .fold(BTreeMap::new(), |mut edges, &(from, to)| {
                edges
                    .entry(from.to_owned())
                    .or_default()
                    .insert(to.to_owned());
                edges
            });
    assert_eq!(cycles(&edges), [["a", "b", "c", "a"]]);
}
