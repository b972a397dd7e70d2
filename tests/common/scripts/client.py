# Test client: `client.py tcp|udp|ping HOST [PORT] [--src ADDR] [--sport N] [--peer] [--timeout S]
# [--count N]`. --peer: the answer is "FIRST PEER", PEER the client address the server saw.
# --sport: bind that source port and connect the socket (UDP then sees ICMP errors as refused;
# a send the router's own output chain refuses is `eperm`). Single answers report failures as
# FAIL:refused, FAIL:timeout, FAIL:eperm or FAIL:<reason>.
# Without --count: prints the server's first line (for ping: PONG), or FAIL:<reason>.
# With --count N: N attempts, then one "ANSWER COUNT" line per distinct answer, failures
# counted as refused, timeout or error.
import argparse, collections, socket, struct, time

p = argparse.ArgumentParser()
p.add_argument('kind', choices=['tcp', 'udp', 'ping'])
p.add_argument('host')
p.add_argument('port', type=int, nargs='?', default=0)
p.add_argument('--src')
p.add_argument('--sport', type=int, default=0)
p.add_argument('--peer', action='store_true')
p.add_argument('--timeout', type=float, default=1.5)
p.add_argument('--count', type=int)
a = p.parse_args()
fam = socket.AF_INET6 if ':' in a.host else socket.AF_INET


def csum(b):
    b += b'\0' * (len(b) % 2)
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    t = (t >> 16) + (t & 0xffff)
    t += t >> 16
    return ~t & 0xffff


def ping():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    hdr = struct.pack('!BBHHH', 8, 0, 0, 0x4242, 1) + b'edgenetd'
    hdr = hdr[:2] + struct.pack('!H', csum(hdr)) + hdr[4:]
    s.sendto(hdr, (a.host, 0))
    end = time.time() + a.timeout
    while True:
        s.settimeout(max(0.01, end - time.time()))
        d, peer = s.recvfrom(200)
        if peer[0] == a.host and d[20] == 0:
            return 'PONG'


def unmapped(answer):
    # A server listening on :: sees IPv4 clients as ::ffff:a.b.c.d.
    return answer.replace('::ffff:', '')


def ask():
    if a.kind == 'ping':
        return ping()
    kind = socket.SOCK_STREAM if a.kind == 'tcp' else socket.SOCK_DGRAM
    s = socket.socket(fam, kind)
    try:
        s.settimeout(a.timeout)
        if a.sport:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if a.src or a.sport:
            s.bind((a.src or ('::' if fam == socket.AF_INET6 else '0.0.0.0'), a.sport))
        if a.kind == 'tcp':
            s.connect((a.host, a.port))
            with s.makefile('rw') as f:
                first = f.readline().strip()
                if not a.peer:
                    return first
                f.write('peer?\n')
                f.flush()
                return first + ' ' + unmapped(f.readline().strip().split(':', 1)[-1])
        msg = b'peer?\n' if a.peer else b'x'
        if a.sport:
            s.connect((a.host, a.port))
            s.send(msg)
            return unmapped(s.recv(100).decode().strip())
        s.sendto(msg, (a.host, a.port))
        return unmapped(s.recvfrom(100)[0].decode().strip())
    finally:
        s.close()


if a.count is None:
    try:
        print(ask())
    except ConnectionRefusedError:
        print('FAIL:refused')
    except PermissionError:
        print('FAIL:eperm')
    except socket.timeout:
        print('FAIL:timeout')
    except Exception as e:
        print('FAIL:' + str(e))
else:
    c = collections.Counter()
    for _ in range(a.count):
        try:
            c[ask()] += 1
        except ConnectionRefusedError:
            c['refused'] += 1
        except PermissionError:
            c['eperm'] += 1
        except socket.timeout:
            c['timeout'] += 1
        except OSError:
            c['error'] += 1
    for k, v in sorted(c.items()):
        print(k, v)
