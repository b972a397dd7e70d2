//! Operator snippets in nft's own language (fw4's `include`): compiled by `nft` into a
//! scratch table nothing jumps to, and read back as [`Opaque`] rules the one atomic batch
//! carries like any other (so a drift check compares them too).
//!
//! The scratch table holds the caller's sets and chains (every chain unhooked), so a
//! snippet can name `@set`s and `jump` to chains of the real table. A table-level snippet's
//! own chains are read back with their hooks. Each snippet is first checked with `nft -c`,
//! then loaded, its rules and chains listed, and the scratch table is deleted at the end,
//! whatever happened.
//!
//! What the batch cannot carry is refused: a snippet that makes a set (an anonymous `{ … }`
//! or a declaration), or a snippet that closes a block it did not open (it would write
//! outside the scratch table).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use nftnl::nftnl_sys::libc;

use super::batch::{Batch, Op};
use super::build::objects::NFTA_RULE_EXPRESSIONS;
use super::error::NftError;
use super::ffi::attr::rule;
use super::ffi::{NlMsg, Ref, kind};
use super::ir::{BaseChain, Chain, ChainPolicy, ChainType, Hook, Opaque, Rule, Stmt, Table};
use super::read::dump::{rule_comment, rules_of, text};
use super::socket::Nft;
use super::table_ref::TableRef;
use super::text::family_name;

/// One snippet to compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// `Some(chain)`: rules for that chain; `None`: table-level (chains of its own).
    pub chain: Option<String>,
    /// The snippet's text, in nft's language.
    pub text: String,
    /// How its errors name it (its path).
    pub shown: String,
}

/// What one snippet compiled to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compiled {
    /// The chains a table-level snippet declared, in listing order.
    pub chains: Vec<Chain>,
    /// Its rules, in order, each naming its chain (a chain snippet's: the chain it is for).
    pub rules: Vec<Rule>,
}

/// Why a snippet was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SnippetError {
    /// Which snippet (its index in the call).
    pub index: usize,
    /// What nft or edgenetd said, places in the snippet's own lines.
    pub message: String,
}

/// Compiles `snippets` in the calling thread's network namespace, in a scratch table
/// `scratch.family scratch.name` made of `scratch`'s sets and chains (their rules and
/// elements are not needed). Table-level snippets are compiled first, so chain snippets can
/// jump to their chains. The scratch table is deleted before returning.
pub fn compile(
    nft: &mut Nft,
    scratch: &Table,
    snippets: &[Snippet],
) -> Result<Vec<Compiled>, SnippetError> {
    let t = TableRef::from(scratch);
    let whole = |e: NftError| SnippetError {
        index: 0,
        message: format!("the scratch table {}: {e}", t.name),
    };
    let mut skeleton = Table::new(scratch.family, &scratch.name);
    skeleton.sets = scratch
        .sets
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.elements.clear();
            s
        })
        .collect();
    skeleton.chains = scratch
        .chains
        .iter()
        .map(|c| Chain::regular(&c.name))
        .collect();
    for (i, s) in snippets.iter().enumerate() {
        if s.chain.is_some() {
            skeleton.chains.push(Chain::regular(scratch_chain(i)));
        }
    }
    let mut batch = Batch::new();
    batch
        .replace_table(&skeleton)
        .map_err(|e| whole(NftError::Compile(e)))?;
    nft.execute(batch).map_err(whole)?;
    let out = compile_all(nft, &skeleton, snippets);
    let mut batch = Batch::new();
    batch.table(&t, Op::Delete);
    let dropped = nft.execute(batch);
    let out = out?;
    dropped.map_err(whole)?;
    Ok(out)
}

/// The scratch chain snippet `i` (for a chain) is compiled in.
fn scratch_chain(i: usize) -> String {
    format!("include_{i}")
}

