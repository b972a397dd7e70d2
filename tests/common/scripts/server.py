# Test server: `server.py tcp|udp|both PORT 4|6 [NAME]`.
# Family 6 listens on :: (IPv4 clients show as ::ffff:a.b.c.d). Every connection or datagram is
# answered with a first line: NAME, or without a name the client's address as the server saw
# it. A TCP connection then echoes what it receives (prefixed with "NAME:" when named), and
# answers "peer?\n" with the client's address (a UDP "peer?\n" datagram gets "NAME ADDR"). Reports on stdout: "listening" once bound, then
# "conn ADDR" per accepted connection and "dgram ADDR" per datagram.
import socket, sys, threading

kind, port, family = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name = sys.argv[4] if len(sys.argv) > 4 else None
fam = socket.AF_INET6 if family == '6' else socket.AF_INET
any_addr = '::' if family == '6' else '0.0.0.0'
prefix = (name + ':').encode() if name else b''


def report(*words):
    print(*words, flush=True)


def first_line(addr):
    return ((name or addr[0]) + '\n').encode()


def talk(c, a):
    try:
        c.sendall(first_line(a))
        while True:
            d = c.recv(4096)
            if not d:
                break
            if d == b'peer?\n':
                c.sendall(prefix + (a[0] + '\n').encode())
            else:
                c.sendall(prefix + d)
    except OSError:
        pass
    finally:
        c.close()


def serve_tcp(s):
    while True:
        c, a = s.accept()
        report('conn', a[0])
        threading.Thread(target=talk, args=(c, a), daemon=True).start()


def serve_udp(s):
    while True:
        d, a = s.recvfrom(4096)
        report('dgram', a[0])
        if d == b'peer?\n':
            # The name and the client's address as the server saw it, on one line.
            s.sendto(((name or a[0]) + ' ' + a[0] + '\n').encode(), a)
        else:
            s.sendto(first_line(a), a)


loops = []
if kind in ('tcp', 'both'):
    t = socket.socket(fam, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((any_addr, port))
    t.listen(128)
    loops.append((serve_tcp, t))
if kind in ('udp', 'both'):
    u = socket.socket(fam, socket.SOCK_DGRAM)
    u.bind((any_addr, port))
    loops.append((serve_udp, u))
report('listening')
for f, s in loops[1:]:
    threading.Thread(target=f, args=(s,), daemon=True).start()
loops[0][0](loops[0][1])
