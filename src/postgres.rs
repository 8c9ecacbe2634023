//! Fencing where the data is: a PostgreSQL transaction that refuses a stale token.
//!
//! [`holdlock::fence`](crate::fence) checks fencing tokens on values kept in Redis. Data
//! kept in PostgreSQL needs the check in PostgreSQL, in the transaction that writes it:
//! a holder that stalled past its lease, while another instance took the lock and
//! wrote, must not commit its stale read-modify-write afterwards. [`fence`] is that
//! check. In the caller's transaction, one statement records the lock's token for a
//! *resource* (any name: the lock's, a table and key, ...) in a small table of its own,
//! `holdlock_fences`, and fails with [`FenceError::StaleToken`] if a newer token has
//! been recorded for it. The user's own tables are not changed. The check and the
//! writes commit or roll back together.
//!
//! ```text
//!  holder A (token 5)          holder B (token 7)            holdlock_fences
//!  BEGIN; read balance
//!  ... paused past its lease ...
//!                              BEGIN; fence(7); read; write;
//!                              COMMIT                        resource -> 7
//!  fence(5): StaleToken { presented: 5, newest: 7 }; ROLLBACK
//! ```
//!
//! **Call [`fence`] first in the transaction, before you read what you will write**, as
//! [`fence::read`](crate::fence::read) is the read of a read-modify-write in Redis. The
//! statement locks the resource's row until the transaction ends, so an older holder
//! can neither commit nor fence between this one's read and its write. An older holder
//! already inside its transaction is waited for, and under `READ COMMITTED` (the
//! default) what it committed is what this one reads next; under `REPEATABLE READ` or
//! `SERIALIZABLE` PostgreSQL fails this statement with a serialization failure
//! (`40001`) instead, retried as any such transaction is. Several resources in one
//! transaction: fence them in one order (sorted) everywhere, as `lock_all` takes its
//! locks, or two transactions may each wait for the other's row (PostgreSQL then fails
//! one of them with a deadlock error, `40P01`).
//!
//! # The table and the statement
//!
//! The table is [`MIGRATION`] (run it with your migrations, or call [`create_table`]):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS holdlock_fences (
//!     resource text PRIMARY KEY,
//!     token numeric(20, 0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)
//! );
//! ```
//!
//! A token is a `u64` and PostgreSQL's `bigint` is signed, so the table keeps tokens as
//! `numeric(20, 0)`, which holds every `u64` exactly and compares it correctly. The
//! token goes over the wire as its decimal text, the digits [`LockGuard::fencing_token`],
//! `holdlock inspect` and `holdlock list` show, and a row reads as it is: no mapping to
//! get wrong by hand. The check is [`FENCE`], one upsert that only moves forward:
//!
//! ```sql
//! INSERT INTO holdlock_fences AS recorded (resource, token)
//! VALUES ($1, $2::text::numeric)
//! ON CONFLICT (resource) DO UPDATE SET token = GREATEST(recorded.token, EXCLUDED.token)
//! RETURNING recorded.token::text
//! ```
//!
//! It returns the newest token recorded for `$1`, the resource, once `$2`, the token as
//! text, is counted: the caller's token means the check passed (an equal token passes,
//! so a holder's several writes under one hold, and its re-entries, which share the
//! token, all pass); a larger one means a newer holder has been there, and the
//! transaction must be rolled back. It always takes the row's lock (a stale caller's
//! update changes nothing), so two transactions that race with tokens serialize on the
//! row. With sqlx, or any other client, run the same statement and compare:
//!
//! ```text
//! let newest: String = sqlx::query_scalar(FENCE).bind(resource).bind(token.to_string())
//!     .fetch_one(&mut *tx).await?;
//! if newest != token.to_string() { /* stale: return an error, which rolls tx back */ }
//! ```
//!
//! [`fence`] does one more thing on a stale token: it makes the transaction fail (a
//! `DO` block that raises an error), so that even a caller that ignored the error could
//! not write in it any more, and its `COMMIT` rolls back. To go on with other work in
//! the same transaction after a stale token, fence inside a savepoint
//! (`tx.savepoint("fence")`).
//!
//! # Why tokio-postgres
//!
//! The helpers take any [`GenericClient`] of [tokio-postgres], which is re-exported
//! here as [`tokio_postgres`]: a [`Transaction`] above all, and a [`Client`] for the
//! table. It is the client that deadpool-postgres and bb8-postgres pool (a pooled
//! connection derefs to a `Client`, whose `transaction()` gives the `Transaction` to
//! pass), so one helper serves all three. sqlx users run [`FENCE`] themselves, as
//! above: the statement is the whole check.
//!
//! [tokio-postgres]: https://docs.rs/tokio-postgres
//! [`GenericClient`]: tokio_postgres::GenericClient
//! [`Transaction`]: tokio_postgres::Transaction
//! [`Client`]: tokio_postgres::Client
//! [`LockGuard::fencing_token`]: crate::LockGuard::fencing_token
//!
//! # Examples
//! A transfer of 100 from account 7, under its lock, taken fenced:
//!
//! ```no_run
//! # async fn dox(client: holdlock::LockClient, mut db: holdlock::postgres::tokio_postgres::Client)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use holdlock::{LockOptions, postgres};
//!
//! postgres::create_table(&db).await?; // once, or MIGRATION in your migrations
//! let guard = client.lock("account:7").options(LockOptions::fenced()).await?.unwrap();
//! let token = guard.fencing_token().unwrap();
//! let tx = db.transaction().await?;
//! postgres::fence(&tx, "account:7", token).await?; // first: Err(StaleToken) if overtaken
//! let balance: i64 = tx.query_one("SELECT balance FROM accounts WHERE id = 7", &[]).await?.get(0);
//! tx.execute("UPDATE accounts SET balance = $1 WHERE id = 7", &[&(balance - 100)]).await?;
//! tx.commit().await?;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! The same in a critical section ([`Acquire::run`](crate::Acquire::run)), whose body
//! gets the guard as an `Arc`:
//!
//! ```no_run
//! # async fn dox(client: holdlock::LockClient, mut db: holdlock::postgres::tokio_postgres::Client)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use holdlock::{LockOptions, postgres};
//!
//! let db = &mut db;
//! let moved = client
//!     .lock("account:7")
//!     .options(LockOptions::fenced())
//!     .run(|guard| async move {
//!         let token = guard.fencing_token().expect("taken fenced");
//!         let tx = db.transaction().await?;
//!         postgres::fence(&tx, "account:7", token).await?;
//!         tx.execute("UPDATE accounts SET balance = balance - 100 WHERE id = 7", &[]).await?;
//!         tx.commit().await?;
//!         Ok::<_, postgres::FenceError>(())
//!     })
//!     .await?; // None only if the lock could not be had within the options' wait
//! if let Some(outcome) = moved {
//!     outcome?; // Err(FenceError::StaleToken { .. }) if another holder got there first
//! }
//! # Ok(()) }
//! ```

