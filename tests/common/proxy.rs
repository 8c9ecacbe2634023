//! A loopback TCP proxy in front of one redis-server that injects exactly the faults a
//! test arms: the reply to one chosen command lost with its connection, or a chosen
//! command answered by the proxy itself (never reaching Redis). Every other byte is
//! passed through unchanged, in order.
//!
//! The proxy reads the RESP frames of both directions: each command a client sends is
//! matched against the armed faults, and the replies coming back are paired with the
//! commands in order (a RESP3 push frame is passed through unpaired). That pairing is
//! exact on a command connection; on a subscriber's connection (RESP2 sends messages
//! as plain arrays) it is not, so a fault should name a command a subscriber does not
//! send.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// One command as the client sent it: its arguments, the name first.
pub type Command = [Vec<u8>];

/// What the proxy does to a command an armed fault matches.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The command reaches Redis and runs; its reply is withheld and the client's
    /// connection closed as soon as the reply arrives: a reply lost in transit.
    LoseReply,
    /// The command never reaches Redis; the proxy answers it with these bytes (a whole
    /// RESP frame, e.g. `-NOSCRIPT ...\r\n`), in its place among the replies.
    Answer(Vec<u8>),
}

/// A fault armed for the next `left` commands that `matches` accepts.
struct Armed {
    matches: Box<dyn Fn(&Command) -> bool + Send + Sync>,
    fault: Fault,
    left: usize,
}

/// What becomes of the reply to one command, in the order the commands were sent.
enum Pending {
    Forward,
    Lose,
    Answer(Vec<u8>),
}

struct Shared {
    target: AtomicU16,
    armed: Mutex<Vec<Armed>>,
    fired: AtomicUsize,
    stopped: AtomicBool,
    /// The client side of every connection still open, to close them all.
    clients: Mutex<Vec<TcpStream>>,
}

/// A proxy on a free loopback port; stopped (its connections closed) when dropped.
pub struct Proxy {
    /// The port clients connect to.
    pub port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a free loopback port, forwarding nowhere yet: set the server with
    /// [`forward_to`](Self::forward_to) before a client connects. (A cluster node must
    /// know the proxy's port before it starts, to announce it.)
    pub fn listen() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        let port = listener.local_addr().expect("the proxy's address").port();
        let shared = Arc::new(Shared {
            target: AtomicU16::new(0),
            armed: Mutex::new(Vec::new()),
            fired: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            clients: Mutex::new(Vec::new()),
        });
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || accept(listener, accepting));
        Proxy { port, shared }
    }

    /// A proxy in front of the redis-server on `port`.
    pub fn start(port: u16) -> Self {
        let proxy = Self::listen();
        proxy.forward_to(port);
        proxy
    }

    /// Sends every new connection to the redis-server on `port`.
    pub fn forward_to(&self, port: u16) {
        self.shared.target.store(port, Ordering::SeqCst);
    }

    /// `redis://127.0.0.1:<proxy port>`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Arms `fault` for the next `times` commands that `matches` accepts (on any
    /// connection).
    pub fn arm(
        &self,
        times: usize,
        fault: Fault,
        matches: impl Fn(&Command) -> bool + Send + Sync + 'static,
    ) {
        self.shared.armed.lock().push(Armed {
            matches: Box::new(matches),
            fault,
            left: times,
        });
    }

    /// How many commands an armed fault has struck so far.
    pub fn fired(&self) -> usize {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Disarms every fault not yet spent.
    pub fn disarm(&self) {
        self.shared.armed.lock().clear();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for client in self.shared.clients.lock().drain(..) {
            let _ = client.shutdown(Shutdown::Both);
        }
    }
}

/// Whether `command` is `name` (case-insensitive) and names `key` among its arguments.
pub fn is_with(command: &Command, name: &str, key: &str) -> bool {
    command
        .first()
        .is_some_and(|first| first.eq_ignore_ascii_case(name.as_bytes()))
        && command[1..]
            .iter()
            .any(|argument| argument == key.as_bytes())
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let target = shared.target.load(Ordering::SeqCst);
        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        if let Ok(clone) = client.try_clone() {
            let mut clients = shared.clients.lock();
            clients.retain(|open| open.peer_addr().is_ok());
            clients.push(clone);
        }
        let pending = Arc::new(Mutex::new(Replies {
            pending: VecDeque::new(),
            client: client.try_clone().expect("a clone of the client's socket"),
            closed: false,
        }));
        let (commands_in, commands_out) = (client, server.try_clone().expect("a clone"));
        let (shared_up, pending_up) = (Arc::clone(&shared), Arc::clone(&pending));
        std::thread::spawn(move || {
            pass_commands(commands_in, commands_out, &shared_up, &pending_up)
        });
        std::thread::spawn(move || pass_replies(server, &pending));
    }
}

/// The replies owed to one client, and its socket (written only with this held, so
/// that answers and forwarded replies keep the commands' order).
struct Replies {
    pending: VecDeque<Pending>,
    client: TcpStream,
    closed: bool,
}

impl Replies {
    /// Writes the proxy's own answers that are next in line.
    fn answer_those_due(&mut self) {
        while let Some(Pending::Answer(_)) = self.pending.front() {
            if let Some(Pending::Answer(bytes)) = self.pending.pop_front() {
                let _ = self.client.write_all(&bytes);
            }
        }
    }

