//! Every flag of the command line, defined once, and the verbs' synopsis made of them:
//! `--help`'s USAGE, OPTIONS and EXPLAIN OPTIONS and the man page's SYNOPSIS and OPTIONS
//! (`super::man`, printed by `edgenetd --generate man`) are rendered from these tables. The
//! parsers (`super::parse_args`, and `explain::query` for explain's own) match the same
//! names; a flag one of them does not know is a usage error, a flag given to `explain` that
//! is not in [`EXPLAIN_OPTIONS`] or [`OPTIONS`] is one too (so a parser cannot take a flag
//! the help does not show), and `every_flag_of_the_tables_is_one_its_parser_knows` (cli's
//! unit tests) tries every flag of both tables on its parser. The unit tests here fail on a
//! flag that no verb's [`SYNOPSIS`] line names.

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

    /// The flag's name as roff writes it (`\-\-name`).
    fn roff_long(&self) -> String {
        self.long.replace('-', "\\-")
    }

    /// The flag's `.TP` paragraph of the man page.
    fn write_man(&self, out: &mut String) {
        let long = self.roff_long();
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
            "(run, explain) where the confirmed config is kept, the same way",
            "[default: /var/lib/edgenetd], or /var/lib/edgenetd-[NETNS-]STEM-HASH;",
            "explain reads the config_map version confirmed there",
        ],
        man: r#".RB ( run ,
.BR explain )
Where the last confirmed configuration and a pending deadline are kept, derived the same
way: default
.I /var/lib/edgenetd
for the packaged daemon,
.I /var/lib/edgenetd\-[NETNS\-]STEM\-HASH
for any other.
.B explain
reads the fragments of the
.B [kubernetes] config_map
version the daemon last confirmed there
.RI ( cluster\-config.json )
and evaluates them with the local files."#,
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
        long: "--from-pod",
        value: Some("NS/NAME"),
        help: &[
            "the source is this pod of this node (kubernetes builds): its",
            "address from the cluster state",
        ],
        man: r#".RB ( explain ,
.B kubernetes
builds) The source is this pod of this node, named
.IR NAMESPACE / NAME ;
its address is read from the cluster state the daemon keeps (see
.BR \-\-cluster\-state ).
The answer then says, for each end that is a pod here, which NetworkPolicies and
ClusterNetworkPolicies select it and which of them decided; where audit policies select
an end, it also answers with them enforced."#,
    },
    Flag {
        long: "--to-pod",
        value: Some("NS/NAME"),
        help: &["the destination is this pod of this node (kubernetes builds)"],
        man: r#".RB ( explain ,
.B kubernetes
builds) The destination is this pod of this node, as
.BR \-\-from\-pod ."#,
    },
    Flag {
        long: "--cluster-state",
        value: Some("FILE"),
        help: &[
            "the cluster state to explain with (kubernetes builds); without it,",
            "the cache_file of the config's [kubernetes] section",
        ],
        man: r#".RB ( explain ,
.B kubernetes
builds) The cluster state (Services, routes, pod policies) to explain with: a cache file the
daemon wrote.
Default: the config's
.B [kubernetes] cache_file
(or its default path) when the config has
.BR [kubernetes] ;
none without it."#,
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
        help: &[
            "tcp, udp, icmp, icmpv6, another name of /etc/protocols (gre, esp, ...) or a number",
        ],
        man: r#".RB ( explain )
One of tcp, udp, icmp (IPv4), icmpv6 (IPv6), another protocol name of /etc/protocols (gre, esp, ah, igmp, sctp, ...) or a number 0-255 (no ports, no ICMP type)."#,
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
        long: "--at",
        value: Some("TIME"),
        help: &[
            "when it comes, for time rules: YYYY-MM-DDTHH:MM[:SS], local",
            "time, or UTC with a trailing Z",
        ],
        man: r#".RB ( explain )
When the packet comes, YYYY\-MM\-DDTHH:MM[:SS] in the local time zone, or in UTC with a
trailing Z. Needed only when a rule matches on the time (start_time, stop_time, weekdays,
start_date, stop_date): without it explain says the verdict depends on the time."#,
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

/// The flag named `long` (`--mark`), of either table.
pub fn find(long: &str) -> Option<&'static Flag> {
    all().find(|f| f.long == long)
}

/// One place of a verb's synopsis: a flag, or a choice of flags (`--a | --b`).
#[derive(Debug, Clone, Copy)]
pub struct Arg {
    /// The flags by name; more than one are alternatives.
    pub flags: &'static [&'static str],
    /// Must be given (not in brackets).
    pub required: bool,
    /// A placeholder of its own instead of the flag's (`apply --config NEW`).
    pub value: Option<&'static str>,
    /// Required alternatives among other flags, shown in parentheses so that the bars
    /// cannot be read as splitting the whole line.
    pub grouped: bool,
}

