//! Deadlocks across processes, found and broken.
//!
//! With the watchdog, a cycle of waits (A holds `x` and waits for `y`, B holds `y` and
//! waits for `x`) never ends by itself: both holders live, so both leases are renewed.
//! Each wait that lasts longer than the client's check delay (`deadlock_check`) looks
//! for one:
//!
//! - **The edge.** It records which lock its owner waits for, and which locks it holds
//!   for real (live holds with a guard, as its client knows them): a string per owner,
//!   `<prefix>waits:<owner>` = `<wait began, ms> <wait id> <kind> <name>` then the
//!   locks held (see [`Edge::record`]), with an expiry of a few check delays, written
//!   again at each check and taken down when the wait ends (see
//!   [`clear_wait`](crate::scripts::clear_wait)). A shorter wait, and a lock taken at
//!   once, send nothing for it.
//! - **The walk.** From the lock it waits for, it reads the holders (`HKEYS`), each
//!   holder's edge, the holders of the lock that one waits for, and so on, breadth
//!   first, [`MOST_LOCKS`] locks at most. A waiting holder counts only for the locks
//!   its edge lists: Redis may list an owner whose client has let go (a release held up
//!   by a failover, a hold lost and not yet expired), and such a hold ends by itself.
//!   A holder that is this owner closes a cycle. The reads are one by one, so the walk
//!   works on a cluster, where the keys are in different slots, as on a single server.
//! - **The second look.** A walk's reads are not one snapshot, so a cycle may be made of
//!   states that never were at once. A cycle counts only if a second walk, a moment
//!   later, finds the very same waits (owners and wait ids): a deadlock is stable, a
//!   passing state is not.
//! - **The victim.** Every waiter of the cycle finds it; the one whose wait began last
//!   (the latest recorded start, then the greatest owner id, then wait id: the same
//!   answer for each, from the same records) fails with `LockError::Deadlock`, and the
//!   others go on waiting. It began last, so when its first check comes every other
//!   edge of the cycle is there already.
//!
//! A semaphore's waits are left out: a waiter for a permit waits for any one of its
//! holders, not for each, so a cycle through one need not be a deadlock.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::OnceCell;
use tokio::time::Instant;

use fred::clients::Client;

use parking_lot::Mutex;

use crate::chores::Chores;
use crate::error::{LockError, Result, WaitFor};
use crate::hold::Holds;
use crate::keys::{LockKind, WAITS, wait_key};
use crate::options::ClientConfig;
use crate::scripts::{LockNames, clear_wait, read_holders, read_wait, write_wait};

/// The most locks one walk reads: a longer cycle is not looked for.
pub(crate) const MOST_LOCKS: usize = 64;

/// How many gaps to the next check an edge outlives its write (a crashed waiter's is
/// gone after that).
const EDGE_CHECKS: u32 = 3;

/// The most locks an edge lists as held by its owner; an owner holding more is taken
/// at Redis's word (see [`Edge::holding`]).
const MOST_LISTED: usize = 64;

/// Ends an edge's record in place of its held locks when there were too many to list.
const UNLISTED: &str = " +";

/// The longest gap between two checks of a wait, in check delays.
const LONGEST_GAP: u32 = 8;

/// Counts the waits of this process, so that an edge names its wait.
static WAIT_IDS: AtomicU64 = AtomicU64::new(0);

/// A client's deadlock checks: how long a wait lasts before it is checked, what the
/// walk needs to read the locks, and what the client knows of its own holds and waits
/// (a cycle among its own tasks is found without asking Redis).
#[derive(Debug)]
pub(crate) struct Detector {
    check: Duration,
    config: ClientConfig,
    /// The scripts' connection: edges written, read and taken down.
    redis: Client,
    /// Taking an edge down is a chore `shutdown` waits for (see `chores.rs`).
    chores: Arc<Chores>,
    /// This client's holds (the engine's).
    holds: Arc<Holds>,
    /// This client's waits being checked, by owner.
    local_waits: Mutex<HashMap<String, LocalWait>>,
    /// The checks' recent walks, by lock (see [`Detector::explored`]).
    walks: Mutex<Walks>,
}

