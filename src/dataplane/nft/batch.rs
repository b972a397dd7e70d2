//! An nftables transaction: messages built from the IR into a libnftnl batch, each remembered
//! with its sequence number and the caller's tag, so that a refusal can be traced back to the
//! rule group that caused it.
//!
//! Batches are atomic in the kernel: either every message applies or none does.

use std::ffi::CString;
use std::ptr::NonNull;

use nftnl::nftnl_sys::{self as sys, libc};

use super::compile::{self, RawRule};
use super::encode::{element_keys, encode};
use super::error::CompileError;
use super::ir::*;

/// Largest element count in one NEWSETELEM message (keeps it well under the 64 KiB limit of
/// a netlink attribute nest).
const ELEMS_PER_MSG: usize = 400;

/// Tag of the batch begin/end messages.
pub const TAG_BATCH: u32 = u32::MAX;

/// What one message of a batch was (for error reports).
#[derive(Debug, Clone)]
pub(crate) struct MsgInfo {
    pub tag: u32,
    pub what: String,
}

/// A table named by family and name (what batch messages refer to).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableRef {
    /// Family.
    pub family: Family,
    /// Name.
    pub name: String,
}

impl TableRef {
    /// `family name`.
    pub fn new(family: Family, name: impl Into<String>) -> TableRef {
        TableRef {
            family,
            name: name.into(),
        }
    }
}

impl From<&Table> for TableRef {
    fn from(t: &Table) -> TableRef {
        TableRef::new(t.family, t.name.clone())
    }
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
    raw: NonNull<sys::nftnl_batch>,
    first_seq: u32,
    next_seq: u32,
    pub(crate) msgs: Vec<MsgInfo>,
    tag: u32,
    next_set_id: u32,
    finalized: bool,
}

// SAFETY: the batch owns its buffers and is only used by one thread at a time (`&mut self`).
unsafe impl Send for Batch {}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

pub(crate) fn nlmsg_maxsize() -> u32 {
    nftnl::nft_nlmsg_maxsize()
}

impl Batch {
    /// An empty transaction.
    pub fn new() -> Batch {
        // SAFETY: sizes are valid; NULL (OOM) aborts.
        let raw =
            unsafe { sys::nftnl_batch_alloc(nftnl::default_batch_page_size(), nlmsg_maxsize()) };
        let raw = NonNull::new(raw).unwrap_or_else(|| std::process::abort());
        let mut b = Batch {
            raw,
            first_seq: 1,
            next_seq: 1,
            msgs: Vec::new(),
            tag: 0,
            next_set_id: 1,
            finalized: false,
        };
        b.write(TAG_BATCH, "batch begin".into(), |buf, seq| {
            // SAFETY: buf has room for one message.
            unsafe { sys::nftnl_batch_begin(buf, seq) };
        });
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

    /// Sequence numbers used so far (begin included).
    pub(crate) fn seq_range(&self) -> std::ops::Range<u32> {
        self.first_seq..self.next_seq
    }

    /// The message with sequence number `seq`.
    pub(crate) fn msg(&self, seq: u32) -> Option<&MsgInfo> {
        seq.checked_sub(self.first_seq)
            .and_then(|i| self.msgs.get(i as usize))
    }

    fn write(&mut self, tag: u32, what: String, f: impl FnOnce(*mut libc::c_char, u32)) {
        assert!(!self.finalized, "batch already finalized");
        // SAFETY: the batch buffer has room for nlmsg_maxsize bytes; update moves on to a new
        // page when needed and fails only on OOM.
        unsafe {
            let buf = sys::nftnl_batch_buffer(self.raw.as_ptr()).cast::<libc::c_char>();
            f(buf, self.next_seq);
            if sys::nftnl_batch_update(self.raw.as_ptr()) < 0 {
                std::process::abort();
            }
        }
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
        payload: impl FnOnce(*mut libc::nlmsghdr),
    ) {
        let tag = self.tag;
        self.write(tag, what, |buf, seq| {
            // SAFETY: buf has room for a full message.
            let nlh = unsafe {
                sys::nftnl_nlmsg_build_hdr(
                    buf,
                    msg_type as u16,
                    compile::family_code(family),
                    flags as u16,
                    seq,
                )
            };
            payload(nlh);
        });
    }

    /// Writes the batch end message; the batch can then only be sent.
    pub(crate) fn finalize(&mut self) {
        if !self.finalized {
            self.write(TAG_BATCH, "batch end".into(), |buf, seq| {
                // SAFETY: buf has room for one message.
                unsafe { sys::nftnl_batch_end(buf, seq) };
            });
            self.finalized = true;
        }
    }

    /// The buffers to send, in order (after [`Batch::finalize`]).
    pub(crate) fn iovecs(&self) -> Vec<libc::iovec> {
        // SAFETY: the batch is valid; the iovecs point into it and live as long as `self`.
        unsafe {
            let n = sys::nftnl_batch_iovec_len(self.raw.as_ptr());
            let mut v = vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                n as usize
            ];
            sys::nftnl_batch_iovec(self.raw.as_ptr(), v.as_mut_ptr(), n as u32);
            v
        }
    }

