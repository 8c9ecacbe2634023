//! TLS settings for `rediss://` (feature `tls-rustls`): fred's rustls support with the
//! `ring` provider, and a root store built from PEM certificates.

use std::sync::Arc;

use fred::types::config::{Config, TlsConnector};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::{LockError, Result};

/// How a client's TLS connections are set up.
#[derive(Clone, Debug)]
pub(crate) enum TlsSetting {
    /// Trust exactly these PEM-encoded CA certificates.
    CaPem(Vec<u8>),
    /// A connector built by the caller.
    Connector(TlsConnector),
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
