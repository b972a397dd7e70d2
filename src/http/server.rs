//! A small HTTP/1.x server for four GET endpoints, on one thread of its own.
//!
//! Every connection is a task on a single-threaded executor with
//! - a hard deadline for the whole request head ([`HEAD_DEADLINE`]) and for writing the answer
//!   ([`WRITE_DEADLINE`]): a slowloris client is dropped, it never holds anything others need;
//! - a size cap on the request head ([`MAX_HEAD`]): a 1 MB header is answered 431 and dropped
//!   after 16 KiB, never buffered whole;
//! - a per-source and a global connection cap, so one host cannot use up the rest.
//!
//! Each answer carries `Connection: close`: scrapes and probes are seconds apart, so
//! keep-alive would only keep idle sockets around on a small board.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt, future};
use smol::Async;

use super::{HttpState, Method, Reply, answer};

/// How long a client has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// How long a client has to take our whole answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// The largest request head accepted.
pub const MAX_HEAD: usize = 16 * 1024;
/// Connections open at once, from everyone.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections open at once from one source address.
pub const MAX_PER_SOURCE: usize = 32;

/// Binds the listener (so a bind error surfaces at startup, before READY).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// Serves on `listener` from a thread of its own until the process exits.
pub fn serve(listener: TcpListener, state: Arc<HttpState>) -> Result<(), String> {
    let listener =
        Async::new(listener).map_err(|e| format!("cannot make the listener non-blocking: {e}"))?;
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            let ex = Rc::new(smol::LocalExecutor::new());
            smol::block_on(ex.run(accept_loop(Rc::clone(&ex), listener, state)));
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the HTTP thread: {e}"))
}

async fn accept_loop(
    ex: Rc<smol::LocalExecutor<'static>>,
    listener: Async<TcpListener>,
    state: Arc<HttpState>,
) {
    let open: Rc<RefCell<HashMap<IpAddr, usize>>> = Rc::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning, keep serving afterwards.
                log::warn!("http: accept failed: {e}");
                smol::Timer::after(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ip = peer.ip().to_canonical();
        {
            let mut open = open.borrow_mut();
            let total: usize = open.values().sum();
            let mine = open.entry(ip).or_insert(0);
            if total >= MAX_CONNECTIONS || *mine >= MAX_PER_SOURCE {
                log::debug!(
                    "http: too many connections ({total} open, {} from {ip}); dropping one",
                    *mine
                );
                continue;
            }
            *mine += 1;
        }
        let (open, state) = (Rc::clone(&open), Arc::clone(&state));
        ex.spawn(async move {
            serve_one(stream, ip, &state).await;
            let mut open = open.borrow_mut();
            if let Some(n) = open.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    open.remove(&ip);
                }
            }
        })
        .detach();
    }
}

/// What went wrong reading a request head.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    TooLarge,
    Closed,
}

async fn serve_one(mut stream: Async<TcpStream>, ip: IpAddr, state: &HttpState) {
    let head = future::or(read_head(&mut stream), async {
        smol::Timer::after(HEAD_DEADLINE).await;
        Err(HeadError::Closed)
    })
    .await;
    let (reply, method) = match head {
        Ok(head) => match parse_request_line(&head) {
            Some((method, target)) => (answer(state, &method, target, Some(ip)), method),
            None => (Reply::text(400, "bad request\n"), Method::Get),
        },
        Err(HeadError::TooLarge) => (
            Reply::text(431, "request header fields too large\n"),
            Method::Get,
        ),
        Err(HeadError::Closed) => return,
    };
    let bytes = encode(&reply, method == Method::Head);
    let _ = future::or(
        async {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.flush().await;
        },
        async {
            smol::Timer::after(WRITE_DEADLINE).await;
        },
    )
    .await;
}

/// Reads until the blank line that ends a request head; returns the head (without it).
async fn read_head(stream: &mut Async<TcpStream>) -> Result<String, HeadError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        let scan_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_blank_line(&buf[scan_from..]) {
            buf.truncate(scan_from + end);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
        if buf.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| bytes.windows(2).position(|w| w == b"\n\n"))
}

/// `GET /path HTTP/1.1` -> (method, target); None when it is not a request line.
fn parse_request_line(head: &str) -> Option<(Method, &str)> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let token = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
    if !token
        || !target.starts_with('/')
        || !version.starts_with("HTTP/1.")
        || parts.next().is_some()
    {
        return None;
    }
    Some((Method::parse(method), target))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

fn encode(reply: &Reply, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len(),
        if reply.status == 405 {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        },
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(reply.body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line("GET /healthz HTTP/1.1\r\nHost: x"),
            Some((Method::Get, "/healthz"))
        );
        assert_eq!(
            parse_request_line("HEAD /metrics HTTP/1.0"),
            Some((Method::Head, "/metrics"))
        );
        assert_eq!(
            parse_request_line("DELETE /livez HTTP/1.1"),
            Some((Method::Other, "/livez"))
        );
        assert_eq!(parse_request_line("\u{ff}\0\u{13}7"), None);
        assert_eq!(parse_request_line("GET healthz HTTP/1.1"), None);
        assert_eq!(parse_request_line("GET /a b HTTP/1.1"), None);
    }

    #[test]
    fn head_answers_carry_length_but_no_body() {
        let reply = Reply::text(200, "ok\n");
        let full = String::from_utf8(encode(&reply, false)).unwrap();
        let head = String::from_utf8(encode(&reply, true)).unwrap();
        assert!(
            full.starts_with("HTTP/1.1 200 OK\r\n") && full.ends_with("\r\n\r\nok\n"),
            "{full}"
        );
        assert!(
            head.contains("Content-Length: 3\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
    }

    #[test]
    fn blank_line_found_across_chunk_boundaries() {
        assert_eq!(find_blank_line(b"GET / HTTP/1.0\r\n\r\n"), Some(14));
        assert_eq!(find_blank_line(b"GET / HTTP/1.0\r\nHost: x\r\n"), None);
    }
}
