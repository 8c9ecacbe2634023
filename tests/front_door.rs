//! The front door's grid, walked: every kind of lock (mutex, fair, read, write,
//! multi-lock, semaphore) in every mode (as it is, `try_now`, `timeout`, `options`, and
//! each of them `run` as a critical section), async and blocking, against a real
//! server. A kind or a mode missing from the door does not compile here; a cell that
//! misbehaves fails its kind's test.
//!
//! Each kind's test takes the lock free in every mode, then has another owner make it
//! busy and checks that every bounded mode gives up (`None`, the body not run).

mod common;

use std::time::Duration;

use holdlock::{LockOptions, owner_scope};

/// How long a bounded mode waits for a busy lock.
const SHORT: Duration = Duration::from_millis(50);

/// One test per kind: `$request` is the kind's request for the lock `$name` of client
/// `$client`, `$blocker` a request that keeps it busy when held by another owner.
macro_rules! async_grid {
    ($($test:ident: |$client:ident, $name:ident| $request:expr, busy by $blocker:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $test() {
            let $client = common::client().await;
            let unique = common::unique(stringify!($test));
            let $name = unique.as_str();

            // Free: every mode takes it.
            $request.await.unwrap().unlock().await.unwrap();
            let taken = $request.try_now().await.unwrap();
            taken.expect("try_now: free").unlock().await.unwrap();
            let taken = $request.timeout(SHORT).await.unwrap();
            taken.expect("timeout: free").unlock().await.unwrap();
            let options = LockOptions::new().wait(Duration::from_secs(1));
            let taken = $request.options(options).await.unwrap();
            taken.expect("options: free").unlock().await.unwrap();

            // Free: every mode runs its body and releases.
            assert_eq!($request.run(async |_| 1).await.unwrap(), 1);
            assert_eq!($request.try_now().run(async |_| 2).await.unwrap(), Some(2));
            assert_eq!($request.timeout(SHORT).run(async |_| 3).await.unwrap(), Some(3));
            let options = LockOptions::new().wait(Duration::from_secs(1));
            assert_eq!($request.options(options).run(async |_| 4).await.unwrap(), Some(4));

            // Busy (held by another owner): every bounded mode gives up.
            let blocker = owner_scope(async { $blocker.await }).await.unwrap();
            assert!($request.try_now().await.unwrap().is_none(), "try_now: busy");
            assert!($request.timeout(SHORT).await.unwrap().is_none(), "timeout: busy");
            let options = LockOptions::new().wait(SHORT);
            assert!($request.options(options).await.unwrap().is_none(), "options: busy");
            let ran = $request.try_now().run(async |_| unreachable!("ran while busy"))
                .await;
            assert_eq!(ran.unwrap(), None::<()>);
            let ran = $request.timeout(SHORT).run(async |_| unreachable!("ran while busy"))
                .await;
            assert_eq!(ran.unwrap(), None::<()>);
            let options = LockOptions::new().wait(SHORT);
            let ran = $request.options(options).run(async |_| unreachable!("ran while busy"))
                .await;
            assert_eq!(ran.unwrap(), None::<()>);

            // Released: the wait-forever mode takes it again.
            blocker.unlock().await.unwrap();
            $request.await.unwrap().unlock().await.unwrap();
        }
    )*};
}

async_grid! {
    mutex: |client, name| client.lock(name), busy by client.lock(name);
    fair: |client, name| client.fair_lock(name), busy by client.fair_lock(name);
    read: |client, name| client.read_lock(name), busy by client.write_lock(name);
    write: |client, name| client.write_lock(name), busy by client.read_lock(name);
    multi: |client, name| client.lock_all([name, "front-door:other"]), busy by client.lock(name);
    semaphore: |client, name| client.semaphore(name, 1).acquire(),
        busy by client.semaphore(name, 1).acquire();
}

/// The same grid for the blocking client, on plain threads (each its own owner).
#[cfg(feature = "blocking")]
mod blocking {
    use std::thread;
    use std::time::Duration;

    use holdlock::LockOptions;
    use holdlock::blocking::LockClient;

