//! The holds a client's scheduler renews, by number: what sending their renewals
//! needs, side by side, and the slots they share with their holds (see
//! `hold/lease_slot.rs`).
//!
//! The timers and the calls move only a renewal's number and deadline (see
//! `Renewal`); the rest stays here, in the order the watchdogs started, which is about
//! the order they fall due. With a million held locks, moving whole records through
//! every step cost more than the steps, and reading each hold's own record was a cache
//! miss per renewal.

use std::sync::Arc;

use fred::bytes_utils::Str;
use parking_lot::{Mutex, MutexGuard};
use tokio::time::Instant;

use crate::hold::{CELLS_PER_CHUNK, Hold, LeaseChunk, LeaseSlot};
use crate::keys::Kind;

/// A hold the scheduler renews: what its renewals need besides their deadline.
#[derive(Debug)]
pub(super) struct Watched {
    /// Read only when something happened to the hold (released, lost, at risk).
    pub(super) hold: Arc<Hold>,
    /// Shared with the hold until the renewals end.
    pub(super) slot: LeaseSlot,
    /// The lock's key, shared with its names.
    pub(super) key: Str,
    pub(super) kind: Kind,
    pub(super) owner: Str,
    /// When the watchdog stops renewing (the hold's `max_hold`), if ever.
    pub(super) renew_until: Option<Instant>,
}

/// The holds renewed, by number.
#[derive(Debug)]
pub(super) struct WatchedTable {
    origin: Instant,
    inner: Mutex<Entries>,
}

impl Default for WatchedTable {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            inner: Mutex::default(),
        }
    }
}

impl WatchedTable {
    /// The table, locked: every step of the scheduler takes it once for all the
    /// renewals it handles.
    pub(super) fn lock(&self) -> Locked<'_> {
        Locked {
            origin: self.origin,
            entries: self.inner.lock(),
        }
    }
}

#[derive(Debug, Default)]
struct Entries {
    pieces: Vec<Piece>,
    /// The numbers free, the last freed taken first.
    free: Vec<usize>,
}

/// `CELLS_PER_CHUNK` entries and their slots' chunk.
#[derive(Debug)]
struct Piece {
    slots: Arc<LeaseChunk>,
    watched: Box<[Option<Watched>]>,
}

/// The table, locked (see [`WatchedTable::lock`]).
#[derive(Debug)]
pub(super) struct Locked<'a> {
    origin: Instant,
    entries: MutexGuard<'a, Entries>,
}

impl Locked<'_> {
    /// Takes a free number and its slot: the last freed, or else the first never
    /// taken (adding a piece if all are), so that holds started one after another lie
    /// side by side. [`fill`](Self::fill) it, or [`give_back`](Self::give_back) it.
    pub(super) fn take(&mut self) -> (usize, LeaseSlot) {
        let entries = &mut *self.entries;
        if entries.free.is_empty() {
            let first = entries.pieces.len() * CELLS_PER_CHUNK;
            entries.pieces.push(Piece {
                slots: LeaseChunk::new(self.origin),
                watched: (0..CELLS_PER_CHUNK).map(|_| None).collect(),
            });
            entries.free.extend((first..first + CELLS_PER_CHUNK).rev());
        }
        let number = entries.free.pop().unwrap_or_default();
        // Every number free is of a piece already made.
        let slots = Arc::clone(&entries.pieces[number / CELLS_PER_CHUNK].slots);
        (number, LeaseSlot::new(slots, number))
    }

    /// Fills the entry of `number`, taken with [`take`](Self::take).
    pub(super) fn fill(&mut self, number: usize, watched: Watched) {
        if let Some(entry) = self.entry_mut(number) {
            *entry = Some(watched);
        }
    }

    /// The hold renewed as `number`.
    pub(super) fn get(&self, number: usize) -> Option<&Watched> {
        let piece = self.entries.pieces.get(number / CELLS_PER_CHUNK)?;
        piece.watched.get(number % CELLS_PER_CHUNK)?.as_ref()
    }

    fn entry_mut(&mut self, number: usize) -> Option<&mut Option<Watched>> {
        let piece = self.entries.pieces.get_mut(number / CELLS_PER_CHUNK)?;
        piece.watched.get_mut(number % CELLS_PER_CHUNK)
    }

    /// The chunk of `number`'s slot, to record a landing by number (see
    /// `LeaseChunk::renewed`) without reading the entry.
    pub(super) fn slots_of(&self, number: usize) -> Option<&LeaseChunk> {
        let piece = self.entries.pieces.get(number / CELLS_PER_CHUNK)?;
        Some(&piece.slots)
    }

    /// Ends the renewals of `number`: the hold keeps what its slot recorded, and the
    /// number is free again.
    pub(super) fn end(&mut self, number: usize) {
        if let Some(watched) = self.entry_mut(number).and_then(Option::take) {
            watched.hold.let_go_of_slot(&watched.slot);
            watched.slot.stop();
            self.entries.free.push(number);
        }
    }

    /// Frees `number`, taken and never filled (its watchdog was stopped before it
    /// started).
    pub(super) fn give_back(&mut self, number: usize) {
        self.entries.free.push(number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::{Holds, SlotState};
    use crate::options::ClientConfig;

    #[test]
    fn numbers_are_taken_side_by_side_and_reused_once_ended() {
        let table = WatchedTable::default();
        let mut table = table.lock();
        let taken: Vec<(usize, LeaseSlot)> =
            (0..CELLS_PER_CHUNK + 2).map(|_| table.take()).collect();
        let numbers: Vec<usize> = taken.iter().map(|(number, _)| *number).collect();
        assert_eq!(numbers, (0..CELLS_PER_CHUNK + 2).collect::<Vec<_>>());
        assert_eq!(table.entries.pieces.len(), 2);

        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let entry = holds.enter(&names, "o:1");
        let (number, slot) = (taken[5].0, taken[5].1.clone());
        entry.hold.share_slot(&slot);
        table.fill(
            number,
            Watched {
                hold: Arc::clone(&entry.hold),
                slot: slot.clone(),
                key: names.key.clone(),
                kind: names.kind,
                owner: entry.hold.owner.clone(),
                renew_until: None,
            },
        );
        assert!(
            table
                .get(number)
                .is_some_and(|watched| watched.slot.is(&slot))
        );
        table.end(number);
        assert!(table.get(number).is_none());
        assert_eq!(slot.state(), SlotState::Stopped);
        assert_eq!(table.take().0, number, "ended, so free again");
        table.give_back(number);
        assert_eq!(table.take().0, number);
        assert_eq!(table.take().0, CELLS_PER_CHUNK + 2);
    }
}
