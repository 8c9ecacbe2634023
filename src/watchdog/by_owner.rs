//! The renewals due, put together by owner (see [`ByOwner`]).

use std::collections::HashMap;

/// Up to this many owners, an owner's run is found by looking at each; past it, by a
/// map.
const FEW_OWNERS: usize = 16;

/// Items (the renewals due) put together by owner, each owner's in the order they came:
/// a batch call names each run of one owner's holds once. Linear in the items, where a
/// sort by owner was not: a pass renews thousands of holds of a few owners (a task's
/// holds share their owner id's bytes, so an owner is known by the address of those).
#[derive(Debug)]
pub(super) struct ByOwner<T> {
    runs: Vec<(usize, Vec<T>)>,
    /// The run of the last item: the next one is often the same owner's.
    last: usize,
    /// Where each owner's run is, once there are more than [`FEW_OWNERS`].
    index: HashMap<usize, usize>,
}

impl<T> Default for ByOwner<T> {
    fn default() -> Self {
        Self {
            runs: Vec::new(),
            last: 0,
            index: HashMap::new(),
        }
    }
}

impl<T> ByOwner<T> {
    /// Adds `item` to the run of `owner` (the address of its owner id's bytes).
    pub(super) fn push(&mut self, owner: *const u8, item: T) {
        let owner = owner.addr();
        let run = match self.runs.get(self.last) {
            Some((last, _)) if *last == owner => self.last,
            _ => self.run_of(owner),
        };
        self.last = run;
        self.runs[run].1.push(item);
    }

    /// The run of `owner`, made if it has none.
    fn run_of(&mut self, owner: usize) -> usize {
        let found = if self.runs.len() <= FEW_OWNERS {
            self.runs.iter().position(|(known, _)| *known == owner)
        } else {
            self.index.get(&owner).copied()
        };
        if let Some(run) = found {
            return run;
        }
        self.runs.push((owner, Vec::new()));
        let run = self.runs.len() - 1;
        if self.runs.len() > FEW_OWNERS {
            if self.index.is_empty() {
                self.index = self
                    .runs
                    .iter()
                    .enumerate()
                    .map(|(run, (known, _))| (*known, run))
                    .collect();
            } else {
                self.index.insert(owner, run);
            }
        }
        run
    }

    /// Every item, one owner's after another's, owners in the order they first came.
    pub(super) fn into_vec(self) -> Vec<T> {
        let mut runs = self.runs.into_iter().map(|(_, run)| run);
        let mut all = runs.next().unwrap_or_default();
        for run in runs {
            all.extend(run);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grouped(owners: &[&'static str], items: usize) -> Vec<(usize, usize)> {
        let mut by_owner = ByOwner::default();
        for item in 0..items {
            let owner = item % owners.len();
            by_owner.push(owners[owner].as_ptr(), (owner, item));
        }
        by_owner.into_vec()
    }

    #[test]
    fn each_owners_items_come_together_in_the_order_they_came() {
        let owners = ["a", "bb", "ccc"];
        let items = grouped(&owners, 10);
        let expected: Vec<(usize, usize)> = (0..3)
            .flat_map(|owner| (owner..10).step_by(3).map(move |item| (owner, item)))
            .collect();
        assert_eq!(items, expected);
        assert!(ByOwner::<u8>::default().into_vec().is_empty());
    }

    #[test]
    fn many_owners_are_found_by_the_map_alike() {
        let names: Vec<&'static str> = (0..FEW_OWNERS * 3)
            .map(|i| &*Box::leak(format!("owner-{i}").into_boxed_str()))
            .collect();
        let items = grouped(&names, names.len() * 4 + 5);
        let mut seen = Vec::new();
        for chunk in items.chunk_by(|a, b| a.0 == b.0) {
            let owner = chunk[0].0;
            assert!(!seen.contains(&owner), "owner {owner} in two runs");
            seen.push(owner);
            assert!(chunk.windows(2).all(|pair| pair[0].1 < pair[1].1));
        }
        assert_eq!(seen, (0..names.len()).collect::<Vec<_>>());
        assert_eq!(items.len(), names.len() * 4 + 5);
    }
}
