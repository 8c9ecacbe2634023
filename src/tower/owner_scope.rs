//! [`OwnerScopeLayer`]: each request as a lock owner of its own.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Request;
use tokio::task::futures::TaskLocalFuture;
use tower_layer::Layer;
use tower_service::Service;

use super::request_scope;
use crate::owner::within_scope;

/// Runs each request's future inside an [`owner_scope`](crate::owner_scope) of its
/// own, so that the locks its handler takes belong to that request.
///
/// Without it, a lock's owner is the task that polls the handler, and hyper (under
/// axum) serves every request of one keep-alive connection in the same task: two
/// requests of one connection would count as one owner, and the second would re-enter
/// the first's lock instead of waiting for it. With it, they exclude each other; a
/// request still re-enters its own locks.
///
/// [`LockLayer`](super::LockLayer) and [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer)
/// give each request its own owner already; all of this module's layers on one
/// request share one scope.
///
/// # Examples
/// ```no_run
/// use axum::{Router, http::StatusCode, routing::post};
/// use holdlock::tower::OwnerScopeLayer;
///
/// # fn dox(client: holdlock::LockClient) -> Router {
/// Router::new()
///     .route(
///         "/accounts/1/debit",
///         post(move || async move {
///             // Owned by this request, not by its connection's task.
///             let guard = client.lock("account:1").await;
///             let guard = guard.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
///             // ... debit account 1 ...
///             guard.unlock().await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)
///         }),
///     )
///     .layer(OwnerScopeLayer::new())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnerScopeLayer {
    _private: (),
}

impl OwnerScopeLayer {
    /// The layer.
    ///
    /// # Examples
    /// ```
    /// let layer = holdlock::tower::OwnerScopeLayer::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Layer<S> for OwnerScopeLayer {
    type Service = OwnerScope<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OwnerScope { inner }
    }
}

/// The service of [`OwnerScopeLayer`]: `inner`, each request in an owner scope of its
/// own.
///
/// # Examples
/// ```
/// use tower_layer::Layer;
///
/// let hello: axum::routing::MethodRouter = axum::routing::get(async || "hello");
/// let service = holdlock::tower::OwnerScopeLayer::new().layer(hello);
/// ```
#[derive(Debug, Clone)]
pub struct OwnerScope<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for OwnerScope<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = OwnerScopeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let scope = request_scope(&mut request);
        OwnerScopeFuture {
            inner: within_scope(scope, self.inner.call(request)),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`OwnerScope`]: the inner service's, polled as the
    /// request's owner.
    ///
    /// # Examples
    /// ```
    /// fn is_a_future<F: std::future::Future>() {}
    /// is_a_future::<holdlock::tower::OwnerScopeFuture<std::future::Ready<()>>>();
    /// ```
    pub struct OwnerScopeFuture<F> {
        #[pin]
        inner: TaskLocalFuture<u64, F>,
    }
}

impl<F: Future> Future for OwnerScopeFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}

impl<F> fmt::Debug for OwnerScopeFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnerScopeFuture").finish_non_exhaustive()
    }
}
