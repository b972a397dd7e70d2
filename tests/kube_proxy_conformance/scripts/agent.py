# Conformance client: reads one JSON request a line on stdin, answers one JSON list a line.
# Request: {"proto": "tcp"|"udp"|"sctp", "dst": ADDR, "port": N, "src": ADDR|null, "sport": N|null,
#           "count": N, "timeout": S, "parallel": bool}
# Each attempt answers one string: "hit NAME LOCAL_IP LOCAL_PORT PEER_IP" (the endpoint's
# line), "refused" (RST or ICMP port unreachable: a reject), "unreachable" (ICMP host/net
# unreachable or administratively prohibited: also a reject), "timeout" (nothing came back: a
# drop), or "error ERRNO".
import errno, json, socket, sys, threading


def one(req, out, i):
    fam = socket.AF_INET6 if ':' in req['dst'] else socket.AF_INET
    kind = socket.SOCK_DGRAM if req['proto'] == 'udp' else socket.SOCK_STREAM
    s = socket.socket(fam, kind, 132 if req['proto'] == 'sctp' else 0)
    try:
        s.settimeout(req['timeout'])
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if req.get('src') or req.get('sport'):
            s.bind((req.get('src') or '', req.get('sport') or 0))
        s.connect((req['dst'], req['port']))
        if kind == socket.SOCK_STREAM:
            data = b''
            while not data.endswith(b'\n'):
                chunk = s.recv(200)
                if not chunk:
                    break
                data += chunk
        else:
            s.send(b'probe\n')
            data = s.recv(200)
        text = data.decode(errors='replace').strip()
        out[i] = ('hit ' + text) if text else 'error empty'
    except socket.timeout:
        out[i] = 'timeout'
    except ConnectionRefusedError:
        out[i] = 'refused'
    except OSError as e:
        if e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, errno.EPERM):
            out[i] = 'unreachable'
        else:
            out[i] = 'error ' + errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()


for raw in sys.stdin:
    req = json.loads(raw)
    out = [None] * req['count']
    if req.get('parallel'):
        threads = [threading.Thread(target=one, args=(req, out, i)) for i in range(req['count'])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for i in range(req['count']):
            one(req, out, i)
    print(json.dumps(out), flush=True)
