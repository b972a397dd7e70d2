//! One connection of the fake: TLS (or plain HTTP), one request, then a list page, a watch stream, one
//! object (read, created or updated, with resourceVersion conflicts), an error or a fault.
//! Blocking code on a thread per connection: the fake must stay simple enough to trust. Every
//! byte on the wire is counted (for the benchmark's API-server-side cost).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::selector::Selector;
use super::state::{
    Fault, Request, State, StreamedLists, Traffic, labels_of, namespace_of, query_bool,
};

/// The state and the condition variable watches wait on.
pub struct Shared {
    /// The state.
    pub state: Mutex<State>,
    /// Notified on every change, stop and drop.
    pub cond: Condvar,
    /// Bytes received on every connection so far, counted as they come.
    pub bytes_in: AtomicU64,
    /// Bytes sent on every connection so far.
    pub bytes_out: AtomicU64,
}

/// A connection's socket, counting its bytes both ways.
pub struct Counted {
    /// The socket.
    pub tcp: TcpStream,
    /// Where the totals go.
    shared: Arc<Shared>,
    /// This connection's traffic, recorded when it ends.
    traffic: Traffic,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.traffic.bytes_in += n as u64;
        self.shared.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.tcp.write(buf)?;
        self.traffic.bytes_out += n as u64;
        self.shared.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let traffic = std::mem::replace(
            &mut self.traffic,
            Traffic {
                method: String::new(),
                path: String::new(),
                bytes_in: 0,
                bytes_out: 0,
            },
        );
        self.shared.lock().connections.push(traffic);
    }
}

impl Shared {
    /// Locks the state.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One connection, over TLS or plain TCP (a node-local proxy's shape): one type, so the
/// protocol below is written once.
enum Wire {
    /// TLS (boxed: its state is large).
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, Counted>>),
    /// Plain HTTP.
    Plain(Counted),
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Wire::Tls(s) => s.read(buf),
            Wire::Plain(s) => s.read(buf),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Wire::Tls(s) => s.write(buf),
            Wire::Plain(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Wire::Tls(s) => s.flush(),
            Wire::Plain(s) => s.flush(),
        }
    }
}

impl Wire {
    /// The counted socket underneath.
    fn counted(&mut self) -> &mut Counted {
        match self {
            Wire::Tls(s) => &mut s.sock,
            Wire::Plain(s) => s,
        }
    }

    /// Ends the answer properly: TLS's close_notify (plain TCP has none; the close does).
    fn close_notify(&mut self) {
        if let Wire::Tls(s) = self {
            s.conn.send_close_notify();
        }
    }

    /// Closes the socket abruptly, as a broken connection would.
    fn shutdown(&mut self) {
        let _ = self.counted().tcp.shutdown(std::net::Shutdown::Both);
    }

    /// A client certificate was presented.
    fn has_client_cert(&self) -> bool {
        match self {
            Wire::Tls(s) => s.conn.peer_certificates().is_some_and(|c| !c.is_empty()),
            Wire::Plain(_) => false,
        }
    }
}

/// One request as read.
struct Incoming {
    /// `GET`, `POST`, `PUT`, ...
    method: String,
    /// The path without the query.
    path: String,
    /// The query, decoded.
    query: BTreeMap<String, String>,
    /// The `Authorization` header.
    authorization: Option<String>,
    /// The body (`Content-Length` bytes).
    body: Vec<u8>,
}

/// What a request asks for.
struct Target {
    /// The resource.
    resource: String,
    /// The namespace from the path, if any.
    namespace: Option<String>,
    /// The query.
    query: BTreeMap<String, String>,
    /// The parsed labelSelector.
    selector: Selector,
    /// The fieldSelector's requirements (as the API server serves them for every kind).
    fields: Vec<FieldRequirement>,
    /// The object's name, for a request on one object.
    name: Option<String>,
}

/// `metadata.name` or `metadata.namespace` is (`=`, `==`), or is not (`!=`), a value.
type FieldRequirement = (String, bool, String);

