//! Who holds a lock: the current tokio task, an [`owner_scope`], or the thread.

use std::fmt;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use fred::bytes_utils::Str;

/// Scope and thread numbers come from one counter, so they never repeat in a process.
static NEXT_LOCAL_OWNER: AtomicU64 = AtomicU64::new(1);

tokio::task_local! {
    static SCOPE: u64;
}

#[cfg(feature = "blocking")]
tokio::task_local! {
    /// The OS thread a future runs for, when it runs elsewhere (see [`as_thread`]).
    static AS_THREAD: u64;
}

thread_local! {
    static THREAD: u64 = NEXT_LOCAL_OWNER.fetch_add(1, Ordering::Relaxed);
}

/// The process-local part of an owner id: what follows `<client-uuid>:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LocalOwner {
    Scope(u64),
    Task(tokio::task::Id),
    Thread(u64),
}

/// `scope-<n>`, `task-<id>` or `thread-<n>`.
impl fmt::Display for LocalOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scope(scope) => write!(f, "scope-{scope}"),
            Self::Task(id) => write!(f, "task-{id}"),
            Self::Thread(thread) => write!(f, "thread-{thread}"),
        }
    }
}

/// Who owns locks taken here and now. An [`owner_scope`] wins over the task, and the
/// task over the thread (a thread given with `as_thread` wins over the task).
pub(crate) fn local_owner() -> LocalOwner {
    if let Ok(scope) = SCOPE.try_with(|scope| *scope) {
        return LocalOwner::Scope(scope);
    }
    #[cfg(feature = "blocking")]
    if let Ok(thread) = AS_THREAD.try_with(|thread| *thread) {
        return LocalOwner::Thread(thread);
    }
    match tokio::task::try_id() {
        Some(id) => LocalOwner::Task(id),
        None => THREAD.with(|thread| LocalOwner::Thread(*thread)),
    }
}

/// Runs `future` as an owner of its own, distinct from the task that polls it.
///
/// Locks are reentrant per owner, and the owner is normally the current tokio task.
/// Futures that run concurrently *inside one task* (`tokio::join!`, `select!`,
/// `FuturesUnordered`) therefore share an owner, and would all enter the same lock at
/// once. Wrap each of them in `owner_scope` to make them exclude each other. Locks
/// taken inside a scope are re-entered only inside that same scope.
///
/// # Examples
/// ```no_run
/// # async fn dox(client: holdlock::LockClient) -> holdlock::Result<()> {
/// use holdlock::owner_scope;
///
/// let (a, b) = tokio::join!(
///     owner_scope(async { client.lock("stock:7").await.map(|g| g.owner().to_owned()) }),
///     owner_scope(async { client.lock("stock:7").await.map(|g| g.owner().to_owned()) }),
/// );
/// assert_ne!(a?, b?); // two owners: the second waited for the first
/// # Ok(()) }
/// ```
pub async fn owner_scope<F: Future>(future: F) -> F::Output {
    within_scope(new_scope(), future).await
}

/// A scope number never handed out before, for [`within_scope`].
pub(crate) fn new_scope() -> u64 {
    NEXT_LOCAL_OWNER.fetch_add(1, Ordering::Relaxed)
}

