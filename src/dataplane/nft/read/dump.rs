//! Listing what the kernel holds (NFT_MSG_GET* dumps parsed with libnftnl): tables, chains,
//! rules, sets and set elements, for drift detection and `plan` diffs.
//!
//! Rules are returned with a *fingerprint*: the kernel expressions in libnftnl's debug
//! notation with counter values removed, so two dumps of an untouched rule compare equal and
//! any edit (even one keeping the comment) shows.

use std::cell::RefCell;
use std::ffi::CStr;
use std::marker::PhantomData;

use nftnl::nftnl_sys::{self as sys, libc};

use crate::dataplane::nft::build::objects::{self, family_code};
use crate::dataplane::nft::error::{CompileError, NftError};
use crate::dataplane::nft::ffi::attr::{any_expr, chain, rule, set, table};
use crate::dataplane::nft::ffi::{self, NlMsg, Payload, Ref, kind};
use crate::dataplane::nft::ir::{Chain, Family};
use crate::dataplane::nft::socket::{Nft, RECV_WORDS};
use crate::dataplane::nft::table_ref::TableRef;

/// A table as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Family (`None` for families edgenetd does not use, e.g. bridge).
    pub family: Option<Family>,
    /// Name.
    pub name: String,
}

/// A chain as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainInfo {
    /// Name.
    pub name: String,
    /// Hook number, type, priority and policy for base chains (`None` for regular chains).
    pub base: Option<(u32, String, i32, u32)>,
    /// Kernel handle (0 for a planned chain, see [`planned_chain`]).
    pub handle: u64,
}

/// A rule as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// Its chain.
    pub chain: String,
    /// Kernel handle (for `delete rule`).
    pub handle: u64,
    /// The comment, if any.
    pub comment: Option<String>,
    /// The expressions, normalized (counter values removed).
    pub fingerprint: String,
}

/// A set or map as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfo {
    /// Name (`__setN` for anonymous sets).
    pub name: String,
    /// NFT_SET_* flags.
    pub flags: u32,
    /// Key type id and length.
    pub key: (u32, u32),
    /// Data type id and length for maps.
    pub data: Option<(u32, u32)>,
    /// Kernel handle.
    pub handle: u64,
}

/// One kernel element.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElemInfo {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Interval end marker.
    pub interval_end: bool,
    /// The last key of an element of a concatenated interval set (inclusive).
    pub key_end: Option<Vec<u8>>,
    /// Data bytes for maps, or for verdict maps the verdict code (as 4 bytes) plus the chain.
    pub data: Option<Vec<u8>>,
    /// Chain of a jump/goto verdict.
    pub chain: Option<String>,
}

/// What one dump lists: its request, and how each reply message turns into items. One
/// generic runner ([`Nft::list`]) serves tables, chains, rules, sets and set elements.
pub(crate) trait Listing {
    /// What the caller gets per listed object.
    type Item;
    /// `NFT_MSG_GET*` of the dump.
    const GET: i32;
    /// NFPROTO_* to ask for.
    fn family(&self) -> u16;
    /// The request's payload (what the kernel filters on).
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError>;
    /// Hands `f` the items of one reply message (none when it does not parse or is not
    /// ours).
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(Self::Item));
}

