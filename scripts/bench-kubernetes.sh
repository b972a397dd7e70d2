#!/bin/sh
# Kubernetes source benchmark (prints figures): 5,000 Services with 20,000 endpoints served by
# the tests' fake API server (TLS, lists, watches), side by side with the same services from
# TOML and with kube-proxy's nftables layout loaded by nft -f.
#
#   scripts/bench-kubernetes.sh [--feed cluster|toml|kube-proxy|both|all]   (default all)
#                               [--services N] [--changes N] [--period MS] [--no-rollout]
#   scripts/bench-kubernetes.sh --pipeline                   the pure pipeline only (no root)
#   scripts/bench-kubernetes.sh --scale                      30,000 Services: cold start and
#                                                            5 changes (kube-proxy's regime)
#   scripts/bench-kubernetes.sh --status [--idle-seconds S]  the router's Lease
#                                                            (`status_namespace`): the API
#                                                            server's requests and bytes an hour
#                                                            idle (S seconds measured, 300 by
#                                                            default) and per Service change, and
#                                                            the router's cost per status write
#                                                            (50 Services unless --services)
#
# Prints the pure pipeline (JSON decode of the lists, translation, compose, cache write, one
# endpoint change) and the client's list over TLS; then runs the release daemon
# (`--features kubernetes`) in a throwaway network namespace, fed by the fake listening on
# that namespace's loopback: first list request to READY=1, the kernel objects of its table,
# 50 endpoint changes at random gaps (100-900 ms) with the service controller's full compare
# every 2 s among them (a compare that gives way to a change counts), timed to the element nftables' event group reports (median, p99, worst; how
# many met a full compare), a rollout (every endpoint of 100 services), the daemon's RSS.
# `--feed toml` runs the same services from a TOML file (the baseline; a change is a file
# rewrite, which the daemon picks up after its 200 ms quiet gap); `kube-proxy` loads
# kube-proxy's layout (the reference; only its nft -f is timed).
set -eu
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --locked --features kubernetes --bin edgenetd --example bench_kubernetes
bench=target/release/examples/bench_kubernetes
if [ "${1:-}" = "--pipeline" ]; then
  exec "$bench"
fi
[ "$(id -u)" = 0 ] || { echo "bench-kubernetes: needs root (network namespace)" >&2; exit 1; }
if [ "${1:-}" = "--scale" ]; then
  set -- --services 30000 --changes 5 --no-rollout
fi
ns="edgenetd-bench-k8s-$$"
ip netns add "$ns"
# The benchmark aborts on a failed check (release builds abort on panic): whatever it started
# in the namespace goes with the namespace.
trap 'ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null; ip netns del "$ns" 2>/dev/null || true' EXIT INT TERM
ip -n "$ns" link set lo up
echo "edgenetd kubernetes benchmark ($(git describe --always --dirty 2>/dev/null || echo '?'), kernel $(uname -r), $(nproc) CPUs)"
ip netns exec "$ns" "$bench" --daemon target/release/edgenetd --netns "$ns" "$@"
