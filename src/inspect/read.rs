//! Reading a lock's snapshot (as `lua/inspect.lua` returns its keys) into a
//! [`LockInfo`]: what the fields mean for each kind.

use std::time::Duration;

use super::{
    FairGrant, FairInfo, FairWaiter, LockInfo, LockOwner, PermitHolder, ReadWriteInfo, RwHolder,
    SemaphoreInfo,
};
use crate::error::{LockError, Result};
use crate::keys::LockKind;
use crate::scripts::Snapshot;
use crate::scripts::fields::{CLAIM, DATA, PERMITS, SOLO, TOKEN, WAITING, WRITER_WAITS};

/// The data kept with the holder `field`, if any.
fn data_of(snapshot: &Snapshot, field: &str) -> Option<String> {
    snapshot.field(&[DATA, field].concat()).map(str::to_owned)
}

/// What `snapshot` says of the lock `name`: `None` if nobody holds it and nobody
/// waits in its queue.
pub(super) fn read_snapshot(name: String, snapshot: &Snapshot) -> Result<Option<LockInfo>> {
    let mut info = LockInfo {
        name,
        kind: snapshot.kind,
        owners: Vec::new(),
        ttl: snapshot.ttl,
        fencing_token: snapshot
            .field(TOKEN)
            .map(|token| number(TOKEN, token))
            .transpose()?,
        waiting: snapshot.field(WAITING).is_some(),
        fair: None,
        read_write: None,
        semaphore: None,
    };
    let found = match snapshot.kind {
        LockKind::Mutex => {
            info.owners = counted(snapshot)?;
            !info.owners.is_empty()
        }
        LockKind::Fair => {
            let fair = read_fair(snapshot)?;
            info.owners = counted(snapshot)?;
            info.waiting |= !fair.queue.is_empty();
            let found = !info.owners.is_empty() || !fair.queue.is_empty();
            info.fair = Some(fair);
            found
        }
        LockKind::ReadWrite => {
            let rw = read_write(snapshot)?;
            info.owners = merge_owners(rw.writer.iter().chain(&rw.readers).map(|holder| {
                (
                    holder.owner.as_str(),
                    holder.hold_count,
                    holder.data.as_ref(),
                )
            }));
            info.waiting |= rw.writer_waiting;
            info.read_write = Some(rw);
            !info.owners.is_empty()
        }
        LockKind::Semaphore => {
            let semaphore = read_semaphore(snapshot)?;
            info.owners = merge_owners(
                semaphore
                    .held
                    .iter()
                    .map(|permit| (permit.owner.as_str(), 1, permit.data.as_ref())),
            );
            info.semaphore = Some(semaphore);
            !info.owners.is_empty()
        }
    };
    Ok(found.then_some(info))
}

/// The owners of a hash whose holder fields are owner id -> hold count.
fn counted(snapshot: &Snapshot) -> Result<Vec<LockOwner>> {
    snapshot
        .holders()
        .map(|(id, count)| {
            Ok(LockOwner {
                id: id.to_owned(),
                hold_count: number(id, count)?,
                data: data_of(snapshot, id),
            })
        })
        .collect()
}

/// One entry per owner id, in the order first met, with the holds of each summed and
/// the first data met.
fn merge_owners<'a>(
    holds: impl Iterator<Item = (&'a str, u32, Option<&'a String>)>,
) -> Vec<LockOwner> {
    let mut owners: Vec<LockOwner> = Vec::new();
    for (id, count, data) in holds {
        match owners.iter_mut().find(|owner| owner.id == id) {
            Some(owner) => {
                owner.hold_count = owner.hold_count.saturating_add(count);
                if owner.data.is_none() {
                    owner.data = data.cloned();
                }
            }
            None => owners.push(LockOwner {
                id: id.to_owned(),
                hold_count: count,
                data: data.cloned(),
            }),
        }
    }
    owners
}

/// The fair lock's queue (its first set; its second gives each waiting client's
/// liveness deadline, and the waits of a client past it are left out) and pending
/// hand-off.
fn read_fair(snapshot: &Snapshot) -> Result<FairInfo> {
    let now_ms = snapshot.now_ms as f64;
    let alive = snapshot.set(1);
    let live = |member: &str| {
        // A client's id is its owner ids' part before the first colon.
        let client = member.split(':').next().unwrap_or(member);
        !alive
            .iter()
            .any(|(waiter, deadline)| waiter == client && *deadline <= now_ms)
    };
    let now_us = snapshot.now_ms.saturating_mul(1000);
    let queue = snapshot
        .set(0)
        .iter()
        .filter(|(member, _)| live(member))
        .map(|(member, since)| {
            let (owner, wait) = split_wait(member);
            let since_us = whole(*since);
            // 0: not recorded (Redisson's layout).
            let waited = match since_us {
                0 => Duration::ZERO,
                since_us => Duration::from_micros(now_us.saturating_sub(since_us)),
            };
            FairWaiter {
                owner: owner.to_owned(),
                wait,
                since_us,
                waited,
            }
        })
        .collect();
    let grant = snapshot.field(CLAIM).map(|claim| {
        let (owner, wait) = split_wait(claim);
        FairGrant {
            owner: owner.to_owned(),
            wait,
            claim_window: snapshot.ttl,
        }
    });
    Ok(FairInfo { queue, grant })
}

