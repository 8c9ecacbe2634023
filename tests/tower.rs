//! `holdlock::tower`: the layers in real axum servers (two of them, each with its own
//! `LockClient`, sharing one Redis), driven by a real HTTP client, and called directly
//! with `oneshot` where a test needs two requests in one task.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{Request, Response, StatusCode, header};
use axum::routing::get;
use holdlock::tower::{ConcurrencyLimitLayer, LockLayer, OwnerScopeLayer, RetryAfter};
use holdlock::{LockClient, LockGuard, LockOptions};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::ServiceExt;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// An HTTP/1 client that keeps connections alive and reuses them.
fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// GETs `http://{address}{path}`; the response's status, headers and body text.
async fn get_from(
    http: &HttpClient,
    address: SocketAddr,
    path: &str,
) -> (StatusCode, axum::http::HeaderMap, String) {
    use http_body_util::BodyExt;
    let uri = format!("http://{address}{path}").parse().unwrap();
    let response = http.get(uri).await.expect("an HTTP response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("the whole body").to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// One HTTP/1 keep-alive connection to `address`: every request sent on it reuses
/// it (a pooled client may open a second connection when the first one is not back
/// in its pool yet, as happens on a busy machine).
async fn one_connection(address: SocketAddr) -> OneConnection {
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("an HTTP/1 handshake");
    tokio::spawn(connection);
    OneConnection { sender }
}

/// A connection made by [`one_connection`].
struct OneConnection {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl OneConnection {
    /// GETs `path` on this connection; the response's status and body text.
    async fn get(&mut self, path: &str) -> (StatusCode, String) {
        use http_body_util::BodyExt;
        self.sender.ready().await.expect("the connection is open");
        let request = Request::get(path)
            .header(header::HOST, "localhost")
            .body(Empty::new())
            .unwrap();
        let response = self
            .sender
            .send_request(request)
            .await
            .expect("an HTTP response");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the whole body").to_bytes();
        (parts.status, String::from_utf8_lossy(&body).into_owned())
    }
}

/// Serves `app` on a fresh loopback port (with the peer's address available to
/// handlers as `ConnectInfo`) until the test ends; returns the address.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// `{prefix}:{id}` for `/accounts/{id}/...`; no lock for other paths.
fn account_key(prefix: String) -> impl Fn(&Request<Body>) -> Option<String> + Send + Sync {
    move |request: &Request<Body>| {
        let id = request
            .uri()
            .path()
            .strip_prefix("/accounts/")?
            .split('/')
            .next()?;
        Some(format!("{prefix}:{id}"))
    }
}

/// Polls until `name` is locked (by anyone), for at most 5 s.
async fn wait_until_locked(client: &LockClient, name: &str) {
    let start = Instant::now();
    while !client.is_locked(name).await.unwrap() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{name} was never locked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// --- per-request owners ---------------------------------------------------------------

/// A handler that tries the lock once and holds it for 300 ms: 200 if it got the lock
/// (and then its hold count as the body), 409 if it was busy.
fn try_lock_app(client: LockClient, name: String) -> Router {
    Router::new().route(
        "/try",
        get(move || async move {
            match client.lock(&name).try_now().await.unwrap() {
                Some(guard) => {
                    let count = guard.hold_count();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    guard.unlock().await.unwrap();
                    (StatusCode::OK, count.to_string())
                }
                None => (StatusCode::CONFLICT, String::new()),
            }
        }),
    )
}

/// Sends two requests to `app` at once from ONE task (as hyper does for one
/// connection), and returns their statuses, sorted.
async fn two_requests_in_one_task<S>(app: S) -> [StatusCode; 2]
where
    S: tower::Service<Request<Body>, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    let request = || Request::get("/try").body(Body::empty()).unwrap();
    let (a, b) = tokio::join!(
        app.clone().oneshot(request()),
        app.clone().oneshot(request())
    );
    let mut statuses = [a.unwrap().status(), b.unwrap().status()];
    statuses.sort();
    statuses
}

/// Without the layer, two requests served in one task are one owner: both enter the
/// lock (the second re-enters). With `OwnerScopeLayer`, each is an owner of its own,
/// and the second finds the lock busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_one_task_are_separate_owners_with_the_layer() {
    let client = common::connect(&common::url()).await;
    let name = common::unique("tower-one-task");

    let bare = try_lock_app(client.clone(), name.clone());
    assert_eq!(
        two_requests_in_one_task(bare).await,
        [StatusCode::OK, StatusCode::OK],
        "the baseline: one task, one owner, so both entered"
    );

    let scoped = try_lock_app(client.clone(), name.clone()).layer(OwnerScopeLayer::new());
    assert_eq!(
        two_requests_in_one_task(scoped).await,
        [StatusCode::OK, StatusCode::CONFLICT],
        "with the layer, the second request found the first's lock busy"
    );
    assert!(!client.is_locked(&name).await.unwrap());
}

/// Guards that outlive their request (a handler that starts a reservation, another
/// that ends it), kept by lock name.
type Reservations = Arc<Mutex<Vec<LockGuard>>>;

/// `/reserve` takes the lock and keeps it past the request; `/try` tries it once
/// (200 with the hold count, or 409); `/release` lets go. Each answers the port of
/// the connection it came on, so the test can see that one connection served them.
fn reservation_app(client: LockClient, name: String, reservations: Reservations) -> Router {
    let (reserve_client, reserve_name, kept) = (client.clone(), name.clone(), reservations.clone());
    Router::new()
        .route(
            "/reserve",
            get(
                move |ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                    let guard = reserve_client.lock(&reserve_name).await.unwrap();
                    kept.lock().push(guard);
                    peer.port().to_string()
                },
            ),
        )
        .route(
            "/try",
            get(
                move |ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                    match client.lock(&name).try_now().await.unwrap() {
                        Some(guard) => {
                            let count = guard.hold_count();
                            guard.unlock().await.unwrap();
                            (StatusCode::OK, format!("{} {count}", peer.port()))
                        }
                        None => (StatusCode::CONFLICT, peer.port().to_string()),
                    }
                },
            ),
        )
        .route(
            "/release",
            get(move || async move {
                let guards: Vec<LockGuard> = std::mem::take(&mut *reservations.lock());
                for guard in guards {
                    guard.unlock().await.unwrap();
                }
            }),
        )
}

