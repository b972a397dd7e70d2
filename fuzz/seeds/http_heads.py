#!/usr/bin/env python3
"""Seeds fuzz/corpus/http_head/ with request heads: good ones (origin and absolute form,
HTTP/1.0 and 1.1, pipelined), and the shapes the server refuses (no Host, two Hosts, an
unknown version, authority form, invalid UTF-8, too many headers, a bare LF)."""
import hashlib
import pathlib

d = pathlib.Path(__file__).resolve().parents[1] / "corpus/http_head"
d.mkdir(parents=True, exist_ok=True)
heads = [
    b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /metrics HTTP/1.0\r\n\r\n",
    b"GET /status?format=json HTTP/1.1\r\nHost: 10.0.0.1:9750\r\nAccept: */*\r\n\r\n",
    b"GET http://10.0.0.1:9750/healthz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET HTTPS://h?q HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET http:///nohost HTTP/1.1\r\nHost: a\r\n\r\n",
    b"HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"POST /reload HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
    b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1 x\r\nHost: a\r\n\r\n",
    b"CONNECT example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /\xff\xfe HTTP/1.1\r\nHost: \xc3\x28\r\n\r\n",
    b"GET / HTTP/1.1\nHost: a\n\n",
    b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(70)) + b"\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 9000 + b"\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: a\r\n",
]
for h in heads:
    (d / hashlib.sha1(h).hexdigest()[:16]).write_bytes(h)
print(f"{len(heads)} heads into {d}")
