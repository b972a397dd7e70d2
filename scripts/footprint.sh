#!/usr/bin/env bash
# Footprint of edgenetd against the edge budgets, measured, not asserted on timing:
#
#   scripts/footprint.sh [--no-build]
#
#   size   stripped aarch64 release binary (default features)       budget 2.5 MB (2,500,000 bytes)
#   rss    idle resident memory, example config, all controllers    budget 6 MB  (6,291,456 bytes)
#   ready  start to READY=1 with the example config, x86_64,
#          cold (edgenetd cleanup before each of 5 runs)             budget 100 ms
#   idle   CPU time and wake-ups (voluntary + involuntary context
#          switches of every thread, per thread) over 10 s of idle   budget: no busy loop; only
#          timers that are due: config-file poll and nftables generation poll every 500 ms,
#          smol's blocking-pool idle timeout (500 ms), watchdog ping every 15 s, one sync per
#          controller every 30 s, metrics upkeep every 60 s (docs/operations.md, "Footprint")
#
# The daemon runs natively (x86_64, target/release/edgenetd) inside a throwaway network
# namespace with the example's links (br-lan, eth0), HTTP inside that namespace, a notify
# socket bound by this script, WATCHDOG_USEC=30 s like the unit's WatchdogSec. Exit status:
# 1 if the binary size or the idle RSS is over budget (deterministic figures); timings are
# printed only. FOOTPRINT_CONFIG=FILE measures another config.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
[ "${1:-}" = "--no-build" ] && build=
config=${FOOTPRINT_CONFIG:-config/edgenetd.toml}
x86=target/release/edgenetd
arm=target/aarch64-unknown-linux-gnu/release/edgenetd

for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
  [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
done
if [ -n "$build" ]; then
  source scripts/install-deps.sh
  nice -n 10 cargo build --release --locked --quiet
  packaging/cross-build-aarch64.sh >/dev/null
fi
[ "$(id -u)" = 0 ] || { echo "footprint: needs root (network namespace)" >&2; exit 1; }
for b in "$x86" "$arm"; do
  [ -x "$b" ] || { echo "footprint: $b missing (run without --no-build)" >&2; exit 1; }
done

over=0
budget_size=2500000
budget_rss=$((6 * 1024 * 1024))
arm_size=$(stat -c %s "$arm")
x86_size=$(stat -c %s "$x86")
arm_stripped=$(file -b "$arm" | grep -o 'not stripped\|stripped' | head -n1)

ns="edgenetd-footprint-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
source scripts/example-netns.sh
example_netns_create "$ns"

"$x86" check --config "$config" >/dev/null
result=$(mktemp)
in_ns python3 - "$x86" "$config" > "$result" <<'PY'
import os, socket, statistics, subprocess, sys, tempfile, time

binary, config = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="edgenetd-footprint.")
sock_path = os.path.join(tmp, "notify.sock")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(sock_path)
env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="30000000", EDGENETD_LOG="warn")

# Read every notify message, as systemd does: a datagram socket nobody reads fills its queue
# (net.unix.max_dgram_qlen, 10 here) and then the daemon's notify send blocks.
import queue, threading
readies = queue.Queue()
def drain():
    while True:
        if "READY=1" in sock.recv(65536).decode().split("\n"):
            readies.put(time.monotonic())
threading.Thread(target=drain, daemon=True).start()

def start():
    """Starts the daemon; returns (process, ms from spawn to READY=1)."""
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "run", "--config", config], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "a"))
    return p, (readies.get(timeout=10) - t0) * 1000

def stop(p):
    p.terminate()
    p.wait(10)

def threads_switches(pid):
    """Context switches per thread (name/tid) of the process."""
    per = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        n = 0
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("Name:"):
                    name = line.split(None, 1)[1].strip()
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(line.split()[1])
        per[f"{name}/{tid}"] = n
    return per

def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime

def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])

ready = []
for _ in range(5):
    subprocess.run([binary, "cleanup", "--config", config], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    p, ms = start()
    ready.append(ms)
    stop(p)

p, _ = start()
time.sleep(3)  # let the first syncs' buffers settle
idle_s = 10
hz = os.sysconf("SC_CLK_TCK")
c0, w0 = cpu_ticks(p.pid), threads_switches(p.pid)
time.sleep(idle_s)
c1, w1 = cpu_ticks(p.pid), threads_switches(p.pid)
print(f"ready_ms {' '.join(f'{m:.1f}' for m in ready)}")
print(f"ready_median_ms {statistics.median(ready):.1f}")
print(f"rss_bytes {status(p.pid, 'VmRSS') * 1024}")
print(f"hwm_bytes {status(p.pid, 'VmHWM') * 1024}")
print(f"threads {status(p.pid, 'Threads')}")
print(f"idle_cpu_ms {(c1 - c0) * 1000 / hz:.0f}")
print(f"idle_wakeups_per_s {(sum(w1.values()) - sum(w0.values())) / idle_s:.1f}")
per = [(k.split("/")[0], (w1[k] - w0.get(k, 0)) / idle_s) for k in sorted(w1)]
print("idle_wakeups_by_thread " + ", ".join(f"{n} {r:.1f}/s" for n, r in per))
stop(p)
subprocess.run([binary, "cleanup", "--config", config], stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
PY
get() { sed -n "s/^$1 //p" "$result"; }
rss=$(get rss_bytes)
mb() { awk -v b="$1" 'BEGIN { printf "%.2f MB", b / 1000000 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
verdict() { if [ "$1" -le "$2" ]; then echo ok; else over=1; echo "OVER BUDGET"; fi; }

echo "edgenetd footprint ($(git describe --always --dirty 2>/dev/null || echo '?'), config $config)"
printf '  %-44s %-26s %-22s %s\n' "figure" "measured" "budget" ""
printf '  %-44s %-26s %-22s %s\n' "aarch64 release binary ($arm_stripped)" "$arm_size B ($(mb "$arm_size"))" "2.5 MB" "$(verdict "$arm_size" "$budget_size")"
printf '  %-44s %-26s %-22s %s\n' "x86_64 release binary" "$x86_size B ($(mb "$x86_size"))" "-" ""
printf '  %-44s %-26s %-22s %s\n' "idle RSS, x86_64" "$(mib "$rss")" "6 MiB" "$(verdict "$rss" "$budget_rss")"
printf '  %-44s %-26s %-22s %s\n' "peak RSS (VmHWM), x86_64" "$(mib "$(get hwm_bytes)")" "-" ""
printf '  %-44s %-26s %-22s %s\n' "start to READY=1, x86_64, median of 5 cold" "$(get ready_median_ms) ms" "100 ms" \
  "$(awk -v m="$(get ready_median_ms)" 'BEGIN { print (m <= 100 ? "ok" : "over (timing: not enforced)") }')"
printf '  %-44s %-26s\n' "  each run" "$(get ready_ms) ms"
printf '  %-44s %-26s %-22s\n' "idle CPU over 10 s" "$(get idle_cpu_ms) ms" "no busy loop"
printf '  %-44s %-26s %-22s\n' "idle wake-ups (context switches)" "$(get idle_wakeups_per_s)/s" "timers only (per thread:)"
printf '  %-44s %-26s\n' "  by thread" "$(get idle_wakeups_by_thread)"
printf '  %-44s %-26s\n' "threads" "$(get threads)"
rm -f "$result"
exit $over
