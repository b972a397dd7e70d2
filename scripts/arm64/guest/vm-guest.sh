#!/bin/bash
# Runs inside the arm64 guest of scripts/arm64/smoke-vm.sh (cwd /mnt/in: edgenetd, edgenetd.toml,
# notify-listener.py). A network namespace with the example's links, the daemon with every
# controller its config enables, a notify socket and WATCHDOG_USEC; checks what the config asks
# for is in the kernel, then prints the daemon's idle RSS on aarch64.
set -euo pipefail
fail() { echo "vm-guest: FAIL: $*"; echo "--- daemon log"; tail -n 30 /tmp/daemon.log || true; echo "--- notify"; cat /tmp/notify.log || true; exit 1; }
step() { echo "vm-guest: $*"; }
ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }   # busybox date has no %N
ns=edge
ip netns add $ns
in_ns() { ip netns exec $ns "$@"; }
in_ns ip link set lo up
in_ns ip link add br-lan type bridge
in_ns ip link add lan-port type veth peer name lan-host
in_ns ip link set lan-port master br-lan
in_ns ip link add eth0 type veth peer name wan-host
for l in br-lan lan-port lan-host eth0 wan-host; do in_ns ip link set $l up; done
in_ns ip addr add 192.168.1.1/24 dev br-lan
in_ns ip addr add 203.0.113.2/24 dev eth0

bin=./edgenetd
deb=$(ls edgenetd_*_arm64.deb 2>/dev/null | head -n1 || true)
if [ -n "$deb" ]; then
  # The arm64 package's own files on Debian's arm64 libraries (the guest has no dpkg
  # database, so the package is unpacked rather than installed; --keep-directory-symlink
  # keeps the merged-/usr /lib symlink, as dpkg itself does).
  dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C / || fail "unpacking $deb"
  bin=/usr/bin/edgenetd
  $bin check || fail "the package's default config (/etc/edgenetd/edgenetd.toml)"
  step "package $deb unpacked; its default config passes check"
fi
step "$($bin --version) ($bin) on $(uname -m), kernel $(uname -r)"
$bin check --config edgenetd.toml || fail "check"

python3 notify-listener.py /tmp/notify.sock > /tmp/notify.log 2>/dev/null &
for _ in $(seq 100); do [ -S /tmp/notify.sock ] && break; sleep 0.1; done
NOTIFY_SOCKET=/tmp/notify.sock WATCHDOG_USEC=4000000 EDGENETD_LOG=info \
  ip netns exec $ns $bin run --config edgenetd.toml > /tmp/daemon.log 2>&1 &
pid=$!
t0=$(ms)
for _ in $(seq 600); do grep -q "READY=1" /tmp/notify.log && break; kill -0 $pid || fail "daemon exited"; sleep 0.1; done
grep -q "READY=1" /tmp/notify.log || fail "no READY=1 within 60 s"
step "READY=1 after $(( $(ms) - t0 )) ms (emulated CPU, polled every 100 ms)"
for _ in $(seq 100); do grep -q "WATCHDOG=1" /tmp/notify.log && break; sleep 0.1; done
grep -q "WATCHDOG=1" /tmp/notify.log || fail "no WATCHDOG=1"
step "WATCHDOG=1 received"

listen=$(sed -n 's/^listen *= *"\([^"]*\)".*/\1/p' edgenetd.toml | head -n1)
in_ns python3 - "${listen:-127.0.0.1:9750}" <<'PY' || fail "/healthz"
import json, sys, time, urllib.request, urllib.error
url = f"http://{sys.argv[1]}/healthz"
deadline = time.time() + 30
while True:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            code, body = r.status, json.load(r)
    except urllib.error.HTTPError as e:
        code, body = e.code, json.load(e)
    ctl = body["controllers"]
    done = all(c["syncs"] >= 1 for c in ctl.values())
    if code == 200 and done and body["ready"]:
        break
    if time.time() > deadline:
        sys.exit(f"healthz {code}: {json.dumps(body)}")
    time.sleep(0.5)
for name, c in ctl.items():
    assert c["live"] and c["failures"] == 0, f"{name}: {c}"
print("vm-guest: /healthz 200, ready; " + ", ".join(f"{n}: {c['syncs']} syncs, 0 failures" for n, c in sorted(ctl.items())))
PY

if grep -q '^\[\[route\]\]' edgenetd.toml; then
  n=$(in_ns ip route show proto 190 table all | wc -l)
  [ "$n" -gt 0 ] || fail "no routes with protocol 190"
  step "routes (proto 190): $n"
fi
if grep -q '^\[\[route_rule\]\]' edgenetd.toml; then
  grep -q "proto 190" <<< "$(in_ns ip rule show)" || fail "no ip rule with protocol 190: $(in_ns ip rule show)"
  step "ip rules (proto 190): $(in_ns ip rule show | grep -c 'proto 190')"
fi
for area in policy service; do
  if grep -q "^\[$area\]\|^\[\[$area\]\]" edgenetd.toml; then
    in_ns nft list table inet edgenetd-$area > /tmp/$area.nft || fail "table inet edgenetd-$area missing"
    step "table inet edgenetd-$area: $(grep -c . /tmp/$area.nft) lines"
  fi
done

sleep 5
rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
step "aarch64 idle RSS ${rss} kB (peak ${hwm} kB)"
echo "rss_kb $rss" > /mnt/out/rss 2>/dev/null || true

kill -TERM $pid
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || fail "exit status $rc after SIGTERM"
grep -q "STOPPING=1" /tmp/notify.log || fail "no STOPPING=1"
step "SIGTERM: STOPPING=1, exit 0"
echo "vm-guest: ok"
