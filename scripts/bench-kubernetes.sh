#!/bin/sh
# Kubernetes source benchmark (prints figures): 5,000 Services with 20,000 endpoints served by
# the tests' fake API server (TLS, paged lists, watches).
#
#   scripts/bench-kubernetes.sh [--feed cluster|toml|both]   (default both)
#   scripts/bench-kubernetes.sh --pipeline                   the pure pipeline only (no root)
#
# Prints the pure pipeline (JSON decode of the lists, translation, compose, cache write, one
# endpoint change) and the client's list over TLS; then runs the release daemon
# (`--features kubernetes`) in a throwaway network namespace, fed by the fake listening on
# that namespace's loopback: first list request to READY=1, one endpoint change to the kernel
# (polled with `nft get element` on the service's slots), the daemon's RSS. `--feed toml` runs
# the same services from a TOML file (the baseline; a change is a file rewrite, which the
# daemon picks up after its 200 ms quiet gap).
set -eu
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --locked --features kubernetes --bin edgenetd --example bench_kubernetes
bench=target/release/examples/bench_kubernetes
if [ "${1:-}" = "--pipeline" ]; then
  exec "$bench"
fi
[ "$(id -u)" = 0 ] || { echo "bench-kubernetes: needs root (network namespace)" >&2; exit 1; }
feed=both
if [ "${1:-}" = "--feed" ]; then feed=$2; fi
ns="edgenetd-bench-k8s-$$"
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT INT TERM
ip -n "$ns" link set lo up
echo "edgenetd kubernetes benchmark ($(git describe --always --dirty 2>/dev/null || echo '?'), kernel $(uname -r), $(nproc) CPUs)"
ip netns exec "$ns" "$bench" --daemon target/release/edgenetd --netns "$ns" --feed "$feed"