/// The text of a string attribute (empty when unset).
pub(crate) fn text(s: Option<&CStr>) -> String {
    s.map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// True when a string attribute equals `name` (compared without copying).
pub(crate) fn named(s: Option<&CStr>, name: &str) -> bool {
    s.is_some_and(|c| c.to_bytes() == name.as_bytes())
}

pub(crate) fn family_of(code: u32) -> Option<Family> {
    match code as i32 {
        libc::NFPROTO_INET => Some(Family::Inet),
        libc::NFPROTO_IPV4 => Some(Family::Ip),
        libc::NFPROTO_IPV6 => Some(Family::Ip6),
        _ => None,
    }
}

fn is_enoent(e: &NftError) -> bool {
    matches!(e, NftError::Io(io) if io.raw_os_error() == Some(libc::ENOENT))
}

/// Every table of every family.
struct Tables;

impl Listing for Tables {
    type Item = TableInfo;
    const GET: i32 = libc::NFT_MSG_GETTABLE;
    fn family(&self) -> u16 {
        libc::AF_UNSPEC as u16
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        Ok(Box::new(ffi::Empty))
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(TableInfo)) {
        if let Some(o) = ffi::Table::parse(msg) {
            let v = o.view();
            f(TableInfo {
                family: v.u32(table::FAMILY).and_then(family_of),
                name: text(v.str(table::NAME)),
            });
        }
    }
}

/// The request of a dump filtered on one table. A chain's table attribute is attribute 1 of
/// its message, as the table's name is of a table message (and so is every stateful object's
/// and flowtable's): a table message naming it filters their dumps.
pub(super) fn table_filter(t: &TableRef) -> Result<Box<dyn Payload>, CompileError> {
    let mut o = ffi::Table::new();
    o.set_str(table::NAME, &t.name)?;
    Ok(Box::new(o))
}

/// The chains of one table.
struct Chains<'a>(&'a TableRef);

impl Listing for Chains<'_> {
    type Item = ChainInfo;
    const GET: i32 = libc::NFT_MSG_GETCHAIN;
    fn family(&self) -> u16 {
        family_code(self.0.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        table_filter(self.0)
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(ChainInfo)) {
        let Some(o) = ffi::Chain::parse(msg) else {
            return;
        };
        let v = o.view();
        if !named(v.str(chain::TABLE), &self.0.name) {
            return;
        }
        f(chain_info(v));
    }
}

fn chain_info(v: Ref<'_, kind::Chain>) -> ChainInfo {
    let base = v.u32(chain::HOOKNUM).map(|hook| {
        (
            hook,
            text(v.str(chain::TYPE)),
            v.i32(chain::PRIO).unwrap_or(0),
            v.u32(chain::POLICY).unwrap_or(0),
        )
    });
    ChainInfo {
        name: text(v.str(chain::NAME)),
        base,
        handle: v.u64(chain::HANDLE).unwrap_or(0),
    }
}

/// How the kernel lists `chain` of `t` once written (handle 0): what a listing is compared
/// with to spot a chain edited in place (its policy changed).
pub fn planned_chain(t: &TableRef, chain: &Chain) -> Result<ChainInfo, CompileError> {
    Ok(chain_info(objects::chain(t, chain, true)?.view()))
}

/// The rules of one table.
/// The rules of one table, each read by `read` from its message and its parse: every
/// rule dump (fingerprints, counters, the raw expressions of included rules) shares the
/// request and the table check, and differs only in what it takes of a rule.
pub(crate) struct RulesOf<'a, T, R> {
    table: &'a TableRef,
    read: R,
    item: PhantomData<fn() -> T>,
}

/// The listing of `table`'s rules as `read` takes them.
pub(crate) fn rules_of<T, R>(table: &TableRef, read: R) -> RulesOf<'_, T, R>
where
    R: Fn(NlMsg<'_>, Ref<'_, kind::Rule>) -> T,
{
    RulesOf {
        table,
        read,
        item: PhantomData,
    }
}

