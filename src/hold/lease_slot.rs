//! What a running watchdog and its hold share: a small cell in a table its client's
//! scheduler owns (see `watchdog/watched.rs`), so that renewing a hold reads and
//! writes that cell and not the hold record.
//!
//! With a million held locks, every record a renewal touches is a cache miss. The
//! cells of one table lie side by side, in the order their watchdogs started, which is
//! about the order they fall due: a renewal's look at its hold (is it still renewed?)
//! and its landing (the margin it had, when the lease now ends) cost a sixteenth of a
//! cache line each, not a line of the hold apiece.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How many cells one piece of a table holds.
pub(crate) const CELLS_PER_CHUNK: usize = 1_024;

/// [`LeaseCell::state`]: renewals stopped (released, lost, or the client shut down).
const STOPPED: u32 = 0;
/// [`LeaseCell::state`]: renewed.
const RUNNING: u32 = 1;
/// [`LeaseCell::state`]: renewed, but every guard may have let go: the renewal asks the
/// hold (see `Hold::is_being_released`) before it is sent.
const MAYBE_RELEASED: u32 = 2;

/// What the scheduler sees of a hold when its renewal falls due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Renewals stopped: the renewal is dropped.
    Stopped,
    /// Renewed.
    Running,
    /// Every guard may have let go: ask the hold.
    MaybeReleased,
}

/// One running watchdog's state.
#[derive(Debug)]
struct LeaseCell {
    state: AtomicU32,
    /// The lease left in Redis when the last renewal landed, in milliseconds
    /// (`u32::MAX`: none has).
    margin_ms: AtomicU32,
    /// When Redis will have expired the hold at the latest: nanoseconds after the
    /// chunk's origin (0: unknown). See `Hold::lease_ends_by`.
    lease_ends: AtomicU64,
}

/// A piece of a table: its cells, side by side.
#[derive(Debug)]
pub(crate) struct LeaseChunk {
    origin: Instant,
    cells: Box<[LeaseCell]>,
}

impl LeaseChunk {
    /// A chunk of free cells, whose times count from `origin`.
    pub(crate) fn new(origin: Instant) -> Arc<Self> {
        let cells = (0..CELLS_PER_CHUNK)
            .map(|_| LeaseCell {
                state: AtomicU32::new(STOPPED),
                margin_ms: AtomicU32::new(u32::MAX),
                lease_ends: AtomicU64::new(0),
            })
            .collect();
        Arc::new(Self { origin, cells })
    }

    /// Cell `number` (a number in its table) of this chunk.
    fn cell(&self, number: usize) -> &LeaseCell {
        // Every chunk has `CELLS_PER_CHUNK` cells.
        &self.cells[number % CELLS_PER_CHUNK]
    }

    /// Records in cell `number` a renewal that landed with `margin` of the lease left,
    /// which ends by `lease_ends_by`: the scheduler
    /// records a landing by the cell's number, without a look at anything else.
    pub(crate) fn renewed(&self, number: usize, margin: Duration, lease_ends_by: Instant) {
        let cell = self.cell(number);
        cell.margin_ms
            .store(whole_millis(margin), Ordering::Release);
        cell.lease_ends
            .store(self.nanos_of(Some(lease_ends_by)), Ordering::Release);
    }

    /// What cell `number` says of its hold (see [`LeaseSlot::state`]).
    pub(crate) fn state(&self, number: usize) -> SlotState {
        match self.cell(number).state.load(Ordering::Acquire) {
            STOPPED => SlotState::Stopped,
            MAYBE_RELEASED => SlotState::MaybeReleased,
            _ => SlotState::Running,
        }
    }

    /// `at` as a cell keeps it: nanoseconds after the origin, 0 for unknown.
    fn nanos_of(&self, at: Option<Instant>) -> u64 {
        // Never 0 for a known time: a chunk is made before any lease it records is
        // set, so a time before its origin does not occur.
        at.map_or(0, |at| {
            let since = at.saturating_duration_since(self.origin);
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX).max(1)
        })
    }
}

/// A cell of a table, held by the renewal that owns it and by its hold. Only the
/// table hands one out (see `LeaseTable::take`).
#[derive(Debug, Clone)]
pub(crate) struct LeaseSlot {
    chunk: Arc<LeaseChunk>,
    /// The cell's number in its table: cell `number % CELLS_PER_CHUNK` of `chunk`.
    number: usize,
}

