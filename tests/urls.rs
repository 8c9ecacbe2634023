//! Client URLs: a scheme fred does not know, a TLS scheme in a build without TLS, or a
//! query parameter fred would ignore, is refused before anything connects (fred would
//! read the first as `redis://`, the second as plaintext, sending the password in the
//! clear, and connect as if the third were not written); and no password shows in a
//! builder's `Debug` output or an error, whatever characters it holds.

mod common;

use std::time::Duration;

use holdlock::{Held, LockClient, LockError};
use tokio::net::TcpListener;

/// Builds a client for `url(port)`, where `port` is a listener's that nothing else
/// knows, and returns the error, after checking that nothing connected to the port.
async fn refused_without_connecting(url: impl Fn(u16) -> String) -> LockError {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = url(port);
    let built = LockClient::builder(&url)
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await;
    // A connection attempt completes in the kernel (the listener's backlog) whether or
    // not we accept it, so an attempt made during `build` is still here to be seen.
    let accepted = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
    if let Ok(connection) = accepted {
        panic!("{url}: a connection reached the port: {connection:?}");
    }
    match built {
        Ok(_) => panic!("{url}: a client was built"),
        Err(error) => error,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_schemes_are_refused_before_connecting() {
    for scheme in [
        "foo",
        "http",
        "redis-sentinal",
        "redis-clustre",
        "Redis+TLS",
    ] {
        let error = refused_without_connecting(|port| {
            format!("{scheme}://:pa55word@127.0.0.1:{port}?sentinelServiceName=m")
        })
        .await;
        assert!(
            matches!(&error, LockError::InvalidOption { option: "url", reason }
                if reason.contains("unknown scheme")),
            "{scheme}: {error:?}"
        );
        let shown = format!("{error} {error:?}");
        assert!(shown.contains(scheme), "the scheme is named: {shown}");
        assert!(!shown.contains("pa55word"), "{shown}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_url_without_a_scheme_is_refused_before_connecting() {
    for url in [
        |port| format!("127.0.0.1:{port}"),
        |port| format!("localhost:{port}"),
        |port| format!("//127.0.0.1:{port}"),
    ] as [fn(u16) -> String; 3]
    {
        let error = refused_without_connecting(url).await;
        assert!(
            matches!(error, LockError::InvalidOption { option: "url", .. }),
            "{error:?}"
        );
    }
}

/// A query parameter fred would ignore is refused before connecting: `?db=2`, as other
/// clients write the database, would take locks in database 0, where a service whose
/// URL says `/2` never looks (the two would not exclude each other); a misspelt `node`
/// would leave a cluster client with one seed; a `node` on a `redis://` URL would
/// connect to its host alone. So is a cluster URL's database other than 0: fred sends
/// no `SELECT` to a cluster, so `/2` would lock in database 0.
#[tokio::test(flavor = "multi_thread")]
async fn query_parameters_fred_would_ignore_and_a_clusters_database_are_refused_before_connecting()
{
    for (url, names) in [
        (|port| format!("redis://127.0.0.1:{port}?db=2"), "`db`"),
        (
            |port| format!("redis://127.0.0.1:{port}?node=127.0.0.1:{port}"),
            "`node`",
        ),
        (
            |port| format!("redis-cluster://127.0.0.1:{port}?nodes=127.0.0.1:{port}"),
            "`nodes`",
        ),
        (
            |port| format!("redis-sentinel://127.0.0.1:{port}?sentinelservicename=m"),
            "`sentinelservicename`",
        ),
        // A cluster has database 0 only, and fred selects none on a cluster.
        (
            |port| format!("redis-cluster://127.0.0.1:{port}/2?node=127.0.0.1:{port}"),
            "`/2`",
        ),
    ] as [(fn(u16) -> String, &str); 5]
    {
        let error = refused_without_connecting(url).await;
        assert!(
            matches!(&error, LockError::InvalidOption { option: "url", reason }
                if reason.contains(names)),
            "{error:?}"
        );
    }
}

/// The database is the URL's path: two clients whose URLs name database 2, one by its
/// path and one by a `?db=2` (refused, above), never take locks where the other does
/// not look. Here the path's client holds a lock and a client of database 0 sees it
/// free, as it should: the databases are apart.
#[tokio::test(flavor = "multi_thread")]
async fn the_database_of_the_urls_path_is_where_the_locks_are() {
    let server = common::RedisServer::start();
    let in_2 = LockClient::connect(&server.database_url(2)).await.unwrap();
    let in_0 = LockClient::connect(&server.url()).await.unwrap();
    let name = common::unique("db-path");
    let held = in_2.lock(&name).await.unwrap();
    let apart = in_0.lock(&name).try_now().await.unwrap();
    let apart = apart.expect("database 0 is apart: the lock is free there");
    let again = LockClient::connect(&server.database_url(2)).await.unwrap();
    assert!(
        again.lock(&name).try_now().await.unwrap().is_none(),
        "another client of database 2 finds the lock held"
    );
    held.unlock().await.unwrap();
    apart.unlock().await.unwrap();
    for client in [in_2, in_0, again] {
        client.shutdown().await;
    }
}

/// What `MONITOR` on `server` shows from now on, line by line (`<time> [<db>
/// <addr>] "COMMAND" ...`), until the returned flag is set and one more line comes.
fn monitor(
    server: &common::RedisServer,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::io::BufRead;
    let mut reader = common::server::send(server.port, &["MONITOR"]).unwrap();
    let mut ok = String::new();
    reader.read_line(&mut ok).unwrap();
    assert_eq!(ok.trim_end(), "+OK");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (seen, done) = (lines.clone(), stop.clone());
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            seen.lock().unwrap().push(line);
        }
    });
    (lines, stop)
}

/// A hold of one kind taken on `client`, boxed so that one scenario serves every kind.
type Take = fn(&LockClient, &str) -> BoxFuture<Box<dyn Held>>;
type BoxFuture<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = holdlock::Result<T>> + Send>>;

fn take_mutex(client: &LockClient, name: &str) -> BoxFuture<Box<dyn Held>> {
    let request = client.lock(name);
    Box::pin(async move { Ok(Box::new(request.await?) as Box<dyn Held>) })
}

fn take_permit(client: &LockClient, name: &str) -> BoxFuture<Box<dyn Held>> {
    let request = client.semaphore(name, 1).acquire();
    Box::pin(async move { Ok(Box::new(request.await?) as Box<dyn Held>) })
}

/// Pub/sub is not divided by database, so a release in database 1 is heard by the
/// waiters of the same name in database 2 (docs/deployments.md): each costs them at
/// worst one attempt, which finds their own lock still held, and they go on waiting
/// for their own holder. (A mutex's release names the client it wakes, so the other
/// database's waiters make none; a semaphore's wakes every waiter.)
#[tokio::test(flavor = "multi_thread")]
async fn a_release_in_another_database_costs_a_waiter_at_most_an_attempt() {
    let server = common::RedisServer::start();
    for (kind, take) in [("mutex", take_mutex as Take), ("semaphore", take_permit)] {
        let (announced, attempts) = releases_in_another_database(&server, take).await;
        println!(
            "{kind}: {attempts} attempts in database 2 for {announced} releases announced in database 1"
        );
        if kind == "mutex" {
            assert_eq!(attempts, 0, "a mutex's release names the client it wakes");
        }
    }
}

/// Runs [`a_release_in_another_database_costs_a_waiter_at_most_an_attempt`] for one
/// kind: how many releases database 1 announced, and how many attempts database 2's
/// waiters made meanwhile.
async fn releases_in_another_database(server: &common::RedisServer, take: Take) -> (usize, usize) {
    let name = common::unique("db-wake");
    // A lease long enough that no renewal falls in the window.
    let holder = common::client_with_lease(&server.database_url(2), Duration::from_secs(600)).await;
    let held = take(&holder, &name).await.unwrap();
    let waiting = LockClient::connect(&server.database_url(2)).await.unwrap();
    const WAITERS: usize = 3;
    let waits: Vec<_> = (0..WAITERS)
        .map(|_| {
            let request = take(&waiting, &name);
            tokio::spawn(async move { request.await?.unlock().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let elsewhere = LockClient::connect(&server.database_url(1)).await.unwrap();
    let waiting_elsewhere = LockClient::connect(&server.database_url(1)).await.unwrap();

    // A release publishes only when the lock has waiters: in database 1, each round
    // one client holds and another waits, so that the release is announced.
    let (lines, stop) = monitor(server);
    const ROUNDS: usize = 5;
    for _ in 0..ROUNDS {
        let other = take(&elsewhere, &name).await.unwrap();
        let request = take(&waiting_elsewhere, &name);
        let wait = tokio::spawn(async move { request.await?.unlock().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        other.unlock().await.unwrap();
        wait.await.unwrap().unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = server.command(&["PING"]);
    let lines = lines.lock().unwrap().clone();
    let announced = lines
        .iter()
        .filter(|line| {
            line.contains(" [1 lua] \"publish\"") || line.contains(" [1 lua] \"spublish\"")
        })
        .count();
    assert!(
        announced >= ROUNDS,
        "the releases in database 1 were announced: {lines:#?}"
    );
    let attempts: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains(" [2 ") && line.contains("\"EVALSHA\""))
        .collect();
    assert!(
        attempts.len() <= WAITERS * announced,
        "at most an attempt per waiter and announced release: {attempts:#?}"
    );

    assert!(waits.iter().all(|wait| !wait.is_finished()), "they wait on");
    held.unlock().await.unwrap();
    for wait in waits {
        let done = tokio::time::timeout(Duration::from_secs(10), wait).await;
        done.expect("woken by their own release").unwrap().unwrap();
    }
    for client in [holder, waiting, elsewhere, waiting_elsewhere] {
        client.shutdown().await;
    }
    (announced, attempts.len())
}

/// Without TLS built in, fred would connect to a `rediss://` URL in plaintext and
/// send `AUTH` with the password in the clear. (CI builds with every feature, so this
/// runs in a build of its own: `cargo test --test urls`.)
#[cfg(not(feature = "tls-rustls"))]
#[tokio::test(flavor = "multi_thread")]
async fn tls_schemes_without_the_tls_feature_are_refused_before_connecting() {
    for scheme in ["rediss", "rediss-cluster", "rediss-sentinel", "valkeys"] {
        let error = refused_without_connecting(|port| {
            format!("{scheme}://:pa55word@127.0.0.1:{port}?sentinelServiceName=m")
        })
        .await;
        assert!(
            matches!(&error, LockError::InvalidOption { option: "url", reason }
                if reason.contains("tls-rustls")),
            "{scheme}: {error:?}"
        );
    }
}

/// URLs whose passwords hold characters that delimit parts of a URL, with the
/// passwords in each.
const TRICKY_URLS: [(&str, &[&str]); 14] = [
    ("redis://user:pa/ss@127.0.0.1:6379", &["pa/ss"]),
    ("redis://:p?w@127.0.0.1:1", &["p?w"]),
    ("redis://:p#w@127.0.0.1:1", &["p#w"]),
    ("redis://:p@w@127.0.0.1:1", &["p@w"]),
    ("redis://u:p:w@127.0.0.1:1", &["p:w"]),
    ("redis://u:12?34@127.0.0.1:1", &["12?34"]),
    ("redis://u:a/b?c#d:e@f@127.0.0.1:1/0", &["a/b?c#d:e@f"]),
    ("redis://u:p%2Fw%40x@127.0.0.1:1", &["p%2Fw%40x"]),
    ("rediss://u:s3cret@127.0.0.1:1", &["s3cret"]),
    (
        "redis-sentinel://u:pw-1@127.0.0.1:1?sentinelServiceName=m&sentinelPassword=pw-2",
        &["pw-1", "pw-2"],
    ),
    (
        "redis-sentinel://u:pw/1@127.0.0.1:1?sentinelServiceName=m&sentinelPassword=pw@2",
        &["pw/1", "pw@2"],
    ),
    (
        "redis-sentinel://127.0.0.1:1?sentinelServiceName=m&sentinelPassword=pw#2&node=h:2",
        &["pw#2"],
    ),
    ("user:pw/1@127.0.0.1:1", &["pw/1"]),
    ("::pw?1@127.0.0.1:1", &["pw?1"]),
];

#[test]
fn builder_debug_never_shows_a_password() {
    for (url, passwords) in TRICKY_URLS {
        let shown = format!("{:?}", LockClient::builder(url));
        assert!(shown.contains("***"), "{url}: {shown}");
        for password in passwords {
            assert!(!shown.contains(password), "{url}: {shown}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_for_tricky_urls_never_show_a_password() {
    for (url, passwords) in TRICKY_URLS {
        if url.contains("u:12?34@") {
            // fred reads this one as host `u`, port 12 (and no password): tests
            // connect to loopback only.
            continue;
        }
        // Each is refused before connecting, or by a port where nothing listens.
        let built = LockClient::builder(url)
            .connect_timeout(Duration::from_millis(200))
            .build()
            .await;
        let Err(error) = built else {
            panic!("{url}: connected");
        };
        let shown = format!("{error} {error:?}");
        for password in passwords {
            assert!(!shown.contains(password), "{url}: {shown}");
        }
    }
}

/// A connection refused (nothing listens on the port) fails a client of one server at
/// once, and a cluster client only at its connect timeout: a cluster's primary is down
/// for a moment in every restart, and `build()` tries again meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_fails_one_server_at_once_and_a_cluster_at_its_timeout() {
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap()
        .port();
    let timeout = Duration::from_secs(2);
    for (url, cluster) in [
        (format!("redis://127.0.0.1:{port}"), false),
        (format!("redis-cluster://127.0.0.1:{port}"), true),
    ] {
        let started = std::time::Instant::now();
        let built = LockClient::builder(&url)
            .connect_timeout(timeout)
            .build()
            .await;
        let took = started.elapsed();
        assert!(built.is_err(), "{url}: connected");
        match cluster {
            false => assert!(took < timeout / 4, "{url}: failed after {took:?}"),
            true => assert!(took > timeout / 2, "{url}: failed after {took:?}"),
        }
    }
}

/// A refused first connection says where it tried and why, as the system says it, with
/// the password hidden: not fred's debug text of the I/O error.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_names_the_address_and_the_reason() {
    // A port that was free a moment ago: nothing listens there now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("redis://:s3cret@127.0.0.1:{port}");
    let error = LockClient::builder(&url)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect_err("nothing listens there");
    let LockError::Connect { url: tried, reason } = &error else {
        panic!("not a connect error: {error:?}");
    };
    assert_eq!(tried, &format!("redis://:***@127.0.0.1:{port}"));
    assert!(reason.contains("refused"), "{reason}");
    let shown = error.to_string();
    assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("Os {"),
        "{shown}"
    );
    assert!(error.is_redis());
}