    fn close(&mut self, server: &TcpStream) {
        self.closed = true;
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
    }
}

/// Client to server: each whole command is matched against the armed faults, its
/// reply's fate queued, and the command forwarded unless the proxy answers it.
fn pass_commands(
    mut client: TcpStream,
    mut server: TcpStream,
    shared: &Shared,
    replies: &Mutex<Replies>,
) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let read = match client.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        buffer.extend_from_slice(&chunk[..read]);
        let mut start = 0;
        let mut forward = Vec::new();
        while let Some(end) = frame_end(&buffer, start) {
            let frame = &buffer[start..end];
            let arguments = command_arguments(frame);
            let fault = strike(shared, &arguments);
            let mut owed = replies.lock();
            if owed.closed {
                return;
            }
            match fault {
                None => {
                    owed.pending.push_back(Pending::Forward);
                    forward.extend_from_slice(frame);
                }
                Some(Fault::LoseReply) => {
                    owed.pending.push_back(Pending::Lose);
                    forward.extend_from_slice(frame);
                }
                Some(Fault::Answer(bytes)) => {
                    // What is already owed goes first: flush the forwarded commands
                    // before the answer is queued behind their replies.
                    owed.pending.push_back(Pending::Answer(bytes));
                    owed.answer_those_due();
                }
            }
            drop(owed);
            start = end;
        }
        buffer.drain(..start);
        if !forward.is_empty() && server.write_all(&forward).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
}

/// Server to client: each whole reply goes to the command it answers, in order.
fn pass_replies(mut server: TcpStream, replies: &Mutex<Replies>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let read = match server.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        buffer.extend_from_slice(&chunk[..read]);
        let mut start = 0;
        let mut owed = replies.lock();
        while let Some(end) = frame_end(&buffer, start) {
            let frame = &buffer[start..end];
            start = end;
            let fate = if frame[0] == b'>' {
                Pending::Forward
            } else {
                owed.pending.pop_front().unwrap_or(Pending::Forward)
            };
            match fate {
                Pending::Lose => {
                    owed.close(&server);
                    return;
                }
                // Answers are written as soon as they are due, never left in front.
                Pending::Forward | Pending::Answer(_) => {
                    if owed.client.write_all(frame).is_err() {
                        owed.close(&server);
                        return;
                    }
                }
            }
            owed.answer_those_due();
        }
        drop(owed);
        buffer.drain(..start);
    }
    replies.lock().close(&server);
}

/// The fault the first armed entry matching `command` says, spending one of its uses.
fn strike(shared: &Shared, command: &Command) -> Option<Fault> {
    let mut armed = shared.armed.lock();
    let index = armed.iter().position(|armed| (armed.matches)(command))?;
    let fault = armed[index].fault.clone();
    armed[index].left -= 1;
    if armed[index].left == 0 {
        armed.remove(index);
    }
    shared.fired.fetch_add(1, Ordering::SeqCst);
    Some(fault)
}

/// The arguments of a command frame (an array of bulk strings); empty for anything
/// else.
fn command_arguments(frame: &[u8]) -> Vec<Vec<u8>> {
    let mut arguments = Vec::new();
    if frame.first() != Some(&b'*') {
        return arguments;
    }
    let Some(mut at) = line_end(frame, 0) else {
        return arguments;
    };
    while at < frame.len() && frame[at] == b'$' {
        let Some(header_end) = line_end(frame, at) else {
            break;
        };
        let Some(length) = number(&frame[at + 1..header_end - 2]) else {
            break;
        };
        let Ok(length) = usize::try_from(length) else {
            break;
        };
        arguments.push(frame[header_end..header_end + length].to_vec());
        at = header_end + length + 2;
    }
    arguments
}

/// Where the line starting at `start` ends (just past its `\r\n`).
fn line_end(buffer: &[u8], start: usize) -> Option<usize> {
    buffer[start..]
        .windows(2)
        .position(|pair| pair == b"\r\n")
        .map(|at| start + at + 2)
}

fn number(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Where the RESP2/RESP3 frame starting at `start` ends, if `buffer` holds all of it.
fn frame_end(buffer: &[u8], start: usize) -> Option<usize> {
    if start >= buffer.len() {
        return None;
    }
    let header_end = line_end(buffer, start)?;
    let header = &buffer[start + 1..header_end - 2];
    match buffer[start] {
        b'$' | b'!' | b'=' => match number(header)? {
            length if length < 0 => Some(header_end),
            length => {
                let end = header_end + usize::try_from(length).ok()? + 2;
                (end <= buffer.len()).then_some(end)
            }
        },
        kind @ (b'*' | b'~' | b'>' | b'%' | b'|') => {
            let count = number(header)?;
            if count < 0 {
                return Some(header_end);
            }
            let per_entry = if matches!(kind, b'%' | b'|') { 2 } else { 1 };
            let mut at = header_end;
            for _ in 0..usize::try_from(count).ok()? * per_entry {
                at = frame_end(buffer, at)?;
            }
            Some(at)
        }
        _ => Some(header_end),
    }
}
