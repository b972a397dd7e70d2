//! `[policy] forward = "drop"` next to `[[policy.forward]]`: one key cannot be both a string
//! and an array of tables, so TOML (and every TOML tool) rejects that document. The parser
//! and the merge only say "duplicate key" or "set twice"; this module recognises the case and
//! says what to write instead (`forward_default`), at both places. The `[policy]` section's
//! own diagnosis, registered with the generic merge as [`FORWARD_CLASH`].

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::super::doc::KeyClash;

/// The verdict-versus-forwards clash, as the merge and the parser ask for it.
pub const FORWARD_CLASH: KeyClash = KeyClash {
    merge: conflict,
    syntax,
    message: MESSAGE,
    note: NOTE,
};

/// The error shown at the second of the two places.
const MESSAGE: &str = "`forward` under [policy] is both the forward verdict (`forward = \"...\"`) and the zone forwards ([[policy.forward]]), which TOML does not allow (one key cannot be a string and an array of tables): write the verdict as `forward_default = \"...\"`";

/// The note shown at the first place.
const NOTE: &str = "the other `forward` is here";

fn is_string(v: &DeValue<'_>) -> bool {
    matches!(v, DeValue::String(_))
}

fn is_tables(v: &DeValue<'_>) -> bool {
    matches!(v, DeValue::Array(items) if !items.is_empty() && items.iter().all(|i| i.get_ref().is_table()))
}

/// True when merging `key` at `path` (from another file) is the verdict-versus-array clash.
fn conflict(path: &[String], key: &str, existing: &DeValue<'_>, new: &DeValue<'_>) -> bool {
    path.len() == 1
        && path[0] == "policy"
        && key == "forward"
        && ((is_string(existing) && is_tables(new)) || (is_tables(existing) && is_string(new)))
}

/// For a parser's "duplicate key" error at `span` of `text` (one file, local spans): the span
/// of the first `forward` when the error is the clash.
fn syntax(text: &str, span: &Range<usize>, table: &DeTable<'_>) -> Option<Range<usize>> {
    let key = text.get(span.clone())?.trim_matches(['"', '\'']);
    if key != "forward" {
        return None;
    }
    let policy = table.get("policy")?.get_ref().as_table()?;
    let (first_key, first) = policy.get_key_value("forward")?;
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let clash = if compact(line).starts_with("[[") {
        is_string(first.get_ref()) && compact(line).starts_with("[[policy.forward]]")
    } else {
        is_tables(first.get_ref()) && in_policy(&text[..line_start], line)
    };
    clash.then(|| first_key.span())
}

/// True when the key/value `line` sets `policy.forward`: dotted, or under a `[policy]` header.
fn in_policy(before: &str, line: &str) -> bool {
    let key = compact(line.split('=').next().unwrap_or(""));
    if key == "policy.forward" {
        return true;
    }
    let header = before
        .lines()
        .rev()
        .map(compact)
        .find(|l| l.starts_with('['));
    key == "forward" && header.is_some_and(|h| h.starts_with("[policy]"))
}

fn compact(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
        .collect()
}
