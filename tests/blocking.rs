//! The blocking API (`holdlock::blocking`): plain threads, no runtime of the caller's,
//! each thread its own owner.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use holdlock::LockError;
use holdlock::blocking::LockClient;

fn connect() -> LockClient {
    LockClient::connect(&common::url()).expect("connect to the test redis")
}

/// A shop of `stock` items kept in Redis, sold by 8 threads of 2 clients, 5 purchases
/// each, every purchase a read, a pause and a write (the classic oversell). Returns
/// the sales made and the stock left in Redis.
fn sell_out(stock: i64, locked: bool) -> (i64, i64) {
    let name = common::unique("shop");
    let key = format!("test:stock:{name}");
    let server = common::shared();
    server.query(&["SET", &key, &stock.to_string()]).unwrap();
    let clients = [connect(), connect()];
    let sales = AtomicI64::new(0);
    let purchase = || {
        let left = common::integer(&server.query(&["GET", &key]).unwrap());
        if left > 0 {
            thread::sleep(Duration::from_millis(5));
            server
                .query(&["SET", &key, &(left - 1).to_string()])
                .unwrap();
            sales.fetch_add(1, Ordering::Relaxed);
        }
    };
    thread::scope(|threads| {
        for worker in 0..8 {
            let client = &clients[worker % 2];
            let (name, purchase) = (&name, &purchase);
            threads.spawn(move || {
                for _ in 0..5 {
                    if locked {
                        client.lock(name).run(|_| purchase()).unwrap();
                    } else {
                        purchase();
                    }
                }
            });
        }
    });
    let left = common::integer(&server.query(&["GET", &key]).unwrap());
    (sales.into_inner(), left)
}

/// Under the lock, 40 attempts on 20 items sell exactly 20 and leave 0; without it the
/// same scenario sells more than there was (so the scenario can tell).
#[test]
fn the_lock_prevents_overselling_across_threads_and_clients() {
    assert_eq!(sell_out(20, true), (20, 0));
    let (sold, _) = sell_out(20, false);
    assert!(
        sold > 20,
        "without the lock only {sold} were sold: the scenario cannot fail"
    );
}

/// A thread re-enters its own lock (count 2, one owner id naming the thread); another
/// thread of the same client is excluded until both holds are gone.
#[test]
fn locks_are_reentrant_per_thread_and_exclude_other_threads() {
    let client = connect();
    let name = common::unique("reentry");
    let outer = client.lock(&name).block().unwrap();
    let inner = client.lock(&name).block().unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(outer.owner(), inner.owner());
    assert_eq!(outer.owner(), client.owner_id());
    assert!(outer.owner().contains(":thread-"), "{}", outer.owner());

    let other = thread::scope(|threads| {
        threads
            .spawn(|| {
                let busy = client.lock(&name).try_now().block().unwrap();
                assert!(busy.is_none(), "another thread entered a held lock");
                client.owner_id()
            })
            .join()
            .unwrap()
    });
    assert_ne!(other, client.owner_id());

    outer.unlock().unwrap();
    assert_eq!(inner.hold_count(), 1);
    inner.unlock().unwrap();
    thread::scope(|threads| {
        threads.spawn(|| {
            let free = client
                .lock(&name)
                .try_now()
                .block()
                .unwrap()
                .expect("free after both holds went");
            free.unlock().unwrap();
        });
    });
}

/// A nested critical section of the same name re-enters; the body's value comes back
/// and the lock is free afterwards.
#[test]
fn with_lock_runs_its_body_and_returns_its_value() {
    let client = connect();
    let name = common::unique("section");
    let value = client
        .lock(&name)
        .run(|guard| {
            assert!(client.is_locked(&name).unwrap());
            let nested = client.lock(&name).run(|inner| inner.hold_count()).unwrap();
            (guard.name().to_owned(), nested)
        })
        .unwrap();
    assert_eq!(value, (name.clone(), 2));
    assert!(!client.is_locked(&name).unwrap());

    let held = client.lock(&name).block().unwrap();
    let busy = thread::scope(|threads| {
        threads
            .spawn(|| {
                client
                    .lock(&name)
                    .try_now()
                    .run(|_| unreachable!("ran while busy"))
            })
            .join()
            .unwrap()
    });
    assert!(busy.unwrap().is_none());
    held.unlock().unwrap();
}

