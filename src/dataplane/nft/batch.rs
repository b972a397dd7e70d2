//! An nftables transaction: messages built from the IR into a libnftnl batch, each remembered
//! with its sequence number and the caller's tag, so that a refusal can be traced back to the
//! rule group that caused it.
//!
//! Batches are atomic in the kernel: either every message applies or none does. Building one
//! is atomic per call too: a method that fails writes nothing, and if a failure is found only
//! after some of a call's messages were written (or in a method that returns nothing, such as
//! [`Batch::table`]), the batch keeps the error and [`super::Nft::execute`] refuses to send
//! it, so an incomplete transaction never reaches the kernel.

use nftnl::nftnl_sys::libc;

use super::build::objects::{self, ElemData};
use super::build::rule;
use super::encode::{RawKey, element_keys, encode};
use super::error::CompileError;
use super::ffi::attr::DATA_MAX;
use super::ffi::{self, BatchBuf, Elems, Payload};
use super::ir::*;
use super::table_ref::TableRef;

/// Largest element count in one NEWSETELEM message (keeps it well under the 64 KiB limit of
/// a netlink attribute nest).
const ELEMS_PER_MSG: usize = 400;

/// `NFT_MSG_NEWFLOWTABLE` (the libc crate does not name it).
const NFT_MSG_NEWFLOWTABLE: i32 = 22;

/// Tag of the batch begin/end messages.
pub const TAG_BATCH: u32 = u32::MAX;

/// What one message of a batch was (for error reports).
#[derive(Debug, Clone)]
pub(crate) struct MsgInfo {
    pub tag: u32,
    pub what: String,
}

/// Add or delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Add (create if missing).
    Add,
    /// Delete.
    Delete,
}

/// A transaction being built. Send it with [`super::Nft::execute`].
pub struct Batch {
    /// The libnftnl pages holding the messages.
    buf: BatchBuf,
    /// Sequence number of the begin message.
    first_seq: u32,
    /// Sequence number of the next message.
    next_seq: u32,
    /// One entry per message written, begin (and end) included, in sequence order.
    pub(crate) msgs: Vec<MsgInfo>,
    /// Tag of the messages added from now on.
    tag: u32,
    /// Next batch-local set id (lookups refer to sets created in the same batch by id).
    next_set_id: u32,
    /// True once the end message is written.
    finalized: bool,
    /// The first error that left the batch incomplete; the batch is then not sent.
    error: Option<CompileError>,
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl Batch {
    /// No messages yet, not even the batch's begin (the constructors add theirs).
    fn unopened() -> Batch {
        Batch {
            buf: BatchBuf::new(),
            first_seq: 1,
            next_seq: 1,
            msgs: Vec::new(),
            tag: 0,
            next_set_id: 1,
            finalized: false,
            error: None,
        }
    }

    /// An empty transaction.
    pub fn new() -> Batch {
        let mut b = Batch::unopened();
        b.buf.begin(b.next_seq);
        b.record(TAG_BATCH, "batch begin".into());
        b
    }

    /// An empty transaction the kernel applies only while the ruleset generation is still
    /// `generation` (else it refuses all of it, [`super::NftError::is_restart`]): for a
    /// batch built from a listing, which a commit in between would make stale.
    pub fn at_generation(generation: u32) -> Batch {
        let mut b = Batch::unopened();
        b.buf.begin_at_generation(b.next_seq, generation);
        b.record(TAG_BATCH, "batch begin (at a generation)".into());
        b
    }

    /// Tags the messages added from now on; a refusal reports the tag of its message.
    pub fn tag(&mut self, tag: u32) {
        self.tag = tag;
    }

    /// Number of messages besides batch begin/end (0 = the batch changes nothing).
    pub fn len(&self) -> usize {
        self.msgs
            .len()
            .saturating_sub(if self.finalized { 2 } else { 1 })
    }

    /// True when the batch holds no change.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The error that makes this batch unsendable, if any (see the module documentation).
    pub fn error(&self) -> Option<&CompileError> {
        self.error.as_ref()
    }

    /// Sequence numbers used so far (begin included).
    pub(crate) fn seq_range(&self) -> std::ops::Range<u32> {
        self.first_seq..self.next_seq
    }

    /// The message with sequence number `seq`.
    pub(crate) fn msg(&self, seq: u32) -> Option<&MsgInfo> {
        seq.checked_sub(self.first_seq)
            .and_then(|i| self.msgs.get(i as usize))
    }

    /// The pages to send (after [`Batch::finalize`]).
    pub(crate) fn buffer(&self) -> &BatchBuf {
        &self.buf
    }

    /// Takes the error that makes the batch unsendable.
    pub(crate) fn take_error(&mut self) -> Option<CompileError> {
        self.error.take()
    }

    fn record(&mut self, tag: u32, what: String) {
        self.next_seq += 1;
        self.msgs.push(MsgInfo { tag, what });
    }

    /// Writes an nf_tables message with a header and a payload.
    fn message(
        &mut self,
        what: String,
        msg_type: i32,
        family: Family,
        flags: i32,
        payload: &dyn Payload,
    ) -> Result<(), CompileError> {
        assert!(!self.finalized, "batch already finalized");
        self.buf.put(
            msg_type as u16,
            objects::family_code(family),
            flags as u16,
            self.next_seq,
            payload,
        )?;
        self.record(self.tag, what);
        Ok(())
    }

    /// Runs `f`; if it fails after writing messages, the batch keeps the error (the
    /// written part must not be sent alone). An error a method inside `f` kept (one that
    /// returns nothing, like [`Batch::table`]) is returned too.
    pub(super) fn atomic<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R, CompileError>,
    ) -> Result<R, CompileError> {
        let before = self.msgs.len();
        let had_error = self.error.is_some();
        match f(self) {
            Err(e) => {
                if self.msgs.len() != before {
                    self.keep_error(e.clone());
                }
                Err(e)
            }
            Ok(v) => match (had_error, &self.error) {
                (false, Some(e)) => Err(e.clone()),
                _ => Ok(v),
            },
        }
    }

