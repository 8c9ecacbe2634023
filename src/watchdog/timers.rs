//! The renewals waiting for their time (see [`Timers`]).

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::Renewal;

/// How finely the timers sort renewals: a renewal is filed in the slot of
/// `TICK`-long time it falls due in, and goes out at that slot's start (early by less
/// than a tick, never late).
pub(super) const TICK: Duration = Duration::from_millis(10);

/// The renewals waiting for their time: a timing wheel of `TICK`-long slots (by slot
/// number since `origin`), each a plain list. Filing and taking a renewal cost no
/// search, and a million of them cost a list entry each.
#[derive(Debug)]
pub(super) struct Timers {
    origin: Instant,
    slots: BTreeMap<u64, Vec<Renewal>>,
    /// When the scheduler is asleep, when it wakes: a renewal due before must wake it.
    pub(super) sleeping_until: Option<Instant>,
}

impl Default for Timers {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            slots: BTreeMap::new(),
            sleeping_until: None,
        }
    }
}

impl Timers {
    /// The slot of `at` (the slot of `origin` for anything before it).
    fn slot(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        u64::try_from(since.as_millis() / TICK.as_millis()).unwrap_or(u64::MAX)
    }

    /// When slot `slot` starts.
    fn start_of(&self, slot: u64) -> Instant {
        let ticks = u32::try_from(slot).unwrap_or(u32::MAX);
        self.origin + TICK * ticks
    }

    /// Files `renewal` to go out at the start of the slot `at` falls in; whether the
    /// scheduler must wake for it.
    pub(super) fn insert(&mut self, at: Instant, renewal: Renewal) -> bool {
        let slot = self.slot(at);
        self.slots.entry(slot).or_default().push(renewal);
        self.sleeping_until
            .is_some_and(|wake| self.start_of(slot) < wake)
    }

    /// Takes every renewal whose slot starts by `by`.
    pub(super) fn take_due(&mut self, by: Instant) -> Vec<Renewal> {
        let mut taken = Vec::new();
        let last = self.slot(by);
        while let Some(entry) = self.slots.first_entry() {
            if *entry.key() > last {
                break;
            }
            let slot = entry.remove();
            if taken.is_empty() {
                taken = slot;
            } else {
                taken.extend(slot);
            }
        }
        taken
    }

    /// Makes every renewal due at `now`.
    pub(super) fn all_due_now(&mut self, now: Instant) {
        let all: Vec<Renewal> = std::mem::take(&mut self.slots)
            .into_values()
            .flatten()
            .collect();
        self.slots.insert(self.slot(now), all);
    }

    pub(super) fn next(&self) -> Option<Instant> {
        self.slots
            .first_key_value()
            .map(|(&slot, _)| self.start_of(slot))
    }
}
