//! A fake Kubernetes API server for the tests: the real protocol over TLS on 127.0.0.1, or
//! over plain HTTP there, as a node-local proxy (KubeEdge's MetaServer, OpenYurt's YurtHub)
//! serves it.
//!
//! It serves paged lists with continue tokens (each paged list is a consistent snapshot),
//! streamed lists (`sendInitialEvents`, KEP-3157; or refuses them, or ignores them, as older
//! servers do),
//! resourceVersions from one global counter, label selectors (equality and set-based), watch
//! streams in chunked encoding whose chunks split event lines (`chunk_size`), bookmarks,
//! `timeoutSeconds`, a bounded history (a watch from before it gets 410, as an ERROR event or
//! as HTTP 410), injected faults (any status with `Retry-After`, a hung connection, a watch
//! that hangs after its head), dropped connections, stop and restart on the same port (the
//! objects survive, like etcd's), single objects read, created and updated (Leases: 409 on a
//! stale resourceVersion, 403 when told to refuse writes), a log of every request so a test
//! can prove what the client asked for, and the bytes of every connection.

mod selector;
mod serve;
mod state;
mod tls;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use super::scratch::ScratchDir;
use serve::Shared;
pub use state::{Fault, On, Request, StreamedLists, Traffic};

/// A running (or stopped) fake API server.
pub struct FakeApiServer {
    /// The state, shared with the connection threads.
    shared: Arc<Shared>,
    /// Where it listens (kept across restarts).
    addr: SocketAddr,
    /// The server's TLS configuration; `None` serves plain HTTP (a node-local proxy's
    /// shape: KubeEdge's MetaServer, OpenYurt's YurtHub).
    tls: Option<Arc<rustls::ServerConfig>>,
    /// The accept thread, while running.
    acceptor: Option<JoinHandle<()>>,
    /// The CA, client certificate and key files.
    dir: ScratchDir,
}

impl FakeApiServer {
    /// Starts a fake on an ephemeral loopback port with fresh certificates.
    pub fn start() -> FakeApiServer {
        FakeApiServer::start_on("127.0.0.1:0", true)
    }

    /// Starts a fake that speaks plain HTTP on an ephemeral loopback port, as a node-local
    /// list/watch proxy does (the certificate files are made all the same, unused).
    pub fn start_plain() -> FakeApiServer {
        FakeApiServer::start_on("127.0.0.1:0", false)
    }

    /// Starts a plain HTTP fake on `addr`, e.g. MetaServer's `127.0.0.1:10550` (only in a
    /// test's own network namespace, whose loopback no one else uses).
    pub fn start_plain_at(addr: &str) -> FakeApiServer {
        FakeApiServer::start_on(addr, false)
    }

