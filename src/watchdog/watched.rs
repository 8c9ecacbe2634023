//! The holds a client's scheduler renews, by number: what sending their renewals
//! needs, side by side, and the slots they share with their holds (see
//! `hold/lease_slot.rs`).
//!
//! The timers and the calls move only a renewal's number and deadline (see
//! `Renewal`); the rest stays here, in the order the watchdogs started, which is about
//! the order they fall due. With a million held locks, moving whole records through
//! every step cost more than the steps, and reading each hold's own record was a cache
//! miss per renewal.

use std::collections::BTreeSet;
use std::sync::Arc;

use fred::bytes_utils::Str;
use parking_lot::{Mutex, MutexGuard};
use tokio::time::Instant;

use crate::hold::{CELLS_PER_CHUNK, Hold, LeaseChunk, LeaseSlot, SlotState};
use crate::scripts::Kind;

/// A hold the scheduler renews: what its renewals need besides their deadline. Its
/// slot, shared with the hold until the renewals end, is found by its number (see
/// [`Locked::state`]). Two cache lines.
#[derive(Debug)]
pub(super) struct Watched {
    /// Read only when something happened to the hold (released, lost, at risk).
    pub(super) hold: Arc<Hold>,
    pub(super) key: KeyBytes,
    pub(super) kind: Kind,
    pub(super) owner: Str,
    /// When the watchdog stops renewing (the hold's `max_hold`), if ever.
    pub(super) renew_until: Option<Instant>,
}

impl Watched {
    /// The entry of `hold`, whose watchdog starts.
    pub(super) fn new(hold: &Arc<Hold>) -> Self {
        Self {
            hold: Arc::clone(hold),
            key: KeyBytes::new(&hold.names.key),
            kind: hold.names.kind,
            owner: hold.owner.clone(),
            renew_until: hold.renew_until(),
        }
    }
}

/// The longest key kept in a [`Watched`] entry itself.
const INLINE_KEY: usize = 62;

/// A lock's key, as an entry keeps it: its bytes in the entry when they fit (most
/// keys are short), so that sending a renewal reads no other place for them; else the
/// key's shared bytes.
#[derive(Clone)]
pub(super) enum KeyBytes {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Shared(Str),
}

impl KeyBytes {
    pub(super) fn new(key: &Str) -> Self {
        let mut bytes = [0; INLINE_KEY];
        match (bytes.get_mut(..key.len()), u8::try_from(key.len())) {
            (Some(inline), Ok(len)) => {
                inline.copy_from_slice(key.as_bytes());
                Self::Inline { len, bytes }
            }
            _ => Self::Shared(key.clone()),
        }
    }

    /// The key's bytes, as a renewal sends them.
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Self::Shared(key) => key.as_bytes(),
        }
    }
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&String::from_utf8_lossy(self.as_bytes()), f)
    }
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
    /// The numbers free, the lowest taken first: the holds renewed stay packed at the
    /// start of the table, and the pieces at its end can be freed.
    free: BTreeSet<usize>,
}

/// `CELLS_PER_CHUNK` entries and their slots' chunk.
#[derive(Debug)]
struct Piece {
    slots: Arc<LeaseChunk>,
    watched: Box<[Option<Watched>]>,
    /// How many of its numbers are taken.
    taken: usize,
}

/// The table, locked (see [`WatchedTable::lock`]).
#[derive(Debug)]
pub(super) struct Locked<'a> {
    origin: Instant,
    entries: MutexGuard<'a, Entries>,
}

