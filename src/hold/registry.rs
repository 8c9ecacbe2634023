//! The registry of one client's holds: by lock, the hold of each owner, so that a
//! re-entry finds its hold before any key is built and a new call never joins a hold
//! being released.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fred::bytes_utils::Str;
use parking_lot::Mutex;

use super::Hold;
use crate::keys::LockKind;
use crate::owner::OwnKeys;
use crate::scripts::{Kind, LockNames};

/// Every hold of one client: by lock name, the holds of each owner (rarely more than
/// one per lock: only one owner can hold a lock, others appear while they try).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    table: Mutex<Registry>,
}

/// The holds, by lock and by owner.
#[derive(Debug, Default)]
struct Registry {
    by_lock: HashMap<RegistryKey, Holders>,
    /// The locks each owner has a hold registered under, once per hold (both sides of
    /// a read-write lock are filed under one lock): one owner's holds are found
    /// without reading every hold of the client (which may hold a million).
    /// Hashed as keys of this process's own (see [`OwnKeys`]).
    by_owner: HashMap<Str, Few<RegistryKey>, OwnKeys>,
}

impl Registry {
    /// Files `hold`, just registered under its lock, under its owner too.
    fn index(by_owner: &mut HashMap<Str, Few<RegistryKey>, OwnKeys>, hold: &Hold) {
        let locks = by_owner.entry(hold.owner.clone()).or_default();
        locks.push(RegistryKey(Arc::clone(&hold.names)));
    }

    /// Takes `hold` out of its lock's holds and, if it was there, its owner's.
    fn remove(&mut self, hold: &Arc<Hold>) {
        // Each map looked up once (an entry by a key cloned by reference), as a
        // registered hold is taken out at the end of nearly every lock call.
        let Entry::Occupied(mut holds) = self.by_lock.entry(RegistryKey(Arc::clone(&hold.names)))
        else {
            return;
        };
        if !holds.get_mut().remove_first(|held| Arc::ptr_eq(held, hold)) {
            return;
        }
        if holds.get().is_empty() {
            holds.remove();
        }
        if let Entry::Occupied(mut locks) = self.by_owner.entry(hold.owner.clone()) {
            let registry = hold.names.registry_key();
            let keys = locks.get_mut();
            keys.remove_first(|key| key.0.registry_key() == registry);
            if keys.is_empty() {
                locks.remove();
            }
        }
    }
}

/// A registry entry's key: the [registry key](LockNames::registry_key) of the names it
/// holds, without a copy of it (a client may hold a million locks).
#[derive(Debug, Clone)]
struct RegistryKey(Arc<LockNames>);

impl std::borrow::Borrow<str> for RegistryKey {
    fn borrow(&self) -> &str {
        self.0.registry_key()
    }
}

impl std::hash::Hash for RegistryKey {
    // As `str` hashes, which `Borrow<str>` requires.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.registry_key().hash(state);
    }
}

impl PartialEq for RegistryKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.registry_key() == other.0.registry_key()
    }
}

impl Eq for RegistryKey {}

/// The holds registered under one lock: nearly always one.
type Holders = Few<Arc<Hold>>;

/// A few of something, nearly always one, kept without an allocation of its own then:
/// the holds registered under one lock, the locks one owner has holds on.
#[derive(Debug)]
enum Few<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for Few<T> {
    fn default() -> Self {
        Self::Many(Vec::new())
    }
}

impl<T> Few<T> {
    fn as_slice(&self) -> &[T] {
        match self {
            Self::One(one) => std::slice::from_ref(one),
            Self::Many(many) => many,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::One(one) => std::slice::from_mut(one),
            Self::Many(many) => many,
        }
    }

    fn push(&mut self, item: T) {
        match std::mem::take(self) {
            Self::Many(many) if many.is_empty() => *self = Self::One(item),
            Self::Many(mut many) => {
                many.push(item);
                *self = Self::Many(many);
            }
            Self::One(first) => *self = Self::Many(vec![first, item]),
        }
    }

