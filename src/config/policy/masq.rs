//! The zone keys that narrow its source NAT as fw4's do: `masq_src`, `masq_dest`
//! (prefixes, `!` to exclude) and `masq_allow_invalid`.

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_prefix;
use super::model::*;
use super::raw::*;

/// The zone's `masq_src`, `masq_dest` and `masq_allow_invalid`; `None` when any is invalid
/// (reported). They need a zone that source-NATs (`masquerade`, `masquerade6` or `snat`):
/// elsewhere they would silently do nothing.
pub(super) fn restrictions(
    raw: &RawZone,
    diags: &mut Diagnostics,
) -> Option<(Vec<MasqAddress>, Vec<MasqAddress>, bool)> {
    let nats = raw.masquerade || raw.masquerade6 || raw.snat.is_some();
    let mut ok = true;
    let mut list = |key: &str, l: &Option<Spanned<Vec<Spanned<String>>>>| {
        let Some(l) = l else {
            return Vec::new();
        };
        if !nats {
            diags.error(l.span(), format!("`{key}` narrows the zone's masquerade, but the zone has none: add `masquerade = true`, `masquerade6 = true` or `snat`, or drop `{key}`"));
            ok = false;
        }
        if l.get_ref().is_empty() {
            diags.error(l.span(), format!("empty `{key}`: expected prefixes, `!` first to exclude one, e.g. [\"10.0.0.0/24\", \"!10.0.0.1\"] (or leave `{key}` out)"));
            ok = false;
        }
        let mut out = Vec::new();
        for item in l.get_ref() {
            match entry(item.get_ref()) {
                Ok(a) => out.push(a),
                Err(e) => {
                    diags.error(item.span(), e);
                    ok = false;
                }
            }
        }
        out
    };
    let src = list("masq_src", &raw.masq_src);
    let dest = list("masq_dest", &raw.masq_dest);
    let allow_invalid = match &raw.masq_allow_invalid {
        Some(a) if *a.get_ref() && !nats => {
            diags.error(a.span(), "`masq_allow_invalid` keeps invalid packets leaving through a masquerading zone, but the zone has no masquerade: add `masquerade = true`, `masquerade6 = true` or `snat`, or drop it");
            ok = false;
            false
        }
        Some(a) => *a.get_ref(),
        None => false,
    };
    ok.then_some((src, dest, allow_invalid))
}

/// `"10.0.0.0/24"`, `"10.0.0.1"` or `"!10.0.0.1"` (any of them IPv6 too).
fn entry(text: &str) -> Result<MasqAddress, String> {
    let t = text.trim();
    let (negate, t) = match t.strip_prefix('!') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, t),
    };
    parse_prefix(t).map(|net| MasqAddress { net, negate })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_with_and_without_negation() {
        let a = entry("10.1.0.0/24").unwrap();
        assert_eq!((a.net.to_string(), a.negate), ("10.1.0.0/24".into(), false));
        let b = entry("! 2001:db8:0:1::1").unwrap();
        assert_eq!(
            (b.net.to_string(), b.negate),
            ("2001:db8:0:1::1/128".into(), true)
        );
        assert!(entry("!").is_err());
        assert!(entry("10.1.0.0/33").is_err());
    }
}
