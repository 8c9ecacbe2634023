//! The engine's recovery paths, each under one fault injected exactly where it hurts by
//! a proxy between the client and a throwaway server (`common::proxy`): the reply of an
//! acquire, of a release or of a renewal lost with its connection; `NOSCRIPT` answered
//! once, and for good; fred's connection task ended by a redirection it cannot follow.

mod common;

use std::time::Duration;

use fred::interfaces::{ClientLike, KeysInterface};
use holdlock::{LockClient, LockError};

use common::RedisServer;
use common::proxy::{Fault, Proxy, is_with};

/// A server, a proxy in front of it, a client of holdlock's through the proxy (with
/// `lease`), and a plain client straight to the server to look with.
async fn behind_a_proxy(
    lease: Duration,
) -> (RedisServer, Proxy, LockClient, fred::clients::Client) {
    common::trace();
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port);
    let client = common::client_with_lease(&proxy.url(), lease).await;
    let direct = common::raw(&server.url()).await;
    // Every script is loaded (a take, a re-entry, both releases): the faults below
    // strike `EVALSHA`s that run.
    let warm = common::unique("warm");
    let outer = client.lock(&warm).await.unwrap();
    client.lock(&warm).await.unwrap().unlock().await.unwrap();
    outer.unlock().await.unwrap();
    (server, proxy, client, direct)
}

/// Loses the reply of the next script naming `name`'s key, with its connection.
fn lose_the_next_reply_on(proxy: &Proxy, name: &str) {
    let key = common::key(name);
    proxy.arm(1, Fault::LoseReply, move |command| {
        is_with(command, "EVALSHA", &key)
    });
}

/// An acquire that ran but whose reply was lost is found out by reading the owner's
/// count, and its grant completed: `lock()` returns a guard, and Redis counts the hold
/// once. A fresh take sets the owner's count (sent again, it would set the same), but
/// a re-entry raises it: sent again blindly, it would count the hold twice, and the
/// lock would outlive its last guard.
#[tokio::test(flavor = "multi_thread")]
async fn an_acquire_whose_reply_is_lost_is_settled_and_held_once() {
    let (_server, proxy, client, direct) = behind_a_proxy(Duration::from_secs(30)).await;
    let name = common::unique("lost-acquire");
    lose_the_next_reply_on(&proxy, &name);
    let outer = client.lock(&name).await.unwrap();
    assert_eq!(proxy.fired(), 1, "the take's reply was lost");
    let owner = outer.owner().to_owned();
    assert_eq!(common::hold_count(&direct, &name, &owner).await, Some(1));

    lose_the_next_reply_on(&proxy, &name);
    let inner = client.lock(&name).await.unwrap();
    assert_eq!(proxy.fired(), 2, "the re-entry's reply was lost");
    assert_eq!(common::hold_count(&direct, &name, &owner).await, Some(2));

    assert!(!outer.is_lost() && !inner.is_lost());
    inner.unlock().await.unwrap();
    assert_eq!(common::hold_count(&direct, &name, &owner).await, Some(1));
    outer.unlock().await.unwrap();
    let left: u32 = direct.exists(common::key(&name)).await.unwrap();
    assert_eq!(left, 0, "the last release freed the lock");
}

/// A release that ran but whose reply was lost: `unlock()` answers with what settling
/// found (it ran: `Ok`), and the release ran once. With a re-entered hold, a second
/// run would have freed the lock under the outer guard.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_whose_reply_is_lost_answers_with_the_settlement_and_runs_once() {
    let (_server, proxy, client, direct) = behind_a_proxy(Duration::from_secs(30)).await;
    let name = common::unique("lost-release");
    let outer = client.lock(&name).await.unwrap();
    let inner = client.lock(&name).await.unwrap();
    let owner = outer.owner().to_owned();
    assert_eq!(common::hold_count(&direct, &name, &owner).await, Some(2));

    lose_the_next_reply_on(&proxy, &name);
    inner.unlock().await.unwrap();
    assert_eq!(proxy.fired(), 1, "the release's reply was lost");
    assert_eq!(common::hold_count(&direct, &name, &owner).await, Some(1));
    assert!(!outer.is_lost());

    // The last release, its reply lost too: `Ok`, and the lock is free.
    lose_the_next_reply_on(&proxy, &name);
    outer.unlock().await.unwrap();
    assert_eq!(proxy.fired(), 2);
    let left: u32 = direct.exists(common::key(&name)).await.unwrap();
    assert_eq!(left, 0, "the lock is free");
}

