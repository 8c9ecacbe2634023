//! The code users write against the front door, as they write it: each pattern is a
//! function here, type-checked on every build (a shape of the API that breaks one
//! fails to compile this file), and the test at the end runs each against a real
//! server. The compile-fail side (errors users can meet, and what they say) is
//! `tests/compile_fail.rs`.
//!
//! Patterns: a generic `IntoFuture` helper awaited inside `tokio::spawn`;
//! `join_all` over requests; `tokio::spawn` of a request and of a `run`; the
//! `|g| async move { .. }` body; names built with `format!`, and a helper returning a
//! request; the client's own Redis commands through `holdlock::fred`; a guard in a
//! struct moved across tasks; `select!` over `guard.lost()` and work, and over `&mut
//! request` with a ticker; a boxed `dyn Future + Send` acquisition; `Box<dyn Held>`;
//! one fencing helper generic over `Held` for every guard, in a spawned task;
//! the blocking client from `std::thread::scope`; an axum handler that locks per
//! request.

mod common;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use holdlock::acquire::{Bounded, Mutex};
use holdlock::{Acquire, Held, LockClient, LockGuard, LockOptions};

/// A user's own generic helper: any request (any `IntoFuture`), bounded by a deadline.
async fn with_deadline<F: IntoFuture>(deadline: Duration, request: F) -> Option<F::Output> {
    tokio::time::timeout(deadline, request.into_future())
        .await
        .ok()
}

/// Pattern 1: The helper, awaited inside `tokio::spawn`, for every kind and a `run`.
async fn generic_helper_in_spawn(client: &LockClient, name: &str) -> Vec<bool> {
    let (client, name) = (client.clone(), name.to_owned());
    let spawned = tokio::spawn(async move {
        let second = Duration::from_secs(5);
        let mut took = Vec::new();
        let guard = with_deadline(second, client.lock(&name)).await;
        took.push(matches!(guard, Some(Ok(_))));
        drop(guard);
        let guard = with_deadline(second, client.lock(&name).try_now()).await;
        took.push(matches!(guard, Some(Ok(Some(_)))));
        drop(guard);
        let fair = with_deadline(second, client.fair_lock(&name)).await;
        took.push(matches!(fair, Some(Ok(_))));
        drop(fair);
        let read = with_deadline(second, client.read_lock(&name)).await;
        took.push(matches!(read, Some(Ok(_))));
        drop(read);
        let write = with_deadline(second, client.write_lock(&name)).await;
        took.push(matches!(write, Some(Ok(_))));
        drop(write);
        let permit = with_deadline(second, client.semaphore(&name, 2).acquire()).await;
        took.push(matches!(permit, Some(Ok(_))));
        drop(permit);
        let ran = with_deadline(second, client.lock(&name).run(async |_| 7)).await;
        took.push(matches!(ran, Some(Ok(7))));
        took
    });
    spawned.await.expect("the task ran")
}

/// Pattern 2: `join_all` over the requests of several names, each taken by its own task.
async fn join_all_requests(client: &LockClient, names: &[String]) -> usize {
    let guards = futures::future::join_all(names.iter().map(|name| client.lock(name))).await;
    guards.into_iter().filter(Result::is_ok).count()
}

/// Pattern 3: A request spawned as it is, and a critical section spawned from a cloned client
/// and an owned name.
async fn spawned_requests(client: &LockClient, name: String) -> (bool, u64) {
    let guard = tokio::spawn(client.lock(&name))
        .await
        .expect("the task ran");
    let took = guard.is_ok();
    drop(guard);
    let section = tokio::spawn(
        client
            .clone()
            .lock(name)
            .run(|guard| async move { guard.hold_count() }),
    );
    let count = section
        .await
        .expect("the task ran")
        .expect("the section ran");
    (took, u64::from(count))
}

/// Pattern 4: The closure idiom of most Rust code: `|g| async move { .. }`, reading the guard.
async fn async_move_body(client: &LockClient, name: &str) -> holdlock::Result<Option<u64>> {
    let options = LockOptions::fenced();
    let token = client
        .lock(name)
        .options(options)
        .run(|guard| async move { guard.fencing_token() })
        .await?;
    Ok(token.flatten())
}

/// Pattern 5: Names built with `format!`, kept in a variable, and a helper returning the
/// request it built.
fn account_request(client: &LockClient, id: u64) -> Acquire<Mutex, Bounded> {
    client
        .lock(format!("account:{id}"))
        .timeout(Duration::from_secs(5))
}

// `&format!(..)` as users write it (the issue's snippet): it must compile.
#[allow(clippy::needless_borrows_for_generic_args)]
async fn formatted_names(client: &LockClient, id: u64) -> holdlock::Result<bool> {
    let request = client
        .lock(&format!("account:{id}:user-code"))
        .timeout(Duration::from_secs(5));
    let first = request.await?;
    let second = account_request(client, id).await?;
    Ok(first.is_some() && second.is_some())
}

