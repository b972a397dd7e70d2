//! Zone masquerade and what narrows a zone's source NAT: `masq_src` / `masq_dest` (fw4's
//! restrictions, per IP version) and `masq_allow_invalid` (the invalid drop of forwarded
//! traffic lifted for traffic leaving through the zone).

use crate::config::policy::{MasqAddress, PolicyConfig, Zone};
use crate::dataplane::nft::ir::*;

use super::super::matches::{addr_match, zone_match};
use super::{Builder, FORWARD_INVALID, NFPROTO_IPV4, NFPROTO_IPV6, POSTROUTING};

/// The statements of zone `z`'s `masq_src` and `masq_dest` entries of IP `version`: the
/// address in one of the prefixes (when some are given) and in none of the `!` ones. Empty
/// when the zone restricts nothing of that version.
pub(super) fn restriction(z: &Zone, version: IpVersion) -> Vec<Stmt> {
    let mut out = Vec::new();
    for (source, list) in [(true, &z.masq_src), (false, &z.masq_dest)] {
        let of = |negate: bool| -> Vec<ipnet::IpNet> {
            list.iter()
                .filter(|a: &&MasqAddress| a.negate == negate)
                .filter(|a| a.net.addr().is_ipv4() == (version == IpVersion::V4))
                .map(|a| a.net)
                .collect()
        };
        let (inside, outside) = (of(false), of(true));
        if !inside.is_empty() {
            out.push(addr_match(source, version, &inside));
        }
        if !outside.is_empty() {
            out.push(negated(addr_match(source, version, &outside)));
        }
    }
    out
}

/// `m` with its test inverted (`!=`, `!= { ... }`).
fn negated(m: Stmt) -> Stmt {
    match m {
        Stmt::Cmp { left, right, .. } => Stmt::Cmp {
            left,
            op: CmpOp::Neq,
            right,
        },
        Stmt::Lookup { left, set, .. } => Stmt::Lookup {
            left,
            set,
            negate: true,
        },
        other => other,
    }
}

/// True when some zone asks for `masq_allow_invalid` (the forward chain then jumps to
/// [`FORWARD_INVALID`] for invalid packets instead of dropping them at once).
pub(super) fn allows_invalid(cfg: &PolicyConfig) -> bool {
    cfg.zones.values().any(|z| z.masq_allow_invalid)
}

impl Builder {
    /// Masquerade of traffic leaving through zones with `masquerade = true` (IPv4) and
    /// `masquerade6 = true` (IPv6), never through `lo`; only for the sources and
    /// destinations `masq_src` / `masq_dest` allow.
    pub(super) fn masquerades(&mut self, cfg: &PolicyConfig) {
        for z in cfg.zones.values().filter(|z| z.masquerade || z.masquerade6) {
            self.group(format!("masquerade {}", z.name), false);
            let restricted = !z.masq_src.is_empty() || !z.masq_dest.is_empty();
            for m in zone_match(z, false) {
                if restricted {
                    self.restricted_masquerade(z, m.stmts, m.version);
                    continue;
                }
                // A match that implies a version needs no family test; one that does not is
                // limited to the families asked for.
                let nfproto = match (m.version, z.masquerade, z.masquerade6) {
                    (Some(IpVersion::V4), false, _) | (Some(IpVersion::V6), _, false) => continue,
                    (Some(_), _, _) | (None, true, true) => None,
                    (None, true, false) => Some(NFPROTO_IPV4),
                    (None, false, _) => Some(NFPROTO_IPV6),
                };
                let mut stmts = super::leaving_zone(nfproto, m.stmts);
                stmts.push(Stmt::Masquerade);
                self.rule(POSTROUTING, stmts);
            }
        }
    }

    /// A zone match's masquerade with `masq_src` / `masq_dest`: one rule per masqueraded
    /// IP version, each with that version's restriction (as fw4, which filters the other
    /// version's entries out).
    fn restricted_masquerade(&mut self, z: &Zone, zone: Vec<Stmt>, implied: Option<IpVersion>) {
        for (on, version, nfproto) in [
            (z.masquerade, IpVersion::V4, NFPROTO_IPV4),
            (z.masquerade6, IpVersion::V6, NFPROTO_IPV6),
        ] {
            if !on || implied.is_some_and(|v| v != version) {
                continue;
            }
            let mut selected = zone.clone();
            selected.extend(restriction(z, version));
            let mut stmts = super::leaving_zone(implied.is_none().then_some(nfproto), selected);
            stmts.push(Stmt::Masquerade);
            self.rule(POSTROUTING, stmts);
        }
    }

    /// `masq_allow_invalid`: the rules of [`FORWARD_INVALID`] — traffic leaving through
    /// such a zone returns to the forward chain (on to the rules and the default); the rest
    /// is counted and dropped.
    pub(super) fn invalid_exemptions(&mut self, cfg: &PolicyConfig) {
        if !allows_invalid(cfg) {
            return;
        }
        self.p.table.chains.push(Chain::regular(FORWARD_INVALID));
        for z in cfg.zones.values().filter(|z| z.masq_allow_invalid) {
            self.group(format!("masq-allow-invalid {}", z.name), false);
            for m in zone_match(z, false) {
                let mut stmts = m.stmts;
                stmts.push(Stmt::Verdict(Verdict::Return));
                self.rule(FORWARD_INVALID, stmts);
            }
        }
        self.group = 0;
        self.rule(
            FORWARD_INVALID,
            vec![Stmt::Counter, Stmt::Verdict(Verdict::Drop)],
        );
    }
}