impl Detector {
    /// The checks of a client with `config`, if they are on, over `redis`, counting
    /// their chores in `chores` and reading the client's `holds`.
    pub(crate) fn new(
        config: &ClientConfig,
        redis: Client,
        chores: Arc<Chores>,
        holds: Arc<Holds>,
    ) -> Option<Arc<Self>> {
        Some(Arc::new(Self {
            check: config.deadlock_check?,
            config: config.clone(),
            redis,
            chores,
            holds,
            local_waits: Mutex::default(),
            walks: Mutex::default(),
        }))
    }
}

/// The gap between a walk that found a cycle and the second look, for checks every
/// `check`.
pub(crate) fn second_look(check: Duration) -> Duration {
    (check / 4).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// One owner's wait, as its edge records it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    owner: String,
    /// When the wait began, in milliseconds since the Unix epoch (the waiter's clock).
    since_ms: u64,
    wait: u64,
    kind: LockKind,
    name: String,
    /// The locks this owner holds for real as it writes the edge (live holds with a
    /// guard), or `None` if there were more than [`MOST_LISTED`]. Redis may go on
    /// listing an owner as a holder after its client let go (a release in flight, held
    /// up by a failover; a hold lost and not yet expired): a walk counts a waiting
    /// holder only for the locks its edge lists.
    holding: Option<Vec<(LockKind, String)>>,
}

/// `<kind> <length of the name>:<name>`: a lock in an edge's record.
fn write_lock(record: &mut String, kind: LockKind, name: &str) {
    use std::fmt::Write;
    let _ = write!(record, "{} {}:{name}", kind.as_str(), name.len());
}

/// A lock written by [`write_lock`] at the start of `text`, and what follows it.
fn read_lock(text: &str) -> Option<((LockKind, String), &str)> {
    let (kind, rest) = text.split_once(' ')?;
    let (length, rest) = rest.split_once(':')?;
    let length: usize = length.parse().ok()?;
    let name = rest.get(..length)?;
    Some(((kind.parse().ok()?, name.to_owned()), &rest[length..]))
}

impl Edge {
    /// The edge's record: `<since_ms> <wait> <kind> <length>:<name>`, then ` <kind>
    /// <length>:<name>` for each lock its owner holds (the names counted: they may hold
    /// spaces), or [`UNLISTED`] if there were too many.
    fn record(&self) -> String {
        let mut record = format!("{} {} ", self.since_ms, self.wait);
        write_lock(&mut record, self.kind, &self.name);
        match &self.holding {
            Some(holding) => {
                for (kind, name) in holding {
                    record.push(' ');
                    write_lock(&mut record, *kind, name);
                }
            }
            None => record.push_str(UNLISTED),
        }
        record
    }

    /// The edge of `owner` whose record is `record`; `None` for one this crate did not
    /// write.
    fn read(owner: &str, record: &str) -> Option<Self> {
        let (since_ms, rest) = record.split_once(' ')?;
        let (wait, rest) = rest.split_once(' ')?;
        let ((kind, name), mut rest) = read_lock(rest)?;
        let holding = if rest == UNLISTED {
            None
        } else {
            let mut listed = Vec::new();
            while !rest.is_empty() {
                let (lock, after) = read_lock(rest.strip_prefix(' ')?)?;
                listed.push(lock);
                rest = after;
            }
            Some(listed)
        };
        Some(Self {
            owner: owner.to_owned(),
            since_ms: since_ms.parse().ok()?,
            wait: wait.parse().ok()?,
            kind,
            name,
            holding,
        })
    }

    /// Whether this edge's owner holds the lock `name` of `kind`, as far as its edge
    /// tells.
    fn holds(&self, kind: LockKind, name: &str) -> bool {
        self.holding
            .as_ref()
            .is_none_or(|holding| holding.iter().any(|(k, n)| *k == kind && n == name))
    }

    /// Whether `other` records the same wait (the locks held may differ).
    fn is(&self, other: &Edge) -> bool {
        self.owner == other.owner && self.wait == other.wait
    }

    /// The wait as the API names it.
    fn into_wait(self) -> WaitFor {
        WaitFor::new(self.owner, self.kind, self.name)
    }

