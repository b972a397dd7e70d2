#!/usr/bin/env python3
"""Seeds fuzz/corpus/{route_dump,nft_dump}/ with real kernel answers: route and rule dumps
(IPv4 and IPv6) and nf_tables dumps (tables, chains, rules, sets, elements, generation),
read raw from netlink in a throwaway network namespace set up with `ip` and `nft`. Needs
root; re-executes itself under `unshare -n`, so the host's network is never touched."""
import os
import pathlib
import socket
import struct
import subprocess
import sys

if os.environ.get("SEEDS_IN_NETNS") != "1":
    env = dict(os.environ, SEEDS_IN_NETNS="1")
    sys.exit(subprocess.call(["unshare", "-n", sys.executable, __file__], env=env))

corpus = pathlib.Path(__file__).resolve().parents[1] / "corpus"
sh = lambda cmd, **kw: subprocess.run(cmd, shell=True, check=True, **kw)
sh("ip link set lo up && ip link add d0 type veth peer name d1 && ip link set d0 up && ip link set d1 up")
sh("ip addr add 192.0.2.1/24 dev d0 && ip -6 addr add 2001:db8::1/64 dev d0 nodad")
sh("ip route add 10.20.0.0/16 via 192.0.2.2 proto 190 table 1000 metric 100 mtu 1400")
sh("ip route add 10.30.0.0/16 proto 190 nexthop via 192.0.2.2 weight 2 nexthop via 192.0.2.3")
sh("ip route add blackhole 10.40.0.0/16 proto 190 && ip -6 route add 2001:db8:1::/48 via 2001:db8::2 proto 190")
sh("ip rule add from 10.0.0.0/8 iif d0 fwmark 0x10/0xff lookup 1000 priority 100 proto 190")
sh("ip -6 rule add to 2001:db8:1::/48 lookup 1000 priority 101 proto 190")
ruleset = """table inet t {
  set s { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 192.0.2.7 } }
  map m { type inet_service : verdict; elements = { 22 : jump c, 80 : accept } }
  chain c { counter accept comment "tail"; }
  chain input { type filter hook input priority 0; policy drop;
    ct state established,related accept
    ip saddr @s tcp dport { 22, 80 } counter accept comment "edgenetd: allow-ssh"
    meta l4proto tcp tcp dport vmap @m
    ip6 daddr 2001:db8::/32 reject with icmpx admin-prohibited
  }
}
"""
subprocess.run(["nft", "-f", "-"], input=ruleset.encode(), check=True)

def done(d):
    """True when the datagram holds NLMSG_DONE or NLMSG_ERROR."""
    off = 0
    while off + 16 <= len(d):
        length, kind = struct.unpack_from("=IH", d, off)
        if kind in (2, 3):
            return True
        off += max(16, (length + 3) & ~3)
    return False

def dump(proto, msg_type, body, flags=0x301):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto)
    s.bind((0, 0))
    hdr = struct.pack("=IHHII", 16 + len(body), msg_type, flags, 1, 0)
    s.send(hdr + body)
    out = []
    while True:
        d = s.recv(65536)
        out.append(d)
        if flags & 0x300 == 0 or done(d):
            break
    s.close()
    return out

def save(target, name, datagrams):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    for i, g in enumerate(datagrams):
        (d / f"{name}-{i}").write_bytes(g)

RTM_GETROUTE, RTM_GETRULE = 26, 34
for fam, tag in [(socket.AF_INET, "v4"), (socket.AF_INET6, "v6")]:
    save("route_dump", f"routes-{tag}", dump(socket.NETLINK_ROUTE, RTM_GETROUTE, struct.pack("=BBBBBBBBI", fam, 0, 0, 0, 0, 0, 0, 0, 0)))
    save("route_dump", f"rules-{tag}", dump(socket.NETLINK_ROUTE, RTM_GETRULE, struct.pack("=BBBBBBBBI", fam, 0, 0, 0, 0, 0, 0, 0, 0)))

NETLINK_NETFILTER, NFPROTO_INET = 12, 1
def nft(cmd, attrs=b"", family=NFPROTO_INET, flags=0x301):
    return dump(NETLINK_NETFILTER, (10 << 8) | cmd, struct.pack("=BBH", family, 0, 0) + attrs, flags)

def strattr(t, v):
    v = v.encode() + b"\0"
    a = struct.pack("=HH", 4 + len(v), t) + v
    return a + b"\0" * (-len(a) % 4)

save("nft_dump", "tables", nft(1, family=0))
save("nft_dump", "chains", nft(4, strattr(1, "t")))
save("nft_dump", "rules", nft(7, strattr(1, "t")))
save("nft_dump", "sets", nft(10, strattr(1, "t")))
save("nft_dump", "elems-s", nft(13, strattr(1, "t") + strattr(2, "s")))
save("nft_dump", "elems-m", nft(13, strattr(1, "t") + strattr(2, "m")))
save("nft_dump", "gen", nft(16, family=0, flags=1))
print("seeds:", {t: len(list((corpus / t).iterdir())) for t in ["route_dump", "nft_dump"]})
