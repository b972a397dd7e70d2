//! The fake's certificates, made at test time: a CA, a server certificate for 127.0.0.1 and
//! a client certificate (k3s-style authentication), all signed by the CA.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The PEM files a client needs, and the server's TLS configuration.
pub struct Pki {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// A client certificate the server accepts, PEM.
    pub client_cert_pem: String,
    /// Its key, PEM.
    pub client_key_pem: String,
    /// The server side.
    pub server: Arc<rustls::ServerConfig>,
}

/// A fresh CA and the certificates signed by it; the server's names 127.0.0.1, localhost
/// and `names`.
pub fn make_pki(names: &[&str]) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Distinct subjects: with rcgen's one default name for all, OpenSSL (and so Python's
    // client) takes the server certificate for a self-signed one.
    ca_params.distinguished_name = name("edgenetd test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();

    let server_key = KeyPair::generate().unwrap();
    let mut sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    sans.extend(names.iter().map(|n| n.to_string()));
    let mut server_params = CertificateParams::new(sans).unwrap();
    server_params.distinguished_name = name("fake-apiserver");
    let server_cert = server_params.signed_by(&server_key, &ca, &ca_key).unwrap();

    let client_key = KeyPair::generate().unwrap();
    let mut client_params = CertificateParams::new(vec!["edgenetd".to_string()]).unwrap();
    client_params.distinguished_name = name("edgenetd");
    let client_cert = client_params.signed_by(&client_key, &ca, &ca_key).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let chain: Vec<CertificateDer<'static>> = vec![server_cert.der().clone()];
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        client_cert_pem: client_cert.pem(),
        client_key_pem: client_key.serialize_pem(),
        server: Arc::new(server),
    }
}

/// A subject with only a common name.
fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}