    /// Takes out the first item that `is` picks; whether there was one.
    fn remove_first(&mut self, is: impl Fn(&T) -> bool) -> bool {
        match self {
            Self::One(only) if is(only) => *self = Self::default(),
            Self::One(_) => return false,
            Self::Many(many) => {
                let Some(at) = many.iter().position(is) else {
                    return false;
                };
                many.remove(at);
            }
        }
        true
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    fn into_vec(self) -> Vec<T> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

/// The hold of `holds` (one lock's) that `owner` took (of any kind, or a semaphore
/// permit) and is [being released](Hold::is_being_released), if any.
fn releasing_among<'h>(holds: &'h [Arc<Hold>], owner: &str) -> Option<&'h Arc<Hold>> {
    holds
        .iter()
        .find(|hold| hold.is_taken_by(owner) && hold.is_being_released())
}

/// The answer of [`Holds::local_holder`].
#[derive(Debug)]
pub(crate) enum LocalHolder {
    /// The owner asking: a re-entry, with its hold in use.
    Owner(HoldUse),
    Other,
    Nobody,
}

impl LocalHolder {
    /// Whether a single try is refused without asking Redis: another owner in this
    /// process holds the lock (its answer could only be "busy"). Before a try asks, and
    /// after a batch found the lock taken (by one of a burst of tries here).
    pub(crate) fn refuses_a_try(&self) -> bool {
        matches!(self, LocalHolder::Other)
    }
}

impl Hold {
    /// Held (as far as this process knows) and not lost.
    fn is_live(&self) -> bool {
        self.count() > 0 && !self.is_lost()
    }

    /// Held with a guard: live, and not being released.
    fn is_held_for_real(&self) -> bool {
        self.is_live() && !self.is_being_released()
    }
}

impl Holds {
    /// Who holds the lock filed under `registry` (see [`LockNames::registry_key`])
    /// through this client, as far as it knows, for `owner` asking for a hold of
    /// `kind`: `owner` itself (a re-entry: its hold is returned in use, so one lookup
    /// serves the whole call), another owner whose hold excludes it (Redis would
    /// refuse `owner` for certain), or nobody here.
    pub(crate) fn local_holder(
        self: &Arc<Self>,
        registry: &str,
        owner: &str,
        kind: Kind,
    ) -> LocalHolder {
        let table = self.table.lock();
        let holds = table.by_lock.get(registry).map_or(&[][..], Few::as_slice);
        self.holder_among(holds, owner, kind)
    }

    /// [`local_holder`](Self::local_holder) in one lookup, unless a hold that `owner`
    /// took on the lock (of any kind, or a semaphore permit) is [being
    /// released](Hold::is_being_released): then that hold, to wait for first.
    pub(crate) fn local_holder_unless_releasing(
        self: &Arc<Self>,
        registry: &str,
        owner: &str,
        kind: Kind,
    ) -> Result<LocalHolder, Arc<Hold>> {
        let table = self.table.lock();
        let holds = table.by_lock.get(registry).map_or(&[][..], Few::as_slice);
        match releasing_among(holds, owner) {
            Some(hold) => Err(Arc::clone(hold)),
            None => Ok(self.holder_among(holds, owner, kind)),
        }
    }

    /// Who of `holds` (one lock's) holds it for `owner` asking for a hold of `kind`
    /// (see [`local_holder`](Self::local_holder)); the caller holds the table's lock.
    fn holder_among(self: &Arc<Self>, holds: &[Arc<Hold>], owner: &str, kind: Kind) -> LocalHolder {
        let live = holds.iter().filter(|hold| hold.is_live());
        let mut holder = LocalHolder::Nobody;
        for hold in live {
            if hold.owner == owner && hold.names.kind == kind {
                return LocalHolder::Owner(self.use_registered(hold));
            }
            if hold.owner != owner && hold.names.kind.excludes(kind) {
                holder = LocalHolder::Other;
            }
        }
        holder
    }

    /// The owners whose live holds through this client, on the lock filed under
    /// `registry`, keep out a hold of `kind`: those a waiter for it waits for, as far
    /// as this client knows (for the deadlock check, see `deadlock.rs`). A hold
    /// being released is left out: it is gone once its release lands, whatever its
    /// owner waits for.
    pub(crate) fn holders_excluding(&self, registry: &str, kind: Kind) -> Vec<Str> {
        let table = self.table.lock();
        let holds = table.by_lock.get(registry).map_or(&[][..], Few::as_slice);
        holds
            .iter()
            .filter(|hold| hold.is_held_for_real() && hold.names.kind.excludes(kind))
            .map(|hold| hold.owner.clone())
            .collect()
    }

