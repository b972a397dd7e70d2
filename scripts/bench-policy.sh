#!/usr/bin/env bash
# Policy benchmark: 1,000 rules + 100,000 set elements, edgenetd versus `nft -f`, in a
# throwaway network namespace (never the host's). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --example bench_policy
exec unshare --net -- target/release/examples/bench_policy
