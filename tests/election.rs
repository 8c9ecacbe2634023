//! Leader election: candidates elected in the order they began, a dead leader
//! succeeded within a lease, resignation handing over at once, the leader's record, the
//! stream of changes, and `holdlock leader`.

mod common;

use std::time::{Duration, SystemTime};

use fred::interfaces::{ClientLike, HashesInterface, KeysInterface};
use fred::types::{ClusterHash, CustomCommand};
use futures::StreamExt;
use holdlock::{Held, LeaderChange, LeaderChanges, Leadership, LockClient, LockError};
use tokio::task::JoinHandle;
use tokio::time::Instant;

common::on_every_topology!(
    candidates_of_three_clients_are_elected_in_the_order_they_began,
    observe_sees_every_change_in_order,
    a_dead_leader_is_succeeded_within_a_lease,
    resign_hands_over_at_once,
    a_dropped_leadership_resigns_in_the_background,
    leader_reports_the_data_and_since_when,
    a_dropped_campaign_leaves_nothing_behind,
    a_second_campaign_of_one_task_waits_for_the_first,
    an_election_is_apart_from_the_fair_lock_of_its_name,
);

/// `holdlock:{name}:election`, the election's fair lock (and record).
fn election_key(name: &str) -> String {
    format!("{}:election", common::key(name))
}

/// How many candidates wait in the election's queue, read behind the library's back.
async fn queued(raw: &fred::clients::Client, name: &str) -> i64 {
    let queue = format!("{}:queue", election_key(name));
    let zcard = CustomCommand::new_static("ZCARD", ClusterHash::FirstKey, false);
    raw.custom(zcard, vec![queue]).await.unwrap()
}

/// Waits until `count` candidates are queued.
async fn until_queued(raw: &fred::clients::Client, name: &str, count: i64) {
    let start = Instant::now();
    while queued(raw, name).await != count {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{count} candidates never queued for {name}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A campaign in a task of its own.
fn campaign(client: &LockClient, name: &str, data: &str) -> JoinHandle<Leadership> {
    let (election, data) = (client.election(name), data.to_owned());
    tokio::spawn(async move { election.campaign(data).await.unwrap() })
}

/// The leadership of `campaign` once elected, within `limit`.
async fn elected(campaign: JoinHandle<Leadership>, limit: Duration) -> Leadership {
    tokio::time::timeout(limit, campaign)
        .await
        .expect("elected in time")
        .unwrap()
}

/// The next change of `changes`, within 10 s, as `<kind> <data>`.
async fn next_change(changes: &mut LeaderChanges) -> String {
    let change = tokio::time::timeout(Duration::from_secs(10), changes.next())
        .await
        .expect("a change within 10 s")
        .expect("the stream goes on")
        .unwrap();
    match change {
        LeaderChange::Elected(leader) => format!("elected {}", leader.data),
        LeaderChange::Resigned(leader) => format!("resigned {}", leader.data),
        LeaderChange::Lost(leader) => format!("lost {}", leader.data),
        LeaderChange::Vacant => "vacant".to_owned(),
        other => format!("{other:?}"),
    }
}

/// No further change comes within `quiet`.
async fn no_change(changes: &mut LeaderChanges, quiet: Duration) {
    if let Ok(change) = tokio::time::timeout(quiet, changes.next()).await {
        panic!("an unexpected change: {change:?}");
    }
}

/// The leader's data, as `leader()` reads it.
async fn leader_data(client: &LockClient, name: &str) -> Option<String> {
    let leader = client.election(name).leader().await.unwrap();
    leader.map(|leader| leader.data)
}

/// Elections of one name in two databases of one server are apart, and so are their
/// announcements (pub/sub spans databases, so each database announces on a channel of
/// its own): an observer of database 1 does not hear database 2's leader elected (it
/// heard it, and reported a leader that its own `leader()` did not know, before), and
/// hears its own database's.
#[tokio::test(flavor = "multi_thread")]
async fn an_observer_hears_the_leaders_of_its_own_database_only() {
    let server = common::RedisServer::start();
    let in_1 = LockClient::connect(&server.database_url(1)).await.unwrap();
    let in_2 = LockClient::connect(&server.database_url(2)).await.unwrap();
    let name = common::unique("elect-databases");
    let mut changes = in_1.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "vacant");
    let elsewhere = in_2.election(&name).campaign("in 2").await.unwrap();
    no_change(&mut changes, Duration::from_millis(500)).await;
    assert_eq!(leader_data(&in_1, &name).await, None);
    let here = in_1.election(&name).campaign("in 1").await.unwrap();
    assert_eq!(next_change(&mut changes).await, "elected in 1");
    elsewhere.resign().await.unwrap();
    no_change(&mut changes, Duration::from_millis(300)).await;
    here.resign().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "resigned in 1");
    drop(changes);
    in_1.shutdown().await;
    in_2.shutdown().await;
}

