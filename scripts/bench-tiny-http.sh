#!/bin/sh
# edgenetd's HTTP server against tiny_http 0.12, side by side, in a throwaway network
# namespace on 127.0.0.1 (never the host's network). Needs root (unshare --net, setpriv to
# nobody for the task limit), util-linux (prlimit, setpriv) and iproute2. Takes about a minute.
set -eu
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --quiet --example vs_tiny_http
exec target/release/examples/vs_tiny_http