fn compile_all(
    nft: &mut Nft,
    skeleton: &Table,
    snippets: &[Snippet],
) -> Result<Vec<Compiled>, SnippetError> {
    let t = TableRef::from(skeleton);
    let mut out = vec![Compiled::default(); snippets.len()];
    let mut known: Vec<String> = skeleton.chains.iter().map(|c| c.name.clone()).collect();
    let sets: Vec<String> = skeleton.sets.iter().map(|s| s.name.clone()).collect();
    // Rules in the scratch table before each snippet: a table-level one may only add rules
    // to chains it declares.
    let mut before: Vec<String> = Vec::new();
    let table_first = (0..snippets.len())
        .filter(|i| snippets[*i].chain.is_none())
        .chain((0..snippets.len()).filter(|i| snippets[*i].chain.is_some()));
    for i in table_first {
        let s = &snippets[i];
        let fail = |message: String| SnippetError { index: i, message };
        balanced(&s.text).map_err(|why| fail(format!("{}{why}", s.shown)))?;
        let (wrapped, lead) = wrap(&t, s, i);
        run_nft(&["-c", "-f", "-"], &wrapped, &s.shown, lead).map_err(fail)?;
        run_nft(&["-f", "-"], &wrapped, &s.shown, lead).map_err(fail)?;
        let listed = |e: NftError| fail(format!("{}: listing it back: {e}", s.shown));
        if let Some(extra) = nft
            .list_sets(&t)
            .map_err(listed)?
            .into_iter()
            .find(|x| !sets.contains(&x.name))
        {
            return Err(fail(format!(
                "{}: the snippet makes a set ({}: an anonymous `{{ ... }}` or a declaration), which an include cannot carry; declare it as a [policy.set.*] and match `@name`",
                s.shown, extra.name
            )));
        }
        let texts = rule_texts(&t, &s.shown).map_err(fail)?;
        let rules = nft.collect(&rules_of(&t, raw_rule)).map_err(listed)?;
        let chains = nft.list_chains(&t).map_err(listed)?;
        let compiled = &mut out[i];
        match &s.chain {
            Some(chain) => {
                let from = scratch_chain(i);
                for r in rules.into_iter().filter(|r| r.chain == from) {
                    compiled.rules.push(r.into_rule(chain, &texts));
                }
            }
            None => {
                for c in chains.iter().filter(|c| !known.contains(&c.name)) {
                    let chain = chain_of(c).map_err(|why| fail(format!("{}: {why}", s.shown)))?;
                    compiled.chains.push(chain);
                }
                let mine: Vec<String> = compiled.chains.iter().map(|c| c.name.clone()).collect();
                let mut theirs = rules.iter().map(|r| &r.chain).filter(|c| !mine.contains(c));
                let mut was = before.iter();
                if let Some(c) = theirs.find(|c| was.next() != Some(*c)) {
                    return Err(fail(format!(
                        "{}: the snippet adds rules to chain {c}, which the table has already: a table-level include declares chains of its own (rules for an existing chain: position chain-pre or chain-post)",
                        s.shown
                    )));
                }
                for r in rules.iter().filter(|r| mine.contains(&r.chain)) {
                    before.push(r.chain.clone());
                }
                for r in rules.into_iter().filter(|r| mine.contains(&r.chain)) {
                    let chain = r.chain.clone();
                    compiled.rules.push(r.into_rule(&chain, &texts));
                }
                known.extend(mine);
            }
        }
    }
    Ok(out)
}

/// The text nft reads for snippet `i`, and how many lines come before the snippet's own.
fn wrap(t: &TableRef, s: &Snippet, i: usize) -> (String, usize) {
    let head = format!("table {} {} {{\n", family_name(t.family), t.name);
    match &s.chain {
        Some(_) => (
            format!("{head}chain {} {{\n{}\n}}\n}}\n", scratch_chain(i), s.text),
            2,
        ),
        None => (format!("{head}{}\n}}\n", s.text), 1),
    }
}

