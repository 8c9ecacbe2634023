//! The scheduler's view of a hold: what a renewal due comes to.

use super::*;
use crate::hold::{HoldUse, Holds, LeaseSlot};
use crate::options::ClientConfig;

/// A hold of one lock with one claim (its registry kept with it).
fn claimed_hold() -> (Arc<Holds>, HoldUse) {
    let holds = Arc::new(Holds::default());
    let names = Arc::new(ClientConfig::default().names("a").unwrap());
    let entry = holds.enter(&names, &fred::bytes_utils::Str::from("o:1"));
    entry.hold.add_claim();
    (holds, entry)
}

/// Starts a watchdog of `hold` in `table`, as the scheduler does: its number and slot.
fn start(table: &mut Locked<'_>, hold: &Arc<Hold>) -> (usize, LeaseSlot) {
    let (number, slot) = table.take();
    assert!(hold.book_watchdog());
    hold.share_slot(&slot);
    assert!(hold.start_booked_watchdog());
    table.fill(number, Watched::new(hold));
    (number, slot)
}

#[test]
fn a_due_renewal_is_sent_only_for_a_hold_a_guard_still_owns() {
    let (_holds, entry) = claimed_hold();
    let hold = &entry.hold;
    let mut ops = hold.ops.try_lock().unwrap();
    hold.set_count(&mut ops, 1);
    let now = Instant::now();
    let lease = Duration::from_secs(3);
    let table = WatchedTable::default();
    let mut table = table.lock();
    let (number, slot) = start(&mut table, hold);
    let mut watched = Watched::new(hold);
    let renewal = Renewal {
        number,
        expires: now + lease,
        lease_ms: millis(lease),
    };
    let fate = |watched: &Watched, at| renewal.fate(watched, slot.state(), at);
    assert_eq!(fate(&watched, now), Fate::Renew);
    assert_eq!(
        fate(&watched, now + lease),
        Fate::Lost("renewals failed until the lease was about to run out"),
        "past its deadline"
    );
    watched.renew_until = Some(now);
    assert_eq!(fate(&watched, now), Fate::HeldLongEnough);
    watched.renew_until = None;

    // The guard let go: its release is pending, and no guard will own the hold again.
    hold.drop_claim();
    assert!(hold.is_being_released());
    // Not renewed; lost at its deadline all the same if the release has not landed.
    assert_eq!(
        fate(&watched, now),
        Fate::Released,
        "not renewed while released"
    );
    assert_eq!(
        fate(&watched, now + lease),
        Fate::Lost("its release did not land before its lease ran out")
    );
    // The slot only tells the renewal to ask: a hold claimed again is renewed.
    hold.add_claim();
    assert_eq!(fate(&watched, now), Fate::Renew);
    // Stopped, and so dropped.
    hold.stop_watchdog();
    assert_eq!(fate(&watched, now), Fate::Stopped);
}

#[test]
fn a_renewal_landing_after_its_hold_was_stopped_and_booked_again_touches_only_its_old_slot() {
    let (_holds, entry) = claimed_hold();
    let hold = &entry.hold;
    let table = WatchedTable::default();
    let mut table = table.lock();
    let now = Instant::now();
    let (first, first_slot) = start(&mut table, hold);
    let landed = |table: &Locked<'_>, number, margin: u64| {
        table.slots_of(number).unwrap().renewed(
            number,
            Duration::from_secs(margin),
            now + Duration::from_secs(margin),
        );
    };
    landed(&table, first, 20);
    assert_eq!(hold.margin(), Some(Duration::from_secs(20)));

    // Stopped (its release answered), then held and booked again: a new slot.
    hold.stop_watchdog();
    let (second, second_slot) = start(&mut table, hold);
    assert_ne!(first, second);
    landed(&table, second, 19);
    // The first watchdog's renewal, in flight all along, lands now: it writes its own
    // old slot, which stays stopped, and the hold does not see it.
    landed(&table, first, 5);
    assert_eq!(table.state(first), SlotState::Stopped);
    assert_eq!(hold.margin(), Some(Duration::from_secs(19)));
    // At its next due time it is dropped, and its end leaves the new slot alone.
    let renewal = Renewal {
        number: first,
        expires: now + Duration::from_secs(27),
        lease_ms: 30_000,
    };
    let watched = table.get(first).unwrap();
    assert_eq!(
        renewal.fate(watched, table.state(first), now),
        Fate::Stopped
    );
    table.end(first);
    assert!(table.get(first).is_none());
    assert_eq!(second_slot.state(), SlotState::Running);
    assert_eq!(first_slot.state(), SlotState::Stopped);
    assert_eq!(hold.margin(), Some(Duration::from_secs(19)));
    assert_eq!(table.take().0, first, "the old number is free again");
}
