//! TLS settings for `rediss://` (feature `tls-rustls`): fred's rustls support with the
//! `ring` provider, and a root store built from PEM certificates.

use std::sync::Arc;

use fred::types::config::{Config, TlsConnector};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::client::LockClientBuilder;
use crate::error::{LockError, Result};

/// How a client's TLS connections are set up.
#[derive(Clone, Debug)]
pub(crate) enum TlsSetting {
    /// Trust exactly these PEM-encoded CA certificates.
    CaPem(Vec<u8>),
    /// A connector built by the caller.
    Connector(TlsConnector),
}

impl LockClientBuilder {
    /// Connect with TLS, trusting only the CA certificates in `pem` (one or more
    /// `-----BEGIN CERTIFICATE-----` blocks) instead of the system's roots. Turns TLS
    /// on even for a `redis://` URL. The server's certificate must name the host
    /// of the URL (for `127.0.0.1`, an IP address entry).
    ///
    /// Requires the `tls-rustls` feature.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox() -> holdlock::Result<()> {
    /// let ca = std::fs::read("/etc/redis/ca.crt").unwrap();
    /// let client = holdlock::LockClient::builder("rediss://redis.internal:6380")
    ///     .tls_ca_pem(ca)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls = Some(TlsSetting::CaPem(pem.into()));
        self
    }

    /// Connect with TLS through `connector` (for client certificates or other rustls
    /// settings), instead of the system's roots. Turns TLS on even for a `redis://` URL.
    ///
    /// Requires the `tls-rustls` feature.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn dox(rustls_config: rustls::ClientConfig) -> holdlock::Result<()> {
    /// use holdlock::fred::types::config::TlsConnector;
    /// let client = holdlock::LockClient::builder("rediss://redis.internal:6380")
    ///     .tls_connector(TlsConnector::from(rustls_config))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_connector(mut self, connector: TlsConnector) -> Self {
        self.tls = Some(TlsSetting::Connector(connector));
        self
    }
}

/// Puts the builder's TLS setting (if any) into fred's config.
pub(crate) fn apply(setting: Option<&TlsSetting>, config: &mut Config) -> Result<()> {
    let connector = match setting {
        None => return Ok(()),
        Some(TlsSetting::Connector(connector)) => connector.clone(),
        Some(TlsSetting::CaPem(pem)) => connector_for(pem)?,
    };
    config.tls = Some(connector.into());
    Ok(())
}

/// A rustls connector (ring provider) that trusts exactly the certificates in `pem`.
fn connector_for(pem: &[u8]) -> Result<TlsConnector> {
    let invalid = |reason: String| LockError::InvalidOption {
        option: "tls_ca_pem",
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem) {
        let certificate = certificate.map_err(|error| invalid(format!("bad PEM: {error}")))?;
        roots
            .add(certificate)
            .map_err(|error| invalid(format!("unusable CA certificate: {error}")))?;
    }
    if roots.is_empty() {
        return Err(invalid("no certificate found in the PEM data".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| invalid(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(config))
}
