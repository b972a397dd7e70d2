#!/usr/bin/env bash
# Footprint of edgenetd against the edge budgets, measured, not asserted on timing:
#
#   scripts/check-footprint.sh [--no-build]
#
#   size     stripped aarch64 release binary (default features)     budget 2.5 MB (2,500,000 bytes)
#   rss      idle resident memory, example config, all controllers   budget 5.5 MiB
#   rss k8s  the same, `--features kubernetes` build, the same config
#            (no [kubernetes] section)                               budget 6.5 MiB (goal 6)
#   wakeups  context switches (voluntary + involuntary) of every thread
#            over 10 s of idle, per second, each build               budget 5/s
#   threads  threads of the idle daemon, each build                 budget 5
#   ready    start to READY=1 with the example config, x86_64,
#            cold (edgenetd cleanup before each of 5 runs)           budget 100 ms (printed only)
#
# What each remaining idle wake-up is for: docs/operations.md, "Footprint".
#
# The daemon runs natively (x86_64: target/release/edgenetd and, for the feature build,
# target/kubernetes/release/edgenetd) inside a throwaway network namespace with the example's
# links (br-lan, eth0), HTTP inside that namespace, a notify socket bound by this script,
# WATCHDOG_USEC=30 s like the unit's WatchdogSec, once the links have settled (17 s).
# Exit status: 1 if any figure with a budget
# (size, both RSS, both wake-up rates, both thread counts) is over it; start-up timing is
# printed only. FOOTPRINT_CONFIG=FILE measures another config.
#
# Each budget can be lowered (or raised) for one run, which is how each check is shown to
# fail: FOOTPRINT_BUDGET_SIZE (bytes), FOOTPRINT_BUDGET_RSS and FOOTPRINT_BUDGET_RSS_KUBERNETES
# (bytes), FOOTPRINT_BUDGET_WAKEUPS (per second, decimals allowed), FOOTPRINT_BUDGET_THREADS.
#   FOOTPRINT_BUDGET_THREADS=3 scripts/check-footprint.sh --no-build   # -> threads OVER BUDGET, exit 1
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
[ "${1:-}" = "--no-build" ] && build=
config=${FOOTPRINT_CONFIG:-config/edgenetd.toml}
x86=target/release/edgenetd
k8s=target/kubernetes/release/edgenetd
arm=target/aarch64-unknown-linux-gnu/release/edgenetd

