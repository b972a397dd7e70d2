#!/bin/sh
# Route benchmark: edgenetd's route controller vs `ip -batch`, in a throwaway network
# namespace (never the host's). Needs root (unshare --net) and iproute2.
set -eu
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --quiet --bin edgenetd --example bench_routes
exec target/release/examples/bench_routes "$PWD/target/release/edgenetd"