/// Over one keep-alive connection, a later request is not the owner of the lock an
/// earlier request took: without `OwnerScopeLayer` it is (hyper serves the whole
/// connection in one task) and re-enters the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_on_one_keep_alive_connection_are_separate_owners() {
    let client = common::connect(&common::url()).await;

    // (with the layer?, the status `/try` gets while `/reserve`'s lock is kept)
    for (layered, expected) in [(false, StatusCode::OK), (true, StatusCode::CONFLICT)] {
        let name = common::unique("tower-keep-alive");
        let reservations = Reservations::default();
        let mut app = reservation_app(client.clone(), name.clone(), reservations.clone());
        if layered {
            app = app.layer(OwnerScopeLayer::new());
        }
        let mut connection = one_connection(serve(app).await).await;

        let (status, reserved_on) = connection.get("/reserve").await;
        assert_eq!(status, StatusCode::OK);
        let (status, tried) = connection.get("/try").await;
        let tried_on = tried.split(' ').next().unwrap();
        assert_eq!(
            reserved_on, tried_on,
            "both requests came on one connection"
        );
        assert_eq!(
            status, expected,
            "layered: {layered}, /try answered {tried:?}"
        );
        if !layered {
            assert!(tried.ends_with(" 2"), "a re-entry: {tried:?}");
        }
        connection.get("/release").await;
        assert!(!client.is_locked(&name).await.unwrap());
    }
}

// --- LockLayer -------------------------------------------------------------------------

/// `/accounts/{id}/slow` holds the account's lock for 1.5 s (through `LockLayer`),
/// `/accounts/{id}` answers at once.
fn accounts_app(
    client: LockClient,
    prefix: &str,
    layer: impl FnOnce(LockLayer<AccountKey>) -> LockLayer<AccountKey>,
) -> Router {
    let key: AccountKey = Box::new(account_key(prefix.to_owned()));
    Router::new()
        .route(
            "/accounts/{id}/slow",
            get(async || {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "slow done"
            }),
        )
        .route("/accounts/{id}", get(async || "done"))
        .layer(layer(LockLayer::new(client, key)))
}

