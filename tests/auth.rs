//! Passwords and ACL users: the documented least-privilege rule is enough for every
//! feature, a user without the prefix gets a clear permission error, and passwords
//! never show in `Debug` output, errors or logs.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use holdlock::{Claim, LockClient, LockError, LockOptions, fence};

use common::RedisServer;

const PASSWORD: &str = "pa55-Wd-never-shown";
const USER_PASSWORD: &str = "us3r-Pw-never-shown";

/// Everything logged in this test binary, at every level, fred's `log` output included.
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(Arc::clone(&logs));
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .try_init()
            .expect("the only subscriber of this binary");
        logs
    })
}

#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A server whose default user needs `PASSWORD` (set once the harness has seen it
/// answer).
fn password_server() -> RedisServer {
    let server = RedisServer::start();
    let set = server.command(&["CONFIG", "SET", "requirepass", PASSWORD]);
    assert_eq!(set.as_deref(), Ok("+OK"));
    server
}

/// The `ACL SETUSER` rule that `docs/deployments.md` gives for a holdlock user, for
/// `user` with `password`, as command arguments.
fn documented_rule(user: &str, password: &str) -> Vec<String> {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployments.md"))
        .unwrap();
    let line = docs
        .lines()
        .find(|line| line.starts_with("ACL SETUSER holdlock "))
        .expect("docs/deployments.md gives the ACL rule");
    line.split_whitespace()
        .map(|word| match word {
            "holdlock" => user.to_owned(),
            ">PASSWORD" => format!(">{password}"),
            other => other.to_owned(),
        })
        .collect()
}

/// Creates `user` on `server` (whose default user has no password) with `rule`.
fn set_user(server: &RedisServer, rule: &[String]) {
    let args: Vec<&str> = rule.iter().map(String::as_str).collect();
    assert_eq!(server.command(&args).as_deref(), Ok("+OK"), "{rule:?}");
}

fn user_url(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:{USER_PASSWORD}@127.0.0.1:{}", server.port)
}

#[tokio::test(flavor = "multi_thread")]
async fn passwords_never_show_in_debug_output_errors_or_logs() {
    let logs = logs();
    let server = password_server();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port);
    let mut shown = Vec::new();

    let builder = LockClient::builder(&url).lease(Duration::from_secs(2));
    shown.push(format!("{builder:?}"));
    let client = builder.build().await.unwrap();
    shown.push(format!("{client:?}"));
    let name = common::unique("secret");
    let guard = client.lock(&name).await.unwrap();
    shown.push(format!("{guard:?}"));
    tokio::time::sleep(Duration::from_millis(800)).await; // a renewal or two
    guard.unlock().await.unwrap();

    // A wrong password is refused, saying so, without echoing either password.
    let wrong = format!("redis://:{USER_PASSWORD}@127.0.0.1:{}", server.port);
    let refused = LockClient::builder(&wrong)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect_err("a wrong password was accepted");
    assert!(
        refused.to_string().contains("WRONGPASS"),
        "not clear: {refused}"
    );
    shown.push(format!("{refused} {refused:?}"));
    // So is a bad URL, and a sentinel password in the URL.
    let bad_url = format!("redis://:{PASSWORD}@127.0.0.1:notaport");
    let bad = LockClient::connect(&bad_url).await.unwrap_err();
    shown.push(format!("{bad} {bad:?}"));
    let sentinel = format!(
        "redis-sentinel://:{PASSWORD}@127.0.0.1:1?sentinelServiceName=x&sentinelPassword={USER_PASSWORD}"
    );
    shown.push(format!("{:?}", LockClient::builder(sentinel)));

    client.shutdown().await;
    let logs = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(logs.contains("fred"), "fred's logs were not captured");
    shown.push(logs);
    for text in &shown {
        for secret in [PASSWORD, USER_PASSWORD] {
            assert!(!text.contains(secret), "a password shows in: {text}");
        }
    }
    assert!(shown[0].contains(":***@"), "{}", shown[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_acl_user_with_the_documented_rule_can_do_everything() {
    logs();
    let server = RedisServer::start();
    set_user(&server, &documented_rule("locker", USER_PASSWORD));
    let url = user_url(&server, "locker");
    let client = LockClient::builder(&url)
        .lease(Duration::from_millis(600))
        .build()
        .await
        .unwrap();
    let waiter = LockClient::connect(&url).await.unwrap();
    let name = common::unique("acl");

    // Lock, re-enter, renew, inspect, list, check.
    let guard = client
        .lock_with(&name, LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let nested = client.lock(&name).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await; // past the lease: renewed
    assert!(!guard.is_lost());
    assert!(guard.remaining_ttl().await.unwrap().is_some());
    assert_eq!(
        client.inspect(&name).await.unwrap().unwrap().owners.len(),
        1
    );
    assert_eq!(client.list("test:acl:*").await.unwrap().len(), 1);
    assert!(waiter.is_locked(&name).await.unwrap());
    assert!(waiter.try_lock(&name).await.unwrap().is_none());

    // Fenced writes to a resource under the prefix.
    let resource = format!("{}:data", common::key(&name));
    fence::set_with(&guard, &resource, "v1").await.unwrap();
    assert_eq!(
        fence::get(&client, &resource).await.unwrap().unwrap().value,
        "v1"
    );

    // Waiting: subscribe, release message, wake-up.
    let waiting = {
        let (waiter, name) = (waiter.clone(), name.clone());
        tokio::spawn(async move { waiter.lock(&name).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    nested.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    let taken = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    assert!(client.force_unlock(&name).await.unwrap());
    drop(taken);

    // Once per period, and WAIT (refused for want of replicas, not by the ACL).
    let period = Duration::from_secs(3600);
    match client
        .claim_period(&name, period, SystemTime::now(), LockOptions::new())
        .await
        .unwrap()
    {
        Claim::Won(claim) => claim.complete().await.unwrap(),
        other => panic!("{other:?}"),
    }
    let acknowledged = LockOptions::new().min_replicas(1, Duration::from_millis(20));
    assert!(matches!(
        client
            .lock_with(&common::unique("acl-wait"), acknowledged)
            .await,
        Err(LockError::NotReplicated { .. })
    ));
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_without_the_prefix_gets_a_permission_error() {
    logs();
    let server = RedisServer::start();
    // The documented rule, for other keys and channels.
    let rule: Vec<String> = documented_rule("stranger", USER_PASSWORD)
        .into_iter()
        .map(|word| word.replace("holdlock:*", "other:*"))
        .collect();
    set_user(&server, &rule);
    let client = LockClient::connect(&user_url(&server, "stranger"))
        .await
        .unwrap();
    let name = common::unique("denied");
    let denied = client.lock(&name).await;
    let Err(LockError::PermissionDenied { detail }) = &denied else {
        panic!("not a permission error: {denied:?}");
    };
    assert!(detail.contains("keys"), "unclear: {detail}");
    println!("denied: {}", denied.unwrap_err());

    // Keys but no channels: waiting cannot subscribe.
    let rule: Vec<String> = documented_rule("deaf", USER_PASSWORD)
        .into_iter()
        .filter(|word| !word.starts_with('&'))
        .collect();
    set_user(&server, &rule);
    let deaf = LockClient::connect(&user_url(&server, "deaf"))
        .await
        .unwrap();
    let holder = LockClient::connect(&server.url()).await.unwrap();
    let _held = holder.lock(&name).await.unwrap();
    let waited = deaf.lock_timeout(&name, Duration::from_secs(2)).await;
    assert!(
        matches!(&waited, Err(LockError::PermissionDenied { detail }) if detail.contains("channel")),
        "{waited:?}"
    );
}
