//! What the library tells `tracing` (and, with the `metrics` feature, the `metrics`
//! facade) about lock calls: each call runs in a span `holdlock.lock` (fields `call`,
//! `lock`, `owner`, and once it ends `outcome` and `waited_ms`), with a `debug` event
//! when it ends. Releases, renewal failures and losses are events of their own (see
//! `docs/design.md`, "Observability"). Nothing on the success path is above `debug`.

use std::future::Future;

use futures::FutureExt;
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

/// The span of one hold (see `LockClientBuilder::hold_spans`), child of the call
/// that took it; `holdlock.outcome` is recorded when it ends (see
/// [`end_hold_span`]). Field names follow OpenTelemetry's attribute conventions
/// (namespaced, dotted), so that `tracing-opentelemetry` exports them as they are.
pub(crate) fn hold_span(name: &str, kind: &'static str, owner: &str, token: Option<u64>) -> Span {
    tracing::info_span!(
        target: "holdlock::hold",
        "holdlock.hold",
        holdlock.lock = %name,
        holdlock.kind = kind,
        holdlock.owner = %owner,
        // Signed: OpenTelemetry has no unsigned 64-bit attribute, and
        // `tracing-opentelemetry` exports a `u64` as text (tokens stay below 2^63).
        holdlock.fencing_token = token.and_then(|token| i64::try_from(token).ok()),
        holdlock.outcome = Empty,
        otel.status_code = Empty,
    )
}

/// Ends a hold's span: `released`, or `lost` (an error status for OpenTelemetry).
pub(crate) fn end_hold_span(span: Span, outcome: &'static str) {
    span.record("holdlock.outcome", outcome);
    if outcome == "lost" {
        span.record("otel.status_code", "ERROR");
    }
    drop(span);
}

/// Whether a lock call in `span` is recorded at all: the span is enabled, or the
/// metrics count every call. A call nothing records runs as it is, not wrapped by
/// [`observed`] (a wrapper that moves the call's future and polls through a span).
pub(crate) fn records(span: &Span) -> bool {
    !span.is_disabled() || cfg!(feature = "metrics")
}

/// Records the owner of the lock call whose span is current.
pub(crate) fn record_owner(owner: &str) {
    Span::current().record("owner", tracing::field::display(owner));
}

/// Runs the lock call `future` in `span`, and records how it ended: `granted`,
/// `gave up` (its wait ran out, or a try was refused) or `error`, and how long it took.
/// `single_try` tells a refused try (`busy`) from a wait that ran out (`timed_out`) in
/// the metrics.
///
/// Not an `async fn`: one would keep room for `future` twice (as its argument and as
/// what it awaits), doubling every lock call's future and so every task that takes a
/// lock. The clock starts when this is called, right before the caller awaits it, and
/// only if something records the call (a span enabled, or the metrics).
pub(crate) fn observed<T, G>(
    span: Span,
    single_try: bool,
    future: impl Future<Output = Result<std::result::Result<T, G>>>,
) -> impl Future<Output = Result<std::result::Result<T, G>>> {
    let started = records(&span).then(Instant::now);
    future
        .instrument(span.clone())
        .map(move |result| record_outcome(&span, single_try, started, result))
}

/// Records how the lock call observed in `span`, started at `started` (`None`: nothing
/// records it), ended (see [`observed`]); passes its result on.
fn record_outcome<T, G>(
    span: &Span,
    single_try: bool,
    started: Option<Instant>,
    result: Result<std::result::Result<T, G>>,
) -> Result<std::result::Result<T, G>> {
    let Some(started) = started else {
        return result;
    };
    let outcome = match &result {
        Ok(Ok(_)) => "granted",
        Ok(Err(_)) => "gave up",
        Err(_) => "error",
    };
    let waited = started.elapsed();
    #[cfg(feature = "metrics")]
    metrics::counted_acquisition(
        match &result {
            Ok(Ok(_)) => "granted",
            Ok(Err(_)) if single_try => "busy",
            Ok(Err(_)) => "timed_out",
            Err(_) => "error",
        },
        waited,
    );
    #[cfg(not(feature = "metrics"))]
    let _ = single_try;
    if span.is_disabled() {
        return result;
    }
    let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
    span.record("outcome", outcome);
    span.record("waited_ms", waited_ms);
    span.in_scope(|| match &result {
        Err(error) => tracing::debug!(outcome, waited_ms, %error, "lock call ended"),
        _ => tracing::debug!(outcome, waited_ms, "lock call ended"),
    });
    result
}

/// The metrics (feature `metrics`), through the `metrics` facade: whatever recorder the
/// application installed receives them (none: they cost a check each). Names follow
/// Prometheus conventions; they are listed in `docs/design.md`, "Observability".
#[cfg(feature = "metrics")]
pub(crate) mod metrics {
    use std::time::Duration;

    /// A lock call ended with `outcome` (`granted`, `busy`, `timed_out`, `error`) after
    /// waiting `waited`.
    pub(crate) fn counted_acquisition(outcome: &'static str, waited: Duration) {
        ::metrics::counter!("holdlock_acquisitions_total", "outcome" => outcome).increment(1);
        ::metrics::histogram!("holdlock_wait_seconds").record(waited.as_secs_f64());
    }

    /// A nested hold was taken (the count went above 1).
    pub(crate) fn reentered() {
        ::metrics::counter!("holdlock_reentries_total").increment(1);
    }

    /// A hold was taken afresh: one more lock held by this client.
    pub(crate) fn held() {
        ::metrics::gauge!("holdlock_locks_held").increment(1.0);
    }

    /// A hold ended (released, or lost), held for `held_for`: one lock fewer.
    pub(crate) fn let_go(held_for: Option<Duration>) {
        ::metrics::gauge!("holdlock_locks_held").decrement(1.0);
        if let Some(held_for) = held_for {
            ::metrics::histogram!("holdlock_hold_seconds").record(held_for.as_secs_f64());
        }
    }

    /// An owner's last hold was released.
    pub(crate) fn released() {
        ::metrics::counter!("holdlock_releases_total").increment(1);
    }

    /// A renewal ended with `result` (`ok`, `gone`, `error`, `timeout`).
    pub(crate) fn renewed(result: &'static str) {
        ::metrics::counter!("holdlock_renewals_total", "result" => result).increment(1);
    }

    /// A renewal landed with `margin` of the lease left in Redis.
    pub(crate) fn renewal_margin(margin: Duration) {
        ::metrics::histogram!("holdlock_renewal_margin_seconds").record(margin.as_secs_f64());
    }

    /// A deadlock was broken: this client's wait was its victim.
    pub(crate) fn deadlock_broken() {
        ::metrics::counter!("holdlock_deadlocks_total").increment(1);
    }

    /// A hold was lost.
    pub(crate) fn lost() {
        ::metrics::counter!("holdlock_locks_lost_total").increment(1);
    }
}
