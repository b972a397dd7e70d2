# Test client: `client.py tcp|udp|ping HOST [PORT] [--src ADDR] [--timeout S] [--count N]`.
# Without --count: prints the server's first line (for ping: PONG), or FAIL:<reason>.
# With --count N: N attempts, then one "ANSWER COUNT" line per distinct answer, failures
# counted as refused, timeout or error.
import argparse, collections, socket, struct, time

p = argparse.ArgumentParser()
p.add_argument('kind', choices=['tcp', 'udp', 'ping'])
p.add_argument('host')
p.add_argument('port', type=int, nargs='?', default=0)
p.add_argument('--src')
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


def ask():
    if a.kind == 'ping':
        return ping()
    kind = socket.SOCK_STREAM if a.kind == 'tcp' else socket.SOCK_DGRAM
    s = socket.socket(fam, kind)
    try:
        s.settimeout(a.timeout)
        if a.src:
            s.bind((a.src, 0))
        if a.kind == 'tcp':
            s.connect((a.host, a.port))
            with s.makefile() as f:
                return f.readline().strip()
        s.sendto(b'x', (a.host, a.port))
        return s.recvfrom(100)[0].decode().strip()
    finally:
        s.close()


if a.count is None:
    try:
        print(ask())
    except Exception as e:
        print('FAIL:' + str(e))
else:
    c = collections.Counter()
    for _ in range(a.count):
        try:
            c[ask()] += 1
        except ConnectionRefusedError:
            c['refused'] += 1
        except socket.timeout:
            c['timeout'] += 1
        except OSError:
            c['error'] += 1
    for k, v in sorted(c.items()):
        print(k, v)
