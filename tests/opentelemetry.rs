//! Hold spans (`LockClientBuilder::hold_spans`) exported through the OpenTelemetry
//! SDK, as an application using `tracing-opentelemetry` would see them.

mod common;

use std::time::Duration;

use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

use holdlock::LockClient;

/// Runs `body` with spans exported to memory, and returns the `holdlock.hold` ones.
async fn hold_spans_of(body: impl std::future::Future<Output = ()>) -> Vec<SpanData> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    // The test's runtime has one thread: every task of the client runs on it.
    let dispatch = tracing::Dispatch::new(subscriber);
    {
        let _default = tracing::dispatcher::set_default(&dispatch);
        body.await;
    }
    provider.force_flush().unwrap();
    exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|span| span.name == "holdlock.hold")
        .collect()
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> String {
    attribute(span, key)
        .map(|v| v.as_str().into_owned())
        .unwrap_or_default()
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans
        .iter()
        .filter(|span| text(span, "holdlock.lock") == name)
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn every_kind_of_hold_is_a_span_from_grant_to_release() {
    let (mutex, fenced, rw, sem) = (
        common::unique("otel-mutex"),
        common::unique("otel-fenced"),
        common::unique("otel-rw"),
        common::unique("otel-sem"),
    );
    let spans = hold_spans_of(async {
        let client = LockClient::builder(common::url())
            .hold_spans(true)
            .build()
            .await
            .unwrap();
        let guard = client.lock(&mutex).await.unwrap();
        // Nested holds share the outer hold's span.
        let nested = client.lock(&mutex).await.unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
        nested.unlock().await.unwrap();
        guard.unlock().await.unwrap();
        let guard = client
            .lock(&fenced)
            .options(holdlock::LockOptions::fenced())
            .await
            .unwrap()
            .unwrap();
        guard.unlock().await.unwrap();
        client
            .write_lock(&rw)
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        client.read_lock(&rw).await.unwrap().unlock().await.unwrap();
        let permit = client.semaphore(&sem, 2).acquire().await.unwrap();
        permit.release().await.unwrap();
        client.shutdown().await;
    })
    .await;

    let held = named(&spans, &mutex);
    assert_eq!(
        held.len(),
        1,
        "one span for the outer hold and its nested one"
    );
    let held = held[0];
    assert_eq!(text(held, "holdlock.kind"), "mutex");
    assert_eq!(text(held, "holdlock.outcome"), "released");
    assert!(text(held, "holdlock.owner").contains(':'));
    let lasted = held.end_time.duration_since(held.start_time).unwrap();
    assert!(
        lasted >= Duration::from_millis(60),
        "the span covers the hold: {lasted:?}"
    );

    let fenced = named(&spans, &fenced);
    assert_eq!(fenced.len(), 1);
    let token = attribute(fenced[0], "holdlock.fencing_token");
    assert!(
        matches!(token, Some(Value::I64(t)) if *t > 0),
        "{token:?} in {:?}",
        fenced[0].attributes
    );

    let kinds: Vec<String> = named(&spans, &rw)
        .iter()
        .map(|s| text(s, "holdlock.kind"))
        .collect();
    assert_eq!(kinds, ["write", "read"]);
    let permits = named(&spans, &sem);
    assert_eq!(permits.len(), 1);
    assert_eq!(text(permits[0], "holdlock.kind"), "semaphore");
}

#[tokio::test(flavor = "current_thread")]
async fn a_lost_hold_ends_its_span_with_an_error() {
    let name = common::unique("otel-lost");
    let spans = hold_spans_of(async {
        let client = LockClient::builder(common::url())
            .lease(Duration::from_millis(600))
            .hold_spans(true)
            .build()
            .await
            .unwrap();
        let guard = client.lock(&name).await.unwrap();
        let operator = common::client().await;
        assert!(operator.force_unlock(&name).await.unwrap());
        tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .expect("the holder heard of the loss");
        drop(guard);
        client.shutdown().await;
    })
    .await;
    let lost = named(&spans, &name);
    assert_eq!(lost.len(), 1);
    assert_eq!(text(lost[0], "holdlock.outcome"), "lost");
    assert!(matches!(lost[0].status, Status::Error { .. }));
}

#[tokio::test(flavor = "current_thread")]
async fn without_hold_spans_a_hold_has_no_span() {
    let name = common::unique("otel-off");
    let spans = hold_spans_of(async {
        let client = LockClient::connect(&common::url()).await.unwrap();
        client.lock(&name).await.unwrap().unlock().await.unwrap();
        client.shutdown().await;
    })
    .await;
    assert!(named(&spans, &name).is_empty());
}
