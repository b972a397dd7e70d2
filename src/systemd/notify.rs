//! The sender of systemd notifications (`sd_notify(3)`'s protocol: one datagram of
//! `KEY=VALUE` lines to the unix socket named by `NOTIFY_SOCKET`, a path or an `@abstract`
//! name).
//!
//! It never blocks: a datagram socket blocks its sender while the receiver's queue is full
//! (`net.unix.max_dgram_qlen`, 10 by default), and the supervisor sends from the executor
//! that runs the sync loops, so a service manager that stops reading would stop the daemon.
//! The socket is non-blocking (every send behaves as with `MSG_DONTWAIT`); a notification
//! that does not fit is dropped, counted in [`DROPPED_METRIC`] and logged at most once a
//! minute. The next STATUS= or WATCHDOG=1 carries the news again.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use log::warn;

/// Counter of notifications that could not be sent.
pub const DROPPED_METRIC: &str = "edgenetd_systemd_notifications_dropped_total";

/// Drops are logged at most this often (with how many since the last line).
const LOG_EVERY: Duration = Duration::from_secs(60);

/// The socket notifications go out on, and what became of the ones that did not.
pub struct Notifier {
    /// Unbound, non-blocking.
    socket: UnixDatagram,
    /// `NOTIFY_SOCKET`.
    target: SocketAddr,
    /// Drops not logged yet.
    unlogged: AtomicU64,
    /// When a drop was last logged.
    logged_at: Mutex<Option<Instant>>,
}

/// The process's notifier: `None` without `NOTIFY_SOCKET` (or when it cannot be used).
static NOTIFIER: OnceLock<Option<Notifier>> = OnceLock::new();

/// The address `NOTIFY_SOCKET` names: an absolute path, or `@name` in the abstract namespace.
pub fn address(value: &OsStr) -> io::Result<SocketAddr> {
    let bytes = value.as_bytes();
    match bytes.first() {
        Some(b'@') => SocketAddr::from_abstract_name(&bytes[1..]),
        Some(b'/') => SocketAddr::from_pathname(Path::new(value)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither an absolute path nor an @abstract name",
        )),
    }
}

impl Notifier {
    /// A notifier sending to `target`.
    pub fn new(target: SocketAddr) -> io::Result<Notifier> {
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Notifier {
            socket,
            target,
            unlogged: AtomicU64::new(0),
            logged_at: Mutex::new(None),
        })
    }

    /// Sends `message` without waiting; a message that cannot go now is dropped and counted.
    /// True when it was sent.
    pub fn send(&self, message: &str) -> bool {
        match self.socket.send_to_addr(message.as_bytes(), &self.target) {
            Ok(n) if n == message.len() => true,
            Ok(_) => {
                self.dropped(&io::Error::new(io::ErrorKind::WriteZero, "cut short"));
                false
            }
            Err(e) => {
                self.dropped(&e);
                false
            }
        }
    }

    fn dropped(&self, e: &io::Error) {
        metrics::counter!(DROPPED_METRIC).increment(1);
        let unlogged = self.unlogged.fetch_add(1, Ordering::Relaxed) + 1;
        let mut logged_at = self.logged_at.lock().unwrap_or_else(|p| p.into_inner());
        if logged_at.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            *logged_at = Some(Instant::now());
            self.unlogged.store(0, Ordering::Relaxed);
            let why = if e.kind() == io::ErrorKind::WouldBlock {
                "the service manager is not reading its socket".to_string()
            } else {
                e.to_string()
            };
            warn!("systemd notify: {unlogged} notification(s) dropped: {why}");
        }
    }
}

/// Opens the notify socket named by `NOTIFY_SOCKET` (once; later calls do nothing). Call it
/// before entering another network namespace: an abstract name is looked up in the
/// namespace of the socket, which is the one its creating thread was in.
pub fn open() {
    NOTIFIER.get_or_init(|| {
        let value = std::env::var_os("NOTIFY_SOCKET")?;
        match address(&value).and_then(Notifier::new) {
            Ok(n) => Some(n),
            Err(e) => {
                warn!(
                    "NOTIFY_SOCKET={}: {e}; systemd is not notified",
                    value.to_string_lossy()
                );
                None
            }
        }
    });
}

/// Describes the drop counter and sets it to 0.
pub fn describe_metrics() {
    metrics::describe_counter!(
        DROPPED_METRIC,
        "systemd notifications dropped because the notify socket was full or unreachable."
    );
    metrics::counter!(DROPPED_METRIC).absolute(0);
}

/// Sends `message` to systemd if `NOTIFY_SOCKET` is set (see [`open`]).
pub fn send(message: &str) {
    open();
    if let Some(Some(n)) = NOTIFIER.get() {
        n.send(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_that_never_reads_does_not_block_the_sender() {
        let dir = std::env::temp_dir().join(format!("edgenetd-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let receiver = UnixDatagram::bind(&dir).unwrap();
        let n = Notifier::new(address(dir.as_os_str()).unwrap()).unwrap();
        let t = Instant::now();
        let sent = (0..1000).filter(|_| n.send("WATCHDOG=1\n")).count();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert!((1..1000).contains(&sent), "the queue fills: {sent} sent");
        let mut buf = [0u8; 64];
        let got = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..got], b"WATCHDOG=1\n");
        drop(receiver);
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn an_abstract_address_is_reached() {
        let name = format!("edgenetd-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let receiver = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier::new(address(OsStr::new(&format!("@{name}"))).unwrap()).unwrap();
        assert!(n.send("READY=1\n"));
        let mut buf = [0u8; 64];
        let got = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..got], b"READY=1\n");
    }

    #[test]
    fn a_relative_or_empty_address_is_refused() {
        assert!(address(OsStr::new("notify.sock")).is_err());
        assert!(address(OsStr::new("")).is_err());
    }
}
