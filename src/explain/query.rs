//! The command line of `edgenetd explain`, parsed into the packet it asks about.

use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;

use crate::calendar;
use crate::names::{dscp_by_name, icmp_type_by_name, icmpv6_type_by_name, ip_protocol_by_name};
use crate::sys;

use super::kernel::Wanted;
use super::packet::{Packet, Proto};
use super::route::Addresses;

/// The source port when `--sport` is not given.
pub const DEFAULT_SPORT: u16 = 40000;

/// A parsed `explain` command line.
#[derive(Debug)]
pub struct Query {
    /// `--config`.
    pub config: PathBuf,
    /// The packet as it arrives.
    pub packet: Packet,
    /// `--addresses` (empty without it).
    pub addresses: Addresses,
    /// Where the router's addresses are to come from: the kernel unless `--addresses` or
    /// `--offline`.
    pub wanted: Wanted,
    /// `--json`.
    pub json: bool,
    /// `--from-pod` and `--to-pod`: the ends named as pods, whose addresses the cluster
    /// state gives ([`Query::name_pods`]); until then the packet holds stand-ins there.
    pub pods: PodEnds,
    /// `--cluster-state`: the cluster state to read instead of `[kubernetes] cache_file`.
    pub cluster_state: Option<PathBuf>,
    /// `--state-dir`: where the daemon keeps the `config_map` version it confirmed, instead
    /// of the directory derived from `--config` and `--netns` as the daemon derives it.
    pub state_dir: Option<PathBuf>,
}

impl Query {
    /// The state directory of the daemon this query is about: `--state-dir`, else the one a
    /// daemon run with the same `--config` and `--netns` keeps.
    pub fn state_dir(&self) -> PathBuf {
        let netns = match &self.wanted {
            Wanted::Kernel { netns } => netns.as_deref(),
            Wanted::Given | Wanted::Offline => None,
        };
        self.state_dir.clone().unwrap_or_else(|| {
            crate::control::instance::Instance::new(&self.config, netns).state_dir()
        })
    }
}

/// The ends of the packet named as pods (`namespace/name`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodEnds {
    /// `--from-pod`.
    pub from: Option<String>,
    /// `--to-pod`.
    pub to: Option<String>,
}

impl PodEnds {
    /// True when neither end is named as a pod.
    pub fn is_empty(&self) -> bool {
        self.from.is_none() && self.to.is_none()
    }
}

impl Query {
    /// Puts the addresses of the pods named by `--from-pod`/`--to-pod` into the packet, from
    /// `names` (address -> `namespace/name`, this node's pods). A pod with addresses of both
    /// families takes the other end's family (IPv4 when both ends are pods with both).
    pub fn name_pods(
        &mut self,
        names: &std::collections::BTreeMap<IpAddr, String>,
    ) -> Result<(), String> {
        let addrs = |flag: &str, pod: &str| -> Result<Vec<IpAddr>, String> {
            let found: Vec<IpAddr> = names
                .iter()
                .filter(|(_, n)| n.as_str() == pod)
                .map(|(a, _)| *a)
                .collect();
            if found.is_empty() {
                return Err(format!(
                    "{flag} {pod}: no such pod on this node in the cluster state (it names this node's pods, while some policy selects a pod here); give its address with {}",
                    flag.trim_end_matches("-pod")
                ));
            }
            Ok(found)
        };
        let from = self
            .pods
            .from
            .as_deref()
            .map(|p| addrs("--from-pod", p))
            .transpose()?;
        let to = self
            .pods
            .to
            .as_deref()
            .map(|p| addrs("--to-pod", p))
            .transpose()?;
        let pick = |found: &[IpAddr], other: Option<IpAddr>| -> IpAddr {
            other
                .and_then(|o| found.iter().find(|a| a.is_ipv4() == o.is_ipv4()))
                .copied()
                .unwrap_or(found[0])
        };
        let p = &mut self.packet;
        match (&from, &to) {
            (Some(f), Some(t)) => {
                let (a, b) = f
                    .iter()
                    .find_map(|a| {
                        t.iter()
                            .find(|b| b.is_ipv4() == a.is_ipv4())
                            .map(|b| (*a, *b))
                    })
                    .ok_or_else(|| {
                        "--from-pod and --to-pod: the two pods have no address of one IP version"
                            .to_string()
                    })?;
                p.saddr = a;
                p.daddr = b;
            }
            (Some(f), None) => p.saddr = pick(f, Some(p.daddr)),
            (None, Some(t)) => p.daddr = pick(t, Some(p.saddr)),
            (None, None) => return Ok(()),
        }
        p.orig_daddr = p.daddr;
        families(p.saddr, p.daddr, p.proto)
    }
}

