#!/bin/sh
# Service controller smoke test on a real arm64 kernel (scripts/arm64/vm/arm64vm.sh: Debian's arm64
# kernel under qemu-system-aarch64), in network namespaces of the guest: a client, the router
# running edgenetd, two backends with python3 TCP/UDP servers. Checks: TCP balanced over both
# backends, UDP answered, source-ip affinity, reject without backends, the table deleted by
# hand restored and counted, `cleanup` removes the table.
# Usage: scripts/arm64/test-vm-services.sh [path/to/aarch64/edgenetd]   (default: cross-builds it)
set -eu
cd "$(dirname "$0")/../.."
VM=${ARM64VM:-scripts/arm64/vm/arm64vm.sh}
BIN=${1:-}
if [ -z "$BIN" ]; then
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc PKG_CONFIG_ALLOW_CROSS=1 \
    PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig \
        nice -n 10 cargo build --release --quiet --target aarch64-unknown-linux-gnu --bin edgenetd
    BIN=target/aarch64-unknown-linux-gnu/release/edgenetd
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$BIN" "$work/edgenetd"
cat > "$work/edgenetd.toml" <<'TOML'
[controller.policy]
enabled = false
[controller.route]
enabled = false
[controller.service]
period = "1h"

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]

[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]

[[service]]
name = "sticky"
address = "10.96.0.12"
port = 80
affinity = "source-ip"
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]

[[service]]
name = "empty"
address = "10.96.0.13"
port = 80
backends = []
TOML
cat > "$work/srv.py" <<'PY'
import socket, sys, threading, socketserver
name, port = sys.argv[1], int(sys.argv[2])
class T(socketserver.BaseRequestHandler):
    def handle(self): self.request.sendall((name + "\n").encode())
class TS(socketserver.ThreadingTCPServer):
    allow_reuse_address = True; daemon_threads = True
class U(socketserver.BaseRequestHandler):
    def handle(self):
        d, s = self.request; s.sendto((name + "\n").encode(), self.client_address)
t = TS(("0.0.0.0", port), T); u = socketserver.UDPServer(("0.0.0.0", port), U)
threading.Thread(target=u.serve_forever, daemon=True).start()
t.serve_forever()
PY
cat > "$work/cli.py" <<'PY'
import socket, sys, collections
proto, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = collections.Counter()
for i in range(n):
    try:
        if proto == "tcp":
            s = socket.create_connection((host, port), timeout=3); c[s.recv(100).decode().strip()] += 1
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
            s.sendto(b"hi", (host, port)); c[s.recv(100).decode().strip()] += 1
        s.close()
    except ConnectionRefusedError: c["refused"] += 1
    except OSError: c["error"] += 1
print(" ".join(f"{k}={v}" for k, v in sorted(c.items())))
PY
cat > "$work/smoke.sh" <<'SH'
set -eu
fail() { echo "FAIL: $*"; cat log.txt; exit 1; }
for n in r c b1 b2; do ip netns add $n; ip -n $n link set lo up; done
ip netns exec r sysctl -qw net.ipv4.ip_forward=1
ip -n r link add c0 type veth peer name eth0 netns c
ip -n r addr add 192.168.10.1/24 dev c0; ip -n r link set c0 up
ip -n c addr add 192.168.10.2/24 dev eth0; ip -n c link set eth0 up; ip -n c route add default via 192.168.10.1
for i in 1 2; do
  ip -n r link add b$i type veth peer name eth0 netns b$i
  ip -n r addr add 10.0.$i.1/24 dev b$i; ip -n r link set b$i up
  ip -n b$i addr add 10.0.$i.2/24 dev eth0; ip -n b$i link set eth0 up; ip -n b$i route add default via 10.0.$i.1
  ip netns exec b$i python3 srv.py b$i 8080 >/dev/null 2>&1 &
done
EDGENETD_LOG=info ip netns exec r ./edgenetd run --config edgenetd.toml 2>log.txt &
pid=$!
for i in $(seq 1 60); do sleep 1; ip netns exec r nft list table inet edgenetd-service 2>/dev/null | grep -q '10.96.0.13 . tcp . 80' && break; done
ip netns exec r nft list table inet edgenetd-service >/dev/null 2>&1 || fail "no service table"
out=$(ip netns exec c python3 cli.py tcp 10.96.0.10 80 40); echo "tcp: $out"
echo "$out" | grep -q 'b1=' && echo "$out" | grep -q 'b2=' || fail "TCP not balanced: $out"
out=$(ip netns exec c python3 cli.py udp 10.96.0.53 53 40); echo "udp: $out"
echo "$out" | grep -q 'b1=' && echo "$out" | grep -q 'b2=' || fail "UDP not balanced: $out"
out=$(ip netns exec c python3 cli.py tcp 10.96.0.12 80 20); echo "affinity: $out"
echo "$out" | grep -Eq '^b[12]=20$' || fail "affinity: $out"
out=$(ip netns exec c python3 cli.py tcp 10.96.0.13 80 1); echo "empty: $out"
[ "$out" = "refused=1" ] || fail "no backend should refuse: $out"
ip netns exec r nft delete table inet edgenetd-service
for i in $(seq 1 20); do sleep 0.5; ip netns exec r nft list table inet edgenetd-service >/dev/null 2>&1 && break; done
out=$(ip netns exec c python3 cli.py tcp 10.96.0.10 80 10); echo "after repair: $out"
echo "$out" | grep -q 'error' && fail "not restored: $out"
metrics=$(ip netns exec r python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9750/metrics").read().decode())')
echo "$metrics" | grep -E '^edgenetd_service' || true
echo "$metrics" | grep -Eq '^edgenetd_service_drift_repairs_total [1-9]' || fail "repair not counted"
echo "$metrics" | grep -q '^edgenetd_services 4' || fail "services gauge"
kill "$pid"; wait "$pid" || true
ip netns exec r nft add table inet other
ip netns exec r ./edgenetd cleanup --config edgenetd.toml
ip netns exec r nft list tables | grep -q edgenetd-service && fail "table left after cleanup"
ip netns exec r nft list tables | grep -q 'inet other' || fail "foreign table removed"
echo "arm64 service smoke ($(uname -m), kernel $(uname -r)): TCP/UDP balanced, affinity, reject, drift repaired and counted, cleanup exact: OK"
SH
exec "$VM" --timeout 400 "$work/edgenetd" "$work/edgenetd.toml" "$work/srv.py" "$work/cli.py" "$work/smoke.sh" -- 'bash smoke.sh'