    /// Keeps the first error of a method that cannot return it.
    fn keep_error(&mut self, e: CompileError) {
        self.error.get_or_insert(e);
    }

    /// Writes the batch end message; the batch can then only be sent.
    pub(crate) fn finalize(&mut self) {
        if !self.finalized {
            self.buf.end(self.next_seq);
            self.record(TAG_BATCH, "batch end".into());
            self.finalized = true;
        }
    }

    // ------------------------------------------------------------------ tables

    /// `add table` (no error if it exists) or `delete table`. A table name the kernel cannot
    /// take (a NUL byte) makes the batch unsendable (see [`Batch::error`]).
    pub fn table(&mut self, t: &TableRef, op: Op) {
        let (msg, flags, verb) = match op {
            Op::Add => (libc::NFT_MSG_NEWTABLE, libc::NLM_F_CREATE, "add"),
            Op::Delete => (libc::NFT_MSG_DELTABLE, 0, "delete"),
        };
        let r = objects::table(t).and_then(|o| {
            self.message(format!("{verb} table {}", t.name), msg, t.family, flags, &o)
        });
        if let Err(e) = r {
            self.keep_error(e);
        }
    }

    /// `add table` carrying `tag` in its user data (see [`super::table_tag`]); only a table
    /// created by this message keeps the tag (the kernel does not update an existing
    /// table's user data), so it follows a `delete table` in the same batch.
    pub fn table_tagged(&mut self, t: &TableRef, tag: &str) {
        let r = objects::table(t).and_then(|mut o| {
            o.set_blob(ffi::attr::table::USERDATA, &ffi::encode_table_tag(tag)?);
            let flags = libc::NLM_F_CREATE;
            self.message(
                format!("add table {}", t.name),
                libc::NFT_MSG_NEWTABLE,
                t.family,
                flags,
                &o,
            )
        });
        if let Err(e) = r {
            self.keep_error(e);
        }
    }

    /// Replaces `table` atomically and completely: `add table; delete table; add table` plus
    /// every set (with elements), chain and rule. Works whether or not the table existed and
    /// touches no other table.
    pub fn replace_table(&mut self, table: &Table) -> Result<(), CompileError> {
        let t = TableRef::from(table);
        self.atomic(|b| {
            b.table(&t, Op::Add);
            b.table(&t, Op::Delete);
            b.add_table_contents(table)
        })
    }

