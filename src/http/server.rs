//! A small HTTP/1.x server for four GET endpoints, on one thread of its own.
//!
//! Every connection is a task on a single-threaded executor with a hard deadline for its
//! request head and for writing the answer, and a size cap on the head (`connection`), so a
//! slowloris client is dropped and a 1 MB header is answered 431 after 16 KiB, never buffered
//! whole. Slots are handed out by `admission`: per-source and global caps, a reserve for
//! loopback and `metrics_allow` sources, and eviction of a connection still sending its head
//! when full (held open until its head deadline, see `held`; the accept loop waits when the
//! held queue is full of young sockets). Sources outside `metrics_allow` are told 403
//! without taking a slot.
//!
//! Each answer carries `Connection: close`: scrapes and probes are seconds apart, so
//! keep-alive would only keep idle sockets around on a small board.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use ipnet::IpNet;
use smol::Async;

use super::admission::{Admission, LIMITS};
use super::connection::{serve_admitted, serve_forbidden};
use super::{HttpState, Method, Reply};

/// Accepts in a row before the loop lets the connection tasks and timers run: while
/// connections keep arriving, `accept` never has to wait, so without this a flood would
/// starve every deadline.
pub const ACCEPTS_PER_YIELD: u32 = 8;
/// Connections from sources outside `metrics_allow` being told 403 at once; more are closed.
pub const MAX_FORBIDDEN: usize = 16;

/// The listener's accept backlog. std listens with 128: a burst of a thousand connections
/// (which the accept loop takes in turns with the connection tasks) overflows that, and the
/// kernel then drops every SYN, a health probe's too, which its client resends only after 1 s.
pub const LISTEN_BACKLOG: i32 = 1024;

/// Binds the listener (so a bind error surfaces at startup, before READY).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    crate::sys::set_listen_backlog(&listener, LISTEN_BACKLOG)?;
    Ok(listener)
}

/// Serves on `listener` from a thread of its own until the process exits, and on the
/// health-check node ports of `state.health_ports` (on the same thread and executor).
pub fn serve(listener: TcpListener, state: Arc<HttpState>) -> Result<(), String> {
    let listener =
        Async::new(listener).map_err(|e| format!("cannot make the listener non-blocking: {e}"))?;
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            let ex = Rc::new(smol::LocalExecutor::new());
            let ports = super::health_ports::serve(
                Rc::clone(&ex),
                Arc::clone(&state.health_ports),
                Arc::clone(&state.liveness),
            );
            ex.spawn(ports).detach();
            let table = Rc::new(RefCell::new(Admission::new(LIMITS)));
            ex.spawn(super::held::reap(Rc::clone(&table))).detach();
            smol::block_on(ex.run(accept_loop(Rc::clone(&ex), listener, state, table)));
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the HTTP thread: {e}"))
}

/// Where connections come from: the listener, or a test's endless supply.
pub(crate) trait Accept {
    /// The next connection and its peer.
    fn next(&self) -> impl Future<Output = io::Result<(Async<TcpStream>, SocketAddr)>>;
}

impl Accept for Async<TcpListener> {
    fn next(&self) -> impl Future<Output = io::Result<(Async<TcpStream>, SocketAddr)>> {
        self.accept()
    }
}

/// What a listener answers: who may connect, and the answer to a request.
pub(crate) trait Site: Send + Sync + 'static {
    /// Sources allowed in; None = everyone.
    fn allow(&self) -> Option<&[IpNet]>;
    /// The answer to `method` `path` from `peer` (canonical: v4-mapped addresses as IPv4).
    fn answer(&self, method: &Method, path: &str, peer: IpAddr) -> Reply;
}

impl Site for HttpState {
    fn allow(&self) -> Option<&[IpNet]> {
        self.allow.as_deref()
    }

    fn answer(&self, method: &Method, path: &str, peer: IpAddr) -> Reply {
        super::answer(self, method, path, Some(peer))
    }
}

/// How a source is treated at accept.
#[derive(Debug, PartialEq, Eq)]
enum Class {
    /// Outside `metrics_allow`: 403, no slot.
    Forbidden,
    /// Loopback or inside `metrics_allow`: may use the reserved slots.
    Trusted,
    /// Anyone else (only when `metrics_allow` is unset).
    Other,
}

fn classify(ip: IpAddr, allow: Option<&[IpNet]>) -> Class {
    match allow {
        Some(allow) if allow.iter().any(|net| net.contains(&ip)) => Class::Trusted,
        Some(_) => Class::Forbidden,
        None if ip.is_loopback() => Class::Trusted,
        None => Class::Other,
    }
}

/// Accepts on `listener` and answers with `site`, the slots handed out from `table`.
pub(crate) async fn accept_loop<S: Site>(
    ex: Rc<smol::LocalExecutor<'static>>,
    listener: impl Accept,
    site: Arc<S>,
    table: Rc<RefCell<Admission>>,
) {
    let forbidden = Rc::new(Cell::new(0usize));
    let mut streak = 0;
    loop {
        // Every held socket is young and the queue is full: wait rather than close one
        // sooner than `held::MIN_LIFE` after its client connected.
        let wait = table.borrow().held.accept_after();
        if let Some(at) = wait.filter(|at| *at > std::time::Instant::now()) {
            smol::Timer::at(at).await;
        }
        let accepted = listener.next().await;
        streak += 1;
        if streak >= ACCEPTS_PER_YIELD {
            streak = 0;
            future::yield_now().await;
        }
        let (stream, peer) = match accepted {
            Ok(c) => c,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning, keep serving afterwards.
                log::warn!("http: accept failed: {e}");
                smol::Timer::after(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ip = peer.ip().to_canonical();
        let class = classify(ip, site.allow());
        if class == Class::Forbidden {
            if forbidden.get() < MAX_FORBIDDEN {
                forbidden.set(forbidden.get() + 1);
                let forbidden = Rc::clone(&forbidden);
                ex.spawn(async move {
                    serve_forbidden(stream).await;
                    forbidden.set(forbidden.get() - 1);
                })
                .detach();
            }
            continue;
        }
        let Some(ticket) = table.borrow_mut().admit(ip, class == Class::Trusted) else {
            log::debug!("http: every slot is busy answering; dropping a connection from {ip}");
            continue;
        };
        let (table, site) = (Rc::clone(&table), Arc::clone(&site));
        ex.spawn(async move { serve_admitted(stream, ip, &*site, table, ticket).await })
            .detach();
    }
}

#[cfg(test)]
mod tests;
