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
    /// Files each renewal to go out at the start of the slot its time falls in; whether
    /// the scheduler must wake for one of them. Renewals that land together mostly
    /// fall due together: a run of one slot is filed with one look-up.
    pub(super) fn insert_all(
        &mut self,
        renewals: impl IntoIterator<Item = (Instant, Renewal)>,
    ) -> bool {
        let (origin, wake) = (self.origin, self.sleeping_until);
        let mut earliest = None;
        let mut filing: Option<(u64, &mut Vec<Renewal>)> = None;
        for (at, renewal) in renewals {
            let slot = slot_of(origin, at);
            match &mut filing {
                Some((current, list)) if *current == slot => list.push(renewal),
                _ => {
                    let list = self.slots.entry(slot).or_default();
                    list.push(renewal);
                    filing = Some((slot, list));
                }
            }
            earliest = Some(earliest.map_or(slot, |first: u64| first.min(slot)));
        }
        earliest.is_some_and(|slot| wake.is_some_and(|wake| start_of(origin, slot) < wake))
    }

    /// Takes every renewal whose slot starts by `by`.
    pub(super) fn take_due(&mut self, by: Instant) -> Vec<Renewal> {
        let mut taken = Vec::new();
        let last = slot_of(self.origin, by);
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
        self.slots.insert(slot_of(self.origin, now), all);
    }

    pub(super) fn next(&self) -> Option<Instant> {
        self.slots
            .first_key_value()
            .map(|(&slot, _)| start_of(self.origin, slot))
    }
}

/// The slot of `at` counted from `origin` (the first for anything before it).
fn slot_of(origin: Instant, at: Instant) -> u64 {
    let since = at.saturating_duration_since(origin);
    u64::try_from(since.as_millis() / TICK.as_millis()).unwrap_or(u64::MAX)
}

/// When slot `slot` counted from `origin` starts.
fn start_of(origin: Instant, slot: u64) -> Instant {
    let ticks = u32::try_from(slot).unwrap_or(u32::MAX);
    origin + TICK * ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renewal(number: usize) -> Renewal {
        Renewal {
            number,
            expires: Instant::now() + Duration::from_secs(30),
            lease_ms: 30_000,
        }
    }

    #[test]
    fn renewals_filed_together_go_to_their_own_slots_and_wake_the_scheduler_if_sooner() {
        let mut timers = Timers::default();
        let origin = timers.origin;
        let at = |ms: u64| origin + Duration::from_millis(ms);
        // Runs of one slot, broken and resumed: each lands in its slot all the same.
        let filed = [
            (at(105), 0),
            (at(101), 1),
            (at(305), 2),
            (at(109), 3),
            (at(55), 4),
        ];
        timers.sleeping_until = Some(at(40));
        assert!(!timers.insert_all(filed.map(|(at, n)| (at, renewal(n)))));
        assert_eq!(timers.next(), Some(at(50)));
        let numbers = |taken: Vec<Renewal>| taken.iter().map(|r| r.number).collect::<Vec<_>>();
        assert_eq!(numbers(timers.take_due(at(59))), [4]);
        assert_eq!(numbers(timers.take_due(at(100))), [0, 1, 3]);
        assert!(timers.take_due(at(299)).is_empty());
        // One renewal due before the scheduler's wake-up is enough to wake it.
        timers.sleeping_until = Some(at(200));
        assert!(timers.insert_all([(at(250), renewal(5)), (at(190), renewal(6))]));
        assert!(!timers.insert_all(std::iter::empty()));
        assert_eq!(numbers(timers.take_due(at(400))), [6, 5, 2]);
    }
}
