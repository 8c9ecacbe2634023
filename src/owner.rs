//! Who holds a lock: the current tokio task, an [`owner_scope`], or the thread.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
