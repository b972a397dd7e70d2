//! A node-local list/watch proxy in the shape of OpenYurt's YurtHub and KubeEdge's
//! MetaServer: plain HTTP on this node's loopback, in front of the (TLS) fake API server,
//! authenticating upstream with the node's client certificate, so a client on loopback needs
//! no credentials of its own. Each downstream request is passed upstream as written (a bearer
//! token in it goes along, as YurtHub passes one) and the answer, a watch stream included,
//! is copied back byte for byte until either side closes. Upstream unreachable: the
//! downstream connection is closed without an answer, as a proxy without a cache would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::fake_apiserver::FakeApiServer;

/// A running proxy; stopped on drop.
pub struct LocalProxy {
    /// Where it listens (plain HTTP).
    addr: SocketAddr,
    /// Tells the accept loop to end.
    stop: Arc<AtomicBool>,
    /// Requests passed upstream so far.
    forwarded: Arc<AtomicUsize>,
    /// The accept loop.
    acceptor: Option<JoinHandle<()>>,
}

impl LocalProxy {
    /// Listens on `listen` (e.g. YurtHub's `127.0.0.1:10261`) and forwards to `upstream`
    /// over TLS with its client certificate.
    pub fn start(listen: &str, upstream: &FakeApiServer) -> LocalProxy {
        let tls = Arc::new(client_config(upstream));
        let to: SocketAddr = upstream
            .url()
            .strip_prefix("https://")
            .expect("a TLS upstream")
            .parse()
            .unwrap();
        let listener = TcpListener::bind(listen).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let (stop2, forwarded2) = (stop.clone(), forwarded.clone());
        let acceptor = std::thread::spawn(move || {
            for down in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(down) = down else { continue };
                let (tls, forwarded) = (tls.clone(), forwarded2.clone());
                std::thread::spawn(move || forward(down, to, tls, &forwarded));
            }
        });
        LocalProxy {
            addr,
            stop,
            forwarded,
            acceptor: Some(acceptor),
        }
    }

    /// `http://<listen address>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests reached the upstream through the proxy.
    pub fn forwarded(&self) -> usize {
        self.forwarded.load(Ordering::Relaxed)
    }
}

impl Drop for LocalProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// The node's identity towards the API server: the fake's CA and client certificate.
fn client_config(upstream: &FakeApiServer) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(upstream.ca_file()).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let (cert, key) = upstream.client_cert_files();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap()
}

/// One downstream connection: its request head upstream, the answer back.
fn forward(
    mut down: TcpStream,
    to: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    forwarded: &AtomicUsize,
) {
    let _ = down.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match down.read(&mut byte) {
            Ok(1) if head.len() < 64 * 1024 => head.push(byte[0]),
            _ => return,
        }
    }
    let Ok(tcp) = TcpStream::connect_timeout(&to, Duration::from_secs(2)) else {
        return;
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(tls, name).unwrap();
    let mut up = rustls::StreamOwned::new(conn, tcp);
    if up.write_all(&head).and_then(|()| up.flush()).is_err() {
        return;
    }
    forwarded.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0u8; 16 * 1024];
    loop {
        match up.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if down.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