    use super::{SHORT, common};

    macro_rules! blocking_grid {
        ($($test:ident: |$client:ident, $name:ident| $request:expr, busy by $blocker:expr;)*) => {$(
            #[test]
            fn $test() {
                let $client = LockClient::connect(&common::url()).unwrap();
                let unique = common::unique(concat!("blocking-", stringify!($test)));
                let $name = unique.as_str();

                // Free: every mode takes it.
                $request.block().unwrap().unlock().unwrap();
                $request.try_now().block().unwrap().expect("try_now: free").unlock().unwrap();
                $request.timeout(SHORT).block().unwrap().expect("timeout: free").unlock().unwrap();
                let options = LockOptions::new().wait(Duration::from_secs(1));
                $request.options(options).block().unwrap().expect("options: free").unlock().unwrap();

                // Free: every mode runs its body and releases.
                assert_eq!($request.run(|_| 1).unwrap(), 1);
                assert_eq!($request.try_now().run(|_| 2).unwrap(), Some(2));
                assert_eq!($request.timeout(SHORT).run(|_| 3).unwrap(), Some(3));
                let options = LockOptions::new().wait(Duration::from_secs(1));
                assert_eq!($request.options(options).run(|_| 4).unwrap(), Some(4));

                // Busy (held by another thread): every bounded mode gives up.
                let blocker = thread::scope(|threads| {
                    threads.spawn(|| $blocker.block().unwrap()).join().unwrap()
                });
                assert!($request.try_now().block().unwrap().is_none(), "try_now: busy");
                assert!($request.timeout(SHORT).block().unwrap().is_none(), "timeout: busy");
                let options = LockOptions::new().wait(SHORT);
                assert!($request.options(options).block().unwrap().is_none(), "options: busy");
                let ran = $request.try_now().run(|_| unreachable!("ran while busy"));
                assert_eq!(ran.unwrap(), None::<()>);
                let ran = $request.timeout(SHORT).run(|_| unreachable!("ran while busy"));
                assert_eq!(ran.unwrap(), None::<()>);
                let options = LockOptions::new().wait(SHORT);
                let ran = $request.options(options).run(|_| unreachable!("ran while busy"));
                assert_eq!(ran.unwrap(), None::<()>);

                // Released: the wait-forever mode takes it again.
                blocker.unlock().unwrap();
                $request.block().unwrap().unlock().unwrap();
            }
        )*};
    }

    blocking_grid! {
        mutex: |client, name| client.lock(name), busy by client.lock(name);
        fair: |client, name| client.fair_lock(name), busy by client.fair_lock(name);
        read: |client, name| client.read_lock(name), busy by client.write_lock(name);
        write: |client, name| client.write_lock(name), busy by client.read_lock(name);
        multi: |client, name| client.lock_all([name, "front-door:blocking-other"]),
            busy by client.lock(name);
        semaphore: |client, name| client.semaphore(name, 1).acquire(),
            busy by client.semaphore(name, 1).acquire();
    }
}

/// A request polled once (its call began, waiting for a busy lock) and then given
/// another mode fails with `InvalidOption` for `request`, as its docs say, and the
/// call it began is dropped without leaving a hold or a waiter behind: the holder's
/// release leaves the lock free.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_changed_after_its_call_began_fails_and_leaves_nothing() {
    let client = common::client().await;
    let name = common::unique("changed-request");
    let holder = owner_scope(async { client.lock(&name).await })
        .await
        .unwrap();
    let mut request = client.lock(&name);
    assert!(
        futures::poll!(&mut request).is_pending(),
        "the lock is busy"
    );
    let changed = request.timeout(SHORT).await;
    assert!(
        matches!(
            &changed,
            Err(holdlock::LockError::InvalidOption {
                option: "request",
                ..
            })
        ),
        "{changed:?}"
    );
    holder.unlock().await.unwrap();
    common::wait_until_free(&client, &name, Duration::from_secs(5)).await;
    let again = client.lock(&name).try_now().await.unwrap();
    assert!(again.is_some(), "the lock was left held");
}