    /// Which wait of a cycle gives up: the one that began last (ties: the greatest
    /// owner id, then wait id).
    fn rank(&self) -> (u64, &str, u64) {
        (self.since_ms, &self.owner, self.wait)
    }
}

/// The walks of a client's checks, by lock: when each began, and its tree once made.
pub(crate) type Walks = HashMap<(LockKind, String), (Instant, Arc<OnceCell<Arc<Tree>>>)>;

/// A wait of this client being checked, as its own tasks' walks see it.
#[derive(Debug)]
pub(crate) struct LocalWait {
    edge: Edge,
    names: Arc<LockNames>,
}

/// A wait's deadlock check, made by [`Detector::watch`]: see the module docs.
#[derive(Debug)]
pub(crate) struct Watch {
    detector: Arc<Detector>,
    names: Arc<LockNames>,
    edge: Edge,
    key: String,
    /// Whether the edge may be in Redis (a write was sent): taken down on drop.
    written: bool,
}

impl Detector {
    /// The deadlock check of `owner`'s wait for the lock `names`, which begins now;
    /// `None` if checks are off or the kind takes no part (a semaphore).
    pub(crate) fn watch(self: &Arc<Self>, names: &Arc<LockNames>, owner: &str) -> Option<Watch> {
        let kind = names.kind.public();
        if !names.kind.takes_part_in_deadlock_checks() {
            return None;
        }
        let since_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        let edge = Edge {
            owner: owner.to_owned(),
            since_ms,
            wait: WAIT_IDS.fetch_add(1, Ordering::Relaxed),
            kind,
            name: names.name.clone(),
            holding: Some(Vec::new()),
        };
        let local = LocalWait {
            edge: edge.clone(),
            names: Arc::clone(names),
        };
        self.local_waits.lock().insert(owner.to_owned(), local);
        let key = wait_key(&self.config.prefix, owner);
        Some(Watch {
            detector: Arc::clone(self),
            names: Arc::clone(names),
            key,
            edge,
            written: false,
        })
    }
}

impl Watch {
    /// Checks the wait every check delay, as long as it lasts: returns only when the
    /// wait closes a cycle and is its victim, with the error that ends it. A check that
    /// fails (Redis unreachable) is tried again at the next.
    ///
    /// # Cancel safety
    /// Dropping it (the wait ended) takes the edge down in the background.
    pub(crate) async fn run(mut self) -> LockError {
        let check = self.detector.check;
        let mut gap = check;
        loop {
            tokio::time::sleep(gap).await;
            // Each check comes twice as long after the one before, up to
            // [`LONGEST_GAP`] checks: the cycle a wait closes is found at its first
            // (it began last, see the module docs); the later ones are for clients with
            // other check delays, and for checks that failed.
            gap = (gap * 2).min(check * LONGEST_GAP);
            match self.check(gap).await {
                Ok(Some(cycle)) => return LockError::Deadlock { cycle },
                Ok(None) => {}
                Err(error) => {
                    tracing::debug!(%error, name = %self.edge.name, "a deadlock check failed");
                }
            }
        }
    }

    /// Writes the edge, and looks for a cycle through it twice: the cycle if this wait
    /// is its victim.
    async fn check(&mut self, next_in: Duration) -> Result<Option<Vec<WaitFor>>> {
        let detection = &*self.detector;
        let second_look = second_look(detection.check);
        // A cycle among this client's own tasks is found from what it knows.
        if let Some(first) = self.local_walk() {
            tokio::time::sleep(second_look).await;
            return Ok(self
                .local_walk()
                .filter(|second| *second == first)
                .and_then(|cycle| self.victim_of(cycle)));
        }
        let redis = self.detector.redis.clone();
        self.edge.holding = (self.detector.holds).held_for_real(&self.edge.owner, MOST_LISTED);
        let record = self.edge.record();
        self.written = true;
        write_wait(&redis, &self.key, &record, next_in * EDGE_CHECKS).await?;
        let walker = Walker {
            config: &detection.config,
            redis: &redis,
        };
        let lock = (self.edge.kind, self.edge.name.as_str());
        let walk = || self.detector.explored(walker, lock, second_look / 2);
        let cycle = found_twice(&self.edge, second_look, walk).await?;
        Ok(cycle.and_then(|cycle| self.victim_of(cycle)))
    }

