//! The lock on a three-primary Redis Cluster: hash tags keep each lock in one slot,
//! release messages cross nodes, listing scans every primary, and a held lock
//! survives its slot moving to another primary. (The main behaviours run on a cluster
//! too: see `common::on_every_topology!`.)

mod common;

use std::time::{Duration, Instant};

use fred::interfaces::PubsubInterface;
use holdlock::{LockClient, LockOptions, fence};

use common::{RedisCluster, RedisServer, cluster};

#[tokio::test(flavor = "multi_thread")]
async fn locks_work_across_slots_and_nodes() {
    let url = cluster().url();
    let a = LockClient::builder(&url)
        .fencing(true)
        .build()
        .await
        .unwrap();
    let b = LockClient::connect(&url).await.unwrap();

    // Many names land in many slots on every node; each lock's keys share one slot.
    let names: Vec<String> = (0..30).map(|i| format!("cluster:item-{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        let guard = a.lock(name).await.unwrap();
        let nested = a.lock(name).await.unwrap();
        assert_eq!(nested.hold_count(), 2);
        assert!(guard.fencing_token().is_some());
        assert!(b.lock(name).try_now().await.unwrap().is_none());
        drop(nested);
        guards.push(guard);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let listed = a.list("cluster:*").await.unwrap();
    assert_eq!(listed.len(), names.len(), "SCAN must cover every primary");
    assert!(
        listed
            .iter()
            .all(|info| info.owners.len() == 1 && info.owners[0].hold_count == 1)
    );

    // A waiter on one node is woken by a release published through another.
    let waiter = {
        let (b, name) = (b.clone(), names[7].clone());
        tokio::spawn(async move {
            let guard = b
                .lock(&name)
                .options(LockOptions::fenced())
                .await
                .unwrap()
                .unwrap();
            (Instant::now(), guard)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    guards.remove(7).unlock().await.unwrap();
    let (woke, guard) = waiter.await.unwrap();
    assert!(
        woke - released < Duration::from_millis(200),
        "woke {:?} after the release",
        woke - released
    );

    // Fenced writes and force unlock work on a cluster too.
    let resource = format!("{{{}}}:data", names[7]);
    fence::set_with(&guard, &resource, "v1").await.unwrap();
    assert!(a.force_unlock(&names[7]).await.unwrap());
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert!(a.list("cluster:*").await.unwrap().is_empty());
}

/// How many subscribers `server` has on `channel`: (plain, shard). Redis 6.2 has no
/// shard channels (nor `PUBSUB SHARDNUMSUB`): none there.
async fn subscribers(server: &RedisServer, channel: &str) -> (i64, i64) {
    let raw = common::raw(&server.url()).await;
    let plain: Vec<(String, i64)> = raw.pubsub_numsub(channel).await.unwrap();
    if common::server::server_version().before_redis_7() {
        return (plain[0].1, 0);
    }
    let shard: Vec<(String, i64)> = raw.pubsub_shardnumsub(channel).await.unwrap();
    (plain[0].1, shard[0].1)
}

/// Asserts that one waiter listens on `channel`: from Redis 7.0 on, on a shard channel
/// of `primary` (the lock's own), not cluster-wide; on Redis 6.2, which has no shard
/// channels, on a plain channel of any one node (a `PUBLISH` reaches every node).
async fn assert_one_waiter(cluster: &RedisCluster, primary: &RedisServer, channel: &str) {
    let version = common::server::server_version();
    if !version.before_redis_7() {
        assert_eq!(subscribers(primary, channel).await, (0, 1));
        return;
    }
    println!("{version}: no shard channels; the waiter subscribes to a plain channel");
    let mut plain = 0;
    for node in cluster.primaries() {
        plain += subscribers(node, channel).await.0;
    }
    assert_eq!(
        plain, 1,
        "plain subscriptions to {channel} across the primaries"
    );
}

/// Moves the slot of `key` from `source` to `target` the way `redis-cli --cluster
/// reshard` does: IMPORTING on the target, MIGRATING on the source, MIGRATE the keys,
/// then SETSLOT NODE on every node, target and source first.
fn move_slot(cluster: &RedisCluster, source: &RedisServer, target: &RedisServer, keys: &[&str]) {
    let slot = source.query(&["CLUSTER", "KEYSLOT", keys[0]]).unwrap();
    let slot = slot.trim_start_matches(':');
    let id = |node: &RedisServer| node.query(&["CLUSTER", "MYID"]).unwrap();
    let (source_id, target_id) = (id(source), id(target));
    let ok = |reply: Result<String, String>| assert_eq!(reply.as_deref(), Ok("+OK"));
    ok(target.query(&["CLUSTER", "SETSLOT", slot, "IMPORTING", &source_id]));
    ok(source.query(&["CLUSTER", "SETSLOT", slot, "MIGRATING", &target_id]));
    let port = target.port.to_string();
    let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
    migrate.extend_from_slice(keys);
    let migrated = source.query(&migrate);
    assert!(
        matches!(migrated.as_deref(), Ok("+OK" | "+NOKEY")),
        "MIGRATE: {migrated:?}"
    );
    ok(target.query(&["CLUSTER", "SETSLOT", slot, "NODE", &target_id]));
    ok(source.query(&["CLUSTER", "SETSLOT", slot, "NODE", &target_id]));
    for node in &cluster.nodes {
        if node.port != source.port && node.port != target.port {
            ok(node.query(&["CLUSTER", "SETSLOT", slot, "NODE", &target_id]));
        }
    }
}

/// 32 names whose keys `primary` serves, named `<stem>-<n>`, and how many slots they
/// span: more than 16, checked.
fn names_on_many_slots(
    cluster: &RedisCluster,
    primary: &RedisServer,
    stem: &str,
) -> (Vec<String>, usize) {
    let names: Vec<String> = (0..32)
        .map(|i| cluster.name_on(primary, &format!("{stem}-{i}")))
        .collect();
    let slots: std::collections::BTreeSet<String> = names
        .iter()
        .map(|name| {
            primary
                .query(&["CLUSTER", "KEYSLOT", &common::key(name)])
                .unwrap()
        })
        .collect();
    assert!(
        slots.len() > 16,
        "the names span many slots: {}",
        slots.len()
    );
    (names, slots.len())
}

/// The primary that holds `key`, and another one.
fn owner_and_other<'c>(cluster: &'c RedisCluster, key: &str) -> (&'c RedisServer, &'c RedisServer) {
    let owner = cluster
        .nodes
        .iter()
        .find(|node| node.query(&["EXISTS", key]).as_deref() == Ok(":1"))
        .expect("one primary has the key");
    let other = cluster
        .nodes
        .iter()
        .find(|node| node.port != owner.port)
        .unwrap();
    (owner, other)
}

#[tokio::test(flavor = "multi_thread")]
async fn held_locks_survive_their_slots_moving_to_another_primary() {
    let cluster = cluster();
    let url = cluster.url();
    // A short lease shows renewals going on after the move; a long one shows that the
    // waiter is woken by the release message, not by the holder's lease running out.
    let short = Duration::from_secs(3);
    let renewing = common::client_with_lease(&url, short).await;
    let holder = common::client_with_lease(&url, Duration::from_secs(60)).await;
    let waiter = LockClient::connect(&url).await.unwrap();
    let (renewed_name, waited_name) = (common::unique("renewed"), common::unique("waited"));
    let renewed_key = common::key(&renewed_name);
    let waited_key = common::key(&waited_name);
    let channel = common::release_channel(&waited_name);
    let renewed = renewing.lock(&renewed_name).await.unwrap();
    let held = holder.lock(&waited_name).await.unwrap();
    let waiting = {
        let name = waited_name.clone();
        tokio::spawn(async move {
            let guard = waiter.lock(&name).await.unwrap();
            (Instant::now(), guard)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (waited_source, waited_target) = owner_and_other(cluster, &waited_key);
    // The waiter listens on a shard channel of the lock's own primary, not cluster-wide.
    assert_one_waiter(cluster, waited_source, &channel).await;

    let (renewed_source, renewed_target) = owner_and_other(cluster, &renewed_key);
    move_slot(cluster, renewed_source, renewed_target, &[&renewed_key]);
    // The lock and its queue of waiting clients (the waiter's refusal queued it).
    let waited_clients = format!("{waited_key}:clients");
    move_slot(
        cluster,
        waited_source,
        waited_target,
        &[&waited_key, &waited_clients],
    );
    let moved_pttl = common::integer(&renewed_target.query(&["PTTL", &renewed_key]).unwrap());
    // Two renewal periods (lease / 3) and a slot check later...
    tokio::time::sleep(short * 2 / 3 + Duration::from_millis(500)).await;
    let renewed_pttl = common::integer(&renewed_target.query(&["PTTL", &renewed_key]).unwrap());
    // ...the holder has renewed on the new primary, and still holds the lock...
    assert!(!renewed.is_lost(), "the holder lost the lock in the move");
    assert!(
        renewed_pttl > moved_pttl - (short * 2 / 3).as_millis() as i64,
        "no renewal since the move: PTTL {moved_pttl} then {renewed_pttl}"
    );
    renewed.unlock().await.unwrap();
    // ...and the waiter's subscription has followed the slot.
    assert!(
        !waiting.is_finished(),
        "the waiter got in while the lock was held"
    );
    assert_one_waiter(cluster, waited_target, &channel).await;

    let pttl = common::integer(&waited_target.query(&["PTTL", &waited_key]).unwrap());
    assert!(pttl > 50_000, "the holder's lease is long: {pttl} ms");
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (woke, guard) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter slept through the release")
        .unwrap();
    println!("woke {:?} after the release", woke - released);
    guard.unlock().await.unwrap();
}

/// A slot in the middle of a migration (IMPORTING on the target, MIGRATING on the
/// source, as `redis-cli --cluster reshard` leaves it between its steps, or for good
/// if it stops half way): the source answers `ASK` for a key it does not have (a
/// held lock's key already carried over, or a fresh one), and both nodes answer
/// `TRYAGAIN` to a call on several keys that are not all there.
///
/// fred 10 followed `ASK` for a script it may send only once by ending the client's
/// connection task, and the restarted task left every later call of the client
/// waiting for its timeout. Now holdlock follows it itself: the carried hold keeps
/// renewing and is re-entered on the target, the client's other calls go on
/// undisturbed, and a fresh lock (several keys, none there yet) is taken on the target
/// once the slot has moved.
#[tokio::test(flavor = "multi_thread")]
async fn locks_in_a_slot_being_migrated_renew_on_its_target_and_disturb_no_other_call() {
    let cluster = cluster();
    let lease = Duration::from_secs(2);
    let client = common::client_with_lease(&cluster.url(), lease).await;
    let held_name = common::unique("migrating-held");
    let slot = fred::util::redis_keyslot(common::key(&held_name).as_bytes());
    // A fresh name in the same slot.
    let fresh_name = (0..)
        .map(|i| format!("{held_name}-{i}"))
        .find(|name| fred::util::redis_keyslot(common::key(name).as_bytes()) == slot)
        .unwrap();
    let (held_key, fresh_key) = (common::key(&held_name), common::key(&fresh_name));
    let held = client.lock(&held_name).await.unwrap();

    let source = cluster.primary_of(&held_key);
    let target = cluster
        .primaries()
        .into_iter()
        .find(|node| node.port != source.port)
        .unwrap();
    let slot_number = slot;
    let slot = slot.to_string();
    let ok = |reply: Result<String, String>| assert_eq!(reply.as_deref(), Ok("+OK"));
    let (source_id, target_id) = (common::node_id(source), common::node_id(target));
    ok(target.query(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id]));
    ok(source.query(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id]));
    let port = target.port.to_string();
    ok(source.query(&["MIGRATE", "127.0.0.1", &port, &held_key, "0", "5000"]));
    let migrating_since = Instant::now();

    // The carried hold is re-entered on the target (`reenter.lua`, its one key there).
    let reentry = client.lock(&held_name);
    let nested = tokio::time::timeout(Duration::from_secs(2), reentry)
        .await
        .expect("the re-entry waited for the migration to end")
        .unwrap();
    assert_eq!(nested.hold_count(), 2);
    let fresh = {
        let (client, name) = (client.clone(), fresh_name.clone());
        tokio::spawn(async move { client.lock(&name).await })
    };
    // Meanwhile the same client takes and releases locks in other slots (a fresh
    // lock in the migrating slot waits, as above)...
    let (mut slowest, mut turns) = (Duration::ZERO, 0);
    while migrating_since.elapsed() < lease + lease / 2 {
        let started = Instant::now();
        let other = common::unique("beside-the-migration");
        if fred::util::redis_keyslot(common::key(&other).as_bytes()) == slot_number {
            continue;
        }
        let guard = client.lock(&other).await.unwrap();
        guard.unlock().await.unwrap();
        slowest = slowest.max(started.elapsed());
        turns += 1;
    }
    println!("{turns} turns beside the migration, the slowest {slowest:?}");
    assert!(
        slowest < Duration::from_millis(250),
        "a call beside the migration took {slowest:?}"
    );
    // ...and the carried hold, past its lease, is renewed on the target (checked once
    // the target serves the slot: without `ASKING` it refuses every read of it).
    assert!(!held.is_lost(), "the carried hold was lost");
    assert!(!fresh.is_finished(), "a fresh lock taken in the middle");

    for node in [target, source] {
        ok(node.query(&["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]));
    }
    for node in &cluster.nodes {
        if node.port != source.port && node.port != target.port {
            let _ = node.query(&["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]);
        }
    }
    let pttl = common::integer(&target.query(&["PTTL", &held_key]).unwrap());
    assert!(pttl > 1000, "the carried hold was not renewed: PTTL {pttl}");
    let fresh = tokio::time::timeout(Duration::from_secs(2), fresh)
        .await
        .expect("the fresh lock was not taken after the move")
        .unwrap()
        .unwrap();
    assert_eq!(target.query(&["EXISTS", &fresh_key]).as_deref(), Ok(":1"));
    fresh.unlock().await.unwrap();
    nested.unlock().await.unwrap();
    held.unlock().await.unwrap();
    assert_eq!(target.query(&["EXISTS", &held_key]).as_deref(), Ok(":0"));
}

/// A lock whose primary holds writes back (`CLIENT PAUSE WRITE`) past the call's
/// time: the acquisition waits in the server, the call fails, and its settling reads
/// the owner's count. Read over another connection than the script's (the
/// application's client), the count overtook the waiting script, said "not run", and
/// the script ran after the pause: a hold no guard owns, for a whole lease. Read over
/// the scripts' connection, it waits its turn, and the grant is undone.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_that_times_out_while_writes_are_paused_leaves_nothing_behind() {
    // A cluster of its own: the pause would stall the other tests' writes.
    let cluster = RedisCluster::start(3);
    let client = LockClient::builder(cluster.url())
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let name = common::unique("paused");
    let node = cluster.primary_of(&common::key(&name));
    common::lock_through_a_write_pause(&client, node, &name).await;
    let other = LockClient::connect(&cluster.url()).await.unwrap();
    let guard = other.lock(&name).try_now().await.unwrap();
    assert!(guard.is_some(), "the name is still held");
}

/// A cluster URL whose first node is down (a host taken out of service and still
/// listed in a service's settings): the client connects through the nodes after it,
/// within its connect timeout, and every primary's locks work.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_url_whose_first_node_is_down_connects_through_the_others() {
    let cluster = cluster();
    let down = common::server::free_port().unwrap();
    let url = cluster.url_from(down);
    let started = Instant::now();
    let client = LockClient::builder(&url)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap_or_else(|error| panic!("{url}: {error} after {:?}", started.elapsed()));
    for primary in cluster.primaries() {
        let name = cluster.name_on(primary, "first-down");
        client.lock(&name).await.unwrap().unlock().await.unwrap();
    }
    client.shutdown().await;
}

/// A client's mutex calls that go out together on a cluster carry the locks of one
/// node, whatever their slots: 32 locks of 32 slots of one primary, taken and released
/// at once, cost a handful of script calls each way, not one per lock (a script that
/// declared every key would need one slot per call).
#[tokio::test(flavor = "current_thread")]
async fn a_batch_on_a_cluster_carries_one_nodes_locks_of_many_slots() {
    let cluster = RedisCluster::start(3);
    let client = LockClient::connect(&cluster.url()).await.unwrap();
    let primary = cluster.primaries()[0];
    let (names, slots) = names_on_many_slots(&cluster, primary, "node-batch");
    // The scripts loaded, alone and batched, before counting.
    let warm: Vec<String> = (0..8)
        .map(|i| cluster.name_on(primary, &format!("node-warm-{i}")))
        .collect();
    common::unlock_each_at_once(common::lock_each_at_once(&client, &warm).await).await;
    let (taken, released) =
        common::scripts_to_take_and_release_at_once(&client, primary, &names).await;
    assert!(
        taken <= 8 && released <= 8,
        "32 locks of {slots} slots at once: {taken} scripts to take, {released} to release"
    );
    client.shutdown().await;
}

/// A cluster client whose first `CLUSTER SLOTS` answers nothing (fred: "Invalid or
/// missing CLUSTER SLOTS response", as a node in the middle of a restart can, seen
/// once in `tests/cluster_topology.rs`'s builds during a failover and a restart)
/// connects on a second ask: the build tries again within its connect timeout, as for
/// a node that is not `ok`.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_client_whose_first_cluster_slots_answers_nothing_asks_again() {
    use common::proxy::{Fault, Proxy};
    let cluster = RedisCluster::start(3);
    let proxy = Proxy::start(cluster.nodes[0].port);
    proxy.arm(1, Fault::Answer(b"*-1\r\n".to_vec()), |command| {
        command.len() >= 2
            && command[0].eq_ignore_ascii_case(b"CLUSTER")
            && command[1].eq_ignore_ascii_case(b"SLOTS")
    });
    let client = LockClient::builder(format!("redis-cluster://127.0.0.1:{}", proxy.port))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("connected on a second ask");
    assert_eq!(proxy.fired(), 1, "the first CLUSTER SLOTS answered nothing");
    let primary = cluster.primaries()[0];
    let guard = client
        .lock(cluster.name_on(primary, "slots-again"))
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

/// The watchdog's renewals that fall due together go out a call per node, of any of
/// its slots: 32 holds of one node in more than 16 slots, renewed together for about
/// four rounds, cost that node a few scripts a round (one call per slot would be 32).
#[tokio::test(flavor = "current_thread")]
async fn renewals_on_a_cluster_go_out_a_call_per_node_of_many_slots() {
    let cluster = RedisCluster::start(3);
    let lease = Duration::from_millis(1500);
    let client = common::client_with_lease(&cluster.url(), lease).await;
    let primary = cluster.primaries()[0];
    let (names, slots) = names_on_many_slots(&cluster, primary, "node-renewals");
    let guards = common::lock_each_at_once(&client, &names).await;
    primary.query(&["CONFIG", "RESETSTAT"]).unwrap();
    // About four rounds: a renewal is due every third of the lease.
    tokio::time::sleep(lease * 4 / 3).await;
    let renewals = primary.command_calls("evalsha");
    for guard in &guards {
        assert!(!guard.is_at_risk(), "{}: a renewal failed", guard.name());
        let pttl = common::integer(
            &primary
                .query(&["PTTL", &common::key(guard.name())])
                .unwrap(),
        );
        assert!(pttl > 0, "{}: not held in redis ({pttl})", guard.name());
    }
    assert!(
        (1..=16).contains(&renewals),
        "32 holds of {slots} slots renewed about four times: {renewals} scripts"
    );
    common::unlock_each_at_once(guards).await;
    client.shutdown().await;
}

/// A renewal batch sent by a stale routing table: the node it reaches answers the
/// hold whose slot moved away untouched ("non local key"), and that hold is renewed
/// alone where its slot is now, in the same pass: it stays held, never at risk.
#[tokio::test(flavor = "current_thread")]
async fn a_renewal_batch_on_a_cluster_renews_a_hold_whose_slot_moved_where_it_is_now() {
    let cluster = RedisCluster::start(3);
    let lease = Duration::from_millis(1500);
    let client = common::client_with_lease(&cluster.url(), lease).await;
    let (source, target) = (cluster.primaries()[0], cluster.primaries()[1]);
    let names: Vec<String> = (0..8)
        .map(|i| cluster.name_on(source, &format!("moved-renewals-{i}")))
        .collect();
    let guards = common::lock_each_at_once(&client, &names).await;
    // The fourth hold's slot moves, its key with it, behind the client's back.
    let moved = common::key(&names[3]);
    move_slot(&cluster, source, target, &[&moved]);
    // Two rounds of renewals, then the moved hold's lease is read where it is now.
    tokio::time::sleep(lease * 2 / 3 + Duration::from_millis(200)).await;
    target.query(&["CONFIG", "RESETSTAT"]).unwrap();
    let pttl = || common::integer(&target.query(&["PTTL", &moved]).unwrap());
    let (before, read_at) = (pttl(), std::time::Instant::now());
    tokio::time::sleep(lease / 3 + Duration::from_millis(100)).await;
    let after = pttl();
    let waited = i64::try_from(read_at.elapsed().as_millis()).unwrap();
    assert!(
        target.command_calls("evalsha") >= 1,
        "the moved hold's renewal reached its node"
    );
    // Unrenewed, its lease would have run down by as long as the wait.
    assert!(
        after > before - waited + 200,
        "the moved hold was renewed where it is now: {before} ms, then {after} ms {waited} ms later"
    );
    for guard in &guards {
        assert!(!guard.is_at_risk(), "{}: a renewal failed", guard.name());
        assert!(!guard.is_lost(), "{}: lost", guard.name());
    }
    common::unlock_each_at_once(guards).await;
    for name in &names {
        let key = common::key(name);
        let exists = cluster.primary_of(&key).query(&["EXISTS", &key]).unwrap();
        assert_eq!(exists, ":0", "{name} still in redis");
    }
    client.shutdown().await;
}

/// A batch sent by a routing table that a moved slot made stale: the node it reaches
/// refuses the moved lock untouched ("non local key"), and that lock is taken, and
/// later released, alone where its slot is now. Every other lock of the batch is
/// answered by the batch; every call answers as it would alone.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_on_a_cluster_answers_a_lock_whose_slot_moved_where_it_is_now() {
    let cluster = RedisCluster::start(3);
    let client = LockClient::connect(&cluster.url()).await.unwrap();
    let (source, target) = (cluster.primaries()[0], cluster.primaries()[1]);
    let names: Vec<String> = (0..8)
        .map(|i| cluster.name_on(source, &format!("moved-batch-{i}")))
        .collect();
    // The client learns the layout, and its scripts, before the move.
    common::unlock_each_at_once(common::lock_each_at_once(&client, &names).await).await;
    // The fourth lock's slot moves while nothing is held: the client is not told.
    let moved = common::key(&names[3]);
    move_slot(&cluster, source, target, &[&moved]);
    let guards = common::lock_each_at_once(&client, &names).await;
    for guard in &guards {
        let key = common::key(guard.name());
        let field = cluster
            .primary_of(&key)
            .query(&["HGET", &key, guard.owner()])
            .unwrap();
        assert_eq!(field, "1", "{}: not held in redis", guard.name());
    }
    assert_eq!(cluster.primary_of(&moved).port, target.port);
    // The client has followed the slot; it moves back, keys and all, while held, so
    // that the batch of releases reaches the node the lock left.
    move_slot(&cluster, target, source, &[&moved]);
    let other = common::key(&names[5]);
    move_slot(&cluster, source, target, &[&other]);
    common::unlock_each_at_once(guards).await;
    for name in &names {
        let key = common::key(name);
        let exists = cluster.primary_of(&key).query(&["EXISTS", &key]).unwrap();
        assert_eq!(exists, ":0", "{name} still in redis");
    }
    client.shutdown().await;
}