/// A leads; B and C (each of its own client) begin their campaigns in that order;
/// each resignation elects the next in that order, with rising fencing tokens.
async fn candidates_of_three_clients_are_elected_in_the_order_they_began(url: &str) {
    let name = common::unique("elect-order");
    let raw = common::raw(url).await;
    let clients = [
        common::connect(url).await,
        common::connect(url).await,
        common::connect(url).await,
    ];
    let a = clients[0].election(&name).campaign("a").await.unwrap();
    assert_eq!(leader_data(&clients[2], &name).await.as_deref(), Some("a"));
    let b = campaign(&clients[1], &name, "b");
    until_queued(&raw, &name, 1).await;
    let c = campaign(&clients[2], &name, "c");
    until_queued(&raw, &name, 2).await;

    let token_a = a.fencing_token().unwrap();
    a.resign().await.unwrap();
    let b = elected(b, Duration::from_secs(5)).await;
    assert_eq!(b.info().data, "b");
    assert!(b.fencing_token().unwrap() > token_a);
    assert_eq!(leader_data(&clients[0], &name).await.as_deref(), Some("b"));
    assert!(!c.is_finished(), "c was elected while b leads");

    let token_b = b.fencing_token().unwrap();
    b.resign().await.unwrap();
    let c = elected(c, Duration::from_secs(5)).await;
    assert_eq!(c.info().data, "c");
    assert!(c.fencing_token().unwrap() > token_b);
    assert_eq!(leader_data(&clients[1], &name).await.as_deref(), Some("c"));
    c.resign().await.unwrap();
    assert_eq!(leader_data(&clients[1], &name).await, None);
}

/// An observer sees the leader as it was, then every election and resignation in the
/// order they happened, and nothing else.
async fn observe_sees_every_change_in_order(url: &str) {
    let name = common::unique("elect-observe");
    let raw = common::raw(url).await;
    let (one, two, watcher) = (
        common::connect(url).await,
        common::connect(url).await,
        common::connect(url).await,
    );
    let mut changes = watcher.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "vacant");

    let a = one.election(&name).campaign("a").await.unwrap();
    assert_eq!(next_change(&mut changes).await, "elected a");
    // A second observer, begun while a leads, starts with a.
    let mut late = watcher.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut late).await, "elected a");

    let b = campaign(&two, &name, "b");
    until_queued(&raw, &name, 1).await;
    let c = campaign(&one, &name, "c");
    until_queued(&raw, &name, 2).await;
    a.resign().await.unwrap();
    let b = elected(b, Duration::from_secs(5)).await;
    b.resign().await.unwrap();
    let c = elected(c, Duration::from_secs(5)).await;
    c.resign().await.unwrap();

    for changes in [&mut changes, &mut late] {
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(next_change(changes).await);
        }
        let expected = [
            "resigned a",
            "elected b",
            "resigned b",
            "elected c",
            "resigned c",
        ];
        assert_eq!(seen, expected);
        no_change(changes, Duration::from_millis(200)).await;
    }
}

/// The leader's client dies (shut down without resigning: its connections close and
/// its hold is no longer renewed). The candidate waiting next is elected within about
/// a lease, and an observer sees the dead leader lost, then its successor.
async fn a_dead_leader_is_succeeded_within_a_lease(url: &str) {
    let lease = Duration::from_millis(600);
    let name = common::unique("elect-dead");
    let raw = common::raw(url).await;
    let leader = common::client_with_lease(url, lease).await;
    let next = common::client_with_lease(url, lease).await;
    let watcher = common::connect(url).await;
    let a = leader.election(&name).campaign("a").await.unwrap();
    let mut changes = watcher.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "elected a");
    let b = campaign(&next, &name, "b");
    until_queued(&raw, &name, 1).await;
    // Let a's watchdog renew a few times first: a leader that lives keeps leading.
    tokio::time::sleep(lease * 2).await;
    assert!(!b.is_finished(), "b was elected while a lived");

    let died = Instant::now();
    leader.shutdown().await;
    assert!(a.is_lost());
    let b = elected(b, lease * 3).await;
    let took = died.elapsed();
    assert!(
        took < lease + Duration::from_millis(400),
        "b was elected {took:?} after a died"
    );
    assert_eq!(b.info().data, "b");
    assert_eq!(next_change(&mut changes).await, "lost a");
    assert_eq!(next_change(&mut changes).await, "elected b");
    assert_eq!(leader_data(&watcher, &name).await.as_deref(), Some("b"));
    drop(a);
    b.resign().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "resigned b");
}

