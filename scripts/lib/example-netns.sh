# Sourced, not run: creates network namespace $1 with the links config/edgenetd.toml expects
# (br-lan 192.168.1.1/24, a LAN bridge with one veth port; eth0 203.0.113.2/24, a veth uplink)
# and defines in_ns (run a command inside it). The caller deletes the namespace.
example_netns_create() {
  local ns=$1
  ip netns add "$ns"
  in_ns() { ip netns exec "$ns" "$@"; }
  in_ns ip link set lo up
  in_ns ip link add br-lan type bridge
  in_ns ip link add lan-port type veth peer name lan-host
  in_ns ip link set lan-port master br-lan
  in_ns ip link add eth0 type veth peer name wan-host
  for l in br-lan lan-port lan-host eth0 wan-host; do in_ns ip link set "$l" up; done
  in_ns ip addr add 192.168.1.1/24 dev br-lan
  in_ns ip addr add 203.0.113.2/24 dev eth0
}
