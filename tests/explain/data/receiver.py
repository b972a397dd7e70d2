"""Listens on every (proto, address, port) given and answers each TCP connection or UDP
datagram with one line: "<role> <local address> <local port> <peer address>" -- where the
packet arrived after any DNAT, and which source it carried after any SNAT.

usage: receiver.py ROLE tcp:ADDR:PORT udp:ADDR:PORT ...   (prints "ready" once bound)
"""
import selectors
import socket
import sys

role = sys.argv[1]
sel = selectors.DefaultSelector()
for spec in sys.argv[2:]:
    proto, rest = spec.split(":", 1)
    addr, port = rest.rsplit(":", 1)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(family, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    if proto == "tcp":
        s.listen(128)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, proto)
print("ready", flush=True)


def answer(local, peer):
    return f"{role} {local[0]} {local[1]} {peer[0]}\n".encode()


while True:
    for key, _ in sel.select():
        s = key.fileobj
        try:
            if key.data == "tcp":
                conn, peer = s.accept()
                conn.setblocking(True)
                conn.settimeout(1)
                conn.sendall(answer(conn.getsockname(), peer))
                conn.close()
            else:
                _, peer = s.recvfrom(2048)
                s.sendto(answer(s.getsockname(), peer), peer)
        except OSError:
            pass