    /// The cycle `cycle` (found twice), if this wait is its victim (see [`Edge::rank`]),
    /// told.
    fn victim_of(&self, cycle: Vec<Edge>) -> Option<Vec<WaitFor>> {
        let victim = cycle.iter().max_by(|a, b| a.rank().cmp(&b.rank()))?;
        if !victim.is(&self.edge) {
            return None;
        }
        // Redis says this owner holds the lock that closes the cycle; unless its client
        // holds it for real (a live hold with a guard), that is a hold Redis has not
        // yet seen go (its release in flight, held up by a failover, or lost and not
        // yet expired on a promoted replica), and the cycle ends by itself.
        let closing = cycle.last()?;
        let names = self
            .detector
            .config
            .kind_names(&closing.name, closing.kind)
            .ok()?;
        if !self
            .detector
            .holds
            .holds_for_real(names.registry_key(), &self.edge.owner)
        {
            return None;
        }
        let cycle: Vec<WaitFor> = cycle.into_iter().map(Edge::into_wait).collect();
        tracing::warn!(
            cycle = %LockError::Deadlock { cycle: cycle.clone() },
            "a deadlock was found; this wait gives up"
        );
        #[cfg(feature = "metrics")]
        crate::observe::metrics::deadlock_broken();
        Some(cycle)
    }

    /// Follows this client's own holds and waits from this wait's lock, breadth first:
    /// the shortest cycle back to this wait through them alone, if there is one.
    fn local_walk(&self) -> Option<Vec<Edge>> {
        let waits = self.detector.local_waits.lock();
        let holds = &self.detector.holds;
        let mut edges: Vec<(&Edge, &Arc<LockNames>, usize)> = vec![(&self.edge, &self.names, 0)];
        let mut seen = HashSet::from([self.edge.owner.as_str()]);
        let mut next = 0;
        while next < edges.len() && next < MOST_LOCKS {
            let names = edges[next].1;
            for holder in holds.holders_excluding(names.registry_key(), names.kind) {
                if *holder == self.edge.owner {
                    let mut cycle = Vec::new();
                    let mut at = next;
                    loop {
                        cycle.push(edges[at].0.clone());
                        if at == 0 {
                            break;
                        }
                        at = edges[at].2;
                    }
                    cycle.reverse();
                    return Some(cycle);
                }
                let Some((owner, wait)) = waits.get_key_value(&*holder) else {
                    continue;
                };
                if seen.insert(owner.as_str()) {
                    edges.push((&wait.edge, &wait.names, next));
                }
            }
            next += 1;
        }
        None
    }
}

/// The cycle through `start` that two walks `second_look` apart (each made by `walk`)
/// both find, the very same waits: the second look (see the module docs).
async fn found_twice<F, Walk, Found>(
    start: &Edge,
    second_look: Duration,
    walk: F,
) -> Result<Option<Vec<Edge>>>
where
    F: Fn() -> Walk,
    Walk: Future<Output = Result<Found>>,
    Found: Borrow<Tree>,
{
    let Some(first) = walk().await?.borrow().cycle_for(start) else {
        return Ok(None);
    };
    tokio::time::sleep(second_look).await;
    let second = walk().await?.borrow().cycle_for(start);
    Ok(second.filter(|second| *second == first))
}

/// What a walk reads the locks and the edges with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walker<'a> {
    pub(crate) config: &'a ClientConfig,
    pub(crate) redis: &'a Client,
}

/// What a walk found from one lock, breadth first: the lock (node 0) and each owner
/// with an edge met, each with the holders of the lock it waits for. Shared by every
/// waiter of the lock in this client that checks at about the same time (see
/// [`Detector::explored`]).
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// (the edge, `None` for the lock itself; the node whose lock its owner holds;
    /// the holders of the lock it waits for).
    nodes: Vec<(Option<Edge>, usize, Vec<String>)>,
}