    /// Starts a TLS fake on `ip` (an ephemeral port) in the `ip netns` namespace `netns`: a
    /// control plane the router reaches over a link, so that its firewall and routes stand
    /// in the way (its own loopback they never do). Its certificate names `ip`.
    pub fn start_in_netns(netns: &str, ip: &str) -> FakeApiServer {
        let (path, bind) = (format!("/run/netns/{netns}"), format!("{ip}:0"));
        // Made by a thread that enters the namespace and ends: the socket stays in it.
        let listener = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let ns = std::fs::File::open(&path).unwrap();
            // SAFETY: setns on this thread only, with a valid namespace descriptor.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            TcpListener::bind(&bind).unwrap()
        })
        .join()
        .unwrap();
        FakeApiServer::start_with(listener, true, &[ip])
    }

    /// Starts a fake on `addr`, over TLS when `over_tls`.
    fn start_on(addr: &str, over_tls: bool) -> FakeApiServer {
        FakeApiServer::start_with(TcpListener::bind(addr).unwrap(), over_tls, &[])
    }

    /// Serves on `listener`, over TLS when `over_tls` with a certificate that also names
    /// `names`.
    fn start_with(listener: TcpListener, over_tls: bool, names: &[&str]) -> FakeApiServer {
        let pki = tls::make_pki(names);
        let dir = ScratchDir::with_files(
            "fake-apiserver",
            &[
                ("ca.pem", pki.ca_pem.as_str()),
                ("client.pem", pki.client_cert_pem.as_str()),
                ("client-key.pem", pki.client_key_pem.as_str()),
            ],
        );
        let shared = Arc::new(Shared {
            state: Mutex::new(state::State {
                window: 1000,
                chunk_size: 1 << 20,
                ..Default::default()
            }),
            cond: Condvar::new(),
            bytes_in: Default::default(),
            bytes_out: Default::default(),
        });
        let addr = listener.local_addr().unwrap();
        let mut fake = FakeApiServer {
            shared,
            addr,
            tls: over_tls.then_some(pki.server),
            acceptor: None,
            dir,
        };
        fake.spawn(listener);
        fake
    }

    /// Runs the accept loop on its own thread.
    fn spawn(&mut self, listener: TcpListener) {
        let shared = self.shared.clone();
        let tls = self.tls.clone();
        self.acceptor = Some(std::thread::spawn(move || {
            for tcp in listener.incoming() {
                if shared.lock().stopped {
                    return;
                }
                let Ok(tcp) = tcp else { continue };
                let (shared, tls) = (shared.clone(), tls.clone());
                std::thread::spawn(move || serve::serve(shared, tcp, tls));
            }
        }));
    }

    /// `https://127.0.0.1:<port>` (`http://` for a plain fake).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA a client needs: the CA file over TLS, none for a plain fake.
    pub fn client_ca(&self) -> Option<PathBuf> {
        self.tls.is_some().then(|| self.ca_file())
    }

    /// The CA certificate file (PEM).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A client certificate the fake accepts, and its key (PEM files).
    pub fn client_cert_files(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.path().join("client.pem"),
            self.dir.path().join("client-key.pem"),
        )
    }

    /// A scratch path next to the certificates (for token files).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Changes the state and wakes every watch.
    fn with<R>(&self, f: impl FnOnce(&mut state::State) -> R) -> R {
        let r = f(&mut self.shared.lock());
        self.shared.cond.notify_all();
        r
    }

    /// Creates or replaces `obj` (its `metadata.namespace`/`name`) in `resource`; returns the
    /// resourceVersion written.
    pub fn apply(&self, resource: &str, obj: Value) -> u64 {
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        self.with(|st| {
            st.write(resource, Some(obj), (resource.to_string(), ns, name));
            st.rv
        })
    }

    /// Deletes an object; returns the resourceVersion written.
    pub fn delete(&self, resource: &str, namespace: &str, name: &str) -> u64 {
        self.with(|st| {
            let key = (
                resource.to_string(),
                namespace.to_string(),
                name.to_string(),
            );
            assert!(st.objects.contains_key(&key), "no {key:?} to delete");
            st.write(resource, None, key);
            st.rv
        })
    }

    /// The last resourceVersion written.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// Forgets the history: a watch from any version before now gets 410.
    pub fn compact(&self) {
        self.with(|st| {
            st.history.clear();
            st.oldest_rv = st.rv;
        });
    }

    /// Answers too-old watches with HTTP 410 (true) or with an ERROR event in a 200 stream.
    pub fn set_gone_as_http(&self, on: bool) {
        self.with(|st| st.gone_as_http = on);
    }

    /// Expires every continue token (the next page of a paged list gets 410).
    pub fn expire_continue_tokens(&self) {
        self.with(|st| st.snapshots.clear());
    }

    /// Answers every request for `resource` with 404 (an API server without that kind).
    pub fn set_absent(&self, resource: &str) {
        self.with(|st| {
            st.absent.insert(resource.to_string());
        });
    }

    /// Serves `fault` to the next request that `on` selects.
    pub fn inject(&self, on: On, fault: Fault) {
        self.with(|st| st.faults.push_back((on, fault)));
    }

    /// Requires `Authorization: Bearer <token>` (or a client certificate).
    pub fn require_token(&self, token: &str) {
        self.with(|st| st.token = Some(token.to_string()));
    }

    /// Watch streams write chunks of at most `size` bytes.
    pub fn set_chunk_size(&self, size: usize) {
        self.with(|st| st.chunk_size = size);
    }

    /// Answers streamed lists as `mode` says (served by default).
    pub fn set_streamed_lists(&self, mode: StreamedLists) {
        self.with(|st| st.streamed_lists = mode);
    }

    /// Watches that allow bookmarks get one every `every` (None: never).
    pub fn set_bookmarks(&self, every: Option<Duration>) {
        self.with(|st| st.bookmark_every = every);
    }

    /// Ends every open watch and hung connection abruptly, as a broken network would.
    pub fn drop_connections(&self) {
        self.with(|st| st.generation += 1);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().log.clone()
    }

    /// Answers creates and updates with 403 Forbidden (true), or serves them (false).
    pub fn refuse_writes(&self, on: bool) {
        self.with(|st| st.refuse_writes = on);
    }

    /// The object `resource` `namespace/name` now, if any.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = (
            resource.to_string(),
            namespace.to_string(),
            name.to_string(),
        );
        self.shared.lock().objects.get(&key).cloned()
    }

    /// Bytes received and sent on every connection so far (TLS included), as they flowed.
    pub fn bytes(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        (
            self.shared.bytes_in.load(Ordering::Relaxed),
            self.shared.bytes_out.load(Ordering::Relaxed),
        )
    }

    /// Every connection that has ended, with its request and its bytes.
    pub fn connections(&self) -> Vec<Traffic> {
        self.shared.lock().connections.clone()
    }

    /// Stops listening and drops every connection; the objects are kept.
    pub fn stop(&mut self) {
        self.with(|st| st.stopped = true);
        // Wakes the blocking accept so the thread sees `stopped`.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }

    /// Listens again on the same address.
    pub fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).unwrap();
        self.with(|st| st.stopped = false);
        self.spawn(listener);
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if self.acceptor.is_some() {
            self.stop();
        }
    }
}
