//! The protected side of fencing: writes that refuse a token older than one already seen.
//!
//! A holder that pauses past its lease (GC, swap, `SIGSTOP`) wakes up believing it
//! still holds the lock. Fencing tokens catch it: every fresh acquisition of a fenced
//! lock draws a strictly larger token (see [`LockGuard::fencing_token`]), and the
//! resource accepts a write only if its token is not older than the newest it has
//! seen. This module is that check for a value kept in Redis: the value lives in a
//! hash (`value`, `token`) changed only by a Lua script, which compares tokens exactly
//! for every `u64`. A register remembers its newest token only as long as its server
//! keeps its data: keep registers that matter on a server with persistence.
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
//! let guard = client.lock_with("report", LockOptions::fenced()).await?.unwrap();
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
    let inner = &client.inner;
    inner.check_running()?;
    if token == 0 {
        return Err(LockError::InvalidOption {
            option: "token",
            reason: "fencing tokens start at 1".to_owned(),
        });
    }
    let value = Value::from(value.into());
    match inner
        .scripts
        .fence_set(&inner.redis, key, value, token)
        .await?
    {
        Ok(()) => Ok(()),
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
/// let guard = client.lock_with("stock:7", holdlock::LockOptions::fenced()).await?.unwrap();
/// holdlock::fence::set_with(&guard, "stock:7:count", "41").await?;
/// # Ok(()) }
/// ```
pub async fn set_with(guard: &LockGuard, key: &str, value: impl Into<String>) -> Result<()> {
    let token = guard.fencing_token().ok_or(LockError::InvalidOption {
        option: "token",
        reason: "the guard was taken without fencing (use LockOptions::fenced)".to_owned(),
    })?;
    set(&LockClient::of(guard), key, value, token).await
}

/// Reads a value written with [`set`]; `None` if `key` does not exist.
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
    let inner = &client.inner;
    inner.check_running()?;
    let (value, token): (Option<String>, Option<u64>) = inner
        .redis
        .hmget(key, vec!["value", "token"])
        .await
        .map_err(|error| LockError::from_redis(error, key))?;
    match (value, token) {
        (Some(value), Some(token)) => Ok(Some(Fenced { value, token })),
        (None, None) => Ok(None),
        _ => Err(LockError::Protocol(format!(
            "`{key}` is not a fenced value"
        ))),
    }
}

/// The newest token `key` has accepted (0 if none).
///
/// # Errors
/// As [`get`].
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// let newest = holdlock::fence::newest_token(&client, "stock:7").await?;
/// # Ok(()) }
/// ```
pub async fn newest_token(client: &LockClient, key: &str) -> Result<u64> {
    Ok(get(client, key).await?.map_or(0, |fenced| fenced.token))
}
