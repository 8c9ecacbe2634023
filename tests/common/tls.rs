//! A redis-server that speaks TLS, with a CA and a server certificate made for the test.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use super::RedisServer;
use super::server::free_port;

/// A certificate authority made for one test.
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate, PEM-encoded: what a client must trust.
    pub pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        Self { params, key, pem }
    }

    /// A certificate for 127.0.0.1 and localhost signed by this CA: (cert, key) PEM.
    fn server_certificate(&self) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A redis-server with a plain port (for the harness) and a TLS port whose
/// certificate `ca` signed. Clients need no certificate of their own.
pub struct TlsServer {
    pub server: RedisServer,
    pub tls_port: u16,
}

impl TlsServer {
    pub fn start(ca: &TestCa) -> Self {
        let dir =
            std::env::temp_dir().join(format!("holdlock-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = ca.server_certificate();
        let write = |name: &str, pem: &str| -> PathBuf {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        let files = [
            write("server.crt", &cert),
            write("server.key", &key),
            write("ca.crt", &ca.pem),
        ];
        let tls_port = free_port().unwrap();
        let server = RedisServer::start_with(|_| {
            let [cert, key, ca] = files.each_ref().map(|f| f.to_str().unwrap().to_owned());
            vec![
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                cert,
                "--tls-key-file".into(),
                key,
                "--tls-ca-cert-file".into(),
                ca,
                "--tls-auth-clients".into(),
                "no".into(),
            ]
        });
        Self { server, tls_port }
    }

    /// The `rediss://` URL of the TLS port.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }
}
