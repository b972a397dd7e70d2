//! Commit events: a thread that listens to nf_tables' multicast group and calls back when
//! *another process* commits a change to the ruleset (any table), so a controller can check
//! its tables for drift right away instead of at its next period.
//!
//! The kernel announces every committed transaction with an NFT_MSG_NEWGEN message that
//! carries the id of the committing *thread*; commits by a thread of this process (edgenetd's
//! own controllers, whichever thread they ran on) are ignored.

use std::io;

use nftnl::nftnl_sys::libc;

/// nf_tables' multicast group (NFNLGRP_NFTABLES).
const NFNLGRP_NFTABLES: u32 = 7;
/// (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN.
const NEWGEN: u16 = (10 << 8) | libc::NFT_MSG_NEWGEN as u16;
const NFTA_GEN_PROC_PID: u16 = 2;

/// Starts the monitor thread. The socket is opened here, on the calling thread (so in its
/// network namespace); the thread then blocks on it for the life of the process and calls
/// `on_foreign_commit` after each commit made by another process.
pub fn spawn_commit_monitor(on_foreign_commit: impl Fn() + Send + 'static) -> io::Result<()> {
    let sock = mnl::Socket::open(mnl::Bus::Netfilter)?;
    sock.bind(
        1 << (NFNLGRP_NFTABLES - 1),
        mnl::mnl_sys::MNL_SOCKET_AUTOPID,
    )?;
    let sock = SendSocket(sock);
    std::thread::Builder::new()
        .name("nft-monitor".into())
        .spawn(move || {
            let sock = sock;
            let mut buf = vec![0u64; 8192];
            loop {
                // SAFETY: reinterpreting the aligned u64 buffer as bytes.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8)
                };
                let n = match sock.0.recv_raw(bytes) {
                    Ok(n) => n,
                    // ENOBUFS: events were lost; something happened, so report it.
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        on_foreign_commit();
                        continue;
                    }
                    Err(_) => return,
                };
                if foreign_commit(&bytes[..n]) {
                    on_foreign_commit();
                }
            }
        })?;
    Ok(())
}

struct SendSocket(mnl::Socket);
// SAFETY: the socket moves to the monitor thread and is used there only.
unsafe impl Send for SendSocket {}

/// True when the buffer holds a NEWGEN message from a thread of another process.
fn foreign_commit(buf: &[u8]) -> bool {
    let mut off = 0;
    let mut found = false;
    while off + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(buf[off + 4..off + 6].try_into().unwrap());
        if len < 16 || off + len > buf.len() {
            break;
        }
        if kind == NEWGEN && !gen_pid(&buf[off + 20..off + len]).is_some_and(ours) {
            found = true;
        }
        off += len.div_ceil(4) * 4;
    }
    found
}

/// True when thread `tid` belongs to this process.
fn ours(tid: u32) -> bool {
    std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
}

/// NFTA_GEN_PROC_PID from a NEWGEN's attributes (after the nfgenmsg header).
fn gen_pid(mut attrs: &[u8]) -> Option<u32> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == NFTA_GEN_PROC_PID && len >= 8 {
            return Some(u32::from_be_bytes(attrs[4..8].try_into().unwrap()));
        }
        let step = (len.div_ceil(4) * 4).min(attrs.len());
        attrs = &attrs[step..];
    }
    None
}
