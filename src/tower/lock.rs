//! [`LockLayer`]: a lock named from the request, held while its handler runs.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::{busy_response, empty_response, failure_response, request_scope};
use crate::client::LockClient;
use crate::held::while_held;
use crate::options::LockOptions;
use crate::owner::within_scope;

/// What `Retry-After` says when [`LockLayer`] answers that the lock is busy, in whole
/// seconds (rounded up, at least 1).
///
/// The default is [`Fixed`](Self::Fixed) one second. A holder renewed by the watchdog
/// keeps its lease topped up (see [`LockOptions`]), so its remaining lease says
/// nothing about when it lets go; [`RemainingLease`](Self::RemainingLease) is for
/// holders on a fixed lease ([`LockOptions::lease`]), whose hold ends by then at the
/// latest.
///
/// # Examples
/// ```no_run
/// # fn dox(client: holdlock::LockClient) {
/// use std::time::Duration;
/// use holdlock::tower::{LockLayer, RetryAfter};
///
/// let layer = LockLayer::new(client, |_: &http::Request<axum::body::Body>| Some("report".to_owned()))
///     .retry_after(RetryAfter::Fixed(Duration::from_secs(5)));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryAfter {
    /// Always this long.
    Fixed(Duration),
    /// The holder's remaining lease, read from Redis when the lock is found busy
    /// ([`LockClient::inspect`], one more round trip); one second if that fails or the
    /// lock was freed meanwhile.
    RemainingLease,
}

impl Default for RetryAfter {
    fn default() -> Self {
        Self::Fixed(Duration::from_secs(1))
    }
}

/// Takes a lock named from each request before its handler runs, and holds it (renewed
/// by the watchdog) until the handler's response is ready: requests about the same
/// thing run one at a time across every instance of the service.
///
/// - `key` names the lock from the request: `None` lets the request through unlocked.
/// - Busy for the whole wait budget ([`wait`](Self::wait), default zero: one try):
///   the layer answers [`busy_status`](Self::busy_status) (`423 Locked` by default)
///   with `Retry-After` (see [`RetryAfter`]), and the handler never runs.
/// - Lost while the handler runs (its lease ran out, an operator force-unlocked it):
///   the handler's future is dropped at once, so it stops at its next await, and the
///   layer answers `503 Service Unavailable` (logged with `tracing`). Whatever the
///   handler did before is not undone: take its work as not done under the lock.
/// - After the handler: the lock is released, and the release awaited, before the
///   response goes out; a failed release is logged (the response stands, and the hold
///   expires with its lease).
/// - Redis failing while the lock is taken: `503`; an invalid lock name or options:
///   `500`. Both logged with `tracing`.
///
/// Each request is an owner of its own (see
/// [`OwnerScopeLayer`](super::OwnerScopeLayer)), so the handler may take the same lock
/// again (a re-entry) or any other.
///
/// The lock covers the handler's future, not the streaming of a response body after it.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
///
/// use axum::{Router, body::Body, http::Request, routing::post};
/// use holdlock::tower::LockLayer;
///
/// fn account_lock(request: &Request<Body>) -> Option<String> {
///     let id = request.uri().path().strip_prefix("/accounts/")?.split('/').next()?;
///     Some(format!("account:{id}"))
/// }
///
/// # fn dox(client: holdlock::LockClient) -> Router {
/// Router::new()
///     .route("/accounts/{id}/withdraw", post(async || "withdrawn"))
///     .layer(LockLayer::new(client, account_lock).wait(Duration::from_millis(500)))
/// # }
/// ```
pub struct LockLayer<K> {
    config: LockConfig<K>,
}

/// A [`LockLayer`]'s settings, shared by its services.
struct LockConfig<K> {
    client: LockClient,
    key: Arc<K>,
    wait: Duration,
    options: LockOptions,
    busy_status: StatusCode,
    retry_after: RetryAfter,
}

impl<K> Clone for LockConfig<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            key: Arc::clone(&self.key),
            wait: self.wait,
            options: self.options.clone(),
            busy_status: self.busy_status,
            retry_after: self.retry_after,
        }
    }
}

impl<K> fmt::Debug for LockConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayer")
            .field("wait", &self.wait)
            .field("options", &self.options)
            .field("busy_status", &self.busy_status)
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}

impl<K> LockLayer<K> {
    /// A layer taking the lock `key` names for each request, with `client`: one try
    /// (no waiting), the client's lease and watchdog, `423 Locked` with `Retry-After:
    /// 1` when busy.
    ///
    /// `key` is any `Fn(&http::Request<B>) -> Option<String>` (`Send + Sync +
    /// 'static`), with `B` the request body type (axum: `axum::body::Body`); a closure
    /// needs its argument's type written out.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::LockClient) {
    /// use axum::{body::Body, http::Request};
    ///
    /// let layer = holdlock::tower::LockLayer::new(client, |request: &Request<Body>| {
    ///     let tenant = request.headers().get("x-tenant")?.to_str().ok()?;
    ///     Some(format!("tenant:{tenant}"))
    /// });
    /// # }
    /// ```
    pub fn new(client: LockClient, key: K) -> Self {
        Self {
            config: LockConfig {
                client,
                key: Arc::new(key),
                wait: Duration::ZERO,
                options: LockOptions::new(),
                busy_status: StatusCode::LOCKED,
                retry_after: RetryAfter::default(),
            },
        }
    }

