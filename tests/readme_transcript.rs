//! The README's command-line examples, checked against the real `holdlock` binary:
//! each session is replayed against a throwaway redis-server, and the synopsis and
//! `run`'s exit-status table are compared with the binary's `--help`.
//!
//! # How a session is written, and read here
//!
//! A session is a ```` ```text ```` block of README.md whose first line starts with
//! `$ `. Each line starting with `$ ` is a command, typed into one `sh` (so `export`,
//! `;`, `$?` and `&` work as in a terminal) whose `PATH` starts with the built
//! `holdlock` and whose `HOLDLOCK_URL` names the test's own server (it takes
//! precedence over the session's `REDIS_URL`). The lines up to the next command are
//! what the command prints, stdout and stderr together.
//!
//! - A command ending in `&` runs in the background, as in a shell; if it is a
//!   `holdlock run NAME ...`, the next command is typed once the lock NAME is held
//!   (a person at a terminal waits that long without noticing). What a background
//!   command prints is shown after the output of the command during which it
//!   appeared (here: the lost-lock lines after `unlock --force`); the test waits up
//!   to 20 s for as many lines as the README shows.
//! - Values that differ from run to run are written as a real run printed them, and
//!   both sides are normalized before they are compared: a UUID matches any UUID; a
//!   number of 4 or more digits (fencing tokens, milliseconds) any such number; a
//!   duration like `2.5s`, `3s` or `980ms` any duration; `<host> pid <n>` (the data
//!   `run` records) any host and pid; and runs of spaces count as one (table columns
//!   are as wide as their contents).
//! - Anything else that varies may be written `[..]` in an output line: it matches any
//!   text within the line.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How long one command may take (a guard against a hang, not a speed check).
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// How long the test waits for the lines a background command still owes.
const BACKGROUND_LIMIT: Duration = Duration::from_secs(20);

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A fenced block of a markdown file: its info string, the line number of its first
/// line (1-based) and its lines.
struct Block {
    info: String,
    first_line: usize,
    lines: Vec<String>,
}

fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    first_line: index + 2,
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => blocks.extend(open.take()),
            (Some(block), _) => block.lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    blocks
}

/// One command of a session and the lines the README shows it printing.
#[derive(Debug)]
struct Step {
    /// README.md's line number of the command.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The sessions of the README: its ```text blocks that begin with a `$ ` command.
fn sessions(markdown: &str) -> Vec<Vec<Step>> {
    fenced_blocks(markdown)
        .into_iter()
        .filter(|block| block.info == "text")
        .filter(|block| {
            block
                .lines
                .first()
                .is_some_and(|line| line.starts_with("$ "))
        })
        .map(|block| {
            let mut steps: Vec<Step> = Vec::new();
            for (offset, line) in block.lines.iter().enumerate() {
                match line.strip_prefix("$ ") {
                    Some(command) => steps.push(Step {
                        line: block.first_line + offset,
                        command: command.to_owned(),
                        expected: Vec::new(),
                    }),
                    None => steps.last_mut().unwrap().expected.push(line.clone()),
                }
            }
            steps
        })
        .collect()
}

/// The directory of the `holdlock` binary built for this test.
fn binary_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_holdlock"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A fresh directory for one session's files.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "holdlock-transcript-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One `sh` typed into, as a person at a terminal would.
struct Shell {
    child: Child,
    stdin: ChildStdin,
    /// The shell's stdout and stderr, a line at a time.
    lines: Receiver<String>,
    /// Where background commands write (stdout and stderr), and how much of it has
    /// been read.
    background: PathBuf,
    background_read: usize,
    url: String,
    marks: usize,
}

impl Shell {
    fn start(url: &str, dir: &Path) -> Self {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![binary_dir()];
        paths.extend(std::env::split_paths(&path));
        let mut child = Command::new("sh")
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("HOLDLOCK_URL", url)
            .env_remove("REDIS_URL")
            .env_remove("HOLDLOCK_PREFIX")
            .env_remove("HOLDLOCK_COMPAT")
            .env_remove("HOLDLOCK_CONNECT_TIMEOUT")
            .env_remove("RUST_LOG")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run sh");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut shell = Self {
            child,
            stdin,
            lines,
            background: dir.join("background.log"),
            background_read: 0,
            url: url.to_owned(),
            marks: 0,
        };
        // Everything a command says, on the one pipe read here.
        shell.type_line("exec 2>&1");
        shell
    }

