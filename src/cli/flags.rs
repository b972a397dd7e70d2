//! Every flag of the command line, defined once: `--help`'s OPTIONS and EXPLAIN OPTIONS and
//! the man page's OPTIONS section are rendered from these tables (tests/repo/man_page.rs holds
//! packaging/man/edgenetd.8 to them). The parsers (`super::parse_args`, and
//! `explain::query` for explain's own) match the same names; a flag one of them does not
//! know is a usage error, and `every_flag_of_the_tables_is_one_its_parser_knows` (cli's unit
//! tests) tries every flag of both tables on its parser.

/// One flag: its name, its value, and what `--help` and the man page say of it.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// `--name`.
    pub long: &'static str,
    /// The value's placeholder (`PATH`); `None` for a switch.
    pub value: Option<&'static str>,
    /// `--help`'s description: its lines, each at most 60 columns; a default as
    /// `[default: …]` (the man page test checks the man paragraph states it).
    pub help: &'static [&'static str],
    /// The man page's paragraph after the tag, in roff.
    pub man: &'static str,
}

/// The column `--help` starts a description at (after four spaces of indent).
const HELP_TAG_WIDTH: usize = 19;

impl Flag {
    /// `--name VALUE`, as `--help` writes it.
    pub fn tag(&self) -> String {
        match self.value {
            Some(v) => format!("{} {v}", self.long),
            None => self.long.to_string(),
        }
    }

    /// The flag's lines of `--help`: a tag that fits the column shares the first line.
    fn write_help(&self, out: &mut String) {
        let tag = self.tag();
        let pad = " ".repeat(4 + HELP_TAG_WIDTH);
        let mut lines = self.help.iter();
        if tag.len() < HELP_TAG_WIDTH {
            let first = lines.next().copied().unwrap_or_default();
            out.push_str(&format!("    {tag:<HELP_TAG_WIDTH$}{first}\n"));
        } else {
            out.push_str(&format!("    {tag}\n"));
        }
        for line in lines {
            out.push_str(&format!("{pad}{line}\n"));
        }
    }

    /// The flag's `.TP` paragraph of the man page.
    fn write_man(&self, out: &mut String) {
        let long = self.long.replace('-', "\\-");
        match self.value {
            Some(v) => out.push_str(&format!(".TP\n.BI {long} \" {v}\"\n")),
            None => out.push_str(&format!(".TP\n.B {long}\n")),
        }
        out.push_str(self.man);
        out.push('\n');
    }
}

/// The flags of every verb (OPTIONS).
pub const OPTIONS: &[Flag] = &[
    Flag {
        long: "--config",
        value: Some("PATH"),
        help: &[
            "main config file; conf.d/*.toml beside it is merged after it",
            "[default: /etc/edgenetd/edgenetd.toml]",
        ],
        man: r#"Main configuration file; the
.I *.toml
files of
.I conf.d/
beside it are merged after it, in name order.
Default:
.IR /etc/edgenetd/edgenetd.toml ."#,
    },
    Flag {
        long: "--netns",
        value: Some("NAME"),
        help: &[
            "program the kernel inside `ip netns` NAME; HTTP stays where edgenetd",
            "was started (demos, tests, routers that live in a namespace);",
            "(apply, confirm) the daemon run with this --netns;",
            "(explain) read the router's addresses there",
        ],
        man: r#"Program the kernel inside the
.BR ip\-netns (8)
namespace
.IR NAME ;
HTTP stays in the namespace edgenetd was started in.
With
.BR apply " and " confirm :
the daemon run with this
.BR \-\-netns ;
another one refuses the request.
With
.BR explain :
read the router's addresses from that namespace's kernel."#,
    },
    Flag {
        long: "--target",
        value: Some("CONFIG"),
        help: &[
            "(apply, confirm) the daemon run with --config CONFIG: its control",
            "socket, and any other daemon refuses before changing anything",
            "[default: /etc/edgenetd/edgenetd.toml]",
        ],
        man: r#".RB ( apply ,
.BR confirm )
The daemon run with
.B \-\-config
.IR CONFIG :
its control socket is derived from
.I CONFIG
(and
.BR \-\-netns ),
and a daemon that runs another main config refuses the request before it changes anything.
Default:
.IR /etc/edgenetd/edgenetd.toml ."#,
    },
    Flag {
        long: "--log-level",
        value: Some("LEVEL"),
        help: &["error, warn, info, debug, trace [default: info, or $EDGENETD_LOG]"],
        man: r#"One of error, warn, info, debug, trace.
Default: info, or the value of
.BR EDGENETD_LOG ."#,
    },
    Flag {
        long: "--url",
        value: Some("URL"),
        help: &["daemon base URL for status [default: http://127.0.0.1:9750]"],
        man: r#"Base URL of the daemon for
.BR status .
Default:
.IR http://127.0.0.1:9750 ."#,
    },
    Flag {
        long: "--confirm",
        value: Some("DURATION"),
        help: &["(apply) roll back unless confirmed within DURATION (e.g. 30s, 5m)"],
        man: r#".RB ( apply )
Roll back unless confirmed within
.I DURATION
(1s to 24h, e.g. 30s or 5m)."#,
    },
    Flag {
        long: "--control-socket",
        value: Some("PATH"),
        help: &[
            "the daemon's control socket; each daemon has its own, for",
            "--config /etc/edgenetd/edgenetd.toml without --netns",
            "[default: /run/edgenetd/control.sock], for any other",
            "/run/edgenetd-[NETNS-]STEM-HASH/control.sock (its log says which)",
        ],
        man: r#"The daemon's control socket
.RB ( run
serves it,
.BR apply " and " confirm
connect to it).
Each daemon has its own: for
.B \-\-config
.I /etc/edgenetd/edgenetd.toml
without
.BR \-\-netns ,
the packaged daemon, the default is
.IR /run/edgenetd/control.sock ;
for any other,
.IR /run/edgenetd\-[NETNS\-]STEM\-HASH/control.sock ,
named after the netns, the main config's file name and a hash of both (its start\-up log
line says which).
A daemon that finds its socket served by another process exits with status 1 before it
touches any file."#,
    },
    Flag {
        long: "--state-dir",
        value: Some("PATH"),
        help: &[
            "(run) where the confirmed config is kept, the same way",
            "[default: /var/lib/edgenetd], or /var/lib/edgenetd-[NETNS-]STEM-HASH",
        ],
        man: r#".RB ( run )
Where the last confirmed configuration and a pending deadline are kept, derived the same
way: default
.I /var/lib/edgenetd
for the packaged daemon,
.I /var/lib/edgenetd\-[NETNS\-]STEM\-HASH
for any other."#,
    },
    Flag {
        long: "--version",
        value: None,
        help: &["print the version and exit"],
        man: r#"Print the version and exit."#,
    },
    Flag {
        long: "--help",
        value: None,
        help: &["print this text and exit"],
        man: r#"Print the usage summary and exit."#,
    },
];

