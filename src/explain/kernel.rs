//! Where the router's own addresses come from. On the router (or inside `--netns`) they are
//! the kernel's: read through the dataplane's rtnetlink dump, so an address of the router is
//! local without the operator listing every one. Elsewhere (a laptop with the router's
//! config) the config's interfaces do not exist, and explain stays pure: `--addresses` or
//! none, as `--offline` asks.

use ipnet::IpNet;
use serde_json::{Value as Json, json};

use crate::dataplane::route::RouteSocket;

use super::route::Addresses;

/// Where the addresses were asked to come from (the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// The kernel's, of this process's namespace or of `ip netns` NAME, when the packet's
    /// interface exists there.
    Kernel {
        /// `--netns`.
        netns: Option<String>,
    },
    /// `--addresses` as given.
    Given,
    /// `--offline`: none.
    Offline,
}

/// Where the addresses explain used came from, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Read from the kernel.
    Kernel {
        /// The namespace read, `None` for explain's own.
        netns: Option<String>,
    },
    /// `--addresses`.
    Given,
    /// `--offline`.
    Offline,
    /// The kernel was read but the packet's interface is not there: not the router, so none.
    NotHere {
        /// The `--in` interface missing.
        iface: String,
    },
    /// The kernel could not be read (in explain's own namespace): none.
    Unreadable {
        /// Why.
        error: String,
    },
}

impl Source {
    /// The `addresses:` line of the human answer.
    pub fn line(&self) -> String {
        let what = match self {
            Source::Kernel { netns: Some(ns) } => format!("from the kernel (netns {ns})"),
            Source::Kernel { netns: None } => "from the kernel".into(),
            Source::Given => "as given (--addresses)".into(),
            Source::Offline => "none (--offline)".into(),
            Source::NotHere { iface } => format!(
                "none: no interface {iface} here (not the router: run it there, with --netns, or give --addresses)"
            ),
            Source::Unreadable { error } => {
                format!("none: the kernel's could not be read ({error})")
            }
        };
        format!("addresses: {what}")
    }

    /// The `addresses` object of `--json`: `from` (`kernel`, `given`, `offline`, `none`),
    /// `netns`, the entries used (`IFACE=ADDR/LEN`) and, for `none`, why.
    pub fn json(&self, used: &Addresses) -> Json {
        let (from, netns, why) = match self {
            Source::Kernel { netns } => ("kernel", netns.clone(), None),
            Source::Given => ("given", None, None),
            Source::Offline => ("offline", None, None),
            Source::NotHere { .. } | Source::Unreadable { .. } => (
                "none",
                None,
                Some(self.line()["addresses: none: ".len()..].to_string()),
            ),
        };
        let entries: Vec<String> = used
            .entries
            .iter()
            .map(|(i, n)| format!("{i}={n}"))
            .collect();
        json!({"from": from, "netns": netns, "entries": entries, "why": why})
    }
}

/// What the kernel of one namespace has.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Every interface's name, with an address or without.
    pub links: Vec<String>,
    /// (interface, address with its prefix length).
    pub entries: Vec<(String, IpNet)>,
}

/// Every interface and its addresses in `netns` (explain's own when `None`). A thread of its
/// own enters the namespace, so explain's own stays where it was.
pub fn read(netns: Option<&str>) -> Result<Reading, String> {
    let netns = netns.map(str::to_string);
    std::thread::spawn(move || {
        if let Some(ns) = &netns {
            let file = std::fs::File::open(format!("/run/netns/{ns}"))
                .map_err(|e| format!("netns {ns}: {e}"))?;
            crate::sys::enter_net_namespace(&file).map_err(|e| format!("netns {ns}: {e}"))?;
        }
        smol::block_on(async {
            let socket = RouteSocket::open().map_err(|e| e.to_string())?;
            let links = socket.link_table().await.map_err(|e| e.to_string())?;
            let nets = socket.address_networks().await.map_err(|e| e.to_string())?;
            let name = |index: u32| {
                links
                    .links
                    .iter()
                    .find(|l| l.index == index)
                    .map(|l| l.name.clone())
            };
            let entries = nets
                .into_iter()
                .filter_map(|(i, n)| name(i).map(|name| (name, n)))
                .collect();
            Ok(Reading {
                links: links.links.iter().map(|l| l.name.clone()).collect(),
                entries,
            })
        })
    })
    .join()
    .map_err(|_| "the reading thread panicked".to_string())?
}

