//! `[[policy.include]]`: the program's snippets compiled by nft (in a scratch table of the
//! daemon's namespace, [`snippet`]) and spliced into its table where fw4 puts them, as one
//! group that denies: the one atomic batch writes them with the rest, a drift check compares
//! them like any rule, and a kernel that refuses them gets the group's barrier instead.
//!
//! | position | what goes where |
//! |---|---|
//! | `table-pre` | the snippet's chains, before edgenetd's |
//! | `table-post` | after them (the default) |
//! | `chain-pre` | its rules, above the first rule of `chain` |
//! | `chain-post` | below the last one |

use crate::config::policy::{Include, IncludePosition};
use crate::dataplane::nft::Nft;
use crate::dataplane::nft::ir::{Family, Rule};
use crate::dataplane::nft::snippet::{self, Compiled, Snippet};

use super::program::{Group, Program};

/// Why the includes were refused: the first refused one, at its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: include {path}: {message}")]
pub struct IncludeError {
    /// The include's `path` key, `file:line:col`.
    pub at: String,
    /// Its snippet file.
    pub path: String,
    /// What nft (or the splice) said.
    pub message: String,
}

/// The group label of every included rule and chain.
pub const GROUP: &str = "includes";

/// `p` with its includes compiled and spliced in (`p` itself when it has none).
pub fn resolve(nft: &mut Nft, p: &Program) -> Result<Program, IncludeError> {
    if p.includes.is_empty() {
        return Ok(p.clone());
    }
    let err = |i: usize, message: String| {
        let inc = &p.includes[i];
        IncludeError {
            at: inc.at.clone(),
            path: inc.path.display().to_string(),
            message,
        }
    };
    let snippets: Vec<Snippet> = p
        .includes
        .iter()
        .map(|inc| Snippet {
            chain: inc.chain.clone(),
            text: inc.text.clone(),
            shown: inc.path.display().to_string(),
        })
        .collect();
    let mut scratch = p.table.clone();
    scratch.name = format!("{}-include", p.table.name);
    // Chains of table-level snippets, for chain snippets to name; compiled first.
    let compiled =
        snippet::compile(nft, &scratch, &snippets).map_err(|e| err(e.index, e.message))?;
    splice(p, &compiled).map_err(|(i, m)| err(i, m))
}

/// `p` with `compiled` (one per include) spliced in; an unknown chain is refused.
pub fn splice(p: &Program, compiled: &[Compiled]) -> Result<Program, (usize, String)> {
    let mut out = p.clone();
    out.includes.clear();
    out.groups.push(Group {
        label: GROUP.into(),
        deny: true,
    });
    let group = (out.groups.len() - 1) as u32;
    let mut pre = Vec::new();
    let mut post = Vec::new();
    for (inc, c) in p.includes.iter().zip(compiled) {
        match inc.position {
            IncludePosition::TablePre => pre.extend(c.chains.iter().cloned()),
            IncludePosition::TablePost => post.extend(c.chains.iter().cloned()),
            _ => {}
        }
    }
    out.table.chains.splice(0..0, pre);
    out.table.chains.extend(post);
    // Rules already put at the top of each chain: a later chain-pre include goes below them.
    let mut on_top: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, (inc, c)) in p.includes.iter().zip(compiled).enumerate() {
        let rules = c.rules.iter().cloned().map(|mut r| {
            r.comment = Some(origin(inc, &r));
            r
        });
        let at = match (inc.position, &inc.chain) {
            (IncludePosition::ChainPre | IncludePosition::ChainPost, Some(chain)) => {
                if !out.table.chains.iter().any(|c| &c.name == chain) {
                    return Err((
                        i,
                        format!("no chain {chain} in table {} for its rules", out.table.name),
                    ));
                }
                let mut mine = out
                    .table
                    .rules
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| &r.chain == chain);
                if inc.position == IncludePosition::ChainPre {
                    let top = on_top.entry(chain.clone()).or_default();
                    let k = mine.next().map_or(out.table.rules.len(), |(k, _)| k) + *top;
                    *top += c.rules.len();
                    k
                } else {
                    mine.next_back()
                        .map_or(out.table.rules.len(), |(k, _)| k + 1)
                }
            }
            _ => out.table.rules.len(),
        };
        let rules: Vec<_> = rules.collect();
        let n = rules.len();
        out.table.rules.splice(at..at, rules);
        out.rule_groups
            .splice(at..at, std::iter::repeat_n(group, n));
    }
    Ok(out)
}