impl<T, R> Listing for RulesOf<'_, T, R>
where
    R: Fn(NlMsg<'_>, Ref<'_, kind::Rule>) -> T,
{
    type Item = T;
    const GET: i32 = libc::NFT_MSG_GETRULE;
    fn family(&self) -> u16 {
        family_code(self.table.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        let mut o = ffi::Rule::new();
        o.set_str(rule::TABLE, &self.table.name)?;
        Ok(Box::new(o))
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(T)) {
        let Some(o) = ffi::Rule::parse(msg) else {
            return;
        };
        let v = o.view();
        if !named(v.str(rule::TABLE), &self.table.name) {
            return;
        }
        f((self.read)(msg, v));
    }
}

/// A rule as drift detection compares it.
fn rule_info(_: NlMsg<'_>, v: Ref<'_, kind::Rule>) -> RuleInfo {
    RuleInfo {
        chain: text(v.str(rule::CHAIN)),
        handle: v.u64(rule::HANDLE).unwrap_or(0),
        comment: v.blob(rule::USERDATA).and_then(rule_comment),
        fingerprint: rule_fingerprint(v),
    }
}

/// What the counters of one rule saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCounters {
    /// Its chain.
    pub chain: String,
    /// The comment, if any.
    pub comment: Option<String>,
    /// Packets, summed over the rule's `counter` statements (0 without one).
    pub packets: u64,
    /// Bytes, likewise.
    pub bytes: u64,
    /// True when the rule has a `counter` statement.
    pub counted: bool,
}

/// What the counters of a rule saw.
fn rule_counters(_: NlMsg<'_>, v: Ref<'_, kind::Rule>) -> RuleCounters {
    let mut c = RuleCounters {
        chain: text(v.str(rule::CHAIN)),
        comment: v.blob(rule::USERDATA).and_then(rule_comment),
        packets: 0,
        bytes: 0,
        counted: false,
    };
    for e in v
        .exprs()
        .filter(|e| named(e.str(any_expr::NAME), "counter"))
    {
        c.counted = true;
        c.packets += e.u64(any_expr::CTR_PACKETS).unwrap_or(0);
        c.bytes += e.u64(any_expr::CTR_BYTES).unwrap_or(0);
    }
    c
}

/// The sets and maps of one table.
struct Sets<'a>(&'a TableRef);

impl Listing for Sets<'_> {
    type Item = SetInfo;
    const GET: i32 = libc::NFT_MSG_GETSET;
    fn family(&self) -> u16 {
        family_code(self.0.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        let mut o = ffi::Set::new();
        o.set_str(set::TABLE, &self.0.name)?;
        Ok(Box::new(o))
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(SetInfo)) {
        let Some(o) = ffi::Set::parse(msg) else {
            return;
        };
        let v = o.view();
        if !named(v.str(set::TABLE), &self.0.name) {
            return;
        }
        let get = |a| v.u32(a).unwrap_or(0);
        f(SetInfo {
            name: text(v.str(set::NAME)),
            flags: get(set::FLAGS),
            key: (get(set::KEY_TYPE), get(set::KEY_LEN)),
            data: v.u32(set::DATA_TYPE).map(|ty| (ty, get(set::DATA_LEN))),
            handle: v.u64(set::HANDLE).unwrap_or(0),
        });
    }
}

impl Nft {
    /// Runs `listing`'s dump, handing `f` every item as its message is parsed. When a
    /// concurrent change interrupts the dump, `restart` is called and the items come again
    /// from the start. A missing table or set lists nothing.
    pub(crate) fn list<L: Listing>(
        &mut self,
        listing: &L,
        f: &mut dyn FnMut(L::Item),
        restart: &mut dyn FnMut(),
    ) -> Result<(), NftError> {
        let filter = listing.filter()?;
        let r = self.dump(
            L::GET,
            listing.family(),
            &*filter,
            &mut |m| {
                listing.items(m, f);
                Ok(())
            },
            restart,
        );
        match r {
            Err(e) if is_enoent(&e) => Ok(()),
            other => other,
        }
    }

    /// Every item of `listing`.
    pub(crate) fn collect<L: Listing>(&mut self, listing: &L) -> Result<Vec<L::Item>, NftError> {
        let out = RefCell::new(Vec::new());
        self.list(listing, &mut |i| out.borrow_mut().push(i), &mut || {
            out.borrow_mut().clear()
        })?;
        Ok(out.into_inner())
    }