/// Serves one connection to the end.
pub fn serve(shared: Arc<Shared>, tcp: TcpStream, tls: Option<Arc<rustls::ServerConfig>>) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let counted = Counted {
        tcp,
        shared: shared.clone(),
        traffic: Traffic {
            method: String::new(),
            path: String::new(),
            bytes_in: 0,
            bytes_out: 0,
        },
    };
    let mut stream = match tls {
        Some(tls) => match rustls::ServerConnection::new(tls) {
            Ok(conn) => Wire::Tls(Box::new(rustls::StreamOwned::new(conn, counted))),
            Err(_) => return,
        },
        None => Wire::Plain(counted),
    };
    let Some(Incoming {
        method,
        path,
        query,
        authorization,
        body,
    }) = read_request(&mut stream)
    else {
        return;
    };
    stream.counted().traffic.method = method.clone();
    stream.counted().traffic.path = path.clone();
    let client_cert = stream.has_client_cert();
    let watch = query_bool(&query, "watch");
    let streamed = watch && query_bool(&query, "sendInitialEvents");
    let (fault, token, streamed_lists) = {
        let mut st = shared.lock();
        (
            st.take_fault(watch && !streamed),
            st.token.clone(),
            st.streamed_lists,
        )
    };
    let log = |code: u16| {
        shared.lock().log.push(Request {
            path: path.clone(),
            query: query.clone(),
            at: Instant::now(),
            authorization: authorization.clone(),
            code,
            method: method.clone(),
        })
    };
    let authorized = match &token {
        None => true,
        Some(t) => client_cert || authorization.as_deref() == Some(&format!("Bearer {t}")),
    };
    if !authorized {
        log(401);
        return status(&mut stream, 401, "Unauthorized", None);
    }
    match fault {
        Some(Fault::Status { code, retry_after }) => {
            log(code);
            return status(&mut stream, code, "injected", retry_after);
        }
        Some(Fault::Hang) => {
            log(0);
            return hang(&shared);
        }
        Some(Fault::HangAfterHead) => {
            log(200);
            let _ = stream.write_all(WATCH_HEAD);
            let _ = stream.flush();
            return hang(&shared);
        }
        Some(Fault::Delay(d)) => std::thread::sleep(d),
        Some(Fault::EmptyWatch) => {
            log(200);
            if stream.write_all(WATCH_HEAD).is_ok() {
                end_chunks(&mut stream);
            }
            return;
        }
        Some(Fault::WatchGoneEvent) if watch => {
            log(200);
            return gone_event(&mut stream, &shared);
        }
        _ => {}
    }
    let target = match parse_target(&path, query.clone()) {
        Ok(t) if shared.lock().absent.contains(&t.resource) => {
            log(404);
            return status(
                &mut stream,
                404,
                "the server could not find the requested resource",
                None,
            );
        }
        Ok(t) => t,
        Err((code, msg)) => {
            log(code);
            return status(&mut stream, code, &msg, None);
        }
    };
    if method != "GET" || target.name.is_some() {
        return object(&mut stream, &shared, &method, &target, &body, log);
    }
    if streamed {
        let valid = target
            .query
            .get("resourceVersionMatch")
            .is_some_and(|m| m == "NotOlderThan")
            && query_bool(&target.query, "allowWatchBookmarks");
        match streamed_lists {
            StreamedLists::Rejected => {
                log(422);
                status(
                    &mut stream,
                    422,
                    "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                    None,
                )
            }
            StreamedLists::Served if !valid => {
                log(422);
                status(
                    &mut stream,
                    422,
                    "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
                    None,
                )
            }
            StreamedLists::Served => watch_stream(&mut stream, &shared, &target, true, log),
            StreamedLists::Ignored => watch_stream(&mut stream, &shared, &target, false, log),
        }
    } else if watch {
        watch_stream(&mut stream, &shared, &target, false, log);
    } else {
        list(&mut stream, &shared, &target, log);
    }
}

/// Reads the request: method, path, decoded query, Authorization and the body.
fn read_request(stream: &mut Wire) -> Option<Incoming> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(head_len)) = req.parse(&buf) {
            let target = req.path?.to_string();
            let method = req.method?.to_string();
            let header = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).to_string())
            };
            let auth = header("authorization");
            let length: usize = header("content-length")
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(0);
            let (path, q) = target.split_once('?').unwrap_or((&target, ""));
            let query = q
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect();
            let path = path.to_string();
            let mut body = buf[head_len..].to_vec();
            while body.len() < length {
                let n = stream.read(&mut chunk).ok()?;
                if n == 0 {
                    return None;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            body.truncate(length);
            return Some(Incoming {
                method,
                path,
                query,
                authorization: auth,
                body,
            });
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Percent-decoding (and `+` as a space, as Go's query parser reads it).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

/// `/api/v1/[namespaces/<ns>/]<resource>` or `/apis/<group>/<version>/[namespaces/<ns>/]<r>`.
fn parse_target(path: &str, query: BTreeMap<String, String>) -> Result<Target, (u16, String)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return Err((404, format!("no such path {path}"))),
    };
    let (namespace, resource, name) = match rest {
        [r] => (None, r.to_string(), None),
        ["namespaces", ns, r] => (Some(ns.to_string()), r.to_string(), None),
        ["namespaces", ns, r, n] => (Some(ns.to_string()), r.to_string(), Some(n.to_string())),
        [r, n] => (None, r.to_string(), Some(n.to_string())),
        _ => return Err((404, format!("no such path {path}"))),
    };
    let selector = Selector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| (400, e))?;
    let fields = parse_fields(query.get("fieldSelector").map_or("", String::as_str))?;
    Ok(Target {
        resource,
        namespace,
        query,
        selector,
        fields,
        name,
    })
}

