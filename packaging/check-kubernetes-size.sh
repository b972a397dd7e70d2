#!/usr/bin/env bash
# The `kubernetes` feature's cost, checked (called by packaging/ci.sh after the default aarch64
# build exists; prints its figures, exits 1 on a failed check):
#   - `cargo tree` of the feature build has no aws-lc, tokio or hyper;
#   - the default build's dependencies are the feature build's minus the feature's own crates
#     (the feature only adds; the crates it adds are printed);
#   - the aarch64 release build with the feature (its own target dir, so the default binary
#     that the packages and the footprint use stays as it is) is stripped and at most
#     3,300,000 bytes; printed beside the default build's size;
#   - the default aarch64 binary holds no trace of the feature's TLS stack (no "rustls" string).
# EDGENETD_NO_BUILD=1 checks the feature binary already in target/kubernetes.
# EDGENETD_KUBERNETES_SIZE_BUDGET=BYTES replaces the 3,300,000-byte budget for one run (how the
# size check is shown to fail: a budget below the binary's size must exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "kubernetes size check: FAIL: $*" >&2; exit 1; }
target=aarch64-unknown-linux-gnu
default_bin=target/$target/release/edgenetd
feature_dir=target/kubernetes
feature_bin=$feature_dir/$target/release/edgenetd
budget=${EDGENETD_KUBERNETES_SIZE_BUDGET:-3300000}

[ -x "$default_bin" ] || fail "$default_bin missing (build the default aarch64 binary first)"

tree() { cargo tree --locked -e normal --prefix none "$@" | sed 's/ (\*)$//' | sort -u; }
default_tree=$(tree)
feature_tree=$(tree --features kubernetes)
if grep -E '^(aws-lc|tokio|hyper)' <<< "$feature_tree"; then
  fail "the kubernetes feature pulls in aws-lc, tokio or hyper"
fi
only_default=$(comm -23 <(echo "$default_tree") <(echo "$feature_tree"))
[ -z "$only_default" ] || fail "crates in the default build but not in the feature build: $only_default"
added=$(comm -13 <(echo "$default_tree") <(echo "$feature_tree") | grep -v '^edgenetd ' || true)
echo "the feature adds $(grep -c . <<< "$added") crates: $(tr '\n' ' ' <<< "$added")"
for crate in rustls futures-rustls ring; do
  grep -q "^$crate " <<< "$default_tree" && fail "$crate is in the default build's tree"
done

# Not `strings | grep -q` under pipefail: strings killed by SIGPIPE after a match would
# fail the pipeline and read as "no match".
if grep -qi rustls < <(strings "$default_bin"); then
  fail "$default_bin mentions rustls: the default build links the feature's TLS stack"
fi

if [ -z "${EDGENETD_NO_BUILD:-}" ]; then
  CARGO_TARGET_DIR=$feature_dir EDGENETD_SKIP_DEPS=1 scripts/arm64/cross-build.sh --features kubernetes >/dev/null
fi
[ -x "$feature_bin" ] || fail "$feature_bin missing"
info=$(file -b "$feature_bin")
grep -q "ARM aarch64" <<< "$info" || fail "$feature_bin is $info"
grep -q "not stripped" <<< "$info" && fail "$feature_bin is not stripped"
size=$(stat -c %s "$feature_bin")
default_size=$(stat -c %s "$default_bin")
mb() { awk -v b="$1" 'BEGIN { printf "%.2f MB", b / 1000000 }'; }
printf '  %-44s %-26s %-10s %s\n' "figure" "measured" "budget" ""
printf '  %-44s %-26s %-10s %s\n' "aarch64 release, default (stripped)" "$default_size B ($(mb "$default_size"))" "2.5 MB" ""
printf '  %-44s %-26s %-10s %s\n' "aarch64 release, --features kubernetes" "$size B ($(mb "$size"))" "$(mb "$budget")" \
  "$([ "$size" -le "$budget" ] && echo ok || echo "OVER BUDGET")"
printf '  %-44s %-26s\n' "  the feature adds" "$((size - default_size)) B ($(mb $((size - default_size))))"
# Link-time optimisation drops code nothing calls: a feature build whose daemon does not start
# the client is as small as the default one, and its figure says nothing.
if [ $((size - default_size)) -lt 100000 ]; then
  echo "  note: the feature adds under 100 kB: the daemon does not use the client (LTO dropped it)"
fi
[ "$size" -le "$budget" ] || fail "$feature_bin is $size bytes, over the $budget budget"
echo "kubernetes feature: ok"
