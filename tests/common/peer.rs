//! A Redisson peer: another client's process (node-redisson's `tests/interop/peer.js`,
//! Java Redisson's `tests/interop-java`) driven over its stdin by numbered commands,
//! one a line (`ID COMMAND ARGS...`), and answering on its stdout with the same id
//! (`ID WORDS...`). Each interop test spawns its own peer and checks its `ready` line.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// A peer process driven over its stdin, killed (by its PID) when dropped.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
    /// Answers read while waiting for another id.
    unread: Mutex<Vec<String>>,
    next_id: u64,
    /// What the peer is called in failures: "the {name} failed".
    name: &'static str,
}

impl Peer {
    /// Drives `child`, spawned with its stdin and stdout piped, and waits up to
    /// `ready_within` for its first line, which it returns for the caller to check.
    /// `name` says which peer in failures (`Java peer`: "the Java peer exited").
    pub fn new(mut child: Child, name: &'static str, ready_within: Duration) -> (Self, String) {
        let stdin = child.stdin.take().expect("the peer's stdin is piped");
        let stdout = BufReader::new(child.stdout.take().expect("the peer's stdout is piped"));
        let (send, answers) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let peer = Self {
            child,
            stdin,
            answers,
            unread: Mutex::new(Vec::new()),
            next_id: 0,
            name,
        };
        // The peer connects to Redis before it says `ready`: let the runtime's other
        // threads run meanwhile. (A panic here drops, so kills, the peer.)
        let ready = tokio::task::block_in_place(|| peer.answers.recv_timeout(ready_within))
            .unwrap_or_else(|e| {
                panic!("the {name} said no `ready` line within {ready_within:?}: {e}")
            });
        (peer, ready)
    }

    /// Sends a command; returns its id.
    pub fn send(&mut self, command: &str) -> u64 {
        self.next_id += 1;
        writeln!(self.stdin, "{} {command}", self.next_id).unwrap();
        self.stdin.flush().unwrap();
        self.next_id
    }

    /// The answer to command `id` (its words after the id), or `None` after `limit`.
    pub fn answer(&self, id: u64, limit: Duration) -> Option<Vec<String>> {
        let prefix = format!("{id} ");
        let take = |line: &str| {
            line.strip_prefix(&prefix)
                .map(|rest| rest.split(' ').map(str::to_owned).collect::<Vec<_>>())
        };
        // The peer's answers are read on a thread of the runtime: let the others run.
        tokio::task::block_in_place(|| self.wait_for(&prefix, limit, take))
    }

    fn wait_for(
        &self,
        prefix: &str,
        limit: Duration,
        take: impl Fn(&str) -> Option<Vec<String>>,
    ) -> Option<Vec<String>> {
        let mut unread = self.unread.lock().unwrap();
        if let Some(at) = unread.iter().position(|line| line.starts_with(prefix)) {
            return take(&unread.remove(at));
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(line) => match take(&line) {
                    Some(words) => {
                        assert_ne!(words[0], "error", "the {} failed: {line}", self.name);
                        return Some(words);
                    }
                    None => unread.push(line),
                },
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => panic!("the {} exited", self.name),
            }
        }
    }

    /// Sends a command and waits for its answer.
    pub fn call(&mut self, command: &str, limit: Duration) -> Vec<String> {
        let id = self.send(command);
        self.answer(id, limit)
            .unwrap_or_else(|| panic!("no answer to `{command}` within {limit:?}"))
    }

    /// Kills the peer as a crash would (SIGKILL, by its PID).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}
