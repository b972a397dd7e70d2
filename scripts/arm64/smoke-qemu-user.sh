#!/usr/bin/env bash
# aarch64 smoke test: runs the cross-built binary under qemu-aarch64-static (no binfmt needed)
# inside a throwaway network namespace, never touching the host's network.
#
#   scripts/arm64/smoke-qemu-user.sh [BINARY]     (default target/aarch64-unknown-linux-gnu/release/edgenetd,
#                                            built by scripts/arm64/cross-build.sh)
#
# 1. `--version`, and `check` on the example config (config/edgenetd.toml).
# 2. `run` with the route controller only (scripts/arm64/guest/route.toml; qemu-user refuses
#    NETLINK_NETFILTER sockets, so the nftables controllers are disabled there and tested
#    natively or in tools/arm64vm), with NOTIFY_SOCKET bound by scripts/lib/notify-listener.py
#    and WATCHDOG_USEC=2 s:
#      READY=1 and WATCHDOG=1 arrive; /healthz answers 200 with every controller live;
#      the routes are in the namespace with protocol 190 (ip rules: qemu-user cannot carry
#      RTM_*RULE messages, see scripts/arm64/guest/route.toml);
#      a conf.d file added + SIGHUP installs its route (RELOADING=1, READY=1 again);
#      a route deleted behind the daemon's back comes back (drift repair);
#      SIGTERM sends STOPPING=1 and the process exits 0; the routes stay.
# Needs root, iproute2, python3, curl, qemu-user-static and the arm64 glibc/libnftnl/libmnl
# (multiarch, installed by the cross-build script).
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${1:-target/aarch64-unknown-linux-gnu/release/edgenetd}
config_src=${SMOKE_CONFIG:-scripts/arm64/guest/route.toml}
example=${SMOKE_EXAMPLE_CONFIG:-config/edgenetd.toml}
# QEMU= (empty) runs BINARY natively: the same checks for an x86_64 build (debugging this script).
qemu=${QEMU-qemu-aarch64-static}
timeout_s=${SMOKE_TIMEOUT:-60}

fail() { echo "smoke-qemu-user: FAIL: $*" >&2; dump; exit 1; }
step() { echo "smoke-qemu-user: $*"; }
dump() {
  [ -n "${work:-}" ] || return 0
  echo "--- daemon log (last 40 lines)" >&2; tail -n 40 "$work/daemon.log" >&2 2>/dev/null || true
  echo "--- notify messages" >&2; cat "$work/notify.log" >&2 2>/dev/null || true
}

[ -f "$bin" ] || { echo "smoke-qemu-user: $bin missing: run scripts/arm64/cross-build.sh" >&2; exit 1; }
if [ -n "$qemu" ]; then
  command -v "$qemu" >/dev/null || { echo "smoke-qemu-user: $qemu not found (apt-get install qemu-user-static)" >&2; exit 1; }
  file -b "$bin" | grep -q "ARM aarch64" || { echo "smoke-qemu-user: $bin is not an aarch64 ELF: $(file -b "$bin")" >&2; exit 1; }
fi
arch=$(file -b "$bin" | grep -q "ARM aarch64" && echo aarch64 || uname -m)
[ "$(id -u)" = 0 ] || { echo "smoke-qemu-user: needs root (network namespace)" >&2; exit 1; }

ns="edgenetd-smoke-$$"
work=$(mktemp -d /tmp/edgenetd-smoke.XXXXXX)
pid=''; listener=''
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  [ -n "$listener" ] && kill "$listener" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && fail "daemon exited while waiting for $what"
    [ $SECONDS -ge $deadline ] && fail "no $what within ${secs}s"
    sleep 0.2
  done
}
notified() { grep -q -- "$1" "$work/notify.log"; }
count_notified() { grep -c -- "$1" "$work/notify.log" || true; }
in_ns() { ip netns exec "$ns" "$@"; }

step "$($qemu "$bin" --version) ($(file -b "$bin" | cut -d, -f1-2))"
$qemu "$bin" check --config "$example" || fail "check rejected $example"
step "check $example: ok"

# The example's links: br-lan (LAN bridge) and eth0 (uplink, a veth).
source scripts/lib/example-netns.sh
example_netns_create "$ns"

mkdir -p "$work/etc/conf.d"
cp "$config_src" "$work/etc/edgenetd.toml"
config="$work/etc/edgenetd.toml"
has_routes=$(grep -c '^\[\[route\]\]' "$config" || true)

