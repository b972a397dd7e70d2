#!/usr/bin/env bash
# Runs edgenetd the way systemd/edgenetd.service does — an unprivileged uid with
# CAP_NET_ADMIN as its only capability (ambient), no_new_privs — under strace, inside a
# throwaway network namespace with the example's links, and checks:
#   - every controller syncs without failure (/healthz live, /readyz 200, failures 0):
#     CAP_NET_ADMIN is enough for nftables, routes and rules;
#   - every system call made is allowed by the unit's filter
#     (@system-service minus @privileged and @resources, expanded by systemd-analyze);
#   - every socket is of a family in RestrictAddressFamilies=;
#   - no file is opened for writing but where the unit allows it (ProtectSystem=strict):
#     the state directory (StateDirectory=) and the main config file's temporary file in
#     the config directory (ReadWritePaths=/etc/edgenetd, for the atomic rename of apply);
#   - `edgenetd apply --confirm 2s` through the control socket (in /run/edgenetd, which the
#     package's tmpfiles.d entry makes: root, the daemon's group, 0770), left unconfirmed, is
#     rolled back: counted, and the main file holds the original text again.
# The workload: start, first syncs, three failing uplink probes (tcp, dns, icmp), /healthz + /metrics, SIGHUP reload,
# apply + rollback, periodic resyncs (periods shortened to 1 s), SIGTERM.
#
#   packaging/check-sandbox.sh [BINARY] [CONFIG]     (default target/release/edgenetd,
#                                                     config/edgenetd.toml)
# Needs root, strace, setpriv (util-linux), systemd (systemd-analyze), python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(realpath "${1:-target/release/edgenetd}")
config_src=${2:-${SANDBOX_CONFIG:-config/edgenetd.toml}}
unit=systemd/edgenetd.service
fail() { echo "check-sandbox: FAIL: $*" >&2; [ -n "${work:-}" ] && tail -n 30 "$work/daemon.log" >&2; exit 1; }

ns="edgenetd-sandbox-$$"
work=$(mktemp -d /tmp/edgenetd-sandbox.XXXXXX)
chmod 0755 "$work"
pid=''; listener=''
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  [ -n "$listener" ] && kill "$listener" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

source scripts/lib/example-netns.sh
example_netns_create "$ns"

mkdir -p "$work/etc/conf.d"
sed 's/^period = "30s"/period = "1s"/' "$config_src" > "$work/etc/edgenetd.toml"
# One uplink probe of each kind, failing (nothing answers behind eth0), so the run covers the
# probers' marked sockets, their going down and the conntrack flush that follows.
for check in tcp dns icmp; do
  target=198.18.0.53; [ "$check" = tcp ] && target=198.18.0.53:53
  printf '\n[[track]]\nname = "sandbox-%s"\ncheck = "%s"\ntarget = "%s"\nvia = "203.0.113.1"\ndev = "eth0"\ninterval = "500ms"\nfall = 2\n' \
    "$check" "$check" "$target" >> "$work/etc/edgenetd.toml"
done
chmod -R a+rX "$work/etc"
# As the package sets /etc/edgenetd up: the directory writable by the daemon's group.
chgrp 65534 "$work/etc"
chmod 0775 "$work/etc"
# /run/edgenetd as tmpfiles.d makes it (root, the daemon's group, 0770), and StateDirectory=
# (owned by the daemon's user).
mkdir -p "$work/run" "$work/state"
chown 0:65534 "$work/run"
chmod 0770 "$work/run"
# A control socket left behind by a daemon that ran as another transient uid (killed, then
# started again): the directory is not sticky, so the daemon replaces it.
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/run/control.sock"
chown 0:65534 "$work/run/control.sock"
chmod 0660 "$work/run/control.sock"
chown 65534:65534 "$work/state"
chmod 0700 "$work/state"

# systemd's notify socket, writable by the daemon's uid as systemd's is.
python3 scripts/lib/notify-listener.py "$work/notify.sock" > "$work/notify.log" 2>/dev/null &
listener=$!
for _ in $(seq 50); do [ -S "$work/notify.sock" ] && break; sleep 0.1; done
chmod 0777 "$work/notify.sock"