    /// `add table` plus every set, chain and rule of `table` (for a table that does not exist,
    /// or right after its deletion in the same batch).
    pub fn add_table_contents(&mut self, table: &Table) -> Result<(), CompileError> {
        let t = TableRef::from(table);
        self.atomic(|b| {
            b.table(&t, Op::Add);
            // Chains first: verdict map elements may jump to them.
            for chain in &table.chains {
                b.chain(&t, chain, Op::Add);
            }
            for set in &table.sets {
                b.add_set(&t, set)?;
            }
            for h in &table.ct_helpers {
                b.add_ct_helper(&t, h)?;
            }
            for l in &table.limits {
                b.add_limit(&t, l)?;
            }
            for ft in &table.flowtables {
                b.add_flowtable(&t, ft)?;
            }
            for rule in &table.rules {
                b.add_rule(&t, rule)?;
            }
            Ok(())
        })
    }

    /// `add ct helper`: a `ct helper` object (before the rules that assign it).
    pub fn add_ct_helper(&mut self, t: &TableRef, h: &CtHelper) -> Result<(), CompileError> {
        let o = objects::ct_helper(t, h)?;
        self.message(
            format!("add ct helper {}", h.name),
            libc::NFT_MSG_NEWOBJ,
            t.family,
            libc::NLM_F_CREATE,
            &o,
        )
    }

    /// `add limit`: a named `limit` object (before the rules that refer to it).
    pub fn add_limit(&mut self, t: &TableRef, l: &LimitObject) -> Result<(), CompileError> {
        let o = objects::limit_object(t, l)?;
        self.message(
            format!("add limit {}", l.name),
            libc::NFT_MSG_NEWOBJ,
            t.family,
            libc::NLM_F_CREATE,
            &o,
        )
    }

    // ------------------------------------------------------------------ chains

    /// `add chain` (with hook, type, priority, policy for base chains) or `delete chain`. A
    /// name the kernel cannot take makes the batch unsendable (see [`Batch::error`]).
    pub fn chain(&mut self, t: &TableRef, chain: &Chain, op: Op) {
        let (msg, flags, verb) = match op {
            Op::Add => (libc::NFT_MSG_NEWCHAIN, libc::NLM_F_CREATE, "add"),
            Op::Delete => (libc::NFT_MSG_DELCHAIN, 0, "delete"),
        };
        let r = objects::chain(t, chain, op == Op::Add).and_then(|o| {
            self.message(
                format!("{verb} chain {}", chain.name),
                msg,
                t.family,
                flags,
                &o,
            )
        });
        if let Err(e) = r {
            self.keep_error(e);
        }
    }

    /// `flush chain`: deletes every rule of the chain (an unusable name makes the batch
    /// unsendable).
    pub fn flush_chain(&mut self, t: &TableRef, chain: &str) {
        let r = objects::rule_in(t, chain).and_then(|o| {
            self.message(
                format!("flush chain {chain}"),
                libc::NFT_MSG_DELRULE,
                t.family,
                0,
                &o,
            )
        });
        if let Err(e) = r {
            self.keep_error(e);
        }
    }

    // ------------------------------------------------------------------ flowtables

    /// `add flowtable` with its hook, devices and flags (before the rules that `flow add`
    /// to it).
    pub fn add_flowtable(&mut self, t: &TableRef, ft: &Flowtable) -> Result<(), CompileError> {
        let o = objects::flowtable(t, ft)?;
        self.atomic(|b| {
            b.message(
                format!("add flowtable {}", ft.name),
                NFT_MSG_NEWFLOWTABLE,
                t.family,
                libc::NLM_F_CREATE,
                &o,
            )
        })
    }

    // ------------------------------------------------------------------ rules

    /// Appends a rule to its chain (anonymous sets it uses are created just before it).
    pub fn add_rule(&mut self, t: &TableRef, rule: &Rule) -> Result<(), CompileError> {
        let mut raw = match rule.stmts.as_slice() {
            [Stmt::Opaque(o)] => objects::opaque_rule_in(t, &rule.chain, &o.exprs)?,
            stmts if stmts.iter().any(|s| matches!(s, Stmt::Opaque(_))) => {
                return Err(CompileError::Invalid(format!(
                    "rule in chain {}: an opaque statement must be the rule's only one",
                    rule.chain
                )));
            }
            _ => objects::rule_in(t, &rule.chain)?,
        };
        if let Some(c) = &rule.comment {
            objects::set_comment(&mut raw, c)?;
        }
        let mut anon = Vec::new();
        rule::compile_rule(
            t.family,
            rule,
            &mut raw,
            &mut || {
                let id = self.next_set_id;
                self.next_set_id += 1;
                id
            },
            &mut anon,
        )?;
        let mut sets = Vec::with_capacity(anon.len());
        for (id, set) in &anon {
            sets.push(PreparedSet::new(t, set, Some(*id), true)?);
        }
        if !ffi::fits(&raw) {
            return Err(CompileError::Invalid(format!(
                "rule in chain {}: too many statements for one message",
                rule.chain
            )));
        }
        let what = match &rule.comment {
            Some(c) => format!("add rule {} \"{c}\"", rule.chain),
            None => format!("add rule {}", rule.chain),
        };
        self.atomic(|b| {
            for (p, (_, set)) in sets.iter().zip(&anon) {
                b.write_set(t, set, p, Op::Add)?;
            }
            b.message(
                what,
                libc::NFT_MSG_NEWRULE,
                t.family,
                libc::NLM_F_CREATE | libc::NLM_F_APPEND,
                &raw,
            )
        })
    }

