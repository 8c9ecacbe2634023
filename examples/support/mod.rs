//! Shared by the examples: find a Redis to talk to.
//!
//! With `REDIS_URL` set (or a URL given on the command line) the examples use that
//! server. Otherwise they start a throwaway `redis-server` on a free loopback port,
//! with persistence off, and stop it when they finish.
#![allow(dead_code)] // each example uses a part of it

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The error type of the examples: anything, with a readable message.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Runs `$0 "$@"` in the background until stdin closes, then kills it by its PID; each
/// line read from stdin restarts it.
const WRAPPER: &str = r#"trap '' INT; "$0" "$@" & pid=$!; while read _; do kill $pid; wait $pid; "$0" "$@" & pid=$!; done; kill $pid; wait $pid"#;

/// A Redis server to use: one given by the user, or a throwaway one of our own.
#[derive(Debug)]
pub struct Redis {
    url: String,
    port: Option<u16>,
    throwaway: Option<Child>,
}

impl Redis {
    /// Uses `explicit_url`, else `REDIS_URL`, else starts a throwaway `redis-server`.
    pub fn from_url_or_env_or_start(explicit_url: Option<String>) -> Result<Self, BoxError> {
        let given = explicit_url.or_else(|| {
            std::env::var("REDIS_URL")
                .ok()
                .filter(|url| !url.is_empty())
        });
        match given {
            Some(url) => Ok(Redis {
                url,
                port: None,
                throwaway: None,
            }),
            None => Self::start_throwaway(),
        }
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether this is a server we started (and will stop) ourselves.
    pub fn is_throwaway(&self) -> bool {
        self.throwaway.is_some()
    }

    /// The loopback port of a throwaway server (`None` for one given by URL).
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Stops a throwaway server and starts it again on the same port, empty (it keeps
    /// no data), and returns once the new process answers.
    pub fn restart(&mut self) -> Result<(), BoxError> {
        let (Some(port), Some(child)) = (self.port, self.throwaway.as_mut()) else {
            return Err("only a throwaway redis-server can be restarted".into());
        };
        let before = run_id(port);
        let stdin = child.stdin.as_mut().ok_or("the wrapper's stdin is gone")?;
        stdin.write_all(b"restart\n")?;
        stdin.flush()?;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if run_id(port).is_some_and(|now| Some(&now) != before.as_ref()) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(format!("redis-server on port {port} did not come back within 10 s").into())
    }

    /// Starts a throwaway `redis-server` whatever `REDIS_URL` says.
    pub fn start() -> Result<Self, BoxError> {
        Self::start_throwaway()
    }

    fn start_throwaway() -> Result<Self, BoxError> {
        if !on_path("redis-server") {
            return Err(
                "redis-server is not installed (e.g. `apt-get install redis-server`); \
                        or point REDIS_URL at a Redis you have"
                    .into(),
            );
        }
        // A free port may be taken by someone else before the server binds it: retry.
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let mut redis = Redis {
                url: format!("redis://127.0.0.1:{port}"),
                port: Some(port),
                throwaway: Some(spawn_redis_server(port)?),
            };
            match redis.wait_until_ready(port, Duration::from_secs(5)) {
                Ok(()) => return Ok(redis),
                Err(error) => last_error = error.to_string(), // dropping `redis` stops it
            }
        }
        Err(format!("could not start redis-server: {last_error}").into())
    }

    fn wait_until_ready(&mut self, port: u16, limit: Duration) -> Result<(), BoxError> {
        let started = Instant::now();
        while started.elapsed() < limit {
            let exited = match self.throwaway.as_mut() {
                Some(child) => child.try_wait()?,
                None => None,
            };
            if let Some(status) = exited {
                return Err(format!("redis-server exited at once ({status})").into());
            }
            if ping(port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("redis-server did not answer on port {port} within {limit:?}").into())
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.throwaway.take() {
            // Closing stdin makes the wrapper kill redis-server by its PID.
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

/// Starts `redis-server` on `port`, without persistence, under a wrapper that stops it
/// when our end of its stdin closes.
fn spawn_redis_server(port: u16) -> Result<Child, BoxError> {
    // `sh` starts redis-server in the background and kills it (by its PID) as soon as
    // our end of its stdin closes: when we drop the pipe, or when this process exits or
    // crashes. So the server can never outlive the example. The wrapper itself ignores
    // Ctrl-C, so it is still there to do that after one.
    let child = Command::new("sh")
        .args(["-c", WRAPPER, "redis-server"])
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run `sh` to start redis-server: {error}"))?;
    Ok(child)
}

/// Whether a Redis on `port` answers PING.
fn ping(port: u16) -> bool {
    command(port, &["PING"]).is_ok_and(|reply| reply == "PONG")
}

/// The `run_id` of the Redis on `port`: a new one for every process.
fn run_id(port: u16) -> Option<String> {
    let info = command(port, &["INFO", "server"]).ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
}

/// Sends one command to the Redis on loopback `port` over a fresh connection, and
/// returns a simple, integer or bulk reply as text (an error reply as an error).
pub fn command(port: u16, args: &[&str]) -> Result<String, BoxError> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end();
    let (kind, rest) = line.split_at(line.len().min(1));
    match kind {
        "+" | ":" => Ok(rest.to_owned()),
        "-" => Err(rest.to_owned().into()),
        "$" if rest == "-1" => Ok(String::new()),
        "$" => {
            let length: usize = rest.parse()?;
            let mut body = vec![0; length + 2];
            std::io::Read::read_exact(&mut reader, &mut body)?;
            body.truncate(length);
            Ok(String::from_utf8(body)?)
        }
        _ => Err(format!("unexpected reply {line:?}").into()),
    }
}

/// Whether `program` is an executable name found on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