/// Refuses a snippet that closes a block it did not open (braces outside quotes and
/// comments), or leaves one open: the message follows the snippet's name (`:LINE:COL: ...`).
fn balanced(text: &str) -> Result<(), String> {
    let mut depth = 0i64;
    for (n, line) in text.lines().enumerate() {
        let mut quoted = false;
        for (col, c) in line.chars().enumerate() {
            match c {
                '"' => quoted = !quoted,
                '#' if !quoted => break,
                '{' if !quoted => depth += 1,
                '}' if !quoted => {
                    depth -= 1;
                    if depth < 0 {
                        return Err(format!(
                            ":{}:{}: this `}}` closes a block the snippet did not open",
                            n + 1,
                            col + 1
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    if depth != 0 {
        return Err(": a `{` is never closed".into());
    }
    Ok(())
}

/// Runs `nft args` on `input`; its complaint, with places in the snippet's own lines.
fn run_nft(args: &[&str], input: &str, shown: &str, lead: usize) -> Result<String, String> {
    let mut child = Command::new("nft")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{shown}: cannot run nft: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(input.as_bytes());
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{shown}: nft: {e}"))?;
    if out.status.success() {
        written.map_err(|e| format!("{shown}: nft: {e}"))?;
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    Err(replace_places(said.trim_end(), shown, lead))
}

/// `/dev/stdin:LINE:COLS:` -> `SHOWN:LINE-lead:COLS:` (nft's caret lines are dropped: they
/// point into the wrapped text).
fn replace_places(said: &str, shown: &str, lead: usize) -> String {
    let mut out = Vec::new();
    for line in said.lines() {
        if let Some(rest) = line.strip_prefix("/dev/stdin:") {
            let (num, tail) = rest.split_once(':').unwrap_or((rest, ""));
            match num.parse::<usize>() {
                Ok(n) if n > lead => out.push(format!("{shown}:{}:{tail}", n - lead)),
                _ => out.push(format!("{shown}:{tail}")),
            }
        } else if !line.trim_start().starts_with('^') && !line.trim().is_empty() {
            out.push(format!("  {}", line.trim()));
        }
    }
    if out.is_empty() {
        return format!("{shown}: nft refused it");
    }
    out.join("\n")
}

/// Each rule's text by handle, as `nft -a list table` prints it.
fn rule_texts(t: &TableRef, shown: &str) -> Result<BTreeMap<u64, String>, String> {
    let listing = run_nft(
        &["-a", "list", "table", family_name(t.family), &t.name],
        "",
        shown,
        0,
    )?;
    let mut out = BTreeMap::new();
    for line in listing.lines() {
        let line = line.trim();
        let Some((rule, handle)) = line.rsplit_once(" # handle ") else {
            continue;
        };
        if rule.starts_with("chain ") || rule.starts_with("table ") || rule.starts_with("set ") {
            continue;
        }
        if let Ok(h) = handle.trim().parse() {
            out.insert(h, rule.to_string());
        }
    }
    Ok(out)
}

/// A chain as listed, in the IR.
fn chain_of(c: &super::read::dump::ChainInfo) -> Result<Chain, String> {
    let Some((hook, kind, priority, policy)) = &c.base else {
        return Ok(Chain::regular(&c.name));
    };
    let hook = match *hook as i32 {
        libc::NF_INET_PRE_ROUTING => Hook::Prerouting,
        libc::NF_INET_LOCAL_IN => Hook::Input,
        libc::NF_INET_FORWARD => Hook::Forward,
        libc::NF_INET_LOCAL_OUT => Hook::Output,
        libc::NF_INET_POST_ROUTING => Hook::Postrouting,
        _ => {
            return Err(format!(
                "chain {}: an include cannot carry its hook",
                c.name
            ));
        }
    };
    let kind = match kind.as_str() {
        "filter" => ChainType::Filter,
        "nat" => ChainType::Nat,
        "route" => ChainType::Route,
        other => return Err(format!("chain {}: type {other} is not carried", c.name)),
    };
    let policy = if *policy == libc::NF_DROP as u32 {
        ChainPolicy::Drop
    } else {
        ChainPolicy::Accept
    };
    Ok(Chain {
        name: c.name.clone(),
        base: Some(BaseChain {
            kind,
            hook,
            priority: *priority,
            policy,
        }),
    })
}

/// One rule as the kernel lists it: chain, handle, expressions, comment.
struct RawRule {
    chain: String,
    handle: u64,
    exprs: Vec<u8>,
    comment: Option<String>,
}

impl RawRule {
    /// The rule in `chain`, its text from `texts` (the comment kept apart).
    fn into_rule(self, chain: &str, texts: &BTreeMap<u64, String>) -> Rule {
        let mut text = texts.get(&self.handle).cloned().unwrap_or_default();
        if let Some(c) = &self.comment {
            let tail = format!(" comment \"{c}\"");
            if let Some(head) = text.strip_suffix(&tail) {
                text = head.to_string();
            }
        }
        Rule {
            chain: chain.to_string(),
            stmts: vec![Stmt::Opaque(Opaque {
                exprs: self.exprs,
                text,
            })],
            comment: self.comment,
        }
    }
}

/// A rule with its raw expressions.
fn raw_rule(msg: NlMsg<'_>, v: Ref<'_, kind::Rule>) -> RawRule {
    let exprs = RefCell::new(Vec::new());
    for_attrs(msg.bytes(), &mut |ty, payload| {
        if ty == NFTA_RULE_EXPRESSIONS {
            *exprs.borrow_mut() = payload.to_vec();
        }
    });
    RawRule {
        chain: text(v.str(rule::CHAIN)),
        handle: v.u64(rule::HANDLE).unwrap_or(0),
        exprs: exprs.into_inner(),
        comment: v.blob(rule::USERDATA).and_then(rule_comment),
    }
}

/// Hands `f` each top-level attribute (type without flag bits, payload) of a nfnetlink
/// message (after its 16-byte netlink and 4-byte nfgen headers).
fn for_attrs(msg: &[u8], f: &mut dyn FnMut(u16, &[u8])) {
    let mut off = 20;
    while off + 4 <= msg.len() {
        let len = u16::from_ne_bytes([msg[off], msg[off + 1]]) as usize;
        let ty = u16::from_ne_bytes([msg[off + 2], msg[off + 3]]) & 0x3fff;
        if len < 4 || off + len > msg.len() {
            return;
        }
        f(ty, &msg[off + 4..off + len]);
        off += len.div_ceil(4) * 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_closing_a_block_it_did_not_open_is_refused() {
        assert!(balanced("tcp dport 22 accept\n# } in a comment\n").is_ok());
        assert!(balanced("chain x {\n  counter comment \"}\"\n}\n").is_ok());
        let e = balanced("accept\n}\ntable ip other {\n").unwrap_err();
        assert!(e.starts_with(":2:1:"), "{e}");
        assert!(balanced("chain x {\n").is_err());
    }

    #[test]
    fn nft_s_places_are_the_snippet_s_own_lines() {
        let said = "/dev/stdin:4:5-9: Error: syntax error, unexpected junk\n  junk\n    ^^^^";
        assert_eq!(
            replace_places(said, "/etc/x.nft", 2),
            "/etc/x.nft:2:5-9: Error: syntax error, unexpected junk\n  junk"
        );
    }
}
