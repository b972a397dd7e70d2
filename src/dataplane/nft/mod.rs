//! The nftables dataplane shared by the policy and service controllers.
//!
//! Knows nothing of TOML: controllers describe what they want with the typed IR in [`ir`]
//! (tables, chains, sets/maps, rules made of nft statements) and this module both
//!
//! - compiles it into one atomic nf_tables batch ([`Batch`], built with libnftnl through the
//!   `nftnl` crate's raw bindings, including what that crate lacks: numgen, jhash, maps and
//!   verdict maps, concatenated keys, interval sets, NAT from map lookups, limit, log,
//!   reject, fib), and
//! - writes it as `nft -f` text ([`text`]), so `plan` output and the kernel program come
//!   from the same values.
//!
//! # The stages, by module
//!
//! | module | does |
//! |---|---|
//! | [`ir`] (with [`fields`]) | the typed IR: tables, chains, sets, rules of statements |
//! | [`intervals`] | what an interval set's elements must be (no overlaps) |
//! | [`text`] | IR -> `nft -f` text |
//! | [`encode`](mod@encode) | constants and set elements -> the kernel's bytes |
//! | `build` | IR -> libnftnl objects: `build::objects` (tables, chains, flowtables, sets, elements, the rule shell, verdict codes), `build::rule` (a rule's statements -> expressions) |
//! | `batch` | objects -> one atomic batch of messages ([`Batch`]) |
//! | `socket` | sends it, reads the generation ([`Nft`]) |
//! | [`read`] | kernel -> listings comparable with the IR: [`read::dump`] (tables, chains, rules, sets), `read::objects` (objects, flowtables), `read::elements` (one set's elements, streamed) |
//! | [`watch`] | notices other processes' commits ([`GenerationWatch`]) |
//! | [`snippet`] | operator snippets in nft's language, compiled by `nft` in a scratch table and read back as [`ir::Opaque`] rules |
//! | [`lift`] | an [`ir::Opaque`] rule's kernel expressions -> the IR statements they mean, where the lift reads them all (for `explain`) |
//! | [`table_tag`], `kept` | a table's owner tag; elements kept across replaces |
//! | `ffi` | every libnftnl/libmnl call, behind owned wrappers |
//!
//! # Using it
//!
//! ```no_run
//! use edgenetd::dataplane::nft::{ir::*, Batch, Nft, Op, TableRef};
//! let mut table = Table::new(Family::Inet, "edgenetd-demo");
//! table.chains.push(Chain::base("input", ChainType::Filter, Hook::Input, 0, ChainPolicy::Accept));
//! table.rules.push(Rule::new("input", vec![Stmt::Counter]).with_comment("count"));
//! let mut nft = Nft::open()?;              // on the calling thread (its netns)
//! let mut batch = Batch::new();
//! batch.tag(7);                             // failures of what follows report tag 7
//! batch.replace_table(&table)?;             // add table; delete table; add table + contents
//! let commit = nft.execute(batch)?;         // blocking: wrap in smol::unblock if needed
//! println!("generation {}", commit.generation);
//! # Ok::<(), edgenetd::dataplane::nft::NftError>(())
//! ```
//!
//! - **Element deltas**: [`Batch::elements`] adds or deletes elements of an existing named
//!   set or map without touching anything else (one service's map entries, one blocklist
//!   address).
//! - **Errors**: a refused batch applies nothing; [`NftError::Rejected`] lists every refused
//!   message with its sequence number and the tag set with [`Batch::tag`] before it was
//!   added, so a caller can drop the failing group and retry the rest.
//! - **Drift**: [`Nft::generation`] moves with every commit by anyone; when it moved, the
//!   listing calls ([`Nft::list_rules`] with a per-rule fingerprint, [`Nft::list_sets`],
//!   [`Nft::list_elements`], [`Nft::list_chains`], [`Nft::list_tables`]) show what changed.
//!   [`raw_elements`] gives the kernel form of desired elements for comparison.
//! - **Foreign commits**: a [`GenerationWatch`] calls back when another process committed
//!   anything (it polls the generation; see the module for why not events), so a controller
//!   can look for drift at once. Callers record their own commits' generations in it.
//! - **Ownership**: nothing here flushes the ruleset or touches a table it is not given.
//! - **Names**: a table, chain, set name, comment or log prefix holding a NUL byte is
//!   [`CompileError::NulInName`] (netlink strings end at a NUL; nothing is silently cut).
//!   Methods that return nothing ([`Batch::table`], [`Batch::chain`], the deletes) keep such
//!   an error in the batch ([`Batch::error`]) and [`Nft::execute`] refuses to send it.
//! - **Safety**: every libnftnl/libmnl call is in the private `ffi` module, behind owned
//!   wrappers with typed attributes; the rest of the crate denies `unsafe`.
//! - **Threads**: [`Nft`] is `Send`; open it where its network namespace is, then do the
//!   blocking I/O in `smol::unblock(move || ...)`.
//!
//! Text and batch agree: loaded with `nft -f`, the text of [`text`] gives the same rules,
//! expression by expression, and the same elements as the batch (tested on whole `plan`
//! output; nft also puts an interval end at key 0 in front of an interval set whose first
//! range starts above 0, which the batch leaves out and which matches nothing either way).
//! Two things make that so. nft types `numgen`/`jhash` results as plain `integer`
//! and has no cast, so a set looked up with such a key is rendered with `typeof <key>`
//! instead of `type … . mark`; the type id nft stores for its own listings is then `integer`
//! where the batch says `mark` (the kernel never reads it). And the batch compiles what nft
//! rewrites the way nft does: a one-element anonymous set as a plain comparison, `icmp` and
//! `icmpv6` fields with their `meta nfproto` dependency, a NAT map's hash input in the
//! register nft picks.
//!
//! Interval sets: elements must not overlap (the kernel refuses overlaps); normalize address
//! prefixes with [`intervals::normalize_prefixes`] and port ranges with
//! [`intervals::normalize_port_ranges`] first, for named and anonymous sets alike.

