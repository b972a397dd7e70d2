//! Connections that lost their slot to an eviction but are not closed yet.
//!
//! Closing an evicted idle connection tells its client at once (a FIN), and a client that
//! reconnects whenever it is closed then takes a slot again and evicts the next one: 2,000
//! such clients against 256 slots made 290,000 connections in 20 s (issue 21, item 11), each
//! a conntrack entry for two minutes. So an evicted connection is only *held*: its task ends
//! (no buffer, no timer of its own), its socket stays open, unread, with the smallest
//! receive buffer the kernel allows, and is closed when its head deadline would have closed
//! it anyway. Its client sees exactly what it would have seen without the flood, and the
//! turnover of idle connections is one per client per head deadline, whatever the caps.
//!
//! Holding costs a file descriptor, so the queue is capped (an eighth of the soft
//! `RLIMIT_NOFILE`, per slot table). A full queue closes its oldest socket early, but only
//! one that has been open for [`MIN_LIFE`]; until one has, the accept loop waits
//! ([`Held::accept_after`]), leaving newcomers in the kernel's accept queue (their SYNs,
//! once that is full, are resent by the clients' own back-off). Either way no client gets a
//! close sooner than [`MIN_LIFE`] after it connected, which bounds the churn at
//! (slots + held) per [`MIN_LIFE`] for any flood.

use std::collections::VecDeque;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};

use super::connection::HEAD_DEADLINE;

/// The least time a connection is open before an eviction may close it.
pub const MIN_LIFE: Duration = Duration::from_secs(1);
/// The most sockets one slot table holds, whatever the descriptor limit.
pub const MAX_HELD: usize = 4096;

/// One held socket.
struct Entry {
    /// Closed when dropped.
    _stream: TcpStream,
    /// When it was accepted.
    opened: Instant,
}

/// The held sockets of one slot table, oldest first.
pub struct Held {
    /// The sockets, in the order they were evicted.
    queue: VecDeque<Entry>,
    /// The most it holds.
    cap: usize,
    /// Wakes the reaper when a socket is held in an empty queue (capacity one).
    wake: Sender<()>,
    /// The reaper's end.
    woken: Receiver<()>,
}

impl Held {
    /// An empty queue holding at most `cap` sockets.
    pub fn new(cap: usize) -> Held {
        let (wake, woken) = async_channel::bounded(1);
        Held {
            queue: VecDeque::new(),
            cap,
            wake,
            woken,
        }
    }

    /// Holds `stream`, accepted at `opened`, until its head deadline; a full queue closes its
    /// oldest socket first (the accept loop waited until that one is [`MIN_LIFE`] old).
    pub fn hold(&mut self, stream: TcpStream, opened: Instant) {
        if self.cap == 0 {
            return;
        }
        // What a client still sends lands in the kernel's buffer, unread: keep that small.
        // Best effort: a socket whose buffer cannot be shrunk is still better held than closed.
        let _ = crate::sys::set_int_sockopt(&stream, libc::SOL_SOCKET, libc::SO_RCVBUF, 1);
        if self.queue.len() >= self.cap {
            self.queue.pop_front();
        }
        if self.queue.is_empty() {
            let _ = self.wake.try_send(());
        }
        self.queue.push_back(Entry {
            _stream: stream,
            opened,
        });
    }

    /// Closes every socket whose head deadline has passed at `now`; the next deadline, if any.
    /// Sockets are closed in the order they were held (an eviction by source may hold a
    /// younger one before an older one, which then waits at most a head deadline more).
    pub fn reap(&mut self, now: Instant) -> Option<Instant> {
        while let Some(front) = self.queue.front() {
            let due = front.opened + HEAD_DEADLINE;
            if due > now {
                return Some(due);
            }
            self.queue.pop_front();
        }
        None
    }

    /// When the queue is full: the moment its oldest socket may be closed early, before which
    /// no connection should be accepted.
    pub fn accept_after(&self) -> Option<Instant> {
        if self.cap == 0 || self.queue.len() < self.cap {
            return None;
        }
        self.queue.front().map(|e| e.opened + MIN_LIFE)
    }

    /// Sockets held now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// The reaper's wake-up channel.
    pub fn woken(&self) -> Receiver<()> {
        self.woken.clone()
    }
}

/// The cap for this process: an eighth of the soft open-file limit (so two slot tables with
/// their slots and held sockets leave most descriptors to the rest of the daemon), at most
/// [`MAX_HELD`]. 128 under the packaged unit's default limit of 1,024.
pub fn cap() -> usize {
    (soft_nofile().unwrap_or(1024) / 8).min(MAX_HELD as u64) as usize
}

/// The soft `RLIMIT_NOFILE`, read from /proc (no `unsafe`; None when unlimited or unreadable).
fn soft_nofile() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Closes the held sockets of `table` at their deadlines, for as long as the thread runs;
/// it sleeps on the wake-up channel while nothing is held (no timer at idle).
pub(crate) async fn reap(table: std::rc::Rc<std::cell::RefCell<super::admission::Admission>>) {
    let woken = table.borrow().held.woken();
    loop {
        let next = table.borrow_mut().held.reap(Instant::now());
        match next {
            Some(at) => {
                smol::Timer::at(at).await;
            }
            // Never closed: the queue holds the sending end.
            None if woken.recv().await.is_err() => return,
            None => {}
        }
    }
}

#[cfg(test)]
mod tests;
