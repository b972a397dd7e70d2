#!/usr/bin/env bash
# Runs the nftables dataplane and policy kernel tests on a real arm64 kernel (Debian's 6.1,
# under qemu-system-aarch64 via scripts/arm64/vm/arm64vm.sh): cross-compiles the test binaries,
# copies them into the guest and runs them there (each test in its own network namespace).
# The daemon-level test (which needs the edgenetd binary at its build path) is skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
vm=${ARM64VM:-scripts/arm64/vm/arm64vm.sh}
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export PKG_CONFIG_ALLOW_CROSS=1
export PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig
out=$(nice -n 10 cargo test --no-run --target aarch64-unknown-linux-gnu --features fault-injection \
  --test dataplane --test policy --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
while read -r name exe; do
  cp "$exe" "$dir/$name"
  aarch64-linux-gnu-strip "$dir/$name"
done <<<"$out"
# The guest's /bin/sh is busybox, whose built-in `ip` lacks netns: use bash as sh there.
"$vm" --timeout 1200 "$dir" -- "ln -sf /bin/bash /bin/sh; cd $(basename "$dir"); uname -m -r;
  ./dataplane --test-threads=1 nft:: && ./policy --test-threads=1 packets:: &&
  ./policy --test-threads=1 fault:: --skip the_daemon_stays"