    /// `delete rule <chain> handle <handle>` (an unusable chain name makes the batch
    /// unsendable).
    pub fn delete_rule(&mut self, t: &TableRef, chain: &str, handle: u64) {
        let r = objects::rule_in(t, chain).and_then(|mut o| {
            o.set_u64(ffi::attr::rule::HANDLE, handle);
            self.message(
                format!("delete rule {chain} handle {handle}"),
                libc::NFT_MSG_DELRULE,
                t.family,
                0,
                &o,
            )
        });
        if let Err(e) = r {
            self.keep_error(e);
        }
    }

    // ------------------------------------------------------------------ sets

    /// `add set|map` with its elements.
    pub fn add_set(&mut self, t: &TableRef, set: &Set) -> Result<(), CompileError> {
        let id = self.next_set_id;
        self.next_set_id += 1;
        let p = PreparedSet::new(t, set, Some(id), false)?;
        self.atomic(|b| b.write_set(t, set, &p, Op::Add))
    }

    /// `delete set|map` (an unusable name makes the batch unsendable).
    pub fn delete_set(&mut self, t: &TableRef, name: &str) {
        let r = objects::set_named(t, name, None).and_then(|o| {
            self.message(
                format!("delete set {name}"),
                libc::NFT_MSG_DELSET,
                t.family,
                0,
                &o,
            )
        });
        if let Err(e) = r {
            self.keep_error(e);
        }
    }

    /// Adds or deletes `elements` of the existing named set `set` (whose definition gives the
    /// key/data types and flags): an update by delta that leaves everything else alone.
    /// Deletes need keys only: map data given with a delete is ignored.
    pub fn elements(
        &mut self,
        t: &TableRef,
        set: &Set,
        elements: &[Element],
        op: Op,
    ) -> Result<(), CompileError> {
        let raw = kernel_elements(set, elements, op)?;
        // Checked before writing: the set's name is the one thing left that can fail.
        objects::set_named(t, &set.name, None)?;
        self.atomic(|b| b.write_elements(t, set, (&set.name, None), (&raw, None), op))
    }

    /// Writes a prepared set: its definition (for adds) and its elements.
    fn write_set(
        &mut self,
        t: &TableRef,
        set: &Set,
        p: &PreparedSet,
        op: Op,
    ) -> Result<(), CompileError> {
        let kind = if set.data.is_some() { "map" } else { "set" };
        self.message(
            format!("add {kind} {}", set.name),
            libc::NFT_MSG_NEWSET,
            t.family,
            libc::NLM_F_CREATE,
            &p.definition,
        )?;
        self.write_elements(t, set, (&p.name, p.id), (&p.elements, None), op)
    }

    /// Writes `raw` elements of set `name` (or batch-local `id`) in messages of at most
    /// [`ELEMS_PER_MSG`] elements. Added to a set with timeouts, each element gets its
    /// `timing` (timeout, expiry left), or else timeout 0: it never expires (the set's own
    /// elements outlive the default timeout meant for others').
    pub(super) fn write_elements(
        &mut self,
        t: &TableRef,
        set: &Set,
        (name, id): (&str, Option<u32>),
        (raw, timing): (&[(RawKey, ElemData)], Option<&[Timing]>),
        op: Op,
    ) -> Result<(), CompileError> {
        let (msg, flags, verb) = match op {
            Op::Add => (libc::NFT_MSG_NEWSETELEM, libc::NLM_F_CREATE, "add"),
            Op::Delete => (libc::NFT_MSG_DELSETELEM, 0, "delete"),
        };
        let timed = op == Op::Add && set.timeout.is_some();
        let mut done = 0;
        while done < raw.len() {
            let mut s = objects::set_named(t, name, id)?;
            let mut n = 0;
            for (k, d) in raw[done..].iter().take(ELEMS_PER_MSG) {
                let mut e = objects::elem(k, d)?;
                if timed && !k.interval_end {
                    let (timeout, expires) = timing.map_or((0, None), |t| t[done + n]);
                    objects::elem_timing(&mut e, timeout, expires);
                }
                if n > 0 && !s.fits_elem(&e) {
                    break;
                }
                s.add_elem(e);
                n += 1;
            }
            self.message(
                format!("{verb} {n} elements of set {}", set.name),
                msg,
                t.family,
                flags,
                &Elems(s),
            )?;
            done += n;
        }
        Ok(())
    }
}

