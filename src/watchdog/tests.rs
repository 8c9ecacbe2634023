//! The scheduler's view of a hold: what a renewal due comes to.

use super::*;
use crate::hold::Holds;
use crate::options::ClientConfig;

#[test]
fn a_due_renewal_is_sent_only_for_a_hold_a_guard_still_owns() {
    let holds = Arc::new(Holds::default());
    let names = Arc::new(ClientConfig::default().names("a").unwrap());
    let entry = holds.enter(&names, "o:1");
    let hold = &entry.hold;
    let mut ops = hold.ops.try_lock().unwrap();
    hold.set_count(&mut ops, 1);
    hold.add_claim();
    let now = Instant::now();
    let lease = Duration::from_secs(3);
    let table = WatchedTable::default();
    let mut table = table.lock();
    let (number, slot) = table.take();
    assert!(hold.book_watchdog());
    hold.share_slot(&slot);
    assert!(hold.start_booked_watchdog());
    let mut watched = Watched {
        hold: Arc::clone(hold),
        key: KeyBytes::new(&names.key),
        kind: names.kind,
        owner: hold.owner.clone(),
        renew_until: None,
    };
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
    let holds = Arc::new(Holds::default());
    let names = Arc::new(ClientConfig::default().names("a").unwrap());
    let entry = holds.enter(&names, "o:1");
    let hold = &entry.hold;
    hold.add_claim();
    let table = WatchedTable::default();
    let mut table = table.lock();
    let start = |table: &mut Locked<'_>| {
        let (number, slot) = table.take();
        assert!(hold.book_watchdog());
        hold.share_slot(&slot);
        assert!(hold.start_booked_watchdog());
        table.fill(
            number,
            Watched {
                hold: Arc::clone(hold),
                key: KeyBytes::new(&names.key),
                kind: names.kind,
                owner: hold.owner.clone(),
                renew_until: None,
            },
        );
        (number, slot)
    };
    let now = Instant::now();
    let (first, first_slot) = start(&mut table);
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
    let (second, second_slot) = start(&mut table);
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