    /// How long a request waits for a busy lock before the layer answers busy; zero
    /// (the default) tries once.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::LockLayer<fn(&http::Request<()>) -> Option<String>>) {
    /// let layer = layer.wait(std::time::Duration::from_secs(2));
    /// # }
    /// ```
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = wait;
        self
    }

    /// The options each lock is taken with (a fixed lease, fencing, data for the
    /// operators, ...), as [`Acquire::options`](crate::Acquire::options) takes them; their own wait is
    /// replaced by the layer's [`wait`](Self::wait).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::LockLayer<fn(&http::Request<()>) -> Option<String>>) {
    /// let layer = layer.options(holdlock::LockOptions::new().data("web-3"));
    /// # }
    /// ```
    #[must_use]
    pub fn options(mut self, options: LockOptions) -> Self {
        self.config.options = options;
        self
    }

    /// The status to answer when the lock stays busy: `423 Locked` by default;
    /// `503 Service Unavailable` for clients that retry only on that.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::LockLayer<fn(&http::Request<()>) -> Option<String>>) {
    /// let layer = layer.busy_status(http::StatusCode::SERVICE_UNAVAILABLE);
    /// # }
    /// ```
    #[must_use]
    pub fn busy_status(mut self, status: StatusCode) -> Self {
        self.config.busy_status = status;
        self
    }

    /// What `Retry-After` says when the lock stays busy (see [`RetryAfter`]; one
    /// second by default).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::LockLayer<fn(&http::Request<()>) -> Option<String>>) {
    /// let layer = layer.retry_after(holdlock::tower::RetryAfter::RemainingLease);
    /// # }
    /// ```
    #[must_use]
    pub fn retry_after(mut self, retry_after: RetryAfter) -> Self {
        self.config.retry_after = retry_after;
        self
    }
}

impl<K> Clone for LockLayer<K> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
        }
    }
}

impl<K> fmt::Debug for LockLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.config.fmt(f)
    }
}

impl<S, K> Layer<S> for LockLayer<K> {
    type Service = Lock<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        Lock {
            inner,
            config: Arc::new(self.config.clone()),
        }
    }
}

/// The service of [`LockLayer`]: `inner`, each request under the lock it names.
///
/// # Examples
/// ```no_run
/// use tower_layer::Layer;
///
/// # fn dox(client: holdlock::LockClient) {
/// let layer = holdlock::tower::LockLayer::new(client, |_: &http::Request<axum::body::Body>| {
///     Some("singleton".to_owned())
/// });
/// let one_at_a_time: axum::routing::MethodRouter = axum::routing::post(async || "one at a time");
/// let service = layer.layer(one_at_a_time);
/// # }
/// ```
pub struct Lock<S, K> {
    inner: S,
    config: Arc<LockConfig<K>>,
}

impl<S: Clone, K> Clone for Lock<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S: fmt::Debug, K> fmt::Debug for Lock<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for Lock<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    K: Fn(&Request<ReqBody>) -> Option<String> + Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<ResBody>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        // The instance polled ready goes with the request; a clone stays for the next.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        let config = Arc::clone(&self.config);
        let name = (config.key)(&request);
        let scope = request_scope(&mut request);
        Box::pin(within_scope(scope, config.serve(name, inner, request)))
    }
}

impl<K> LockConfig<K> {
    /// Runs `inner` on `request` under the lock `name` (without a lock for `None`).
    async fn serve<S, ReqBody, ResBody>(
        self: Arc<Self>,
        name: Option<String>,
        mut inner: S,
        request: Request<ReqBody>,
    ) -> Result<Response<ResBody>, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        ResBody: Default,
    {
        let Some(name) = name else {
            return inner.call(request).await;
        };
        let options = self.options.clone().wait(self.wait);
        let guard = match self.client.lock(&name).options(options).await {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                return Ok(busy_response(
                    self.busy_status,
                    self.retry_after(&name).await,
                ));
            }
            Err(error) => return Ok(failure_response("lock", &name, &error)),
        };
        match while_held(&guard, inner.call(request)).await {
            Some(response) => {
                if let Err(error) = guard.unlock().await {
                    tracing::warn!(
                        lock = %name, %error,
                        "could not release the request's lock after its handler; \
                         it expires with its lease"
                    );
                }
                response
            }
            None => {
                tracing::warn!(
                    lock = %name,
                    "the request's lock was lost while its handler ran: \
                     stopped the handler, answered 503"
                );
                // Whatever is left of the hold goes; the loss is what counts.
                let _ = guard.unlock().await;
                Ok(empty_response(StatusCode::SERVICE_UNAVAILABLE))
            }
        }
    }

    /// How long a client should wait before trying the busy lock `name` again.
    async fn retry_after(&self, name: &str) -> Duration {
        const FALLBACK: Duration = Duration::from_secs(1);
        match self.retry_after {
            RetryAfter::Fixed(duration) => duration,
            RetryAfter::RemainingLease => match self.client.inspect(name).await {
                Ok(Some(info)) => info.ttl.unwrap_or(FALLBACK),
                Ok(None) => FALLBACK,
                Err(error) => {
                    tracing::debug!(lock = %name, %error, "could not read a busy lock's lease");
                    FALLBACK
                }
            },
        }
    }
}
