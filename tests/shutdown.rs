//! A clean shutdown leaves nothing of its own in Redis: waits of every kind, cancelled
//! or ended by the shutdown (some just as the lock is handed to them), leave their
//! queues, hand on what reached them, and settle what was in flight, before
//! `shutdown()` returns.

mod common;

use std::time::Duration;

use holdlock::{LockClient, LockOptions};

common::on_every_topology!(
    waits_of_every_kind_leave_nothing_behind_after_a_clean_shutdown,
    waits_cancelled_as_the_lock_is_handed_to_them_leave_nothing_behind,
);

/// The kinds a wait can be for, each taken by `holder` first so that `waiter` waits.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Mutex,
    Fair,
    Write,
    Read,
    Semaphore,
}

const KINDS: [Kind; 5] = [
    Kind::Mutex,
    Kind::Fair,
    Kind::Write,
    Kind::Read,
    Kind::Semaphore,
];

/// Every key holdlock may write for `name` of any kind under `prefix`.
fn every_key(prefix: &str, name: &str) -> Vec<String> {
    let key = format!("{prefix}{{{name}}}");
    [
        "",
        ":clients",
        ":token",
        ":fair",
        ":fair:queue",
        ":fair:alive",
        ":fair:token",
        ":rw",
        ":rw:leases",
        ":rw:token",
        ":sem",
        ":sem:leases",
    ]
    .iter()
    .map(|suffix| format!("{key}{suffix}"))
    .collect()
}

/// The keys of `every_key` that exist.
async fn left_behind(client: &LockClient, prefix: &str, name: &str) -> Vec<String> {
    use fred::interfaces::KeysInterface;
    let mut left = Vec::new();
    for key in every_key(prefix, name) {
        let exists: i64 = client.redis().exists(key.as_str()).await.unwrap();
        if exists > 0 {
            left.push(key);
        }
    }
    left
}

/// Takes `name` of `kind` for a while (the holder side).
async fn hold(client: &LockClient, kind: Kind, name: &str) -> Box<dyn std::any::Any + Send> {
    let lease = LockOptions::new().lease(Duration::from_secs(5));
    match kind {
        Kind::Mutex => Box::new(client.lock(name).options(lease).await.unwrap().unwrap()),
        Kind::Fair => Box::new(
            client
                .fair_lock(name)
                .options(lease)
                .await
                .unwrap()
                .unwrap(),
        ),
        Kind::Write | Kind::Read => Box::new(
            client
                .write_lock(name)
                .options(lease)
                .await
                .unwrap()
                .unwrap(),
        ),
        Kind::Semaphore => Box::new(client.semaphore(name, 1).acquire().await.unwrap()),
    }
}

/// Waits for `name` of `kind` as a task of its own; the guard, if granted, is held
/// until the task is aborted.
fn wait(client: &LockClient, kind: Kind, name: &str) -> tokio::task::JoinHandle<()> {
    let (client, name) = (client.clone(), name.to_owned());
    tokio::spawn(async move {
        let held: Box<dyn std::any::Any + Send> = match kind {
            Kind::Mutex => Box::new(client.lock(&name).await),
            Kind::Fair => Box::new(client.fair_lock(&name).await),
            Kind::Write => Box::new(client.write_lock(&name).await),
            Kind::Read => Box::new(client.read_lock(&name).await),
            Kind::Semaphore => Box::new(client.semaphore(&name, 1).acquire().await),
        };
        // Hold whatever came (a guard or an error) until cancelled.
        std::future::pending::<()>().await;
        drop(held);
    })
}

/// Cancels the waits: aborts each task and returns once each has dropped its future
/// (`abort` only asks; a guard the task holds is dropped, and its release owed, when
/// the runtime next gets to the task).
async fn cancel(waits: Vec<tokio::task::JoinHandle<()>>) {
    for wait in &waits {
        wait.abort();
    }
    for wait in waits {
        let _ = wait.await;
    }
}

fn prefix() -> String {
    format!("shutdown-{}:", uuid::Uuid::new_v4().simple())
}

async fn client(url: &str, prefix: &str) -> LockClient {
    LockClient::builder(url)
        .prefix(prefix)
        .build()
        .await
        .unwrap()
}

/// Waits of every kind, queued in Redis, ended by the waiting client's shutdown; the
/// holder then lets go and shuts down too: no key of any kind is left.
async fn waits_of_every_kind_leave_nothing_behind_after_a_clean_shutdown(url: &str) {
    let prefix = prefix();
    let (holder, waiter) = (client(url, &prefix).await, client(url, &prefix).await);
    let checker = common::connect(url).await;
    let (mut held, mut waits, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for kind in KINDS {
        let name = common::unique(&format!("{kind:?}").to_lowercase());
        held.push(hold(&holder, kind, &name).await);
        for _ in 0..3 {
            waits.push(wait(&waiter, kind, &name));
        }
        waits.push(wait(&holder, kind, &name));
        names.push(name);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    waiter.shutdown().await;
    drop(held);
    cancel(waits).await;
    holder.shutdown().await;
    let mut left = Vec::new();
    for name in &names {
        left.extend(left_behind(&checker, &prefix, name).await);
    }
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Waits cancelled just as a release hands them the lock (a few microseconds to a few
/// milliseconds after it), then a shutdown: no key of any kind is left.
async fn waits_cancelled_as_the_lock_is_handed_to_them_leave_nothing_behind(url: &str) {
    let checker = common::connect(url).await;
    for round in 0..6u64 {
        let prefix = prefix();
        let (holder, waiter) = (client(url, &prefix).await, client(url, &prefix).await);
        let mut names = Vec::new();
        let mut rounds = Vec::new();
        for kind in KINDS {
            let name = common::unique(&format!("{kind:?}").to_lowercase());
            let held = hold(&holder, kind, &name).await;
            let waits: Vec<_> = (0..3).map(|_| wait(&waiter, kind, &name)).collect();
            names.push(name);
            rounds.push((held, waits));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for (held, waits) in rounds {
            drop(held);
            // From at once to a couple of round trips: the hand-off lands meanwhile.
            tokio::time::sleep(Duration::from_micros(round * 400)).await;
            cancel(waits).await;
        }
        waiter.shutdown().await;
        holder.shutdown().await;
        let mut left = Vec::new();
        for name in &names {
            left.extend(left_behind(&checker, &prefix, name).await);
        }
        assert!(left.is_empty(), "round {round}: left behind: {left:?}");
    }
}