    fn type_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("sh reads its input");
        self.stdin.flush().unwrap();
    }

    /// Types `command` and returns what it printed (and what background commands
    /// printed meanwhile, after it), waiting for as many lines as `wanted`.
    fn run(&mut self, command: &str, wanted: usize) -> Vec<String> {
        let background = command.trim_end().strip_suffix('&').map(str::trim_end);
        match background {
            Some(command) => {
                let log = self.background.display().to_string();
                self.type_line(&format!("{command} >>'{log}' 2>&1 &"));
            }
            None => self.type_line(command),
        }
        self.marks += 1;
        let mark = format!("--- end of step {} ---", self.marks);
        self.type_line(&format!("echo '{mark}'"));
        let mut printed = Vec::new();
        let deadline = Instant::now() + COMMAND_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == mark => break,
                Ok(line) => printed.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "`{command}` did not finish within {COMMAND_LIMIT:?}; printed {printed:?}"
                    )
                }
                Err(RecvTimeoutError::Disconnected) => panic!("sh exited during `{command}`"),
            }
        }
        if let Some(command) = background {
            self.wait_for_lock_of(command);
        }
        let deadline = Instant::now() + BACKGROUND_LIMIT;
        loop {
            printed.extend(self.background_lines());
            if printed.len() >= wanted || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        printed
    }

    /// The complete lines background commands wrote since the last call.
    fn background_lines(&mut self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.background).unwrap_or_default();
        let complete = text.rfind('\n').map_or(0, |end| end + 1);
        if complete <= self.background_read {
            return Vec::new();
        }
        let new = text[self.background_read..complete]
            .lines()
            .map(str::to_owned)
            .collect();
        self.background_read = complete;
        new
    }

    /// For a background `holdlock run NAME ...`: waits until the lock NAME is held.
    fn wait_for_lock_of(&self, command: &str) {
        let words: Vec<&str> = command.split_whitespace().collect();
        let ["holdlock", "run", name, ..] = words[..] else {
            return;
        };
        let kind = if words.contains(&"--permits") {
            "semaphore"
        } else {
            "mutex"
        };
        common::wait_until(&format!("{name} is held"), Duration::from_secs(10), || {
            Command::new(env!("CARGO_BIN_EXE_holdlock"))
                .args(["--url", &self.url, "inspect", name, "--kind", kind])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        });
    }

    /// Waits for the background commands and the shell to end; what they printed
    /// after the last step.
    fn finish(mut self) -> Vec<String> {
        self.type_line("wait");
        self.type_line("exit");
        let deadline = Instant::now() + COMMAND_LIMIT;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                let mut rest: Vec<String> = self.lines.try_iter().collect();
                rest.extend(self.background_lines());
                return rest;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("the session's shell did not end within {COMMAND_LIMIT:?}");
    }
}

