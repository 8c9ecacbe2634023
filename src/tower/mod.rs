//! Tower layers for web services (feature `tower`): per-request lock owners, a lock
//! per request, and a concurrency limit shared by every instance of a service. They
//! work with axum, hyper and any other server built on `tower::Service`.
//!
//! - [`OwnerScopeLayer`]: each request runs as an owner of its own. hyper serves all
//!   the requests of one keep-alive connection in one task, and a lock's owner is
//!   normally the task, so without it two requests of one connection would enter each
//!   other's locks (locks are reentrant per owner).
//! - [`LockLayer`]: takes a lock named from the request (e.g. `account:42` from the
//!   path) before the handler runs and holds it, renewed by the watchdog, until the
//!   handler's response is ready. Busy: `423 Locked` (or a status of your choice) with
//!   `Retry-After`.
//! - [`ConcurrencyLimitLayer`]: at most N requests at once across every instance, one
//!   permit of a [`Semaphore`](crate::Semaphore) each. None free: `503` with
//!   `Retry-After`.
//!
//! Each request gets one owner for all of these layers together: the outermost of
//! them opens an [`owner_scope`](crate::owner_scope) for the request and the inner ones
//! (and the handler) run in the same scope, so a handler re-entering the lock its
//! [`LockLayer`] took succeeds at once. [`LockLayer`] and [`ConcurrencyLimitLayer`]
//! open that scope themselves: [`OwnerScopeLayer`] is for services that lock in their
//! handlers only.
//!
//! The layers answer with a response of their own (busy, lost, Redis failing) for any
//! response body that is `Default` (axum's `Body`, `http_body_util::Empty`, ...): the
//! status and headers, and an empty body. Errors of the inner service pass through.
//!
//! # What a response means
//! | Layer | Situation | Response |
//! |---|---|---|
//! | [`LockLayer`] | the lock stays busy for the wait budget | 423 (see [`LockLayer::busy_status`]) + `Retry-After` |
//! | [`LockLayer`] | the lock is lost while the handler runs | 503; the handler's future is dropped at once |
//! | [`ConcurrencyLimitLayer`] | no permit is free within the wait budget | 503 + `Retry-After` |
//! | [`ConcurrencyLimitLayer`] | the permit is lost while the handler runs | 503; the handler's future is dropped at once |
//! | both | Redis fails (or the client is shut down) while taking the lock or permit | 503, logged with `tracing` |
//! | both | the lock's name or options are invalid (a bug of the service) | 500, logged with `tracing` |
//!
//! The lock or permit covers the handler until its response is ready, not the sending
//! of a streamed body afterwards.
//!
//! # Examples
//! An axum service whose transfers lock the account they debit, whose exports run at
//! most 4 at once across every instance, and whose handlers may take further locks
//! of their own, each request as its own owner:
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use axum::body::Body;
//! use axum::http::Request;
//! use axum::routing::{get, post};
//! use axum::Router;
//! use holdlock::tower::{ConcurrencyLimitLayer, LockLayer, OwnerScopeLayer};
//! use holdlock::LockClient;
//!
//! /// `account:<id>` for `/accounts/<id>/...`; no lock for other paths.
//! fn account_lock(request: &Request<Body>) -> Option<String> {
//!     let mut segments = request.uri().path().split('/').skip(1);
//!     match (segments.next(), segments.next()) {
//!         (Some("accounts"), Some(id)) => Some(format!("account:{id}")),
//!         _ => None,
//!     }
//! }
//!
//! # async fn dox() -> Result<(), Box<dyn std::error::Error>> {
//! let client = LockClient::connect("redis://127.0.0.1:6379").await?;
//! let transfers = Router::new()
//!     .route("/accounts/{id}/transfer", post(async || "done"))
//!     // Wait up to 2 s for the account, then answer 423 Locked.
//!     .layer(LockLayer::new(client.clone(), account_lock).wait(Duration::from_secs(2)));
//! let exports = Router::new()
//!     .route("/export", get(async || "exported"))
//!     .layer(ConcurrencyLimitLayer::new(client.semaphore("exports", 4)));
//! let app = Router::new()
//!     .merge(transfers)
//!     .merge(exports)
//!     .route("/report", get(async || "locks of its own"))
//!     .layer(OwnerScopeLayer::new());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod concurrency_limit;
mod lock;
mod owner_scope;

use std::time::Duration;

use http::{HeaderValue, Request, Response, StatusCode, header};

use crate::error::LockError;
use crate::owner::new_scope;

pub use concurrency_limit::{ConcurrencyLimit, ConcurrencyLimitLayer};
pub use lock::{Lock, LockLayer, RetryAfter};
pub use owner_scope::{OwnerScope, OwnerScopeFuture, OwnerScopeLayer};

/// The owner scope of one request, kept in its extensions by the outermost layer of
/// this module so that the inner ones (and the handler) share it. Private: no one
/// else can put a scope there.
#[derive(Debug, Clone, Copy)]
struct RequestScope(u64);

/// The request's owner scope: the one an outer layer gave it, or a new one.
fn request_scope<B>(request: &mut Request<B>) -> u64 {
    if let Some(RequestScope(scope)) = request.extensions().get::<RequestScope>() {
        return *scope;
    }
    let scope = new_scope();
    request.extensions_mut().insert(RequestScope(scope));
    scope
}

/// A response of the layers' own: `status`, an empty body.
fn empty_response<B: Default>(status: StatusCode) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = status;
    response
}

/// `status` with `Retry-After: <seconds>`, rounded up to whole seconds (at least 1).
fn busy_response<B: Default>(status: StatusCode, retry_after: Duration) -> Response<B> {
    let mut response = empty_response(status);
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(whole_seconds(retry_after)),
    );
    response
}

/// `duration` in whole seconds, rounded up, at least 1: `Retry-After: 0` would invite
/// a retry storm.
fn whole_seconds(duration: Duration) -> u64 {
    let seconds = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    seconds.max(1)
}

/// The answer to an error taking a lock or a permit: 500 for a name or option the
/// service got wrong (retrying cannot help), 503 otherwise (Redis failed, the client
/// was shut down). Logged: the client sees only the status.
fn failure_response<B: Default>(what: &str, name: &str, error: &LockError) -> Response<B> {
    let status = match error {
        LockError::InvalidName { .. } | LockError::InvalidOption { .. } => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    tracing::error!(%name, %error, %status, "could not take the request's {what}");
    empty_response(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(2001)), 3);
    }

    #[test]
    fn a_request_keeps_the_scope_it_was_given() {
        let mut request = Request::new(());
        let first = request_scope(&mut request);
        assert_eq!(request_scope(&mut request), first);
        assert_ne!(request_scope(&mut Request::new(())), first);
    }

    #[test]
    fn configuration_errors_are_500_and_the_rest_503() {
        let invalid = LockError::InvalidName {
            name: String::new(),
            reason: "empty",
        };
        let response: Response<()> = failure_response("lock", "", &invalid);
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let response: Response<()> = failure_response("lock", "x", &LockError::Shutdown);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
