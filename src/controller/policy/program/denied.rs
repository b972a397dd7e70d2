//! Denied flows reported by the daemon itself: a dropping rule carries `log prefix
//! "<what>" group <NFLOG_GROUP>`, so each packet it drops goes over netlink (nflog) to the
//! daemon, which names the rule or policy behind the prefix, counts the packet and logs a
//! rate-limited line. The prefix says which kind of drop it was; the names behind a pod
//! drop (which policies isolate the pod) are found by address when the packet is read.
//!
//! Only statements of a final drop (a rule's, a default's, the units', a tier's `Deny`, an
//! unknown address's; or an audit chain's would-be drop) report, never a rule an accept may
//! follow: an allowed packet is never reported as dropped.

use crate::dataplane::nft::ir::Stmt;

/// The nflog group denied flows go to (nflog groups are per network namespace: one daemon
/// per namespace listens on it).
pub const NFLOG_GROUP: u16 = 7026;

/// Longest rule name a prefix carries (the kernel's prefix holds 127 bytes).
const NAME_MAX: usize = 110;

/// Which way a pod drop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodDirection {
    /// To the pod (its address is the destination).
    Ingress,
    /// From the pod (its address is the source).
    Egress,
}

impl PodDirection {
    /// `ingress` / `egress`.
    pub fn word(self) -> &'static str {
        match self {
            PodDirection::Ingress => "ingress",
            PodDirection::Egress => "egress",
        }
    }

    fn of(word: &str) -> Option<PodDirection> {
        match word {
            "ingress" => Some(PodDirection::Ingress),
            "egress" => Some(PodDirection::Egress),
            _ => None,
        }
    }
}

/// What a reporting statement stands for (its prefix, both ways).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reported {
    /// A dropping or rejecting `[[policy.rule]]`, by name (`rule <name>`).
    Rule(String),
    /// A dropping or rejecting default of a chain (`default <chain>`).
    Default(String),
    /// The final drop of the enforcing pod policies (`pods <direction>`).
    Pods(PodDirection),
    /// What the audit policies would drop, and let pass (`pods-audit <direction>`).
    Audit(PodDirection),
    /// An address of the pod prefixes that is no known pod's (`pods-unknown <direction>`).
    Unknown(PodDirection),
    /// A `Deny` rule of a cluster-wide tier policy, by the policy's name (`cnp <direction>
    /// <name>`).
    Cluster(PodDirection, String),
}

impl Reported {
    /// The prefix the kernel hands back with each packet.
    pub fn prefix(&self) -> String {
        match self {
            Reported::Rule(name) => format!("rule {}", clipped(name)),
            Reported::Default(chain) => format!("default {chain}"),
            Reported::Pods(d) => format!("pods {}", d.word()),
            Reported::Audit(d) => format!("pods-audit {}", d.word()),
            Reported::Unknown(d) => format!("pods-unknown {}", d.word()),
            Reported::Cluster(d, name) => format!("cnp {} {}", d.word(), clipped(name)),
        }
    }

    /// The statement that reports a packet as this.
    pub fn stmt(&self) -> Stmt {
        Stmt::Log {
            prefix: self.prefix(),
            group: Some(NFLOG_GROUP),
        }
    }

    /// What `prefix` stands for; `None` for a prefix no edgenetd rule writes.
    pub fn parse(prefix: &str) -> Option<Reported> {
        let (kind, rest) = prefix.split_once(' ')?;
        match kind {
            "rule" => Some(Reported::Rule(rest.to_string())),
            "default" => Some(Reported::Default(rest.to_string())),
            "pods" => PodDirection::of(rest).map(Reported::Pods),
            "pods-audit" => PodDirection::of(rest).map(Reported::Audit),
            "pods-unknown" => PodDirection::of(rest).map(Reported::Unknown),
            "cnp" => {
                let (d, name) = rest.split_once(' ')?;
                Some(Reported::Cluster(PodDirection::of(d)?, name.to_string()))
            }
            _ => None,
        }
    }
}

/// `name`, cut to what a prefix holds (at a character's boundary).
fn clipped(name: &str) -> &str {
    let mut end = name.len().min(NAME_MAX);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// True when `stmts` report to the daemon (the listener is needed).
pub fn reports(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| {
        matches!(
            s,
            Stmt::Log {
                group: Some(NFLOG_GROUP),
                ..
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prefix_reads_back_as_what_it_was_written_for() {
        for r in [
            Reported::Rule("block ssh".into()),
            Reported::Default("forward".into()),
            Reported::Pods(PodDirection::Ingress),
            Reported::Audit(PodDirection::Egress),
            Reported::Unknown(PodDirection::Ingress),
            Reported::Cluster(PodDirection::Egress, "k8s:deny-egress".into()),
        ] {
            assert_eq!(Reported::parse(&r.prefix()), Some(r));
        }
        assert_eq!(Reported::parse("drop wan input: "), None);
        let long = "é".repeat(100);
        let p = Reported::Rule(long).prefix();
        assert!(p.len() <= 5 + NAME_MAX && p.len() < 127, "{}", p.len());
        let p = Reported::Cluster(PodDirection::Ingress, "x".repeat(253)).prefix();
        assert!(
            p.len() < 127,
            "a ClusterNetworkPolicy's longest name fits: {}",
            p.len()
        );
    }
}
