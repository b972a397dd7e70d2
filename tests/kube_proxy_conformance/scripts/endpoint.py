# Conformance endpoint: `endpoint.py NAME PORT...`. Listens on every PORT on any address: TCP
# on :: (IPv4 as mapped addresses), UDP on one socket per family, SCTP where the kernel has
# it. Every connection and datagram is answered with one line: "NAME LOCAL_IP LOCAL_PORT
# PEER_IP", the address the packet was delivered to (after any DNAT) and the peer it came
# from (after any SNAT), so a probe can assert both instead of assuming them. Prints
# "listening" once every socket is bound.
import socket, sys, threading

name, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]


def plain(addr):
    return addr[7:] if addr.startswith('::ffff:') else addr


def line(local, peer):
    return ('%s %s %d %s\n' % (name, plain(local[0]), local[1], plain(peer[0]))).encode()


def tcp(s):
    while True:
        c, peer = s.accept()
        try:
            c.sendall(line(c.getsockname(), peer))
        except OSError:
            pass
        # The probe closes first, so this side holds no TIME_WAIT.
        threading.Thread(target=drain, args=(c,), daemon=True).start()


def drain(c):
    try:
        c.settimeout(10)
        while c.recv(4096):
            pass
    except OSError:
        pass
    finally:
        c.close()


def udp(fam, port):
    # The packet-info option gives each datagram's local address, so the answer names the
    # endpoint address that was hit and leaves from it (a reply from another source address
    # of a host holding several would not match the conntrack entry of the DNAT).
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
        s.bind(('::', port))
    else:
        s.setsockopt(socket.SOL_IP, IP_PKTINFO, 1)
        s.bind(('0.0.0.0', port))
    return s


IP_PKTINFO = 8


def serve_udp(s, port):
    v6 = s.family == socket.AF_INET6
    while True:
        _data, anc, _flags, peer = s.recvmsg(4096, 256)
        local = None
        for level, kind, value in anc:
            if v6 and level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
                local = socket.inet_ntop(socket.AF_INET6, value[:16])
                info = (socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, value[:16] + bytes(4))
            elif not v6 and level == socket.SOL_IP and kind == IP_PKTINFO:
                local = socket.inet_ntop(socket.AF_INET, value[8:12])
                info = (socket.SOL_IP, IP_PKTINFO, bytes(4) + value[8:12] + bytes(4))
        if local is None:
            continue
        try:
            s.sendmsg([line((local, port), peer)], [info], 0, peer)
        except OSError:
            pass


for port in ports:
    t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(('::', port))
    t.listen(256)
    threading.Thread(target=tcp, args=(t,), daemon=True).start()
    for fam in (socket.AF_INET, socket.AF_INET6):
        threading.Thread(target=serve_udp, args=(udp(fam, port), port), daemon=True).start()
    try:
        # SCTP where the kernel has it: answered like TCP.
        x = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, 132)
        x.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        x.bind(('::', port))
        x.listen(64)
        threading.Thread(target=tcp, args=(x,), daemon=True).start()
    except OSError:
        pass
print('listening', flush=True)
threading.Event().wait()
