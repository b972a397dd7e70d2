#!/usr/bin/env bash
# aarch64 on a real arm64 kernel: boots Debian's arm64 kernel under qemu-system-aarch64 (TCG)
# with the project's arm64vm tool and runs the cross-built binary there with every controller
# the config enables — unlike qemu-user, nftables and ip rules work there. In a network
# namespace inside the guest: check, run with a notify socket and WATCHDOG_USEC, READY=1 and
# WATCHDOG=1, /healthz 200 and ready with 0 failures, routes/rules/tables in the kernel,
# the idle RSS on aarch64, STOPPING=1 and exit 0 on SIGTERM (scripts/arm64/guest/vm-guest.sh).
#
#   scripts/arm64/smoke-vm.sh [BINARY|ARM64_DEB] [CONFIG]
#       default: the cross-built release binary, config/edgenetd.toml. Given the arm64 .deb,
#       the guest unpacks it and runs the packaged /usr/bin/edgenetd on Debian's arm64 libnftnl
#       and libmnl, after `check` of the packaged default config.
# The tool: $ARM64VM, or the repository's copy, scripts/arm64/vm/arm64vm.sh. Its first
# run builds a guest image from Debian's arm64 packages (~30 s, ~150 MB cache), later runs boot
# in ~5 s.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${1:-target/aarch64-unknown-linux-gnu/release/edgenetd}
config=${2:-config/edgenetd.toml}
vm=${ARM64VM:-scripts/arm64/vm/arm64vm.sh}
[ -x "$vm" ] || { echo "smoke-vm: the arm64vm tool is not at $vm (set ARM64VM)" >&2; exit 3; }
case $bin in
  *.deb) [ "$(dpkg-deb -f "$bin" Architecture)" = arm64 ] || { echo "smoke-vm: $bin is not an arm64 package" >&2; exit 1; } ;;
  *) file -b "$bin" | grep -q "ARM aarch64" || { echo "smoke-vm: $bin is not an aarch64 binary" >&2; exit 1; } ;;
esac

stage=$(mktemp -d)
out=$(mktemp -d)
trap 'rm -rf "$stage" "$out"' EXIT
case $bin in
  *.deb) cp "$bin" "$stage/" ;;
  *) cp "$bin" "$stage/edgenetd" ;;
esac
cp "$config" "$stage/edgenetd.toml"
cp scripts/lib/notify-listener.py scripts/arm64/guest/vm-guest.sh "$stage/"
"$vm" --timeout 300 --out "$out" "$stage"/* -- 'bash vm-guest.sh'