/// `explain`'s own flags (EXPLAIN OPTIONS); `--config` and `--netns` are in [`OPTIONS`].
pub const EXPLAIN_OPTIONS: &[Flag] = &[
    Flag {
        long: "--in",
        value: Some("IFACE"),
        help: &["the interface the packet arrives on"],
        man: r#".RB ( explain )
The interface the packet arrives on."#,
    },
    Flag {
        long: "--from",
        value: Some("ADDR"),
        help: &["its source address"],
        man: r#".RB ( explain )
Its source address."#,
    },
    Flag {
        long: "--to",
        value: Some("ADDR"),
        help: &["its destination address"],
        man: r#".RB ( explain )
Its destination address (of the same IP version)."#,
    },
    Flag {
        long: "--sport",
        value: Some("N"),
        help: &["its source port (tcp, udp) [default: 40000]"],
        man: r#".RB ( explain )
Its source port, for tcp and udp.
Default: 40000."#,
    },
    Flag {
        long: "--dport",
        value: Some("N"),
        help: &["its destination port (tcp, udp)"],
        man: r#".RB ( explain )
Its destination port; required for tcp and udp."#,
    },
    Flag {
        long: "--proto",
        value: Some("PROTO"),
        help: &["tcp, udp, icmp or icmpv6"],
        man: r#".RB ( explain )
One of tcp, udp, icmp (IPv4), icmpv6 (IPv6)."#,
    },
    Flag {
        long: "--state",
        value: Some("STATE"),
        help: &["new (a connection's first packet) or established [default: new]"],
        man: r#".RB ( explain )
new (a connection's first packet) or established.
Default: new.
An established packet meets the NAT its connection's first packet got."#,
    },
    Flag {
        long: "--icmp-type",
        value: Some("N"),
        help: &["ICMP or ICMPv6 type, a number or a name [default: echo request]"],
        man: r#".RB ( explain )
The ICMP or ICMPv6 type, a number or a name such as echo\-reply.
Default: echo request."#,
    },
    Flag {
        long: "--dscp",
        value: Some("D"),
        help: &["its DSCP, 0-63 or a name such as ef, af41, cs1 [default: 0]"],
        man: r#".RB ( explain )
The packet's DSCP, 0\-63 or a name such as ef, af41, cs1.
Default: 0."#,
    },
    Flag {
        long: "--mark",
        value: Some("N"),
        help: &["the packet's firewall mark (for route rules' fwmark) [default: 0]"],
        man: r#".RB ( explain )
The packet's firewall mark, which route rules' fwmark match.
Default: 0."#,
    },
    Flag {
        long: "--addresses",
        value: Some("LIST"),
        help: &[
            "the router's addresses, IFACE=ADDR/LEN,...: its own addresses and",
            "connected routes, instead of the kernel's",
        ],
        man: r#".RB ( explain )
The router's own addresses as
.IR IFACE = ADDR / LEN ,...
(they are not in the configuration): each is a local address (traffic to it is input,
port forwards reflect on it, masquerade picks it) and a connected route to its prefix on
.IR IFACE .
It replaces the kernel's; without it and without
.BR \-\-offline ,
explain reads them from the kernel when the packet's interface exists there."#,
    },
    Flag {
        long: "--offline",
        value: None,
        help: &["no address is the router's own; the kernel is not read (a laptop)"],
        man: r#".RB ( explain )
Do not read the kernel: no address is the router's own (a laptop with the router's
configuration)."#,
    },
    Flag {
        long: "--json",
        value: None,
        help: &["one JSON object with verdict, rule, dnat, snat, route"],
        man: r#".RB ( explain )
Print one JSON object instead of the path as text."#,
    },
];

/// A `--help` section: its flags' lines.
pub fn help_section(flags: &[Flag]) -> String {
    let mut out = String::new();
    for f in flags {
        f.write_help(&mut out);
    }
    out
}

/// The body of the man page's OPTIONS section: every flag of both tables.
pub fn man_options() -> String {
    let mut out = String::new();
    for f in OPTIONS.iter().chain(EXPLAIN_OPTIONS) {
        f.write_man(&mut out);
    }
    out
}

/// Every flag of both tables.
pub fn all() -> impl Iterator<Item = &'static Flag> {
    OPTIONS.iter().chain(EXPLAIN_OPTIONS)
}