use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// The tokio-postgres crate the helpers take clients of, for code that has no
/// dependency of its own on it (or to be sure of using the same version).
///
/// # Examples
/// ```no_run
/// # async fn dox() -> Result<(), holdlock::postgres::tokio_postgres::Error> {
/// use holdlock::postgres::tokio_postgres::{self, NoTls};
/// let (db, connection) = tokio_postgres::connect("host=127.0.0.1 user=app", NoTls).await?;
/// tokio::spawn(connection);
/// # Ok(()) }
/// ```
pub use tokio_postgres;

/// The table the fences are kept in (see [`MIGRATION`]), found through the session's
/// `search_path` as any unqualified table is.
///
/// # Examples
/// ```
/// assert_eq!(holdlock::postgres::TABLE, "holdlock_fences");
/// ```
pub const TABLE: &str = "holdlock_fences";

/// The table [`fence`] needs, as one idempotent statement for your migrations (or run
/// by [`create_table`]): a row per resource, its newest token as `numeric(20, 0)`,
/// exact for every `u64`.
///
/// # Examples
/// ```
/// assert!(holdlock::postgres::MIGRATION.starts_with("CREATE TABLE IF NOT EXISTS holdlock_fences"));
/// ```
pub const MIGRATION: &str = "CREATE TABLE IF NOT EXISTS holdlock_fences (
    resource text PRIMARY KEY,
    token numeric(20, 0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)
)";