/// A fieldSelector: `metadata.name=x,metadata.namespace!=y` (what every kind supports).
fn parse_fields(text: &str) -> Result<Vec<FieldRequirement>, (u16, String)> {
    let mut out = Vec::new();
    for term in text.split(',').filter(|t| !t.is_empty()) {
        let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
            (f, false, v)
        } else if let Some((f, v)) = term.split_once("==") {
            (f, true, v)
        } else if let Some((f, v)) = term.split_once('=') {
            (f, true, v)
        } else {
            return Err((400, format!("invalid field selector {text:?}")));
        };
        if !matches!(field, "metadata.name" | "metadata.namespace") {
            return Err((400, format!("field label not supported: {field}")));
        }
        out.push((field.to_string(), equal, value.to_string()));
    }
    Ok(out)
}

impl Target {
    /// True when `obj` is in the target's namespace and matches its selector.
    fn selects(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| ns == namespace_of(obj))
            && self.selector.matches(&labels_of(obj))
            && self.fields.iter().all(|(field, equal, value)| {
                let have = match field.as_str() {
                    "metadata.name" => obj["metadata"]["name"].as_str().unwrap_or(""),
                    _ => namespace_of(obj),
                };
                (have == value) == *equal
            })
    }

    /// The `kind` of the list and of bookmarks.
    fn kind(&self) -> String {
        let singular = self.resource.trim_end_matches('s');
        let mut k = String::new();
        for (i, part) in singular.split("slice").enumerate() {
            if i > 0 {
                k.push_str("Slice");
            }
            let mut c = part.chars();
            if let Some(first) = c.next() {
                k.push(first.to_ascii_uppercase());
                k.extend(c);
            }
        }
        k
    }
}

/// One page of a list (a new snapshot, or the next page of one by its continue token).
fn list(stream: &mut Wire, shared: &Shared, t: &Target, log: impl Fn(u16)) {
    let limit: usize = t
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|&l| l > 0)
        .unwrap_or(usize::MAX);
    let mut st = shared.lock();
    let (rv, mut items) = match t.query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => match token
            .parse::<u64>()
            .ok()
            .and_then(|id| st.snapshots.remove(&id))
        {
            Some(snap) => snap,
            None => {
                drop(st);
                log(410);
                return status(stream, 410, "continue token expired", None);
            }
        },
        None => {
            let items: Vec<Value> = st
                .objects
                .iter()
                .filter(|((r, _, _), o)| *r == t.resource && t.selects(o))
                .map(|(_, o)| o.clone())
                .collect();
            (st.rv, items)
        }
    };
    let rest = items.split_off(limit.min(items.len()));
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if !rest.is_empty() {
        let id = st.next_snapshot;
        st.next_snapshot += 1;
        st.snapshots.insert(id, (rv, rest));
        meta["continue"] = Value::String(id.to_string());
    }
    drop(st);
    log(200);
    let body = json!({
        "kind": format!("{}List", t.kind()),
        "apiVersion": "v1",
        "metadata": meta,
        "items": items,
    })
    .to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    stream.close_notify();
    let _ = stream.flush();
}

/// The head of every watch answer.
const WATCH_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

/// Writes `data` as chunks of at most `size` bytes, each flushed on its own.
fn write_chunks(stream: &mut Wire, data: &[u8], size: usize) -> std::io::Result<()> {
    for piece in data.chunks(size.max(1)) {
        stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes())?;
        stream.write_all(piece)?;
        stream.write_all(b"\r\n")?;
        stream.flush()?;
    }
    Ok(())
}

/// Ends a chunked body properly.
fn end_chunks(stream: &mut Wire) {
    let _ = stream.write_all(b"0\r\n\r\n");
    let _ = stream.flush();
    stream.close_notify();
    let _ = stream.flush();
}

