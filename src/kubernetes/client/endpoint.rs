//! Where the API server is and how to prove who we are; opens one connection, TLS or (to a
//! node-local proxy on loopback) plain TCP.
//!
//! Every file is read at each connect: projected service-account tokens rotate, and so do
//! k3s client certificates, so a long-running daemon must never keep a stale copy.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::TlsConnector;
use futures_rustls::client::TlsStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use smol::net::TcpStream;

use super::error::Error;

/// How the client authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// No credentials (only for servers that allow anonymous reads).
    None,
    /// `Authorization: Bearer <token>`, the token read from this file at each connect.
    TokenFile(PathBuf),
    /// A TLS client certificate and its key, PEM (k3s from outside the cluster).
    ClientCert {
        /// The certificate chain, PEM.
        cert: PathBuf,
        /// The private key, PEM.
        key: PathBuf,
    },
}

/// How the bytes travel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// TLS, the server's certificate checked against this cluster CA (PEM), the only roots
    /// trusted.
    Tls {
        /// The CA file.
        ca_file: PathBuf,
    },
    /// Plain TCP: only to a node-local proxy on loopback (the config allows no other host).
    Plain,
}

/// One API server: address, transport, credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP address, as the server certificate names it (no brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// TLS with its trust anchor, or plain.
    pub transport: Transport,
    /// The credentials.
    pub auth: Auth,
}

/// An open connection to the API server: one type for both transports, so the HTTP code
/// above it is written once.
pub enum Stream {
    /// Over TLS (boxed: the TLS state is large, the plain stream small).
    Tls(Box<TlsStream<TcpStream>>),
    /// Plain TCP.
    Plain(TcpStream),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
        }
    }
}

impl Endpoint {
    /// An endpoint from a server URL such as `https://10.0.0.1:6443` or `https://[fd00::1]`
    /// (port 443 when absent) with its CA, or `http://127.0.0.1:10550` (port 80 when absent)
    /// without one: `https` carries credentials anywhere, `http` only to loopback, which the
    /// config checks (not repeated here).
    pub fn from_url(server: &str, ca_file: Option<&Path>, auth: Auth) -> Result<Endpoint, Error> {
        let bad = |why: &str| Error::Config(format!("server {server:?}: {why}"));
        let (rest, transport, default_port) = match (server.split_once("://"), ca_file) {
            (Some(("https", rest)), Some(ca)) => (
                rest,
                Transport::Tls {
                    ca_file: ca.to_path_buf(),
                },
                443,
            ),
            (Some(("http", rest)), None) => (rest, Transport::Plain, 80),
            (Some(("https", _)), None) => return Err(bad("https needs a CA file")),
            (Some(("http", _)), Some(_)) => return Err(bad("http has no use for a CA file")),
            _ => return Err(bad("must start with https:// or http://")),
        };
        let authority = rest.trim_end_matches('/');
        if authority.contains('/') {
            return Err(bad("must not have a path"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, tail) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            (host, tail.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p.parse().map_err(|_| bad("bad port"))?,
            None => default_port,
        };
        Ok(Endpoint {
            host: host.to_string(),
            port,
            transport,
            auth,
        })
    }

    /// The `Host:` header value.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The bearer token to send on the next request, read now; `None` without token auth.
    pub fn bearer_token(&self) -> Result<Option<String>, Error> {
        match &self.auth {
            Auth::TokenFile(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Error::Config(format!("token file {}: {e}", path.display())))?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(Error::Config(format!(
                        "token file {} is empty",
                        path.display()
                    )));
                }
                Ok(Some(token.to_string()))
            }
            _ => Ok(None),
        }
    }

    /// Connects and, over TLS, completes the handshake (the caller bounds it in time).
    pub async fn connect(&self) -> Result<Stream, Error> {
        let ca_file = match &self.transport {
            Transport::Tls { ca_file } => ca_file,
            Transport::Plain => {
                let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
                tcp.set_nodelay(true)?;
                return Ok(Stream::Plain(tcp));
            }
        };
        let config = self.tls_config(ca_file)?;
        let name = ServerName::try_from(self.host.clone())
            .map_err(|e| Error::Config(format!("server name {:?}: {e}", self.host)))?;
        let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
        tcp.set_nodelay(true)?;
        let tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await?;
        Ok(Stream::Tls(Box::new(tls)))
    }

    /// The rustls configuration from the files as they are now.
    fn tls_config(&self, ca_file: &Path) -> Result<rustls::ClientConfig, Error> {
        let provider = Arc::new(super::tls::provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in read_certs(ca_file)? {
            roots
                .add(cert)
                .map_err(|e| Error::Config(format!("ca_file {}: {e}", ca_file.display())))?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        match &self.auth {
            Auth::ClientCert { cert, key } => {
                let chain = read_certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| Error::Config(format!("client_key {}: {e}", key.display())))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| Error::Config(format!("client certificate: {e}")))
            }
            _ => Ok(builder.with_no_client_auth()),
        }
    }
}

/// Every certificate of a PEM file; none is an error (an empty trust store trusts nothing).
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let bad = |e: &dyn std::fmt::Display| Error::Config(format!("{}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&e))?;
    if certs.is_empty() {
        return Err(bad(&"no certificate in the file"));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_parse_with_and_without_port() {
        let ca = Some(Path::new("/ca.pem"));
        let e = Endpoint::from_url("https://10.0.0.1:6443", ca, Auth::None).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("10.0.0.1", 6443));
        let tls = Transport::Tls {
            ca_file: PathBuf::from("/ca.pem"),
        };
        assert_eq!(e.transport, tls);
        let e = Endpoint::from_url("https://[fd00::1]/", ca, Auth::None).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("fd00::1", 443));
        assert_eq!(e.authority(), "[fd00::1]:443");
        let e = Endpoint::from_url("https://api.example:8443", ca, Auth::None).unwrap();
        assert_eq!(e.authority(), "api.example:8443");
        assert!(Endpoint::from_url("http://10.0.0.1", ca, Auth::None).is_err());
        assert!(Endpoint::from_url("https://10.0.0.1", None, Auth::None).is_err());
        assert!(Endpoint::from_url("https://10.0.0.1/api", ca, Auth::None).is_err());
        assert!(Endpoint::from_url("https://10.0.0.1:x", ca, Auth::None).is_err());
        assert!(Endpoint::from_url("ftp://10.0.0.1", ca, Auth::None).is_err());
    }

    #[test]
    fn a_plain_url_is_a_plain_endpoint_on_port_80_unless_told() {
        let e = Endpoint::from_url("http://127.0.0.1:10550", None, Auth::None).unwrap();
        assert_eq!(
            (e.authority().as_str(), &e.transport),
            ("127.0.0.1:10550", &Transport::Plain)
        );
        let e = Endpoint::from_url("http://[::1]", None, Auth::None).unwrap();
        assert_eq!(e.authority(), "[::1]:80");
    }
}