for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
  [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
done
if [ -n "$build" ]; then
  source scripts/install-deps.sh
  nice -n 10 cargo build --release --locked --quiet
  CARGO_TARGET_DIR=target/kubernetes nice -n 10 cargo build --release --locked --quiet --features kubernetes
  scripts/arm64/cross-build.sh >/dev/null
fi
[ "$(id -u)" = 0 ] || { echo "footprint: needs root (network namespace)" >&2; exit 1; }
for b in "$x86" "$k8s" "$arm"; do
  [ -x "$b" ] || { echo "footprint: $b missing (run without --no-build)" >&2; exit 1; }
done

over=0
failed=()
budget_size=${FOOTPRINT_BUDGET_SIZE:-2500000}
# Idle RSS: 5.5 MiB (default build) and 6 MiB (kubernetes build), enforced. Until the route
# dataplane had its own rtnetlink codec (netlink-packet-route's parse and emit code, 0.45 MB,
# was linked and resident, with netlink-proto's connection buffers) these were goals the
# builds missed (5.6-5.9 and 5.9-6.2 MiB), and CI enforced ceilings half a MiB above them;
# since, the builds measure 5.0-5.2 and 5.4-5.6 MiB, and the goals are the budgets.
budget_rss=${FOOTPRINT_BUDGET_RSS:-$((11 * 512 * 1024))}              # 5.5 MiB
# The kubernetes build's budget was 6 MiB until issues 25 and 26 added the Lease writer, the
# ConfigMap config, the plain-HTTP transport, the nflog reader and the policy tiers (the
# feature binary +0.25 MB): it then measured 5.83-6.08 MiB run to run on one binary. With more
# of the code no idle daemon runs placed cold (packaging/link/cold-text-last.ld) it measures
# 5.45-5.82 MiB on the development machine; the ceiling comes down to the goal once CI
# machines measure it there too.
budget_rss_k8s=${FOOTPRINT_BUDGET_RSS_KUBERNETES:-$((13 * 512 * 1024))} # 6.5 MiB
budget_wakeups=${FOOTPRINT_BUDGET_WAKEUPS:-5}
budget_threads=${FOOTPRINT_BUDGET_THREADS:-5}
arm_size=$(stat -c %s "$arm")
x86_size=$(stat -c %s "$x86")
arm_stripped=$(file -b "$arm" | grep -o 'not stripped\|stripped' | head -n1)

ns="edgenetd-footprint-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
source scripts/lib/example-netns.sh
example_netns_create "$ns"
# Fresh links are not idle: IPv6 duplicate address detection ends ~2 s after link-up, and
# router solicitation (3 solicitations 4 s apart, after up to 1 s) ends with a link event
# ~15 s after it; the daemon answers each kernel event with a sync. A router's links are up
# long before: the idle figures are measured after these, 17 s after the links came up.
settled=$((SECONDS + 17))
while [ -n "$(in_ns ip -6 addr show tentative)" ] || [ "$SECONDS" -lt "$settled" ]; do
  sleep 0.2
done

"$x86" check --config "$config" >/dev/null
result=$(mktemp)
result_k8s=$(mktemp)
measure=$(mktemp)
cat > "$measure" <<'PY'
import os, socket, statistics, subprocess, sys, tempfile, time

binary, config, ready_runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
    p = subprocess.Popen([binary, "run", "--config", config, "--state-dir", os.path.join(tmp, "state")], env=env,
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
for _ in range(ready_runs):
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
if ready:
    print(f"ready_ms {' '.join(f'{m:.1f}' for m in ready)}")
    print(f"ready_median_ms {statistics.median(ready):.1f}")
print(f"rss_bytes {status(p.pid, 'VmRSS') * 1024}")
print(f"rss_anon_bytes {status(p.pid, 'RssAnon') * 1024}")
print(f"rss_file_bytes {status(p.pid, 'RssFile') * 1024}")
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
in_ns python3 "$measure" "$x86" "$config" 5 > "$result"
in_ns python3 "$measure" "$k8s" "$config" 0 > "$result_k8s"
get() { sed -n "s/^$1 //p" "${2:-$result}"; }
rss=$(get rss_bytes)
rss_k8s=$(get rss_bytes "$result_k8s")
mb() { awk -v b="$1" 'BEGIN { printf "%.2f MB", b / 1000000 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
# Sets $verdict; not run in $(...), so that `over` is this shell's (a subshell's assignment
# would be lost, and the script could never fail).
judge() {
  if awk -v m="$2" -v b="$3" 'BEGIN { exit !(m <= b) }'; then
    verdict=ok
  else
    verdict="OVER BUDGET"
    over=1
    failed+=("$1 $2 > $3")
  fi
}
row() { printf '  %-44s %-26s %-22s %s\n' "$@"; }

echo "edgenetd footprint ($(git describe --always --dirty 2>/dev/null || echo '?'), config $config)"
row "figure" "measured" "budget" ""
judge "size" "$arm_size" "$budget_size"
row "aarch64 release binary ($arm_stripped)" "$arm_size B ($(mb "$arm_size"))" "$(mb "$budget_size")" "$verdict"
row "x86_64 release binary" "$x86_size B ($(mb "$x86_size"))" "-" ""
judge "rss" "$rss" "$budget_rss"
row "idle RSS, x86_64" "$(mib "$rss")" "$(mib "$budget_rss")" "$verdict"
row "  anonymous / file-backed (binary, libraries)" "$(mib "$(get rss_anon_bytes)") / $(mib "$(get rss_file_bytes)")" "" ""
row "peak RSS (VmHWM), x86_64" "$(mib "$(get hwm_bytes)")" "-" ""
judge "rss_kubernetes" "$rss_k8s" "$budget_rss_k8s"
row "idle RSS, x86_64, --features kubernetes" "$(mib "$rss_k8s")" "$(mib "$budget_rss_k8s")" "$verdict"
row "  anonymous / file-backed (binary, libraries)" "$(mib "$(get rss_anon_bytes "$result_k8s")") / $(mib "$(get rss_file_bytes "$result_k8s")")" "" ""
row "peak RSS (VmHWM), --features kubernetes" "$(mib "$(get hwm_bytes "$result_k8s")")" "-" ""
row "start to READY=1, x86_64, median of 5 cold" "$(get ready_median_ms) ms" "100 ms" \
  "$(awk -v m="$(get ready_median_ms)" 'BEGIN { print (m <= 100 ? "ok" : "over (timing: not enforced)") }')"
row "  each run" "$(get ready_ms) ms" "" ""
row "idle CPU over 10 s" "$(get idle_cpu_ms) ms" "-" ""
judge "wakeups" "$(get idle_wakeups_per_s)" "$budget_wakeups"
row "idle wake-ups (context switches)" "$(get idle_wakeups_per_s)/s" "$budget_wakeups/s" "$verdict"
row "  by thread" "$(get idle_wakeups_by_thread)" "" ""
judge "wakeups_kubernetes" "$(get idle_wakeups_per_s "$result_k8s")" "$budget_wakeups"
row "idle wake-ups, --features kubernetes" "$(get idle_wakeups_per_s "$result_k8s")/s" "$budget_wakeups/s" "$verdict"
row "  by thread" "$(get idle_wakeups_by_thread "$result_k8s")" "" ""
judge "threads" "$(get threads)" "$budget_threads"
row "threads" "$(get threads)" "$budget_threads" "$verdict"
judge "threads_kubernetes" "$(get threads "$result_k8s")" "$budget_threads"
row "threads, --features kubernetes" "$(get threads "$result_k8s")" "$budget_threads" "$verdict"
rm -f "$result" "$result_k8s" "$measure"
if [ "$over" != 0 ]; then
  echo "footprint: OVER BUDGET: ${failed[*]}" >&2
fi
exit "$over"
