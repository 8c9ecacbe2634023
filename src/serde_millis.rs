//! Durations as whole milliseconds in serialized data (feature `serde`): the same
//! numbers the CLI's JSON has always shown (`ttl_ms`).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Serializes `Some(duration)` as its whole milliseconds, `None` as null.
pub(crate) fn serialize<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(duration) => {
            serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
        }
        None => serializer.serialize_none(),
    }
}

/// Reads what [`serialize`] wrote.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
}