/// A guard outlives its client: dropped after the client (on another thread), it
/// releases the lock, and by the time the drop returns.
#[test]
fn a_guard_dropped_after_its_client_releases_the_lock() {
    let observer = connect();
    let name = common::unique("orphan");
    let client = connect();
    let guard = client.lock(&name).block().unwrap();
    drop(client);
    assert!(observer.is_locked(&name).unwrap());
    assert!(!guard.is_lost());
    thread::spawn(move || drop(guard)).join().unwrap();
    assert!(
        !observer.is_locked(&name).unwrap(),
        "the dropped guard left its lock"
    );
}

/// The watchdog keeps a 1 s lease alive for 3 s while the holding thread sleeps;
/// another client cannot take the lock meanwhile, and can right after the unlock.
#[test]
fn the_watchdog_keeps_a_lock_while_the_thread_sleeps() {
    let name = common::unique("watchdog");
    let holder = LockClient::builder(common::url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let rival = connect();
    let guard = holder.lock(&name).block().unwrap();
    let done = AtomicBool::new(false);
    let tries = AtomicUsize::new(0);
    thread::scope(|threads| {
        threads.spawn(|| {
            while !done.load(Ordering::Acquire) {
                let taken = rival.lock(&name).try_now().block().unwrap();
                assert!(taken.is_none(), "the lock was taken while its holder slept");
                tries.fetch_add(1, Ordering::Relaxed);
                thread::sleep(Duration::from_millis(100));
            }
        });
        thread::sleep(Duration::from_secs(3));
        assert!(!guard.is_lost());
        assert!(
            guard.renewal_margin().is_some(),
            "no renewal in 3 s of a 1 s lease"
        );
        done.store(true, Ordering::Release);
    });
    assert!(tries.into_inner() >= 20);
    guard.unlock().unwrap();
    rival
        .lock(&name)
        .try_now()
        .block()
        .unwrap()
        .expect("free after the unlock")
        .unlock()
        .unwrap();
}

/// Inside a tokio runtime every call fails with `BlockingInRuntime` (building too);
/// dropping guards and the client there neither panics nor leaves the lock held.
#[test]
fn calls_inside_a_runtime_fail_with_blocking_in_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let built = runtime.block_on(async { LockClient::connect(&common::url()) });
    assert!(
        matches!(built, Err(LockError::BlockingInRuntime)),
        "{built:?}"
    );

    let observer = connect();
    let client = connect();
    let name = common::unique("in-runtime");
    let guard = client.lock(&name).block().unwrap();
    runtime.block_on(async {
        let refused = client.lock(&name).try_now().block();
        assert!(
            matches!(refused, Err(LockError::BlockingInRuntime)),
            "{refused:?}"
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("inside a tokio runtime")
        );
        // The async face works there; a task is an owner of its own.
        let (other, named) = (client.as_async().clone(), name.clone());
        let taken =
            tokio::spawn(async move { other.lock(&named).try_now().await.map(|g| g.is_some()) });
        assert!(
            !taken.await.unwrap().unwrap(),
            "a task entered a thread's lock"
        );
        drop(guard);
        drop(client);
    });
    common::wait_until("the lock released", Duration::from_secs(5), || {
        !observer.is_locked(&name).unwrap()
    });
}

