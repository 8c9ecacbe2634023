//! Tests of the `holdlock` command-line tool, run as a real process against a
//! throwaway redis-server on loopback.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use holdlock::LockOptions;
use tokio::process::Command;

/// `holdlock --url <shared server> ARGS...`
fn holdlock<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    holdlock_at(&common::url(), args)
}

/// `holdlock --url URL ARGS...`
fn holdlock_at<I, S>(url: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_holdlock"));
    command
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// What a finished holdlock process said.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Ran {
    fn from(output: Output) -> Self {
        Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

async fn finish(command: &mut Command) -> Ran {
    finish_within(command, Duration::from_secs(30)).await
}

/// [`finish`], for a command given `limit` to finish (a guard against a hang, not a
/// speed check).
async fn finish_within(command: &mut Command, limit: Duration) -> Ran {
    let output = tokio::time::timeout(limit, command.output())
        .await
        .unwrap_or_else(|_| panic!("holdlock finished within {limit:?}"))
        .expect("holdlock ran");
    Ran::from(output)
}

/// A fresh directory for one test's files.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("holdlock-cli-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Polls `condition` every 20 ms for up to 10 s.
async fn eventually(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if condition().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

fn assert_no_panic(ran: &Ran) {
    assert!(
        !ran.stderr.contains("panicked"),
        "holdlock panicked: {}",
        ran.stderr
    );
    assert!(
        !ran.stderr.contains("RUST_BACKTRACE"),
        "holdlock panicked: {}",
        ran.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_runs_never_overlap() {
    let name = common::unique("overlap");
    let dir = scratch();
    let log = dir.join("log");
    let script = r#"echo "start $$" >> "$LOG"; sleep 0.05; echo "end $$" >> "$LOG""#;
    let mut runs = Vec::new();
    for _ in 0..8 {
        let mut command = holdlock(["run", &name, "--", "sh", "-c", script]);
        command.env("LOG", &log);
        runs.push(tokio::spawn(async move { finish(&mut command).await }));
    }
    for run in runs {
        let ran = run.await.expect("join");
        assert_eq!(ran.code, Some(0), "{ran:?}");
    }

    let lines = read_lines(&log);
    assert_eq!(
        lines.len(),
        16,
        "every run logged start and end: {lines:#?}"
    );
    let mut ids = std::collections::HashSet::new();
    for pair in lines.chunks(2) {
        let id = pair[0]
            .strip_prefix("start ")
            .unwrap_or_else(|| panic!("overlap: {lines:#?}"));
        assert_eq!(pair[1], format!("end {id}"), "overlap: {lines:#?}");
        ids.insert(id.to_owned());
    }
    assert_eq!(ids.len(), 8, "all eight commands ran: {lines:#?}");
    assert!(!common::client().await.is_locked(&name).await.unwrap());
    let _ = std::fs::remove_dir_all(dir);
}

/// Six runs with `--permits 2`: never more than two commands at once, and two at
/// some point; with both permits held elsewhere `--no-wait` exits 75, and 0 permits is
/// a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_with_permits_run_at_most_n_at_once() {
    let name = common::unique("permits");
    let dir = scratch();
    let log = dir.join("log");
    let script = r#"echo "start $$" >> "$LOG"; sleep 0.3; echo "end $$" >> "$LOG""#;
    let mut runs = Vec::new();
    for _ in 0..6 {
        let mut command = holdlock(["run", "--permits", "2", &name, "--", "sh", "-c", script]);
        command.env("LOG", &log);
        runs.push(tokio::spawn(async move { finish(&mut command).await }));
    }
    for run in runs {
        let ran = run.await.expect("join");
        assert_eq!(ran.code, Some(0), "{ran:?}");
    }
    let lines = read_lines(&log);
    assert_eq!(
        lines.len(),
        12,
        "every run logged start and end: {lines:#?}"
    );
    let (mut running, mut most) = (0i32, 0i32);
    for line in &lines {
        running += if line.starts_with("start") { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(
        most, 2,
        "at most, and at some point, two at once: {lines:#?}"
    );

    let client = common::client().await;
    let semaphore = client.semaphore(name.clone(), 2);
    let held = [
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    ];
    let ran = finish(&mut holdlock([
        "run",
        "--permits",
        "2",
        "--no-wait",
        &name,
        "--",
        "true",
    ]))
    .await;
    assert_eq!(ran.code, Some(75), "{ran:?}");
    assert!(ran.stderr.contains("permits"), "{:?}", ran.stderr);
    let ran = finish(&mut holdlock([
        "run",
        "--permits",
        "0",
        &name,
        "--",
        "true",
    ]))
    .await;
    assert_eq!(ran.code, Some(64), "{ran:?}");
    for permit in held {
        permit.release().await.unwrap();
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_exits_with_the_conflict_code() {
    let name = common::unique("busy");
    let dir = scratch();
    let marker = dir.join("ran");
    let marker = marker.to_str().unwrap();
    let client = common::client().await;
    let guard = client.lock(&name).await.unwrap();

    let ran = finish(&mut holdlock([
        "run",
        &name,
        "--no-wait",
        "--",
        "touch",
        marker,
    ]))
    .await;
    assert_eq!(ran.code, Some(75), "{ran:?}");
    assert_eq!(
        ran.stderr.lines().count(),
        1,
        "one line on stderr: {:?}",
        ran.stderr
    );
    assert!(ran.stderr.contains(&name), "{:?}", ran.stderr);

    let args = [
        "run",
        &name,
        "--no-wait",
        "--conflict-exit-code",
        "3",
        "--",
        "touch",
        marker,
    ];
    let ran = finish(&mut holdlock(args)).await;
    assert_eq!(ran.code, Some(3), "{ran:?}");

    let started = Instant::now();
    let ran = finish(&mut holdlock([
        "run", &name, "--wait", "300ms", "--", "touch", marker,
    ]))
    .await;
    assert_eq!(ran.code, Some(75), "{ran:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "waited for the lock"
    );
    assert!(
        !Path::new(marker).exists(),
        "the command never ran while the lock was held"
    );

    guard.unlock().await.unwrap();
    let ran = finish(&mut holdlock([
        "run",
        &name,
        "--no-wait",
        "--",
        "touch",
        marker,
    ]))
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        Path::new(marker).exists(),
        "the command ran once the lock was free"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Sleeps past the end of the current `period` if fewer than `needed` remain of it, so
/// a test's runs all fall in one period.
async fn stay_within_one_period(period: Duration, needed: Duration) {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = since_epoch.as_millis() % period.as_millis();
    let left = period - Duration::from_millis(into as u64);
    if left < needed {
        tokio::time::sleep(left + Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_per_period_runs_once_across_staggered_instances() {
    let name = common::unique("once");
    let dir = scratch();
    let log = dir.join("log");
    stay_within_one_period(Duration::from_secs(3600), Duration::from_secs(15)).await;

    let script = r#"echo "ran $$" >> "$LOG"; sleep 0.3"#;
    let mut instances = Vec::new();
    for start_after_ms in [0, 500, 1200, 2000] {
        let mut command = holdlock(["run", &name, "--once-per", "1h", "--", "sh", "-c", script]);
        command.env("LOG", &log);
        instances.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(start_after_ms)).await;
            finish(&mut command).await
        }));
    }
    let mut outcomes = Vec::new();
    for instance in instances {
        outcomes.push(instance.await.expect("join"));
    }

    let succeeded = outcomes.iter().filter(|ran| ran.code == Some(0)).count();
    assert_eq!(succeeded, 1, "{outcomes:#?}");
    for skipped in outcomes.iter().filter(|ran| ran.code != Some(0)) {
        assert_eq!(skipped.code, Some(75), "{outcomes:#?}");
        assert!(
            skipped.stderr.contains("already ran for this period"),
            "{outcomes:#?}"
        );
        assert_eq!(skipped.stderr.lines().count(), 1, "{outcomes:#?}");
    }
    assert_eq!(read_lines(&log).len(), 1, "the command ran exactly once");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_leaves_the_period_open() {
    let name = common::unique("once-retry");
    let dir = scratch();
    let log = dir.join("log");
    stay_within_one_period(Duration::from_secs(3600), Duration::from_secs(15)).await;
    let once = |script: &str| {
        let mut command = holdlock(["run", &name, "--once-per", "1h", "--", "sh", "-c", script]);
        command.env("LOG", &log);
        command
    };

    let failed = finish(&mut once(r#"echo failed >> "$LOG"; exit 1"#)).await;
    assert_eq!(failed.code, Some(1), "{failed:?}");
    let retried = finish(&mut once(r#"echo ran >> "$LOG""#)).await;
    assert_eq!(retried.code, Some(0), "{retried:?}");
    let skipped = finish(&mut once(r#"echo again >> "$LOG""#)).await;
    assert_eq!(skipped.code, Some(75), "{skipped:?}");

    assert_eq!(read_lines(&log), ["failed", "ran"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lock_terminates_the_command() {
    let name = common::unique("lost");
    let dir = scratch();
    let pid_file = dir.join("pid");
    let client = common::client().await;
    let script = r#"echo $$ > "$PID_FILE"; exec sleep 30"#;
    let mut command = holdlock(["run", &name, "--lease", "1s", "--", "sh", "-c", script]);
    let child = command.env("PID_FILE", &pid_file).spawn().unwrap();

    eventually("the command runs", async || {
        pid_file.exists() && !read_lines(&pid_file).is_empty()
    })
    .await;
    assert!(client.is_locked(&name).await.unwrap());
    let command_pid = read_lines(&pid_file)[0].clone();
    assert!(client.force_unlock(&name).await.unwrap());

    let started = Instant::now();
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("holdlock exits within 10 s of losing the lock")
        .unwrap();
    let ran = Ran::from(output);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(ran.code, Some(70), "{ran:?}");
    assert!(ran.stderr.contains("lost lock"), "{:?}", ran.stderr);
    assert!(ran.stderr.contains("SIGTERM"), "{:?}", ran.stderr);
    let alive = std::process::Command::new("kill")
        .args(["-0", &command_pid])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(
        !alive.success(),
        "the command (pid {command_pid}) was stopped"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A command that ignores SIGTERM after the lock is lost (its shell traps it, notes
/// it and goes on) is killed with SIGKILL 10 s after the SIGTERM, not sooner, and
/// holdlock exits 70.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_ignores_sigterm_after_a_lost_lock_gets_sigkill_10_s_later() {
    let name = common::unique("lost-stubborn");
    let dir = scratch();
    let (pid_file, log) = (dir.join("pid"), dir.join("log"));
    let client = common::client().await;
    // The trap runs between two short sleeps, so the shell notes SIGTERM at once and
    // only a SIGKILL stops it.
    let script = r#"trap 'echo TERM >> "$LOG"' TERM
echo $$ > "$PID_FILE"
while :; do sleep 0.1; done"#;
    let mut command = holdlock(["run", &name, "--lease", "1s", "--", "sh", "-c", script]);
    let child = command
        .env("PID_FILE", &pid_file)
        .env("LOG", &log)
        .spawn()
        .unwrap();

    eventually("the command runs", async || {
        !read_lines(&pid_file).is_empty()
    })
    .await;
    let command_pid = read_lines(&pid_file)[0].clone();
    // If the test fails, the command (which ignores SIGTERM) must not outlive it.
    let _stop = KillOnDrop(command_pid.clone());
    assert!(client.force_unlock(&name).await.unwrap());
    eventually("the command gets SIGTERM", async || {
        read_lines(&log) == ["TERM"]
    })
    .await;
    let terminated = Instant::now();
    let is_running = || {
        std::process::Command::new("kill")
            .args(["-0", &command_pid])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    // Still running well into the grace period: nothing but SIGTERM was sent yet.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(
        is_running(),
        "the command was stopped before 10 s had passed"
    );

    let output = tokio::time::timeout(Duration::from_secs(15), child.wait_with_output())
        .await
        .expect("holdlock exits within 15 s of the SIGTERM")
        .unwrap();
    let killed_after = terminated.elapsed();
    let ran = Ran::from(output);
    assert_no_panic(&ran);
    assert_eq!(ran.code, Some(70), "{ran:?}");
    assert!(
        killed_after >= Duration::from_secs(9) && killed_after <= Duration::from_secs(15),
        "stopped {killed_after:?} after the SIGTERM: {ran:?}"
    );
    assert!(ran.stderr.contains("sending SIGKILL"), "{:?}", ran.stderr);
    // 137 = 128 + SIGKILL: the command died of the SIGKILL, and noted only the SIGTERM.
    assert!(ran.stderr.contains("status 137"), "{:?}", ran.stderr);
    assert_eq!(read_lines(&log), ["TERM"]);
    assert!(!is_running(), "the command (pid {command_pid}) was stopped");
    let _ = std::fs::remove_dir_all(dir);
}

/// Sends SIGKILL to a process id when dropped (a no-op once it has exited and been
/// reaped, as its id is not reused that fast).
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_status_and_environment_pass_through() {
    let name = common::unique("status");
    let ran = finish(&mut holdlock(["run", &name, "--", "sh", "-c", "exit 7"])).await;
    assert_eq!(ran.code, Some(7), "{ran:?}");
    let ran = finish(&mut holdlock([
        "run",
        &name,
        "--",
        "sh",
        "-c",
        "kill -KILL $$",
    ]))
    .await;
    assert_eq!(ran.code, Some(128 + 9), "killed by SIGKILL: {ran:?}");

    let print_env = r#"echo "$HOLDLOCK_NAME|$HOLDLOCK_TOKEN""#;
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let ran = finish(&mut holdlock(["run", &name, "--", "sh", "-c", print_env])).await;
        assert_eq!(ran.code, Some(0), "{ran:?}");
        let (printed_name, token) = ran.stdout.trim().split_once('|').expect("name|token");
        assert_eq!(printed_name, name);
        tokens.push(
            token
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("a numeric token: {:?}", ran.stdout)),
        );
    }
    assert!(
        tokens[0] > 0 && tokens[1] > tokens[0],
        "tokens increase: {tokens:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_64_and_an_unreachable_server_69() {
    let name = common::unique("usage");
    // Nothing listens here: if a bad command line were accepted, the run would exit 69.
    let port = common::server::free_port().unwrap();
    let dead_url = format!("redis://127.0.0.1:{port}");
    let cases: [(&[&str], &str); 7] = [
        (&["run", &name, "--bogus", "--", "true"], "--bogus"),
        (
            &["run", &name, "--wait", "5 parsecs", "--", "true"],
            "parsecs",
        ),
        (
            &["run", &name, "--wait", "5", "parsecs", "--", "true"],
            "parsecs",
        ),
        (&["run", &name, "true"], "true"),
        (&["run", &name, "--"], "CMD"),
        (&["unlock", &name], "--force"),
        (&["frobnicate"], "frobnicate"),
    ];
    for (args, mentioned) in cases {
        let ran = finish(&mut holdlock_at(&dead_url, args)).await;
        assert_eq!(ran.code, Some(64), "{args:?}: {ran:?}");
        assert!(ran.stderr.contains(mentioned), "{args:?}: {:?}", ran.stderr);
        assert_no_panic(&ran);
    }

    let help = finish(&mut holdlock_at(&dead_url, ["run", "--help"])).await;
    assert_eq!(help.code, Some(0), "{help:?}");
    assert!(help.stdout.contains("Exit status"), "{help:?}");

    let args = ["--connect-timeout", "1s", "run", &name, "--", "true"];
    let ran = finish(&mut holdlock_at(&dead_url, args)).await;
    assert_eq!(ran.code, Some(69), "{ran:?}");
    assert_eq!(ran.stderr.lines().count(), 1, "one line: {:?}", ran.stderr);
    assert_no_panic(&ran);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_is_passed_on_and_the_lock_released() {
    a_signal_is_passed_on_and_the_lock_released("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_is_passed_on_and_the_lock_released() {
    a_signal_is_passed_on_and_the_lock_released("INT").await;
}

/// Sends SIG`signal` to holdlock while its command runs: the command gets it, and the
/// lock is released once the command has exited.
async fn a_signal_is_passed_on_and_the_lock_released(signal: &str) {
    let name = common::unique(&format!("sig{signal}"));
    let dir = scratch();
    let log = dir.join("log");
    let script = format!(
        r#"trap 'echo got-{signal} >> "$LOG"; kill $sleeper; exit 0' {signal}
sleep 30 & sleeper=$!
echo ready >> "$LOG"
wait"#
    );
    let mut command = holdlock(["run", &name, "--", "sh", "-c", &script]);
    let child = command.env("LOG", &log).spawn().unwrap();
    let holdlock_pid = child.id().unwrap().to_string();
    eventually("the command is ready", async || {
        read_lines(&log) == ["ready"]
    })
    .await;

    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &holdlock_pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("holdlock exits after the signal")
        .unwrap();
    let ran = Ran::from(output);
    assert_eq!(ran.code, Some(0), "the command's own status: {ran:?}");
    assert_eq!(
        read_lines(&log),
        ["ready".to_owned(), format!("got-{signal}")]
    );
    assert!(
        !common::client().await.is_locked(&name).await.unwrap(),
        "the lock was released"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_list_and_force_unlock() {
    let base = common::unique("look");
    let (first, second) = (format!("{base}:a"), format!("{base}:b"));
    let client = common::client().await;
    let guard = client
        .lock(&first)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let _other = client.lock(&second).await.unwrap();
    let owner = guard.owner().to_owned();

    let ran = finish(&mut holdlock(["inspect", &first])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.contains(&first) && ran.stdout.contains(&owner),
        "{:?}",
        ran.stdout
    );

    let ran = finish(&mut holdlock(["inspect", &first, "--json"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let info: serde_json::Value =
        serde_json::from_str(&ran.stdout).expect("inspect --json is JSON");
    assert_eq!(info["name"], first.as_str());
    assert_eq!(info["owners"][0]["id"], owner.as_str());
    assert_eq!(info["owners"][0]["hold_count"], 1);
    assert!(info["ttl_ms"].as_u64().is_some_and(|ttl| ttl > 0), "{info}");
    assert_eq!(info["fencing_token"].as_u64(), guard.fencing_token());

    let pattern = format!("{base}:*");
    let ran = finish(&mut holdlock(["list", &pattern])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.contains(&first) && ran.stdout.contains(&second),
        "{:?}",
        ran.stdout
    );
    let ran = finish(&mut holdlock(["list", &pattern, "--json"])).await;
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).expect("list --json is JSON");
    let names: Vec<_> = listed["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|info| info["name"].clone())
        .collect();
    assert_eq!(names, [first.as_str(), second.as_str()]);
    assert_eq!(listed["unreadable"], serde_json::json!([]));

    let ran = finish(&mut holdlock(["--prefix", "elsewhere:", "inspect", &first])).await;
    assert_eq!(ran.code, Some(1), "another prefix, another lock: {ran:?}");

    let ran = finish(&mut holdlock(["unlock", "--force", &first])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains(&first), "{:?}", ran.stdout);
    assert!(!client.is_locked(&first).await.unwrap());

    let ran = finish(&mut holdlock(["inspect", &first])).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(ran.stdout.contains("not locked"), "{:?}", ran.stdout);
    let ran = finish(&mut holdlock(["inspect", &first, "--json"])).await;
    assert_eq!((ran.code, ran.stdout.trim()), (Some(1), "null"), "{ran:?}");
    let ran = finish(&mut holdlock(["unlock", "--force", &first, "--json"])).await;
    let unlocked: serde_json::Value =
        serde_json::from_str(&ran.stdout).expect("unlock --json is JSON");
    assert_eq!(unlocked["was_locked"], false);
}

/// Held by each test that runs `holdlock bench`: two benchmarks at once on the shared
/// server would each slow the other past its calls' waits (a `try_lock`'s answer is
/// due 250 ms after it is sent), and measure each other rather than themselves.
#[cfg(feature = "bench")]
static ONE_BENCH_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// `holdlock bench` exists only with the `bench` feature as well.
#[cfg(feature = "bench")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_runs_every_workload_and_leaves_nothing_behind() {
    let _alone = ONE_BENCH_AT_A_TIME.lock().await;
    // Every workload, each against its floor: 20 s on a quiet machine, much more
    // on two busy cores.
    let mut bench = holdlock(["bench", "--quick", "--json"]);
    let ran = finish_within(&mut bench, Duration::from_secs(120)).await;
    assert_no_panic(&ran);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let figures: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON on stdout");
    let figures = figures.as_array().expect("an array of figures");
    for workload in [
        "W1", "W1r", "W1s", "W2", "W3", "W3f", "W4", "W4f", "W6", "W7", "W8",
    ] {
        assert!(
            figures.iter().any(|figure| figure["workload"] == workload),
            "{workload} missing: {figures:?}"
        );
    }
    for figure in figures {
        if figure["ratio"].is_number() {
            assert!(figure["ratio"].as_f64().unwrap() > 0.0, "{figure}");
        }
    }
    // The correctness checks: one winner per burst, no lost increment.
    let value = |metric: &str| {
        figures
            .iter()
            .find(|figure| figure["metric"] == metric)
            .and_then(|figure| figure["value"].as_f64())
    };
    assert_eq!(value("most winners in a burst"), Some(1.0));
    let counters: Vec<_> = figures
        .iter()
        .filter(|figure| figure["metric"] == "final counter")
        .map(|figure| (figure["workload"].as_str(), figure["value"].as_f64()))
        .collect();
    assert_eq!(
        counters,
        [
            (Some("W3"), Some(32.0 * 20.0)),
            (Some("W3f"), Some(32.0 * 20.0))
        ]
    );
    // Never more holders of the semaphore than its 5 permits, and all of them used.
    assert_eq!(value("most permits held at once"), Some(5.0));
    let left = common::shared().array(&["KEYS", "*bench:*"]).unwrap();
    assert!(left.is_empty(), "keys left behind: {left:?}");

    // W9 (200 clients) and W10 (a million held locks) run only when named; names that
    // are not workloads here are usage errors.
    assert!(!figures.iter().any(|figure| figure["workload"] == "W9"));
    assert!(!figures.iter().any(|figure| figure["workload"] == "W10"));
    assert!(!figures.iter().any(|figure| figure["workload"] == "W11"));
    let ran = finish(&mut holdlock(["bench", "--workloads", "w12"])).await;
    assert_eq!(ran.code, Some(64), "{ran:?}");
    assert!(ran.stderr.contains("unknown workload"), "{ran:?}");
    assert!(
        ran.stderr.contains("W10 or W11"),
        "it names every workload: {ran:?}"
    );
    let ran = finish(&mut holdlock(["bench", "--workloads", "W5"])).await;
    assert_eq!(ran.code, Some(64), "{ran:?}");
    assert!(ran.stderr.contains("cargo bench"), "{ran:?}");
}

/// W11, named: 256 tasks over 100,000 names, on one client and then on two, each
/// figure against the bare lock's; every lock let go.
#[cfg(feature = "bench")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_w11_measures_many_accounts_against_the_bare_lock() {
    let _alone = ONE_BENCH_AT_A_TIME.lock().await;
    let mut bench = holdlock(["bench", "--workloads", "W11", "--quick", "--json"]);
    let ran = finish_within(&mut bench, Duration::from_secs(120)).await;
    assert_no_panic(&ran);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let figures: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON on stdout");
    let figures = figures.as_array().expect("an array of figures");
    assert!(
        figures.iter().all(|figure| figure["workload"] == "W11"),
        "{figures:?}"
    );
    for clients in [
        "1 client",
        "2 clients",
        "1 client, 1 task",
        "1 client, 16 tasks",
        "1 client, 1,024 tasks",
    ] {
        for metric in [
            "cycles/s",
            "Redis CPU per cycle",
            "client CPU per cycle",
            "cycle p50",
            "cycle p99",
        ] {
            let metric = format!("{metric}, {clients}");
            let figure = figures
                .iter()
                .find(|figure| figure["metric"] == metric.as_str());
            let figure = figure.unwrap_or_else(|| panic!("{metric} missing: {figures:?}"));
            assert!(
                figure["value"].as_f64().is_some_and(|v| v > 0.0),
                "{figure}"
            );
            assert!(
                figure["floor"].as_f64().is_some_and(|v| v > 0.0),
                "{figure}"
            );
            assert_eq!(figure["floor_is"], "bare lock", "{figure}");
        }
    }
    let left = common::shared().array(&["KEYS", "*w11*"]).unwrap();
    assert!(left.is_empty(), "keys left behind: {left:?}");
}

/// W4p: the hand-off between this process and a second one it starts, which connects
/// as the first does (its prefix too: on another prefix it would take another lock at
/// once, and every hand-off would time as nothing), next to the bare lock's between
/// the same two, with the commands each sends a hand-off. On a server of its own: the
/// commands are counted from the server's, which the other tests' would swell.
#[cfg(feature = "bench")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_w4p_hands_the_lock_between_two_processes() {
    let _alone = ONE_BENCH_AT_A_TIME.lock().await;
    let server = common::RedisServer::start();
    let args = [
        "--prefix",
        "cli-w4p:",
        "bench",
        "--workloads",
        "W4p",
        "--quick",
        "--json",
    ];
    let mut bench = holdlock_at(&server.url(), args);
    let ran = finish_within(&mut bench, Duration::from_secs(120)).await;
    assert_no_panic(&ran);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let figures: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON on stdout");
    let figure = |metric: &str| {
        let figures = figures.as_array().expect("an array of figures");
        let figure = figures.iter().find(|figure| figure["metric"] == metric);
        let figure = figure.unwrap_or_else(|| panic!("{metric} missing: {figures:?}"));
        assert_eq!(figure["workload"], "W4p", "{figure}");
        assert_eq!(
            figure["floor_is"], "bare lock + PUBLISH, two processes",
            "{figure}"
        );
        let (value, floor) = (figure["value"].as_f64(), figure["floor"].as_f64());
        (value.unwrap_or_default(), floor.unwrap_or_default())
    };
    for metric in ["hand-off p50", "hand-off p90"] {
        let (value, floor) = figure(metric);
        assert!(
            value > 0.0 && floor > 0.0,
            "{metric}: {value} against {floor}"
        );
    }
    // The bare hand-off sends a SET NX and a release script; each block of 13 also
    // its first take and its last release.
    let (sent, floor) = figure("commands sent a hand-off");
    assert!((2.0..=2.2).contains(&floor), "the bare lock's: {floor}");
    assert!(sent >= 2.0, "a release and an acquisition at least: {sent}");
    let left = server.array(&["KEYS", "*w4p*"]).unwrap();
    assert!(left.is_empty(), "keys left behind: {left:?}");
}

/// W11 on a cluster counts the scripts and the CPU time of every primary, not of the
/// node one `INFO` happens to reach: a lone task's cycle is its two scripts (a third
/// of that when one node of three was counted), and the servers' CPU per cycle is
/// there (it was left out on a cluster).
#[cfg(feature = "bench")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_w11_on_a_cluster_counts_every_primarys_scripts_and_cpu() {
    let _alone = ONE_BENCH_AT_A_TIME.lock().await;
    let url = common::cluster_url();
    let mut bench = holdlock_at(&url, ["bench", "--workloads", "W11", "--quick", "--json"]);
    let ran = finish_within(&mut bench, Duration::from_secs(120)).await;
    assert_no_panic(&ran);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let figures: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON on stdout");
    let value = |metric: &str| {
        let figures = figures.as_array().expect("an array of figures");
        let figure = figures.iter().find(|figure| figure["metric"] == metric);
        let figure = figure.unwrap_or_else(|| panic!("{metric} missing: {figures:?}"));
        figure["value"].as_f64().unwrap_or_default()
    };
    let lone = value("scripts per cycle, 1 client, 1 task");
    assert!(
        (1.9..=2.1).contains(&lone),
        "a lone cycle's scripts: {lone}"
    );
    assert!(value("Redis CPU per cycle, 1 client") > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_owners_cannot_forge_table_rows() {
    use fred::interfaces::HashesInterface;
    let base = common::unique("forge");
    let name = format!("{base}:a\nb   fake-owner   9   1s   -");
    let client = common::client().await;
    let guard = client.lock(&name).await.unwrap();
    // A hash someone else wrote, whose owner id carries a terminal escape and a newline.
    let raw = common::raw(&common::url()).await;
    let foreign = common::key(&format!("{base}:c"));
    let _: () = raw
        .hset(foreign.as_str(), ("evil\x1b[2K\rowner\nx", "1"))
        .await
        .unwrap();

    let ran = finish(&mut holdlock(["list", &format!("{base}:*")])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "a header and one row per lock: {lines:#?}");
    assert!(
        lines[1].starts_with(&format!("{base}:a\\nb   fake-owner")),
        "{lines:#?}"
    );
    assert!(lines[1].contains(guard.owner()), "{lines:#?}");
    assert!(lines[2].contains("evil\\x1b[2K\\rowner\\nx"), "{lines:#?}");
    assert!(!ran.stdout.contains('\x1b'), "{:?}", ran.stdout);

    let ran = finish(&mut holdlock(["inspect", &name])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.lines().count(), 2, "{:?}", ran.stdout);
    guard.unlock().await.unwrap();
    let ran = finish(&mut holdlock(["inspect", &name])).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert_eq!(ran.stdout.lines().count(), 1, "{:?}", ran.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_the_locks_and_warns_of_each_key_that_is_not_one() {
    use fred::interfaces::{HashesInterface, KeysInterface};
    let base = common::unique("foreign");
    let good = format!("{base}:good");
    let client = common::client().await;
    let guard = client.lock(&good).await.unwrap();
    let raw = common::raw(&common::url()).await;
    let key = |name: &str| common::key(&format!("{base}:{name}"));
    let (foreign, string) = (key("foreign"), key("string"));
    let _: () = raw.hset(foreign.as_str(), ("owner", "abc")).await.unwrap();
    let _: () = raw
        .set(string.as_str(), "x", None, None, false)
        .await
        .unwrap();
    let pattern = format!("{base}:*");

    let ran = finish(&mut holdlock(["list", &pattern])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_no_panic(&ran);
    let rows: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(rows.len(), 2, "a header and the one lock: {rows:#?}");
    assert!(rows[1].starts_with(&good), "{rows:#?}");
    let warnings: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "one warning per key: {warnings:#?}");
    assert!(warnings[0].contains(&foreign), "{warnings:#?}");
    assert!(warnings[1].contains(&string), "{warnings:#?}");
    assert!(warnings[1].contains("WRONGTYPE"), "{warnings:#?}");

    let ran = finish(&mut holdlock(["list", &pattern, "--json"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(listed["locks"][0]["name"], good.as_str(), "{listed}");
    assert_eq!(
        listed["locks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let unreadable = listed["unreadable"]
        .as_array()
        .expect("an unreadable array");
    let keys: Vec<_> = unreadable.iter().map(|bad| bad["key"].clone()).collect();
    assert_eq!(keys, [foreign.as_str(), string.as_str()], "{listed}");
    assert_eq!(unreadable[0]["name"], format!("{base}:foreign"));
    assert!(unreadable[0]["error"].is_string(), "{listed}");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_patterns_and_durations_exit_64_before_connecting() {
    // Nothing listens here: an argument checked only after connecting would exit 69.
    let port = common::server::free_port().unwrap();
    let dead_url = format!("redis://127.0.0.1:{port}");
    let cases: [(&[&str], &str); 10] = [
        (&["run", "", "--", "true"], "empty"),
        (&["run", "a{b", "--", "true"], "brace"),
        (&["inspect", "a{b"], "brace"),
        (&["inspect", ""], "empty"),
        (&["unlock", "--force", "x}"], "brace"),
        (&["list", ""], "pattern"),
        (&["run", "x", "--wait", "4000d", "--", "true"], "ten years"),
        (
            &["run", "x", "--once-per", "4000d", "--", "true"],
            "ten years",
        ),
        (
            &["run", "x", "--once-per", "0.5s", "--", "true"],
            "at least 1s",
        ),
        (&["run", "x", "--wait", "1,5s", "--", "true"], "1.5s"),
    ];
    for (args, mentioned) in cases {
        let ran = finish(&mut holdlock_at(&dead_url, args)).await;
        assert_eq!(ran.code, Some(64), "{args:?}: {ran:?}");
        assert!(ran.stderr.contains(mentioned), "{args:?}: {:?}", ran.stderr);
        assert_no_panic(&ran);
    }
    // The longest duration accepted is still accepted, as are fractions (and then Redis
    // is unreachable).
    let args = [
        "--connect-timeout",
        "0.5s",
        "run",
        "x",
        "--wait",
        "3650d",
        "--once-per",
        "1.5s",
        "--",
        "true",
    ];
    let ran = finish(&mut holdlock_at(&dead_url, args)).await;
    assert_eq!(ran.code, Some(69), "{ran:?}");
}

/// Accepts connections on a port and never answers: a server that died and whose
/// address still accepts (a frozen host, a proxy whose backend is gone).
struct SilentListener {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SilentListener {
    fn bind(port: u16) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("take the port");
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => held.push(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { stop }
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs `holdlock run NAME --lease 3s -- sleep 30` on a server of its own, kills the
/// server (by its PID, through the test helper) once the command runs, and, if
/// `then_silent`, has the port accept connections that never answer. Returns how long
/// holdlock took to exit after the kill, and what it said.
async fn run_while_the_server_dies(then_silent: bool) -> (Duration, Ran) {
    let server = common::RedisServer::start();
    let port = server.port;
    let name = common::unique("dead-server");
    let dir = scratch();
    let pid_file = dir.join("pid");
    let script = r#"echo $$ > "$PID_FILE"; exec sleep 30"#;
    let args = ["run", &name, "--lease", "3s", "--", "sh", "-c", script];
    let mut command = holdlock_at(&server.url(), args);
    let child = command.env("PID_FILE", &pid_file).spawn().unwrap();
    eventually("the command runs", async || {
        !read_lines(&pid_file).is_empty()
    })
    .await;

    let killed_at = Instant::now();
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
    let _silent = then_silent.then(|| SilentListener::bind(port));
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("holdlock exits within 30 s of the server's death")
        .unwrap();
    let took = killed_at.elapsed();
    let _ = std::fs::remove_dir_all(dir);
    (took, Ran::from(output))
}

/// Once the lock is known lost, holdlock exits at once: closing its connections does
/// not wait on a server that is gone (fred would hold a QUIT sent while it reconnects
/// for the whole command timeout, 5 s, once per connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exits_within_a_lease_of_the_server_dying() {
    let lease = Duration::from_secs(3);
    let (refused, silent) = tokio::join!(
        run_while_the_server_dies(false),
        run_while_the_server_dies(true)
    );
    for (case, (took, ran)) in [("refused", refused), ("silent", silent)] {
        assert_eq!(ran.code, Some(70), "{case}: {ran:?}");
        assert!(ran.stderr.contains("lost lock"), "{case}: {ran:?}");
        assert_no_panic(&ran);
        assert!(
            took < lease + Duration::from_millis(1500),
            "{case}: exited {took:?} after the server died: {ran:?}"
        );
    }
}

/// `--max-hold` caps the watchdog: a command that outlives it loses the lock, gets
/// SIGTERM and holdlock exits 70, a little after the cap and long before the command
/// would have ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_held_past_max_hold_is_stopped() {
    let name = common::unique("max-hold");
    let started = Instant::now();
    let ran = finish(&mut holdlock([
        "run",
        &name,
        "--lease",
        "1s",
        "--max-hold",
        "1500ms",
        "--",
        "sleep",
        "30",
    ]))
    .await;
    assert_eq!(ran.code, Some(70), "{ran:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_500),
        "stopped after {took:?}"
    );
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
}

/// `HOLDLOCK_URL`, `HOLDLOCK_PREFIX` stand in for `--url` and `--prefix`, and
/// `RUST_LOG` turns on logs as an env filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_variables_and_rust_log_configure_the_cli() {
    let name = common::unique("env");
    let client = holdlock::LockClient::builder(common::url())
        .prefix("envtest:")
        .build()
        .await
        .unwrap();
    let guard = client.lock(&name).await.unwrap();
    let inspect = |prefix: Option<&str>, log: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_holdlock"));
        command
            .args(["inspect", &name, "--json"])
            .env("HOLDLOCK_URL", common::url())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(prefix) = prefix {
            command.env("HOLDLOCK_PREFIX", prefix);
        }
        if let Some(log) = log {
            command.env("RUST_LOG", log);
        }
        command
    };
    let ran = finish(&mut inspect(Some("envtest:"), None)).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains(guard.owner()), "{ran:?}");
    assert!(!ran.stderr.contains("DEBUG"), "{ran:?}");
    let ran = finish(&mut inspect(None, None)).await;
    assert_eq!(
        ran.code,
        Some(1),
        "the default prefix has no such lock: {ran:?}"
    );
    let ran = finish(&mut inspect(Some("envtest:"), Some("debug"))).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stderr.contains("DEBUG"), "RUST_LOG=debug logs: {ran:?}");
    guard.unlock().await.unwrap();
}

/// `holdlock top --once` shows the locks under a pattern, the one somebody waits for
/// first; `--json` gives the same rows with the library's fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_once_shows_contended_locks_first() {
    let stem = common::unique("top");
    let (calm, busy) = (format!("{stem}:a"), format!("{stem}:b"));
    let client = common::client().await;
    let other = common::connect(&common::url()).await;
    let calm_guard = client.lock(&calm).await.unwrap();
    let busy_guard = client.lock(&busy).await.unwrap();
    // A waiting call refused: the lock is marked as waited for.
    assert!(
        other
            .lock(&busy)
            .timeout(Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    let pattern = format!("{stem}:*");
    let ran = finish(&mut holdlock(["top", &pattern, "--once", "--json"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let json: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    let locks = json["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 2, "{json}");
    assert_eq!(
        locks[0]["name"],
        busy.as_str(),
        "the contended one first: {json}"
    );
    assert_eq!(locks[0]["waiting"], true);
    assert_eq!(locks[1]["waiting"], false);
    assert_eq!(locks[1]["owners"][0]["id"], calm_guard.owner());
    assert!(locks[1]["ttl_ms"].as_u64().is_some(), "{json}");
    let ran = finish(&mut holdlock(["top", &pattern, "--once"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let header = ran.stdout.lines().next().unwrap_or_default();
    for column in ["NAME", "OWNERS", "TTL", "TOKEN", "WAITING", "HELD"] {
        assert!(header.contains(column), "{header}");
    }
    calm_guard.unlock().await.unwrap();
    busy_guard.unlock().await.unwrap();
}

common::on_every_topology!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    every_kind_is_listed_inspected_and_force_unlocked,
);

/// `holdlock --url URL ARGS...` run to the end, its stdout read as JSON.
async fn json_of(url: &str, args: &[&str]) -> serde_json::Value {
    let ran = finish(&mut holdlock_at(url, args)).await;
    assert_no_panic(&ran);
    serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|_| panic!("{args:?}: {ran:?}"))
}

/// A mutex, a fair lock with a queued waiter, a read-write lock with two readers and
/// a waiting writer, and a semaphore with two of three permits held, all under one
/// stem: `list` and `top` show each with its KIND (the contended first in `top`),
/// `inspect --kind` shows each kind's facts, and `unlock --force --kind` breaks each
/// and wakes its waiters.
async fn every_kind_is_listed_inspected_and_force_unlocked(url: &str) {
    let stem = common::unique("kinds");
    let (mutex, fair, rw, sem) = (
        format!("{stem}:a"),
        format!("{stem}:b"),
        format!("{stem}:c"),
        format!("{stem}:d"),
    );
    // A short lease: a holder learns soon (at its next renewal) that it was broken.
    let client = common::client_with_lease(url, Duration::from_millis(900)).await;
    let waiters = common::connect(url).await;
    let mutex_guard = client.lock(&mutex).await.unwrap();
    let fair_guard = client.fair_lock(&fair).await.unwrap();
    let (fair_waiter, fair_waiting) = {
        let (waiters, fair) = (waiters.clone(), fair.clone());
        let (owner_tx, owner_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let _ = owner_tx.send(waiters.owner_id());
            waiters.fair_lock(&fair).await.unwrap()
        });
        (owner_rx.await.unwrap(), task)
    };
    let reading = client.read_lock(&rw).await.unwrap();
    let writing = {
        let (waiters, rw) = (waiters.clone(), rw.clone());
        tokio::spawn(async move { waiters.write_lock(&rw).await.unwrap() })
    };
    let semaphore = client.semaphore(&sem, 3);
    let permits = [
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    ];
    eventually("the fair waiter queues and the writer waits", async || {
        let locks = client.list(&format!("{stem}:*")).await.unwrap();
        locks.iter().filter(|info| info.waiting).count() == 2
    })
    .await;
    let pattern = format!("{stem}:*");

    let listed = json_of(url, &["list", &pattern, "--json"]).await;
    let found: Vec<(String, String)> = listed["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|info| {
            let field = |name: &str| info[name].as_str().unwrap_or_default().to_owned();
            (field("name"), field("kind"))
        })
        .collect();
    let expected: Vec<(String, String)> = [
        (&mutex, "mutex"),
        (&fair, "fair"),
        (&rw, "rw"),
        (&sem, "semaphore"),
    ]
    .iter()
    .map(|(name, kind)| ((*name).clone(), (*kind).to_owned()))
    .collect();
    assert_eq!(found, expected, "{listed}");
    let ran = finish(&mut holdlock_at(url, ["list", &pattern])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(lines[0].contains("KIND"), "{lines:#?}");
    for (name, kind) in &expected {
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(name.as_str()) && line.contains(kind.as_str())),
            "{name} {kind}: {lines:#?}"
        );
    }

    // top: the two contended locks (the fair queue, the waiting writer) first.
    let top = json_of(url, &["top", &pattern, "--once", "--json"]).await;
    let order: Vec<(&str, bool)> = top["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|info| (info["kind"].as_str().unwrap(), info["waiting"] == true))
        .collect();
    assert_eq!(order.len(), 4, "{top}");
    assert!(order[..2].iter().all(|(_, waiting)| *waiting), "{top}");
    assert!(order[2..].iter().all(|(_, waiting)| !*waiting), "{top}");
    let ran = finish(&mut holdlock_at(url, ["top", &pattern, "--once"])).await;
    assert!(
        ran.stdout
            .lines()
            .next()
            .unwrap_or_default()
            .contains("KIND"),
        "{ran:?}"
    );

    // inspect --kind: each kind's facts, in the library's schema.
    let info = json_of(url, &["inspect", &fair, "--kind", "fair", "--json"]).await;
    assert_eq!(info["kind"], "fair");
    assert_eq!(info["owners"][0]["id"], fair_guard.owner());
    assert_eq!(info["fair"]["queue"][0]["owner"], fair_waiter.as_str());
    assert!(info["fair"]["queue"][0]["waited_ms"].is_u64(), "{info}");
    assert!(info["fair"]["queue"][0]["since_us"].is_u64(), "{info}");
    assert_eq!(info["fair"]["grant"], serde_json::Value::Null);
    let info = json_of(url, &["inspect", &rw, "--kind", "rw", "--json"]).await;
    assert_eq!(info["kind"], "rw");
    assert_eq!(info["rw"]["readers"][0]["owner"], reading.owner());
    assert!(info["rw"]["readers"][0]["lease_ms"].is_u64(), "{info}");
    assert_eq!(info["rw"]["writer"], serde_json::Value::Null);
    assert_eq!(info["rw"]["writer_waiting"], true);
    let info = json_of(url, &["inspect", &sem, "--kind", "semaphore", "--json"]).await;
    assert_eq!(info["kind"], "semaphore");
    assert_eq!(info["semaphore"]["permits"], 3);
    let held = info["semaphore"]["held"].as_array().unwrap();
    assert_eq!(held.len(), 2, "{info}");
    assert_eq!(info["owners"][0]["hold_count"], 2);
    let info = json_of(url, &["inspect", &mutex, "--json"]).await;
    assert_eq!(info["kind"], "mutex");
    assert!(
        info.get("fair").is_none() && info.get("rw").is_none(),
        "{info}"
    );
    // Each kind has keys of its own: the mutex of the fair lock's name is free.
    let ran = finish(&mut holdlock_at(url, ["inspect", &fair])).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let ran = finish(&mut holdlock_at(url, ["inspect", &rw, "--kind", "rw"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout.contains("SIDE") && ran.stdout.contains("a writer waits"),
        "{ran:?}"
    );
    let ran = finish(&mut holdlock_at(
        url,
        ["inspect", &sem, "--kind", "semaphore"],
    ))
    .await;
    assert!(ran.stdout.contains("2 of 3 permits held"), "{ran:?}");
    let ran = finish(&mut holdlock_at(url, ["inspect", &fair, "--kind", "fair"])).await;
    assert!(
        ran.stdout.contains("WAITER") && ran.stdout.contains(&fair_waiter),
        "{ran:?}"
    );

    // unlock --force --kind: each is broken and its waiters get in.
    let unlocked = json_of(
        url,
        &["unlock", "--force", "--kind", "fair", &fair, "--json"],
    )
    .await;
    assert_eq!(unlocked["was_locked"], true, "{unlocked}");
    assert_eq!(unlocked["kind"], "fair");
    let got = tokio::time::timeout(Duration::from_secs(5), fair_waiting)
        .await
        .expect("the fair waiter was handed the lock")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), fair_guard.lost())
        .await
        .expect("the fair holder learned it lost");
    got.unlock().await.unwrap();
    let ran = finish(&mut holdlock_at(
        url,
        ["unlock", "--force", "--kind", "rw", &rw],
    ))
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("unlocked"), "{ran:?}");
    let written = tokio::time::timeout(Duration::from_secs(5), writing)
        .await
        .expect("the writer was let in")
        .unwrap();
    written.unlock().await.unwrap();
    let unlocked = json_of(
        url,
        &["unlock", "--force", "--kind", "semaphore", &sem, "--json"],
    )
    .await;
    assert_eq!(unlocked["was_locked"], true, "{unlocked}");
    assert!(client.semaphore(&sem, 3).available().await.unwrap() == 3);
    let unlocked = json_of(
        url,
        &["unlock", "--force", "--kind", "semaphore", &sem, "--json"],
    )
    .await;
    assert_eq!(unlocked["was_locked"], false, "{unlocked}");
    let ran = finish(&mut holdlock_at(
        url,
        ["unlock", "--force", "--kind", "lock", &sem],
    ))
    .await;
    assert_eq!(
        ran.code,
        Some(64),
        "an unknown kind is a usage error: {ran:?}"
    );
    mutex_guard.unlock().await.unwrap();
    drop((reading, permits));
}

/// `holdlock run` keeps "<hostname> pid <pid>: <CMD ...>" with its hold by default,
/// and `--data` replaces it: `list --json` and the `inspect` table show which machine
/// runs which job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_keeps_who_runs_what_with_the_hold() {
    for (data, expect) in [
        (None, " pid "),
        (Some("nightly export on web-3"), "nightly export on web-3"),
    ] {
        let name = common::unique("run-data");
        let mut args = vec!["run".to_owned(), name.clone()];
        if let Some(data) = data {
            args.extend(["--data".to_owned(), data.to_owned()]);
        }
        args.extend(["--", "sleep", "2"].map(str::to_owned));
        let mut running = holdlock(&args).kill_on_drop(true).spawn().unwrap();
        let client = common::client().await;
        eventually("run holds the lock", async || {
            client.is_locked(&name).await.unwrap()
        })
        .await;
        let ran = finish(&mut holdlock(["list", &name, "--json"])).await;
        assert_eq!(ran.code, Some(0), "{ran:?}");
        let listed: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON");
        let shown = listed["locks"][0]["owners"][0]["data"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(shown.contains(expect), "{shown:?} in {listed}");
        if data.is_none() {
            assert!(shown.ends_with(": sleep 2"), "{shown:?}");
        }
        let table = finish(&mut holdlock(["inspect", &name])).await;
        assert!(
            table.stdout.contains("DATA") && table.stdout.contains(expect),
            "{table:?}"
        );
        let status = running.wait().await.unwrap();
        assert!(status.success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compat_redisson_sees_and_takes_redisson_layout_locks() {
    use fred::interfaces::{HashesInterface, KeysInterface};
    let name = common::unique("redisson-cli");
    let redis = common::raw(&common::url()).await;
    // A Java thread's hold, as Redisson keeps it.
    let java = format!("{}:12", uuid::Uuid::new_v4());
    let _: () = redis.hset(name.as_str(), (java.as_str(), 1)).await.unwrap();
    let _: bool = redis.pexpire(name.as_str(), 30_000, None).await.unwrap();

    let ran = finish(&mut holdlock([
        "--compat", "redisson", "inspect", &name, "--json",
    ]))
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains(&java), "{ran:?}");
    // Listed in Redisson's layout, and only there.
    let ran = finish(&mut holdlock(["--compat", "redisson", "list", &name])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains(&java), "{ran:?}");
    let ran = finish(&mut holdlock(["list", &name])).await;
    assert!(!ran.stdout.contains(&java), "{ran:?}");
    // In holdlock's own layout the name is free: a different key.
    let ran = finish(&mut holdlock(["run", &name, "--no-wait", "--", "true"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let ran = finish(&mut holdlock([
        "--compat",
        "redisson",
        "run",
        &name,
        "--no-wait",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(ran.code, Some(75), "{ran:?}");

    let _: i64 = redis.del(name.as_str()).await.unwrap();
    let ran = finish(&mut holdlock([
        "--compat",
        "redisson",
        "run",
        &name,
        "--no-wait",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let ran = finish(&mut holdlock(["--compat", "redison", "list"])).await;
    assert_eq!(ran.code, Some(64), "{ran:?}");
}

/// `holdlock waits` lists a wait past its client's check (exit 0), and a deadlock
/// among the waits exits 1 and names it (here the victim is stalled: its wait's record
/// is written as its client would, and nothing else happens on its side). `holdlock
/// top` shows the same: the long waits of each lock, and the deadlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_shows_who_waits_for_what_and_deadlocks() {
    use fred::interfaces::KeysInterface;
    let prefix = format!("{}:", common::unique("waits"));
    let client = holdlock::LockClient::builder(common::url())
        .prefix(&prefix)
        .deadlock_check(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let (x, y) = ("x".to_owned(), "y".to_owned());
    let b_holds = client.lock(&y).await.unwrap();
    let b_owner = client.owner_id();
    let a_waits = tokio::spawn({
        let client = client.clone();
        async move {
            let held = client.lock("x").await.unwrap();
            let owner = client.owner_id();
            let second = client.lock("y").await.map(drop);
            held.unlock().await.unwrap();
            (owner, second)
        }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let ran = finish(&mut holdlock(["--prefix", &prefix, "waits"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.starts_with("OWNER"), "{ran:?}");
    assert!(ran.stdout.contains(" y "), "{ran:?}");
    let ran = finish(&mut holdlock(["--prefix", &prefix, "waits", "--json"])).await;
    let graph: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(graph["waits"][0]["wait"]["name"], "y", "{graph}");
    assert_eq!(graph["waits"][0]["wait"]["kind"], "mutex", "{graph}");
    assert!(
        graph["waits"][0]["waited_ms"].as_u64().unwrap() >= 100,
        "{graph}"
    );
    assert_eq!(graph["deadlocks"], serde_json::json!([]), "{graph}");
    let ran = finish(&mut holdlock(["--prefix", &prefix, "top", "--once"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let y_row = ran.stdout.lines().find(|line| line.starts_with("y "));
    assert!(
        y_row.is_some_and(|row| row.contains(" 1 for ")),
        "the long wait for y: {ran:?}"
    );
    assert!(!ran.stdout.contains("deadlock"), "{ran:?}");
    let top = json_of(
        &common::url(),
        &["--prefix", &prefix, "top", "--once", "--json"],
    )
    .await;
    let locks = top["locks"].as_array().unwrap();
    let y_lock = locks.iter().find(|lock| lock["name"] == "y");
    let y_lock = y_lock.unwrap_or_else(|| panic!("{top}"));
    assert_eq!(y_lock["long_waits"][0]["wait"]["name"], "y", "{top}");
    assert_eq!(top["locks"][0]["name"], "y", "the waited for first: {top}");
    assert_eq!(top["deadlocks"], serde_json::json!([]), "{top}");

    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let key = format!("{prefix}waits:{b_owner}");
    let _: () = client
        .redis()
        .set(
            &key,
            format!("{since} 1 mutex 1:{x} mutex 1:{y}"),
            None,
            None,
            false,
        )
        .await
        .unwrap();
    let ran = finish(&mut holdlock(["--prefix", &prefix, "waits"])).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stdout
            .contains(&format!("deadlock: {b_owner} waits for x -> ")),
        "{ran:?}"
    );
    let ran = finish(&mut holdlock(["--prefix", &prefix, "top", "--once"])).await;
    let line = format!("deadlock: {b_owner} waits for x -> ");
    assert!(ran.stdout.contains(&line), "{ran:?}");
    let top = json_of(
        &common::url(),
        &["--prefix", &prefix, "top", "--once", "--json"],
    )
    .await;
    assert_eq!(top["deadlocks"][0][0]["owner"], b_owner.as_str(), "{top}");
    let _: i64 = client.redis().del(&key).await.unwrap();
    b_holds.unlock().await.unwrap();
    let (_, second) = a_waits.await.unwrap();
    assert!(second.is_ok(), "{second:?}");
}
