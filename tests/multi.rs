//! Multi-locks: all or nothing, no deadlock between overlapping callers in any order,
//! re-entry, bad name lists, and nothing left behind by timeouts or cancellation.

mod common;

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::KeysInterface;
use holdlock::{LockClient, LockError, LockOptions, owner_scope};
use tokio::time::Instant;

common::on_every_topology!(
    transfers_under_lock_all_conserve_the_total_and_never_deadlock,
    callers_in_opposite_orders_never_deadlock,
    a_timeout_on_a_later_member_leaves_nothing_held,
    a_cancelled_lock_all_leaves_nothing_held,
    try_lock_all_takes_all_or_nothing,
    members_are_reentrant_and_may_be_released_one_by_one,
    bad_name_lists_are_rejected_and_take_nothing,
    each_member_has_its_fencing_token_and_a_lost_member_is_told,
    a_member_lost_while_a_later_one_is_waited_for_is_taken_again,
);

/// The balance key of `account` in a test: plain string keys (one per account, in
/// different cluster slots), changed only under the account's lock.
fn balance_key(bank: &str, account: usize) -> String {
    format!("{bank}:balance:{account}")
}

/// 2 clients x 16 tasks move money between random pairs of 20 accounts under
/// `lock_all` (read both balances, write both): the total is conserved, every task
/// finishes, and no lock is left.
async fn transfers_under_lock_all_conserve_the_total_and_never_deadlock(url: &str) {
    const ACCOUNTS: usize = 20;
    const OPENING: i64 = 1_000;
    let bank = common::unique("bank");
    let clients = [common::connect(url).await, common::connect(url).await];
    for account in 0..ACCOUNTS {
        let _: () = clients[0]
            .redis()
            .set(balance_key(&bank, account), OPENING, None, None, false)
            .await
            .unwrap();
    }
    let transfers = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut tasks = Vec::new();
    for worker in 0..32u64 {
        let client = clients[worker as usize % 2].clone();
        let (bank, transfers) = (bank.clone(), Arc::clone(&transfers));
        tasks.push(tokio::spawn(async move {
            let mut seed = worker * 7919 + 1;
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as usize
            };
            while Instant::now() < deadline {
                let from = next() % ACCOUNTS;
                let to = (from + 1 + next() % (ACCOUNTS - 1)) % ACCOUNTS;
                let names = [format!("{bank}:{from}"), format!("{bank}:{to}")];
                let guards = client.lock_all(&names).await.unwrap();
                let redis = client.redis();
                let a: i64 = redis.get(balance_key(&bank, from)).await.unwrap();
                let b: i64 = redis.get(balance_key(&bank, to)).await.unwrap();
                let amount = (next() % 50) as i64;
                tokio::task::yield_now().await;
                let _: () = redis
                    .set(balance_key(&bank, from), a - amount, None, None, false)
                    .await
                    .unwrap();
                let _: () = redis
                    .set(balance_key(&bank, to), b + amount, None, None, false)
                    .await
                    .unwrap();
                guards.unlock().await.unwrap();
                transfers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a transfer task is stuck: deadlock")
            .unwrap();
    }
    let mut total = 0;
    for account in 0..ACCOUNTS {
        let balance: i64 = clients[0]
            .redis()
            .get(balance_key(&bank, account))
            .await
            .unwrap();
        total += balance;
        let name = format!("{bank}:{account}");
        assert!(
            !clients[0].is_locked(&name).await.unwrap(),
            "{name} left locked"
        );
    }
    assert_eq!(total, OPENING * ACCOUNTS as i64, "money was made or lost");
    assert!(transfers.load(std::sync::atomic::Ordering::Relaxed) > 32);
}

/// Two tasks take the same pair over and over, one naming it `[x, y]`, the other
/// `[y, x]`: both finish.
async fn callers_in_opposite_orders_never_deadlock(url: &str) {
    let (x, y) = (common::unique("opposite-x"), common::unique("opposite-y"));
    let clients = [common::connect(url).await, common::connect(url).await];
    let mut tasks = Vec::new();
    for (client, names) in clients
        .iter()
        .zip([[x.clone(), y.clone()], [y.clone(), x.clone()]])
    {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..100 {
                let both = client.lock_all(&names).await.unwrap();
                tokio::task::yield_now().await;
                both.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("deadlock")
            .unwrap();
    }
}

/// The second member is held elsewhere: a bounded `lock_all(..).options(..)` gives up with
/// `None` and the first member, which it had taken, is free when it returns.
async fn a_timeout_on_a_later_member_leaves_nothing_held(url: &str) {
    let (a, b) = (common::unique("timeout-a"), common::unique("timeout-b"));
    let (client, other) = (common::connect(url).await, common::connect(url).await);
    let held = other.lock(&b).await.unwrap();
    let asked = Instant::now();
    let options = LockOptions::new().wait(Duration::from_millis(300));
    let taken = client.lock_all([&a, &b]).options(options).await.unwrap();
    assert!(taken.is_none(), "b is held elsewhere");
    assert!(
        asked.elapsed() >= Duration::from_millis(300),
        "gave up early"
    );
    assert!(!client.is_locked(&a).await.unwrap(), "a was left held");
    held.unlock().await.unwrap();
}

/// A `lock_all` dropped while it waits for its second member leaves the first free
/// (released in the background at once).
async fn a_cancelled_lock_all_leaves_nothing_held(url: &str) {
    let (a, b) = (common::unique("cancel-a"), common::unique("cancel-b"));
    let (client, other) = (common::connect(url).await, common::connect(url).await);
    let held = other.lock(&b).await.unwrap();
    let cut = tokio::time::timeout(Duration::from_millis(200), client.lock_all([&a, &b])).await;
    assert!(cut.is_err(), "b is held elsewhere: the call waits");
    common::wait_until_free(&other, &a, Duration::from_secs(2)).await;
    // And no background work takes it again.
    other
        .lock(&a)
        .try_now()
        .await
        .unwrap()
        .expect("a is free")
        .unlock()
        .await
        .unwrap();
    held.unlock().await.unwrap();
    // The cancelled call did not leave a waiter that would take b now.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!client.is_locked(&b).await.unwrap());
}

/// `lock_all(..).try_now()` never waits: with one member busy it returns `None` at once and
/// holds nothing; with all free it takes all.
async fn try_lock_all_takes_all_or_nothing(url: &str) {
    let names = [
        common::unique("try-a"),
        common::unique("try-b"),
        common::unique("try-c"),
    ];
    let (client, other) = (common::connect(url).await, common::connect(url).await);
    let held = other.lock(&names[1]).await.unwrap();
    let asked = Instant::now();
    assert!(client.lock_all(&names).try_now().await.unwrap().is_none());
    assert!(asked.elapsed() < Duration::from_secs(1), "a try waited");
    for name in &names {
        assert_eq!(client.is_locked(name).await.unwrap(), *name == names[1]);
    }
    held.unlock().await.unwrap();
    let all = client
        .lock_all(&names)
        .try_now()
        .await
        .unwrap()
        .expect("all free");
    assert_eq!(all.names().count(), 3);
    all.unlock().await.unwrap();
    for name in &names {
        assert!(!client.is_locked(name).await.unwrap());
    }
}

/// A helper locking one member inside a multi-lock re-enters it; a multi-lock of a
/// name the owner already holds re-enters that name; members can be released one by
/// one through `into_guards`.
async fn members_are_reentrant_and_may_be_released_one_by_one(url: &str) {
    let (a, b) = (common::unique("reenter-a"), common::unique("reenter-b"));
    let client = common::connect(url).await;
    owner_scope(async {
        let outer = client.lock(&a).await.unwrap();
        let both = client.lock_all([&b, &a]).await.unwrap();
        assert_eq!(both.guard(&a).unwrap().hold_count(), 2, "a was re-entered");
        assert_eq!(both.guard(&b).unwrap().hold_count(), 1);
        let inner = client.lock(&b).await.unwrap();
        assert_eq!(inner.hold_count(), 2, "a helper re-enters b");
        inner.unlock().await.unwrap();
        let mut guards = both.into_guards();
        let names: Vec<_> = guards.iter().map(|g| g.name().to_owned()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "members come in lock order");
        let last = guards.pop().unwrap();
        last.unlock().await.unwrap();
        let first = guards.pop().unwrap();
        first.unlock().await.unwrap();
        assert!(!client.is_locked(&b).await.unwrap());
        assert!(
            client.is_locked(&a).await.unwrap(),
            "the outer hold of a remains"
        );
        outer.unlock().await.unwrap();
        assert!(!client.is_locked(&a).await.unwrap());
    })
    .await;
}

/// Duplicates, an empty list and a bad name are `InvalidName`, and nothing is taken.
async fn bad_name_lists_are_rejected_and_take_nothing(url: &str) {
    let (a, b) = (common::unique("bad-a"), common::unique("bad-b"));
    let client = common::connect(url).await;
    let cases: [Vec<&str>; 3] = [vec![&a, &b, &a], vec![], vec![&a, "x{y}"]];
    for names in cases {
        match client.lock_all(&names).await {
            Err(LockError::InvalidName { .. }) => {}
            other => panic!("{names:?}: {other:?}"),
        }
        match client.lock_all(&names).try_now().await {
            Err(LockError::InvalidName { .. }) => {}
            other => panic!("{names:?}: {other:?}"),
        }
    }
    assert!(!client.is_locked(&a).await.unwrap());
    assert!(!client.is_locked(&b).await.unwrap());
}

/// With fencing, every member has its own token; force-unlocking one member makes
/// the multi-guard lost.
async fn each_member_has_its_fencing_token_and_a_lost_member_is_told(url: &str) {
    let (a, b) = (common::unique("fenced-a"), common::unique("fenced-b"));
    let client: LockClient = common::client_with_lease(url, Duration::from_secs(3)).await;
    let both = client
        .lock_all([&a, &b])
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let (token_a, token_b) = (both.token_of(&a).unwrap(), both.token_of(&b).unwrap());
    assert!(token_a > 0 && token_b > 0);
    assert_eq!(both.token_of("not-a-member"), None);
    assert_eq!(
        both.fencing_token(),
        None,
        "two names: no one token fences both"
    );
    assert!(!both.is_lost());
    assert!(client.force_unlock(&b).await.unwrap());
    // The watchdog finds it gone at its next renewal, a third of the lease on.
    tokio::time::timeout(Duration::from_secs(5), both.lost())
        .await
        .expect("the loss of b is told");
    assert!(both.is_lost());
    // Releasing reports the lost member but still releases the other.
    assert!(both.unlock().await.is_err());
    assert!(!client.is_locked(&a).await.unwrap());
}

/// With a fixed 300 ms lease, the first member expires while the second is held
/// elsewhere for 600 ms: `lock_all(..).options(..)` does not hand out the lost member, but takes
/// the set again, and returns it with every member held.
async fn a_member_lost_while_a_later_one_is_waited_for_is_taken_again(url: &str) {
    let (a, b) = (common::unique("relost-a"), common::unique("relost-b"));
    let (client, other) = (common::connect(url).await, common::connect(url).await);
    let held = other.lock(&b).await.unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(600)).await;
        held.unlock().await.unwrap();
    });
    let options = LockOptions::new()
        .lease(Duration::from_millis(300))
        .wait(Duration::from_secs(5));
    let both = client
        .lock_all([&a, &b])
        .options(options)
        .await
        .unwrap()
        .unwrap();
    release.await.unwrap();
    assert!(!both.is_lost(), "a member was handed out lost");
    let owner = both.guard(&a).unwrap().owner().to_owned();
    let info = client.inspect(&a).await.unwrap().expect("a is held");
    assert_eq!(info.owners[0].id, owner);
    both.unlock().await.unwrap();
}
