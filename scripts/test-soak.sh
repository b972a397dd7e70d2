#!/usr/bin/env bash
# Churn soak: edgenetd under random config changes, invalid configs, SIGHUP storms,
# interference with its kernel objects, foreign objects, backends and links going down and
# up, with the kernel checked against the desired state (through `nft -j` and `ip -j`) after
# every churn. Everything runs in a throwaway network namespace (unshare) and a temporary
# directory; it stops by itself and prints a figures block. Exit 1 on any invariant violation.
#
#   scripts/test-soak.sh                    # short mode: ~3 minutes (CI)
#   scripts/test-soak.sh --long             # long mode: 30 minutes
#   scripts/test-soak.sh --minutes 120      # any length
#   options: --seed N (replay a run), --bin PATH (default: target/release/edgenetd, built if absent),
#            --sabotage (freezes the daemon over one quiet period: the run must report violations)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "soak.sh must run as root (it creates a network namespace)" >&2; exit 1; }

seconds=180
seed=$(date +%s)
bin=target/release/edgenetd
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --long) seconds=1800 ;;
    --minutes) seconds=$(( $2 * 60 )); shift ;;
    --seed) seed=$2; shift ;;
    --bin) bin=$2; shift ;;
    --sabotage) extra+=(--sabotage) ;;
    *) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if [ ! -x "$bin" ]; then
  source scripts/install-deps.sh
  cargo build --release --locked --bin edgenetd
fi
work=$(mktemp -d /tmp/edgenetd-soak.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "soak: $((seconds / 60)) min, seed $seed, binary $bin, work dir $work"
# The driver, the daemon and every object live in this namespace; it goes away with them.
# The hard timeout bounds a hung run (the driver's own end comes long before it).
timeout --kill-after=10 $((seconds + 120)) \
  unshare --net python3 scripts/lib/soak.py --binary "$(realpath "$bin")" --seconds "$seconds" \
    --seed "$seed" --workdir "$work" "${extra[@]}" || {
  rc=$?
  echo "soak: FAILED (exit $rc); the daemon's log:" >&2
  tail -n 40 "$work/edgenetd.log" >&2 || true
  exit 1
}
