//! One HTTP/1.1 request on one connection, with every size and every wait bounded.
//!
//! The response body is read through [`Body`], which undoes Content-Length or chunked framing;
//! a watch stream is chunked, and its chunk boundaries fall anywhere (inside a JSON line, even
//! inside a chunk-size line), so lines are assembled across chunks by [`Body::next_line`].

use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt, FutureExt};

use super::endpoint::{Endpoint, Stream};
use super::error::Error;

/// The most a response head may hold.
const MAX_HEAD: usize = 64 * 1024;
/// The most a chunk-size line (with extensions) or a trailer line may hold.
const MAX_CHUNK_LINE: usize = 4096;
/// How much one read asks for.
const READ_SIZE: usize = 16 * 1024;

/// A connection with a read buffer; every read waits at most `idle`.
pub struct Conn {
    /// The TLS or plain stream.
    stream: Stream,
    /// Bytes read and not yet consumed are `buf[pos..]`.
    buf: Vec<u8>,
    /// Where the unconsumed bytes start.
    pos: usize,
    /// The longest wait for any byte.
    idle: Duration,
}

/// The parts of a response head the client acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub code: u16,
    /// `Retry-After` in seconds, when present and numeric.
    pub retry_after: Option<Duration>,
    /// How the body is framed.
    pub framing: Framing,
}

/// How a response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// Runs `fut`, failing with [`Error::Idle`] after `idle`.
pub async fn bounded<T>(
    idle: Duration,
    fut: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    fut.or(async {
        smol::Timer::after(idle).await;
        Err(Error::Idle(idle))
    })
    .await
}

impl Conn {
    /// Connects to `endpoint` (connect and handshake bounded by `idle`).
    pub async fn open(endpoint: &Endpoint, idle: Duration) -> Result<Conn, Error> {
        let stream = bounded(idle, endpoint.connect()).await?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(READ_SIZE),
            pos: 0,
            idle,
        })
    }

    /// Sends `GET path_and_query` with the endpoint's token (read now) and reads the head.
    pub async fn get(&mut self, endpoint: &Endpoint, path_and_query: &str) -> Result<Head, Error> {
        self.send(endpoint, "GET", path_and_query, None).await
    }

    /// Sends `method path_and_query`, with `body` as `application/json` when given, and
    /// reads the head. The connection is closed after the answer (`Connection: close`): the
    /// few writes the client makes do not justify keeping idle connections to the server.
    pub async fn send(
        &mut self,
        endpoint: &Endpoint,
        method: &str,
        path_and_query: &str,
        body: Option<&[u8]>,
    ) -> Result<Head, Error> {
        let mut req = format!(
            "{method} {path_and_query} HTTP/1.1\r\nHost: {}\r\nUser-Agent: edgenetd\r\n\
             Accept: application/json\r\nConnection: close\r\n",
            endpoint.authority()
        );
        if let Some(token) = endpoint.bearer_token()? {
            req.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(body) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        let idle = self.idle;
        bounded(idle, async {
            self.stream.write_all(req.as_bytes()).await?;
            if let Some(body) = body {
                self.stream.write_all(body).await?;
            }
            self.stream.flush().await?;
            Ok(())
        })
        .await?;
        self.read_head().await
    }

    /// Reads more bytes into the buffer; false at end of stream.
    async fn fill(&mut self) -> Result<bool, Error> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let start = self.buf.len();
        self.buf.resize(start + READ_SIZE, 0);
        let idle = self.idle;
        let stream = &mut self.stream;
        let buf = &mut self.buf;
        let n = bounded(idle, async { Ok(stream.read(&mut buf[start..]).await?) }).await;
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                self.buf.truncate(start);
                return Err(e);
            }
        };
        self.buf.truncate(start + n);
        Ok(n > 0)
    }

    /// The unconsumed bytes.
    fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Drops the consumed prefix once it is most of the buffer, so the buffer stays small.
    fn compact(&mut self) {
        if self.pos > READ_SIZE && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Reads and parses the response head.
    async fn read_head(&mut self) -> Result<Head, Error> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(self.pending()) {
                Ok(httparse::Status::Complete(len)) => {
                    let head = head_from(&resp)?;
                    self.pos += len;
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(Error::Protocol(format!("response head: {e}"))),
            }
            if self.pending().len() > MAX_HEAD {
                return Err(Error::TooLarge {
                    what: "response head",
                    limit: MAX_HEAD,
                });
            }
            if !self.fill().await? {
                return Err(Error::Protocol("closed before the response head".into()));
            }
        }
    }

    /// Takes one CRLF- (or LF-) terminated line of at most `max` bytes, without the ending.
    async fn take_line(&mut self, max: usize, what: &'static str) -> Result<Vec<u8>, Error> {
        loop {
            if let Some(i) = self.pending().iter().position(|&b| b == b'\n') {
                let mut line = self.pending()[..i].to_vec();
                self.pos += i + 1;
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.pending().len() > max {
                return Err(Error::TooLarge { what, limit: max });
            }
            if !self.fill().await? {
                return Err(Error::Protocol(format!("closed inside a {what}")));
            }
        }
    }
}

