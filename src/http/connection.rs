//! One connection: read its head under a deadline and a size cap, answer, close.

use std::cell::RefCell;
use std::net::{IpAddr, TcpStream};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use futures_lite::{AsyncReadExt, AsyncWriteExt, future};
use smol::Async;

use super::admission::{Admission, Ticket};
use super::request::{self, Head, Rejection};
use super::response::encode;
use super::server::Site;
use super::{Method, Reply};

/// How long a client has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// How long a source outside `metrics_allow` has to send its head before its 403.
pub const FORBIDDEN_DEADLINE: Duration = Duration::from_secs(1);
/// How long a client has to take our whole answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// The largest request head accepted.
pub const MAX_HEAD: usize = 16 * 1024;

/// Why no request head came.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    /// The head is there but unacceptable: answer with its status.
    Rejected(Rejection),
    /// The client went away or timed out: nothing to answer.
    Gone,
    /// The accept loop gave the slot to another connection: the socket is held, not closed.
    Evicted,
}

/// A slot in the admission table, freed when the connection's task ends however it ends.
struct Slot {
    /// The table the slot is in.
    table: Rc<RefCell<Admission>>,
    /// The slot's id.
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.borrow_mut().release(self.id);
    }
}

/// Serves one admitted connection; it ends early if the accept loop evicts it.
pub async fn serve_admitted(
    mut stream: Async<TcpStream>,
    ip: IpAddr,
    site: &impl Site,
    table: Rc<RefCell<Admission>>,
    ticket: Ticket,
) {
    let opened = Instant::now();
    let slot = Slot {
        table,
        id: ticket.id,
    };
    let evicted = async {
        let _ = ticket.evicted.recv().await;
        Err(HeadError::Evicted)
    };
    let head = future::or(within(HEAD_DEADLINE, read_head(&mut stream)), evicted).await;
    slot.table.borrow_mut().answering(slot.id);
    let (reply, method) = match head {
        Ok(head) => (site.answer(&head.method, &head.path, ip), head.method),
        Err(HeadError::Rejected(why)) => (rejection(why), Method::Get),
        Err(HeadError::Gone) => return,
        Err(HeadError::Evicted) => {
            // Closing would tell the client to come back at once (see `held`).
            if let Ok(stream) = stream.into_inner() {
                slot.table.borrow_mut().held.hold(stream, opened);
            }
            return;
        }
    };
    write_reply(&mut stream, &reply, method).await;
}

/// Serves a source outside `metrics_allow`: its head under a short deadline, then 403.
pub async fn serve_forbidden(mut stream: Async<TcpStream>) {
    if let Err(HeadError::Gone | HeadError::Evicted) =
        within(FORBIDDEN_DEADLINE, read_head(&mut stream)).await
    {
        return;
    }
    write_reply(&mut stream, &Reply::text(403, "forbidden\n"), Method::Get).await;
}

/// Runs `read` until `deadline`, after which the client counts as gone.
async fn within(
    deadline: Duration,
    read: impl Future<Output = Result<Head, HeadError>>,
) -> Result<Head, HeadError> {
    future::or(read, async {
        smol::Timer::after(deadline).await;
        Err(HeadError::Gone)
    })
    .await
}

fn rejection(why: Rejection) -> Reply {
    match why {
        Rejection::BadRequest(reason) => Reply::text(400, format!("bad request: {reason}\n")),
        Rejection::TooLarge => Reply::text(431, "request header fields too large\n"),
        Rejection::Version => Reply::text(505, "HTTP version not supported: use 1.0 or 1.1\n"),
    }
}

async fn write_reply(stream: &mut Async<TcpStream>, reply: &Reply, method: Method) {
    let bytes = encode(reply, method == Method::Head, SystemTime::now());
    let write = async {
        let _ = stream.write_all(&bytes).await;
        let _ = stream.flush().await;
    };
    let deadline = async {
        smol::Timer::after(WRITE_DEADLINE).await;
    };
    future::or(write, deadline).await;
}

/// Reads until the head is complete, refused, or larger than [`MAX_HEAD`].
async fn read_head(stream: &mut Async<TcpStream>) -> Result<Head, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|_| HeadError::Gone)?;
        if n == 0 {
            return Err(HeadError::Gone);
        }
        buf.extend_from_slice(&chunk[..n]);
        match request::parse(&buf) {
            Ok(Some(head)) => return Ok(head),
            Ok(None) if buf.len() > MAX_HEAD => {
                return Err(HeadError::Rejected(Rejection::TooLarge));
            }
            Ok(None) => {}
            Err(why) => return Err(HeadError::Rejected(why)),
        }
    }
}