# The unit's privileges: CapabilityBoundingSet=CAP_NET_ADMIN, AmbientCapabilities=CAP_NET_ADMIN,
# NoNewPrivileges=yes, DynamicUser=yes (here: nobody).
NOTIFY_SOCKET="$work/notify.sock" WATCHDOG_USEC=2000000 \
  ip netns exec "$ns" strace -f -qq -s 256 -o "$work/trace" \
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    --inh-caps=-all,+net_admin --ambient-caps=-all,+net_admin --bounding-set=-all,+net_admin \
    --no-new-privs \
    "$bin" run --config "$work/etc/edgenetd.toml" \
      --control-socket "$work/run/control.sock" --state-dir "$work/state" > "$work/daemon.log" 2>&1 &
pid=$!   # strace; the daemon is its child (setpriv execs it in place)
daemon=
for _ in $(seq 50); do
  daemon=$(pgrep -P "$pid" -x edgenetd || true)
  [ -n "$daemon" ] && break
  sleep 0.1
done
[ -n "$daemon" ] || fail "daemon process not found"

deadline=$((SECONDS + 30))
until in_ns curl -sf -o /dev/null http://127.0.0.1:9750/readyz; do
  kill -0 "$pid" 2>/dev/null || fail "daemon exited"
  [ $SECONDS -lt $deadline ] || fail "/readyz not 200 within 30 s: $(in_ns curl -s http://127.0.0.1:9750/healthz)"
  sleep 0.3
done
in_ns curl -sf http://127.0.0.1:9750/metrics >/dev/null
[ "$(stat -c '%u %a' "$work/run/control.sock")" = "65534 660" ] \
  || fail "the stale control socket of another uid was not replaced: $(stat -c '%u %a' "$work/run/control.sock")"
kill -HUP "$daemon"
sleep 3
# Apply with automatic rollback, through the sandbox: the socket, the state directory and
# the rename in the config directory. Nobody confirms.
cp "$work/etc/edgenetd.toml" "$work/original.toml"
sed 's/^period = "1s"/period = "2s"/' "$work/original.toml" > "$work/new.toml"
"$bin" apply --config "$work/new.toml" --confirm 2s --control-socket "$work/run/control.sock" \
  > "$work/apply.log" 2>&1 || fail "apply through the control socket: $(cat "$work/apply.log")"
cmp -s "$work/etc/edgenetd.toml" "$work/new.toml" || fail "apply did not put the new file in place"
deadline=$((SECONDS + 15))
until in_ns curl -s http://127.0.0.1:9750/metrics | grep -q '^edgenetd_config_rollbacks_total 1$'; do
  [ $SECONDS -lt $deadline ] || fail "no rollback within 15 s of an unconfirmed apply --confirm 2s"
  sleep 0.3
done
cmp -s "$work/etc/edgenetd.toml" "$work/original.toml" || fail "the rollback did not restore the main file"
echo "check-sandbox: apply --confirm 2s through the control socket, unconfirmed: rolled back, main file restored"
grep -q "READY=1" "$work/notify.log" && grep -q "WATCHDOG=1" "$work/notify.log" \
  || fail "no READY=1/WATCHDOG=1 from the unprivileged daemon: $(cat "$work/notify.log")"
in_ns curl -s http://127.0.0.1:9750/healthz > "$work/healthz.json"
python3 - "$work/healthz.json" <<'PY' || fail "health as an unprivileged user: $(cat "$work/healthz.json")"
import json, sys
h = json.load(open(sys.argv[1]))
assert h["live"] and h["ready"], "not live/ready"
for name, c in h["controllers"].items():
    assert c["failures"] == 0, f"{name}: {c['failures']} failures, last: {c.get('lastError')}"
    # The probers' entries (uplink tracks, service health checks) are not sync loops: they
    # count their start only.
    assert c["syncs"] >= 2 or name in ("track", "service-health"), f"{name}: only {c['syncs']} syncs"