/// The check [`fence`] runs, for clients other than tokio-postgres (sqlx): `$1` the
/// resource, `$2` the token as decimal text; one row, the newest token recorded, as
/// text. The caller's token passed; a larger one means a newer holder has been there,
/// and the transaction must be rolled back. See the [module](self) documentation.
///
/// # Examples
/// ```
/// assert!(holdlock::postgres::FENCE.contains("ON CONFLICT (resource)"));
/// ```
pub const FENCE: &str = "INSERT INTO holdlock_fences AS recorded (resource, token)
VALUES ($1, $2::text::numeric)
ON CONFLICT (resource) DO UPDATE SET token = GREATEST(recorded.token, EXCLUDED.token)
RETURNING recorded.token::text";

/// The newest token recorded for `$1`, as text (no row: none).
const NEWEST: &str = "SELECT token::text FROM holdlock_fences WHERE resource = $1";

/// The longest resource name, in bytes. A primary key's index entry must fit in a
/// third of a page (about 2,700 bytes); a kibibyte keeps well clear of it.
///
/// # Examples
/// ```
/// assert_eq!(holdlock::postgres::MAX_RESOURCE_LEN, 1024);
/// ```
pub const MAX_RESOURCE_LEN: usize = 1024;

/// The key of the transaction-scoped advisory lock [`create_table`] takes, so that
/// concurrent `CREATE TABLE IF NOT EXISTS` never race in the catalog: the bytes of
/// `holdlock`.
const CREATE_LOCK: i64 = 0x686f_6c64_6c6f_636b;