/// Runs `future` as the owner `scope` (from [`new_scope`]): [`owner_scope`] with a
/// scope chosen by the caller, so that several futures can share one (the layers of
/// one request in `holdlock::tower`), and with a future type that can be named.
pub(crate) fn within_scope<F: Future>(
    scope: u64,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<u64, F> {
    SCOPE.scope(scope, future)
}

/// The number of the calling OS thread, as its locks' owner ids show it (`thread-<n>`).
#[cfg(feature = "blocking")]
pub(crate) fn current_thread_owner() -> u64 {
    THREAD.with(|thread| *thread)
}

/// Runs `future` as the OS thread numbered `thread` (see [`current_thread_owner`]),
/// wherever it is polled: the blocking API carries its caller's thread in with it.
#[cfg(feature = "blocking")]
pub(crate) async fn as_thread<F: Future>(thread: u64, future: F) -> F::Output {
    AS_THREAD.scope(thread, future).await
}

/// One client's recent owner ids, by local owner: a lock call finds its owner's id
/// without formatting it, and the holds of one owner share one copy of its bytes (a
/// task holding many locks; the watchdog puts one owner's holds together by the address
/// of those bytes). A small table by hash, each owner kept in one of [`WAYS`] places
/// from its hash's, where a newer owner takes the oldest one's place. (With one place
/// per owner, two busy tasks whose numbers hashed alike took each other's place at
/// every call, and their holds got copies of their own.)
#[derive(Debug)]
pub(crate) struct OwnerIds(parking_lot::Mutex<Box<[Kept]>>);

/// A place of [`OwnerIds`]: an owner and its id, or nothing yet.
type Kept = Option<(LocalOwner, Str)>;

/// How many owner ids [`OwnerIds`] keeps: 1,024, about 150 KB when all are taken, so
/// that a pool of hundreds of long-lived tasks finds its ids kept. (With 256 places,
/// W11's 256 tasks overflowed their groups of four and formatted their ids at most
/// calls: 1,050 instructions more per cycle.)
const OWNER_IDS: usize = 1024;

/// In how many places from its hash's an owner id may be kept.
const WAYS: usize = 4;

impl Default for OwnerIds {
    fn default() -> Self {
        Self(parking_lot::Mutex::new(
            vec![None; OWNER_IDS].into_boxed_slice(),
        ))
    }
}

impl OwnerIds {
    /// The id of `owner`: the kept one if there is one, else `format(owner)`, kept.
    pub(crate) fn id_of(&self, owner: LocalOwner, format: impl FnOnce(LocalOwner) -> Str) -> Str {
        let mut hasher = OwnKeyHasher::default();
        owner.hash(&mut hasher);
        // Each group of `WAYS` places starts at a multiple of it; the remainder fits.
        let start = (hasher.finish() % (OWNER_IDS / WAYS) as u64) as usize * WAYS;
        let mut kept = self.0.lock();
        let group = &mut kept[start..start + WAYS];
        if let Some((_, id)) = group.iter().flatten().find(|(local, _)| *local == owner) {
            return id.clone();
        }
        // The newest first: the oldest (last) makes way.
        group.rotate_right(1);
        group[0].insert((owner, format(owner))).1.clone()
    }
}

/// The hasher of the keys this process makes itself, never taken from outside: owner
/// numbers and owner ids (see [`OwnKeyHasher`]).
pub(crate) type OwnKeys = std::hash::BuildHasherDefault<OwnKeyHasher>;

/// Hashes eight bytes at a time with a multiply (the mixing step of rustc's FxHash).
/// For keys nobody outside chooses (this process's task, scope and thread numbers,
/// and the owner ids made of them) SipHash's defence against chosen keys buys nothing,
/// at several times the cost: a lock's name, which callers choose, is never hashed so.
#[derive(Debug, Default)]
pub(crate) struct OwnKeyHasher(u64);

impl Hasher for OwnKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(word) ^ (rest.len() as u64) << 56);
        }
    }

    fn write_u8(&mut self, number: u8) {
        self.write_u64(u64::from(number));
    }

    fn write_u64(&mut self, number: u64) {
        self.0 = (self.0.rotate_left(5) ^ number).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, number: usize) {
        self.write_u64(number as u64);
    }

    fn write_isize(&mut self, number: isize) {
        self.write_usize(number as usize);
    }

    fn finish(&self) -> u64 {
        // The high bits are the best mixed; a hash table reads the low ones too.
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_holds_of_one_owner_share_its_id_among_many_owners() {
        let ids = OwnerIds::default();
        let format = |owner: LocalOwner| Str::from(format!("client:{owner}"));
        let owners: Vec<LocalOwner> = (0..16).map(|_| LocalOwner::Scope(new_scope())).collect();
        let first: Vec<Str> = owners
            .iter()
            .map(|owner| ids.id_of(*owner, format))
            .collect();
        // Taken in turns, as sixteen tasks taking locks at once do: every call after
        // the first of each owner shares that first one's bytes, formatted once.
        for _ in 0..100 {
            for (owner, kept) in owners.iter().zip(&first) {
                let shared = ids.id_of(*owner, |_| panic!("{owner} formatted again"));
                assert_eq!(shared.as_ptr(), kept.as_ptr(), "a new copy of {owner}");
            }
        }
        // More owners than places: the oldest make way, and each id is still its own.
        for _ in 0..1_000 {
            let owner = LocalOwner::Scope(new_scope());
            assert_eq!(&*ids.id_of(owner, format), format!("client:{owner}"));
        }
        let task = tokio::spawn(async { local_owner() }).await.unwrap();
        assert_eq!(&*ids.id_of(task, format), format!("client:{task}"));
        assert_eq!(
            &*ids.id_of(LocalOwner::Thread(7), format),
            "client:thread-7"
        );
    }

    #[test]
    fn outside_a_runtime_the_thread_owns() {
        let here = local_owner();
        assert!(here.to_string().starts_with("thread-"));
        assert_eq!(here, local_owner());
        let there = std::thread::spawn(local_owner).join().unwrap();
        assert_ne!(here, there);
    }

    #[tokio::test]
    async fn tasks_and_scopes_own_separately() {
        let task = tokio::spawn(async { local_owner() }).await.unwrap();
        assert!(task.to_string().starts_with("task-"));
        let (a, b) = tokio::join!(
            owner_scope(async { local_owner() }),
            owner_scope(async { local_owner() })
        );
        assert!(a.to_string().starts_with("scope-"));
        assert_ne!(a, b);
    }

    #[cfg(feature = "blocking")]
    #[tokio::test]
    async fn a_task_can_run_as_another_thread() {
        let caller = std::thread::spawn(|| (current_thread_owner(), local_owner()))
            .join()
            .unwrap();
        assert_eq!(LocalOwner::Thread(caller.0), caller.1);
        let inside = tokio::spawn(as_thread(caller.0, async { local_owner() }))
            .await
            .unwrap();
        assert_eq!(inside, caller.1);
        assert_eq!(inside.to_string(), format!("thread-{}", caller.0));
        // Outside `as_thread` the task owns again; a scope inside it wins.
        assert_ne!(local_owner(), inside);
        let scoped = as_thread(caller.0, owner_scope(async { local_owner() })).await;
        assert!(scoped.to_string().starts_with("scope-"));
    }
}