print("check-sandbox: as uid 65534 with CAP_NET_ADMIN only: live, ready, every controller synced "
      + ", ".join(f"{n} x{c['syncs']}" for n, c in sorted(h["controllers"].items())) + ", 0 failures")
PY
kill -TERM "$daemon"
rc=0; wait "$pid" || rc=$?    # strace exits with its tracee's status
[ "$rc" = 0 ] || fail "daemon exit status $rc after SIGTERM"
pid=

python3 - "$work/trace" "$bin" "$unit" "$work" <<'PY'
import re, subprocess, sys

trace, binary, unit, work = sys.argv[1:5]

# The unit's SystemCallFilter= lines, expanded with systemd's own group definitions.
groups, cur = {}, None
for line in subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                           text=True, check=True).stdout.splitlines():
    s = line.strip()
    if not s or s.startswith("#"):
        continue
    if not line.startswith(" "):
        cur = s
        groups[cur] = []
    else:
        groups[cur].append(s)

def expand(item, seen=()):
    if item.startswith("@"):
        out = set()
        for x in groups[item]:
            if x not in seen:
                out |= expand(x, seen + (x,))
        return out
    return {item}

allowed, denied = set(), set()
families = set()
for line in open(unit):
    m = re.match(r"^SystemCallFilter=(~?)(.*)$", line.strip())
    if m:
        names = set()
        for item in m.group(2).split():
            names |= expand(item)
        (denied if m.group(1) else allowed).update(names)
    m = re.match(r"^RestrictAddressFamilies=(.*)$", line.strip())
    if m:
        families |= set(m.group(1).split())
allowed -= denied

# System calls of the daemon: everything after its execve (setpriv's own calls come before).
used, sockets, writes = {}, set(), set()
started = set()
call = re.compile(r"^(\d+)\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]")
for line in open(trace):
    m = call.match(line)
    if not m:
        continue
    pid, name = m.group(1), m.group(2)
    if name == "execve" and line.split("(", 1)[1].startswith(f'"{binary}"') and line.rstrip().endswith("= 0"):
        started.add(pid)
        continue
    if name == "clone" or name == "clone3":
        r = re.search(r"= (\d+)$", line.strip())
        if pid in started and r:
            started.add(r.group(1))
    if pid not in started:
        continue
    used[name] = used.get(name, 0) + 1
    if name == "socket":
        fam = re.search(r"socket\((AF_[A-Z0-9]+)", line)
        if fam:
            sockets.add(fam.group(1))
    if name in ("openat", "open", "creat") and re.search(r"O_WRONLY|O_RDWR|O_CREAT", line):
        path = re.search(r'"([^"]*)"', line)
        writes.add(path.group(1) if path else line.strip())

if not started:
    sys.exit("check-sandbox: FAIL: the daemon's execve not found in the trace")
bad = sorted(n for n in used if n not in allowed and n != "exit")
print(f"check-sandbox: {len(used)} distinct system calls: {' '.join(sorted(used))}")
print(f"check-sandbox: socket families: {' '.join(sorted(sockets))}")
ok = True
if bad:
    ok = False
    print(f"check-sandbox: FAIL: not allowed by the unit's SystemCallFilter: {' '.join(bad)}")
if sockets - families:
    ok = False
    print(f"check-sandbox: FAIL: families outside RestrictAddressFamilies: {' '.join(sorted(sockets - families))}")
# Where the unit lets it write: the state directory, and the temporary file beside the main
# config file that the atomic rename of apply and rollback puts in place.
allowed_writes = (f"{work}/state/", f"{work}/etc/.edgenetd.toml.edgenetd-new")
writes = {w for w in writes if w not in ("/dev/null",) and not w.startswith(allowed_writes)}
if writes:
    ok = False
    print(f"check-sandbox: FAIL: files opened for writing: {' '.join(sorted(writes))}")
if not ok:
    sys.exit(1)
print("check-sandbox: ok: every system call allowed, every socket family allowed, nothing written outside the state directory and the config file's rename")
PY
