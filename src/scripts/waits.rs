//! The wait-for edges of the deadlock check (see `deadlock.rs`): one string
//! per waiting owner, `<prefix>waits:<owner>`, written with an expiry while a long wait
//! lasts, read by the other waiters' walks, and taken down when the wait ends.

use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{HashesInterface, KeysInterface};
use fred::types::Expiration;

use super::{LockNames, operator};
use crate::error::Result;

/// Records `record` at `key` for `expiry` (whole milliseconds, at least one).
pub(crate) async fn write_wait(
    client: &Client,
    key: &str,
    record: &str,
    expiry: Duration,
) -> Result<()> {
    let millis = i64::try_from(expiry.as_millis()).unwrap_or(i64::MAX).max(1);
    client
        .set::<(), _, _>(key, record, Some(Expiration::PX(millis)), None, false)
        .await?;
    Ok(())
}

/// The record at `key`, if any.
pub(crate) async fn read_wait(client: &Client, key: &str) -> Result<Option<String>> {
    Ok(client.get(key).await?)
}

/// Deletes the edge at `key`: a plain `DEL`, not a compare-and-delete script, as it
/// comes at the end of every long wait (a crowd on one hot lock, whose waits are all
/// long, would pay a script per acquisition). Should a later wait of the same owner
/// have written its edge before this lands, the edge is gone until that wait's next
/// check writes it again: a cycle is found one check later, never falsely.
pub(crate) async fn clear_wait(client: &Client, key: &str) -> Result<()> {
    client.del::<i64, _>(key).await?;
    Ok(())
}

/// The owners a waiter for the lock `names` waits for: its holders (`HKEYS`, as
/// [`operator::owners_waited_for`] reads them).
pub(crate) async fn read_holders(client: &Client, names: &LockNames) -> Result<Vec<String>> {
    let fields: Vec<String> = client.hkeys(&*names.key).await?;
    Ok(
        operator::owners_waited_for(names, fields.iter().map(String::as_str))
            .into_iter()
            .map(str::to_owned)
            .collect(),
    )
}