/// `[--flag VALUE]`.
const fn opt(flag: &'static [&'static str]) -> Arg {
    Arg {
        flags: flag,
        required: false,
        value: None,
        grouped: false,
    }
}

/// `(--a A | --b B)`: one of them must be given.
const fn either(flags: &'static [&'static str]) -> Arg {
    Arg {
        required: true,
        grouped: true,
        ..opt(flags)
    }
}

/// `--flag VALUE`.
const fn req(flag: &'static [&'static str]) -> Arg {
    Arg {
        required: true,
        ..opt(flag)
    }
}

/// One line of the synopsis: a verb and its flags in the order they are shown.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// The verb's word; empty for the line of flags that stand alone (`--version`).
    pub verb: &'static str,
    /// Its flags.
    pub args: &'static [Arg],
}

/// The synopsis: every verb (`super::Verb`'s words but `help`) and the flags it takes. A new
/// flag goes on the line of each verb that takes it (the unit tests fail on a flag of the
/// tables that no line names, and on an `explain` flag missing from explain's line).
pub const SYNOPSIS: &[Usage] = &[
    Usage {
        verb: "run",
        args: &[
            opt(&["--config"]),
            opt(&["--netns"]),
            opt(&["--log-level"]),
            opt(&["--control-socket"]),
            opt(&["--state-dir"]),
        ],
    },
    Usage {
        verb: "check",
        args: &[opt(&["--config"])],
    },
    Usage {
        verb: "plan",
        args: &[opt(&["--config"])],
    },
    Usage {
        verb: "cleanup",
        args: &[opt(&["--config"])],
    },
    Usage {
        verb: "status",
        args: &[opt(&["--url"])],
    },
    Usage {
        verb: "explain",
        args: &[
            opt(&["--config"]),
            req(&["--in"]),
            either(&["--from", "--from-pod"]),
            opt(&["--sport"]),
            either(&["--to", "--to-pod"]),
            opt(&["--dport"]),
            req(&["--proto"]),
            opt(&["--state"]),
            opt(&["--icmp-type"]),
            opt(&["--dscp"]),
            opt(&["--mark"]),
            opt(&["--at"]),
            opt(&["--cluster-state"]),
            opt(&["--state-dir"]),
            opt(&["--json"]),
            opt(&["--netns", "--addresses", "--offline"]),
        ],
    },
    Usage {
        verb: "apply",
        args: &[
            Arg {
                value: Some("NEW"),
                ..req(&["--config"])
            },
            opt(&["--confirm"]),
            opt(&["--target"]),
            opt(&["--netns"]),
            opt(&["--control-socket"]),
        ],
    },
    Usage {
        verb: "confirm",
        args: &[
            opt(&["--target"]),
            opt(&["--netns"]),
            opt(&["--control-socket"]),
        ],
    },
    Usage {
        verb: "",
        args: &[req(&["--version", "--help"])],
    },
];

/// The width `--help`'s USAGE lines are wrapped at.
const USAGE_WIDTH: usize = 88;

/// The column a verb's flags start at in `--help`'s USAGE (after `edgenetd ` and the longest
/// verb).
const USAGE_ARGS_AT: usize = 4 + "edgenetd ".len() + 8;

impl Arg {
    /// The flags of this place, from the tables.
    fn each(&self) -> impl Iterator<Item = &'static Flag> + '_ {
        self.flags
            .iter()
            .map(|long| find(long).unwrap_or_else(|| panic!("{long} is in no flag table")))
    }

    /// The placeholder shown for `flag`.
    fn value_of(&self, flag: &Flag) -> Option<&'static str> {
        flag.value.map(|v| self.value.unwrap_or(v))
    }

    /// `[--a A | --b]`, as `--help` writes it.
    fn help_text(&self) -> String {
        let choices: Vec<String> = self
            .each()
            .map(|f| match self.value_of(f) {
                Some(v) => format!("{} {v}", f.long),
                None => f.long.to_string(),
            })
            .collect();
        let text = choices.join(" | ");
        match (self.required, self.grouped) {
            (true, false) => text,
            (true, true) => format!("({text})"),
            (false, _) => format!("[{text}]"),
        }
    }

    /// The roff lines of this place: the flag bold, its placeholder italic, brackets and bars
    /// roman.
    fn write_man(&self, out: &mut String) {
        let flags: Vec<&Flag> = self.each().collect();
        let (open_with, close_with) = match (self.required, self.grouped) {
            (true, false) => ("", ""),
            (true, true) => ("( ", " )"),
            (false, _) => ("[ ", " ]"),
        };
        for (i, f) in flags.iter().enumerate() {
            let open = if i == 0 { open_with } else { "" };
            let close = if i + 1 == flags.len() {
                close_with
            } else {
                " \" |\""
            };
            let long = f.roff_long();
            match (self.value_of(f), open, close) {
                (Some(v), "", "") => out.push_str(&format!(".BI {long} \" {v}\"\n")),
                (Some(v), open, close) => {
                    let macro_ = if open.is_empty() { ".B" } else { ".RB" };
                    let value = if close.is_empty() { ".I" } else { ".IR" };
                    out.push_str(&format!("{macro_} {open}{long}\n{value} {v}{close}\n"));
                }
                (None, "", "") => out.push_str(&format!(".B {long}\n")),
                (None, "", close) => out.push_str(&format!(".BR {long}{close}\n")),
                (None, open, close) => out.push_str(&format!(".RB {open}{long}{close}\n")),
            }
        }
    }
}