    /// The registered hold of `owner` on this lock, created (with count 0) if there is
    /// none or the registered one is lost. It stays registered while the use lives.
    pub(crate) fn enter(self: &Arc<Self>, names: &Arc<LockNames>, owner: &Str) -> HoldUse {
        let mut table = self.table.lock();
        let Registry { by_lock, by_owner } = &mut *table;
        let holds = by_lock.entry(RegistryKey(Arc::clone(names))).or_default();
        let hold = match holds
            .as_mut_slice()
            .iter_mut()
            .find(|hold| hold.owner == *owner && hold.names.kind == names.kind)
        {
            // A lost hold is replaced only once no call is at work on it (a late
            // release of it may be in flight: it must not touch the new hold's field).
            // The caller waits for that call, finds the hold lost and enters again.
            Some(slot) if slot.is_lost() && slot.ops.try_lock().is_ok() => {
                *slot = Arc::new(Hold::new(names, slot.owner.clone(), 0));
                Arc::clone(slot)
            }
            Some(slot) => Arc::clone(slot),
            None => {
                let hold = Arc::new(Hold::new(names, owner.clone(), 0));
                holds.push(Arc::clone(&hold));
                Registry::index(by_owner, &hold);
                hold
            }
        };
        self.use_registered(&hold)
    }

    /// Whether `hold` is the one registered for its owner and lock: no newer hold of
    /// the owner has taken its place.
    pub(crate) fn is_current(&self, hold: &Arc<Hold>) -> bool {
        let table = self.table.lock();
        table
            .by_lock
            .get(hold.names.registry_key())
            .is_some_and(|holds| {
                holds
                    .as_slice()
                    .iter()
                    .any(|current| Arc::ptr_eq(current, hold))
            })
    }

    /// Uses `hold`, a hold given up as lost, for a late release: registered again (so
    /// that the owner's next call waits for the release instead of replacing it while
    /// the release is in flight), unless a newer hold of the owner has taken its place
    /// (`None`: a late release would touch that hold's count).
    pub(crate) fn reenter_lost(self: &Arc<Self>, hold: &Arc<Hold>) -> Option<HoldUse> {
        let mut table = self.table.lock();
        let Registry { by_lock, by_owner } = &mut *table;
        let holds = by_lock
            .entry(RegistryKey(Arc::clone(&hold.names)))
            .or_default();
        let same =
            |other: &Arc<Hold>| other.owner == hold.owner && other.names.kind == hold.names.kind;
        match holds.as_slice().iter().find(|other| same(other)) {
            Some(current) if !Arc::ptr_eq(current, hold) => return None,
            Some(_) => {}
            None => {
                holds.push(Arc::clone(hold));
                Registry::index(by_owner, hold);
            }
        }
        drop(table);
        Some(self.reenter(hold))
    }

    /// Uses a hold a guard already has, whether or not it is still registered.
    pub(crate) fn reenter(self: &Arc<Self>, hold: &Arc<Hold>) -> HoldUse {
        let _map = self.table.lock();
        self.use_registered(hold)
    }

    /// Counts a use of `hold`; the caller holds the map's lock, so that `leave` cannot
    /// unregister the hold meanwhile.
    fn use_registered(self: &Arc<Self>, hold: &Arc<Hold>) -> HoldUse {
        hold.in_use.fetch_add(1, Ordering::AcqRel);
        HoldUse {
            holds: Arc::clone(self),
            hold: Arc::clone(hold),
        }
    }

    /// The locks (kind and name) that `owner` holds through this client for real (see
    /// [`holds_for_real`](Self::holds_for_real)), semaphores left out, for its
    /// deadlock checks' edges; `None` if there are more than `most`.
    pub(crate) fn held_for_real(
        &self,
        owner: &str,
        most: usize,
    ) -> Option<Vec<(LockKind, String)>> {
        let table = self.table.lock();
        let locks = table.by_owner.get(owner).map_or(&[][..], Few::as_slice);
        let holds = locks.iter().filter_map(|key| table.by_lock.get(key));
        let mut held: Vec<(LockKind, String)> = Vec::new();
        for hold in holds.flat_map(Few::as_slice) {
            let kind = hold.names.kind;
            let in_checks = kind.takes_part_in_deadlock_checks();
            if *hold.owner != *owner || !in_checks || !hold.is_held_for_real() {
                continue;
            }
            let lock = (kind.public(), hold.names.name.clone());
            if !held.contains(&lock) {
                if held.len() == most {
                    return None;
                }
                held.push(lock);
            }
        }
        held.sort();
        Some(held)
    }