/// `line` with what varies from run to run made uniform (see the module docs).
fn normalize(line: &str) -> String {
    let line = replace_uuids(line);
    let line = replace_host_and_pid(&line);
    let line = replace_numbers(&line);
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn replace_uuids(line: &str) -> String {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = line.as_bytes();
    let is_uuid_at = |start: usize| {
        let mut at = start;
        for (index, length) in SHAPE.iter().enumerate() {
            if index > 0 {
                if bytes.get(at) != Some(&b'-') {
                    return false;
                }
                at += 1;
            }
            let Some(part) = bytes.get(at..at + length) else {
                return false;
            };
            if !part.iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            at += length;
        }
        true
    };
    let mut out = String::new();
    let mut at = 0;
    while at < line.len() {
        if line.is_char_boundary(at) && is_uuid_at(at) {
            out.push_str("<uuid>");
            at += 36;
        } else {
            let c = line[at..].chars().next().unwrap();
            out.push(c);
            at += c.len_utf8();
        }
    }
    out
}

/// `<hostname> pid <digits>` (the data `run` records) as `<host> pid <pid>`.
fn replace_host_and_pid(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(found) = rest.find(" pid ") {
        let (before, after) = rest.split_at(found);
        let after = &after[" pid ".len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            out.push_str(&rest[..found + " pid ".len()]);
            rest = after;
            continue;
        }
        let host_start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'))
            .map_or(0, |at| at + 1);
        if host_start < before.len() {
            out.push_str(&before[..host_start]);
            out.push_str("<host>");
        } else {
            out.push_str(before);
        }
        out.push_str(" pid <pid>");
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// Durations (`2.5s`, `3s`, `980ms`) as `<duration>`, other numbers of 4 or more
/// digits as `<n>`.
fn replace_numbers(line: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = line.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        let starts_word = at == 0 || !chars[at - 1].is_ascii_alphanumeric();
        if !(chars[at].is_ascii_digit() && starts_word) {
            out.push(chars[at]);
            at += 1;
            continue;
        }
        let mut end = at;
        while end < chars.len() && chars[end].is_ascii_digit() {
            end += 1;
        }
        let digits = end - at;
        if end + 1 < chars.len() && chars[end] == '.' && chars[end + 1].is_ascii_digit() {
            end += 1;
            while end < chars.len() && chars[end].is_ascii_digit() {
                end += 1;
            }
        }
        let unit = ["ms", "s"].into_iter().find(|unit| {
            let unit: Vec<char> = unit.chars().collect();
            chars.get(end..end + unit.len()) == Some(&unit[..])
                && chars
                    .get(end + unit.len())
                    .is_none_or(|c| !c.is_ascii_alphanumeric())
        });
        if let Some(unit) = unit {
            out.push_str("<duration>");
            at = end + unit.len();
        } else if digits >= 4 && end == at + digits {
            out.push_str("<n>");
            at = end;
        } else {
            out.extend(&chars[at..end]);
            at = end;
        }
    }
    out
}

/// Whether the normalized `actual` line is the normalized `expected` one, where `[..]`
/// in `expected` matches any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let (expected, actual) = (normalize(expected), normalize(actual));
    let pieces: Vec<&str> = expected.split("[..]").map(str::trim).collect();
    if pieces.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

fn lines_match(expected: &[String], actual: &[String]) -> bool {
    expected.len() == actual.len()
        && expected
            .iter()
            .zip(actual)
            .all(|(expected, actual)| line_matches(expected, actual))
}

/// The README's sessions, replayed: every command prints what the README shows.
#[test]
fn the_readme_sessions_print_what_the_readme_shows() {
    let sessions = sessions(&readme());
    assert!(!sessions.is_empty(), "README.md has no session to check");
    let mut failures = Vec::new();
    for steps in sessions {
        let server = common::RedisServer::start();
        let dir = scratch();
        let mut shell = Shell::start(&server.url(), &dir);
        for step in &steps {
            let printed = shell.run(&step.command, step.expected.len());
            if !lines_match(&step.expected, &printed) {
                failures.push(format!(
                    "README.md:{}: $ {}\n  the README shows:\n{}\n  it printed:\n{}",
                    step.line,
                    step.command,
                    indent(&step.expected),
                    indent(&printed)
                ));
            }
        }
        let rest = shell.finish();
        if !rest.is_empty() {
            failures.push(format!(
                "after the session's last command, it printed:\n{}",
                indent(&rest)
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

fn indent(lines: &[String]) -> String {
    lines
        .iter()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `holdlock ARGS` without a server; its stdout, if it succeeded.
fn help(args: &[&str]) -> Option<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_holdlock"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run holdlock");
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The README's synopsis (the ```text block of `holdlock ...` lines): every
/// subcommand it shows exists with every flag it shows, and it shows every
/// subcommand the binary has.
#[test]
fn the_readme_synopsis_names_every_subcommand_and_only_real_flags() {
    let blocks = fenced_blocks(&readme());
    let synopsis = blocks
        .iter()
        .find(|block| {
            block.info == "text"
                && block
                    .lines
                    .first()
                    .is_some_and(|l| l.starts_with("holdlock "))
        })
        .expect("README.md has a synopsis block");
    // Each entry: the subcommand (None for the global line) and its lines.
    let mut entries: Vec<(Option<String>, String)> = Vec::new();
    for line in &synopsis.lines {
        if let Some(rest) = line.strip_prefix("holdlock ") {
            let first = rest.split_whitespace().next().unwrap_or_default();
            let subcommand = first
                .chars()
                .all(|c| c.is_ascii_lowercase())
                .then(|| first.to_owned());
            entries.push((subcommand, line.clone()));
        } else if line.starts_with(' ') {
            entries.last_mut().expect("a line to continue").1 += line;
        }
    }
    let global = help(&["--help"]).expect("holdlock --help");
    let mut failures = Vec::new();
    let mut shown = Vec::new();
    for (subcommand, text) in &entries {
        // The text before a `#` comment.
        let text = text.split(" # ").next().unwrap();
        let flags: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || "[]|".contains(c))
            .filter(|word| word.starts_with("--") && word.len() > 2)
            .collect();
        let help_text = match subcommand {
            None => global.clone(),
            Some(name) => {
                shown.push(name.clone());
                if name == "bench" && !cfg!(feature = "bench") {
                    continue;
                }
                match help(&[name, "--help"]) {
                    Some(text) => text,
                    None => {
                        failures.push(format!("`holdlock {name}` does not exist"));
                        continue;
                    }
                }
            }
        };
        for flag in flags {
            let flag = flag.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            let known = help_text
                .split(|c: char| c.is_whitespace() || c == ',')
                .any(|word| word == flag);
            if !known {
                failures.push(format!(
                    "README.md synopsis: `holdlock {}` has no flag {flag}",
                    subcommand.as_deref().unwrap_or("")
                ));
            }
        }
    }
    // Every subcommand of the binary (but `help`) has its line.
    let commands = global
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("holdlock --help lists its commands");
    for line in commands.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if name != "help" && !shown.iter().any(|shown| shown == name) {
            failures.push(format!("README.md synopsis lacks `holdlock {name}`"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The README's table of `run`'s exit statuses names the statuses `run --help` names.
#[test]
fn the_readme_exit_statuses_of_run_are_those_of_run_help() {
    let readme = readme();
    let table = readme
        .split("| exit status of `run` | meaning |")
        .nth(1)
        .expect("README.md has the table of run's exit statuses");
    let mut in_readme: Vec<u16> = table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .flat_map(|line| {
            let status = line.split('|').nth(1).unwrap_or_default().to_owned();
            numbers(&status)
        })
        .collect();
    let run_help = help(&["run", "--help"]).expect("holdlock run --help");
    let statuses = run_help
        .split("Exit status:")
        .nth(1)
        .expect("run --help lists its exit statuses");
    let mut in_help: Vec<u16> = statuses
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            // Continuation lines start with words, status lines with a status.
            let status: String = line.split("  ").next()?.to_owned();
            status
                .starts_with(|c: char| c.is_ascii_digit())
                .then(|| numbers(&status))
        })
        .flatten()
        .collect();
    in_readme.sort_unstable();
    in_help.sort_unstable();
    assert_eq!(
        in_readme, in_help,
        "README.md's exit statuses of `run` against `holdlock run --help`'s"
    );
}

/// The numbers in `text` (`126 / 127` → 126, 127); `128+N` is not a status.
fn numbers(text: &str) -> Vec<u16> {
    text.split(|c: char| !c.is_ascii_digit() && c != '+')
        .filter(|word| !word.contains('+'))
        .filter_map(|word| word.parse().ok())
        .collect()
}

/// The convention of the module docs, on the lines of the README's session.
#[test]
fn variable_values_match_and_everything_else_must_be_equal() {
    let readme_row = "nightly-report  mutex  b0a0b476-8975-48d4-93a2-9f52a835559b:scope-1  1      2.5s  1795333179012345  web-3 pid 6539: sleep 30";
    let run_row = "nightly-report  mutex  6be86d42-8dd6-47a5-bc96-2d1522a973a9:scope-1  1      980ms  1795797621380047  vm pid 713: sleep 30";
    assert!(line_matches(readme_row, run_row));
    assert!(!line_matches(
        readme_row,
        &run_row.replace("mutex", "fair ")
    ));
    assert!(!line_matches(
        readme_row,
        &run_row.replace("scope-1", "scope-2")
    ));
    assert!(!line_matches(
        readme_row,
        &run_row.replace("sleep 30", "sleep 31")
    ));
    assert!(!line_matches("exit status 75", "exit status 74"));
    assert!(line_matches(
        r#"{"ttl_ms":2483,"waiting":false}"#,
        r#"{"ttl_ms":2911,"waiting":false}"#
    ));
    assert!(line_matches(
        "took [..] in all",
        "took about 3 tries in all"
    ));
    assert!(!line_matches("took [..] in all", "took about 3 tries"));
    assert!(line_matches("(once per 24h)", "(once per 24h)"));
    assert!(!line_matches("(once per 24h)", "(once per 12h)"));
}
