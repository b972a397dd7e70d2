//! One netlink message sent to the kernel: the send the conntrack and nflog sockets share.
#![allow(unsafe_code)]

use std::io;

/// Sends `msg` on the netlink socket `fd` to the kernel (port 0).
pub(super) fn to_kernel(fd: i32, msg: &[u8]) -> io::Result<()> {
    // SAFETY: a zeroed sockaddr_nl addresses the kernel; `msg` is a valid buffer for its
    // length, and the caller owns `fd` for the call.
    let n = unsafe {
        let mut addr: libc::sockaddr_nl = std::mem::zeroed();
        addr.nl_family = libc::AF_NETLINK as u16;
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