    /// Whether `owner` holds the lock filed under `registry` through this client for
    /// real: a live hold with a guard (not lost, not being released).
    pub(crate) fn holds_for_real(&self, registry: &str, owner: &str) -> bool {
        let table = self.table.lock();
        table.by_lock.get(registry).is_some_and(|holds| {
            holds
                .as_slice()
                .iter()
                .any(|hold| *hold.owner == *owner && hold.is_held_for_real())
        })
    }

    /// A hold that `owner` took on the lock filed under `registry` (of any kind, or a
    /// semaphore permit) and is [being released](Hold::is_being_released), if any.
    pub(crate) fn being_released(&self, registry: &str, owner: &str) -> Option<Arc<Hold>> {
        let table = self.table.lock();
        let holds = table.by_lock.get(registry)?.as_slice();
        releasing_among(holds, owner).map(Arc::clone)
    }

    /// Registers a new hold with `count` holds in place of `stale`, whose Redis state
    /// has vanished.
    pub(crate) fn replace(self: &Arc<Self>, stale: &Arc<Hold>, count: u32) -> HoldUse {
        stale.mark_gone("the hold vanished from redis (expired or force-unlocked)");
        let fresh = Arc::new(Hold::new(&stale.names, stale.owner.clone(), count));
        fresh.in_use.fetch_add(1, Ordering::AcqRel);
        let mut table = self.table.lock();
        let Registry { by_lock, by_owner } = &mut *table;
        let holds = by_lock
            .entry(RegistryKey(Arc::clone(&stale.names)))
            .or_default();
        let same = |hold: &&mut Arc<Hold>| {
            hold.owner == stale.owner && hold.names.kind == stale.names.kind
        };
        match holds.as_mut_slice().iter_mut().find(same) {
            Some(slot) => *slot = Arc::clone(&fresh),
            None => {
                holds.push(Arc::clone(&fresh));
                Registry::index(by_owner, &fresh);
            }
        }
        HoldUse {
            holds: Arc::clone(self),
            hold: fresh,
        }
    }

    /// The holds (count above 0, not lost) of every owner filed under `registry`.
    pub(crate) fn held_under(&self, registry: &str) -> Vec<Arc<Hold>> {
        let table = self.table.lock();
        table
            .by_lock
            .get(registry)
            .map_or(&[][..], Few::as_slice)
            .iter()
            .filter(|hold| hold.count() > 0 && !hold.is_lost())
            .map(Arc::clone)
            .collect()
    }

    /// Empties the registry, marking every hold lost with `why`.
    pub(crate) fn drain(&self, why: &str) {
        let table = std::mem::take(&mut *self.table.lock());
        let holds: Vec<_> = (table.by_lock.into_values())
            .flat_map(Few::into_vec)
            .collect();
        for hold in holds {
            if hold.count() > 0 {
                hold.mark_lost(why);
            }
            hold.stop_watchdog();
        }
    }

    fn leave(&self, hold: &Arc<Hold>) {
        let mut table = self.table.lock();
        let in_use = hold.in_use.fetch_sub(1, Ordering::AcqRel) - 1;
        if in_use > 0 || hold.is_live() {
            return;
        }
        table.remove(hold);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let table = self.table.lock();
        let by_lock: usize = table
            .by_lock
            .values()
            .map(|holds| holds.as_slice().len())
            .sum();
        let by_owner: usize = table
            .by_owner
            .values()
            .map(|locks| locks.as_slice().len())
            .sum();
        assert_eq!(
            by_lock, by_owner,
            "every hold is filed under its owner once"
        );
        by_lock
    }
}

/// A call in progress on a [`Hold`]; unregisters the hold on drop once it is unused.
#[derive(Debug)]
pub(crate) struct HoldUse {
    holds: Arc<Holds>,
    pub(crate) hold: Arc<Hold>,
}

