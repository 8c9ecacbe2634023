//! What the library tells `tracing` about lock calls: each call runs in a span
//! `holdlock.lock` (fields `call`, `lock`, `owner`, and once it ends `outcome` and
//! `waited_ms`), with a `debug` event when it ends. Releases, renewal failures and
//! losses are events of their own (see `docs/design.md`, "Observability"). Nothing on
//! the success path is above `debug`.

use std::future::Future;

use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::error::Result;

/// The span of one lock call: `call` names the method (`lock`, `read_lock`, ...).
pub(crate) fn lock_span(call: &'static str, name: &str) -> Span {
    tracing::debug_span!(
        "holdlock.lock",
        call,
        lock = %name,
        owner = Empty,
        outcome = Empty,
        waited_ms = Empty,
    )
}

/// Records the owner of the lock call whose span is current.
pub(crate) fn record_owner(owner: &str) {
    Span::current().record("owner", tracing::field::display(owner));
}

/// Runs the lock call `future` in `span`, and records how it ended: `granted`,
/// `gave up` (its wait ran out, or a try was refused) or `error`, and how long it took.
pub(crate) async fn observed<T, G>(
    span: Span,
    future: impl Future<Output = Result<std::result::Result<T, G>>>,
) -> Result<std::result::Result<T, G>> {
    if span.is_disabled() {
        return future.await;
    }
    let started = Instant::now();
    let result = future.instrument(span.clone()).await;
    let outcome = match &result {
        Ok(Ok(_)) => "granted",
        Ok(Err(_)) => "gave up",
        Err(_) => "error",
    };
    let waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    span.record("outcome", outcome);
    span.record("waited_ms", waited_ms);
    span.in_scope(|| match &result {
        Err(error) => tracing::debug!(outcome, waited_ms, %error, "lock call ended"),
        _ => tracing::debug!(outcome, waited_ms, "lock call ended"),
    });
    result
}
