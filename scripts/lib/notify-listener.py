#!/usr/bin/env python3
"""A stand-in for systemd's notify socket, for smoke tests without systemd.

Binds a unix datagram socket at PATH (what NOTIFY_SOCKET points at) and writes every
datagram it receives to stdout as one line (fields joined by ' | '), flushed at once, until
it is killed. The smoke test greps that log for READY=1 and WATCHDOG=1.

    notify-listener.py /tmp/x/notify.sock > /tmp/x/notify.log &
"""
import os
import socket
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: notify-listener.py SOCKET_PATH", file=sys.stderr)
        return 2
    path = sys.argv[1]
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    # Announce readiness on stderr so the caller can wait for the bind.
    print(f"listening on {path}", file=sys.stderr, flush=True)
    while True:
        data = sock.recv(65536)
        fields = data.decode("utf-8", "replace").strip().split("\n")
        print(" | ".join(fields), flush=True)


if __name__ == "__main__":
    sys.exit(main())
