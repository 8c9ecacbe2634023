//! Throwaway PostgreSQL servers on loopback, for `tests/postgres_fencing.rs`, the chaos
//! checker's bank workload and `examples/accounts_postgres.rs` (which include this file
//! with `#[path]`, beside `server.rs`), so it needs nothing but `std`.
//!
//! Each server gets a directory of its own under the temporary directory
//! (`holdlock-pg-<port>-<pid>-<stamp>`): `initdb` makes its data directory there (user
//! `holdlock`, trust authentication, UTF-8), and `postgres` listens on 127.0.0.1 and a
//! free port, with its Unix socket and log in that directory. It runs under `sh`, as
//! `server.rs`'s servers do: when our end of the wrapper's stdin closes (the
//! [`Postgres`] is dropped, also while a test panics, or the program that started it
//! exits or crashes: a `static` server is never dropped), the wrapper stops PostgreSQL
//! by its PID (`SIGINT`, a fast shutdown), waits for it, and removes the directory.
//!
//! PostgreSQL refuses to run as root. As root (as CI runs), `initdb` and `postgres` run
//! through `setpriv` as an unprivileged user, `$HOLDLOCK_TEST_PG_USER`, else `postgres`
//! if it exists (Debian's package makes it), else `nobody`, in a directory chowned to
//! that user. Otherwise they run as we do.
//!
//! The binaries: in `$HOLDLOCK_TEST_PG_BIN` (a directory), else in the directory
//! `initdb` on `PATH` really lives in (links followed), else in the newest
//! `/usr/lib/postgresql/<version>/bin` (where `apt-get install postgresql` puts them,
//! off `PATH`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::server::{free_port, which};

/// Runs `$0 "$@"` (postgres, or setpriv running it) in the background with its log
/// appended to `$HOLDLOCK_PG_LOG`, until stdin closes; then stops it by its PID with a
/// fast shutdown, waits for it, and removes `$HOLDLOCK_PG_DIR`.
const WRAPPER: &str = r#""$0" "$@" >>"$HOLDLOCK_PG_LOG" 2>&1 & pid=$!; while read _line; do :; done; kill -INT $pid; wait $pid; rm -rf -- "$HOLDLOCK_PG_DIR""#;

/// The role every throwaway server has (a superuser, trust authentication).
pub const USER: &str = "holdlock";

/// A PostgreSQL server started by [`Postgres::start`], stopped when dropped.
#[derive(Debug)]
pub struct Postgres {
    /// The loopback port it listens on.
    pub port: u16,
    /// Its directory: `data/`, the Unix socket, `postgres.log`.
    pub dir: PathBuf,
    /// The wrapper (`sh`); its stdin is our end of the pipe.
    wrapper: Child,
}

impl Postgres {
    /// Starts a server on a free loopback port and returns once it accepts
    /// connections. A port someone else took first is retried with another.
    pub fn start() -> Result<Self, String> {
        let bin = bin_dir()?;
        let mut last_error = String::new();
        for _ in 0..4 {
            match Self::start_on(&bin, free_port()?) {
                Ok(server) => return Ok(server),
                Err(error) => last_error = error,
            }
        }
        Err(format!("PostgreSQL did not start: {last_error}"))
    }

