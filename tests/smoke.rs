//! The fast tier's walk (`cargo fast`, README "Run the tests"): every kind taken,
//! re-entered where it re-enters, renewed past its lease by the watchdog, waited for and
//! released, on a single server and a cluster, in a few seconds. It is not the suite: the
//! faults, the interop peers and the soaks are elsewhere. It is what fails first when a
//! kind's basic acquire, release or renewal breaks.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use holdlock::{Claim, Held, LockClient, LockOptions, fence};

/// The lease of this walk's clients: short, so that holding past it proves the renewal.
const LEASE: Duration = Duration::from_millis(900);

/// Longer than two leases: a hold not renewed would have expired by then.
const PAST_THE_LEASE: Duration = Duration::from_millis(2000);

/// A hold of one kind, boxed so that one walk serves every kind.
type Taken =
    std::pin::Pin<Box<dyn Future<Output = holdlock::Result<Option<Box<dyn Held>>>> + Send>>;

/// Takes `name` of a kind on `client`: waiting up to `wait` (zero: one try).
type Take = fn(LockClient, String, Duration) -> Taken;

fn boxed<G: Held + 'static>(guard: Option<G>) -> Option<Box<dyn Held>> {
    guard.map(|guard| Box::new(guard) as Box<dyn Held>)
}

fn mutex(client: LockClient, name: String, wait: Duration) -> Taken {
    Box::pin(async move { Ok(boxed(client.lock(name).timeout(wait).await?)) })
}

fn fair(client: LockClient, name: String, wait: Duration) -> Taken {
    Box::pin(async move { Ok(boxed(client.fair_lock(name).timeout(wait).await?)) })
}

fn read(client: LockClient, name: String, wait: Duration) -> Taken {
    Box::pin(async move { Ok(boxed(client.read_lock(name).timeout(wait).await?)) })
}

fn write(client: LockClient, name: String, wait: Duration) -> Taken {
    Box::pin(async move { Ok(boxed(client.write_lock(name).timeout(wait).await?)) })
}

fn permit(client: LockClient, name: String, wait: Duration) -> Taken {
    let semaphore = client.semaphore(name, 1);
    Box::pin(async move { Ok(boxed(semaphore.acquire().timeout(wait).await?)) })
}

fn both(client: LockClient, name: String, wait: Duration) -> Taken {
    let names = [format!("{name}:a"), format!("{name}:b")];
    Box::pin(async move { Ok(boxed(client.lock_all(names).timeout(wait).await?)) })
}

/// The walk for one kind: taken free; busy for another client's `blocked` while held,
/// and past the lease (the watchdog renews it); a waiter of the other client woken by
/// the release.
async fn walk(url: &str, kind: &str, take: Take, blocked: Take) {
    let (holder, other) = (lease_client(url).await, lease_client(url).await);
    let name = common::unique(&format!("smoke-{kind}"));
    let held = take(holder.clone(), name.clone(), Duration::ZERO)
        .await
        .unwrap();
    let held = held.unwrap_or_else(|| panic!("{kind}: a free lock is taken"));
    let busy = blocked(other.clone(), name.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert!(
        busy.is_none(),
        "{kind}: held, it is busy for another client"
    );

    tokio::time::sleep(PAST_THE_LEASE).await;
    assert!(!held.is_lost(), "{kind}: renewed past its lease");
    let busy = blocked(other.clone(), name.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert!(busy.is_none(), "{kind}: still held after two leases");

    let waiter = tokio::spawn(blocked(other.clone(), name, Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.unlock().await.unwrap();
    let woken = waiter.await.unwrap().unwrap();
    let woken = woken.unwrap_or_else(|| panic!("{kind}: the waiter is woken by the release"));
    woken.unlock().await.unwrap();
    holder.shutdown().await;
    other.shutdown().await;
}

async fn lease_client(url: &str) -> LockClient {
    common::client_with_lease(url, LEASE).await
}

async fn mutex_walk(url: &str) {
    walk(url, "mutex", mutex, mutex).await;
}

async fn fair_walk(url: &str) {
    walk(url, "fair", fair, fair).await;
}

async fn read_walk(url: &str) {
    walk(url, "read", read, write).await;
}

async fn write_walk(url: &str) {
    walk(url, "write", write, write).await;
}

async fn semaphore_walk(url: &str) {
    walk(url, "semaphore", permit, permit).await;
}

async fn lock_all_walk(url: &str) {
    walk(url, "lock_all", both, both).await;
}

/// Takes what `request` asks for, then again as the same owner: the hold count is 2.
async fn enters_twice<F>(request: impl Fn() -> F)
where
    F: std::future::IntoFuture<Output = holdlock::Result<holdlock::LockGuard>>,
{
    let outer = request().await.unwrap();
    let inner = request().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

/// Re-entry raises the hold count for the mutex, the fair lock and both sides of the
/// read-write lock (a read inside the owner's own write); readers share.
async fn reentry(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("smoke-reentry");
    enters_twice(|| client.lock(&name)).await;
    enters_twice(|| client.fair_lock(&name)).await;

    let writing = client.write_lock(&name).await.unwrap();
    let reading = client.read_lock(&name).await.unwrap();
    reading.unlock().await.unwrap();
    writing.unlock().await.unwrap();
    let other = common::connect(url).await;
    let first = client.read_lock(&name).await.unwrap();
    let second = other.read_lock(&name).try_now().await.unwrap();
    second.expect("readers share").unlock().await.unwrap();
    first.unlock().await.unwrap();
    client.shutdown().await;
    other.shutdown().await;
}

/// A fenced hold's token reaches `fence`, an election has one leader, and a period is
/// claimed once.
async fn fencing_elections_and_periods(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("smoke-fenced");
    let guard = client.lock(&name).options(LockOptions::fenced()).await;
    let guard = guard.unwrap().expect("free");
    let token = guard.fencing_token().expect("fenced");
    let register = format!("{name}:register");
    fence::set(&client, &register, "v1", token).await.unwrap();
    assert_eq!(
        fence::get(&client, &register).await.unwrap().unwrap().value,
        "v1"
    );
    guard.unlock().await.unwrap();

    let election = client.election(format!("{name}:election"));
    let leadership = election.campaign("smoke").await.unwrap();
    assert_eq!(election.leader().await.unwrap().unwrap().data, "smoke");
    leadership.resign().await.unwrap();

    let period = Duration::from_secs(3600);
    let now = SystemTime::now();
    let claim = client.claim_period(&name, period, now, LockOptions::new());
    match claim.await.unwrap() {
        Claim::Won(claim) => claim.complete().await.unwrap(),
        other => panic!("{other:?}"),
    }
    let again = client.claim_period(&name, period, now, LockOptions::new());
    assert!(matches!(again.await.unwrap(), Claim::AlreadyDone { .. }));
    client.shutdown().await;
}

/// What operators see: a held lock is listed, inspected and force-unlocked.
async fn operators_see(url: &str) {
    let client = common::connect(url).await;
    let name = common::unique("smoke-operator");
    let guard = Arc::new(client.lock(&name).await.unwrap());
    assert!(client.is_locked(&name).await.unwrap());
    let info = client.inspect(&name).await.unwrap().expect("held");
    assert_eq!(info.owners.len(), 1, "{info:?}");
    assert!(client.force_unlock(&name).await.unwrap());
    assert!(!client.is_locked(&name).await.unwrap());
    drop(guard);
    client.shutdown().await;
}

common::on_every_topology!(
    mutex_walk,
    fair_walk,
    read_walk,
    write_walk,
    semaphore_walk,
    lock_all_walk,
    reentry,
    fencing_elections_and_periods,
    operators_see,
);
