"""Sends one real packet per case and reports what became of it, all cases at once.

stdin: a JSON list of {"id", "proto" (tcp|udp|icmp|icmpv6), "src", "sport", "dst", "dport"}.
stdout: a JSON list of {"id", "outcome" (accept|drop|reject), "answer"}: accept with the
receiver's answer line (TCP/UDP) or an echo reply (ICMP); reject when an RST or an ICMP
error came back; drop when nothing did before the timeout.
usage: prober.py TIMEOUT_SECONDS
"""
import errno
import json
import socket
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TIMEOUT = float(sys.argv[1])
REFUSALS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES,
            errno.EPERM, errno.ECONNRESET)


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def transport(case):
    kind = socket.SOCK_STREAM if case["proto"] == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(family(case["dst"]), kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.settimeout(TIMEOUT)
    if kind == socket.SOCK_DGRAM:
        # Without RECVERR a UDP socket ignores ICMP net/host unreachable (not "fatal").
        v6 = family(case["dst"]) == socket.AF_INET6
        s.setsockopt(socket.IPPROTO_IPV6 if v6 else socket.IPPROTO_IP,
                     25 if v6 else 11, 1)  # IPV6_RECVERR, IP_RECVERR
    try:
        s.bind((case["src"], case["sport"]))
        s.connect((case["dst"], case["dport"]))
        if kind == socket.SOCK_DGRAM:
            s.send(b"x")
        return "accept", s.recv(200).decode().strip()
    except socket.timeout:
        return "drop", ""
    except OSError as e:
        if e.errno in REFUSALS:
            return "reject", errno.errorcode.get(e.errno, str(e.errno))
        return "error", str(e)
    finally:
        s.close()


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo(case):
    v6 = case["proto"] == "icmpv6"
    ident = case["id"] & 0xFFFF
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    s = socket.socket(family(case["dst"]), socket.SOCK_RAW, proto)
    s.bind((case["src"], 0))
    req_type, reply_type, error_types = (128, 129, (1,)) if v6 else (8, 0, (3,))
    head = struct.pack("!BBHHH", req_type, 0, 0, ident, 1)
    payload = b"explain"
    csum = 0 if v6 else checksum(head + payload)
    try:
        s.sendto(struct.pack("!BBHHH", req_type, 0, csum, ident, 1) + payload, (case["dst"], 0))
    except OSError as e:
        s.close()
        if e.errno in REFUSALS:
            return "reject", errno.errorcode.get(e.errno, str(e.errno))
        return "error", str(e)
    deadline = time.monotonic() + TIMEOUT
    try:
        while (left := deadline - time.monotonic()) > 0:
            s.settimeout(left)
            try:
                data, peer = s.recvfrom(2048)
            except socket.timeout:
                break
            icmp = data if v6 else data[(data[0] & 0xF) * 4:]
            if icmp[0] == reply_type and struct.unpack("!H", icmp[4:6])[0] == ident:
                return "accept", peer[0]
            if icmp[0] in error_types:
                inner = icmp[8:]
                inner = inner[40:] if v6 else inner[(inner[0] & 0xF) * 4:]
                if len(inner) >= 6 and inner[0] == req_type and \
                        struct.unpack("!H", inner[4:6])[0] == ident:
                    return "reject", f"icmp type {icmp[0]} from {peer[0]}"
        return "drop", ""
    finally:
        s.close()


def probe(case):
    run = echo if case["proto"].startswith("icmp") else transport
    outcome, answer = run(case)
    return {"id": case["id"], "outcome": outcome, "answer": answer}


cases = json.load(sys.stdin)
with ThreadPoolExecutor(max_workers=64) as pool:
    print(json.dumps(list(pool.map(probe, cases))))
