//! Safe wrappers of the few libc calls outside the nftables FFI module that need `unsafe`:
//! integer socket options, a classic BPF socket filter, a datagram receive that tells
//! truncation, a listen backlog, `setns(2)`,
//! `malloc_trim(3)`, `mallopt(3)`, a unix socket peer's credentials, a group's id by name and
//! the local time zone's offset (`localtime_r(3)`).
//! Everything else in the crate stays free of `unsafe` (the crate denies it).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Sets an `int`-valued socket option.
pub fn set_int_sockopt(fd: impl AsFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the fd is borrowed (open for the call); setsockopt reads `size_of::<c_int>()`
    // bytes from a pointer to a live local.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an `int`-valued socket option.
pub fn get_int_sockopt(fd: impl AsFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the fd is borrowed; getsockopt writes at most `len` bytes into a live c_int.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Attaches a classic BPF program to a socket (`SO_ATTACH_FILTER`); the kernel copies it.
pub fn attach_socket_filter(fd: impl AsFd, program: &[libc::sock_filter]) -> io::Result<()> {
    /// 26 on every architecture edgenetd targets; the libc crate lacks it for glibc.
    const SO_ATTACH_FILTER: libc::c_int = 26;
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let prog = libc::sock_fprog {
        len,
        // The kernel only reads the program; the field is `*mut` for historical reasons.
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `program`, both alive for the call; the fd is borrowed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Receives one whole datagram into `buf` (cleared first, grown to fit: the datagram's
/// length is peeked with `MSG_TRUNC` first, so nothing is ever cut off). `MSG_DONTWAIT`, so
/// it suits a readiness loop (`WouldBlock` when nothing is queued). Returns its length.
pub fn recv_datagram(fd: impl AsFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    let fd = fd.as_fd().as_raw_fd();
    buf.clear();
    // SAFETY: a zero-length read writes nothing; the fd is borrowed for the call.
    let peeked = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            0,
            libc::MSG_PEEK | libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    if peeked < 0 {
        return Err(io::Error::last_os_error());
    }
    // An emulator may answer the peek with 0: the buffer then keeps its capacity.
    buf.reserve(peeked as usize);
    let cap = buf.capacity();
    // SAFETY: the kernel writes at most `cap` bytes at `buf`'s allocation, which has that
    // capacity; the fd is borrowed for the call.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), cap, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the first `n` bytes (at most `cap`: no `MSG_TRUNC` here) were written by the
    // kernel just now.
    unsafe { buf.set_len((n as usize).min(cap)) };
    Ok(n as usize)
}

/// Sets the accept backlog of a listening socket (`listen(2)` again: Linux then only
/// updates the backlog; the kernel caps it at `net.core.somaxconn`).
pub fn set_listen_backlog(fd: impl AsFd, backlog: i32) -> io::Result<()> {
    // SAFETY: a borrowed, open fd; listen takes no pointer.
    let rc = unsafe { libc::listen(fd.as_fd().as_raw_fd(), backlog) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A TCP listener on every address of both families at `port` (`[::]` with
/// `IPV6_V6ONLY` off, whatever `net.ipv6.bindv6only` says; IPv4 clients arrive as
/// v4-mapped addresses), with `SO_REUSEADDR` (as std's `bind` sets it) and `backlog`.
pub fn dual_stack_listener(port: u16, backlog: i32) -> io::Result<std::net::TcpListener> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: socket takes no pointer; a non-negative result is a new fd we own.
    let raw = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd nobody else owns; OwnedFd closes it on every error path.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    set_int_sockopt(&fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int_sockopt(&fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
    // SAFETY: an all-zero sockaddr_in6 is the unspecified address, port 0.
    let mut addr: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    addr.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    addr.sin6_port = port.to_be();
    // SAFETY: `addr` is a live sockaddr_in6 and its size is passed; the fd is borrowed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_in6).cast(),
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    set_listen_backlog(&fd, backlog)?;
    Ok(std::net::TcpListener::from(fd))
}

/// Moves the calling thread into the network namespace `ns` (an open `/run/netns/*` or
/// `/proc/*/ns/net` file). Threads started afterwards inherit it.
pub fn enter_net_namespace(ns: impl AsFd) -> io::Result<()> {
    // SAFETY: a borrowed, open fd; setns changes only the calling thread's namespace and
    // fails cleanly (EINVAL) when the fd is not a network namespace.
    let rc = unsafe { libc::setns(ns.as_fd().as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Gives free heap pages back to the system (glibc keeps them otherwise). A no-op on other C
/// libraries.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases pages the allocator holds free; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes every thread allocate from one malloc arena. glibc gives each thread that allocates
/// an arena of its own (up to eight per core), and each keeps its freed pages; the daemon's
/// few threads hardly contend, so one arena is the smaller resident set (measured by
/// `scripts/check-footprint.sh`). Call it before any thread is started.
pub fn single_malloc_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; no pointer is involved.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// A unix socket peer's credentials as the kernel recorded them at `connect(2)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCredentials {
    /// The peer's process id.
    pub pid: i32,
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
    /// Its supplementary groups (`SO_PEERGROUPS`).
    pub groups: Vec<u32>,
}

/// Reads `SO_PEERCRED` and `SO_PEERGROUPS` of a connected unix socket.
pub fn peer_credentials(fd: impl AsFd) -> io::Result<PeerCredentials> {
    let raw = fd.as_fd().as_raw_fd();
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is borrowed; getsockopt writes at most `len` bytes into a live ucred.
    let rc = unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCredentials {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
        groups: peer_groups(raw)?,
    })
}

/// `SO_PEERGROUPS` (Linux 4.13): the groups the peer held at `connect(2)`.
fn peer_groups(raw: libc::c_int) -> io::Result<Vec<u32>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: the buffer is live and `len` bytes long; the kernel writes at most `len`
        // bytes, or fails with ERANGE and sets `len` to the size it needs.
        let rc = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let needed = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(needed);
            return Ok(groups);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ERANGE) || needed <= groups.len() {
            return Err(err);
        }
        groups.resize(needed, 0);
    }
}

/// The id of the group `name` (through NSS, as `getent group` sees it); `None` when there
/// is no such group.
pub fn group_id(name: &str) -> io::Result<Option<u32>> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a group name"))?;
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        // SAFETY: plain old data, filled in by getgrnam_r.
        let mut group: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is to a live local or buffer of the length passed; the
        // strings getgrnam_r stores point into `buf`, which outlives their (unused) reads.
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut group,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        match rc {
            0 if result.is_null() => return Ok(None),
            0 => return Ok(Some(group.gr_gid)),
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            libc::ENOENT | libc::ESRCH => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// The local time zone's offset from UTC in seconds (east positive) at `unix_secs`, from
/// `localtime_r(3)` (`TZ`, else /etc/localtime); 0 when the C library cannot say.
pub fn utc_offset_at(unix_secs: i64) -> i32 {
    let t = unix_secs as libc::time_t;
    // SAFETY: `tm` is plain old data, all zeroes a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals; localtime_r (the thread-safe variant)
    // writes only `tm`.
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok { tm.tm_gmtoff as i32 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_sockopt_round_trips_on_a_socket() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int_sockopt(&sock, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).unwrap();
        let v = get_int_sockopt(&sock, libc::SOL_SOCKET, libc::SO_REUSEADDR).unwrap();
        assert_eq!(v, 1);
    }

    #[test]
    fn a_listeners_backlog_can_be_raised() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_listen_backlog(&l, 1024).unwrap();
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(
            set_listen_backlog(&sock, 1024).is_err(),
            "not a stream socket"
        );
    }

    #[test]
    fn a_dual_stack_listener_takes_both_families_on_one_socket() {
        let l = dual_stack_listener(0, 16).unwrap();
        let port = l.local_addr().unwrap().port();
        let v4 = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_, peer) = l.accept().unwrap();
        assert_eq!(peer.ip().to_canonical(), v4.local_addr().unwrap().ip());
        if let Ok(v6) = std::net::TcpStream::connect(("::1", port)) {
            let (_, peer) = l.accept().unwrap();
            assert_eq!(peer.ip(), v6.local_addr().unwrap().ip());
        }
        let busy = dual_stack_listener(port, 16).unwrap_err();
        assert_eq!(busy.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn a_socket_pair_peer_is_this_process_with_its_groups() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let cred = peer_credentials(&a).unwrap();
        assert_eq!(cred.pid, std::process::id() as i32);
        // SAFETY: getuid cannot fail.
        assert_eq!(cred.uid, unsafe { libc::getuid() });
        assert_eq!(group_id("root").unwrap(), Some(0));
        assert_eq!(group_id("no-such-group-edgenetd").unwrap(), None);
    }

    #[test]
    fn entering_a_file_that_is_no_namespace_fails_cleanly() {
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert!(enter_net_namespace(&f).is_err());
    }
}
