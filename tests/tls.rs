//! TLS (`rediss://`, feature `tls-rustls`): locking over TLS with a CA made by the
//! test, and a clear refusal of a server whose certificate another CA signed.

mod common;

use std::time::Duration;

use holdlock::{LockClient, LockError};

use common::tls::{TestCa, TlsServer};

#[tokio::test(flavor = "multi_thread")]
async fn locks_work_over_tls_with_the_right_ca() {
    let ca = TestCa::new("holdlock test CA");
    let server = TlsServer::start(&ca);
    let client = LockClient::builder(server.url())
        .tls_ca_pem(ca.pem.clone())
        .build()
        .await
        .unwrap();
    let waiter = LockClient::builder(server.url())
        .tls_ca_pem(ca.pem.clone())
        .build()
        .await
        .unwrap();
    let name = common::unique("tls");
    let guard = client.lock(&name).await.unwrap();
    let nested = client.lock(&name).await.unwrap();
    assert_eq!(nested.hold_count(), 2);
    // The lock really lives on the server behind the TLS port.
    let key = common::key(&name);
    assert_eq!(server.server.query(&["EXISTS", &key]).as_deref(), Ok(":1"));
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move { waiter.lock(&name).await.unwrap().unlock().await })
    };
    drop(nested);
    guard.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiter was not woken over TLS")
        .unwrap()
        .unwrap();
    assert_eq!(server.server.query(&["EXISTS", &key]).as_deref(), Ok(":0"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connector_of_ones_own_works_too() {
    use std::sync::Arc;

    use holdlock::fred::types::config::TlsConnector;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let ca = TestCa::new("holdlock test CA");
    let server = TlsServer::start(&ca);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let client = LockClient::builder(server.url())
        .tls_connector(TlsConnector::from(config))
        .build()
        .await
        .unwrap();
    client.lock("mine").await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_signed_by_another_ca_is_refused_clearly() {
    let server = TlsServer::start(&TestCa::new("the server's CA"));
    let stranger = TestCa::new("some other CA");
    let refused = LockClient::builder(server.url())
        .tls_ca_pem(stranger.pem)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await;
    let error = refused.expect_err("connected to a server nobody vouched for");
    println!("wrong CA: {error}");
    assert!(
        matches!(&error, LockError::Tls { detail } if detail.contains("UnknownIssuer")),
        "the error does not say what is wrong: {error:?}"
    );

    // Bad CA input is rejected before connecting.
    let garbage = LockClient::builder(server.url())
        .tls_ca_pem("not a certificate")
        .build()
        .await;
    assert!(
        matches!(
            garbage,
            Err(LockError::InvalidOption {
                option: "tls_ca_pem",
                ..
            })
        ),
        "{garbage:?}"
    );
}
