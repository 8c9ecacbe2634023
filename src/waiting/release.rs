//! What a release message says, read once for every waiter of the room it reaches.
//!
//! A room is a lock's key, and the messages on its channel come from the scripts of
//! every kind that tells that channel (a read-write lock's two sides; in Redisson's
//! layout, the mutex and the read-write lock of one name share a channel), so a
//! message is read by its shape, not by the room's kind:
//!
//! - `lease <server ms> <lease ms>`: when the hold a fair lock's waiter just took runs
//!   out (`lua/fair_queue.lua`), for the next waiter's client; nobody is woken.
//! - `<owner id> <wait> <server ms>`: a fair lock handed to that wait
//!   (`lua/fair_queue.lua`).
//! - `writer <ms>`: a read-write lock released while a writer waits
//!   (`lua/rw_release.lua`): readers sleep on for `<ms>`.
//! - client ids, comma-separated: a mutex's hand-off (`lua/release.lua`, see
//!   `hand_off.rs`); anything else names nobody and wakes every head.

use std::time::Duration;

use super::named::Handed;

/// A release message, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Release<'m> {
    /// When the hold just taken of a fair lock runs out, by the server's clock.
    LeaseEnds { server_ms: u64, lease_ms: u64 },
    /// Any other message, with what its parts may say.
    Told {
        /// The owner its first word names, if it hands a fair lock to one of its waits.
        owner: &'m [u8],
        handed: Handed,
        /// How long readers sleep on: the lock lets in only a writer.
        writers_only: Option<Duration>,
    },
}

/// How a fair lock's message telling the next waiter's client when the hold just taken
/// runs out starts.
const FAIR_LEASE: &[u8] = b"lease";

/// How a read-write lock's message that lets in only a writer starts.
const FOR_WRITERS: &[u8] = b"writer";

impl<'m> Release<'m> {
    /// Reads the message `text`.
    pub(super) fn read(text: &'m [u8]) -> Self {
        let mut parts = text.splitn(3, |&byte| byte == b' ');
        let owner = parts.next().unwrap_or_default();
        let wait = parts.next().and_then(parse_number);
        let third = parts.next().and_then(parse_number);
        if owner == FAIR_LEASE
            && let Some((server_ms, lease_ms)) = wait.zip(third)
        {
            return Release::LeaseEnds {
                server_ms,
                lease_ms,
            };
        }
        Release::Told {
            owner,
            handed: Handed {
                wait,
                server_ms: third,
            },
            writers_only: wait
                .filter(|_| owner == FOR_WRITERS)
                .map(Duration::from_millis),
        }
    }
}

/// A number in a release message (a fair lock's wait or time, a writer's delay).
fn parse_number(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waiting::named::Handed;

    #[test]
    fn messages_are_read_by_their_shape() {
        assert_eq!(
            Release::read(b"lease 1700 30000"),
            Release::LeaseEnds {
                server_ms: 1700,
                lease_ms: 30000
            }
        );
        let Release::Told {
            owner,
            handed,
            writers_only,
            ..
        } = Release::read(b"c1:t2 7 1700")
        else {
            panic!("a hand-off");
        };
        assert_eq!((owner, writers_only), (&b"c1:t2"[..], None));
        assert_eq!(
            handed,
            Handed {
                wait: Some(7),
                server_ms: Some(1700)
            }
        );
        let Release::Told { writers_only, .. } = Release::read(b"writer 250") else {
            panic!("a writer's");
        };
        assert_eq!(writers_only, Some(Duration::from_millis(250)));
        for nobody in [&b""[..], b"a,b", b"lease", b"lease x y"] {
            assert!(matches!(
                Release::read(nobody),
                Release::Told {
                    writers_only: None,
                    ..
                }
            ));
        }
    }
}