/// What can go wrong with a fence.
///
/// # Examples
/// ```no_run
/// # async fn dox(tx: holdlock::postgres::tokio_postgres::Transaction<'_>) {
/// use holdlock::postgres::{self, FenceError};
/// match postgres::fence(&tx, "account:7", 42).await {
///     Ok(()) => { /* write, then commit */ }
///     Err(FenceError::StaleToken { newest, .. }) => eprintln!("overtaken by token {newest}"),
///     Err(other) => eprintln!("{other}"),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// A newer token has been recorded for the resource: a newer holder of the lock
    /// has been there. Roll the transaction back (dropping it does; [`fence`] has made
    /// it fail already, so its writes could not commit anyway).
    #[error("stale fencing token {presented} for `{resource}`: {newest} has been recorded")]
    StaleToken {
        /// The resource.
        resource: String,
        /// The token the caller presented.
        presented: u64,
        /// The newest token recorded for the resource.
        newest: u64,
    },

    /// The resource name is not usable: empty, longer than [`MAX_RESOURCE_LEN`] bytes,
    /// or with a NUL character (which PostgreSQL's `text` cannot hold). Nothing was
    /// sent.
    #[error("invalid fenced resource {resource:?}: {reason}")]
    InvalidResource {
        /// The name as given.
        resource: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// The token is not one a lock hands out (0). Nothing was sent.
    #[error("invalid fencing token {token}: {reason}")]
    InvalidToken {
        /// The token as given.
        token: u64,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// PostgreSQL refused the statement (no table: run [`MIGRATION`]; a serialization
    /// failure or deadlock: retry the transaction), or the connection failed.
    #[error("postgres error: {0}")]
    Postgres(#[from] tokio_postgres::Error),

    /// PostgreSQL answered with something that is not a token (a table of another
    /// shape under the same name).
    #[error("unexpected reply from postgres: {0}")]
    UnexpectedReply(String),
}

impl FenceError {
    /// True for [`FenceError::StaleToken`]: a newer holder has been there.
    ///
    /// # Examples
    /// ```
    /// use holdlock::postgres::FenceError;
    /// let stale = FenceError::StaleToken { resource: "a".into(), presented: 1, newest: 2 };
    /// assert!(stale.is_stale());
    /// ```
    pub fn is_stale(&self) -> bool {
        matches!(self, FenceError::StaleToken { .. })
    }
}

/// Checks `token` for `resource` in the transaction `client` and records it: passes if
/// no newer token has been recorded for `resource` (an equal one passes), else fails
/// with [`FenceError::StaleToken`] and makes the transaction fail, so that it cannot
/// commit. Call it first in the transaction, before reading what you will write; the
/// resource's row stays locked until the transaction ends. One round trip (two on a
/// stale token). Runs [`FENCE`].
///
/// Pass the transaction ([`Transaction`](tokio_postgres::Transaction)): on a
/// [`Client`](tokio_postgres::Client) outside a transaction the check commits on its
/// own, apart from the writes it should guard.
///
/// # Errors
/// [`FenceError::StaleToken`] if a newer token has been recorded for `resource`;
/// [`FenceError::InvalidResource`], [`FenceError::InvalidToken`] (before anything is
/// sent); [`FenceError::Postgres`] (no table: run [`MIGRATION`]; a serialization
/// failure or deadlock: retry the transaction); [`FenceError::UnexpectedReply`].
///
/// # Cancel safety
/// The statement runs inside the caller's transaction, so dropping the future commits
/// nothing: the check may or may not have run (and locked the row) in the still-open
/// transaction. Roll it back (drop it) rather than commit after a cancelled fence.
///
/// # Examples
/// ```no_run
/// # async fn dox(guard: holdlock::LockGuard, mut db: holdlock::postgres::tokio_postgres::Client)
/// # -> Result<(), holdlock::postgres::FenceError> {
/// let tx = db.transaction().await?;
/// holdlock::postgres::fence(&tx, "account:7", guard.fencing_token().unwrap()).await?;
/// tx.execute("UPDATE accounts SET balance = balance + 5 WHERE id = 7", &[]).await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
pub async fn fence<C>(client: &C, resource: &str, token: u64) -> Result<(), FenceError>
where
    C: GenericClient + Sync,
{
    validate_resource(resource)?;
    if token == 0 {
        return Err(FenceError::InvalidToken {
            token,
            reason: "fencing tokens start at 1",
        });
    }
    let presented = token.to_string();
    let row = client
        .query_typed_one(FENCE, &[(&resource, Type::TEXT), (&presented, Type::TEXT)])
        .await?;
    let newest = parse_token(row.try_get(0)?)?;
    if newest == token {
        return Ok(());
    }
    // Stale. Make the transaction fail, so that nothing it writes can commit: its
    // COMMIT rolls back. The text holds only digits of ours.
    let _ = client
        .batch_execute(&format!(
            "DO $$BEGIN RAISE EXCEPTION 'holdlock: stale fencing token {token}: {newest} \
             has been recorded'; END$$"
        ))
        .await;
    Err(FenceError::StaleToken {
        resource: resource.to_owned(),
        presented: token,
        newest,
    })
}

/// The newest token recorded for `resource` by [`fence`] (committed, or by this
/// transaction); `None` if none. Takes no lock.
///
/// # Errors
/// [`FenceError::InvalidResource`]; [`FenceError::Postgres`];
/// [`FenceError::UnexpectedReply`].
///
/// # Cancel safety
/// Cancel safe: it only reads.
///
/// # Examples
/// ```no_run
/// # async fn dox(db: holdlock::postgres::tokio_postgres::Client) -> Result<(), holdlock::postgres::FenceError> {
/// let newest: Option<u64> = holdlock::postgres::newest_token(&db, "account:7").await?;
/// # Ok(()) }
/// ```
pub async fn newest_token<C>(client: &C, resource: &str) -> Result<Option<u64>, FenceError>
where
    C: GenericClient + Sync,
{
    validate_resource(resource)?;
    let row = client
        .query_typed_opt(NEWEST, &[(&resource, Type::TEXT)])
        .await?;
    match row {
        Some(row) => parse_token(row.try_get(0)?).map(Some),
        None => Ok(None),
    }
}

/// Creates the table [`fence`] needs ([`MIGRATION`]) unless it exists; idempotent, and
/// safe to call from many processes at once (it takes a transaction-scoped advisory
/// lock first, so that concurrent creations do not race in the catalog).
///
/// # Errors
/// [`FenceError::Postgres`]: for instance the role may not create tables.
///
/// # Cancel safety
/// On a [`Client`](tokio_postgres::Client) its two statements run as one implicit
/// transaction: dropped, the table was created or not, never half. On a
/// [`Transaction`](tokio_postgres::Transaction), as the transaction ends.
///
/// # Examples
/// ```no_run
/// # async fn dox(db: holdlock::postgres::tokio_postgres::Client) -> Result<(), holdlock::postgres::FenceError> {
/// holdlock::postgres::create_table(&db).await?;
/// # Ok(()) }
/// ```
pub async fn create_table<C>(client: &C) -> Result<(), FenceError>
where
    C: GenericClient + Sync,
{
    client
        .batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({CREATE_LOCK}); {MIGRATION};"
        ))
        .await?;
    Ok(())
}