/// `--help`'s USAGE lines: each verb's flags wrapped at 88 columns (`USAGE_WIDTH`) and
/// indented under the first.
pub fn help_synopsis() -> String {
    let mut out = String::new();
    for usage in SYNOPSIS {
        let mut line = if usage.verb.is_empty() {
            "    edgenetd".to_string()
        } else {
            format!(
                "    edgenetd {:<1$}",
                usage.verb,
                USAGE_ARGS_AT - 4 - "edgenetd ".len() - 1
            )
        };
        for (i, arg) in usage.args.iter().enumerate() {
            let text = arg.help_text();
            if i > 0 && line.len() + 1 + text.len() > USAGE_WIDTH {
                out.push_str(&line);
                out.push('\n');
                line = " ".repeat(USAGE_ARGS_AT - 1);
            }
            line.push(' ');
            line.push_str(&text);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The body of the man page's SYNOPSIS section: a `.B edgenetd VERB` line and its flags per
/// verb, `.br` between them.
pub fn man_synopsis() -> String {
    let lines: Vec<String> = SYNOPSIS
        .iter()
        .map(|usage| {
            let mut out = match usage.verb {
                "" => ".B edgenetd\n".to_string(),
                verb => format!(".B edgenetd {verb}\n"),
            };
            for arg in usage.args {
                arg.write_man(&mut out);
            }
            out
        })
        .collect();
    lines.join(".br\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 22): `--dscp` was added to the table and to explain's parser, and
    /// the synopsis had to be found and edited by hand in two places.
    #[test]
    fn every_flag_of_the_tables_is_on_a_synopsis_line_and_explains_on_its_own() {
        let named = |verb: &str, long: &str| {
            SYNOPSIS
                .iter()
                .filter(|u| verb.is_empty() || u.verb == verb)
                .any(|u| u.args.iter().any(|a| a.flags.contains(&long)))
        };
        for f in all() {
            assert!(named("", f.long), "{}: on no verb's SYNOPSIS line", f.long);
        }
        for f in EXPLAIN_OPTIONS {
            assert!(
                named("explain", f.long),
                "{}: not on explain's line",
                f.long
            );
        }
        for usage in SYNOPSIS {
            for arg in usage.args {
                assert_eq!(arg.each().count(), arg.flags.len());
            }
        }
        // The check can fail: a name no line has.
        assert!(!named("", "--no-such-flag"));
    }

    #[test]
    fn the_help_synopsis_wraps_under_the_first_flag_and_brackets_the_optional() {
        let text = help_synopsis();
        assert!(text.lines().all(|l| l.len() <= USAGE_WIDTH), "{text}");
        assert!(
            text.starts_with("    edgenetd run     [--config PATH] [--netns NAME]"),
            "{text}"
        );
        assert!(
            text.contains("    edgenetd apply   --config NEW [--confirm DURATION]"),
            "{text}"
        );
        assert!(
            text.contains(" --in IFACE (--from ADDR | --from-pod NS/NAME)"),
            "{text}"
        );
        assert!(
            text.contains("[--netns NAME | --addresses LIST | --offline]"),
            "{text}"
        );
        assert!(
            text.ends_with("    edgenetd --version | --help\n"),
            "{text}"
        );
        let continued = text
            .lines()
            .filter(|l| l.starts_with(&" ".repeat(USAGE_ARGS_AT)));
        assert!(continued.count() >= 3, "{text}");
    }

    #[test]
    fn the_man_synopsis_sets_flags_bold_values_italic_and_brackets_roman() {
        let roff = man_synopsis();
        for want in [
            ".B edgenetd run\n.RB [ \\-\\-config\n.IR PATH ]\n",
            ".BI \\-\\-in \" IFACE\"\n",
            ".RB [ \\-\\-json ]\n",
            ".RB [ \\-\\-netns\n.IR NAME \" |\"\n.B \\-\\-addresses\n.IR LIST \" |\"\n.BR \\-\\-offline ]\n",
            ".B edgenetd apply\n.BI \\-\\-config \" NEW\"\n",
            ".br\n.B edgenetd\n.BR \\-\\-version \" |\"\n.B \\-\\-help\n",
        ] {
            assert!(roff.contains(want), "{want:?} not in\n{roff}");
        }
    }
}
