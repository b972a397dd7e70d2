#!/bin/sh
# Route benchmark: edgenetd's route controller and daemon vs `ip -batch` and `ip route
# replace`, for `/28 via` and `/32 via+dev` routes, in a throwaway network namespace (never
# the host's). Needs root (unshare --net) and iproute2. `scripts/bench-routes.sh 32` measures
# one shape (28 or 32).
set -eu
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --quiet --bin edgenetd --example bench_routes
exec target/release/examples/bench_routes "$PWD/target/release/edgenetd" "$@"