python3 scripts/lib/notify-listener.py "$work/notify.sock" > "$work/notify.log" 2> "$work/listener.err" &
listener=$!
wait_for "notify socket" 10 test -S "$work/notify.sock"

start_ms=$(date +%s%3N)
NOTIFY_SOCKET="$work/notify.sock" WATCHDOG_USEC=2000000 EDGENETD_LOG=debug \
  ip netns exec "$ns" $qemu "$bin" run --config "$config" \
    --control-socket "$work/control.sock" --state-dir "$work/state" > "$work/daemon.log" 2>&1 &
pid=$!

wait_for "READY=1" "$timeout_s" notified "READY=1"
step "READY=1 after $(( $(date +%s%3N) - start_ms )) ms (${qemu:-native})"
wait_for "WATCHDOG=1" 10 notified "WATCHDOG=1"
step "WATCHDOG=1 received"

code=$(in_ns curl -s -o "$work/healthz.json" -w '%{http_code}' http://127.0.0.1:9750/healthz) || true
[ "$code" = 200 ] || fail "/healthz answered $code: $(cat "$work/healthz.json" 2>/dev/null)"
python3 - "$work/healthz.json" "$has_routes" <<'PY' || fail "/healthz body: $(cat "$work/healthz.json")"
import json, sys
h = json.load(open(sys.argv[1]))
assert h["live"] is True, "not live"
assert "lastUpdated" in h and "currentTime" in h, "kube-proxy fields missing"
ctl = h.get("controllers", {})
if int(sys.argv[2]) > 0:
    assert "route" in ctl, f"no route controller in {list(ctl)}"
    assert ctl["route"]["live"] is True, "route not live"
    assert ctl["route"]["failures"] == 0, f"route sync failures: {ctl['route'].get('lastError')}"
PY
step "/healthz 200, live"
in_ns curl -sf -o "$work/metrics.txt" http://127.0.0.1:9750/metrics || fail "/metrics failed"
grep -q "^edgenetd_build_info{.*arch=\"$arch\"" "$work/metrics.txt" \
  || fail "/metrics lacks edgenetd_build_info with arch=$arch"
step "/metrics: build_info arch=$arch"

if [ "$has_routes" -gt 0 ]; then
  routes() { in_ns ip -j route show proto 190 table all; in_ns ip -6 -j route show proto 190 table all; }
  has_route() { local all; all=$(routes); [[ $all == *"\"dst\":\"$1\""* ]]; }
  for dst in default 10.20.0.0/16 198.51.100.0/24 2001:db8:20::/48; do
    wait_for "route $dst" 10 has_route "$dst"
  done
  grep -q '^10.20.0.0/16 via 192.168.1.254 dev br-lan' <<< "$(in_ns ip route show table 100 proto 190)" \
    || fail "10.20.0.0/16 not in table 100: $(in_ns ip route show table 100)"
  grep -q '^blackhole 198.51.100.0/24' <<< "$(in_ns ip route show proto 190)" || fail "blackhole route missing"
  step "routes installed (proto 190): $(routes | grep -o '"dst":"[^"]*"' | sort -u | tr '\n' ' ')"

  # Reload: a conf.d file and SIGHUP.
  readies=$(count_notified "READY=1")
  printf '[[route]]\nto = "10.30.0.0/16"\nvia = "192.168.1.254"\ndev = "br-lan"\n' > "$work/etc/conf.d/50-extra.toml"
  kill -HUP "$pid"
  wait_for "route 10.30.0.0/16 after SIGHUP" 20 has_route 10.30.0.0/16
  wait_for "RELOADING=1" 10 notified "RELOADING=1"
  wait_for "READY=1 after reload" 10 test "$(count_notified "READY=1")" -gt "$readies"
  step "SIGHUP: conf.d route installed, RELOADING=1 then READY=1"

  # Drift: someone deletes an owned route; it comes back (kernel event or the next period).
  in_ns ip route del 198.51.100.0/24 proto 190
  wait_for "blackhole route repaired" 40 has_route 198.51.100.0/24
  step "drift repaired: deleted route is back"
fi

kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid_done=$pid; pid=
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
notified "STOPPING=1" || fail "no STOPPING=1"
step "SIGTERM: STOPPING=1, exit 0"
if [ "$has_routes" -gt 0 ]; then
  grep -q default <<< "$(in_ns ip route show proto 190)" || fail "routes removed on stop (they must stay)"
fi
: "$pid_done"
echo "smoke-qemu-user: ok"