impl Locked<'_> {
    /// Takes the lowest free number and its slot (adding a piece if every number is
    /// taken), so that holds started one after another lie side by side.
    /// [`fill`](Self::fill) it, or [`give_back`](Self::give_back) it.
    pub(super) fn take(&mut self) -> (usize, LeaseSlot) {
        let entries = &mut *self.entries;
        if entries.free.is_empty() {
            let first = entries.pieces.len() * CELLS_PER_CHUNK;
            entries.pieces.push(Piece {
                slots: LeaseChunk::new(self.origin),
                watched: (0..CELLS_PER_CHUNK).map(|_| None).collect(),
                taken: 0,
            });
            entries.free.extend(first..first + CELLS_PER_CHUNK);
        }
        let number = entries.free.pop_first().unwrap_or_default();
        // Every number free is of a piece already made.
        let piece = &mut entries.pieces[number / CELLS_PER_CHUNK];
        piece.taken += 1;
        (number, LeaseSlot::new(Arc::clone(&piece.slots), number))
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
    pub(super) fn slots_of(&self, number: usize) -> Option<&Arc<LeaseChunk>> {
        let piece = self.entries.pieces.get(number / CELLS_PER_CHUNK)?;
        Some(&piece.slots)
    }

    /// What `number`'s slot says of its hold (stopped if there is no such number).
    pub(super) fn state(&self, number: usize) -> SlotState {
        self.slots_of(number)
            .map_or(SlotState::Stopped, |slots| slots.state(number))
    }

    /// Ends the renewals of `number`: the hold keeps what its slot recorded, and the
    /// number is free again.
    pub(super) fn end(&mut self, number: usize) {
        let Some(slots) = self.slots_of(number).map(Arc::clone) else {
            return;
        };
        if let Some(watched) = self.entry_mut(number).and_then(Option::take) {
            let slot = LeaseSlot::new(slots, number);
            watched.hold.let_go_of_slot(&slot);
            slot.stop();
            self.give_back(number);
        }
    }

    /// Frees `number`: taken and never filled (its watchdog was stopped before it
    /// started), or ended. The pieces at the end of the table with no number taken
    /// are freed, but for one: a client that held a million locks for a while does not
    /// keep their table, nor make and free a piece as one hold comes and goes.
    pub(super) fn give_back(&mut self, number: usize) {
        let entries = &mut *self.entries;
        let Some(piece) = entries.pieces.get_mut(number / CELLS_PER_CHUNK) else {
            return;
        };
        piece.taken = piece.taken.saturating_sub(1);
        entries.free.insert(number);
        while entries.pieces.len() > 1
            && entries
                .pieces
                .iter()
                .rev()
                .take(2)
                .all(|piece| piece.taken == 0)
        {
            let first = (entries.pieces.len() - 1) * CELLS_PER_CHUNK;
            drop(entries.free.split_off(&first));
            entries.pieces.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::Holds;
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
        let entry = holds.enter(&names, &fred::bytes_utils::Str::from("o:1"));
        let (number, slot) = (taken[5].0, taken[5].1.clone());
        entry.hold.add_claim();
        entry.hold.share_slot(&slot);
        table.fill(number, Watched::new(&entry.hold));
        assert!(table.get(number).is_some());
        assert_eq!(table.state(number), SlotState::Running);
        table.end(number);
        assert!(table.get(number).is_none());
        assert_eq!(slot.state(), SlotState::Stopped);
        assert_eq!(table.take().0, number, "ended, so free again");
        table.give_back(number);
        assert_eq!(table.take().0, number);
        assert_eq!(table.take().0, CELLS_PER_CHUNK + 2);
    }

    #[test]
    fn the_pieces_at_the_end_with_nothing_taken_are_freed_but_one() {
        let table = WatchedTable::default();
        let mut table = table.lock();
        let numbers: Vec<usize> = (0..CELLS_PER_CHUNK * 3).map(|_| table.take().0).collect();
        assert_eq!(table.entries.pieces.len(), 3);
        // The first piece's numbers stay taken; the others all come back.
        for &number in numbers[CELLS_PER_CHUNK..].iter().rev() {
            table.give_back(number);
        }
        assert_eq!(table.entries.pieces.len(), 2, "one spare kept");
        assert_eq!(table.entries.free.len(), CELLS_PER_CHUNK);
        assert_eq!(table.take().0, CELLS_PER_CHUNK, "the lowest free number");
        table.give_back(CELLS_PER_CHUNK);
        for &number in &numbers[..CELLS_PER_CHUNK] {
            table.give_back(number);
        }
        assert_eq!(table.entries.pieces.len(), 1);
        assert_eq!(table.entries.free.len(), CELLS_PER_CHUNK);
        assert_eq!(table.take().0, 0);
    }

    #[test]
    fn a_short_key_is_kept_in_the_entry_and_a_long_one_shared() {
        assert_eq!(std::mem::size_of::<Watched>(), 128, "two cache lines");
        let short = Str::from("holdlock:{account:42}");
        let kept = KeyBytes::new(&short);
        assert!(matches!(kept, KeyBytes::Inline { .. }));
        assert_eq!(kept.as_bytes(), short.as_bytes());
        let fits = Str::from("k".repeat(INLINE_KEY));
        assert!(matches!(KeyBytes::new(&fits), KeyBytes::Inline { .. }));
        assert_eq!(KeyBytes::new(&fits).as_bytes(), fits.as_bytes());
        let long = Str::from("k".repeat(INLINE_KEY + 1));
        assert!(matches!(KeyBytes::new(&long), KeyBytes::Shared(_)));
        assert_eq!(KeyBytes::new(&long).as_bytes(), long.as_bytes());
        let odd = Str::from("holdlock:{ключ·🔒}");
        assert_eq!(KeyBytes::new(&odd).as_bytes(), odd.as_bytes());
        assert_eq!(format!("{:?}", KeyBytes::new(&odd)), format!("{:?}", &*odd));
    }
}