    /// Every table of every family.
    pub fn list_tables(&mut self) -> Result<Vec<TableInfo>, NftError> {
        self.collect(&Tables)
    }

    /// True when the table exists.
    pub fn table_exists(&mut self, t: &TableRef) -> Result<bool, NftError> {
        Ok(self
            .list_tables()?
            .iter()
            .any(|i| i.family == Some(t.family) && i.name == t.name))
    }

    /// Chains of a table (empty when the table does not exist).
    pub fn list_chains(&mut self, t: &TableRef) -> Result<Vec<ChainInfo>, NftError> {
        self.collect(&Chains(t))
    }

    /// Rules of a table in chain order (empty when the table does not exist).
    pub fn list_rules(&mut self, t: &TableRef) -> Result<Vec<RuleInfo>, NftError> {
        self.collect(&rules_of(t, rule_info))
    }

    /// The counters of a table's rules, in chain order (empty when the table does not
    /// exist): one rule dump, as cheap as [`Nft::list_rules`].
    pub fn list_rule_counters(&mut self, t: &TableRef) -> Result<Vec<RuleCounters>, NftError> {
        self.collect(&rules_of(t, rule_counters))
    }

    /// Sets and maps of a table, anonymous ones included (empty when the table does not
    /// exist).
    pub fn list_sets(&mut self, t: &TableRef) -> Result<Vec<SetInfo>, NftError> {
        self.collect(&Sets(t))
    }
}

/// The comment in a rule's user data: a TLV list of (type u8, len u8, value). Public for
/// the fuzz target (the user data is whatever the rule's writer put there).
pub fn rule_comment(data: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 2 <= data.len() {
        let (ty, l) = (data[i], data[i + 1] as usize);
        let v = data.get(i + 2..i + 2 + l)?;
        if ty == sys::NFTNL_UDATA_RULE_COMMENT as u8 {
            let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
            return Some(String::from_utf8_lossy(&v[..end]).into_owned());
        }
        i += 2 + l;
    }
    None
}

/// The rule's expressions in libnftnl's debug notation, counter values left out.
fn rule_fingerprint(r: Ref<'_, kind::Rule>) -> String {
    let mut out = String::new();
    let mut buf = [0u8; 1024];
    for e in r.exprs() {
        let name = text(e.str(any_expr::NAME));
        if name == "counter" {
            out.push_str("[counter]");
            continue;
        }
        let body = text(e.debug_text(&mut buf));
        out.push('[');
        out.push_str(&name);
        out.push(' ');
        out.push_str(body.trim());
        out.push(']');
    }
    out
}

/// Counts of what one kernel answer lists: messages, then tables, chains, rules, sets,
/// elements and generation ids.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// Whole messages read.
    pub messages: usize,
    /// Tables.
    pub tables: usize,
    /// Chains of table `inet t`.
    pub chains: usize,
    /// Rules of table `inet t`.
    pub rules: usize,
    /// Sets of table `inet t`.
    pub sets: usize,
    /// Set elements.
    pub elems: usize,
    /// NFT_MSG_NEWGEN messages.
    pub gens: usize,
}

/// Reads `bytes` as a kernel answer (netlink messages back to back, as one `recv` gives
/// them) without a socket, each message handed to the dump parser its type names, as the
/// dumps do: a pure entry point for tests and the fuzz target. Stops at the first
/// truncated message, as the socket's reader does.
///
/// `with_libnftnl` false stops at the framing: libnftnl exits the process ("nf_tables
/// kernel ABI is broken") when an attribute has the wrong size for its type, by design, so
/// arbitrary bytes may only reach it in a process that may die that way.
pub fn list_answer(bytes: &[u8], with_libnftnl: bool) -> Listed {
    // libnftnl reads headers in place: give it the aligned buffer the socket has, and at
    // most what one `recv` into it gives.
    let mut recv = Vec::with_capacity(RECV_WORDS);
    let buf = ffi::aligned_copy(bytes, recv.spare_capacity_mut());
    let mut n = Listed::default();
    let mut off = 0;
    while let Some(m) = NlMsg::first(&buf[off..]) {
        n.messages += 1;
        if with_libnftnl {
            list_message(m, &mut n);
        }
        off = (off + m.len().div_ceil(4) * 4).min(buf.len());
    }
    n
}

