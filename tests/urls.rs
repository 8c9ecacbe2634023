//! Client URLs: a scheme fred does not know, a TLS scheme in a build without TLS, or a
//! query parameter fred would ignore, is refused before anything connects (fred would
//! read the first as `redis://`, the second as plaintext, sending the password in the
//! clear, and connect as if the third were not written); and no password shows in a
//! builder's `Debug` output or an error, whatever characters it holds.

mod common;

use std::time::Duration;

use holdlock::{LockClient, LockError};
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
/// connect to its host alone.
#[tokio::test(flavor = "multi_thread")]
async fn query_parameters_fred_would_ignore_are_refused_before_connecting() {
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
    ] as [(fn(u16) -> String, &str); 4]
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