/// A resignation hands the election to the next candidate on the release's message,
/// not after a lease or a poll.
async fn resign_hands_over_at_once(url: &str) {
    let name = common::unique("elect-resign");
    let raw = common::raw(url).await;
    // A long lease: a hand-off that waited for it would show.
    let (one, two) = (
        common::client_with_lease(url, Duration::from_secs(30)).await,
        common::client_with_lease(url, Duration::from_secs(30)).await,
    );
    let a = one.election(&name).campaign("a").await.unwrap();
    let b = campaign(&two, &name, "b");
    until_queued(&raw, &name, 1).await;
    let resigned = Instant::now();
    a.resign().await.unwrap();
    let b = elected(b, Duration::from_secs(2)).await;
    let took = resigned.elapsed();
    assert!(took < Duration::from_millis(500), "handed over in {took:?}");
    b.resign().await.unwrap();
}

/// Dropping a leadership resigns in the background: the record is deleted and the
/// resignation announced (an observer sees it resigned, not lost), and the next
/// candidate is elected at once.
async fn a_dropped_leadership_resigns_in_the_background(url: &str) {
    let name = common::unique("elect-drop");
    let raw = common::raw(url).await;
    let (one, two) = (common::connect(url).await, common::connect(url).await);
    let mut changes = two.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "vacant");
    let a = one.election(&name).campaign("a").await.unwrap();
    assert_eq!(next_change(&mut changes).await, "elected a");
    let b = campaign(&two, &name, "b");
    until_queued(&raw, &name, 1).await;
    drop(a);
    let b = elected(b, Duration::from_secs(2)).await;
    assert_eq!(next_change(&mut changes).await, "resigned a");
    assert_eq!(next_change(&mut changes).await, "elected b");
    drop(b);
    assert_eq!(next_change(&mut changes).await, "resigned b");
    let start = Instant::now();
    while raw
        .exists::<i64, _>(election_key(&name).as_str())
        .await
        .unwrap()
        == 1
    {
        assert!(start.elapsed() < Duration::from_secs(5), "never released");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(leader_data(&one, &name).await, None);
    // The stream ends when its client shuts down.
    two.shutdown().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), changes.next()).await;
    assert!(
        matches!(ended, Ok(Some(Err(LockError::Shutdown)))),
        "{ended:?}"
    );
    let after = tokio::time::timeout(Duration::from_secs(5), changes.next()).await;
    assert!(matches!(after, Ok(None)), "{after:?}");
}

/// `leader()` reports the leader's owner, data, since when (the server's clock) and
/// token, as the leadership has them; nobody before or after; bad data and names are
/// refused.
async fn leader_reports_the_data_and_since_when(url: &str) {
    let name = common::unique("elect-info");
    let (one, two) = (common::connect(url).await, common::connect(url).await);
    let election = two.election(&name);
    assert_eq!(election.leader().await.unwrap(), None);
    let before = SystemTime::now();
    let a = one
        .election(&name)
        .campaign("host-a pid 7: ünïcode and spaces")
        .await
        .unwrap();
    let after = SystemTime::now();
    let leader = election.leader().await.unwrap().expect("a leads");
    assert_eq!(&leader, a.info());
    assert_eq!(leader.election, name);
    assert_eq!(leader.data, "host-a pid 7: ünïcode and spaces");
    assert!(
        leader.owner.starts_with(&one.owner_id()[..36]),
        "{leader:?}"
    );
    let slack = Duration::from_secs(1);
    assert!(leader.since + slack >= before && leader.since <= after + slack);
    assert_eq!(Some(leader.fencing_token), a.holds()[0].fencing_token());
    assert_eq!(a.fencing_token(), Some(leader.fencing_token));
    assert!(a.renewal_margin().is_none() || !a.is_at_risk());

    let long = "x".repeat(1025);
    let refused = one.election(&name).campaign(long).await.unwrap_err();
    assert!(
        matches!(refused, LockError::InvalidOption { option: "data", .. }),
        "{refused}"
    );
    for bad in ["", "a{b}"] {
        let refused = one.election(bad).campaign("x").await.unwrap_err();
        assert!(
            matches!(refused, LockError::InvalidName { .. }),
            "{refused}"
        );
        let refused = one.election(bad).leader().await.unwrap_err();
        assert!(
            matches!(refused, LockError::InvalidName { .. }),
            "{refused}"
        );
        let refused = one.election(bad).observe().await.unwrap_err();
        assert!(
            matches!(refused, LockError::InvalidName { .. }),
            "{refused}"
        );
    }
    // Exactly a KiB is fine: a second candidate of the same client queues with it.
    let queued = tokio::time::timeout(
        Duration::from_millis(300),
        one.election(&name).campaign("y".repeat(1024)),
    )
    .await;
    assert!(queued.is_err(), "elected while a leads");

    Held::unlock(a).await.unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
}