/// Renewals are idempotent, so a lost reply costs a hold nothing. Once: fred writes
/// the renewal again on the new connection, and the watchdog never hears of it. Every
/// one of fred's three writes lost: the renewal fails, the hold is warned at risk, and
/// the watchdog sends it again before the lease runs out. The hold is neither lost nor
/// expired in Redis.
#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_whose_reply_is_lost_is_sent_again_within_the_lease() {
    let lease = Duration::from_millis(1500);
    let (_server, proxy, client, direct) = behind_a_proxy(lease).await;
    let name = common::unique("lost-renewal");
    let guard = client.lock(&name).await.unwrap();
    // The next script on the key is the first renewal (a third of the lease from now).
    lose_the_next_reply_on(&proxy, &name);
    tokio::time::sleep(lease).await;
    assert_eq!(proxy.fired(), 1, "a renewal's reply was lost");
    assert!(!guard.is_at_risk(), "fred wrote the renewal again");

    let key = common::key(&name);
    proxy.arm(3, Fault::LoseReply, move |command| {
        is_with(command, "EVALSHA", &key)
    });
    tokio::time::sleep(lease * 2).await;
    assert_eq!(
        proxy.fired(),
        4,
        "each of a renewal's writes lost its reply"
    );
    assert!(guard.is_at_risk(), "the failed renewal was heard of");
    assert!(!guard.is_lost(), "the hold was given up");
    let ttl: i64 = direct.pttl(common::key(&name)).await.unwrap();
    assert!(ttl > 0, "PTTL {ttl}: the lease ran out");
    guard.unlock().await.unwrap();
}

/// Whether `command` is a script given more than one lock: a batch. A batch declares
/// its first lock's two keys and names every lock among its arguments, after one of
/// its own: the lease of every lock (digits) or the publish mode (see
/// `lua/acquire_many.lua`, `lua/release_many.lua`); two locks make 5 arguments. A lone
/// call of the mutex sends its owner id first.
fn is_batch(command: &common::proxy::Command) -> bool {
    let keys = command
        .get(2)
        .and_then(|keys| std::str::from_utf8(keys).ok()?.parse().ok());
    let arguments = command.len().saturating_sub(3 + keys.unwrap_or(0) as usize);
    let first = command.get(3 + keys.unwrap_or(0) as usize);
    let own = first
        .is_some_and(|first| first.iter().all(u8::is_ascii_digit) || first.ends_with(b"publish"));
    command[0].eq_ignore_ascii_case(b"EVALSHA") && keys == Some(2u32) && arguments >= 5 && own
}

/// Many tasks take and release locks of their own at once, so that both go out in
/// batches; the reply of one acquisition batch and of one release batch is lost. Each
/// lock in them is settled on its own: every `lock()` returns a guard whose hold Redis
/// counts once, every `unlock()` answers `Ok`, and nothing is left held.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_whose_reply_is_lost_is_settled_lock_by_lock() {
    let (server, proxy, client, direct) = behind_a_proxy(Duration::from_secs(30)).await;
    // The batch scripts loaded.
    let warm: Vec<String> = (0..64)
        .map(|i| common::unique(&format!("warm-{i}")))
        .collect();
    common::unlock_each_at_once(common::lock_each_at_once(&client, &warm).await).await;

    let names: Vec<String> = (0..64)
        .map(|i| common::unique(&format!("batch-{i}")))
        .collect();
    proxy.arm(1, Fault::LoseReply, is_batch);
    let guards = common::lock_each_at_once(&client, &names).await;
    assert_eq!(proxy.fired(), 1, "an acquisition batch's reply was lost");
    for guard in &guards {
        assert_eq!(
            common::hold_count(&direct, guard.name(), guard.owner()).await,
            Some(1)
        );
    }
    proxy.arm(1, Fault::LoseReply, is_batch);
    common::unlock_each_at_once(guards).await;
    assert_eq!(proxy.fired(), 2, "a release batch's reply was lost");
    let left = server.array(&["KEYS", "*batch-*"]).unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// `NOSCRIPT` means the script did not run: it is loaded and sent again, and runs once.
#[tokio::test(flavor = "multi_thread")]
async fn a_script_the_server_forgot_is_loaded_again_and_runs_once() {
    let (server, proxy, client, direct) = behind_a_proxy(Duration::from_secs(30)).await;
    let name = common::unique("noscript-once");
    let key = common::key(&name);
    let loads = server.command_calls("script|load");
    proxy.arm(1, noscript(), move |command| {
        is_with(command, "EVALSHA", &key)
    });
    let guard = client.lock(&name).await.unwrap();
    assert_eq!(proxy.fired(), 1);
    assert_eq!(server.command_calls("script|load"), loads + 1);
    assert_eq!(
        common::hold_count(&direct, &name, guard.owner()).await,
        Some(1)
    );
    guard.unlock().await.unwrap();
}