/// Pattern 6: The client's own Redis commands, with fred's traits through `holdlock::fred` (no
/// `fred` in the user's Cargo.toml).
async fn own_commands(client: &LockClient, key: &str) -> holdlock::Result<Option<i64>> {
    use holdlock::fred::interfaces::KeysInterface;
    let () = client.redis().set(key, 41, None, None, false).await?;
    let stock: Option<i64> = client.redis().incr(key).await.map(Some)?;
    let () = client.redis().del(key).await?;
    Ok(stock)
}

/// Pattern 7: A guard kept in a struct and moved to another task, which releases it.
struct Job {
    guard: LockGuard,
    step: u32,
}

async fn guard_in_a_struct(client: &LockClient, name: &str) -> holdlock::Result<u32> {
    let job = Job {
        guard: client.lock(name).await?,
        step: 1,
    };
    let finished = tokio::spawn(async move {
        let step = job.step + 1;
        job.guard.unlock().await.map(|()| step)
    });
    finished.await.expect("the task ran")
}

/// Pattern 8: `select!` over `guard.lost()` and the work, and over `&mut request` while a
/// ticker logs the wait.
async fn selects(client: &LockClient, name: &str) -> holdlock::Result<u32> {
    let guard = client.lock(name).await?;
    let work = tokio::time::sleep(Duration::from_millis(10));
    tokio::select! {
        () = work => {}
        () = guard.lost() => return Err(holdlock::LockError::Lost { name: name.into() }),
    }
    let held_elsewhere = Arc::new(guard);
    let mut request = client.lock(name);
    let mut ticker = tokio::time::interval(Duration::from_millis(5));
    let mut ticks = 0;
    let again = loop {
        tokio::select! {
            guard = &mut request => break guard?,
            _ = ticker.tick() => ticks += 1,
        }
    };
    drop(again);
    drop(held_elsewhere);
    Ok(ticks)
}

/// Pattern 9: An acquisition as a boxed `dyn Future + Send`, as trait methods and plugin
/// registries keep them.
type BoxedLock = Pin<Box<dyn Future<Output = holdlock::Result<LockGuard>> + Send>>;

fn boxed_acquisition(client: &LockClient, name: &str) -> BoxedLock {
    Box::pin(client.lock(name))
}

/// Pattern 10: Guards of several kinds kept together as `Box<dyn Held>`.
async fn trait_objects(client: &LockClient, name: &str) -> holdlock::Result<usize> {
    let guards: Vec<Box<dyn Held>> = vec![
        Box::new(client.lock(name).await?),
        Box::new(client.read_lock(name).await?),
        Box::new(client.semaphore(name, 2).acquire().await?),
        Box::new(
            client
                .lock_all([format!("{name}:1"), format!("{name}:2")])
                .await?,
        ),
    ];
    let held = guards.iter().filter(|guard| !guard.is_lost()).count();
    for guard in guards {
        tokio::select! {
            () = guard.lost() => {}
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
        guard.unlock().await?;
    }
    Ok(held)
}

/// Pattern 12: One fencing helper for every guard, generic over `Held` and run in a
/// spawned task: a fenced mutex's token, a write hold's, a leadership's (always one),
/// a boxed guard's; a multi-guard answers per name (`token_of`), `None` as a whole.
async fn fence_with<G: Held + 'static>(guard: G) -> holdlock::Result<Option<u64>> {
    let token = tokio::spawn(async move {
        let token = guard.fencing_token();
        guard.unlock().await.map(|()| token)
    });
    token.await.expect("the fencing task")
}

async fn one_token_shape(client: &LockClient, name: &str) -> holdlock::Result<usize> {
    let fenced = || LockOptions::fenced();
    let mutex = client.lock(format!("{name}:m")).options(fenced()).await?;
    let write = client
        .write_lock(format!("{name}:w"))
        .options(fenced())
        .await?;
    let leader = client.election(format!("{name}:e")).campaign("me").await?;
    let boxed: Box<dyn Held> = Box::new(
        client
            .lock(format!("{name}:b"))
            .options(fenced())
            .await?
            .unwrap(),
    );
    let both = client
        .lock_all([format!("{name}:1"), format!("{name}:2")])
        .options(fenced())
        .await?
        .unwrap();
    assert!(both.token_of(&format!("{name}:1")).is_some());
    assert_eq!(both.fencing_token(), None, "no one token fences two locks");
    let tokens = [
        fence_with(mutex.unwrap()).await?,
        fence_with(write.unwrap()).await?,
        fence_with(leader).await?,
        fence_with(boxed).await?,
        fence_with(both).await?,
    ];
    Ok(tokens.iter().filter(|token| token.is_some()).count())
}