mod batch;
mod build;
pub mod encode;
mod error;
mod expr;
mod ffi;
pub mod fields;
pub mod intervals;
pub mod ir;
mod kept;
pub mod lift;
pub mod read;
pub mod snippet;
mod socket;
mod table_ref;
pub mod table_tag;
pub mod text;
pub mod watch;

pub use batch::{Batch, Op, TAG_BATCH};
pub use error::{CompileError, MessageFailure, NftError};
pub use kept::KeptElem;
pub use read::dump::{
    ChainInfo, ElemInfo, Listed, RuleCounters, RuleInfo, SetInfo, TableInfo, list_answer,
};
pub use read::objects::{FlowtableInfo, ObjectInfo};
pub use socket::{Commit, Nft};
pub use table_ref::TableRef;
pub use table_tag::TableState;
pub use watch::GenerationWatch;

use build::objects;
use encode::{element_keys, encode};
use ir::{Element, Set, Value};

/// The kernel form of `elements` of `set` (keys, interval ends, data), sorted, comparable with
/// [`Nft::list_elements`].
pub fn raw_elements(set: &Set, elements: &[Element]) -> Result<Vec<ElemInfo>, CompileError> {
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        let (data, chain) = match &e.data {
            None => (None, None),
            Some(Value::Verdict(v)) => {
                let (code, chain) = objects::verdict_code(v);
                (Some(code.to_ne_bytes().to_vec()), chain.map(str::to_string))
            }
            Some(v) => (Some(encode(v)?), None),
        };
        for k in element_keys(&e.key, set.interval)? {
            let end = k.interval_end;
            // The key moves as it is unless a last key shares its buffer.
            let (key, key_end) = match k.key_end() {
                None => (k.key, None),
                Some(last) => (k.start().to_vec(), Some(last.to_vec())),
            };
            out.push(ElemInfo {
                key,
                interval_end: end,
                key_end,
                data: if end { None } else { data.clone() },
                chain: if end { None } else { chain.clone() },
            });
        }
    }
    out.sort();
    Ok(out)
}
