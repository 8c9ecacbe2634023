//! What differs between the server versions `.ci/run` tests (docs/deployments.md,
//! "Servers"), each checked on the server that has the difference and keyed to the
//! version the test server reports (`HOLDLOCK_TEST_SERVER`, `--version`):
//!
//! - Redis 6.2 has no shard channels: releases go out with `PUBLISH`, from Redis 7.0
//!   on (and on every Valkey) with `SPUBLISH`, also for a user whose ACL hides the
//!   server's version (`INFO`), as the documented rule does: holdlock asks the server.
//! - Valkey 9.0 has databases in cluster mode (`cluster-databases`); fred 10 selects
//!   none on a cluster, so holdlock refuses a cluster URL that names one, on every
//!   version, and says why.

mod common;

use std::time::Duration;

use fred::interfaces::ClientLike;
use holdlock::{LockClient, LockError};

use common::RedisServer;
use common::server::server_version;

const USER_PASSWORD: &str = "us3r-Pw-never-shown";

/// The release commands `server` ran since it started: (`publish`, `spublish`).
fn publishes(server: &RedisServer) -> (u64, u64) {
    (
        server.command_calls("publish"),
        server.command_calls("spublish"),
    )
}

/// A holder takes a lock on `client`'s server, a waiter on `client` waits for it, and
/// the holder's release (its lease is a minute long) wakes the waiter within 10 s.
async fn release_wakes_a_waiter(holder: &LockClient, client: &LockClient) {
    let name = common::unique("versions");
    let held = common::lock_as_another_owner(holder, &name).await;
    let waiting = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.lock(&name).await })
    };
    // The waiter has tried once and sleeps until a message (or the lease) wakes it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the waiter got in while it was held"
    );
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter slept through the release")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
}

/// Asserts that `server` was sent releases on the channels its version has.
fn assert_channels_of_the_version(server: &RedisServer) {
    let version = server_version();
    let (plain, shard) = publishes(server);
    if version.before_redis_7() {
        println!("{version}: no shard channels; {plain} PUBLISH");
        assert!(plain > 0, "no PUBLISH on {version}");
        assert_eq!(shard, 0, "SPUBLISH sent to {version}");
    } else {
        println!("{version}: shard channels; {shard} SPUBLISH");
        assert!(shard > 0, "no SPUBLISH on {version}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn releases_go_over_the_channels_the_server_has() {
    let server = RedisServer::start();
    let holder = common::client_with_lease(&server.url(), Duration::from_secs(60)).await;
    let waiter = common::connect(&server.url()).await;
    release_wakes_a_waiter(&holder, &waiter).await;
    assert_channels_of_the_version(&server);
}

/// A user with the documented rule cannot run `INFO`, so fred learns no version; the
/// client asks the server whether it has `SPUBLISH` (before, it took such a server to
/// be 7.0 or later, and every release failed on Redis 6.2 with "Unknown Redis command
/// called from Lua script").
#[tokio::test(flavor = "multi_thread")]
async fn a_user_that_cannot_read_the_version_gets_the_channels_the_server_has() {
    let server = RedisServer::start();
    let rule = common::documented_rule("versionless", USER_PASSWORD);
    let args: Vec<&str> = rule.iter().map(String::as_str).collect();
    assert_eq!(server.command(&args).as_deref(), Ok("+OK"), "{rule:?}");
    let url = format!(
        "redis://versionless:{USER_PASSWORD}@127.0.0.1:{}",
        server.port
    );
    // The rule refuses INFO: the user's connection reports no version.
    let user = common::connect(&url).await;
    assert_eq!(user.redis().server_version(), None, "the rule grants INFO");
    let holder = common::client_with_lease(&url, Duration::from_secs(60)).await;
    release_wakes_a_waiter(&holder, &user).await;
    assert_channels_of_the_version(&server);
}

/// Valkey 9 keeps several databases on a cluster node when `cluster-databases` says
/// so; Redis and Valkey 8 refuse `SELECT` in cluster mode. Either way holdlock refuses
/// a cluster URL with a database, naming the reason: fred 10 would ignore it and lock
/// in database 0.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_url_with_a_database_is_refused_on_every_version() {
    let version = server_version();
    let node = RedisServer::start_with(|port| {
        let mut args = common::server::cluster_node_args(port);
        if version.valkey && version.at_least(9, 0) {
            args.extend(["--cluster-databases".into(), "16".into()]);
        }
        args
    });
    let selected = node.command(&["SELECT", "2"]);
    if version.valkey && version.at_least(9, 0) {
        println!("{version}: SELECT 2 on a cluster node: {selected:?}");
        assert_eq!(selected.as_deref(), Ok("+OK"));
    } else {
        println!("{version}: no databases in cluster mode: {selected:?}");
        assert!(
            selected.as_ref().is_ok_and(|reply| reply.starts_with('-')),
            "{selected:?}"
        );
    }
    for database in ["2", "15"] {
        let url = format!("redis-cluster://127.0.0.1:{}/{database}", node.port);
        let refused = LockClient::connect(&url).await;
        let Err(LockError::InvalidOption { option, reason }) = &refused else {
            panic!("{url}: not refused: {refused:?}");
        };
        assert_eq!(*option, "url");
        assert!(
            reason.contains(&format!("names `/{database}`"))
                && reason.contains("Valkey 9's cluster databases are not supported"),
            "{reason}"
        );
    }
}