/// Pattern 11: The blocking client from scoped threads: they borrow the client and the names.
#[cfg(feature = "blocking")]
fn scoped_threads(client: &holdlock::blocking::LockClient, names: &[String]) -> usize {
    std::thread::scope(|scope| {
        let handles: Vec<_> = names
            .iter()
            .map(|name| scope.spawn(move || client.lock(name).run(|guard| guard.hold_count())))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("the thread ran"))
            .filter(|count| matches!(count, Ok(1)))
            .count()
    })
}

/// Pattern 12: An axum handler that locks the account of each request.
async fn transfer_handler(
    axum::extract::State(client): axum::extract::State<LockClient>,
    axum::extract::Path(id): axum::extract::Path<u64>,
) -> Result<String, (axum::http::StatusCode, String)> {
    let busy = |error: holdlock::LockError| {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            error.to_string(),
        )
    };
    let account = client
        .lock(format!("account:{id}:http"))
        .timeout(Duration::from_secs(2))
        .run(|guard| async move { guard.hold_count() })
        .await
        .map_err(busy)?;
    match account {
        Some(count) => Ok(format!("held {count}")),
        None => Err((axum::http::StatusCode::CONFLICT, "busy".to_owned())),
    }
}

fn router(client: LockClient) -> axum::Router {
    axum::Router::new()
        .route(
            "/accounts/{id}/transfer",
            axum::routing::post(transfer_handler),
        )
        .with_state(client)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_pattern_runs_against_a_server() {
    let client = common::client().await;
    let name = common::unique("user-code");

    assert_eq!(
        generic_helper_in_spawn(&client, &name).await,
        vec![true; 7],
        "the generic helper in spawn: mutex, try_now, fair, read, write, permit, run"
    );
    let names: Vec<String> = (0..4).map(|n| format!("{name}:join:{n}")).collect();
    assert_eq!(join_all_requests(&client, &names).await, 4);
    assert_eq!(
        spawned_requests(&client, format!("{name}:spawned")).await,
        (true, 1)
    );
    let token = async_move_body(&client, &format!("{name}:fenced"))
        .await
        .unwrap();
    assert!(token.is_some(), "the fenced section's token");
    assert!(formatted_names(&client, 77).await.unwrap());
    let stock = own_commands(&client, &format!("{name}:stock"))
        .await
        .unwrap();
    assert_eq!(stock, Some(42));
    assert_eq!(
        guard_in_a_struct(&client, &format!("{name}:job"))
            .await
            .unwrap(),
        2
    );
    // The same owner re-enters at once there, so the ticker may not tick; the select
    // only must not fail.
    selects(&client, &format!("{name}:select")).await.unwrap();
    let boxed = boxed_acquisition(&client, &format!("{name}:boxed"))
        .await
        .unwrap();
    assert_eq!(boxed.hold_count(), 1);
    boxed.unlock().await.unwrap();
    assert_eq!(
        trait_objects(&client, &format!("{name}:dyn"))
            .await
            .unwrap(),
        4
    );

    assert_eq!(
        one_token_shape(&client, &format!("{name}:tokens"))
            .await
            .unwrap(),
        4,
        "a token from the mutex, the write side, the leadership and the boxed guard"
    );

    let response = tower::ServiceExt::oneshot(
        router(client.clone()),
        axum::http::Request::post("/accounts/9/transfer")
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), axum::http::StatusCode::OK);

    // Nothing of these patterns is left held.
    for suffix in [
        "", ":spawned", ":fenced", ":job", ":select", ":boxed", ":dyn",
    ] {
        let lock = format!("{name}{suffix}");
        common::wait_until_free(&client, &lock, Duration::from_secs(5)).await;
    }
    client.shutdown().await;
}

#[cfg(feature = "blocking")]
#[test]
fn the_blocking_client_runs_from_scoped_threads() {
    let client = holdlock::blocking::LockClient::connect(&common::url()).unwrap();
    let name = common::unique("user-code-scoped");
    let names: Vec<String> = (0..3).map(|n| format!("{name}:{n}")).collect();
    assert_eq!(scoped_threads(&client, &names), 3);
}

/// Every program of the README that makes an async client ends the way users should
/// end theirs: with `client.shutdown().await`, which waits for what the client still
/// owes Redis (the releases of dropped guards), so a second run finds no lock of the
/// first still held. (A blocking client does this when its last handle is dropped.)
#[test]
fn readme_programs_shut_their_clients_down() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let mut programs = 0;
    for (at, block) in readme.split("```rust").enumerate().skip(1) {
        let code = block.split("```").next().unwrap_or_default();
        let async_client = code.contains("LockClient::connect(") && !code.contains("blocking::")
            || code.contains("LockClient::builder(");
        if !code.contains("fn main") || !async_client {
            continue;
        }
        programs += 1;
        assert!(
            code.contains("client.shutdown().await"),
            "README.md's Rust block {at} makes a client and never shuts it down:\n{code}"
        );
    }
    assert!(programs >= 8, "only {programs} README programs found");
}