/// A server that answers `NOSCRIPT` to every try (the cache flushed again after each
/// load) does not keep a call loading forever: it fails after three loads, typed, and
/// nothing is held.
#[tokio::test(flavor = "multi_thread")]
async fn a_script_the_server_never_keeps_fails_after_three_loads() {
    let (server, proxy, client, direct) = behind_a_proxy(Duration::from_secs(30)).await;
    let name = common::unique("noscript-always");
    let key = common::key(&name);
    let loads = server.command_calls("script|load");
    proxy.arm(usize::MAX, noscript(), move |command| {
        is_with(command, "EVALSHA", &key)
    });
    let failed = tokio::time::timeout(Duration::from_secs(5), client.lock(&name))
        .await
        .expect("the call ends");
    match failed {
        Err(LockError::Redis(error)) => {
            assert!(error.details().contains("NOSCRIPT"), "{error}")
        }
        other => panic!("expected NOSCRIPT, got {other:?}"),
    }
    assert_eq!(
        proxy.fired(),
        4,
        "the first try and one after each of 3 loads"
    );
    assert_eq!(server.command_calls("script|load"), loads + 3);
    let left: u32 = direct.exists(common::key(&name)).await.unwrap();
    assert_eq!(left, 0);
    proxy.disarm();
    client.lock(&name).await.unwrap().unlock().await.unwrap();
}

fn noscript() -> Fault {
    Fault::Answer(b"-NOSCRIPT No matching script. Please use EVAL.\r\n".to_vec())
}

/// fred ends a client's connection task for good when a command sent at most once is
/// answered `ASK` (it has no attempt left to follow it with). holdlock starts the task
/// again: the client's own commands and the application's (`LockClient::redis`) go on.
/// Here a one-node cluster announces the proxy's port, so that every connection goes
/// through it, and the proxy answers one such command `ASK`.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_task_fred_ends_is_started_again() {
    let proxy = Proxy::listen();
    let announced = proxy.port.to_string();
    let node = RedisServer::start_with(move |port| {
        let mut arguments = common::server::cluster_node_args(port);
        arguments.extend(["--cluster-announce-ip".into(), "127.0.0.1".into()]);
        arguments.extend(["--cluster-announce-port".into(), announced.clone()]);
        arguments
    });
    proxy.forward_to(node.port);
    // Redis 6.2 has no ADDSLOTSRANGE: every slot by name there.
    let slots: Vec<String> = (0..16384).map(|slot: u32| slot.to_string()).collect();
    let mut add: Vec<&str> = vec!["CLUSTER", "ADDSLOTS"];
    add.extend(slots.iter().map(String::as_str));
    if !common::server::server_version().before_redis_7() {
        add = vec!["CLUSTER", "ADDSLOTSRANGE", "0", "16383"];
    }
    assert_eq!(node.command(&add).as_deref(), Ok("+OK"));
    common::wait_until("the one-node cluster", Duration::from_secs(10), || {
        node.query(&["CLUSTER", "INFO"])
            .is_ok_and(|info| info.contains("cluster_state:ok"))
    });
    let client = LockClient::connect(&format!("redis-cluster://127.0.0.1:{}", proxy.port))
        .await
        .unwrap();
    let key = common::unique("asked");
    let slot = fred::util::redis_keyslot(key.as_bytes());
    let ask = format!("-ASK {slot} 127.0.0.1:{}\r\n", proxy.port);
    proxy.arm(1, Fault::Answer(ask.into_bytes()), {
        let key = key.clone();
        move |command| is_with(command, "GET", &key)
    });
    let once = fred::types::config::Options {
        max_attempts: Some(1),
        ..Default::default()
    };
    let asked: Result<Option<String>, _> = client.redis().with_options(&once).get(&key).await;
    assert!(asked.is_err(), "{asked:?}");
    assert_eq!(proxy.fired(), 1);

    // Commands queued at the moment the task ends are cancelled by fred (`Canceled`);
    // once the task runs again, commands are answered. Without a new task, every
    // command of the client would wait out its timeout.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let within = Duration::from_secs(3);
    let value: Option<String> = tokio::time::timeout(within, client.redis().get(&key))
        .await
        .expect("the application's command is answered")
        .unwrap();
    assert_eq!(value, None);
    let name = common::unique("after-ask");
    let guard = tokio::time::timeout(within, client.lock(&name))
        .await
        .expect("lock() is answered")
        .unwrap();
    assert!(
        tokio::time::timeout(within, client.is_locked(&name))
            .await
            .expect("is_locked() is answered")
            .unwrap()
    );
    guard.unlock().await.unwrap();
    assert!(client.redis().is_connected());
}