/// Never more than N permits out across 8 threads, and N at some point.
#[test]
fn a_semaphore_limits_holders_across_threads() {
    let client = connect();
    let semaphore = client.semaphore(common::unique("sem"), 3);
    let (current, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|threads| {
        for _ in 0..8 {
            threads.spawn(|| {
                for _ in 0..3 {
                    semaphore
                        .acquire()
                        .run(|_| {
                            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            thread::sleep(Duration::from_millis(30));
                            current.fetch_sub(1, Ordering::SeqCst);
                        })
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(most.into_inner(), 3);
    assert_eq!(semaphore.available().unwrap(), 3);
    let permits: Vec<_> = (0..3)
        .map(|_| semaphore.acquire().block().unwrap())
        .collect();
    assert!(semaphore.acquire().try_now().block().unwrap().is_none());
    assert!(
        semaphore
            .acquire()
            .timeout(Duration::from_millis(100))
            .block()
            .unwrap()
            .is_none()
    );
    for permit in permits {
        permit.release().unwrap();
    }
}

/// Threads queued on a fair lock are served in the order they came.
#[test]
fn a_fair_lock_serves_threads_in_turn() {
    let client = connect();
    let name = common::unique("fair");
    let first = client.fair_lock(&name).block().unwrap();
    let order = parking_lot::Mutex::new(Vec::new());
    thread::scope(|threads| {
        for turn in 0..3 {
            let (client, name, order) = (&client, &name, &order);
            threads.spawn(move || {
                client
                    .fair_lock(name)
                    .run(|_| order.lock().push(turn))
                    .unwrap();
            });
            // Each queues before the next starts.
            common::wait_until("the waiter queued", Duration::from_secs(5), || {
                let info = client.inspect_kind(holdlock::LockKind::Fair, name).unwrap();
                info.and_then(|info| info.fair)
                    .is_some_and(|fair| fair.queue.len() > turn)
            });
        }
        first.unlock().unwrap();
    });
    assert_eq!(order.into_inner(), [0, 1, 2]);
}

/// Readers share, a writer excludes them, and a writer may read inside its write.
#[test]
fn read_write_locks_share_reads_and_exclude_writes() {
    let client = connect();
    let name = common::unique("rw");
    let read = client.read_lock(&name).block().unwrap();
    thread::scope(|threads| {
        threads.spawn(|| {
            let shared = client
                .read_lock(&name)
                .try_now()
                .block()
                .unwrap()
                .expect("readers share");
            shared.unlock().unwrap();
            assert!(
                client
                    .write_lock(&name)
                    .try_now()
                    .block()
                    .unwrap()
                    .is_none()
            );
        });
    });
    assert!(matches!(
        client.write_lock(&name).try_now().block(),
        Err(LockError::WouldDeadlock { .. })
    ));
    read.unlock().unwrap();
    let seen = client
        .write_lock(&name)
        .run(|_| {
            let inside = client
                .read_lock(&name)
                .run(|_| "read inside write")
                .unwrap();
            let excluded = thread::scope(|threads| {
                threads
                    .spawn(|| client.read_lock(&name).try_now().block().unwrap().is_none())
                    .join()
                    .unwrap()
            });
            (inside, excluded)
        })
        .unwrap();
    assert_eq!(seen, ("read inside write", true));
}

/// `lock_all` takes every name or none, and threads taking overlapping sets in
/// opposite orders never deadlock.
#[test]
fn lock_all_takes_every_name_and_never_deadlocks() {
    let client = connect();
    let (a, b) = (common::unique("all-a"), common::unique("all-b"));
    let both = client.lock_all([&a, &b]).block().unwrap();
    assert_eq!(both.names().count(), 2);
    thread::scope(|threads| {
        threads.spawn(|| {
            assert!(
                client
                    .lock_all([&b, &a])
                    .try_now()
                    .block()
                    .unwrap()
                    .is_none()
            );
            assert!(client.lock(&a).try_now().block().unwrap().is_none());
        });
    });
    both.unlock().unwrap();

    let start = Barrier::new(4);
    let runs = AtomicUsize::new(0);
    thread::scope(|threads| {
        for worker in 0..4 {
            let (client, start, runs) = (&client, &start, &runs);
            let names = if worker % 2 == 0 { [&a, &b] } else { [&b, &a] };
            threads.spawn(move || {
                start.wait();
                for _ in 0..5 {
                    client
                        .lock_all(names)
                        .run(|_| runs.fetch_add(1, Ordering::Relaxed))
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(runs.into_inner(), 20);
    assert!(!client.is_locked(&a).unwrap() && !client.is_locked(&b).unwrap());
}

/// A fixed lease is extended; `wait_lost` waits for a hold's loss (here, its fixed
/// lease running out) and no longer.
#[test]
fn guards_report_loss_and_extend_fixed_leases() {
    let client = connect();
    let name = common::unique("lost");
    let fixed = |lease| holdlock::LockOptions::new().lease(lease);
    let guard = client
        .lock(&name)
        .options(fixed(Duration::from_secs(2)))
        .block()
        .unwrap()
        .unwrap();
    guard.extend(Duration::from_secs(20)).unwrap();
    let ttl = guard.remaining_ttl().unwrap().unwrap();
    assert!(ttl > Duration::from_secs(10), "{ttl:?}");
    guard.unlock().unwrap();

    let short = client
        .lock(&name)
        .options(fixed(Duration::from_millis(400)))
        .block()
        .unwrap()
        .unwrap();
    let start = Instant::now();
    assert!(!short.wait_lost(Duration::from_millis(50)).unwrap());
    let (told, heard) = mpsc::channel();
    let watching = Arc::new(short);
    let watcher = {
        let watching = Arc::clone(&watching);
        thread::spawn(move || {
            told.send(()).unwrap();
            watching.wait_lost(Duration::from_secs(10)).unwrap()
        })
    };
    heard.recv().unwrap();
    assert!(watcher.join().unwrap());
    let after = start.elapsed();
    assert!(after < Duration::from_secs(2), "told lost after {after:?}");
    assert!(watching.is_lost());
}

/// `claim_period`: the first claim of a period wins and, completed, leaves the period
/// done for the next claim; an abandoned claim leaves it open; a claim while another
/// thread holds the job's lock is busy.
#[test]
fn claim_period_runs_a_job_once_per_period() {
    use holdlock::blocking::Claim;
    use std::time::SystemTime;

    let client = connect();
    let name = common::unique("period");
    let hour = Duration::from_secs(3600);
    let now = SystemTime::now();
    let no_wait = || holdlock::LockOptions::new().wait(Duration::ZERO);

    let claim = client
        .claim_period(&name, hour, now, no_wait())
        .unwrap()
        .won()
        .expect("the first claim wins");
    let period = claim.period();
    assert!(claim.as_async().guard().hold_count() >= 1);
    let elsewhere = thread::scope(|threads| {
        threads
            .spawn(|| client.claim_period(&name, hour, now, no_wait()).unwrap())
            .join()
            .unwrap()
    });
    assert!(matches!(elsewhere, Claim::Busy), "{elsewhere:?}");
    claim.abandon().unwrap();

    let again = client
        .claim_period(&name, hour, now, no_wait())
        .unwrap()
        .won()
        .expect("an abandoned period is open");
    assert_eq!(again.period(), period);
    again.complete().unwrap();
    match client.claim_period(&name, hour, now, no_wait()).unwrap() {
        Claim::AlreadyDone { period: done } => assert_eq!(done, period),
        other => panic!("a completed period was claimed again: {other:?}"),
    }
    assert!(!client.is_locked(&name).unwrap());
}

/// `list_report` lists a held lock of each kind and names a key under the prefix that
/// is not a lock; `force_unlock_kind` frees the kind it names and no other.
#[test]
fn list_report_and_force_unlock_kind_cover_every_kind() {
    // A short lease, so that the permit's renewal finds it gone soon.
    let client = LockClient::builder(common::url())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let name = common::unique("kinds");
    let mutex = client.lock(&name).block().unwrap();
    let permit = client.semaphore(&name, 3).acquire().block().unwrap();
    let stray = format!("holdlock:{{{name}:stray}}");
    common::shared().query(&["SET", &stray, "x"]).unwrap();

    let listing = client.list_report(&format!("{name}*")).unwrap();
    let kinds: Vec<_> = listing
        .locks
        .iter()
        .map(|info| (info.name.as_str(), info.kind))
        .collect();
    assert!(
        kinds.contains(&(name.as_str(), holdlock::LockKind::Mutex)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(name.as_str(), holdlock::LockKind::Semaphore)),
        "{kinds:?}"
    );
    assert_eq!(listing.unreadable.len(), 1, "{:?}", listing.unreadable);
    assert_eq!(listing.unreadable[0].key, stray);

    assert!(
        client
            .force_unlock_kind(holdlock::LockKind::Semaphore, &name)
            .unwrap()
    );
    assert!(permit.wait_lost(Duration::from_secs(10)).unwrap());
    assert!(
        client.is_locked(&name).unwrap(),
        "the mutex of the name was kept"
    );
    assert!(
        !client
            .force_unlock_kind(holdlock::LockKind::Semaphore, &name)
            .unwrap()
    );
    common::shared().query(&["DEL", &stray]).unwrap();
    mutex.unlock().unwrap();
}

/// The builder's `compat` reaches the client (`compat()` reports it, and the mutex
/// lives at the bare name, Redisson's layout); `hold_spans` gives each hold a
/// `holdlock.hold` span, on the thread that takes it.
#[test]
fn the_builder_passes_compat_and_hold_spans_on() {
    let plain = connect();
    assert_eq!(plain.compat(), holdlock::Compat::Holdlock);
    let redisson = LockClient::builder(common::url())
        .compat(holdlock::Compat::Redisson)
        .build()
        .unwrap();
    assert_eq!(redisson.compat(), holdlock::Compat::Redisson);
    let name = common::unique("compat");
    let guard = redisson.lock(&name).block().unwrap();
    let kind = common::shared().query(&["TYPE", &name]).unwrap();
    assert_eq!(kind, "+hash", "Redisson's key is the name itself");
    guard.unlock().unwrap();

    let spans = LockClient::builder(common::url())
        .hold_spans(true)
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
        .with_ansi(false)
        .with_writer({
            let seen = Arc::clone(&seen);
            move || Written(Arc::clone(&seen))
        })
        .finish();
    let name = common::unique("spans");
    tracing::subscriber::with_default(subscriber, || {
        spans.lock(&name).block().unwrap().unlock().unwrap();
    });
    let text = seen.lock().unwrap().clone();
    assert!(
        text.lines()
            .any(|line| line.contains("holdlock.hold") && line.contains(&name)),
        "no hold span:\n{text}"
    );
}

/// A writer into a shared string, for [`the_builder_passes_compat_and_hold_spans_on`].
struct Written(Arc<std::sync::Mutex<String>>);

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap()
            .push_str(&String::from_utf8_lossy(bytes));
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The blocking builder has every setting of the async builder (README: "its builder
/// has every setting of the async builder"), read from the two sources, so a setting
/// added to one alone fails here.
#[test]
fn the_blocking_builder_has_every_setting_of_the_async_builder() {
    fn settings(source: &str, of: &str) -> std::collections::BTreeSet<String> {
        let text = std::fs::read_to_string(format!("{}/{source}", env!("CARGO_MANIFEST_DIR")))
            .expect("the source");
        let mut found = std::collections::BTreeSet::new();
        let mut inside = false;
        for line in text.lines() {
            if line.starts_with("impl ") {
                inside = line.starts_with(&format!("impl {of} {{"));
            }
            let public = line.trim_start_matches("    pub async fn ");
            let public = public.trim_start_matches("    pub fn ");
            if inside && public.len() < line.len() {
                let name: String = public
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        }
        found
    }
    let async_settings = settings("src/builder.rs", "LockClientBuilder");
    let blocking_settings = settings("src/blocking/builder.rs", "LockClientBuilder");
    assert!(
        async_settings.contains("deadlock_check"),
        "{async_settings:?}"
    );
    let missing: Vec<_> = async_settings.difference(&blocking_settings).collect();
    assert!(missing.is_empty(), "the blocking builder lacks {missing:?}");
}

/// The blocking client has every call of the async client, but the ones README.md
/// names as its exceptions ("except `election`, `redis` and `LockClient::of(&guard)`"),
/// read from the two clients' sources and from the README, so a call added to one
/// alone, or an exception the README leaves out, fails here.
#[test]
fn the_blocking_client_has_every_call_of_the_async_one_but_the_readmes_exceptions() {
    use std::collections::BTreeSet;
    /// The `pub fn`s of `impl LockClient` blocks in the sources under `src/`: those of
    /// `src/blocking/` if `blocking`, else all the others.
    fn calls(blocking: bool) -> BTreeSet<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = BTreeSet::new();
        let mut folders = vec![root.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).expect("a folder of src/") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    folders.push(path);
                    continue;
                }
                let in_blocking = path.starts_with(root.join("blocking"));
                if in_blocking != blocking || path.extension().is_none_or(|ext| ext != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("a source file");
                let mut inside = false;
                for line in text.lines() {
                    if line.starts_with("impl") {
                        inside = line == "impl LockClient {" || line == "impl super::LockClient {";
                    }
                    let public = line
                        .strip_prefix("    pub async fn ")
                        .or_else(|| line.strip_prefix("    pub fn "));
                    if let Some(public) = public.filter(|_| inside) {
                        found.insert(
                            public
                                .chars()
                                .take_while(|c| c.is_alphanumeric() || *c == '_')
                                .collect(),
                        );
                    }
                }
            }
        }
        found
    }
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let text = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, rest) = text
        .split_once("has the async client's calls without `async`")
        .expect("README.md says what the blocking client has");
    let (exceptions, _) = rest
        .split_once(" (reach ")
        .expect("and how to reach its exceptions");
    let (_, exceptions) = exceptions.split_once(" except ").expect("its exceptions");
    let exceptions: BTreeSet<String> = exceptions
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|span| {
            let call = span.rsplit_once("::").map_or(span, |(_, call)| call);
            call.split_once('(')
                .map_or(call, |(call, _)| call)
                .to_owned()
        })
        .collect();
    let (async_calls, blocking_calls) = (calls(false), calls(true));
    assert!(async_calls.contains("lock") && async_calls.contains("waits"));
    assert!(blocking_calls.contains("lock"));
    let missing: BTreeSet<String> = async_calls.difference(&blocking_calls).cloned().collect();
    assert_eq!(
        missing, exceptions,
        "the async calls the blocking client lacks (left) against README.md's exceptions (right)"
    );
}

/// `waits()` of the blocking client lists a wait that has lasted the check's delay,
/// of a thread of another client, and ends with it.
#[test]
fn the_blocking_client_lists_the_long_waits() {
    let checking = || {
        LockClient::builder(common::url())
            .deadlock_check(Duration::from_millis(100))
            .build()
            .unwrap()
    };
    let (holder, waiter, operator) = (checking(), checking(), connect());
    let name = common::unique("blocking-waits");
    let held = holder.lock(&name).block().unwrap();
    let ours = |graph: &holdlock::WaitGraph| {
        graph
            .waits
            .iter()
            .filter(|long| long.wait.name == name)
            .count()
    };
    assert_eq!(ours(&operator.waits().unwrap()), 0, "nobody waits yet");
    thread::scope(|threads| {
        let waiting = threads.spawn(|| waiter.lock(&name).block());
        let deadline = Instant::now() + Duration::from_secs(5);
        let graph = loop {
            let graph = operator.waits().unwrap();
            if ours(&graph) == 1 || Instant::now() > deadline {
                break graph;
            }
            thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(ours(&graph), 1, "the wait is not listed: {graph:?}");
        let long = graph.waits.iter().find(|long| long.wait.name == name);
        assert!(long.is_some_and(|long| long.waited >= Duration::from_millis(100)));
        held.unlock().unwrap();
        waiting.join().unwrap().unwrap().unlock().unwrap();
    });
    // The edge is taken down in the background once the wait ends.
    let deadline = Instant::now() + Duration::from_secs(5);
    while ours(&operator.waits().unwrap()) > 0 {
        assert!(Instant::now() < deadline, "the ended wait is still listed");
        thread::sleep(Duration::from_millis(50));
    }
}
