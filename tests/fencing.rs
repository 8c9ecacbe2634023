//! Fencing tokens: strictly increasing per name, and checked by `holdlock::fence`.

mod common;

use std::time::Duration;

use holdlock::{LockClient, LockError, LockOptions, fence};

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_holders_late_write_is_rejected() {
    let client = common::client().await;
    let name = common::unique("paused");
    let resource = common::unique("resource");

    // Holder 1: a fixed 1 s lease, so nothing renews it while it "pauses".
    let fixed = LockOptions::fenced().lease(Duration::from_secs(1));
    let first = client.lock(&name).options(fixed).await.unwrap().unwrap();
    let first_token = first.fencing_token().unwrap();

    // Holder 1 pauses for 2 s; meanwhile its lease expires and holder 2 takes over.
    let second_client = common::client().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = second_client
        .lock(&name)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let second_token = second.fencing_token().unwrap();
    assert!(second_token > first_token);
    fence::set_with(&second, &resource, "written by holder 2")
        .await
        .unwrap();

    // Holder 1 wakes up and writes: refused, and nothing changes.
    let late = fence::set(&client, &resource, "late write by holder 1", first_token).await;
    match late {
        Err(LockError::StaleToken { presented, newest }) => {
            assert_eq!((presented, newest), (first_token, second_token));
        }
        other => panic!("the late write was not refused: {other:?}"),
    }
    let stored = fence::get(&client, &resource).await.unwrap().unwrap();
    assert_eq!(stored.value, "written by holder 2");
    assert_eq!(stored.token, second_token);
    assert!(first.is_lost());
    second.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_read_keeps_a_read_modify_write_whole() {
    let client = common::client().await;
    let name = common::unique("rmw");
    let counter = common::unique("counter");
    let fixed = LockOptions::fenced().lease(Duration::from_millis(300));

    // Holder 1 reads the counter, then stalls past its lease before writing.
    let first = client.lock(&name).options(fixed).await.unwrap().unwrap();
    assert_eq!(fence::read_with(&first, &counter).await.unwrap(), None);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Holder 2 reads, and only then does holder 1's late write arrive: it is refused,
    // although holder 2 has not written yet (a plain read would have let it land and
    // holder 2's write would then have lost holder 1's update).
    let second = client
        .lock(&name)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fence::read_with(&second, &counter).await.unwrap(), None);
    let late = fence::set_with(&first, &counter, "1").await;
    assert!(
        matches!(late, Err(LockError::StaleToken { .. })),
        "{late:?}"
    );
    fence::set_with(&second, &counter, "1").await.unwrap();
    assert_eq!(
        fence::read_with(&second, &counter)
            .await
            .unwrap()
            .as_deref(),
        Some("1")
    );
    assert!(matches!(
        fence::read_with(&first, &counter).await,
        Err(LockError::StaleToken { .. })
    ));
    assert_eq!(
        fence::newest_token(&client, &counter).await.unwrap(),
        second.fencing_token().unwrap()
    );
    second.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_increase_across_holders_expiries_force_unlocks_and_restarts() {
    let name = common::unique("tokens");
    let mut seen = Vec::new();
    for round in 0..3 {
        // A new client each round: a restarted process.
        let client = LockClient::builder(common::url())
            .fencing(true)
            .build()
            .await
            .unwrap();
        let guard = client.lock(&name).await.unwrap();
        seen.push(guard.fencing_token().unwrap());
        let nested = client.lock(&name).await.unwrap();
        assert_eq!(
            nested.fencing_token(),
            guard.fencing_token(),
            "nested holds share the token"
        );
        drop(nested);
        match round {
            0 => guard.unlock().await.unwrap(),
            1 => {
                assert!(client.force_unlock(&name).await.unwrap());
                drop(guard);
            }
            _ => {
                let short = LockOptions::fenced().lease(Duration::from_millis(200));
                drop(guard);
                tokio::time::sleep(Duration::from_millis(100)).await;
                let expiring = client.lock(&name).options(short).await.unwrap().unwrap();
                seen.push(expiring.fencing_token().unwrap());
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        client.shutdown().await;
    }
    let client = LockClient::connect(&common::url()).await.unwrap();
    let last = client
        .lock(&name)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    seen.push(last.fencing_token().unwrap());
    assert!(
        seen.windows(2).all(|pair| pair[0] < pair[1]),
        "not strictly increasing: {seen:?}"
    );
    let info = client.inspect(&name).await.unwrap().unwrap();
    assert_eq!(info.fencing_token, last.fencing_token());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unfenced_lock_has_no_token_and_fence_rejects_token_zero() {
    let client = common::client().await;
    let guard = client.lock(common::unique("plain")).await.unwrap();
    assert_eq!(guard.fencing_token(), None);
    let resource = common::unique("resource");
    assert!(matches!(
        fence::set_with(&guard, &resource, "x").await,
        Err(LockError::InvalidOption { .. })
    ));
    assert!(matches!(
        fence::set(&client, &resource, "x", 0).await,
        Err(LockError::InvalidOption { .. })
    ));
    assert_eq!(fence::get(&client, &resource).await.unwrap(), None);
    assert_eq!(fence::newest_token(&client, &resource).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn fence_compares_tokens_beyond_lua_numbers_exactly() {
    // u64::MAX - 1 and u64::MAX are the same Lua number (a double).
    let client = common::client().await;
    let resource = common::unique("resource");
    fence::set(&client, &resource, "max", u64::MAX)
        .await
        .unwrap();
    match fence::set(&client, &resource, "older", u64::MAX - 1).await {
        Err(LockError::StaleToken { presented, newest }) => {
            assert_eq!((presented, newest), (u64::MAX - 1, u64::MAX));
        }
        other => panic!("an older token was accepted: {other:?}"),
    }
    assert_eq!(
        fence::newest_token(&client, &resource).await.unwrap(),
        u64::MAX
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_acquire_whose_reply_was_lost_still_gets_its_token() {
    use fred::interfaces::HashesInterface;
    let server = common::RedisServer::start();
    let client = LockClient::builder(server.url())
        .fencing(true)
        .connect_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let name = common::unique("lost-reply");
    client.lock(&name).await.unwrap().unlock().await.unwrap();
    let hgets = server.command_calls("hget");
    // Every command now waits 450 ms: the acquire times out after 300 ms, so the
    // client asks Redis whether it ran (the owner's field, then the hold's token), and
    // those reads are answered after the script has run.
    assert_eq!(server.command(&["CLIENT", "PAUSE", "450"]).unwrap(), "+OK");
    let guard = client.lock(&name).await.unwrap();
    assert!(
        server.command_calls("hget") >= hgets + 2,
        "the acquire's reply was not lost, so this test shows nothing"
    );
    let in_redis: Option<u64> = client
        .redis()
        .hget(common::key(&name).as_str(), "token")
        .await
        .unwrap();
    assert!(in_redis.is_some());
    assert_eq!(guard.fencing_token(), in_redis);
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_token_key_fails_a_fenced_acquire_with_nothing_written() {
    use fred::interfaces::{HashesInterface, KeysInterface};
    let client = common::client().await;
    let name = common::unique("foreign-token");
    let key = common::key(&name);
    let token_key = common::token_key(&name);
    let raw = common::raw(&common::url()).await;
    let _: () = raw
        .hset(token_key.as_str(), ("someone", "else"))
        .await
        .unwrap();

    match client.lock(&name).options(LockOptions::fenced()).await {
        Err(LockError::WrongType { key }) => assert_eq!(key, token_key),
        other => panic!("expected WrongType for the token key, got {other:?}"),
    }
    let exists: i64 = raw.exists(key.as_str()).await.unwrap();
    assert_eq!(exists, 0, "no half-written hold is left behind");
    assert!(!client.is_locked(&name).await.unwrap());
    // The lock itself is free for an unfenced holder.
    let guard = client.lock(&name).try_now().await.unwrap().expect("free");
    guard.unlock().await.unwrap();
}

/// The write side of a read-write lock draws fencing tokens when asked (per call or by
/// a client that fences every lock), rising from writer to writer and above every
/// token before; a nested write hold shares its token. A read lock or a semaphore
/// permit asked for a token is refused with `InvalidOption` naming the option, and
/// takes nothing; a client that fences every lock still takes them, unfenced.
#[tokio::test]
async fn write_locks_draw_tokens_and_shared_holds_refuse_them() {
    let url = common::url();
    let client = common::connect(&url).await;
    let name = common::unique("rw-fenced");
    let mut last = 0;
    for round in 0..5 {
        let writing = client
            .write_lock(&name)
            .options(LockOptions::fenced())
            .await
            .unwrap()
            .expect("free");
        let token = writing
            .fencing_token()
            .expect("a fenced write hold has a token");
        assert!(token > last, "round {round}: {token} after {last}");
        let nested = client.write_lock(&name).await.unwrap();
        assert_eq!(nested.fencing_token(), Some(token), "nested holds share it");
        nested.unlock().await.unwrap();
        writing.unlock().await.unwrap();
        last = token;
    }
    let unfenced = client.write_lock(&name).await.unwrap();
    assert_eq!(unfenced.fencing_token(), None);
    unfenced.unlock().await.unwrap();

    let refused = client.read_lock(&name).options(LockOptions::fenced()).await;
    assert!(
        matches!(&refused, Err(LockError::InvalidOption { option: "fenced", reason }) if reason.contains("read lock")),
        "{refused:?}"
    );
    let semaphore = client.semaphore(name.as_str(), 2);
    let refused = semaphore.acquire().options(LockOptions::fenced()).await;
    assert!(
        matches!(&refused, Err(LockError::InvalidOption { option: "fenced", reason }) if reason.contains("semaphore")),
        "{refused:?}"
    );
    assert_eq!(
        semaphore.available().await.unwrap(),
        2,
        "a refused call took a permit"
    );

    let fencing_all = LockClient::builder(url.as_str())
        .fencing(true)
        .build()
        .await
        .unwrap();
    let writing = fencing_all.write_lock(&name).await.unwrap();
    assert!(writing.fencing_token().unwrap() > last);
    writing.unlock().await.unwrap();
    fencing_all
        .read_lock(&name)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let permit = fencing_all
        .semaphore(name.as_str(), 2)
        .acquire()
        .await
        .unwrap();
    permit.release().await.unwrap();
}
