//! `holdlock::postgres`: fencing tokens checked inside PostgreSQL transactions, against
//! a throwaway PostgreSQL (`common::postgres`), with the locks on a single Redis and on
//! a Redis Cluster.
//!
//! The fault of issue 66, both ways: a holder that reads a balance, pauses past its
//! fixed lease while another holder takes the lock and changes the balance, then
//! writes: with the fence its transaction is refused and the balance is the other
//! holder's; without it (a plain `UPDATE`) the other holder's update is lost. Then
//! what the fence allows and refuses, how racing transactions serialize on its row,
//! the table's idempotent creation, and names that are parameters, never SQL.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use holdlock::LockOptions;
use holdlock::postgres::{self, FenceError};
use tokio_postgres::{Client, NoTls};

common::on_every_topology!(
    a_paused_holders_fenced_transaction_is_refused_and_the_balance_is_the_new_holders,
    without_the_fence_the_paused_holders_write_loses_the_new_holders_update,
    many_writes_under_one_hold_and_its_re_entries_pass,
    a_run_body_fences_with_its_guards_token,
);

/// A connection to the shared PostgreSQL (its connection task spawned).
async fn connect_db() -> Client {
    connect_to(&common::shared_postgres().config()).await
}

async fn connect_to(config: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(config, NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A connection, with the fence table in place.
async fn db() -> Client {
    let db = connect_db().await;
    postgres::create_table(&db).await.unwrap();
    db
}

/// A table of balances of this test's own, with account 1 holding `balance`.
async fn accounts(db: &Client, balance: i64) -> String {
    let table = format!("balances_{}", uuid::Uuid::new_v4().simple());
    db.batch_execute(&format!(
        "CREATE TABLE {table} (id int PRIMARY KEY, balance bigint NOT NULL);
         INSERT INTO {table} VALUES (1, {balance});"
    ))
    .await
    .unwrap();
    table
}

async fn balance(db: &impl tokio_postgres::GenericClient, table: &str) -> i64 {
    db.query_one(&format!("SELECT balance FROM {table} WHERE id = 1"), &[])
        .await
        .unwrap()
        .get(0)
}

/// A fixed lease and no watchdog: nothing renews the hold while its holder "pauses".
const LEASE: Duration = Duration::from_millis(500);

/// Holder B: takes `name` fenced on a client of its own, and in one transaction fences
/// `resource`, reads the balance, adds `amount` and commits.
async fn holder_b_adds(url: &str, name: &str, resource: &str, table: &str, amount: i64) -> u64 {
    let locks = common::connect(url).await;
    let guard = locks
        .lock(name)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let token = guard.fencing_token().unwrap();
    let mut db = connect_db().await;
    let tx = db.transaction().await.unwrap();
    postgres::fence(&tx, resource, token).await.unwrap();
    let read = balance(&tx, table).await;
    tx.execute(
        &format!("UPDATE {table} SET balance = $1 WHERE id = 1"),
        &[&(read + amount)],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    guard.unlock().await.unwrap();
    locks.shutdown().await;
    token
}

async fn a_paused_holders_fenced_transaction_is_refused_and_the_balance_is_the_new_holders(
    url: &str,
) {
    let setup = db().await;
    let table = accounts(&setup, 100).await;
    let name = common::unique("account");
    let locks = common::connect(url).await;

    // Holder A: a fixed lease, then a transaction in which it reads the balance.
    let fixed = LockOptions::fenced().lease(LEASE);
    let a = locks.lock(&name).options(fixed).await.unwrap().unwrap();
    let a_token = a.fencing_token().unwrap();
    let mut a_db = connect_db().await;
    let a_tx = a_db.transaction().await.unwrap();
    let a_read = balance(&a_tx, &table).await;
    assert_eq!(a_read, 100);

    // A "pauses" past its lease; B takes the lock, adds 50 and commits.
    tokio::time::sleep(LEASE + Duration::from_millis(300)).await;
    assert!(a.is_lost(), "a fixed lease ends by itself");
    let b_token = holder_b_adds(url, &name, &name, &table, 50).await;
    assert!(b_token > a_token);

    // A wakes up and writes: its fence refuses the transaction, with both tokens.
    match postgres::fence(&a_tx, &name, a_token).await {
        Err(FenceError::StaleToken {
            resource,
            presented,
            newest,
        }) => {
            assert_eq!(resource, name);
            assert_eq!((presented, newest), (a_token, b_token));
        }
        other => panic!("the stale fence passed: {other:?}"),
    }
    // The transaction can no longer write, and its commit rolls back.
    let write = a_tx
        .execute(
            &format!("UPDATE {table} SET balance = $1 WHERE id = 1"),
            &[&(a_read + 10)],
        )
        .await;
    let refused = write.expect_err("a write after a stale fence fails");
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION),
        "{refused}"
    );
    let _ = a_tx.commit().await;

    assert_eq!(balance(&setup, &table).await, 150, "B's balance stands");
    assert_eq!(
        postgres::newest_token(&setup, &name).await.unwrap(),
        Some(b_token)
    );
    drop(a);
    locks.shutdown().await;
}

async fn without_the_fence_the_paused_holders_write_loses_the_new_holders_update(url: &str) {
    let setup = db().await;
    let table = accounts(&setup, 100).await;
    let name = common::unique("account");
    let locks = common::connect(url).await;

    // The same scenario...
    let fixed = LockOptions::fenced().lease(LEASE);
    let a = locks.lock(&name).options(fixed).await.unwrap().unwrap();
    let mut a_db = connect_db().await;
    let a_tx = a_db.transaction().await.unwrap();
    let a_read = balance(&a_tx, &table).await;
    tokio::time::sleep(LEASE + Duration::from_millis(300)).await;
    holder_b_adds(url, &name, &name, &table, 50).await;
    assert_eq!(balance(&setup, &table).await, 150);

    // ... but A writes with a plain UPDATE: accepted, and B's 50 is gone.
    a_tx.execute(
        &format!("UPDATE {table} SET balance = $1 WHERE id = 1"),
        &[&(a_read + 10)],
    )
    .await
    .unwrap();
    a_tx.commit().await.unwrap();
    assert_eq!(
        balance(&setup, &table).await,
        110,
        "without the fence, B's update is lost"
    );
    drop(a);
    locks.shutdown().await;
}

async fn many_writes_under_one_hold_and_its_re_entries_pass(url: &str) {
    let mut db = db().await;
    let table = accounts(&db, 0).await;
    let name = common::unique("account");
    let locks = common::connect(url).await;
    let guard = locks
        .lock(&name)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let token = guard.fencing_token().unwrap();

    // Ten transactions under the one hold, two fences each: all pass.
    for _ in 0..10 {
        let tx = db.transaction().await.unwrap();
        postgres::fence(&tx, &name, token).await.unwrap();
        postgres::fence(&tx, &name, token).await.unwrap();
        tx.execute(
            &format!("UPDATE {table} SET balance = balance + 1 WHERE id = 1"),
            &[],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
    assert_eq!(balance(&db, &table).await, 10);

    // A re-entry shares the token, and passes too.
    let nested = locks.lock(&name).await.unwrap();
    assert_eq!(nested.fencing_token(), Some(token));
    let tx = db.transaction().await.unwrap();
    postgres::fence(&tx, &name, nested.fencing_token().unwrap())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    nested.unlock().await.unwrap();
    assert_eq!(
        postgres::newest_token(&db, &name).await.unwrap(),
        Some(token)
    );

    // The next holder's token is larger; from then on the old one is refused.
    guard.unlock().await.unwrap();
    let next = locks
        .lock(&name)
        .options(LockOptions::fenced())
        .await
        .unwrap()
        .unwrap();
    let newer = next.fencing_token().unwrap();
    assert!(newer > token);
    let tx = db.transaction().await.unwrap();
    postgres::fence(&tx, &name, newer).await.unwrap();
    tx.commit().await.unwrap();
    let tx = db.transaction().await.unwrap();
    let stale = postgres::fence(&tx, &name, token).await.unwrap_err();
    assert!(stale.is_stale(), "{stale}");
    drop(tx);
    next.unlock().await.unwrap();
    locks.shutdown().await;
}

async fn a_run_body_fences_with_its_guards_token(url: &str) {
    let mut db = db().await;
    let table = accounts(&db, 100).await;
    let name = common::unique("account");
    let locks = common::connect(url).await;
    let (db_ref, table_ref, name_ref) = (&mut db, &table, &name);
    let moved = locks
        .lock(&name)
        .options(LockOptions::fenced())
        .run(|guard| async move {
            let token = guard.fencing_token().expect("taken fenced");
            let tx = db_ref.transaction().await?;
            postgres::fence(&tx, name_ref, token).await?;
            let read = balance(&tx, table_ref).await;
            tx.execute(
                &format!("UPDATE {table_ref} SET balance = $1 WHERE id = 1"),
                &[&(read - 30)],
            )
            .await?;
            tx.commit().await?;
            Ok::<_, FenceError>(token)
        })
        .await
        .unwrap()
        .expect("waits as long as it takes")
        .unwrap();
    assert_eq!(balance(&db, &table).await, 70);
    assert_eq!(
        postgres::newest_token(&db, &name).await.unwrap(),
        Some(moved)
    );
    locks.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_older_token_fails_after_a_newer_one_in_any_transaction_for_every_u64() {
    let mut db = db().await;
    let resource = common::unique("resource");
    let signed_max = i64::MAX as u64;
    // Across the sign boundary of bigint, and up to u64::MAX: the order is the u64's.
    for token in [10, 11, signed_max, signed_max + 1, u64::MAX - 1, u64::MAX] {
        let tx = db.transaction().await.unwrap();
        postgres::fence(&tx, &resource, token).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(
            postgres::newest_token(&db, &resource).await.unwrap(),
            Some(token)
        );
        // Again (equal: passes), and with the one before (older: refused), each in a
        // transaction of its own, on another connection.
        let mut other = connect_db().await;
        let tx = other.transaction().await.unwrap();
        postgres::fence(&tx, &resource, token).await.unwrap();
        tx.commit().await.unwrap();
        let tx = other.transaction().await.unwrap();
        match postgres::fence(&tx, &resource, token - 1).await {
            Err(FenceError::StaleToken {
                presented, newest, ..
            }) => assert_eq!((presented, newest), (token - 1, token)),
            refused => panic!("{} after {token}: {refused:?}", token - 1),
        }
    }
    // A transaction that fenced an old token fails for good: its commit rolls back.
    let table = accounts(&db, 5).await;
    let tx = db.transaction().await.unwrap();
    assert!(
        postgres::fence(&tx, &resource, 1)
            .await
            .unwrap_err()
            .is_stale()
    );
    assert!(
        tx.execute(&format!("UPDATE {table} SET balance = 0"), &[])
            .await
            .is_err()
    );
    let _ = tx.commit().await;
    assert_eq!(balance(&db, &table).await, 5);
    assert_eq!(
        postgres::newest_token(&db, &resource).await.unwrap(),
        Some(u64::MAX)
    );
}

/// Whether `task` is still running after `wait`: it waits for a row lock.
async fn still_waiting<T>(task: &tokio::task::JoinHandle<T>, wait: Duration) -> bool {
    tokio::time::sleep(wait).await;
    !task.is_finished()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_transactions_serialize_on_the_fence_row_and_the_stale_one_never_commits_after() {
    let setup = db().await;
    let table = Arc::new(accounts(&setup, 0).await);
    let resource = Arc::new(common::unique("resource"));
    let mut first = connect_db().await;
    let tx = first.transaction().await.unwrap();
    postgres::fence(&tx, &resource, 5).await.unwrap();
    tx.commit().await.unwrap();

    // 1. The new holder (token 20) fences first; the stale one (10) waits on the row
    //    and, once the new one commits, is refused.
    let mut new = connect_db().await;
    let new_tx = new.transaction().await.unwrap();
    postgres::fence(&new_tx, &resource, 20).await.unwrap();
    let stale = tokio::spawn({
        let resource = Arc::clone(&resource);
        async move {
            let mut db = connect_db().await;
            let tx = db.transaction().await.unwrap();
            postgres::fence(&tx, &resource, 10).await
        }
    });
    assert!(
        still_waiting(&stale, Duration::from_millis(300)).await,
        "the stale fence waits for the row the new one locked"
    );
    new_tx
        .execute(
            &format!("UPDATE {table} SET balance = balance + 1 WHERE id = 1"),
            &[],
        )
        .await
        .unwrap();
    new_tx.commit().await.unwrap();
    match stale.await.unwrap() {
        Err(FenceError::StaleToken {
            presented, newest, ..
        }) => assert_eq!((presented, newest), (10, 20)),
        other => panic!("the stale fence passed after the new one committed: {other:?}"),
    }

    // 2. The other way round: an older holder (21, ahead of what is recorded) fences
    //    first, and a newer one (30) waits for it; the older commits, then the newer
    //    passes and reads what the older wrote: no update is lost either way.
    let mut older = connect_db().await;
    let older_tx = older.transaction().await.unwrap();
    postgres::fence(&older_tx, &resource, 21).await.unwrap();
    let newer = tokio::spawn({
        let (resource, table) = (Arc::clone(&resource), Arc::clone(&table));
        async move {
            let mut db = connect_db().await;
            let tx = db.transaction().await.unwrap();
            postgres::fence(&tx, &resource, 30).await.unwrap();
            let read = balance(&tx, &table).await;
            tx.execute(
                &format!("UPDATE {table} SET balance = $1 WHERE id = 1"),
                &[&(read + 1)],
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
            read
        }
    });
    assert!(still_waiting(&newer, Duration::from_millis(300)).await);
    older_tx
        .execute(
            &format!("UPDATE {table} SET balance = balance + 1 WHERE id = 1"),
            &[],
        )
        .await
        .unwrap();
    older_tx.commit().await.unwrap();
    assert_eq!(
        newer.await.unwrap(),
        2,
        "the newer holder read the older's write"
    );
    assert_eq!(balance(&setup, &table).await, 3);
    // And the older token is refused from then on.
    let mut late = connect_db().await;
    let tx = late.transaction().await.unwrap();
    assert!(
        postgres::fence(&tx, &resource, 21)
            .await
            .unwrap_err()
            .is_stale()
    );
    drop(tx);

    // 3. A newer token that rolls back was never recorded: the table remembers what
    //    committed, so a waiting older one then passes.
    let mut rolled = connect_db().await;
    let rolled_tx = rolled.transaction().await.unwrap();
    postgres::fence(&rolled_tx, &resource, 40).await.unwrap();
    let waiting = tokio::spawn({
        let resource = Arc::clone(&resource);
        async move {
            let mut db = connect_db().await;
            let tx = db.transaction().await.unwrap();
            let fenced = postgres::fence(&tx, &resource, 35).await;
            tx.commit().await.unwrap();
            fenced
        }
    });
    assert!(still_waiting(&waiting, Duration::from_millis(300)).await);
    rolled_tx.rollback().await.unwrap();
    waiting.await.unwrap().unwrap();
    assert_eq!(
        postgres::newest_token(&setup, &resource).await.unwrap(),
        Some(35)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_table_is_created_once_however_often_and_however_concurrently_it_is_asked_for() {
    // A database of its own, which starts without the table.
    let admin = connect_db().await;
    let database = format!("fences_{}", uuid::Uuid::new_v4().simple());
    admin
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .unwrap();
    let config = common::shared_postgres().config_for(&database);
    let db = connect_to(&config).await;
    let missing = postgres::fence(&db, "x", 1).await.unwrap_err();
    match &missing {
        FenceError::Postgres(error) => assert_eq!(
            error.code(),
            Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }

    // Eight connections at once, then again one after another, then the migration text
    // as a migration tool would run it.
    let mut creations = Vec::new();
    for _ in 0..8 {
        let config = config.clone();
        creations.push(tokio::spawn(async move {
            let db = connect_to(&config).await;
            postgres::create_table(&db).await
        }));
    }
    for creation in creations {
        creation.await.unwrap().unwrap();
    }
    for _ in 0..3 {
        postgres::create_table(&db).await.unwrap();
    }
    db.batch_execute(postgres::MIGRATION).await.unwrap();
    let columns: Vec<(String, String)> = db
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_name = $1 ORDER BY ordinal_position",
            &[&postgres::TABLE],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(
        columns,
        [
            ("resource".to_owned(), "text".to_owned()),
            ("token".to_owned(), "numeric".to_owned())
        ]
    );
    let tables: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = $1",
            &[&postgres::TABLE],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);
    postgres::fence(&db, "x", 1).await.unwrap();
    // The table keeps tokens honest for other clients too.
    let zero = db
        .execute("INSERT INTO holdlock_fences VALUES ('y', 0)", &[])
        .await;
    assert!(zero.is_err(), "token 0 is not a token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn odd_resource_names_are_parameters_never_sql() {
    let mut db = db().await;
    let prefix = common::unique("odd");
    let long = format!("{prefix}:{}", "é".repeat(400));
    let longest: String = {
        let mut name = long.clone();
        while name.len() < postgres::MAX_RESOURCE_LEN {
            name.push('x');
        }
        name
    };
    assert_eq!(longest.len(), postgres::MAX_RESOURCE_LEN);
    let names = [
        format!("{prefix}'; DROP TABLE holdlock_fences; --"),
        format!("{prefix}\"); DELETE FROM holdlock_fences; --"),
        format!("{prefix}:счёт:7 🦀 ℵ₀"),
        format!("{prefix}\\' OR '1'='1"),
        format!("{prefix} $1 %s {{}} $$ $tag$"),
        format!("{prefix}\n\ttabs and\r\nnewlines"),
        format!("{prefix}:Case"),
        format!("{prefix}:case"),
        format!("{prefix}:case "),
        long,
        longest.clone(),
    ];
    for (index, name) in names.iter().enumerate() {
        let token = 100 + index as u64;
        let tx = db.transaction().await.unwrap();
        postgres::fence(&tx, name, token).await.unwrap();
        tx.commit().await.unwrap();
    }
    // Each name is its own resource, recorded as given, and the table is whole.
    for (index, name) in names.iter().enumerate() {
        assert_eq!(
            postgres::newest_token(&db, name).await.unwrap(),
            Some(100 + index as u64),
            "{name:?}"
        );
        let stored: String = db
            .query_one(
                "SELECT resource FROM holdlock_fences WHERE resource = $1",
                &[name],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(&stored, name);
    }
    let recorded: i64 = db
        .query_one(
            "SELECT count(*) FROM holdlock_fences WHERE starts_with(resource, $1)",
            &[&prefix],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(recorded, names.len() as i64);

    // What PostgreSQL could not take, or a lock never hands out, is refused up front.
    let too_long = format!("{longest}x");
    for bad in ["", "nul\0inside", too_long.as_str()] {
        match postgres::fence(&db, bad, 1).await {
            Err(FenceError::InvalidResource { resource, reason }) => {
                assert_eq!(resource, bad);
                assert!(!reason.is_empty());
            }
            other => panic!("{bad:?}: {other:?}"),
        }
        assert!(matches!(
            postgres::newest_token(&db, bad).await,
            Err(FenceError::InvalidResource { .. })
        ));
    }
    assert!(matches!(
        postgres::fence(&db, &names[0], 0).await,
        Err(FenceError::InvalidToken { token: 0, .. })
    ));
    // Nothing was sent for them: the connection's transaction state is untouched.
    let tx = db.transaction().await.unwrap();
    postgres::fence(&tx, &names[0], 100).await.unwrap();
    tx.commit().await.unwrap();
}