type AccountKey = Box<dyn Fn(&Request<Body>) -> Option<String> + Send + Sync>;

/// While server A's handler holds `account:1`, server B answers 423 with `Retry-After`
/// for the same account, and serves another account at once; with a wait budget, B
/// waits for A's handler instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_account_answers_423_on_the_other_server() {
    let url = common::url();
    let prefix = common::unique("tower-423");
    let a = serve(accounts_app(common::connect(&url).await, &prefix, |l| l)).await;
    let b = serve(accounts_app(common::connect(&url).await, &prefix, |l| l)).await;
    let b_waiting = serve(accounts_app(common::connect(&url).await, &prefix, |l| {
        l.wait(Duration::from_secs(5))
    }))
    .await;
    let observer = common::connect(&url).await;
    let http = http_client();

    let slow = tokio::spawn({
        let http = http.clone();
        async move { get_from(&http, a, "/accounts/1/slow").await }
    });
    wait_until_locked(&observer, &format!("{prefix}:1")).await;

    let (status, headers, _) = get_from(&http, b, "/accounts/1").await;
    assert_eq!(status, StatusCode::LOCKED);
    assert_eq!(headers.get(header::RETRY_AFTER).unwrap(), "1");
    let (status, _, body) = get_from(&http, b, "/accounts/2").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "done"));

    // The same request that was busy a moment ago waits its turn with a budget.
    let (status, _, body) = get_from(&http, b_waiting, "/accounts/1").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "done"));

    let (status, _, body) = slow.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "slow done"));
    assert!(!observer.is_locked(&format!("{prefix}:1")).await.unwrap());
}

/// A request the key function names no lock for passes through unlocked, even while
/// others are locked; the busy status and `Retry-After` follow the settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_status_and_retry_after_follow_the_settings() {
    let url = common::url();
    let client = common::connect(&url).await;
    let prefix = common::unique("tower-settings");
    // Someone else holds account 7 on a fixed lease of 5 s.
    let holder = common::connect(&url).await;
    let held = holder
        .lock(format!("{prefix}:7"))
        .options(LockOptions::new().lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .unwrap();

    let app = accounts_app(client.clone(), &prefix, |l| {
        l.busy_status(StatusCode::SERVICE_UNAVAILABLE)
            .retry_after(RetryAfter::RemainingLease)
    })
    .route("/health", get(async || "ok"));
    let request = |path: &str| Request::get(path).body(Body::empty()).unwrap();

    let response = app.clone().oneshot(request("/accounts/7")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let seconds: u64 = response.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((4..=5).contains(&seconds), "Retry-After: {seconds}");

    let fixed = accounts_app(client.clone(), &prefix, |l| {
        l.retry_after(RetryAfter::Fixed(Duration::from_millis(2500)))
    });
    let response = fixed.oneshot(request("/accounts/7")).await.unwrap();
    assert_eq!(response.status(), StatusCode::LOCKED);
    assert_eq!(response.headers()[header::RETRY_AFTER], "3");

    // `/health` is under the layer too, but names no lock.
    let response = app.oneshot(request("/health")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    held.unlock().await.unwrap();
}

/// Sets its flag when dropped: shows that a handler's future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Force-unlocking the lock a handler runs under drops the handler's future at once,
/// and the layer answers 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lock_drops_the_handler_and_answers_503() {
    let url = common::url();
    // A short lease, renewed by the watchdog: the loss is found at the next renewal.
    let client = common::client_with_lease(&url, Duration::from_millis(600)).await;
    let operator = common::connect(&url).await;
    let prefix = common::unique("tower-lost");
    let (started, dropped, finished) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let handler = {
        let (started, dropped, finished) = (started.clone(), dropped.clone(), finished.clone());
        move || async move {
            let _flag = DropFlag(dropped);
            started.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(5)).await;
            finished.store(true, Ordering::SeqCst);
            "finished"
        }
    };
    let app = Router::new()
        .route("/accounts/{id}/long", get(handler))
        .layer(LockLayer::new(client, account_key(prefix.clone())));
    let address = serve(app).await;
    let http = http_client();

    let request_start = Instant::now();
    let response = tokio::spawn({
        let http = http.clone();
        async move { get_from(&http, address, "/accounts/1/long").await }
    });
    let name = format!("{prefix}:1");
    wait_until_locked(&operator, &name).await;
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(operator.force_unlock(&name).await.unwrap());

    let (status, _, _) = response.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        request_start.elapsed() < Duration::from_secs(3),
        "answered after {:?}, not when the lock was lost",
        request_start.elapsed()
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
    assert!(
        !finished.load(Ordering::SeqCst),
        "the handler did not run to its end"
    );
}