impl Tree {
    /// The shortest cycle back to `start`'s owner, waiting for this tree's lock,
    /// starting with `start`.
    fn cycle_for(&self, start: &Edge) -> Option<Vec<Edge>> {
        let closing = self
            .nodes
            .iter()
            .position(|(_, _, holders)| holders.contains(&start.owner))?;
        let mut cycle = Vec::new();
        let mut at = closing;
        while let (Some(edge), parent, _) = &self.nodes[at] {
            cycle.push(edge.clone());
            at = *parent;
        }
        cycle.push(start.clone());
        cycle.reverse();
        Some(cycle)
    }
}

impl Walker<'_> {
    /// Follows the edges from the lock `name` of `kind`, breadth first, reading
    /// [`MOST_LOCKS`] locks at most.
    async fn explore(self, kind: LockKind, name: &str) -> Result<Tree> {
        let mut tree = Tree::default();
        let mut edges: HashMap<String, Option<Edge>> = HashMap::new();
        let holders = self.holding(kind, name, &mut edges).await?;
        tree.nodes.push((None, 0, holders));
        let mut next = 0;
        let mut seen = HashSet::new();
        while next < tree.nodes.len() && tree.nodes.len() < MOST_LOCKS {
            let holders = tree.nodes[next].2.clone();
            for holder in holders {
                if !seen.insert(holder.clone()) {
                    continue;
                }
                if let Some(Some(edge)) = edges.get(&holder).cloned() {
                    let holders = self.holding(edge.kind, &edge.name, &mut edges).await?;
                    tree.nodes.push((Some(edge), next, holders));
                }
            }
            next += 1;
        }
        Ok(tree)
    }

    /// The holders of the lock `name` of `kind` that hold it for real: each one's
    /// edge read into `edges` (once), and a waiting one whose edge does not list the
    /// lock left out.
    async fn holding(
        self,
        kind: LockKind,
        name: &str,
        edges: &mut HashMap<String, Option<Edge>>,
    ) -> Result<Vec<String>> {
        let mut holding = Vec::new();
        for holder in self.holders(kind, name).await? {
            if !edges.contains_key(&holder) {
                let edge = self.edge_of(&holder).await?;
                edges.insert(holder.clone(), edge);
            }
            if edges[&holder]
                .as_ref()
                .is_none_or(|edge| edge.holds(kind, name))
            {
                holding.push(holder);
            }
        }
        Ok(holding)
    }

    /// The owners a waiter for the lock `name` of `kind` waits for.
    async fn holders(self, kind: LockKind, name: &str) -> Result<Vec<String>> {
        let names = self.config.kind_names(name, kind)?;
        read_holders(self.redis, &names).await
    }

    /// The edge of `owner`'s current long wait, if it has one.
    async fn edge_of(self, owner: &str) -> Result<Option<Edge>> {
        let key = wait_key(&self.config.prefix, owner);
        let record = read_wait(self.redis, &key).await?;
        Ok(record.and_then(|record| Edge::read(owner, &record)))
    }

    /// Every long wait whose edge is at one of `keys` (as [`wait_key`] builds them;
    /// others are skipped), with when it began (ms since the Unix epoch), and the
    /// deadlocks among them: each cycle once, from its victim's wait on, confirmed by a
    /// second look `second_look` later.
    pub(crate) async fn graph(
        self,
        keys: &[String],
        second_look: Duration,
    ) -> Result<(Vec<(WaitFor, u64)>, Vec<Vec<WaitFor>>)> {
        let prefix = [self.config.prefix.as_str(), WAITS].concat();
        let mut edges = Vec::new();
        for key in keys {
            let Some(owner) = key.strip_prefix(&prefix) else {
                continue;
            };
            if let Some(edge) = self.edge_of(owner).await? {
                edges.push(edge);
            }
        }
        let mut deadlocks = Vec::new();
        for edge in &edges {
            let tree = self.explore(edge.kind, &edge.name).await?;
            let Some(cycle) = tree.cycle_for(edge) else {
                continue;
            };
            // Each cycle once: from its victim's wait, which every member's walk names.
            if !cycle
                .iter()
                .max_by(|a, b| a.rank().cmp(&b.rank()))
                .is_some_and(|victim| victim.is(edge))
            {
                continue;
            }
            let walk = || self.explore(edge.kind, &edge.name);
            if let Some(cycle) = found_twice(edge, second_look, walk).await? {
                deadlocks.push(cycle.into_iter().map(Edge::into_wait).collect());
            }
        }
        let waits = edges
            .into_iter()
            .map(|edge| {
                let since = edge.since_ms;
                (edge.into_wait(), since)
            })
            .collect();
        Ok((waits, deadlocks))
    }
}