/// `--from-pod`/`--to-pod`: `namespace/name`.
fn pod_name(flag: &str, v: &str) -> Result<String, String> {
    match v.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(v.to_string())
        }
        _ => Err(format!("{flag}: `{v}` is not NAMESPACE/NAME")),
    }
}

/// The checks the two addresses and the protocol must pass together.
fn families(saddr: IpAddr, daddr: IpAddr, proto: Proto) -> Result<(), String> {
    if saddr.is_ipv4() != daddr.is_ipv4() {
        return Err("--from and --to must be of the same IP version".into());
    }
    match proto {
        Proto::Icmp if !saddr.is_ipv4() => Err("--proto icmp is IPv4; use icmpv6".into()),
        Proto::Icmpv6 if saddr.is_ipv4() => Err("--proto icmpv6 is IPv6; use icmp".into()),
        _ => Ok(()),
    }
}

/// The flags as given, before they are checked against each other.
#[derive(Default)]
struct Raw {
    iif: Option<String>,
    from: Option<IpAddr>,
    to: Option<IpAddr>,
    sport: Option<u16>,
    dport: Option<u16>,
    proto: Option<Proto>,
    established: bool,
    icmp_type: Option<String>,
    dscp: u8,
    mark: u32,
    at: Option<i64>,
    pods: PodEnds,
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|n| n.to_string().parse().ok()),
        None => v.parse().ok(),
    };
    parsed.ok_or_else(|| format!("{flag}: `{v}` is not a valid number"))
}

fn addr(flag: &str, v: &str) -> Result<IpAddr, String> {
    v.parse()
        .map_err(|_| format!("{flag}: `{v}` is not an IP address"))
}

/// `--dscp`: a number 0-63 or a name (`ef`, `af41`, `cs1`).
fn dscp(v: &str) -> Result<u8, String> {
    number::<u8>("--dscp", v)
        .ok()
        .filter(|d| *d <= 63)
        .or_else(|| dscp_by_name(v))
        .ok_or_else(|| {
            format!("--dscp: `{v}` is not a DSCP: a number 0-63 or a name such as ef, af41, cs1")
        })
}

/// `--at`: `YYYY-MM-DDTHH:MM[:SS]` (or with a space for the `T`) in the local time zone,
/// as the rules' local times are; a trailing `Z` makes it UTC. Seconds since the epoch.
fn at(v: &str) -> Result<i64, String> {
    let (stamp, utc) = match v.strip_suffix(['Z', 'z']) {
        Some(s) => (s, true),
        None => (v, false),
    };
    let bad = || {
        format!(
            "--at: `{v}` is not a time: expected YYYY-MM-DDTHH:MM[:SS], local, or UTC with a trailing Z"
        )
    };
    if !stamp.contains(['T', ' ']) {
        return Err(bad());
    }
    let naive = calendar::parse_date_time(stamp).ok_or_else(bad)?;
    if utc {
        return Ok(naive);
    }
    // The offset of that instant: first guess with the offset at the naive time.
    let guess = naive - i64::from(sys::utc_offset_at(naive));
    Ok(naive - i64::from(sys::utc_offset_at(guess)))
}

/// A protocol name of `/etc/protocols` (`icmpv6` too) or a number 0-255.
fn proto(v: &str) -> Result<Proto, String> {
    let n = v
        .parse::<u8>()
        .ok()
        .or_else(|| ip_protocol_by_name(v))
        .ok_or_else(|| {
            format!("--proto: `{v}` is not tcp, udp, icmp, icmpv6, another protocol name of /etc/protocols (gre, esp, ...) or a number 0-255")
        })?;
    Ok(match n {
        6 => Proto::Tcp,
        17 => Proto::Udp,
        1 => Proto::Icmp,
        58 => Proto::Icmpv6,
        n => Proto::Other(n),
    })
}