/// Checks a resource name before anything is sent.
fn validate_resource(resource: &str) -> Result<(), FenceError> {
    let reason = if resource.is_empty() {
        "it is empty"
    } else if resource.len() > MAX_RESOURCE_LEN {
        "it is longer than MAX_RESOURCE_LEN (1024 bytes)"
    } else if resource.contains('\0') {
        "it contains a NUL character, which PostgreSQL text cannot hold"
    } else {
        return Ok(());
    };
    Err(FenceError::InvalidResource {
        resource: resource.to_owned(),
        reason,
    })
}

/// A token as PostgreSQL returned it (`numeric::text`).
fn parse_token(text: Option<String>) -> Result<u64, FenceError> {
    let text = text.ok_or_else(|| FenceError::UnexpectedReply("a NULL token".to_owned()))?;
    text.parse()
        .map_err(|_| FenceError::UnexpectedReply(format!("token {text:?} is not a u64")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_resources_are_refused_before_anything_is_sent() {
        for (resource, reason) in [
            ("", "empty"),
            ("a\0b", "NUL"),
            (&"x".repeat(MAX_RESOURCE_LEN + 1), "longer"),
        ] {
            match validate_resource(resource) {
                Err(FenceError::InvalidResource { reason: why, .. }) => {
                    assert!(why.contains(reason), "{why}")
                }
                other => panic!("{resource:?}: {other:?}"),
            }
        }
        validate_resource(&"é".repeat(MAX_RESOURCE_LEN / 2)).unwrap();
        validate_resource("'; DROP TABLE holdlock_fences; --").unwrap();
    }

    #[test]
    fn tokens_are_read_exactly_for_every_u64() {
        assert_eq!(parse_token(Some(u64::MAX.to_string())).unwrap(), u64::MAX);
        assert_eq!(parse_token(Some("1".into())).unwrap(), 1);
        assert!(matches!(
            parse_token(Some("1.5".into())),
            Err(FenceError::UnexpectedReply(_))
        ));
        assert!(matches!(
            parse_token(None),
            Err(FenceError::UnexpectedReply(_))
        ));
    }
}
