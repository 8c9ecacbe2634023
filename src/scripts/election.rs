//! An election's scripts (`lua/election_*.lua`): the leader's record, kept in the hash
//! of the election's fair lock, and the announcements of its changes.

use fred::clients::Client;
use fred::types::Value;

use super::{Delivery, Scripts, integer, protocol, unsigned};
use crate::error::Result;

script!(ELECT = "election_elect.lua");
script!(RESIGN = "election_resign.lua");
script!(LEADER = "election_leader.lua");

/// A leader's record, as `lua/election_leader.lua` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderRecord {
    pub(crate) owner: String,
    pub(crate) data: String,
    /// When it was elected: the server's clock, microseconds since the Unix epoch.
    pub(crate) since_us: u64,
    pub(crate) token: u64,
    /// The lease left on its hold, in milliseconds (`None`: no expiry).
    pub(crate) pttl_ms: Option<u64>,
}

impl Scripts {
    /// Whether changes are announced on shard channels (`SPUBLISH`), so that whoever
    /// listens must `SSUBSCRIBE`.
    pub(crate) fn sharded(&self) -> bool {
        self.publish == "spublish"
    }

    /// Records `owner`, which holds the election's fair lock `key`, as its leader with
    /// `data`, announcing it on `channel`: `(since, token)`, or `None` if the owner does
    /// not hold the lock (`lua/election_elect.lua`; idempotent).
    pub(crate) async fn elect(
        &self,
        client: &Client,
        key: &str,
        channel: &str,
        owner: &str,
        data: &str,
    ) -> Result<Option<(u64, u64)>> {
        let args = || {
            vec![
                owner.into(),
                data.into(),
                Value::from_static_str(self.publish),
                channel.into(),
            ]
        };
        let reply = self
            .eval(client, &ELECT, &[key], &args, Delivery::Retried)
            .await?;
        match &reply {
            Value::Array(items) if items.len() == 2 => {
                Ok(Some((unsigned(&items[0])?, unsigned(&items[1])?)))
            }
            _ if integer(&reply)? == 0 => Ok(None),
            _ => Err(protocol(&reply)),
        }
    }

    /// Deletes `owner`'s record as the leader of the election `key` and announces that
    /// on `channel`, if the record names it; whether it did
    /// (`lua/election_resign.lua`; idempotent).
    pub(crate) async fn resign(
        &self,
        client: &Client,
        key: &str,
        channel: &str,
        owner: &str,
    ) -> Result<bool> {
        let args = || {
            vec![
                owner.into(),
                Value::from_static_str(self.publish),
                channel.into(),
            ]
        };
        let reply = self
            .eval(client, &RESIGN, &[key], &args, Delivery::Retried)
            .await?;
        Ok(integer(&reply)? == 1)
    }

    /// The server's clock (microseconds) and the leader of the election `key`, if one
    /// leads and still holds the election's lock (`lua/election_leader.lua`).
    pub(crate) async fn leader(
        &self,
        client: &Client,
        key: &str,
    ) -> Result<(u64, Option<LeaderRecord>)> {
        let reply = self
            .eval(client, &LEADER, &[key], &Vec::new, Delivery::Retried)
            .await?;
        let Value::Array(items) = &reply else {
            return Err(protocol(&reply));
        };
        match items.as_slice() {
            [now] => Ok((unsigned(now)?, None)),
            [now, owner, data, since, token, pttl] => {
                let text = |value: &Value| value.as_string().ok_or_else(|| protocol(&reply));
                let record = LeaderRecord {
                    owner: text(owner)?,
                    data: text(data)?,
                    since_us: unsigned(since)?,
                    token: unsigned(token)?,
                    pttl_ms: u64::try_from(integer(pttl)?).ok(),
                };
                Ok((unsigned(now)?, Some(record)))
            }
            _ => Err(protocol(&reply)),
        }
    }
}