impl Drop for HoldUse {
    fn drop(&mut self) {
        self.holds.leave(&self.hold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::Compat;
    use crate::options::ClientConfig;

    #[tokio::test]
    async fn registry_forgets_unused_holds() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let first = holds.enter(&names, &Str::from("o:1"));
        {
            let mut ops = first.hold.ops.lock().await;
            first.hold.set_count(&mut ops, 1);
        }
        let hold = Arc::clone(&first.hold);
        drop(first);
        assert_eq!(holds.len(), 1, "a held lock stays registered");
        match holds.local_holder("a", "o:1", Kind::mutex(Compat::Holdlock)) {
            LocalHolder::Owner(entry) => assert!(Arc::ptr_eq(&entry.hold, &hold)),
            other => panic!("the holder asked: {other:?}"),
        }
        assert!(matches!(
            holds.local_holder("a", "o:2", Kind::mutex(Compat::Holdlock)),
            LocalHolder::Other
        ));
        assert!(matches!(
            holds.local_holder("b", "o:1", Kind::mutex(Compat::Holdlock)),
            LocalHolder::Nobody
        ));
        let again = holds.reenter(&hold);
        {
            let mut ops = hold.ops.lock().await;
            hold.set_count(&mut ops, 0);
        }
        drop(again);
        assert_eq!(holds.len(), 0, "a released lock is forgotten");
    }

    #[tokio::test]
    async fn an_owners_holds_for_real_are_listed_from_its_own_index() {
        let holds = Arc::new(Holds::default());
        let config = ClientConfig::default();
        let hold = async |name: &str, owner: &str, claimed: bool| {
            let names = Arc::new(config.names(name).unwrap());
            let entry = holds.enter(&names, &Str::from(owner));
            let mut ops = entry.hold.ops.lock().await;
            entry.hold.set_count(&mut ops, 1);
            if claimed {
                entry.hold.add_claim();
            }
            drop(ops);
            entry
        };
        let _a = hold("a", "o:1", true).await;
        let b = hold("b", "o:1", true).await;
        let _other = hold("c", "o:2", true).await;
        // Its guard dropped, its release not landed yet: not held for real.
        let _releasing = hold("d", "o:1", false).await;
        let mutex = |name: &str| (LockKind::Mutex, name.to_owned());
        assert_eq!(
            holds.held_for_real("o:1", 8),
            Some(vec![mutex("a"), mutex("b")])
        );
        assert_eq!(holds.held_for_real("o:1", 1), None, "more than the most");
        assert_eq!(holds.held_for_real("o:3", 8), Some(Vec::new()));
        b.hold.mark_lost("test");
        assert_eq!(holds.held_for_real("o:1", 8), Some(vec![mutex("a")]));
        assert_eq!(holds.len(), 4);
    }

    #[test]
    fn lost_holds_are_replaced_on_enter() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let first = holds.enter(&names, &Str::from("o:1"));
        first.hold.mark_lost("test");
        let second = holds.enter(&names, &Str::from("o:1"));
        assert!(!Arc::ptr_eq(&first.hold, &second.hold));
        assert!(first.hold.lost_flag.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn several_owners_of_one_lock_are_registered_and_forgotten_one_by_one() {
        let holds = Arc::new(Holds::default());
        let names = Arc::new(ClientConfig::default().names("a").unwrap());
        let uses: Vec<HoldUse> = ["o:1", "o:2", "o:3"]
            .into_iter()
            .map(|owner| holds.enter(&names, &Str::from(owner)))
            .collect();
        assert_eq!(holds.len(), 3);
        let again = holds.enter(&names, &Str::from("o:2"));
        assert!(
            Arc::ptr_eq(&again.hold, &uses[1].hold),
            "the same owner's hold"
        );
        drop(again);
        let mut uses = uses.into_iter();
        let first = uses.next().unwrap();
        let first_hold = Arc::clone(&first.hold);
        drop(first);
        assert_eq!(holds.len(), 2, "an unused, unheld hold is forgotten");
        assert!(!holds.is_current(&first_hold));
        let rest: Vec<HoldUse> = uses.collect();
        assert!(rest.iter().all(|entry| holds.is_current(&entry.hold)));
        // Registered again under a key whose first names were the forgotten hold's.
        let other_names = Arc::new(ClientConfig::default().names("a").unwrap());
        let fourth = holds.enter(&other_names, &Str::from("o:4"));
        assert_eq!(holds.len(), 3);
        drop(rest);
        drop(fourth);
        assert_eq!(holds.len(), 0);
        assert!(matches!(
            holds.local_holder("a", "o:2", Kind::mutex(Compat::Holdlock)),
            LocalHolder::Nobody
        ));
    }
}