/// A campaign dropped while it waits leaves the queue, and one dropped once elected
/// leaves nothing held or recorded.
async fn a_dropped_campaign_leaves_nothing_behind(url: &str) {
    let name = common::unique("elect-cancel");
    let raw = common::raw(url).await;
    let (one, two) = (common::connect(url).await, common::connect(url).await);
    let a = one.election(&name).campaign("a").await.unwrap();
    let waiting = campaign(&two, &name, "b");
    until_queued(&raw, &name, 1).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    until_queued(&raw, &name, 0).await;
    a.resign().await.unwrap();
    assert_eq!(leader_data(&two, &name).await, None);

    // Dropped at every point of a free election's campaign: nothing stays.
    for polls in 0..8 {
        {
            let election = two.election(&name);
            let mut campaign = std::pin::pin!(election.campaign("c"));
            for _ in 0..polls {
                // Once elected (dropped at once, below), it must not be polled again.
                if futures::poll!(campaign.as_mut()).is_ready() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        let start = Instant::now();
        loop {
            let fields: std::collections::HashMap<String, String> =
                raw.hgetall(election_key(&name).as_str()).await.unwrap();
            if fields.is_empty() && queued(&raw, &name).await == 0 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "left behind after {polls} polls: {fields:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // And the election works on.
    let c = one.election(&name).campaign("c").await.unwrap();
    assert_eq!(leader_data(&two, &name).await.as_deref(), Some("c"));
    c.resign().await.unwrap();
}

/// Each campaign is a candidate of its own: a task that leads and campaigns again
/// waits for its first leadership to end (no re-entry).
async fn a_second_campaign_of_one_task_waits_for_the_first(url: &str) {
    let name = common::unique("elect-twice");
    let client = common::connect(url).await;
    let election = client.election(&name);
    let first = election.campaign("first").await.unwrap();
    let second = tokio::time::timeout(Duration::from_millis(300), election.campaign("second"));
    assert!(
        second.await.is_err(),
        "a second campaign re-entered the first"
    );
    let (first_owner, token) = (first.info().owner.clone(), first.fencing_token().unwrap());
    first.resign().await.unwrap();
    let second = election.campaign("second").await.unwrap();
    assert_ne!(second.info().owner, first_owner);
    assert!(second.fencing_token().unwrap() > token);
    second.resign().await.unwrap();
}

/// The election `N` and the fair lock `N` are different locks.
async fn an_election_is_apart_from_the_fair_lock_of_its_name(url: &str) {
    let name = common::unique("elect-apart");
    let (one, two) = (common::connect(url).await, common::connect(url).await);
    let guard = one.fair_lock(&name).await.unwrap();
    let leadership =
        tokio::time::timeout(Duration::from_secs(2), two.election(&name).campaign("x"))
            .await
            .expect("the fair lock of the same name does not hold the election up")
            .unwrap();
    assert!(two.fair_lock(&name).try_now().await.unwrap().is_none());
    leadership.resign().await.unwrap();
    guard.unlock().await.unwrap();
}

/// A leader in another process is killed (SIGKILL: its connections drop, nothing is
/// released): the next candidate is elected within about a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_leader_process_is_succeeded_within_a_lease() {
    let url = common::url();
    let name = common::unique("elect-killed");
    let lease = Duration::from_millis(600);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "leader_in_a_child_process",
            "--ignored",
            "--nocapture",
        ])
        .env("HOLDLOCK_ELECTION_URL", &url)
        .env("HOLDLOCK_ELECTION_NAME", &name)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (next, watcher) = (
        common::client_with_lease(&url, lease).await,
        common::connect(&url).await,
    );
    let start = Instant::now();
    while leader_data(&watcher, &name).await.as_deref() != Some("child") {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the child never led"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut changes = watcher.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "elected child");
    let b = campaign(&next, &name, "b");
    until_queued(&common::raw(&url).await, &name, 1).await;

    let killed = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    let b = elected(b, lease * 3).await;
    let took = killed.elapsed();
    assert!(
        took < lease + Duration::from_millis(400),
        "b was elected {took:?} after the leader was killed"
    );
    assert_eq!(next_change(&mut changes).await, "lost child");
    assert_eq!(next_change(&mut changes).await, "elected b");
    b.resign().await.unwrap();
}

/// The leader of [`a_killed_leader_process_is_succeeded_within_a_lease`], run in a
/// process of its own; it leads until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_killed_leader_process_is_succeeded_within_a_lease"]
async fn leader_in_a_child_process() {
    let (Ok(url), Ok(name)) = (
        std::env::var("HOLDLOCK_ELECTION_URL"),
        std::env::var("HOLDLOCK_ELECTION_NAME"),
    ) else {
        return;
    };
    let client = common::client_with_lease(&url, Duration::from_millis(600)).await;
    let leadership = client.election(&name).campaign("child").await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(leadership);
}

/// `holdlock leader NAME --json` prints the leader's record (null and exit status 1
/// when nobody leads); without `--json`, a table.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_the_leader() {
    let url = common::url();
    let name = common::unique("elect-cli");
    let run = |args: Vec<String>| {
        let url = url.clone();
        async move {
            let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdlock"))
                .arg("--url")
                .arg(&url)
                .args(args)
                .stdin(std::process::Stdio::null())
                .output();
            let output = tokio::time::timeout(Duration::from_secs(30), output)
                .await
                .expect("holdlock finished within 30 s")
                .expect("holdlock ran");
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };
    let json = |name: &str| vec!["leader".to_owned(), name.to_owned(), "--json".to_owned()];

    let (code, stdout, stderr) = run(json(&name)).await;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "null");

    let client = common::connect(&url).await;
    let leadership = client
        .election(&name)
        .campaign("host-a pid 42")
        .await
        .unwrap();
    let (code, stdout, stderr) = run(json(&name)).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let leader: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let info = leadership.info();
    assert_eq!(leader["election"], name.as_str(), "{leader}");
    assert_eq!(leader["owner"], info.owner.as_str(), "{leader}");
    assert_eq!(leader["data"], "host-a pid 42", "{leader}");
    assert_eq!(leader["fencing_token"], info.fencing_token, "{leader}");
    let since_us = info
        .since
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    assert_eq!(leader["since_us"].as_u64().map(u128::from), Some(since_us));

    let (code, stdout, stderr) = run(vec!["leader".to_owned(), name.clone()]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(rows[0].starts_with("ELECTION"), "{stdout}");
    assert!(
        rows[1].starts_with(&name) && rows[1].ends_with("host-a pid 42"),
        "{stdout}"
    );

    leadership.resign().await.unwrap();
    let (code, stdout, _) = run(vec!["leader".to_owned(), name.clone()]).await;
    assert_eq!(code, Some(1));
    assert!(stdout.starts_with("nobody leads"), "{stdout}");
    let (code, _, stderr) = run(json("a{b}")).await;
    assert_eq!(code, Some(64), "{stderr}");
}

/// The least-privilege ACL rule of `docs/deployments.md` is enough for an election:
/// campaigning, reading the leader, observing, resigning.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_election_runs_under_the_documented_acl_rule() {
    let server = common::RedisServer::start();
    // The rule for the test server's version (Redis 6.2 has one of its own).
    let rule = common::documented_rule("holdlock", "secret");
    let args: Vec<&str> = rule.iter().map(String::as_str).collect();
    assert_eq!(server.command(&args).as_deref(), Ok("+OK"), "{rule:?}");
    let url = format!("redis://holdlock:secret@127.0.0.1:{}", server.port);
    let name = common::unique("elect-acl");
    let (one, two) = (common::connect(&url).await, common::connect(&url).await);
    let mut changes = two.election(&name).observe().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "vacant");
    let a = one.election(&name).campaign("a").await.unwrap();
    assert_eq!(leader_data(&two, &name).await.as_deref(), Some("a"));
    a.resign().await.unwrap();
    assert_eq!(next_change(&mut changes).await, "elected a");
    assert_eq!(next_change(&mut changes).await, "resigned a");
}
