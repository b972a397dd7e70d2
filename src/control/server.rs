//! The daemon's end of the control socket: binding it, and serving one connection at a time
//! on the daemon's executor (reads and writes are async, so syncs go on meanwhile).
//!
//! One at a time is deliberate: two `apply` requests must not interleave, and only root and
//! admins can connect at all. A connection that sends nothing is dropped after
//! [`READ_TIMEOUT`], so a stuck client cannot hold the socket.

use std::fs;
use std::future::Future;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt, future};
use log::{info, warn};
use smol::Async;

use super::peer;
use super::protocol::{MAX_REQUEST, Request, Response, parse_request};
use crate::shutdown::{Shutdown, unless_shutdown};

/// How long a client has to send its request, and the daemon to send the response.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Carries out requests (the daemon's side of apply and confirm).
pub trait Handler {
    /// Answers one authorized request.
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Response> + '_>>;
}

/// Why the socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Another process answers on the path: a second daemon on the same main config and
    /// namespace, or two daemons given the same `--control-socket`.
    #[error("{path}: another process{} is serving this control socket", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    InUse {
        /// The socket file.
        path: PathBuf,
        /// The process serving it, when the kernel says.
        pid: Option<i32>,
    },
    /// Binding, or setting the file's mode, failed.
    #[error("{0}: {1}")]
    Io(PathBuf, io::Error),
}

/// A bound control socket. Dropped (when the daemon stops, or fails before it serves), it
/// removes its socket file and the directory it made for it.
pub struct Bound {
    /// The listening socket.
    listener: UnixListener,
    /// Its file.
    path: PathBuf,
    /// The directory `bind` created for it (a derived instance's `/run/edgenetd-NAME`); a
    /// directory that was there before, such as the package's `/run/edgenetd`, stays.
    made_dir: Option<PathBuf>,
}

impl Bound {
    /// The socket file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        if let Some(dir) = &self.made_dir {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Binds the socket at `path` (mode 0660: the owner and the group may connect), creating its
/// directory if there is none. A socket file left by a daemon that stopped is replaced; a
/// live one is not.
pub fn bind(path: &Path) -> Result<Bound, BindError> {
    let io_err = |e| BindError::Io(path.to_path_buf(), e);
    if fs::symlink_metadata(path).is_ok() {
        if let Ok(stream) = UnixStream::connect(path) {
            let pid = crate::sys::peer_credentials(&stream).ok().map(|c| c.pid);
            return Err(BindError::InUse {
                path: path.to_path_buf(),
                pid,
            });
        }
        fs::remove_file(path).map_err(io_err)?;
    }
    let made_dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.exists() => {
            // 0755: the socket's own mode (0660) is what keeps others out.
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(io_err)?;
            Some(dir.to_path_buf())
        }
        _ => None,
    };
    let listener = UnixListener::bind(path).map_err(|e| {
        if let Some(dir) = &made_dir {
            let _ = fs::remove_dir(dir);
        }
        io_err(e)
    })?;
    // From here on, a failure removes the file and the directory with `bound`.
    let bound = Bound {
        listener,
        path: path.to_path_buf(),
        made_dir,
    };
    fs::set_permissions(path, fs::Permissions::from_mode(0o660)).map_err(io_err)?;
    Ok(bound)
}

/// Serves connections until shutdown; the socket file goes with `bound`.
pub async fn serve(bound: Bound, handler: Rc<dyn Handler>, shutdown: Shutdown) {
    let path = bound.path.display().to_string();
    let listener = match bound.listener.try_clone().and_then(Async::new) {
        Ok(l) => l,
        Err(e) => {
            warn!("control socket {path}: {e}; apply/confirm are unavailable");
            return;
        }
    };
    info!("control socket listening on {path}");
    while let Some(accepted) = unless_shutdown(&shutdown, listener.accept()).await {
        match accepted {
            Ok((stream, _)) => serve_one(stream, &*handler).await,
            Err(e) => {
                warn!("control socket: accept failed: {e}");
                smol::Timer::after(Duration::from_millis(100)).await;
            }
        }
    }
    drop(bound);
}

/// Authorizes, reads, handles and answers one connection.
async fn serve_one(mut stream: Async<UnixStream>, handler: &dyn Handler) {
    let response = match peer::authorize(stream.get_ref(), peer::admin_gid()) {
        Err(refusal) => {
            warn!("control socket: connection refused: {refusal}");
            Response::failed(format!("permission denied: {refusal}"))
        }
        Ok(cred) => match with_timeout(read_request(&mut stream)).await {
            Some(Ok(request)) => {
                info!(
                    "control socket: {} from uid {} (pid {})",
                    op_name(&request),
                    cred.uid,
                    cred.pid
                );
                handler.handle(request).await
            }
            Some(Err(e)) => Response::failed(e),
            None => Response::failed(format!("no request within {READ_TIMEOUT:?}")),
        },
    };
    let line = response.to_line();
    if with_timeout(stream.write_all(line.as_bytes()))
        .await
        .is_none()
    {
        warn!("control socket: the client did not read its response");
    }
}

fn op_name(request: &Request) -> &'static str {
    match request {
        Request::Apply {
            confirm_ms: Some(_),
            ..
        } => "apply --confirm",
        Request::Apply { .. } => "apply",
        Request::Confirm { .. } => "confirm",
    }
}

/// Reads one line (or everything up to EOF), at most [`MAX_REQUEST`] bytes.
async fn read_request(stream: &mut Async<UnixStream>) -> Result<Request, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.iter().position(|b| *b == b'\n') {
            buf.truncate(end);
            break;
        }
        if buf.len() > MAX_REQUEST {
            return Err(format!("request larger than {MAX_REQUEST} bytes"));
        }
    }
    parse_request(&buf)
}

async fn with_timeout<T>(work: impl Future<Output = T>) -> Option<T> {
    future::or(async { Some(work.await) }, async {
        smol::Timer::after(READ_TIMEOUT).await;
        None
    })
    .await
}