/// A watch: events after the requested resourceVersion, bookmarks, until timeoutSeconds, a
/// drop or a stop. A watch from now (no version) starts with the objects as ADDED events,
/// and then, for a streamed list (`initial_end`), the bookmark that ends them.
fn watch_stream(
    stream: &mut Wire,
    shared: &Shared,
    t: &Target,
    initial_end: bool,
    log: impl Fn(u16),
) {
    let from = t.query.get("resourceVersion").cloned().unwrap_or_default();
    let bookmarks = query_bool(&t.query, "allowWatchBookmarks");
    let timeout = t
        .query
        .get("timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    let deadline = Instant::now() + timeout;
    let st = shared.lock();
    let (mut cursor, mut pending) = match from.parse::<u64>() {
        Ok(rv) if rv > 0 => {
            if rv < st.oldest_rv {
                let as_http = st.gone_as_http;
                drop(st);
                if as_http {
                    log(410);
                    return status(stream, 410, "too old resource version", None);
                }
                log(200);
                return gone_event(stream, shared);
            }
            (rv, Vec::new())
        }
        // "" or "0": the current state as ADDED events first, as the API server does.
        _ => {
            let mut added: Vec<String> = st
                .objects
                .iter()
                .filter(|((r, _, _), o)| *r == t.resource && t.selects(o))
                .map(|(_, o)| event_line("ADDED", o))
                .collect();
            if initial_end {
                added.push(bookmark_line(&t.kind(), st.rv, true));
            }
            (st.rv, added)
        }
    };
    let generation = st.generation;
    let chunk = st.chunk_size;
    drop(st);
    log(200);
    if stream
        .write_all(WATCH_HEAD)
        .and_then(|_| stream.flush())
        .is_err()
    {
        return;
    }
    let mut last_bookmark = Instant::now();
    loop {
        for line in pending.drain(..) {
            if write_chunks(stream, line.as_bytes(), chunk).is_err() {
                return;
            }
        }
        let st = shared.lock();
        if st.generation != generation || st.stopped {
            // Dropped: close without the last chunk, as a broken connection would.
            stream.shutdown();
            return;
        }
        let from = cursor;
        for c in st.history.iter().filter(|c| c.rv > from) {
            cursor = c.rv;
            if c.resource != t.resource {
                continue;
            }
            let was = c.old.as_ref().is_some_and(|o| t.selects(o));
            let is = c.new.as_ref().is_some_and(|o| t.selects(o));
            let line = match (was, is, &c.new, &c.old) {
                (false, true, Some(n), _) => event_line("ADDED", n),
                (true, true, Some(n), _) => event_line("MODIFIED", n),
                (true, false, Some(n), _) => event_line("DELETED", n),
                (true, false, None, Some(o)) => event_line("DELETED", o),
                _ => continue,
            };
            pending.push(line);
        }
        cursor = cursor.max(st.rv);
        if !pending.is_empty() {
            continue;
        }
        let now = Instant::now();
        if now >= deadline {
            drop(st);
            return end_chunks(stream);
        }
        if let (true, Some(every)) = (bookmarks, st.bookmark_every) {
            if now >= last_bookmark + every {
                last_bookmark = now;
                pending.push(bookmark_line(&t.kind(), st.rv, false));
                continue;
            }
        }
        let wait = (deadline - now).min(Duration::from_millis(50));
        let _ = shared.cond.wait_timeout(st, wait);
    }
}

/// One watch event line.
fn event_line(kind: &str, obj: &Value) -> String {
    let mut line = json!({"type": kind, "object": obj}).to_string();
    line.push('\n');
    line
}

/// One bookmark line at `rv`; `end` for the one that ends a streamed list's initial events.
fn bookmark_line(kind: &str, rv: u64, end: bool) -> String {
    let mut obj = json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": rv.to_string()},
    });
    if end {
        obj["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line("BOOKMARK", &obj)
}

/// A 200 watch whose only event is ERROR 410, as the watch cache answers a too-old version.
fn gone_event(stream: &mut Wire, shared: &Shared) {
    let chunk = shared.lock().chunk_size;
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "too old resource version", "reason": "Expired", "code": 410,
    });
    let line = event_line("ERROR", &status);
    if stream.write_all(WATCH_HEAD).is_ok() && write_chunks(stream, line.as_bytes(), chunk).is_ok()
    {
        end_chunks(stream);
    }
}