/// An element's timeout and the expiry it has left, in milliseconds.
pub(super) type Timing = (u64, Option<u64>);

/// A set checked and compiled before any of its messages is written.
struct PreparedSet {
    /// Name in messages (`__set%d` / `__map%d` for anonymous sets).
    name: String,
    /// Batch-local id.
    id: Option<u32>,
    /// The NEWSET payload.
    definition: ffi::Set,
    /// Kernel elements.
    elements: Vec<(RawKey, ElemData)>,
}

impl PreparedSet {
    fn new(
        t: &TableRef,
        set: &Set,
        id: Option<u32>,
        anonymous: bool,
    ) -> Result<PreparedSet, CompileError> {
        let definition = objects::set_definition(t, set, id, anonymous)?;
        let elements = kernel_elements(set, &set.elements, Op::Add)?;
        // An anonymous set carries nft's name template (`__set%d`, `__map%d`).
        let name = &set.name;
        Ok(PreparedSet {
            name: name.to_string(),
            id,
            definition,
            elements,
        })
    }
}

/// The kernel form of `elements` for `op`, every one checked (so writing them cannot fail).
fn kernel_elements(
    set: &Set,
    elements: &[Element],
    op: Op,
) -> Result<Vec<(RawKey, ElemData)>, CompileError> {
    let mut raw_elems = Vec::with_capacity(elements.len());
    for e in elements {
        // The kernel deletes by key: data given with a delete is not sent.
        let data = match (&e.data, op) {
            (_, Op::Delete) | (None, _) => ElemData::None,
            (Some(Value::Verdict(v)), _) => ElemData::Verdict(v.clone()),
            (Some(v), _) => ElemData::Bytes(encode(v)?),
        };
        if op == Op::Add && set.data.is_some() == matches!(data, ElemData::None) {
            return Err(CompileError::Invalid(format!(
                "set {}: element data does not match the set's type",
                set.name
            )));
        }
        check_data(set, &data)?;
        for k in element_keys(&e.key, set.interval)? {
            let ends_right = k
                .key_end()
                .is_none_or(|e| e.len() == set.key.byte_len() as usize);
            if !k.interval_end && (k.start().len() != set.key.byte_len() as usize || !ends_right) {
                return Err(CompileError::Invalid(format!(
                    "set {}: element key of {} bytes, the set's key has {}",
                    set.name,
                    k.start().len(),
                    set.key.byte_len()
                )));
            }
            if k.start().len() > DATA_MAX {
                return Err(too_long(set, "key", k.start().len()));
            }
            let d = if k.interval_end {
                ElemData::None
            } else {
                data.clone()
            };
            raw_elems.push((k, d));
        }
    }
    Ok(raw_elems)
}

/// Checks what [`objects::elem`] would refuse in element data.
fn check_data(set: &Set, data: &ElemData) -> Result<(), CompileError> {
    match data {
        ElemData::None => Ok(()),
        ElemData::Bytes(b) if b.len() > DATA_MAX => Err(too_long(set, "data", b.len())),
        ElemData::Bytes(_) => Ok(()),
        ElemData::Verdict(v) => match objects::verdict_code(v).1 {
            Some(c) if c.contains('\0') => Err(CompileError::NulInName {
                what: "verdict chain",
                name: c.to_string(),
            }),
            _ => Ok(()),
        },
    }
}

fn too_long(set: &Set, what: &str, len: usize) -> CompileError {
    CompileError::Invalid(format!(
        "set {}: element {what} of {len} bytes, the kernel takes at most {DATA_MAX}",
        set.name
    ))
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
