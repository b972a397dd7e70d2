//! The TLS algorithms the client offers: what every Kubernetes API server speaks, and no more.
//!
//! rustls' ring provider brings every algorithm it has; most of them a client of kube-apiserver
//! or k3s never uses, and each costs the aarch64 binary code (and ring's tables, the largest of
//! which, for X25519 and Ed25519, is 24 kB on its own). The provider here keeps:
//! - TLS 1.3 only (both servers speak it; Go's TLS stack has since Go 1.13), with the two
//!   AES-GCM suites (ChaCha20-Poly1305 is the third suite of TLS 1.3, which no server requires);
//! - key exchange on P-256, the group every TLS 1.3 server must support (RFC 8446, 9.1);
//! - server certificates signed with ECDSA P-256 or P-384 (k3s' CA is P-256) or RSA (kubeadm's
//!   and the managed clusters' CAs), PKCS#1 or PSS;
//! - client keys (k3s' `client_key`, kubeadm's admin key) of type ECDSA or RSA.
//!
//! Not offered: TLS 1.2, X25519, Ed25519 certificates and keys.

use std::sync::Arc;

use rustls::SignatureScheme;
use rustls::crypto::ring::{cipher_suite, kx_group, sign};
use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::SigningKey;
use webpki::ring as algs;

/// The client's crypto provider (see the module doc for what it holds).
pub fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
        ],
        kx_groups: vec![kx_group::SECP256R1],
        signature_verification_algorithms: VERIFY,
        secure_random: &System,
        key_provider: &System,
    }
}

/// Certificate signatures the client checks; the same table as rustls' ring provider, without
/// Ed25519.
static VERIFY: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        algs::ECDSA_P256_SHA256,
        algs::ECDSA_P256_SHA384,
        algs::ECDSA_P384_SHA256,
        algs::ECDSA_P384_SHA384,
        algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        algs::RSA_PKCS1_2048_8192_SHA256,
        algs::RSA_PKCS1_2048_8192_SHA384,
        algs::RSA_PKCS1_2048_8192_SHA512,
        algs::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[algs::ECDSA_P384_SHA384, algs::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[algs::ECDSA_P256_SHA256, algs::ECDSA_P384_SHA256],
        ),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[algs::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[algs::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[algs::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// The operating system's randomness, and the loader of ECDSA and RSA client keys.
#[derive(Debug)]
struct System;

impl SecureRandom for System {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        use ring::rand::SecureRandom as _;
        ring::rand::SystemRandom::new()
            .fill(buf)
            .map_err(|_| GetRandomFailed)
    }
}

impl KeyProvider for System {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        if let Ok(key) = sign::any_ecdsa_type(&key_der) {
            return Ok(key);
        }
        match sign::RsaSigningKey::new(&key_der) {
            Ok(key) => Ok(Arc::new(key)),
            Err(_) => Err(rustls::Error::General(
                "the client key is neither ECDSA nor RSA".into(),
            )),
        }
    }
}