/// One object: read (`GET` with a name), created (`POST` to the collection) or updated
/// (`PUT` with a name), as the API server does it: a create of an existing object is 409
/// AlreadyExists, an update whose `metadata.resourceVersion` is not the stored one is 409
/// Conflict (an empty one updates unconditionally), an update of a missing object is 404.
/// With `refuse_writes`, creates and updates are 403 Forbidden.
fn object(
    stream: &mut Wire,
    shared: &Shared,
    method: &str,
    t: &Target,
    body: &[u8],
    log: impl Fn(u16),
) {
    let ns = t.namespace.clone().unwrap_or_default();
    let key = |name: &str| (t.resource.clone(), ns.clone(), name.to_string());
    let mut st = shared.lock();
    let refuse = st.refuse_writes;
    let (code, answer) = match (method, &t.name) {
        ("GET", Some(name)) => match st.objects.get(&key(name)) {
            Some(o) => (200, o.clone()),
            None => (
                404,
                failure(
                    404,
                    "NotFound",
                    &format!("{} \"{name}\" not found", t.resource),
                ),
            ),
        },
        ("POST" | "PUT", _) if refuse => (
            403,
            failure(
                403,
                "Forbidden",
                &format!(
                    "{} is forbidden: User \"edge\" cannot {} resource \"{}\" in namespace \"{ns}\"",
                    t.resource,
                    if method == "POST" { "create" } else { "update" },
                    t.resource
                ),
            ),
        ),
        ("POST", None) | ("PUT", Some(_)) => match serde_json::from_slice::<Value>(body) {
            Err(e) => (400, failure(400, "BadRequest", &format!("body: {e}"))),
            Ok(mut obj) => {
                let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
                let sent_rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let stored = st.objects.get(&key(&name)).map(|o| {
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_string()
                });
                if name.is_empty() || t.name.as_ref().is_some_and(|n| *n != name) {
                    (
                        400,
                        failure(400, "BadRequest", "metadata.name does not match the path"),
                    )
                } else if method == "POST" && stored.is_some() {
                    (
                        409,
                        failure(
                            409,
                            "AlreadyExists",
                            &format!("{} \"{name}\" already exists", t.resource),
                        ),
                    )
                } else if method == "PUT" && stored.is_none() {
                    (
                        404,
                        failure(
                            404,
                            "NotFound",
                            &format!("{} \"{name}\" not found", t.resource),
                        ),
                    )
                } else if method == "PUT"
                    && !sent_rv.is_empty()
                    && stored.as_deref() != Some(sent_rv.as_str())
                {
                    (
                        409,
                        failure(
                            409,
                            "Conflict",
                            &format!(
                                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                                t.resource
                            ),
                        ),
                    )
                } else {
                    obj["metadata"]["namespace"] = Value::String(ns.clone());
                    if method == "POST" {
                        obj["metadata"]["uid"] = Value::String(format!("uid-{}", st.rv + 1));
                        obj["metadata"]["creationTimestamp"] =
                            Value::String("2025-01-01T00:00:00Z".into());
                    } else if let Some(old) = st.objects.get(&key(&name)) {
                        obj["metadata"]["uid"] = old["metadata"]["uid"].clone();
                        obj["metadata"]["creationTimestamp"] =
                            old["metadata"]["creationTimestamp"].clone();
                    }
                    let resource = t.resource.clone();
                    st.write(&resource, Some(obj), key(&name));
                    let written = st.objects[&key(&name)].clone();
                    (if method == "POST" { 201 } else { 200 }, written)
                }
            }
        },
        _ => (
            405,
            failure(405, "MethodNotAllowed", &format!("{method} {}", t.resource)),
        ),
    };
    drop(st);
    shared.cond.notify_all();
    log(code);
    let body = answer.to_string();
    let head = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    stream.close_notify();
    let _ = stream.flush();
}

/// A `metav1.Status` failure.
fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
}

/// An error answer with a `metav1.Status` body.
fn status(stream: &mut Wire, code: u16, message: &str, retry_after: Option<u64>) {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "code": code,
    })
    .to_string();
    let mut head = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    if let Some(s) = retry_after {
        head.push_str(&format!("Retry-After: {s}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    stream.close_notify();
    let _ = stream.flush();
}

/// Holds the connection open, silent, until the server stops or drops its connections.
fn hang(shared: &Shared) {
    let mut st = shared.lock();
    let generation = st.generation;
    while !st.stopped && st.generation == generation {
        st = shared
            .cond
            .wait_timeout(st, Duration::from_millis(50))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