    // ------------------------------------------------------------------ tables

    /// `add table` (no error if it exists) or `delete table`.
    pub fn table(&mut self, t: &TableRef, op: Op) {
        let (msg, flags, verb) = match op {
            Op::Add => (libc::NFT_MSG_NEWTABLE, libc::NLM_F_CREATE, "add"),
            Op::Delete => (libc::NFT_MSG_DELTABLE, 0, "delete"),
        };
        let raw = compile::RawTable::new(t);
        self.message(
            format!("{verb} table {}", t.name),
            msg,
            t.family,
            flags,
            |nlh| raw.build(nlh),
        );
    }

    /// Replaces `table` atomically and completely: `add table; delete table; add table` plus
    /// every set (with elements), chain and rule. Works whether or not the table existed and
    /// touches no other table.
    pub fn replace_table(&mut self, table: &Table) -> Result<(), CompileError> {
        let t = TableRef::from(table);
        self.table(&t, Op::Add);
        self.table(&t, Op::Delete);
        self.add_table_contents(table)
    }

    /// `add table` plus every set, chain and rule of `table` (for a table that does not exist,
    /// or right after its deletion in the same batch).
    pub fn add_table_contents(&mut self, table: &Table) -> Result<(), CompileError> {
        let t = TableRef::from(table);
        self.table(&t, Op::Add);
        // Chains first: verdict map elements may jump to them.
        for chain in &table.chains {
            self.chain(&t, chain, Op::Add);
        }
        for set in &table.sets {
            self.add_set(&t, set)?;
        }
        for rule in &table.rules {
            self.add_rule(&t, rule)?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ chains

    /// `add chain` (with hook, type, priority, policy for base chains) or `delete chain`.
    pub fn chain(&mut self, t: &TableRef, chain: &Chain, op: Op) {
        let (msg, flags, verb) = match op {
            Op::Add => (libc::NFT_MSG_NEWCHAIN, libc::NLM_F_CREATE, "add"),
            Op::Delete => (libc::NFT_MSG_DELCHAIN, 0, "delete"),
        };
        let raw = compile::RawChain::new(t, chain, op == Op::Add);
        self.message(
            format!("{verb} chain {}", chain.name),
            msg,
            t.family,
            flags,
            |nlh| raw.build(nlh),
        );
    }

    /// `flush chain`: deletes every rule of the chain.
    pub fn flush_chain(&mut self, t: &TableRef, chain: &str) {
        let raw = RawRule::new(t, chain);
        self.message(
            format!("flush chain {chain}"),
            libc::NFT_MSG_DELRULE,
            t.family,
            0,
            |nlh| raw.build(nlh),
        );
    }

    // ------------------------------------------------------------------ rules

    /// Appends a rule to its chain (anonymous sets it uses are created just before it).
    pub fn add_rule(&mut self, t: &TableRef, rule: &Rule) -> Result<(), CompileError> {
        let mut raw = RawRule::new(t, &rule.chain);
        if let Some(c) = &rule.comment {
            raw.set_comment(c);
        }
        let mut anon = Vec::new();
        compile::compile_rule(
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
        for (id, set) in &anon {
            self.write_set(t, set, Some(*id), true)?;
        }
        let what = match &rule.comment {
            Some(c) => format!("add rule {} \"{c}\"", rule.chain),
            None => format!("add rule {}", rule.chain),
        };
        self.message(
            what,
            libc::NFT_MSG_NEWRULE,
            t.family,
            libc::NLM_F_CREATE | libc::NLM_F_APPEND,
            |nlh| raw.build(nlh),
        );
        Ok(())
    }

    /// `delete rule <chain> handle <handle>`.
    pub fn delete_rule(&mut self, t: &TableRef, chain: &str, handle: u64) {
        let mut raw = RawRule::new(t, chain);
        raw.set_handle(handle);
        self.message(
            format!("delete rule {chain} handle {handle}"),
            libc::NFT_MSG_DELRULE,
            t.family,
            0,
            |nlh| raw.build(nlh),
        );
    }

    // ------------------------------------------------------------------ sets

    /// `add set|map` with its elements.
    pub fn add_set(&mut self, t: &TableRef, set: &Set) -> Result<(), CompileError> {
        let id = self.next_set_id;
        self.next_set_id += 1;
        self.write_set(t, set, Some(id), false)
    }

    /// `delete set|map`.
    pub fn delete_set(&mut self, t: &TableRef, name: &str) {
        let raw = compile::RawSet::named(t, name, None);
        self.message(
            format!("delete set {name}"),
            libc::NFT_MSG_DELSET,
            t.family,
            0,
            |nlh| raw.build(nlh),
        );
    }

    fn write_set(
        &mut self,
        t: &TableRef,
        set: &Set,
        id: Option<u32>,
        anonymous: bool,
    ) -> Result<(), CompileError> {
        if set.interval && set.key.is_concat() {
            return Err(CompileError::Invalid(format!(
                "set {}: concatenated interval sets are not supported",
                set.name
            )));
        }
        let raw = compile::RawSet::definition(t, set, id, anonymous);
        let kind = if set.data.is_some() { "map" } else { "set" };
        self.message(
            format!("add {kind} {}", set.name),
            libc::NFT_MSG_NEWSET,
            t.family,
            libc::NLM_F_CREATE,
            |nlh| raw.build(nlh),
        );
        let name = if anonymous { "__set%d" } else { &set.name };
        self.elements_by(t, set, name, id, &set.elements, Op::Add)
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
        self.elements_by(t, set, &set.name, None, elements, op)
    }

    fn elements_by(
        &mut self,
        t: &TableRef,
        set: &Set,
        name: &str,
        id: Option<u32>,
        elements: &[Element],
        op: Op,
    ) -> Result<(), CompileError> {
        let mut raw_elems = Vec::with_capacity(elements.len());
        for e in elements {
            // The kernel deletes by key: data given with a delete is not sent.
            let data = match (&e.data, op) {
                (_, Op::Delete) | (None, _) => compile::ElemData::None,
                (Some(Value::Verdict(v)), _) => compile::ElemData::Verdict(v.clone()),
                (Some(v), _) => compile::ElemData::Bytes(encode(v)?),
            };
            if op == Op::Add && set.data.is_some() != !matches!(data, compile::ElemData::None) {
                return Err(CompileError::Invalid(format!(
                    "set {}: element data does not match the set's type",
                    set.name
                )));
            }
            for k in element_keys(&e.key, set.interval)? {
                if !k.interval_end && k.key.len() != set.key.byte_len() as usize {
                    return Err(CompileError::Invalid(format!(
                        "set {}: element key of {} bytes, the set's key has {}",
                        set.name,
                        k.key.len(),
                        set.key.byte_len()
                    )));
                }
                let d = if k.interval_end {
                    compile::ElemData::None
                } else {
                    data.clone()
                };
                raw_elems.push((k, d));
            }
        }
        let (msg, flags, verb) = match op {
            Op::Add => (libc::NFT_MSG_NEWSETELEM, libc::NLM_F_CREATE, "add"),
            Op::Delete => (libc::NFT_MSG_DELSETELEM, 0, "delete"),
        };
        for chunk in raw_elems.chunks(ELEMS_PER_MSG) {
            let raw = compile::RawSet::with_elements(t, name, id, chunk);
            self.message(
                format!("{verb} {} elements of set {}", chunk.len(), set.name),
                msg,
                t.family,
                flags,
                |nlh| raw.build_elements(nlh),
            );
        }
        Ok(())
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: we own the batch.
        unsafe { sys::nftnl_batch_free(self.raw.as_ptr()) };
    }
}

/// A C string from a Rust one (NULs removed).
pub(crate) fn cstr(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}