/// The head's status, `Retry-After` and framing.
fn head_from(resp: &httparse::Response<'_, '_>) -> Result<Head, Error> {
    let code = resp.code.unwrap_or(0);
    let mut retry_after = None;
    let mut length = None;
    let mut chunked = false;
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("retry-after") {
            retry_after = value.parse::<u64>().ok().map(Duration::from_secs);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse::<u64>()
                .map_err(|_| Error::Protocol(format!("Content-Length {value:?}")))?;
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .to_ascii_lowercase()
                .split(',')
                .any(|t| t.trim() == "chunked");
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::Close,
    };
    Ok(Head {
        code,
        retry_after,
        framing,
    })
}

/// A response body being read.
pub struct Body<'c> {
    /// The connection.
    conn: &'c mut Conn,
    /// Bytes left in the current chunk (or the whole body, for Content-Length).
    left: u64,
    /// The framing.
    framing: Framing,
    /// True once the body's end was read.
    done: bool,
    /// Body bytes decoded and not yet returned as a line.
    line: Vec<u8>,
}

impl<'c> Body<'c> {
    /// The body that follows `head` on `conn`.
    pub fn new(conn: &'c mut Conn, head: &Head) -> Body<'c> {
        let left = match head.framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        Body {
            conn,
            left,
            framing: head.framing,
            done: matches!(head.framing, Framing::Length(0)),
            line: Vec::new(),
        }
    }

    /// Appends the next body bytes to `out`; false once the body has ended.
    async fn read_some(&mut self, out: &mut Vec<u8>) -> Result<bool, Error> {
        if self.done {
            return Ok(false);
        }
        if self.framing == Framing::Chunked && self.left == 0 && !self.next_chunk().await? {
            self.done = true;
            return Ok(false);
        }
        if self.conn.pending().is_empty() && !self.conn.fill().await? {
            if self.framing == Framing::Close {
                self.done = true;
                return Ok(false);
            }
            return Err(Error::Protocol("closed inside the body".into()));
        }
        let avail = self.conn.pending();
        let take = match self.framing {
            Framing::Close => avail.len(),
            _ => avail
                .len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX)),
        };
        out.extend_from_slice(&avail[..take]);
        self.conn.pos += take;
        self.conn.compact();
        if self.framing != Framing::Close {
            self.left -= take as u64;
        }
        if self.framing == Framing::Chunked && self.left == 0 {
            let end = self.conn.take_line(MAX_CHUNK_LINE, "chunk end").await?;
            if !end.is_empty() {
                return Err(Error::Protocol("chunk data longer than its size".into()));
            }
        }
        if let Framing::Length(_) = self.framing {
            self.done = self.left == 0;
        }
        Ok(true)
    }

    /// Reads the next chunk-size line; false for the last (zero) chunk, after its trailers.
    async fn next_chunk(&mut self) -> Result<bool, Error> {
        let line = self
            .conn
            .take_line(MAX_CHUNK_LINE, "chunk size line")
            .await?;
        let text = std::str::from_utf8(&line).unwrap_or("");
        let size = text.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size, 16)
            .map_err(|_| Error::Protocol(format!("chunk size {text:?}")))?;
        if size == 0 {
            while !self
                .conn
                .take_line(MAX_CHUNK_LINE, "trailer")
                .await?
                .is_empty()
            {}
            return Ok(false);
        }
        self.left = size;
        Ok(true)
    }

    /// The whole body, failing once it exceeds `max` bytes (checked before reading it all,
    /// when the length is announced).
    pub async fn read_all(&mut self, max: usize, what: &'static str) -> Result<Vec<u8>, Error> {
        if let Framing::Length(n) = self.framing
            && n > max as u64
        {
            return Err(Error::TooLarge { what, limit: max });
        }
        let mut out = Vec::new();
        while self.read_some(&mut out).await? {
            if out.len() > max {
                return Err(Error::TooLarge { what, limit: max });
            }
        }
        Ok(out)
    }

    /// The next non-empty newline-terminated line of at most `max` bytes; `None` at the end
    /// of the body (a last line without a newline is returned too).
    pub async fn next_line(&mut self, max: usize) -> Result<Option<Vec<u8>>, Error> {
        let mut scanned = 0;
        loop {
            if let Some(i) = self.line[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + i;
                // A line that is most of the buffer takes the buffer, and only what follows
                // it is copied: a line of many megabytes is never held twice.
                let mut line = if 2 * (end + 1) >= self.line.len() {
                    let rest = self.line.split_off(end + 1);
                    std::mem::replace(&mut self.line, rest)
                } else {
                    self.line.drain(..=end).collect()
                };
                line.pop();
                if line.iter().all(u8::is_ascii_whitespace) {
                    scanned = 0;
                    continue;
                }
                return Ok(Some(line));
            }
            scanned = self.line.len();
            if self.line.len() > max {
                return Err(Error::TooLarge {
                    what: "watch line",
                    limit: max,
                });
            }
            let mut more = std::mem::take(&mut self.line);
            let open = self.read_some(&mut more).await?;
            self.line = more;
            if !open {
                let rest = std::mem::take(&mut self.line);
                let blank = rest.iter().all(u8::is_ascii_whitespace);
                return Ok(if blank { None } else { Some(rest) });
            }
        }
    }
}
