#!/bin/sh
# Health-check benchmark (prints figures, asserts nothing): the daemon's CPU use while it
# probes 200 backends (20 services x 10) every second, in a throwaway network namespace with
# the backends on its loopback. Usage: scripts/bench-health.sh [SECONDS] (default 30).
# CHECK=tcp|http (default tcp); PROFILE=release|debug (default release).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-30}
check=${CHECK:-tcp}
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
    nice -n 10 cargo build --release --bin edgenetd
else
    nice -n 10 cargo build --bin edgenetd
fi
bin="$PWD/target/$profile/edgenetd"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{
    printf '[controller.policy]\nenabled = false\n[controller.route]\nenabled = false\n'
    s=0
    while [ $s -lt 20 ]; do
        printf '\n[[service]]\nname = "svc%d"\naddress = "10.96.0.%d"\nport = 80\nbackends = [' $s $((s + 1))
        b=0
        while [ $b -lt 10 ]; do
            printf '"127.0.0.1:%d", ' $((20000 + s * 10 + b))
            b=$((b + 1))
        done
        printf ']\n[service.health]\ncheck = "%s"\ninterval = "1s"\ntimeout = "500ms"\n' "$check"
        s=$((s + 1))
    done
} > "$dir/edgenetd.toml"
cat > "$dir/backends.py" <<'PY'
# 200 listeners on 127.0.0.1:20000-20199: each connection gets an HTTP 200 and is closed.
import selectors, socket
sel = selectors.DefaultSelector()
for port in range(20000, 20200):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', port)); s.listen(64); s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
print('listening', flush=True)
while True:
    for key, _ in sel.select():
        try:
            c, _ = key.fileobj.accept()
            c.setblocking(True); c.settimeout(0.2)
            try:
                c.recv(1024)
            except OSError:
                pass
            c.sendall(b'HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n'); c.close()
        except OSError:
            pass
PY
cat > "$dir/run.sh" <<'SH'
set -eu
dir=$1 bin=$2 secs=$3 check=$4
ip link set lo up
python3 -u "$dir/backends.py" > "$dir/backends.out" 2>&1 &
backends=$!
until grep -q listening "$dir/backends.out" 2>/dev/null; do sleep 0.1; done
EDGENETD_LOG=warn "$bin" run --config "$dir/edgenetd.toml" --state-dir "$dir/state" 2> "$dir/daemon.log" &
pid=$!
trap 'kill $pid $backends 2>/dev/null || true' EXIT
metrics() { python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9750/metrics").read().decode())'; }
ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
i=0
until [ "$(metrics 2>/dev/null | awk '/^edgenetd_backend_up\{/ {n += $2} END {print n + 0}')" = 200 ]; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "not 200 backends up after 30 s"; cat "$dir/daemon.log"; exit 1; }
    sleep 0.1
done
sleep 3
t0=$(ticks); s0=$(date +%s.%N)
sleep "$secs"
t1=$(ticks); s1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
rss=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
up=$(metrics | awk '/^edgenetd_backend_up\{/ {n += $2} END {print n + 0}')
fails=$(metrics | awk '/^edgenetd_backend_check_failures_total\{/ {n += $2} END {print n + 0}')
echo "200 backends ($check check every 1 s), $secs s measured:"
awk -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v hz="$hz" \
    'BEGIN { printf "  daemon CPU: %.2f %% of one core (%.0f ms CPU in %.1f s)\n", 100 * (t1 - t0) / hz / (s1 - s0), 1000 * (t1 - t0) / hz, s1 - s0 }'
echo "  peak RSS: $rss kB; backends up: $up; failed checks so far: $fails"
SH
unshare --net -- sh "$dir/run.sh" "$dir" "$bin" "$secs" "$check"
