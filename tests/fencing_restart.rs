//! Fencing tokens never go backwards when Redis loses its memory: a restart without
//! persistence, or a failover to a replica that missed the latest acquisitions.
//!
//! All servers here run on one machine, so they share one clock: these tests show that
//! tokens follow the clock once the token state is gone, not what happens when server
//! clocks disagree (see docs/guarantees.md for that assumption).

mod common;

use common::RedisServer;
use holdlock::{LockClient, LockError, LockGuard, fence};

async fn fenced_client(server: &RedisServer) -> LockClient {
    LockClient::builder(server.url())
        .fencing(true)
        .build()
        .await
        .unwrap()
}

/// Takes and releases `name` `rounds` times (each with a nested hold, which must share
/// the token) and returns the tokens, checking that they strictly increase.
async fn take_and_release(client: &LockClient, name: &str, rounds: usize) -> Vec<u64> {
    let mut tokens = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let guard = client.lock(name).await.unwrap();
        let nested = client.lock(name).await.unwrap();
        assert_eq!(nested.fencing_token(), guard.fencing_token());
        tokens.push(guard.fencing_token().expect("a fenced client draws tokens"));
        nested.unlock().await.unwrap();
        guard.unlock().await.unwrap();
    }
    assert_increasing(&tokens);
    tokens
}

/// Takes `name` and keeps it, adding its token to `seen` once `server` shows it.
async fn take_and_hold(
    client: &LockClient,
    server: &RedisServer,
    name: &str,
    seen: &mut Vec<u64>,
) -> LockGuard {
    let guard = client.lock(name).await.unwrap();
    let token = guard.fencing_token().unwrap();
    assert!(remembered_tokens(server, name).contains(&token));
    seen.push(token);
    guard
}

/// Takes `name` a few more times through `client` (the lock must be free there) and
/// checks that every token in `seen` was smaller.
///
/// The tests drop their clients rather than shut them down: after a server restart
/// fred's `QUIT` sometimes waits out the whole command timeout (5 s).
async fn take_again(client: &LockClient, name: &str, mut seen: Vec<u64>) {
    seen.extend(take_and_release(client, name, 3).await);
    assert_increasing(&seen);
}

fn assert_increasing(tokens: &[u64]) {
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "not strictly increasing: {tokens:?}"
    );
}

/// Every value a server keeps about `name`'s tokens (the held lock's `token` field and
/// the token key), parsed; empty when it remembers none.
fn remembered_tokens(server: &RedisServer, name: &str) -> Vec<u64> {
    [
        server.query(&["HGET", &common::key(name), "token"]),
        server.query(&["GET", &common::token_key(name)]),
    ]
    .into_iter()
    .filter_map(|reply| reply.ok()?.parse().ok())
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_increase_across_a_restart_without_persistence() {
    let mut server = RedisServer::start();
    let client = fenced_client(&server).await;
    let other = fenced_client(&server).await;
    let name = common::unique("restart");
    let mut seen = take_and_release(&client, &name, 5).await;
    // Held by another client when the server goes down.
    let _held = take_and_hold(&other, &server, &name, &mut seen).await;

    server.restart();
    assert_eq!(
        server.query(&["DBSIZE"]).as_deref(),
        Ok(":0"),
        "memory lost"
    );

    // The same client reconnects by itself; the lock is free on the fresh server.
    take_again(&client, &name, seen).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_increase_across_a_failover_that_lost_the_latest_acquisitions() {
    let master = RedisServer::start();
    let replica = master.start_replica();
    let on_master = fenced_client(&master).await;
    let name = common::unique("failover");

    // Replicated: tokens and a held lock reach the replica.
    let mut seen = take_and_release(&on_master, &name, 3).await;
    let guard = take_and_hold(&on_master, &master, &name, &mut seen).await;
    master.wait_replicated(&replica);
    assert_eq!(
        remembered_tokens(&replica, &name).first(),
        seen.last(),
        "replication carries the held token"
    );
    guard.unlock().await.unwrap();
    master.wait_replicated(&replica);

    // The cut: from here on nothing the old master writes reaches the replica. These
    // acquisitions are the ones a failover loses; the last is still held.
    replica.promote();
    let mut lost = take_and_release(&on_master, &name, 3).await;
    let _held = take_and_hold(&on_master, &master, &name, &mut lost).await;
    let on_replica = remembered_tokens(&replica, &name);
    assert!(
        on_replica.iter().all(|&token| token < lost[0]),
        "the replica must lack every token after the cut: {on_replica:?} vs {lost:?}"
    );
    seen.extend(lost);

    // Clients move to the promoted replica.
    let on_new_master = fenced_client(&replica).await;
    take_again(&on_new_master, &name, seen).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_register_written_before_a_restart_accepts_the_first_holder_after_it() {
    // The lock server restarts; the protected register lives on a server that does not.
    let mut locks = RedisServer::start();
    let registers = RedisServer::start();
    let resource = LockClient::connect(&registers.url()).await.unwrap();
    let register = common::unique("register");
    let name = common::unique("register-lock");

    let before = fenced_client(&locks).await;
    let earlier = take_and_release(&before, &name, 3).await;
    let old_guard = before.lock(&name).await.unwrap();
    let old_token = old_guard.fencing_token().unwrap();
    assert!(earlier.iter().all(|&token| token < old_token));
    fence::set(&resource, &register, "before the restart", old_token)
        .await
        .unwrap();

    locks.restart();

    let after = fenced_client(&locks).await;
    let new_guard = after.lock(&name).await.unwrap();
    let new_token = new_guard.fencing_token().unwrap();
    fence::set(&resource, &register, "after the restart", new_token)
        .await
        .expect("the first holder after the restart may write");
    // The holder from before the restart (its hold died with the server) is refused.
    match fence::set(&resource, &register, "late", old_token).await {
        Err(LockError::StaleToken { presented, newest }) => {
            assert_eq!((presented, newest), (old_token, new_token));
        }
        other => panic!("the late write was not refused: {other:?}"),
    }
    let stored = fence::get(&resource, &register).await.unwrap().unwrap();
    assert_eq!(
        (stored.value.as_str(), stored.token),
        ("after the restart", new_token)
    );
    drop((old_guard, new_guard));
}

/// The harness this file relies on: a server that saves (as Redis 6.2's primary does
/// for a replica's first sync) keeps its `dump.rdb` to itself, so a server started
/// after it, or restarted, starts with no keys of another's. (It saved into the crate
/// root, where every later server loaded it: a restart here then kept a key.)
#[test]
fn a_saved_dump_stays_with_the_server_that_saved_it() {
    let saver = RedisServer::start();
    assert_eq!(saver.command(&["SET", "saved", "1"]).as_deref(), Ok("+OK"));
    assert_eq!(saver.command(&["SAVE"]).as_deref(), Ok("+OK"));
    let mut later = RedisServer::start();
    assert_eq!(later.query(&["DBSIZE"]).as_deref(), Ok(":0"));
    later.restart();
    assert_eq!(later.query(&["DBSIZE"]).as_deref(), Ok(":0"));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/dump.rdb");
    assert!(!std::path::Path::new(root).exists(), "{root} was written");
}
