//! [`ConcurrencyLimitLayer`]: at most N requests at once across every instance.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::{busy_response, empty_response, failure_response, request_scope};
use crate::held::while_held;
use crate::options::LockOptions;
use crate::owner::within_scope;
use crate::semaphore::Semaphore;

/// At most the [`Semaphore`]'s number of requests at once, across every instance of
/// the service that uses the same semaphore: the distributed twin of tower's
/// `ConcurrencyLimitLayer`. Each request takes a permit before its handler runs and
/// gives it back (and awaits that) when the handler's response is ready.
///
/// - No permit free within the wait budget ([`wait`](Self::wait), default zero: one
///   try): `503 Service Unavailable` with `Retry-After` ([`retry_after`](Self::retry_after),
///   one second by default), and the handler never runs.
/// - The permit lost while the handler runs: the handler's future is dropped at once
///   and the layer answers `503` (logged with `tracing`).
/// - Redis failing while the permit is taken: `503`; invalid options or a number of
///   permits other than the one the semaphore is held with: `500`. Both logged.
///
/// Unlike tower's layer, this one waits for its permit in `call`, not `poll_ready`:
/// a permit taken in `poll_ready` would be held, across every instance, for as long
/// as the caller keeps the ready service without calling it (a load balancer probing
/// readiness, a connection that polls ready and then goes idle), and given back only
/// on drop. So `poll_ready` asks the inner service only, and each request holds a
/// permit exactly while it runs. Requests that find none answer 503 instead of
/// queueing in the server, which sheds load to the client (or its retry policy).
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
///
/// use axum::{Router, routing::get};
/// use holdlock::tower::ConcurrencyLimitLayer;
///
/// # fn dox(client: holdlock::LockClient) -> Router {
/// // At most 3 reports at once, whatever the number of instances; a request waits
/// // up to a second for a turn.
/// let reports = client.semaphore("reports", 3);
/// Router::new()
///     .route("/report", get(async || "a heavy report"))
///     .layer(ConcurrencyLimitLayer::new(reports).wait(Duration::from_secs(1)))
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ConcurrencyLimitLayer {
    config: LimitConfig,
}

/// A [`ConcurrencyLimitLayer`]'s settings, shared by its services.
#[derive(Debug, Clone)]
struct LimitConfig {
    semaphore: Semaphore,
    wait: Duration,
    options: LockOptions,
    retry_after: Duration,
}

impl ConcurrencyLimitLayer {
    /// A layer limiting requests to `semaphore`'s permits: one try (no waiting), the
    /// client's lease and watchdog, `503` with `Retry-After: 1` when none is free.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(client: holdlock::LockClient) {
    /// let layer = holdlock::tower::ConcurrencyLimitLayer::new(client.semaphore("api", 100));
    /// # }
    /// ```
    pub fn new(semaphore: Semaphore) -> Self {
        Self {
            config: LimitConfig {
                semaphore,
                wait: Duration::ZERO,
                options: LockOptions::new(),
                retry_after: Duration::from_secs(1),
            },
        }
    }

    /// How long a request waits for a permit before the layer answers 503; zero (the
    /// default) tries once.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::ConcurrencyLimitLayer) {
    /// let layer = layer.wait(std::time::Duration::from_secs(2));
    /// # }
    /// ```
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = wait;
        self
    }

    /// The options each permit is taken with (a fixed lease, data for the
    /// operators, ...), as [`Acquire::options`](crate::Acquire::options) takes them; their own wait is
    /// replaced by the layer's [`wait`](Self::wait).
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::ConcurrencyLimitLayer) {
    /// let layer = layer.options(holdlock::LockOptions::new().data("web-3"));
    /// # }
    /// ```
    #[must_use]
    pub fn options(mut self, options: LockOptions) -> Self {
        self.config.options = options;
        self
    }

    /// What `Retry-After` says when no permit is free, in whole seconds (rounded up, at
    /// least 1); one second by default.
    ///
    /// # Examples
    /// ```no_run
    /// # fn dox(layer: holdlock::tower::ConcurrencyLimitLayer) {
    /// let layer = layer.retry_after(std::time::Duration::from_secs(10));
    /// # }
    /// ```
    #[must_use]
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.config.retry_after = retry_after;
        self
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimit {
            inner,
            config: Arc::new(self.config.clone()),
        }
    }
}

/// The service of [`ConcurrencyLimitLayer`]: `inner`, each request holding a permit.
///
/// # Examples
/// ```no_run
/// use tower_layer::Layer;
///
/// # fn dox(client: holdlock::LockClient) {
/// let layer = holdlock::tower::ConcurrencyLimitLayer::new(client.semaphore("api", 100));
/// let limited: axum::routing::MethodRouter = axum::routing::get(async || "limited");
/// let service = layer.layer(limited);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ConcurrencyLimit<S> {
    inner: S,
    config: Arc<LimitConfig>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
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
        let scope = request_scope(&mut request);
        Box::pin(within_scope(
            scope,
            Arc::clone(&self.config).serve(inner, request),
        ))
    }
}

impl LimitConfig {
    /// Runs `inner` on `request` while holding a permit.
    async fn serve<S, ReqBody, ResBody>(
        self: Arc<Self>,
        mut inner: S,
        request: Request<ReqBody>,
    ) -> Result<Response<ResBody>, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        ResBody: Default,
    {
        let name = self.semaphore.name();
        let options = self.options.clone().wait(self.wait);
        let permit = match self.semaphore.acquire().options(options).await {
            Ok(Some(permit)) => permit,
            Ok(None) => {
                return Ok(busy_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    self.retry_after,
                ));
            }
            Err(error) => return Ok(failure_response("permit", name, &error)),
        };
        match while_held(&permit, inner.call(request)).await {
            Some(response) => {
                if let Err(error) = permit.release().await {
                    tracing::warn!(
                        semaphore = %name, %error,
                        "could not give the request's permit back after its handler; \
                         it expires with its lease"
                    );
                }
                response
            }
            None => {
                tracing::warn!(
                    semaphore = %name,
                    "the request's permit was lost while its handler ran: \
                     stopped the handler, answered 503"
                );
                let _ = permit.release().await;
                Ok(empty_response(StatusCode::SERVICE_UNAVAILABLE))
            }
        }
    }
}