// --- ConcurrencyLimitLayer ---------------------------------------------------------------

/// How many handlers run now, across both servers, and the most at once.
#[derive(Default)]
struct Running {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// `/work` takes `work_time`, counted in `running`, under a limit of `permits` of the
/// semaphore `name`, waiting up to `wait` for a permit.
async fn limited_server(
    url: &str,
    (name, permits): (&str, u32),
    wait: Duration,
    work_time: Duration,
    running: Arc<Running>,
) -> SocketAddr {
    let client = common::connect(url).await;
    let work = move || async move {
        let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
        running.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(work_time).await;
        running.now.fetch_sub(1, Ordering::SeqCst);
        "worked"
    };
    let limit = ConcurrencyLimitLayer::new(client.semaphore(name, permits)).wait(wait);
    serve(Router::new().route("/work", get(work)).layer(limit)).await
}

/// Fires 12 requests at once, 6 at each of two servers; their statuses and
/// `Retry-After` headers.
async fn twelve_requests(servers: [SocketAddr; 2]) -> Vec<(StatusCode, Option<String>)> {
    let http = http_client();
    let requests = (0..12).map(|i| {
        let http = http.clone();
        let server = servers[i % 2];
        tokio::spawn(async move {
            let (status, headers, _) = get_from(&http, server, "/work").await;
            let retry_after = headers
                .get(header::RETRY_AFTER)
                .map(|value| value.to_str().unwrap().to_owned());
            (status, retry_after)
        })
    });
    let mut outcomes = Vec::new();
    for request in requests.collect::<Vec<_>>() {
        outcomes.push(request.await.unwrap());
    }
    outcomes
}

/// A limit of 3 holds across two servers: with no wait, at most 3 handlers ever run
/// at once and the rest are turned away with 503 and `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_holds_across_both_servers_and_turns_the_rest_away() {
    let url = common::url();
    let name = common::unique("tower-limit-shed");
    let running = Arc::new(Running::default());
    // Handlers long enough that the 12 requests surely overlap.
    let work_time = Duration::from_secs(1);
    let a = limited_server(&url, (&name, 3), Duration::ZERO, work_time, running.clone()).await;
    let b = limited_server(&url, (&name, 3), Duration::ZERO, work_time, running.clone()).await;

    let outcomes = twelve_requests([a, b]).await;
    let ok = outcomes
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .count();
    let turned_away: Vec<_> = outcomes
        .iter()
        .filter(|(s, _)| *s == StatusCode::SERVICE_UNAVAILABLE)
        .collect();
    assert_eq!(ok + turned_away.len(), 12, "{outcomes:?}");
    assert!(ok >= 3, "{outcomes:?}");
    assert!(!turned_away.is_empty(), "{outcomes:?}");
    for (_, retry_after) in turned_away {
        assert_eq!(retry_after.as_deref(), Some("1"));
    }
    assert!(running.most.load(Ordering::SeqCst) <= 3);
}

/// With a wait budget long enough, all 12 requests are served, never more than 3 at
/// once across the two servers, and 3 at once at some point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_queues_requests_within_the_wait_budget() {
    let url = common::url();
    let name = common::unique("tower-limit-wait");
    let running = Arc::new(Running::default());
    let wait = Duration::from_secs(20);
    let work_time = Duration::from_millis(300);
    let a = limited_server(&url, (&name, 3), wait, work_time, running.clone()).await;
    let b = limited_server(&url, (&name, 3), wait, work_time, running.clone()).await;

    let outcomes = twelve_requests([a, b]).await;
    assert!(
        outcomes.iter().all(|(s, _)| *s == StatusCode::OK),
        "{outcomes:?}"
    );
    assert_eq!(running.most.load(Ordering::SeqCst), 3);
    let observer = common::connect(&url).await;
    assert_eq!(observer.semaphore(&name, 3).available().await.unwrap(), 3);
}

