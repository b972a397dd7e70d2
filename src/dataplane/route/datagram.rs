//! The socket type under every route netlink connection: smol's netlink socket, except that a
//! successful send always counts as the whole datagram.
//!
//! Why: Linux sends a netlink datagram whole or not at all, but qemu-user (used to smoke-test
//! the aarch64 build) translates route messages and then reports a short byte count for a send
//! the kernel fully received. netlink-proto takes a short count for a broken socket and closes
//! the connection, so under qemu every route write would fail. On a real kernel this mapping
//! changes nothing.

use std::io;
use std::task::{Context, Poll};

use rtnetlink::sys::{AsyncSocket, SmolSocket, Socket, SocketAddr};

/// [`SmolSocket`] whose successful sends report the full length.
pub struct WholeDatagramSocket(SmolSocket);

fn whole(result: Poll<io::Result<usize>>, len: usize) -> Poll<io::Result<usize>> {
    result.map(|r| r.map(|n| if n > 0 { len } else { n }))
}

impl AsyncSocket for WholeDatagramSocket {
    fn socket_ref(&self) -> &Socket {
        self.0.socket_ref()
    }

    fn socket_mut(&mut self) -> &mut Socket {
        self.0.socket_mut()
    }

    fn new(protocol: isize) -> io::Result<Self> {
        SmolSocket::new(protocol).map(WholeDatagramSocket)
    }

    fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        whole(self.0.poll_send(cx, buf), buf.len())
    }

    fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        addr: &SocketAddr,
    ) -> Poll<io::Result<usize>> {
        whole(self.0.poll_send_to(cx, buf, addr), buf.len())
    }

    fn poll_recv<B>(&self, cx: &mut Context<'_>, buf: &mut B) -> Poll<io::Result<()>>
    where
        B: bytes::BufMut,
    {
        self.0.poll_recv(cx, buf)
    }

    fn poll_recv_from<B>(&self, cx: &mut Context<'_>, buf: &mut B) -> Poll<io::Result<SocketAddr>>
    where
        B: bytes::BufMut,
    {
        self.0.poll_recv_from(cx, buf)
    }

    fn poll_recv_from_full(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Vec<u8>, SocketAddr)>> {
        self.0.poll_recv_from_full(cx)
    }
}