/// An included rule's comment: where it came from, then its own, then the hash of its text
/// (as every rule's comment ends, so `plan` tells an edited snippet rule by its comment).
fn origin(inc: &Include, r: &Rule) -> String {
    let text = crate::dataplane::nft::text::render_rule(Family::Inet, r);
    let hash = super::program::fnv1a(text.as_bytes());
    match &r.comment {
        Some(c) => format!("include {}: {c} #{hash:08x}", inc.path.display()),
        None => format!("include {} #{hash:08x}", inc.path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::Include;
    use crate::dataplane::nft::ir::{Chain, Opaque, Stmt};

    fn opaque(chain: &str, text: &str) -> Rule {
        Rule::new(
            chain,
            vec![Stmt::Opaque(Opaque {
                exprs: Vec::new(),
                text: text.into(),
            })],
        )
    }

    fn include(position: IncludePosition, chain: Option<&str>, path: &str) -> Include {
        Include {
            path: path.into(),
            position,
            chain: chain.map(str::to_string),
            text: String::new(),
            span: 0..0,
            at: "edgenetd.toml:1:1".into(),
        }
    }

    /// A program of two chains, `a` with rules a1 a2, `b` with b1.
    fn program(includes: Vec<Include>) -> Program {
        let mut p = super::super::program::build(
            &crate::config::load_str(&[("x.toml", "[policy]\n")])
                .unwrap()
                .policy
                .unwrap(),
            "t",
        );
        p.table.chains = vec![Chain::regular("a"), Chain::regular("b")];
        p.table.rules = vec![opaque("a", "a1"), opaque("a", "a2"), opaque("b", "b1")];
        p.rule_groups = vec![0, 0, 0];
        p.includes = includes;
        p
    }

    fn texts(p: &Program) -> Vec<String> {
        p.table
            .rules
            .iter()
            .map(|r| match &r.stmts[..] {
                [Stmt::Opaque(o)] => format!("{}:{}", r.chain, o.text),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn positions_put_rules_and_chains_where_fw4_does_in_file_order() {
        use IncludePosition::*;
        let p = program(vec![
            include(ChainPre, Some("a"), "/1"),
            include(ChainPost, Some("a"), "/2"),
            include(ChainPre, Some("a"), "/3"),
            include(TablePre, None, "/4"),
            include(TablePost, None, "/5"),
            include(ChainPost, Some("x5"), "/6"),
        ]);
        let compiled = vec![
            Compiled {
                chains: vec![],
                rules: vec![opaque("", "pre1")],
            },
            Compiled {
                chains: vec![],
                rules: vec![opaque("", "post2")],
            },
            Compiled {
                chains: vec![],
                rules: vec![opaque("", "pre3a"), opaque("", "pre3b")],
            },
            Compiled {
                chains: vec![Chain::regular("x4")],
                rules: vec![opaque("x4", "x4r")],
            },
            Compiled {
                chains: vec![Chain::regular("x5")],
                rules: vec![],
            },
            Compiled {
                chains: vec![],
                rules: vec![opaque("", "into-x5")],
            },
        ];
        let mut compiled = compiled;
        for (c, inc) in compiled.iter_mut().zip(&p.includes) {
            if let Some(chain) = &inc.chain {
                c.rules.iter_mut().for_each(|r| r.chain = chain.clone());
            }
        }
        let out = splice(&p, &compiled).unwrap();
        let chains: Vec<&str> = out.table.chains.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(chains, ["x4", "a", "b", "x5"]);
        assert_eq!(
            texts(&out),
            [
                "a:pre1",
                "a:pre3a",
                "a:pre3b",
                "a:a1",
                "a:a2",
                "a:post2",
                "b:b1",
                "x4:x4r",
                "x5:into-x5"
            ]
        );
        let group = out.groups.iter().position(|g| g.label == GROUP).unwrap() as u32;
        assert!(out.groups[group as usize].deny, "the includes fail closed");
        let grouped: Vec<bool> = out.rule_groups.iter().map(|g| *g == group).collect();
        assert_eq!(
            grouped,
            [true, true, true, false, false, true, false, true, true]
        );
        assert!(out.includes.is_empty());
        let comment = out.table.rules[0].comment.as_deref().unwrap();
        assert!(comment.starts_with("include /1 #"), "{comment}");
    }

    #[test]
    fn a_chain_no_include_or_program_has_is_refused_at_that_include() {
        let p = program(vec![include(IncludePosition::ChainPre, Some("nope"), "/1")]);
        let compiled = vec![Compiled {
            chains: vec![],
            rules: vec![opaque("nope", "r")],
        }];
        let (i, why) = splice(&p, &compiled).unwrap_err();
        assert_eq!(i, 0);
        assert!(why.contains("no chain nope"), "{why}");
    }
}