/// The addresses for a packet arriving on `iif`, as `wanted`, `given` being `--addresses`.
/// Only an explicit `--netns` that cannot be read is an error.
pub fn resolve(
    wanted: &Wanted,
    given: Addresses,
    iif: &str,
) -> Result<(Addresses, Source), String> {
    let netns = match wanted {
        Wanted::Given => return Ok((given, Source::Given)),
        Wanted::Offline => return Ok((Addresses::default(), Source::Offline)),
        Wanted::Kernel { netns } => netns.clone(),
    };
    let read = match read(netns.as_deref()) {
        Ok(r) => r,
        Err(e) if netns.is_some() => return Err(e),
        Err(error) => return Ok((Addresses::default(), Source::Unreadable { error })),
    };
    // An interface of that name (with an address or without) says this is the router.
    if !read.links.iter().any(|name| name == iif) {
        return Ok((
            Addresses::default(),
            Source::NotHere {
                iface: iif.to_string(),
            },
        ));
    }
    Ok((
        Addresses {
            entries: read.entries,
        },
        Source::Kernel { netns },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given() -> Addresses {
        Addresses {
            entries: vec![("wan".into(), "192.0.2.1/24".parse().unwrap())],
        }
    }

    #[test]
    fn addresses_given_or_offline_never_read_the_kernel() {
        let (a, s) = resolve(&Wanted::Given, given(), "no-such-if").unwrap();
        assert_eq!((a.entries.len(), s), (1, Source::Given));
        let (a, s) = resolve(&Wanted::Offline, given(), "no-such-if").unwrap();
        assert_eq!((a.entries.len(), s), (0, Source::Offline));
    }

    #[test]
    fn the_report_says_where_the_addresses_came_from() {
        let ns = Source::Kernel {
            netns: Some("r1".into()),
        };
        assert_eq!(ns.line(), "addresses: from the kernel (netns r1)");
        let j = ns.json(&given());
        assert_eq!(
            j,
            json!({"from": "kernel", "netns": "r1", "entries": ["wan=192.0.2.1/24"], "why": null})
        );
        let here = Source::NotHere {
            iface: "wan".into(),
        };
        assert_eq!(here.json(&Addresses::default())["from"], "none");
        assert!(
            here.json(&Addresses::default())["why"]
                .as_str()
                .unwrap()
                .starts_with("no interface wan here"),
        );
    }

    #[test]
    fn netns_excludes_the_pure_modes() {
        let args = |extra: &[&str]| {
            ["--in", "x", "--from", "10.0.0.2", "--to", "10.0.0.1"]
                .iter()
                .chain(["--proto", "icmp"].iter())
                .chain(extra)
                .map(|s| s.to_string())
                .collect::<Vec<String>>()
        };
        let q = crate::explain::query::parse(&args(&[]), "c").unwrap();
        assert_eq!(q.wanted, Wanted::Kernel { netns: None });
        let q = crate::explain::query::parse(&args(&["--netns", "r1"]), "c").unwrap();
        assert_eq!(
            q.wanted,
            Wanted::Kernel {
                netns: Some("r1".into())
            }
        );
        let q = crate::explain::query::parse(&args(&["--offline"]), "c").unwrap();
        assert_eq!(q.wanted, Wanted::Offline);
        for bad in [
            &["--netns", "r1", "--offline"][..],
            &["--addresses", "x=10.0.0.1/24", "--netns", "r1"],
        ] {
            assert!(
                crate::explain::query::parse(&args(bad), "c").is_err(),
                "{bad:?}"
            );
        }
    }
}
