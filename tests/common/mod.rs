//! Test support: throwaway `redis-server` processes on loopback, and small helpers.
//!
//! Each server runs under `sh`, which kills it when our end of its stdin pipe closes,
//! so a crashed or killed test process never leaves a server behind. Servers are
//! stopped by their PID, never by name.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use holdlock::LockClient;

/// A redis-server on a free loopback port, stopped when dropped.
pub struct RedisServer {
    pub port: u16,
    pub log: PathBuf,
    child: Child,
}

static SHARED: OnceLock<RedisServer> = OnceLock::new();

/// One server shared by every test in this test binary; tests use unique names.
pub fn shared() -> &'static RedisServer {
    SHARED.get_or_init(RedisServer::start)
}

/// The URL of the shared server.
pub fn url() -> String {
    shared().url()
}

/// A lock name no other test uses.
pub fn unique(test: &str) -> String {
    format!("test:{test}:{}", uuid::Uuid::new_v4().simple())
}

/// A client of the shared server with default settings.
pub async fn client() -> LockClient {
    LockClient::connect(&url())
        .await
        .expect("connect to the test redis")
}

/// Starts `tracing` output for a test when `RUST_LOG` is set.
pub fn trace() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

impl RedisServer {
    /// Starts a fresh server of our own (for tests that kill connections or flush scripts).
    pub fn start() -> Self {
        let bin = std::env::var("HOLDLOCK_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            let log = std::env::temp_dir().join(format!("holdlock-redis-{port}.log"));
            let spawned = Command::new("sh")
                .args([
                    "-c",
                    r#""$0" "$@" & pid=$!; read _line; kill $pid; wait $pid"#,
                    &bin,
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--logfile",
                    log.to_str().unwrap(),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = spawned.unwrap_or_else(|e| panic!("cannot run sh: {e}"));
            let mut server = RedisServer { port, log, child };
            match server.wait_ready(Duration::from_secs(5)) {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
            server.stop();
        }
        if which(&bin).is_none() {
            panic!(
                "`{bin}` was not found on PATH. Install Redis first, e.g. `apt-get install -y redis-server` \
                 (or set HOLDLOCK_REDIS_SERVER to its path)."
            );
        }
        panic!("redis-server did not start: {last_error}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited with {status}: {}", self.log_tail()));
            }
            if self.command(&["PING"]).is_ok_and(|reply| reply == "+PONG") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(format!("no PONG within {limit:?}: {}", self.log_tail()))
    }

    fn log_tail(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends one command over a fresh connection and returns the first reply line
    /// (enough for PING, CLIENT KILL, SCRIPT FLUSH, DEBUG SLEEP).
    pub fn command(&self, args: &[&str]) -> Result<String, String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream
            .write_all(request.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        Ok(line.trim_end().to_owned())
    }

    /// Kills every normal client connection (ours included) on the server.
    pub fn kill_clients(&self) {
        let _ = self.command(&["CLIENT", "KILL", "TYPE", "normal"]);
        let _ = self.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    }

    fn stop(&mut self) {
        // Closing stdin makes the wrapper kill redis by its PID; then reap the wrapper.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn which(bin: &str) -> Option<PathBuf> {
    if bin.contains('/') {
        return Some(PathBuf::from(bin)).filter(|p| p.exists());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(bin))
            .find(|p| p.exists())
    })
}

/// A plain fred client of the same server, for checking Redis behind the lock's back.
pub async fn raw(url: &str) -> fred::clients::Client {
    use fred::interfaces::ClientLike;
    let config = fred::types::config::Config::from_url(url).unwrap();
    let client = fred::types::Builder::from_config(config).build().unwrap();
    client.init().await.unwrap();
    client
}