/// `LockLayer` makes each request an owner of its own (two requests in one task
/// exclude each other), and stacked layers of this module share the request's owner:
/// the handler re-enters the outer layer's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_one_owner_across_stacked_layers() {
    let client = common::connect(&common::url()).await;
    let prefix = common::unique("tower-stacked");
    let (outer_name, inner_name) = (format!("{prefix}:outer"), format!("{prefix}:inner"));
    let handler = {
        let (client, outer_name) = (client.clone(), outer_name.clone());
        move || async move {
            let again = client.lock(&outer_name).try_now().await.unwrap();
            let count = again.as_ref().map_or(0, LockGuard::hold_count);
            if let Some(guard) = again {
                guard.unlock().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            count.to_string()
        }
    };
    let (outer, inner) = (outer_name.clone(), inner_name.clone());
    let app = Router::new()
        .route("/try", get(handler))
        .layer(LockLayer::new(client.clone(), move |_: &Request<Body>| {
            Some(inner.clone())
        }))
        .layer(LockLayer::new(client.clone(), move |_: &Request<Body>| {
            Some(outer.clone())
        }));

    let request = || Request::get("/try").body(Body::empty()).unwrap();
    let (a, b) = tokio::join!(
        app.clone().oneshot(request()),
        app.clone().oneshot(request())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut statuses = [a.status(), b.status()];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::LOCKED],
        "one task, two owners"
    );
    let served = if a.status() == StatusCode::OK { a } else { b };
    let body = http_body_util::BodyExt::collect(served.into_body())
        .await
        .unwrap();
    assert_eq!(
        &body.to_bytes()[..],
        b"2",
        "the handler re-entered the outer lock"
    );
    assert!(!client.is_locked(&outer_name).await.unwrap());
    assert!(!client.is_locked(&inner_name).await.unwrap());
}

/// Taking the lock fails: an invalid name is the service's bug (500), a client that
/// cannot reach Redis (here: shut down) is unavailable (503). The handler never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_errors_answer_500_or_503_and_run_no_handler() {
    let client = common::connect(&common::url()).await;
    let ran = Arc::new(AtomicBool::new(false));
    let app = |client: LockClient, name: &'static str| {
        let ran = ran.clone();
        Router::new()
            .route(
                "/",
                get(move || async move { ran.store(true, Ordering::SeqCst) }),
            )
            .layer(LockLayer::new(client, move |_: &Request<Body>| {
                Some(name.to_owned())
            }))
    };
    let request = || Request::get("/").body(Body::empty()).unwrap();

    let response = app(client.clone(), "").oneshot(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);

    let gone = common::connect(&common::url()).await;
    gone.shutdown().await;
    let response = app(gone, "tower-gone").oneshot(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!ran.load(Ordering::SeqCst));
}

/// A permit lost while its handler runs (force-unlocked by an operator) drops the
/// handler at once, and the layer answers 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_permit_drops_the_handler_and_answers_503() {
    let url = common::url();
    let client = common::client_with_lease(&url, Duration::from_millis(600)).await;
    let operator = common::connect(&url).await;
    let name = common::unique("tower-lost-permit");
    let (started, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let handler = {
        let (started, dropped) = (started.clone(), dropped.clone());
        move || async move {
            let _flag = DropFlag(dropped);
            started.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(5)).await;
            "finished"
        }
    };
    let app = Router::new()
        .route("/work", get(handler))
        .layer(ConcurrencyLimitLayer::new(client.semaphore(&name, 2)));
    let request_start = Instant::now();
    let response = tokio::spawn(app.oneshot(Request::get("/work").body(Body::empty()).unwrap()));
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        operator
            .force_unlock_kind(holdlock::LockKind::Semaphore, &name)
            .await
            .unwrap()
    );
    let response = response.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(request_start.elapsed() < Duration::from_secs(3));
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
}