impl LeaseSlot {
    /// Cell `number` of a table, in `chunk`, which the caller owns from now until it
    /// gives it back.
    pub(crate) fn new(chunk: Arc<LeaseChunk>, number: usize) -> Self {
        Self { chunk, number }
    }

    fn cell(&self) -> &LeaseCell {
        self.chunk.cell(self.number)
    }

    /// Whether `other` is this same cell.
    pub(crate) fn is(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chunk, &other.chunk) && self.number == other.number
    }

    /// Starts renewals with the hold's lease state so far: its margin and when its lease
    /// ends, and whether every guard may have let go already.
    pub(crate) fn start(
        &self,
        margin: Option<Duration>,
        lease_ends_by: Option<Instant>,
        maybe_released: bool,
    ) {
        let cell = self.cell();
        cell.margin_ms
            .store(margin.map_or(u32::MAX, whole_millis), Ordering::Release);
        self.set_lease_ends_by(lease_ends_by);
        let state = if maybe_released {
            MAYBE_RELEASED
        } else {
            RUNNING
        };
        cell.state.store(state, Ordering::Release);
    }

    /// What the slot says of its hold (the scheduler asks by number: see
    /// `LeaseChunk::state`).
    #[cfg(test)]
    pub(crate) fn state(&self) -> SlotState {
        self.chunk.state(self.number)
    }

    /// Stops the renewals.
    pub(crate) fn stop(&self) {
        self.cell().state.store(STOPPED, Ordering::Release);
    }

    /// Every guard may have let go: the next renewal asks the hold first (unless
    /// renewals stopped).
    pub(crate) fn mark_maybe_released(&self) {
        let _ = self.cell().state.compare_exchange(
            RUNNING,
            MAYBE_RELEASED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Records a renewal that landed with `margin` of the lease left, which ends by
    /// `lease_ends_by` (the scheduler does so by number: see `LeaseChunk::renewed`).
    #[cfg(test)]
    pub(crate) fn renewed(&self, margin: Duration, lease_ends_by: Instant) {
        self.chunk.renewed(self.number, margin, lease_ends_by);
    }

    /// The lease left in Redis when the last renewal landed, if one has.
    pub(crate) fn margin(&self) -> Option<Duration> {
        let millis = self.cell().margin_ms.load(Ordering::Acquire);
        (millis != u32::MAX).then(|| Duration::from_millis(u64::from(millis)))
    }

    /// When Redis will have expired the hold at the latest, if known.
    pub(crate) fn lease_ends_by(&self) -> Option<Instant> {
        let nanos = self.cell().lease_ends.load(Ordering::Acquire);
        (nanos != 0).then(|| self.chunk.origin + Duration::from_nanos(nanos))
    }

    /// Records when Redis will have expired the hold at the latest.
    pub(crate) fn set_lease_ends_by(&self, ends_by: Option<Instant>) {
        let nanos = self.chunk.nanos_of(ends_by);
        self.cell().lease_ends.store(nanos, Ordering::Release);
    }
}

/// `duration` in whole milliseconds, at most `u32::MAX - 1` (`u32::MAX` means none).
pub(super) fn whole_millis(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis()).unwrap_or(u32::MAX - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_keeps_its_state_margin_and_lease_end() {
        let origin = Instant::now();
        let chunk = LeaseChunk::new(origin);
        let slot = LeaseSlot::new(Arc::clone(&chunk), 3);
        let other = LeaseSlot::new(chunk, 4);
        assert!(slot.is(&slot.clone()) && !slot.is(&other));

        assert_eq!(slot.state(), SlotState::Stopped, "free");
        slot.start(None, None, false);
        assert_eq!(slot.state(), SlotState::Running);
        assert_eq!((slot.margin(), slot.lease_ends_by()), (None, None));

        let ends = origin + Duration::from_secs(30);
        slot.renewed(Duration::from_millis(19_950), ends);
        assert_eq!(slot.margin(), Some(Duration::from_millis(19_950)));
        assert_eq!(slot.lease_ends_by(), Some(ends));
        assert_eq!(other.margin(), None, "its own cell");

        slot.mark_maybe_released();
        assert_eq!(slot.state(), SlotState::MaybeReleased);
        slot.stop();
        slot.mark_maybe_released();
        assert_eq!(slot.state(), SlotState::Stopped, "a stop is final");

        slot.start(Some(Duration::from_secs(1)), Some(origin), true);
        assert_eq!(slot.state(), SlotState::MaybeReleased);
        assert_eq!(slot.lease_ends_by(), Some(origin + Duration::from_nanos(1)));
    }
}