    fn start_on(bin: &Path, port: u16) -> Result<Self, String> {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("holdlock-pg-{port}-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        // Removed here until the wrapper owns it.
        let scratch = Scratch(Some(dir.clone()));
        let run_as = unprivileged_user(&dir)?;
        let data = dir.join("data");
        let log = dir.join("postgres.log");
        let initdb = as_user(&run_as, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "-A", "trust", "-E", "UTF8", "--locale=C"])
            .args(["--no-sync", "--no-instructions"])
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.join("initdb").display()))?;
        if !initdb.status.success() {
            return Err(format!(
                "initdb failed ({}): {}{}",
                initdb.status,
                String::from_utf8_lossy(&initdb.stdout),
                String::from_utf8_lossy(&initdb.stderr)
            ));
        }
        let mut postgres = as_user(&run_as, &bin.join("postgres"));
        postgres
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(&dir)
            .args(["-c", "listen_addresses=127.0.0.1"])
            // A throwaway: nothing needs to survive a crash of the machine.
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"]);
        let program = postgres.get_program().to_owned();
        let args: Vec<_> = postgres.get_args().map(ToOwned::to_owned).collect();
        let wrapper = Command::new("sh")
            .arg("-c")
            .arg(WRAPPER)
            .arg(program)
            .args(args)
            .env("HOLDLOCK_PG_LOG", &log)
            .env("HOLDLOCK_PG_DIR", &dir)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run `sh` to start postgres: {e}"))?;
        scratch.disarm();
        let server = Postgres { port, dir, wrapper };
        server.wait_ready(bin, Duration::from_secs(15))?; // dropped on error: stopped
        Ok(server)
    }

    fn wait_ready(&self, bin: &Path, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < limit {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", USER, "-d", "postgres"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return Ok(());
            }
            // What makes postgres give up at once (a port someone else took), rather
            // than pg_isready's own attempts while it starts ("FATAL: the database
            // system is starting up").
            let log = self.log();
            if [
                "could not bind",
                "could not create",
                "another postmaster",
                "PANIC",
            ]
            .iter()
            .any(|fatal| log.contains(fatal))
            {
                return Err(format!("postgres on port {} failed: {log}", self.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "postgres on port {} did not accept connections within {limit:?}: {}",
            self.port,
            self.log()
        ))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default()
    }

    /// A connection string for database `postgres` over TCP, in tokio-postgres's
    /// (libpq's) key-value form.
    pub fn config(&self) -> String {
        self.config_for("postgres")
    }

    /// A connection string for `database`.
    pub fn config_for(&self, database: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={USER} dbname={database}",
            self.port
        )
    }

    /// The same as a URL (`postgresql://holdlock@127.0.0.1:PORT/postgres`), as
    /// `DATABASE_URL` would give it.
    pub fn url(&self) -> String {
        format!("postgresql://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// The directory of its Unix socket (`host=` this, for a socket connection).
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Closing stdin makes the wrapper stop postgres by its PID and clean up.
        drop(self.wrapper.stdin.take());
        let _ = self.wrapper.wait();
    }
}

/// A directory removed when dropped, unless disarmed.
struct Scratch(Option<PathBuf>);

impl Scratch {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The user to run PostgreSQL as, `(uid, gid)`, when we are root (`None` otherwise);
/// `dir` is chowned to it.
fn unprivileged_user(dir: &Path) -> Result<Option<(u32, u32)>, String> {
    use std::os::unix::fs::MetadataExt;
    // A directory we just made is owned by our effective uid.
    let ours = std::fs::metadata(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .uid();
    if ours != 0 {
        return Ok(None);
    }
    let name = std::env::var("HOLDLOCK_TEST_PG_USER")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| id("-u", "postgres").map(|_| "postgres".to_owned()))
        .unwrap_or_else(|| "nobody".to_owned());
    let (Some(uid), Some(gid)) = (id("-u", &name), id("-g", &name)) else {
        return Err(format!(
            "PostgreSQL refuses to run as root, and there is no user {name:?} to run it as \
             (set HOLDLOCK_TEST_PG_USER)"
        ));
    };
    if which("setpriv").is_none() {
        return Err(
            "PostgreSQL refuses to run as root, and `setpriv` (util-linux) to run it \
                    as another user is missing"
                .to_owned(),
        );
    }
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .map_err(|e| format!("cannot chown {} to {name}: {e}", dir.display()))?;
    Ok(Some((uid, gid)))
}

/// `id FLAG NAME`'s number: a user's uid (`-u`) or gid (`-g`).
fn id(flag: &str, name: &str) -> Option<u32> {
    let out = Command::new("id")
        .args([flag, name])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// A command for `program`, run as `user` through `setpriv` (which execs it, so its PID
/// is the program's) when one is given.
fn as_user(user: &Option<(u32, u32)>, program: &Path) -> Command {
    match user {
        Some((uid, gid)) => {
            let mut command = Command::new("setpriv");
            command
                .arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .args(["--clear-groups", "--"])
                .arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// The directory of the PostgreSQL binaries (see the module's documentation).
pub fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("HOLDLOCK_TEST_PG_BIN").filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(initdb) = which("initdb") {
        let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
        if let Some(dir) = real.parent()
            && dir.join("postgres").is_file()
            && dir.join("pg_isready").is_file()
        {
            return Ok(dir.to_owned());
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "PostgreSQL is not installed: no initdb on PATH or in /usr/lib/postgresql/*/bin \
         (apt-get install postgresql, or set HOLDLOCK_TEST_PG_BIN)"
            .to_owned()
    })
}
