//! Who gets a connection slot: per-source and global caps, a reserve for trusted sources, and
//! eviction of the oldest connection still sending its head when the caps are reached.
//!
//! A health probe sends its whole request in one packet, so the connections that sit in the
//! head phase for long are slow or idle clients: evicting the oldest of them (of the source
//! holding the most slots) is what keeps caps from ever locking a probe out, while a
//! connection already being answered is never cut. Counting is O(1) per accept and a source's entry goes as soon as its count is zero.
//! An evicted connection loses its slot, not its socket: it is held until its head deadline
//! (`held`), so an eviction never tells a client to reconnect sooner than it would have.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv6Addr};

use async_channel::{Receiver, Sender};

use super::held::{self, Held};

/// The caps one server applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, from everyone.
    pub max_connections: usize,
    /// Connections open at once from one source (an IPv4 address or an IPv6 /64).
    pub max_per_source: usize,
    /// Slots only trusted sources (loopback, `metrics_allow`) may use.
    pub reserved: usize,
}

/// The server's caps.
pub const LIMITS: Limits = Limits {
    max_connections: 256,
    max_per_source: 32,
    reserved: 32,
};

/// The key a source is counted under: IPv4 (and v4-mapped IPv6) per address, IPv6 per /64,
/// since one host usually owns a whole /64 and could otherwise take every slot.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

/// One admitted connection as the accept loop sees it.
struct Conn {
    /// The source key it is counted under.
    source: IpAddr,
    /// Whether it came from a trusted source (may use the reserve).
    trusted: bool,
    /// Still reading its request head (so it may be evicted).
    reading_head: bool,
    /// Dropping this tells the connection's task to stop.
    _evict: Sender<()>,
}

/// A slot granted to a connection.
pub struct Ticket {
    /// Identifies the slot to [`Admission::answering`] and [`Admission::release`].
    pub id: u64,
    /// Closes (`recv` fails) when the connection has been evicted.
    pub evicted: Receiver<()>,
}

/// The slot table of one server.
pub struct Admission {
    /// The caps.
    limits: Limits,
    /// Id of the next admitted connection (ids grow, so the map's order is age).
    next_id: u64,
    /// Open connections by id, oldest first.
    conns: BTreeMap<u64, Conn>,
    /// Open connections per source key; no entry is ever zero.
    per_source: HashMap<IpAddr, usize>,
    /// Open connections from untrusted sources.
    untrusted: usize,
    /// Evicted connections, not closed yet (see `held`).
    pub held: Held,
}

impl Admission {
    /// An empty table with `limits`.
    pub fn new(limits: Limits) -> Admission {
        Admission {
            limits,
            next_id: 0,
            conns: BTreeMap::new(),
            per_source: HashMap::new(),
            untrusted: 0,
            held: Held::new(held::cap()),
        }
    }

    /// Grants a slot to a new connection from `ip`, evicting the oldest connection still
    /// sending its head if a cap is reached; None when nobody can be evicted.
    pub fn admit(&mut self, ip: IpAddr, trusted: bool) -> Option<Ticket> {
        let source = source_key(ip);
        let mine = self.per_source.get(&source).copied().unwrap_or(0);
        if mine >= self.limits.max_per_source && !self.evict_oldest(|c| c.source == source) {
            return None;
        }
        let full = self.conns.len() >= self.limits.max_connections;
        let untrusted_cap = self.limits.max_connections - self.limits.reserved;
        if trusted {
            if full && !self.evict_oldest(|_| true) {
                return None;
            }
        } else if (full || self.untrusted >= untrusted_cap) && !self.evict_oldest(|c| !c.trusted) {
            return None;
        }
        let (evict, evicted) = async_channel::bounded(1);
        let id = self.next_id;
        self.next_id += 1;
        let conn = Conn {
            source,
            trusted,
            reading_head: true,
            _evict: evict,
        };
        self.conns.insert(id, conn);
        *self.per_source.entry(source).or_insert(0) += 1;
        self.untrusted += usize::from(!trusted);
        Some(Ticket { id, evicted })
    }

    /// The connection has its head and is being answered: it is no longer evicted.
    pub fn answering(&mut self, id: u64) {
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.reading_head = false;
        }
    }

    /// Frees the slot of connection `id` (nothing if it was evicted already).
    pub fn release(&mut self, id: u64) {
        let Some(conn) = self.conns.remove(&id) else {
            return;
        };
        self.untrusted -= usize::from(!conn.trusted);
        if let Some(n) = self.per_source.get_mut(&conn.source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&conn.source);
            }
        }
    }

    /// Connections holding a slot.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.conns.len()
    }

    /// Sources with an entry in the per-source count.
    #[cfg(test)]
    pub fn sources_tracked(&self) -> usize {
        self.per_source.len()
    }

    /// Evicts a connection in its head phase that `which` selects, from the source that holds
    /// the most slots, its oldest; false if none. A lone probe's source holds one slot, so in
    /// a burst that arrives faster than heads are read, the victims are the flood's: the
    /// probe's connection is taken only once every source is down to one.
    fn evict_oldest(&mut self, which: impl Fn(&Conn) -> bool) -> bool {
        let mut victim: Option<(usize, u64)> = None;
        for (id, c) in &self.conns {
            if !(c.reading_head && which(c)) {
                continue;
            }
            let held = self.per_source.get(&c.source).copied().unwrap_or(0);
            // Ids grow with age, so the first of the largest count is its source's oldest.
            if victim.is_none_or(|(most, _)| held > most) {
                victim = Some((held, *id));
            }
        }
        let victim = victim.map(|(_, id)| id);
        match victim {
            Some(id) => {
                log::debug!("http: caps reached; evicting the oldest slow connection");
                self.release(id);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