/// `IFACE=ADDR/LEN,IFACE=ADDR/LEN,...`.
fn addresses(v: &str) -> Result<Addresses, String> {
    let mut entries = Vec::new();
    for item in v.split(',').filter(|s| !s.is_empty()) {
        let (iface, net) = item
            .split_once('=')
            .ok_or_else(|| format!("--addresses: `{item}` is not IFACE=ADDR/LEN"))?;
        let net: IpNet = net
            .parse()
            .map_err(|_| format!("--addresses: `{net}` is not ADDR/LEN"))?;
        entries.push((iface.to_string(), net));
    }
    Ok(Addresses { entries })
}

/// Parses the arguments after `explain`; `default_config` when `--config` is absent.
pub fn parse(args: &[String], default_config: &str) -> Result<Query, String> {
    let mut raw = Raw::default();
    let mut config = PathBuf::from(default_config);
    let mut addrs = Addresses::default();
    let mut json = false;
    let mut cluster_state = None;
    let mut state_dir = None;
    let (mut given, mut offline, mut netns) = (false, false, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--config" | "-c" => config = PathBuf::from(value()?),
            "--in" => raw.iif = Some(value()?),
            "--from" => raw.from = Some(addr(flag, &value()?)?),
            "--to" => raw.to = Some(addr(flag, &value()?)?),
            "--from-pod" => raw.pods.from = Some(pod_name(flag, &value()?)?),
            "--to-pod" => raw.pods.to = Some(pod_name(flag, &value()?)?),
            "--cluster-state" => cluster_state = Some(PathBuf::from(value()?)),
            "--state-dir" => state_dir = Some(PathBuf::from(value()?)),
            "--sport" => raw.sport = Some(number(flag, &value()?)?),
            "--dport" => raw.dport = Some(number(flag, &value()?)?),
            "--proto" => raw.proto = Some(proto(&value()?)?),
            "--icmp-type" => raw.icmp_type = Some(value()?),
            "--mark" => raw.mark = number(flag, &value()?)?,
            "--dscp" => raw.dscp = dscp(&value()?)?,
            "--at" => raw.at = Some(at(&value()?)?),
            "--addresses" => {
                addrs = addresses(&value()?)?;
                given = true;
            }
            "--offline" => offline = true,
            "--netns" => netns = Some(value()?),
            "--json" => json = true,
            "--state" => {
                raw.established = match value()?.as_str() {
                    "new" => false,
                    "established" => true,
                    other => return Err(format!("--state: `{other}` is not new or established")),
                }
            }
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    let wanted = match (given, offline, netns) {
        (true, _, Some(_)) | (_, true, Some(_)) => {
            return Err(
                "--netns reads the addresses from the kernel: not with --addresses or --offline"
                    .into(),
            );
        }
        (true, _, None) => Wanted::Given,
        (false, true, None) => Wanted::Offline,
        (false, false, netns) => Wanted::Kernel { netns },
    };
    let pods = raw.pods.clone();
    Ok(Query {
        config,
        packet: packet(raw)?,
        addresses: addrs,
        wanted,
        json,
        pods,
        cluster_state,
        state_dir,
    })
}

/// An end given as an address, or named as a pod (a stand-in of `other`'s family until the
/// pod's address is known).
fn end(
    flag: &str,
    addr: Option<IpAddr>,
    pod: &Option<String>,
    other: Option<IpAddr>,
) -> Result<IpAddr, String> {
    match (addr, pod) {
        (Some(_), Some(_)) => Err(format!("{flag} and {flag}-pod: give one")),
        (Some(a), None) => Ok(a),
        (None, Some(_)) => Ok(match other {
            Some(IpAddr::V6(_)) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            _ => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        }),
        (None, None) => Err(format!(
            "explain needs {flag} ADDR (or {flag}-pod NAMESPACE/NAME)"
        )),
    }
}

fn packet(raw: Raw) -> Result<Packet, String> {
    let iif = raw.iif.ok_or("explain needs --in IFACE")?;
    let saddr = end("--from", raw.from, &raw.pods.from, raw.to)?;
    let daddr = end("--to", raw.to, &raw.pods.to, raw.from)?;
    let proto = raw
        .proto
        .ok_or("explain needs --proto tcp|udp|icmp|icmpv6")?;
    // A pod's address, and so its family, is known only once the cluster state is read.
    if raw.pods.is_empty() {
        families(saddr, daddr, proto)?;
    }
    if proto.has_ports() && raw.dport.is_none() {
        return Err(format!("--proto {} needs --dport N", proto.name()));
    }
    if !proto.has_ports() && (raw.dport.is_some() || raw.sport.is_some()) {
        return Err(format!("--proto {} has no ports", proto.name()));
    }
    if matches!(proto, Proto::Other(_)) && raw.icmp_type.is_some() {
        return Err(format!("--proto {} has no ICMP type", proto.name()));
    }
    let (sport, dport) = if proto.has_ports() {
        (raw.sport.unwrap_or(DEFAULT_SPORT), raw.dport.unwrap_or(0))
    } else {
        (0, 0)
    };
    let echo_request = if proto == Proto::Icmp { 8 } else { 128 };
    let icmp_type = match raw.icmp_type.as_deref() {
        None => echo_request,
        Some(t) => number("--icmp-type", t).or_else(|e| {
            let by_name = if proto == Proto::Icmp {
                icmp_type_by_name(t)
            } else {
                icmpv6_type_by_name(t)
            };
            by_name.ok_or(e)
        })?,
    };
    Ok(Packet {
        iif,
        oif: String::new(),
        saddr,
        daddr,
        proto,
        sport,
        dport,
        icmp_type,
        dscp: raw.dscp,
        ct_state: Packet::state_bits(raw.established),
        ct_status: 0,
        ct_mark: 0,
        mark: raw.mark,
        orig_daddr: daddr,
        orig_dport: dport,
        at: raw.at,
    })
}

#[cfg(test)]
mod tests {
    use super::{at, parse};
    use crate::control::instance::Instance;
    use std::path::{Path, PathBuf};

    #[test]
    fn the_state_dir_is_the_daemons_of_the_same_config_and_netns_unless_given() {
        let args = |extra: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = [
                "--config",
                "/etc/edgenetd/r1.toml",
                "--in",
                "wan",
                "--from",
                "192.0.2.2",
                "--to",
                "192.0.2.1",
                "--proto",
                "tcp",
                "--dport",
                "22",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(extra.iter().map(|s| s.to_string()));
            a
        };
        let main = Path::new("/etc/edgenetd/r1.toml");
        let q = parse(&args(&["--netns", "r1"]), "x").unwrap();
        assert_eq!(q.state_dir(), Instance::new(main, Some("r1")).state_dir());
        assert_ne!(q.state_dir(), Instance::new(main, None).state_dir());
        let q = parse(&args(&["--offline"]), "x").unwrap();
        assert_eq!(q.state_dir(), Instance::new(main, None).state_dir());
        let q = parse(&args(&["--state-dir", "/srv/r1-state"]), "x").unwrap();
        assert_eq!(q.state_dir(), PathBuf::from("/srv/r1-state"));
    }

    #[test]
    fn at_reads_utc_with_a_z_and_refuses_what_is_no_time() {
        // 2026-12-02 13:05:00 UTC.
        assert_eq!(at("2026-12-02T13:05:00Z"), Ok(1_796_216_700));
        assert_eq!(at("2026-12-02 13:05z"), Ok(1_796_216_700));
        for bad in [
            "2026-12-02",
            "2026-12-02T25:00Z",
            "13:05",
            "2026-02-30T10:00",
            "now",
        ] {
            let e = at(bad).unwrap_err();
            assert!(
                e.starts_with(&format!("--at: `{bad}` is not a time")),
                "{e}"
            );
        }
    }
}
