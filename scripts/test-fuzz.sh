#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time and fails on any crash, hang (-timeout) or
# out-of-memory (-rss_limit_mb). The committed seeds in fuzz/corpus/<target>/ are read, new
# inputs go to fuzz/run-corpus/<target>/ (ignored by git), crashes to fuzz/artifacts/.
#
# cargo-fuzz needs a nightly compiler (-Zsanitizer=address). A nightly toolchain is
# installed with rustup when missing (`scripts/install-deps.sh --fuzz`) rather than building
# with RUSTC_BOOTSTRAP=1 on stable: the sanitizer flags are only tested on nightly, and
# rustup fetches a minimal nightly in under a minute.
#
#   scripts/test-fuzz.sh                 every target, 60 s each
#   FUZZ_SECONDS=600 scripts/test-fuzz.sh http_head route_dump
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh --fuzz

seconds=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(config_load route_tail http_head route_dump nft_dump)
cd fuzz
# Built once for all targets (fuzz/Cargo.lock is committed).
cargo +nightly fuzz build
failed=()
for t in "${targets[@]}"; do
  mkdir -p "run-corpus/$t" "corpus/$t"
  echo "fuzz: $t for ${seconds}s"
  if ! cargo +nightly fuzz run "$t" "run-corpus/$t" "corpus/$t" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      >"run-corpus/$t.log" 2>&1; then
    tail -n 60 "run-corpus/$t.log" >&2
    failed+=("$t")
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "run-corpus/$t.log" |
      sed "s/^/fuzz: $t /"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "error: fuzz targets failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ok"
