//! The command line's end of the control socket: one request, one response.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::protocol::{Request, Response};

/// How long the client waits for the daemon's answer (an apply runs a plan first).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// Why no response came back.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting failed: no daemon, or no permission on the socket file.
    #[error(
        "cannot connect to {0}: {1} (is edgenetd running, and are you root or in group edgenetd-admin?)"
    )]
    Connect(PathBuf, io::Error),
    /// The exchange broke off.
    #[error("{0}: {1}")]
    Exchange(PathBuf, io::Error),
    /// The daemon answered something that is not a response.
    #[error("{0}: unexpected answer: {1}")]
    Answer(PathBuf, String),
}

/// Sends `request` to the daemon at `socket` and waits for its response.
pub fn request(socket: &Path, request: &Request) -> Result<Response, ClientError> {
    let path = || socket.to_path_buf();
    let mut stream = UnixStream::connect(socket).map_err(|e| ClientError::Connect(path(), e))?;
    let exchange = |e| ClientError::Exchange(path(), e);
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(exchange)?;
    let line = request.to_line();
    // A refused peer gets its answer before the daemon reads anything: a failed write is
    // not the end, the response may still be there.
    let written = stream.write_all(line.as_bytes());
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(exchange)?;
    if answer.is_empty() {
        written.map_err(exchange)?;
    }
    Response::parse(&answer).map_err(|e| ClientError::Answer(path(), format!("{e}: {answer:?}")))
}