/// A fair queue's member `"<owner id> <wait>"` as the owner id and the wait.
fn split_wait(member: &str) -> (&str, Option<u64>) {
    match member.rsplit_once(' ') {
        Some((owner, wait)) => (owner, wait.parse().ok()),
        None => (member, None),
    }
}

/// A read-write lock's holders: `<owner>` counts read holds, `<owner>:w` write holds
/// (`<owner>:write` in Redisson's layout), each with its deadline in the lock's leases;
/// a holder past its deadline is left out.
fn read_write(snapshot: &Snapshot) -> Result<ReadWriteInfo> {
    let solo = snapshot.field(SOLO);
    let mut writer = None;
    let mut readers = Vec::new();
    for (field, count) in snapshot.holders() {
        let lease = match solo {
            Some(solo) if solo == field => snapshot.ttl,
            _ => match lease_left(snapshot, field) {
                Some(lease) => lease,
                None => continue,
            },
        };
        let hold_count = number(field, count)?;
        match field.strip_suffix(snapshot.write_suffix) {
            Some(owner) => {
                writer = Some(RwHolder {
                    owner: owner.to_owned(),
                    hold_count,
                    lease,
                    data: data_of(snapshot, field),
                });
            }
            None => readers.push(RwHolder {
                owner: field.to_owned(),
                hold_count,
                lease,
                data: data_of(snapshot, field),
            }),
        }
    }
    readers.sort_by(|a, b| a.owner.cmp(&b.owner));
    let writer_waits = snapshot
        .field(WRITER_WAITS)
        .map(|until| number::<u64>(WRITER_WAITS, until))
        .transpose()?;
    Ok(ReadWriteInfo {
        writer,
        readers,
        writer_waiting: writer_waits.is_some_and(|until| until > snapshot.now_ms),
    })
}

/// A semaphore's permits: every field but `permits` and `waiting` is a permit id,
/// with its deadline in the leases; a permit past its deadline is left out.
fn read_semaphore(snapshot: &Snapshot) -> Result<SemaphoreInfo> {
    let mut held = Vec::new();
    for (id, _) in snapshot.holders() {
        let Some(lease) = lease_left(snapshot, id) else {
            continue;
        };
        // `<owner id>:p<n>` (see `semaphore.rs`).
        let owner = id
            .rsplit_once(":p")
            .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .map_or(id, |(owner, _)| owner);
        held.push(PermitHolder {
            id: id.to_owned(),
            owner: owner.to_owned(),
            lease,
            data: data_of(snapshot, id),
        });
    }
    held.sort_by(|a, b| a.id.cmp(&b.id));
    let permits = match snapshot.field(PERMITS) {
        Some(permits) => number(PERMITS, permits)?,
        None if held.is_empty() => 0,
        None => {
            return Err(LockError::Protocol(
                "a semaphore with permits held but no `permits` field".into(),
            ));
        }
    };
    Ok(SemaphoreInfo { permits, held })
}

/// The lease left of the holder `field` of a kind whose holders expire one by one
/// (its deadline in the first set): `None` if it has expired (it no longer holds),
/// `Some(None)` if no deadline is kept for it.
fn lease_left(snapshot: &Snapshot, field: &str) -> Option<Option<Duration>> {
    let Some((_, deadline)) = snapshot.set(0).iter().find(|(holder, _)| holder == field) else {
        return Some(None);
    };
    let left = whole(*deadline).checked_sub(snapshot.now_ms)?;
    (left > 0).then(|| Some(Duration::from_millis(left)))
}

/// A score as a whole number (scores here are times, whole and positive).
fn whole(score: f64) -> u64 {
    if score.is_finite() && score > 0.0 {
        score as u64
    } else {
        0
    }
}

/// The number in the field `field`'s `value`, or [`LockError::Protocol`] (a hash this
/// crate did not write).
fn number<T: std::str::FromStr>(field: &str, value: &str) -> Result<T> {
    value.parse().map_err(|_| {
        LockError::Protocol(format!(
            "field {field:?} holds {value:?}, not a number: a hash this crate did not write"
        ))
    })
}
