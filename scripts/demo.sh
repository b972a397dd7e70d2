#!/usr/bin/env bash
# Builds edgenetd and runs it on config/edgenetd.toml, safely: every kernel change happens in a
# throwaway network namespace that has the example's links (br-lan, eth0), while the HTTP
# endpoints are served on this machine's 127.0.0.1:9750. Ctrl-C stops it and deletes the
# namespace. EDGENETD_DEMO_SECONDS=N stops it by itself after N seconds (used by CI).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh

config=${EDGENETD_DEMO_CONFIG:-config/edgenetd.toml}
ns="edgenetd-demo-$$"
cargo build --release --quiet
bin=target/release/edgenetd

cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# The router's links, as the example config expects them, all inside the namespace.
source scripts/example-netns.sh
example_netns_create "$ns"

"$bin" check --config "$config"
"$bin" run --config "$config" --netns "$ns" &
pid=$!

cat <<MSG

edgenetd is running (pid $pid); its kernel changes live in network namespace $ns.
  curl -s http://127.0.0.1:9750/healthz        health, one entry per controller
  curl -s http://127.0.0.1:9750/metrics        Prometheus metrics
  $bin status                     the same health as a table
  ip netns exec $ns nft list ruleset
  ip netns exec $ns ip route show proto 190 table all
  ip netns exec $ns ip rule show
Edit $config and save (or kill -HUP $pid) to reload. Ctrl-C stops and removes the namespace.

MSG
if [ -n "${EDGENETD_DEMO_SECONDS:-}" ]; then
  sleep "$EDGENETD_DEMO_SECONDS"
  "$bin" status
  curl -sf http://127.0.0.1:9750/readyz
  echo "--- kernel state in $ns"
  in_ns nft list tables
  in_ns ip route show proto 190 table all
else
  wait "$pid"
fi
