#!/bin/sh
# Service dataplane benchmark (prints figures): edgenetd's layout vs kube-proxy's nftables
# layout, in a throwaway network namespace. Usage: scripts/bench-services.sh [N...]
# (default 1000 10000). SKIP_KUBE_PROXY=1 skips the slow kube-proxy load.
set -eu
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --example bench_services
exec unshare --net -- target/release/examples/bench_services "$@"