impl Detector {
    /// The walk from the lock `name` of `kind`: one made by another waiter of this
    /// client less than `fresh` ago (or under way), else a new one. Many local waiters
    /// of one lock (a hot account) then read Redis once per check between them.
    async fn explored(
        &self,
        walker: Walker<'_>,
        (kind, name): (LockKind, &str),
        fresh: Duration,
    ) -> Result<Arc<Tree>> {
        let cell = {
            let mut walks = self.walks.lock();
            let now = Instant::now();
            walks.retain(|_, (at, _)| now.duration_since(*at) < fresh);
            let (_, cell) = walks
                .entry((kind, name.to_owned()))
                .or_insert_with(|| (now, Arc::default()));
            Arc::clone(cell)
        };
        let tree = cell
            .get_or_try_init(|| async { walker.explore(kind, name).await.map(Arc::new) })
            .await?;
        Ok(Arc::clone(tree))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        {
            let mut waits = self.detector.local_waits.lock();
            if waits
                .get(&self.edge.owner)
                .is_some_and(|wait| wait.edge == self.edge)
            {
                waits.remove(&self.edge.owner);
            }
        }
        if !self.written {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (redis, chore) = (self.detector.redis.clone(), self.detector.chores.begin());
        let key = std::mem::take(&mut self.key);
        runtime.spawn(async move {
            if let Err(error) = clear_wait(&redis, &key).await {
                tracing::debug!(%error, %key, "taking down a wait-for edge failed");
            }
            drop(chore);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_reads_back_what_it_records() {
        let mut edge = Edge {
            owner: "u:1".into(),
            since_ms: 1_700_000_000_123,
            wait: 7,
            kind: LockKind::ReadWrite,
            name: "a name: with spaces".into(),
            holding: Some(Vec::new()),
        };
        assert_eq!(Edge::read("u:1", &edge.record()), Some(edge.clone()));
        assert!(!edge.holds(LockKind::Mutex, "x 1:y"));
        edge.holding = Some(vec![
            (LockKind::Mutex, "x 1:y".into()),
            (LockKind::Fair, "é".into()),
            (LockKind::Mutex, "+".into()),
        ]);
        assert_eq!(Edge::read("u:1", &edge.record()), Some(edge.clone()));
        assert!(edge.holds(LockKind::Mutex, "x 1:y"));
        assert!(!edge.holds(LockKind::Fair, "x 1:y"));
        // Too many to list: Redis's word is taken for any lock.
        edge.holding = None;
        assert_eq!(Edge::read("u:1", &edge.record()), Some(edge.clone()));
        assert!(edge.holds(LockKind::Fair, "x 1:y"));
        for bad in [
            "12 x mutex 1:a",
            "12 3 lock 1:a",
            "12 3 mutex",
            "12 3 mutex 2:a",
            "12 3 mutex 1:ab",
        ] {
            assert_eq!(Edge::read("u:1", bad), None, "{bad}");
        }
    }

    #[test]
    fn the_wait_that_began_last_is_the_victim() {
        let edge = |owner: &str, since_ms, wait| Edge {
            owner: owner.into(),
            since_ms,
            wait,
            kind: LockKind::Mutex,
            name: "a".into(),
            holding: None,
        };
        let cycle = [edge("a:1", 10, 1), edge("b:1", 30, 1), edge("c:1", 20, 9)];
        let victim = cycle.iter().max_by(|a, b| a.rank().cmp(&b.rank()));
        assert_eq!(victim.map(|e| e.owner.as_str()), Some("b:1"));
        let tied = [edge("a:1", 30, 1), edge("b:1", 30, 1)];
        let victim = tied.iter().max_by(|a, b| a.rank().cmp(&b.rank()));
        assert_eq!(victim.map(|e| e.owner.as_str()), Some("b:1"));
    }
}
