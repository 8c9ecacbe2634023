//! The protected side of fencing: writes that refuse a token older than one already seen.
//!
//! A holder that pauses past its lease (GC, swap, `SIGSTOP`) wakes up believing it
//! still holds the lock. Fencing tokens catch it: every fresh acquisition of a fenced
//! lock draws a strictly larger token (see [`LockGuard::fencing_token`]), and the
//! resource accepts a write only if its token is not older than the newest it has
//! seen. This module is that check for a value kept in Redis: the value lives in a
//! hash (`value`, `token`) changed only by a Lua script, which compares tokens exactly
//! for every `u64`. For a read-modify-write, read with [`read`]: it records the
//! reader's token, so an overtaken holder cannot write back a value it computed from
//! an older read (with a plain read, its late write could still land between the new
//! holder's read and write, and one update would be lost). A register remembers its
//! newest token only as long as its server keeps its data: keep registers that matter
//! on a server with persistence.
//!
//! The same check in SQL keeps the newest token in a column of the row it protects:
//!
//! ```sql
//! UPDATE accounts SET balance = $1, fence = $2
//!  WHERE id = $3 AND fence <= $2;   -- 0 rows updated: the token is stale
//! ```
//!
//! # Examples
//! ```no_run
//! # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
//! use holdlock::{fence, LockOptions};
//!
//! let guard = client.lock("report").options(LockOptions::fenced()).await?.unwrap();
//! let token = guard.fencing_token().unwrap();
//! fence::set(&client, "report:latest", "v2", token).await?; // Err(StaleToken) if overtaken
//! let current = fence::get(&client, "report:latest").await?;
//! # Ok(()) }
//! ```
//!
//! [`LockGuard::fencing_token`]: crate::LockGuard::fencing_token

use fred::interfaces::HashesInterface;
use fred::types::Value;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;

/// A value written with [`set`], and the token it was written with.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// if let Some(fenced) = holdlock::fence::get(&client, "report:latest").await? {
///     println!("{} (token {})", fenced.value, fenced.token);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fenced {
    /// The value.
    pub value: String,
    /// The newest token the key has accepted.
    pub token: u64,
}

/// Writes `value` to `key` if `token` is not older than the newest token `key` has
/// seen; otherwise changes nothing.
///
/// # Errors
/// [`LockError::StaleToken`] if a newer token has written to `key`;
/// [`LockError::WrongType`] if `key` holds something other than a fenced hash;
/// [`LockError::InvalidOption`] for token 0 (never handed out);
/// [`LockError::Redis`], [`LockError::Shutdown`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// holdlock::fence::set(&client, "stock:7", "41", 12).await?;
/// # Ok(()) }
/// ```
pub async fn set(
    client: &LockClient,
    key: &str,
    value: impl Into<String>,
    token: u64,
) -> Result<()> {
    fenced(client, key, token, Some(Value::from(value.into())))
        .await
        .map(drop)
}

/// Reads `key` as the holder of `token`, and from then on refuses writes with older
/// tokens. Use it for the read of a read-modify-write: a holder overtaken after this
/// read can no longer write back a value computed from what it read before, so no
/// update is lost. (A plain [`get`] records nothing.)
///
/// Returns the value, or `None` if nothing was written yet.
///
/// # Errors
/// As [`set`]: [`LockError::StaleToken`] if a newer token has read or written `key`.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::{fence, LockOptions};
///
/// let guard = client.lock("stock:7").options(LockOptions::fenced()).await?.unwrap();
/// let token = guard.fencing_token().unwrap();
/// let stock: u64 = fence::read(&client, "stock:7:count", token)
///     .await?
///     .and_then(|value| value.parse().ok())
///     .unwrap_or(0);
/// fence::set(&client, "stock:7:count", (stock + 1).to_string(), token).await?;
/// # Ok(()) }
/// ```
pub async fn read(client: &LockClient, key: &str, token: u64) -> Result<Option<String>> {
    fenced(client, key, token, None).await
}

/// Reads (`value: None`) or writes `key` through `lua/fence.lua`.
async fn fenced(
    client: &LockClient,
    key: &str,
    token: u64,
    value: Option<Value>,
) -> Result<Option<String>> {
    let engine = client.engine();
    engine.check_running()?;
    if token == 0 {
        return Err(LockError::InvalidOption {
            option: "token",
            reason: "fencing tokens start at 1".to_owned(),
        });
    }
    match engine.protocol().fence(key, token, value).await? {
        Ok(value) => Ok(value),
        Err(newest) => Err(LockError::StaleToken {
            presented: token,
            newest,
        }),
    }
}

/// Like [`set`], with the token of `guard`.
///
/// # Errors
/// As [`set`], and [`LockError::InvalidOption`] if the guard has no fencing token.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let guard = client.lock("stock:7").options(holdlock::LockOptions::fenced()).await?.unwrap();
/// holdlock::fence::set_with(&guard, "stock:7:count", "41").await?;
/// # Ok(()) }
/// ```
pub async fn set_with(guard: &LockGuard, key: &str, value: impl Into<String>) -> Result<()> {
    set(&LockClient::of(guard), key, value, token_of(guard)?).await
}

/// Like [`read`], with the token of `guard`.
///
/// # Errors
/// As [`read`], and [`LockError::InvalidOption`] if the guard has no fencing token.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let guard = client.lock("stock:7").options(holdlock::LockOptions::fenced()).await?.unwrap();
/// let count = holdlock::fence::read_with(&guard, "stock:7:count").await?;
/// # Ok(()) }
/// ```
pub async fn read_with(guard: &LockGuard, key: &str) -> Result<Option<String>> {
    read(&LockClient::of(guard), key, token_of(guard)?).await
}

fn token_of(guard: &LockGuard) -> Result<u64> {
    guard.fencing_token().ok_or(LockError::InvalidOption {
        option: "token",
        reason: "the guard was taken without fencing (use LockOptions::fenced)".to_owned(),
    })
}

/// Reads a value written with [`set`]; `None` if nothing was written to `key` (a
/// fenced [`read`] may have recorded a token there all the same). Records no token.
///
/// # Errors
/// [`LockError::WrongType`], [`LockError::Redis`], [`LockError::Shutdown`],
/// [`LockError::Protocol`] if the hash lacks its fields.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let current = holdlock::fence::get(&client, "stock:7").await?;
/// # Ok(()) }
/// ```
pub async fn get(client: &LockClient, key: &str) -> Result<Option<Fenced>> {
    client.engine().check_running()?;
    let (value, token): (Option<String>, Option<u64>) = client
        .redis()
        .hmget(key, vec!["value", "token"])
        .await
        .map_err(|error| LockError::from_redis(error, key))?;
    match (value, token) {
        (Some(value), Some(token)) => Ok(Some(Fenced { value, token })),
        (None, _) => Ok(None),
        (Some(_), None) => Err(LockError::Protocol(format!(
            "`{key}` is not a fenced value"
        ))),
    }
}

/// The newest token `key` has accepted, by a write or a fenced read (0 if none).
///
/// # Errors
/// [`LockError::WrongType`], [`LockError::Redis`], [`LockError::Shutdown`],
/// [`LockError::Protocol`] if the token is not a number.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let newest = holdlock::fence::newest_token(&client, "stock:7").await?;
/// # Ok(()) }
/// ```
pub async fn newest_token(client: &LockClient, key: &str) -> Result<u64> {
    client.engine().check_running()?;
    let token: Option<u64> = client
        .redis()
        .hget(key, "token")
        .await
        .map_err(|error| LockError::from_redis(error, key))?;
    Ok(token.unwrap_or(0))
}
