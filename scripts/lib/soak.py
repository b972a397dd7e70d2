#!/usr/bin/env python3
"""Churn soak driver for edgenetd (scripts/test-soak.sh runs it inside a fresh network namespace).

Rounds of churn then quiet. During churn: random valid config changes (routes, route rules,
sets, policy rules, zones, services, backends; services live in a conf.d file), invalid
configs, SIGHUP storms, interference (owned routes/rules deleted, owned tables deleted, an
owned chain edited, elements added to an owned set, foreign routes/rules/tables added),
backend servers going down and up while health checks run, links going down and up.
After each churn the quiet period checks, by reading the kernel with `nft -j` and `ip -j`
(never through edgenetd's code), that the kernel equals the last accepted config within
the convergence bound, that foreign objects are untouched and that no rejected config was
ever applied. /healthz is probed throughout; RSS and open fds are sampled every round.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

LAN_GW, WAN_GW = "192.168.1.254", "203.0.113.1"
BACKENDS = [f"10.99.0.{i}" for i in range(1, 9)]
BACKEND_PORT = 8080
PERIOD = 2.0  # every controller's period (s)
HEALTH_INTERVAL, HEALTH_RISE, HEALTH_FALL = 0.5, 2, 2
# A rejected config carries this route; it must never reach the kernel.
POISON = "10.77.0.0/24"
LISTEN = "127.0.0.1:9750"
# How long after a change the kernel must equal it: one period, plus what the health checks
# need to settle a backend flapped just before, plus a second of slack for a loaded machine.
BOUND = PERIOD + (max(HEALTH_RISE, HEALTH_FALL) + 1) * HEALTH_INTERVAL + 1.0


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr.strip()}")
    return r


def jcmd(cmd):
    r = sh(cmd, check=False)
    # A routing table nothing was ever added to (or whose last route went) does not exist:
    # `ip route show table N` says so instead of listing nothing.
    if r.returncode != 0 and "FIB table does not exist" in r.stderr:
        return []
    if r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr.strip()}")
    return json.loads(r.stdout) if r.stdout.strip() else []


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------ topology and backends


def topology():
    sh("ip link set lo up")
    for name, peer, addr in (("lan0", "lanp0", "192.168.1.1/24"), ("wan0", "wanp0", "203.0.113.2/24"),
                             ("bk0", "bkp0", None)):
        sh(f"ip link add {name} type veth peer name {peer}")
        sh(f"ip link set {peer} up && ip link set {name} up")
        if addr:
            sh(f"ip addr add {addr} dev {name}")
    for b in BACKENDS:
        sh(f"ip addr add {b}/32 dev bk0")
    # Gateways must resolve for `ip route add ... via` to be accepted: static neighbours.
    sh(f"ip neigh replace {LAN_GW} lladdr 02:00:00:00:00:01 dev lan0 nud permanent")
    sh(f"ip neigh replace {WAN_GW} lladdr 02:00:00:00:00:02 dev wan0 nud permanent")


class Backend:
    """A TCP server on one backend address that can be taken down and brought back."""

    def __init__(self, addr):
        self.addr, self.sock, self.lock = addr, None, threading.Lock()

    def up(self):
        with self.lock:
            if self.sock:
                return
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((self.addr, BACKEND_PORT))
            s.listen(64)
            self.sock = s
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def down(self):
        with self.lock:
            if self.sock:
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.sock.close()
                self.sock = None

    def is_up(self):
        return self.sock is not None

    @staticmethod
    def _serve(s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.close()


# ------------------------------------------------------------------ random configs


def random_config(rng):
    """A random valid desired state (a dict the checks read) and its TOML files."""
    st = {"routes": [], "rules": [], "sets": {}, "prules": [], "services": [], "zones": {}}
    for n in rng.sample(range(40), rng.randint(0, 14)):
        kind = rng.choice(["lan", "wan", "blackhole", "unreachable"])
        table = rng.choice([None, None, 100, 101])
        metric = rng.choice([None, 10, 100])
        st["routes"].append({"to": f"10.50.{n}.0/24", "kind": kind, "table": table, "metric": metric})
    for i in rng.sample(range(8), rng.randint(0, 3)):
        st["rules"].append({"priority": 1000 + i, "from": f"192.168.1.{i * 16}/28", "table": rng.choice([100, 101])})
    st["zones"]["lan"] = {"interfaces": ["lan0"], "masquerade": False}
    st["zones"]["wan"] = {"interfaces": ["wan0"], "masquerade": rng.random() < 0.5}
    for name in rng.sample(["blocklist", "trusted"], rng.randint(0, 2)):
        elems = sorted({f"198.51.100.{2 * k}" for k in rng.sample(range(1, 100), rng.randint(0, 12))})
        if rng.random() < 0.3:
            elems.append("203.0.113.128/28")
        st["sets"][name] = elems
    for i in range(rng.randint(0, 8)):
        r = {"name": f"r{i}", "action": rng.choice(["accept", "drop", "reject"])}
        r["from"] = rng.choice(["lan", "wan", None] + [f"@{s}" for s in st["sets"]])
        r["to"] = rng.choice(["self", None])
        if rng.random() < 0.7:
            r["protocol"] = rng.choice(["tcp", "udp"])
            r["ports"] = sorted(rng.sample([22, 53, 80, 443, 8080, 9000], rng.randint(1, 3)))
        st["prules"].append(r)
    st["policy"] = {"input": rng.choice(["drop", "accept"]), "forward_default": rng.choice(["drop", "accept"])}
    for i in rng.sample(range(6), rng.randint(0, 5)):
        st["services"].append({
            "name": f"s{i}", "address": f"10.96.0.{10 + i}", "port": rng.choice([80, 443, 8080]),
            "backends": sorted(rng.sample(BACKENDS, rng.randint(0, 4))),
        })
    return st


def q(s):
    return json.dumps(s)


def render_main(st):
    out = [f'[daemon]\nlisten = "{LISTEN}"\n']
    for c in ("policy", "service", "route"):
        out.append(f'[controller.{c}]\nperiod = "{int(PERIOD * 1000)}ms"\n')
    for r in st["routes"]:
        out.append(f"[[route]]\nto = {q(r['to'])}\n")
        if r["kind"] == "lan":
            out.append(f'via = "{LAN_GW}"\ndev = "lan0"\n')
        elif r["kind"] == "wan":
            out.append(f'via = "{WAN_GW}"\ndev = "wan0"\n')
        else:
            out.append(f"type = {q(r['kind'])}\n")
        if r["table"]:
            out.append(f"table = {r['table']}\n")
        if r["metric"] is not None:
            out.append(f"metric = {r['metric']}\n")
    for r in st["rules"]:
        out.append(f"[[route_rule]]\npriority = {r['priority']}\nfrom = {q(r['from'])}\ntable = {r['table']}\n")
    p = st["policy"]
    out.append(f'[policy]\ninput = "{p["input"]}"\nforward_default = "{p["forward_default"]}"\noutput = "accept"\n')
    for z, v in st["zones"].items():
        out.append(f"[policy.zone.{z}]\ninterfaces = {q(v['interfaces'])}\nmasquerade = {str(v['masquerade']).lower()}\n")
    for s, elems in st["sets"].items():
        out.append(f'[policy.set.{s}]\ntype = "ipv4"\nelements = {q(elems)}\n')
    for r in st["prules"]:
        out.append(f"[[policy.rule]]\nname = {q(r['name'])}\naction = {q(r['action'])}\n")
        for k in ("from", "to", "protocol"):
            if r.get(k):
                out.append(f"{k} = {q(r[k])}\n")
        if r.get("ports"):
            out.append(f"ports = {q(r['ports'])}\n")
    return "\n".join(out)


def render_services(st):
    out = []
    for s in st["services"]:
        out.append(f"[[service]]\nname = {q(s['name'])}\naddress = {q(s['address'])}\nport = {s['port']}\n"
                   f'protocol = "tcp"\nbackends = {q([f"{b}:{BACKEND_PORT}" for b in s["backends"]])}\n'
                   f'[service.health]\ncheck = "tcp"\ninterval = "{int(HEALTH_INTERVAL * 1000)}ms"\n'
                   f'timeout = "300ms"\nrise = {HEALTH_RISE}\nfall = {HEALTH_FALL}\n')
    return "\n".join(out)


def invalid_variant(rng, st):
    """Main-file text that is the current config plus the poison route plus one error."""
    text = render_main(st) + f'\n[[route]]\nto = "{POISON}"\ntype = "blackhole"\n'
    errors = [
        '\n[[route]]\nto = "10.300.0.0/24"\ntype = "blackhole"\n',        # bad prefix
        '\n[[policy.rule]]\nname = "x"\nfrom = "nozone"\naction = "accept"\n',  # unknown zone
        "\n[daemon.bogus]\nkey = 1\n",                                         # unknown key
        '\n[[route]]\nto = "10.51.0.0/24\n',                                   # TOML syntax
        '\n[[policy.rule]]\nname = "y"\nfrom = "@nosuchset"\naction = "drop"\n',  # unknown set
    ]
    return text + rng.choice(errors)


# ------------------------------------------------------------------ reading the kernel


def kernel_routes():
    got = set()
    for fam in ("-4", "-6"):
        for r in jcmd(f"ip {fam} -j route show table all proto 190"):
            table = r.get("table", "main")
            got.add((r["dst"], r.get("type", "unicast"), r.get("gateway"), r.get("dev"),
                     str(table), r.get("metric", 0)))
    return got


def expected_routes(st):
    want = set()
    for r in st["routes"]:
        table = str(r["table"]) if r["table"] else "main"
        metric = r["metric"] or 0
        if r["kind"] in ("lan", "wan"):
            gw, dev = (LAN_GW, "lan0") if r["kind"] == "lan" else (WAN_GW, "wan0")
            want.add((r["to"], "unicast", gw, dev, table, metric))
        else:
            want.add((r["to"], r["kind"], None, None, table, metric))
    return want


def kernel_rules():
    return {(r["priority"], f"{r['src']}/{r['srclen']}", str(r["table"]))
            for r in jcmd("ip -j rule show") if r.get("protocol") == "190"}


def expected_rules(st):
    return {(r["priority"], r["from"], str(r["table"])) for r in st["rules"]}


def nft_dump():
    return [o for o in jcmd("nft -j list ruleset").get("nftables", []) if "metainfo" not in o]


def norm_elems(elems):
    out = set()
    for e in elems or []:
        if isinstance(e, dict) and "prefix" in e:
            out.add(f"{e['prefix']['addr']}/{e['prefix']['len']}")
        elif isinstance(e, dict) and "elem" in e:
            out.update(norm_elems([e["elem"]["val"]]))
        else:
            out.add(str(e))
    return out


def check_nft(st, up_backends, dump):
    """Differences between the owned nftables tables and the desired state (empty: equal)."""
    problems = []
    tables = {(o["table"]["family"], o["table"]["name"]) for o in dump if "table" in o}
    owned = {t for t in tables if t[1].startswith("edgenetd")}
    # With no service, the service controller owns no table at all.
    want_tables = {("inet", "edgenetd-policy")} | ({("inet", "edgenetd-service")} if st["services"] else set())
    if owned != want_tables:
        problems.append(f"owned tables {sorted(owned)} != {sorted(want_tables)}")
        return problems
    sets = {o["set"]["name"]: norm_elems(o["set"].get("elem")) for o in dump
            if "set" in o and o["set"]["table"] == "edgenetd-policy"}
    want_sets = {k: set(v) for k, v in st["sets"].items()}
    if sets != want_sets:
        problems.append(f"policy sets {sets} != {want_sets}")
    chains = {o["chain"]["name"]: o["chain"].get("policy") for o in dump
              if "chain" in o and o["chain"]["table"] == "edgenetd-policy"}
    for hook, want in (("input", st["policy"]["input"]), ("forward", st["policy"]["forward_default"])):
        if chains.get(hook) != want:
            problems.append(f"policy chain {hook} policy {chains.get(hook)} != {want}")
    rules = [o["rule"] for o in dump if "rule" in o and o["rule"]["table"].startswith("edgenetd")]
    # Every rule edgenetd writes carries a comment: one without is foreign (an edited chain).
    bare = [r for r in rules if not r.get("comment")]
    if bare:
        problems.append(f"{len(bare)} rule(s) without edgenetd's comment in owned chains")
    named = sorted({rule_name(r)[len("rule "):] for r in rules if rule_name(r).startswith("rule ")})
    if named != sorted(r["name"] for r in st["prules"]):
        problems.append(f"policy rules {named} != {sorted(r['name'] for r in st['prules'])}")
    problems += check_rule_contents(st, rules)
    if st["services"]:
        problems += check_services(st, up_backends, dump)
    return problems


def rule_name(rule):
    return rule.get("comment", "").split(" #")[0]


def check_rule_contents(st, rules):
    """Each configured rule, read back from the kernel: chains, match, ports and verdict."""
    problems = []
    for r in st["prules"]:
        mine = [k for k in rules if rule_name(k) == f"rule {r['name']}"]
        chains = sorted(k["chain"] for k in mine)
        want_chains = ["input"] if r.get("to") == "self" else ["forward", "input"]
        if chains != want_chains:
            problems.append(f"rule {r['name']} in chains {chains}, want {want_chains}")
            continue
        for k in mine:
            text = json.dumps(k["expr"])
            verdict = next((v for v in ("accept", "drop", "reject") if f'"{v}"' in text), None)
            if verdict != r["action"]:
                problems.append(f"rule {r['name']} verdict {verdict}, want {r['action']}")
            src = r.get("from")
            if src and src.startswith("@") and f'"@{src[1:]}"' not in text:
                problems.append(f"rule {r['name']} does not match set {src}")
            if src in ("lan", "wan") and f'"{src}0"' not in text:
                problems.append(f"rule {r['name']} does not match zone {src}'s interface")
            if r.get("ports"):
                ports = [m["match"]["right"] for m in k["expr"] if "match" in m
                         and m["match"]["left"].get("payload", {}).get("field") == "dport"
                         and m["match"]["left"]["payload"].get("protocol") == r["protocol"]]
                got = sorted(p for x in ports for p in (x["set"] if isinstance(x, dict) else [x]))
                if got != r["ports"]:
                    problems.append(f"rule {r['name']} {r['protocol']} ports {got}, want {r['ports']}")
    # First match wins: the kernel's order in a chain must be the config's order.
    for chain in ("input", "forward"):
        got = [rule_name(k)[5:] for k in rules if k["chain"] == chain and k["table"] == "edgenetd-policy"
               and rule_name(k).startswith("rule ")]
        want = [r["name"] for r in st["prules"] if chain == "input" or r.get("to") != "self"]
        if got != want:
            problems.append(f"chain {chain} rule order {got}, want {want}")
    masq = any(rule_name(k) == "masquerade wan" for k in rules)
    if masq != st["zones"]["wan"]["masquerade"]:
        problems.append(f"zone wan masquerade in the kernel: {masq}, want {st['zones']['wan']['masquerade']}")
    return problems


def check_services(st, up_backends, dump):
    problems = []
    vmap = {}
    for o in dump:
        if "map" in o and o["map"]["name"] == "services4":
            for key, verdict in o["map"].get("elem", []):
                addr, _, port = key["concat"]
                vmap[(addr, port)] = verdict
    want = {(s["address"], s["port"]) for s in st["services"]}
    if set(vmap) != want:
        problems.append(f"service VIPs {sorted(vmap)} != {sorted(want)}")
    backends = {}
    for o in dump:
        if "map" in o and o["map"]["name"] == "backends4":
            for key, val in o["map"].get("elem", []):
                k = key["concat"] if isinstance(key, dict) else key
                v = val["concat"] if isinstance(val, dict) else val
                backends.setdefault((k[0], k[2]), set()).add(v[0])
    for s in st["services"]:
        healthy = {b for b in s["backends"] if b in up_backends}
        got = backends.get((s["address"], s["port"]), set())
        if got != healthy:
            problems.append(f"service {s['name']} backends {sorted(got)} != healthy {sorted(healthy)}")
        verdict = json.dumps(vmap.get((s["address"], s["port"])))
        if not healthy and "empty_" not in verdict:
            problems.append(f"service {s['name']} has no healthy backend but verdict {verdict}")
    stale = set(backends) - want
    if stale:
        problems.append(f"backend entries for unknown VIPs {sorted(stale)}")
    return problems


# ------------------------------------------------------------------ foreign objects


class Foreign:
    """Objects edgenetd does not own, added during the soak; all must survive untouched."""

    def __init__(self):
        self.routes, self.rules, self.tables, self.n = set(), set(), {}, 0

    def add(self, rng):
        self.n += 1
        kind = rng.choice(["route", "rule", "table"])
        if kind == "route":
            dst = f"10.60.{self.n % 250}.0/24"
            # Not through a flapped link: the kernel itself drops routes of a link going down.
            via = rng.choice(["blackhole", "dev bk0"])
            how = f"blackhole {dst}" if via == "blackhole" else f"{dst} dev bk0"
            sh(f"ip route replace {how} proto static table 200")
            self.routes.add(dst)
        elif kind == "rule":
            prio = 3000 + self.n
            sh(f"ip rule add priority {prio} from 172.16.{self.n % 250}.0/24 table 200")
            self.rules.add(prio)
        else:
            name = f"foreign{self.n}"
            sh(f"nft add table inet {name}; nft add chain inet {name} c '{{ type filter hook input priority 10; }}';"
               f" nft add rule inet {name} c tcp dport {1000 + self.n} counter accept comment '\"foreign\"'")
            self.tables[name] = self._table_text(name)
        return kind

    @staticmethod
    def _table_text(name):
        return sh(f"nft list table inet {name}").stdout.replace(" counter packets 0 bytes 0", "")

    def check(self):
        problems = []
        routes = {r["dst"] for r in jcmd("ip -j route show table 200 proto static")}
        if not self.routes <= routes:
            problems.append(f"foreign routes lost: {sorted(self.routes - routes)}")
        prios = {r["priority"] for r in jcmd("ip -j rule show")}
        if not self.rules <= prios:
            problems.append(f"foreign rules lost: {sorted(self.rules - prios)}")
        for name, text in self.tables.items():
            r = sh(f"nft list table inet {name}", check=False)
            if r.returncode != 0 or r.stdout.replace(" counter packets 0 bytes 0", "") != text:
                # Counters may have counted packets: compare without them.
                got = r.stdout
                import re
                if re.sub(r" counter packets \d+ bytes \d+", "", got) != text:
                    problems.append(f"foreign table {name} changed or lost")
        return problems


# ------------------------------------------------------------------ the daemon


class Daemon:
    def __init__(self, binary, confdir, logpath):
        self.logf = open(logpath, "w")
        self.proc = subprocess.Popen([binary, "run", "--config", f"{confdir}/edgenetd.toml", "--state-dir", f"{confdir}/state", "--log-level", "info"],
                                     stdout=self.logf, stderr=subprocess.STDOUT)

    def hup(self):
        self.proc.send_signal(signal.SIGHUP)

    def sample(self):
        pid = self.proc.pid
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return rss, len(os.listdir(f"/proc/{pid}/fd"))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "killed"


def http_get(path, timeout=2.0):
    try:
        with urllib.request.urlopen(f"http://{LISTEN}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


class Prober(threading.Thread):
    """GET /healthz every 200 ms for the whole soak; every non-200 answer is counted."""

    def __init__(self):
        super().__init__(daemon=True)
        self.ok = self.bad = 0
        self.bad_samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.2):
            status, body = http_get("/healthz")
            if status == 200:
                self.ok += 1
            else:
                self.bad += 1
                if len(self.bad_samples) < 5:
                    self.bad_samples.append(f"{time.strftime('%H:%M:%S')} {status} {body[:200]}")


def metric_sum(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ------------------------------------------------------------------ churn


class Soak:
    def __init__(self, args):
        self.args, self.rng = args, random.Random(args.seed)
        self.confdir = args.workdir
        os.makedirs(f"{self.confdir}/conf.d", exist_ok=True)
        self.backends = {b: Backend(b) for b in BACKENDS}
        self.foreign = Foreign()
        self.stats = {"valid": 0, "invalid": 0, "hup_storms": 0, "interference": 0, "backend_flaps": 0,
                      "link_flaps": 0, "owned_hits": 0, "checks": 0, "violations": 0, "converge_max": 0.0}
        self.violations = []
        self.samples = []
        self.state = None

    def write(self, st):
        # Services in conf.d, the rest in the main file: the merge is churned too.
        self._atomic(f"{self.confdir}/conf.d/10-services.toml", render_services(st))
        self._atomic(f"{self.confdir}/edgenetd.toml", render_main(st))

    @staticmethod
    def _atomic(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    def change(self):
        st = random_config(self.rng)
        self.write(st)
        self.daemon.hup()
        self.state = st
        self.stats["valid"] += 1

    def invalid(self):
        self._atomic(f"{self.confdir}/edgenetd.toml", invalid_variant(self.rng, self.state))
        self.daemon.hup()
        time.sleep(0.05)
        self.stats["invalid"] += 1
        if POISON in {r[0] for r in kernel_routes()}:
            self.violation("a rejected config was applied (poison route in the kernel)")
        # Put the accepted config back (files and daemon agree again).
        self.write(self.state)
        self.daemon.hup()

    def hup_storm(self):
        for _ in range(self.rng.randint(10, 40)):
            self.daemon.hup()
            time.sleep(0.005)
        self.stats["hup_storms"] += 1

    def interfere(self):
        rng, n = self.rng, None
        what = rng.choice(["del_route", "del_rule", "del_table", "edit_chain", "chain_policy",
                           "add_elem", "foreign", "foreign"])
        if what == "del_route":
            owned = sorted(kernel_routes())
            if owned:
                r = rng.choice(owned)
                n = sh(f"ip route del {r[0]} table {r[4]} proto 190" + (f" metric {r[5]}" if r[5] else ""), check=False)
        elif what == "del_rule":
            owned = sorted(kernel_rules())
            if owned:
                n = sh(f"ip rule del priority {owned[0][0]}", check=False)
        elif what == "del_table":
            n = sh(f"nft delete table inet {rng.choice(['edgenetd-policy', 'edgenetd-service'])}", check=False)
        elif what == "edit_chain":
            n = sh("nft add rule inet edgenetd-policy input tcp dport 31337 accept", check=False)
        elif what == "chain_policy":
            n = sh("nft add chain inet edgenetd-policy forward '{ type filter hook forward priority 0; policy accept; }'",
                   check=False)
        elif what == "add_elem":
            if self.state["sets"]:
                s = rng.choice(sorted(self.state["sets"]))
                n = sh(f"nft add element inet edgenetd-policy {s} '{{ 198.51.100.251 }}'", check=False)
        else:
            self.foreign.add(rng)
        if n is not None and n.returncode == 0:
            self.stats["owned_hits"] += 1
        self.stats["interference"] += 1

    def flap_backend(self):
        b = self.backends[self.rng.choice(BACKENDS)]
        b.down() if b.is_up() else b.up()
        self.stats["backend_flaps"] += 1

    def flap_link(self):
        dev = self.rng.choice(["lan0", "wan0"])
        sh(f"ip link set {dev} down")
        time.sleep(self.rng.uniform(0.05, 0.5))
        sh(f"ip link set {dev} up")
        self.stats["link_flaps"] += 1

    def violation(self, msg):
        self.stats["violations"] += 1
        if len(self.violations) < 50:
            self.violations.append(f"{time.strftime('%H:%M:%S')} {msg}")
        log(f"VIOLATION: {msg}")

    def churn(self, seconds):
        end = time.monotonic() + seconds
        actions = [(self.change, 30), (self.invalid, 8), (self.hup_storm, 3), (self.interfere, 25),
                   (self.flap_backend, 12), (self.flap_link, 4)]
        fns, weights = zip(*actions)
        while time.monotonic() < end:
            self.rng.choices(fns, weights)[0]()
            time.sleep(self.rng.uniform(0.02, 0.15))

    def quiet(self):
        """Churn stops; the kernel must equal the last accepted config within the bound."""
        # --sabotage: the daemon is frozen over one quiet period, so the checks must fail
        # (proves they can).
        frozen = self.args.sabotage and self.stats["checks"] == 1
        if frozen:
            self.daemon.proc.send_signal(signal.SIGSTOP)
        # A config change last, so `applied within one period` is measured from a known time.
        self.change()
        t0 = time.monotonic()
        bound = BOUND
        up = {b for b, s in self.backends.items() if s.is_up()}
        while True:
            problems = self.check(up)
            elapsed = time.monotonic() - t0
            if not problems:
                break
            if elapsed > bound:
                for p in problems:
                    self.violation(f"not converged {elapsed:.1f}s after the last change: {p}")
                break
            time.sleep(0.1)
        self.stats["checks"] += 1
        if frozen:
            self.daemon.proc.send_signal(signal.SIGCONT)
        self.stats["converge_max"] = max(self.stats["converge_max"], time.monotonic() - t0)
        # Stay quiet for a second period: a converged kernel must stay converged.
        time.sleep(PERIOD)
        for p in self.check(up):
            self.violation(f"drifted while quiet: {p}")
        for p in self.foreign.check():
            self.violation(p)
        self.samples.append(self.daemon.sample())
        if self.stats["checks"] % 50 == 0:
            rss, fds = self.samples[-1]
            log(f"{self.stats['checks']} checks, {self.stats['valid']} changes, "
                f"{self.stats['violations']} violations, RSS {rss} KiB, {fds} fds")

    def check(self, up):
        problems = []
        try:
            got, want = kernel_routes(), expected_routes(self.state)
            if got != want:
                problems.append(f"routes: missing {sorted(want - got)} extra {sorted(got - want)}")
            got, want = kernel_rules(), expected_rules(self.state)
            if got != want:
                problems.append(f"rules: missing {sorted(want - got)} extra {sorted(got - want)}")
            problems += check_nft(self.state, up, nft_dump())
        except (RuntimeError, KeyError, ValueError) as e:
            problems.append(f"reading the kernel failed: {e}")
        return problems

    def run(self):
        topology()
        for b in self.backends.values():
            b.up()
        self.state = random_config(self.rng)
        self.write(self.state)
        self.daemon = Daemon(self.args.binary, self.confdir, f"{self.confdir}/edgenetd.log")
        try:
            return self._soak()
        finally:
            if self.daemon.proc.poll() is None:
                self.daemon.proc.kill()

    def _soak(self):
        deadline = time.monotonic() + 20
        while http_get("/readyz")[0] != 200:
            if time.monotonic() > deadline or self.daemon.proc.poll() is not None:
                raise SystemExit("soak: the daemon did not become ready within 20 s")
            time.sleep(0.1)
        prober = Prober()
        prober.start()
        start = time.monotonic()
        end = start + self.args.seconds
        self.samples.append(self.daemon.sample())
        metrics0 = http_get("/metrics")[1]
        while time.monotonic() < end:
            self.churn(self.rng.uniform(3, 8))
            self.quiet()
            if self.daemon.proc.poll() is not None:
                self.violation(f"the daemon exited ({self.daemon.proc.returncode})")
                break
        prober.stop.set()
        prober.join()
        duration = time.monotonic() - start
        metrics = http_get("/metrics")[1]
        rc = self.daemon.stop()
        self.report(duration, prober, metrics0, metrics, rc)
        return 0 if self.stats["violations"] == 0 else 1

    def report(self, duration, prober, metrics0, metrics, rc):
        s = self.stats
        logtext = open(f"{self.confdir}/edgenetd.log").read()
        reload_fail = metric_sum(metrics, "edgenetd_config_reload_failures_total")
        if reload_fail < s["invalid"]:
            self.violation(f"reload failures in metrics {reload_fail:.0f} < invalid configs {s['invalid']}")
        log_errors = sum(1 for line in logtext.splitlines() if "reload" in line.lower() and "ERROR" in line)
        if log_errors < s["invalid"]:
            self.violation(f"reload errors in the log {log_errors} < invalid configs {s['invalid']}")
        drift = sum(metric_sum(metrics, f"edgenetd_{c}_drift_repairs_total") for c in ("policy", "service", "route"))
        if s["owned_hits"] and not drift:
            self.violation(f"{s['owned_hits']} edits of owned objects but no drift repair in the metrics")
        if prober.bad:
            self.violation(f"/healthz not 200 {prober.bad} time(s): {prober.bad_samples}")
        if rc != 0:
            self.violation(f"the daemon's exit on SIGTERM: {rc}")
        rss = [r for r, _ in self.samples]
        fds = [f for _, f in self.samples]
        # A leak of one fd per reload or per sync would show hundreds here.
        if fds[-1] > fds[0] + 8:
            self.violation(f"open fds grew from {fds[0]} to {fds[-1]}")
        mode = "long" if self.args.seconds >= 1800 else "short"
        print("\n==== edgenetd soak figures ====")
        print(f"mode                  {mode} (seed {self.args.seed}, period {PERIOD:g}s)")
        print(f"duration              {duration:.0f} s")
        print(f"config changes        {s['valid']} applied, {s['invalid']} invalid (rejected), {s['hup_storms']} SIGHUP storms")
        print(f"interference events   {s['interference']} ({s['owned_hits']} on owned objects, {self.foreign.n} foreign objects added)")
        print(f"backend flaps         {s['backend_flaps']}   link flaps {s['link_flaps']}")
        print(f"quiet-period checks   {s['checks']} (slowest convergence {s['converge_max']:.1f} s, bound {BOUND:.1f} s)")
        print(f"invariant violations  {s['violations']}")
        print(f"/healthz              {prober.ok} x 200, {prober.bad} other")
        print(f"metrics               reload failures {reload_fail:.0f}, drift repairs {drift:.0f}")
        print(f"RSS KiB first/last/max {rss[0]}/{rss[-1]}/{max(rss)}")
        print(f"open fds first/last/max {fds[0]}/{fds[-1]}/{max(fds)}")
        print("MemoryMax/TasksMax    not exercised here (no systemd); see scripts/test-systemd.sh")
        print("================================")
        for v in self.violations:
            print(f"violation: {v}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--sabotage", action="store_true", help="freeze the daemon once: the soak must fail")
    args = ap.parse_args()
    # SIGTERM (soak.sh's timeout) unwinds through run()'s finally: the daemon does not outlive us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