/// Counts what `m` lists, parsed by the listing of its type.
fn list_message(m: NlMsg<'_>, n: &mut Listed) {
    let t = TableRef::new(Family::Inet, "t");
    let nftables = (libc::NFNL_SUBSYS_NFTABLES as u16) << 8;
    let Some(cmd) = m.msg_type().checked_sub(nftables).map(i32::from) else {
        return;
    };
    match cmd {
        libc::NFT_MSG_NEWTABLE => Tables.items(m, &mut |_| n.tables += 1),
        libc::NFT_MSG_NEWCHAIN => Chains(&t).items(m, &mut |_| n.chains += 1),
        libc::NFT_MSG_NEWRULE => rules_of(&t, rule_info).items(m, &mut |_| n.rules += 1),
        libc::NFT_MSG_NEWSET => Sets(&t).items(m, &mut |_| n.sets += 1),
        // Elements are turned into values by the element listing, which builds on this
        // module; here libnftnl's parse and walk of them is what is read.
        libc::NFT_MSG_NEWSETELEM => {
            n.elems += ffi::Set::parse_elems(m).map_or(0, |o| o.view().elems().count())
        }
        libc::NFT_MSG_NEWGEN => n.gens += usize::from(ffi::parse_gen(m).is_some()),
        _ => {}
    }
}

#[cfg(test)]
mod list_answer_tests {
    use super::*;

    fn message(msg_type: i32, payload: &dyn Payload) -> Vec<u8> {
        let family = libc::NFPROTO_INET as u16;
        let req = ffi::Request::new(msg_type as u16, family, 0, 1, payload).unwrap();
        let mut bytes = req.as_bytes().to_vec();
        bytes.resize(bytes.len().div_ceil(4) * 4, 0);
        bytes
    }

    #[test]
    fn an_answer_without_a_socket_lists_its_table_and_chain_and_a_truncated_one_stops() {
        let mut t = ffi::Table::new();
        t.set_str(table::NAME, "t").unwrap();
        let mut c = ffi::Chain::new();
        c.set_str(chain::TABLE, "t").unwrap();
        c.set_str(chain::NAME, "input").unwrap();
        let mut bytes = message(libc::NFT_MSG_NEWTABLE, &t);
        bytes.extend(message(libc::NFT_MSG_NEWCHAIN, &c));
        let n = list_answer(&bytes, true);
        assert_eq!(
            (n.messages, n.tables, n.chains, n.rules),
            (2, 1, 1, 0),
            "{n:?}"
        );
        for cut in 0..bytes.len() {
            let n = list_answer(&bytes[..cut], true);
            assert!(n.messages < 2 && n.chains == 0, "{cut}: {n:?}");
        }
        assert_eq!(list_answer(&[0xff; 100], true), Listed::default());
    }

    #[test]
    fn real_kernel_answers_list_what_the_seed_ruleset_holds() {
        let answer = |name: &str| {
            let path = format!("{}/fuzz/corpus/nft_dump/{name}", env!("CARGO_MANIFEST_DIR"));
            list_answer(&std::fs::read(path).unwrap(), true)
        };
        assert_eq!(answer("tables-0").tables, 1);
        assert_eq!(answer("chains-0").chains, 2);
        assert_eq!(answer("rules-0").rules, 5);
        assert!(answer("sets-0").sets >= 2, "s, m and anonymous sets");
        assert_eq!(answer("elems-m-0").elems, 2);
        assert_eq!(answer("gen-0").gens, 1);
    }
}
