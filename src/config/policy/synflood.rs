//! `synflood_protect`, `synflood_rate` and `synflood_burst` under `[policy]` (fw4's
//! defaults of the same names): new TCP connections to the router are rate-limited.

use toml::Spanned;
use toml::de::DeTable;

use super::super::diag::Diagnostics;
use super::super::doc::de;
use super::model::{PolicyConfig, Rate, SynFlood};
use super::rules::parse_limit;

/// fw4's default rate: 25 SYNs a second.
const DEFAULT_RATE: Rate = Rate {
    count: 25,
    per_seconds: 1,
};
/// fw4's default burst.
const DEFAULT_BURST: u32 = 50;
/// nftables takes a burst of up to 2^32-1 packets; a burst this large is no limit at all.
const MAX_BURST: i64 = 1_000_000;

/// Reads the three keys into `cfg`. The rate and the burst tune the protection, so either
/// without `synflood_protect = true` is an error at its key (as `flow_offload_hw` is).
pub(super) fn validate_synflood(
    table: &DeTable<'_>,
    cfg: &mut PolicyConfig,
    diags: &mut Diagnostics,
) {
    let on = table
        .get("synflood_protect")
        .and_then(|v| de::<bool>(v, diags))
        .unwrap_or(false);
    let mut rate = DEFAULT_RATE;
    let mut burst = DEFAULT_BURST;
    let mut valid = true;
    if let Some(v) = table.get("synflood_rate") {
        match de::<Spanned<String>>(v, diags) {
            Some(text) => match parse_limit(text.get_ref()) {
                Some(r) => rate = r,
                None => {
                    diags.error(
                        text.span(),
                        format!("invalid synflood_rate `{}`: expected \"<n>/second\", \"<n>/minute\", \"<n>/hour\" or \"<n>/day\" with n > 0, e.g. \"25/second\"", text.get_ref()),
                    );
                    valid = false;
                }
            },
            None => valid = false,
        }
        if !on {
            needs_protect(v.span(), "synflood_rate", diags);
        }
    }
    if let Some(v) = table.get("synflood_burst") {
        match de::<i64>(v, diags) {
            Some(n) if (1..=MAX_BURST).contains(&n) => burst = n as u32,
            Some(n) => {
                diags.error(
                    v.span(),
                    format!("invalid synflood_burst {n}: expected a number of packets from 1 to {MAX_BURST}"),
                );
                valid = false;
            }
            None => valid = false,
        }
        if !on {
            needs_protect(v.span(), "synflood_burst", diags);
        }
    }
    if on && valid {
        cfg.synflood = Some(SynFlood { rate, burst });
    }
}

fn needs_protect(span: std::ops::Range<usize>, key: &str, diags: &mut Diagnostics) {
    diags.error(
        span,
        format!(
            "`{key}` tunes the SYN flood protection: expected `synflood_protect = true` beside it"
        ),
    );
}
