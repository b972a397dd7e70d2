//! Listing what the kernel holds (NFT_MSG_GET* dumps parsed with libnftnl): tables, chains,
//! rules, sets and set elements, for drift detection and `plan` diffs.
//!
//! Rules are returned with a *fingerprint*: the kernel expressions in libnftnl's debug
//! notation with counter values removed, so two dumps of an untouched rule compare equal and
//! any edit (even one keeping the comment) shows.

use std::ffi::CStr;
use std::os::raw::c_char;

use nftnl::nftnl_sys::{self as sys, libc};

use super::batch::{TableRef, cstr};
use super::compile::family_code;
use super::error::NftError;
use super::ir::Family;
use super::socket::Nft;

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
}

/// One kernel element.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElemInfo {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Interval end marker.
    pub interval_end: bool,
    /// Data bytes for maps, or for verdict maps the verdict code (as 4 bytes) plus the chain.
    pub data: Option<Vec<u8>>,
    /// Chain of a jump/goto verdict.
    pub chain: Option<String>,
}

fn table_filter(t: &TableRef) -> impl Fn(*mut libc::nlmsghdr) + '_ {
    move |nlh| {
        // SAFETY: a table object carrying only the name filters the dump.
        unsafe {
            let o = sys::nftnl_table_alloc();
            let name = cstr(&t.name);
            sys::nftnl_table_set_str(o, sys::NFTNL_TABLE_NAME as u16, name.as_ptr());
            sys::nftnl_table_nlmsg_build_payload(nlh, o);
            sys::nftnl_table_free(o);
        }
    }
}

unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libnftnl returns NUL-terminated strings it owns.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn family_of(code: u32) -> Option<Family> {
    match code as i32 {
        libc::NFPROTO_INET => Some(Family::Inet),
        libc::NFPROTO_IPV4 => Some(Family::Ip),
        libc::NFPROTO_IPV6 => Some(Family::Ip6),
        _ => None,
    }
}

pub(super) fn is_enoent(e: &NftError) -> bool {
    matches!(e, NftError::Io(io) if io.raw_os_error() == Some(libc::ENOENT))
}

impl Nft {
    /// Every table of every family.
    pub fn list_tables(&mut self) -> Result<Vec<TableInfo>, NftError> {
        let mut out = Vec::new();
        let out_ref = std::cell::RefCell::new(&mut out);
        self.dump(
            libc::NFT_MSG_GETTABLE,
            libc::AF_UNSPEC as u16,
            &|_| {},
            &mut |nlh| {
                // SAFETY: nlh is a complete NEWTABLE message.
                unsafe {
                    let o = sys::nftnl_table_alloc();
                    if sys::nftnl_table_nlmsg_parse(nlh, o) >= 0 {
                        out_ref.borrow_mut().push(TableInfo {
                            family: family_of(sys::nftnl_table_get_u32(
                                o,
                                sys::NFTNL_TABLE_FAMILY as u16,
                            )),
                            name: string(sys::nftnl_table_get_str(o, sys::NFTNL_TABLE_NAME as u16)),
                        });
                    }
                    sys::nftnl_table_free(o);
                }
                Ok(())
            },
            &mut || out_ref.borrow_mut().clear(),
        )?;
        Ok(out)
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
        let mut out = Vec::new();
        let cell = std::cell::RefCell::new(&mut out);
        let r = self.dump(
            libc::NFT_MSG_GETCHAIN,
            family_code(t.family),
            &table_filter(t),
            &mut |nlh| {
                // SAFETY: nlh is a complete NEWCHAIN message.
                unsafe {
                    let o = sys::nftnl_chain_alloc();
                    if sys::nftnl_chain_nlmsg_parse(nlh, o) >= 0
                        && string(sys::nftnl_chain_get_str(o, sys::NFTNL_CHAIN_TABLE as u16))
                            == t.name
                    {
                        let base = sys::nftnl_chain_is_set(o, sys::NFTNL_CHAIN_HOOKNUM as u16)
                            .then(|| {
                                (
                                    sys::nftnl_chain_get_u32(o, sys::NFTNL_CHAIN_HOOKNUM as u16),
                                    string(sys::nftnl_chain_get_str(
                                        o,
                                        sys::NFTNL_CHAIN_TYPE as u16,
                                    )),
                                    sys::nftnl_chain_get_s32(o, sys::NFTNL_CHAIN_PRIO as u16),
                                    sys::nftnl_chain_get_u32(o, sys::NFTNL_CHAIN_POLICY as u16),
                                )
                            });
                        cell.borrow_mut().push(ChainInfo {
                            name: string(sys::nftnl_chain_get_str(o, sys::NFTNL_CHAIN_NAME as u16)),
                            base,
                        });
                    }
                    sys::nftnl_chain_free(o);
                }
                Ok(())
            },
            &mut || cell.borrow_mut().clear(),
        );
        match r {
            Err(e) if is_enoent(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
            Ok(()) => Ok(out),
        }
    }

    /// Rules of a table in chain order (empty when the table does not exist).
    pub fn list_rules(&mut self, t: &TableRef) -> Result<Vec<RuleInfo>, NftError> {
        let mut out = Vec::new();
        let cell = std::cell::RefCell::new(&mut out);
        let filter = |nlh: *mut libc::nlmsghdr| {
            // SAFETY: a rule object carrying only the table filters the dump.
            unsafe {
                let o = sys::nftnl_rule_alloc();
                let name = cstr(&t.name);
                sys::nftnl_rule_set_str(o, sys::NFTNL_RULE_TABLE as u16, name.as_ptr());
                sys::nftnl_rule_nlmsg_build_payload(nlh, o);
                sys::nftnl_rule_free(o);
            }
        };
        let r = self.dump(
            libc::NFT_MSG_GETRULE,
            family_code(t.family),
            &filter,
            &mut |nlh| {
                // SAFETY: nlh is a complete NEWRULE message.
                unsafe {
                    let o = sys::nftnl_rule_alloc();
                    if sys::nftnl_rule_nlmsg_parse(nlh, o) >= 0
                        && string(sys::nftnl_rule_get_str(o, sys::NFTNL_RULE_TABLE as u16))
                            == t.name
                    {
                        cell.borrow_mut().push(RuleInfo {
                            chain: string(sys::nftnl_rule_get_str(o, sys::NFTNL_RULE_CHAIN as u16)),
                            handle: sys::nftnl_rule_get_u64(o, sys::NFTNL_RULE_HANDLE as u16),
                            comment: rule_comment(o),
                            fingerprint: rule_fingerprint(o),
                        });
                    }
                    sys::nftnl_rule_free(o);
                }
                Ok(())
            },
            &mut || cell.borrow_mut().clear(),
        );
        match r {
            Err(e) if is_enoent(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
            Ok(()) => Ok(out),
        }
    }

    /// Sets and maps of a table, anonymous ones included (empty when the table does not
    /// exist).
    pub fn list_sets(&mut self, t: &TableRef) -> Result<Vec<SetInfo>, NftError> {
        let mut out = Vec::new();
        let cell = std::cell::RefCell::new(&mut out);
        let filter = |nlh: *mut libc::nlmsghdr| {
            // SAFETY: a set object carrying only the table filters the dump.
            unsafe {
                let o = sys::nftnl_set_alloc();
                let name = cstr(&t.name);
                sys::nftnl_set_set_str(o, sys::NFTNL_SET_TABLE as u16, name.as_ptr());
                sys::nftnl_set_nlmsg_build_payload(nlh, o);
                sys::nftnl_set_free(o);
            }
        };
        let r = self.dump(
            libc::NFT_MSG_GETSET,
            family_code(t.family),
            &filter,
            &mut |nlh| {
                // SAFETY: nlh is a complete NEWSET message.
                unsafe {
                    let o = sys::nftnl_set_alloc();
                    if sys::nftnl_set_nlmsg_parse(nlh, o) >= 0
                        && string(sys::nftnl_set_get_str(o, sys::NFTNL_SET_TABLE as u16)) == t.name
                    {
                        let get = |a: u32| sys::nftnl_set_get_u32(o, a as u16);
                        let data = sys::nftnl_set_is_set(o, sys::NFTNL_SET_DATA_TYPE as u16)
                            .then(|| (get(sys::NFTNL_SET_DATA_TYPE), get(sys::NFTNL_SET_DATA_LEN)));
                        cell.borrow_mut().push(SetInfo {
                            name: string(sys::nftnl_set_get_str(o, sys::NFTNL_SET_NAME as u16)),
                            flags: get(sys::NFTNL_SET_FLAGS),
                            key: (get(sys::NFTNL_SET_KEY_TYPE), get(sys::NFTNL_SET_KEY_LEN)),
                            data,
                        });
                    }
                    sys::nftnl_set_free(o);
                }
                Ok(())
            },
            &mut || cell.borrow_mut().clear(),
        );
        match r {
            Err(e) if is_enoent(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
            Ok(()) => Ok(out),
        }
    }

    /// Elements of one set, sorted (empty when the set does not exist). The all-zero
    /// interval-end element that `nft -f` adds in front of interval sets is left out: it
    /// changes no lookup, and edgenetd never writes it.
    pub fn list_elements(&mut self, t: &TableRef, set: &str) -> Result<Vec<ElemInfo>, NftError> {
        let out = std::cell::RefCell::new(Vec::new());
        self.for_each_element(t, set, &mut |e| out.borrow_mut().push(e), &mut || {
            out.borrow_mut().clear()
        })?;
        let mut out = out.into_inner();
        out.retain(|e| !(e.interval_end && e.key.iter().all(|b| *b == 0)));
        out.sort();
        Ok(out)
    }
}

pub(super) unsafe fn elem_info(e: *mut sys::nftnl_set_elem) -> ElemInfo {
    // SAFETY: e is a valid element owned by its set.
    unsafe {
        let bytes = |attr: u32| -> Option<Vec<u8>> {
            if !sys::nftnl_set_elem_is_set(e, attr as u16) {
                return None;
            }
            let mut len = 0u32;
            let p = sys::nftnl_set_elem_get(e, attr as u16, &mut len);
            (!p.is_null())
                .then(|| std::slice::from_raw_parts(p.cast::<u8>(), len as usize).to_vec())
        };
        let flags = if sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_FLAGS as u16) {
            sys::nftnl_set_elem_get_u32(e, sys::NFTNL_SET_ELEM_FLAGS as u16)
        } else {
            0
        };
        let (data, chain) = if sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_VERDICT as u16) {
            let v = sys::nftnl_set_elem_get_u32(e, sys::NFTNL_SET_ELEM_VERDICT as u16);
            let chain =
                sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_CHAIN as u16).then(|| {
                    string(sys::nftnl_set_elem_get_str(
                        e,
                        sys::NFTNL_SET_ELEM_CHAIN as u16,
                    ))
                });
            (Some(v.to_ne_bytes().to_vec()), chain)
        } else {
            (bytes(sys::NFTNL_SET_ELEM_DATA), None)
        };
        ElemInfo {
            key: bytes(sys::NFTNL_SET_ELEM_KEY).unwrap_or_default(),
            interval_end: flags & libc::NFT_SET_ELEM_INTERVAL_END as u32 != 0,
            data,
            chain,
        }
    }
}

unsafe fn rule_comment(r: *mut sys::nftnl_rule) -> Option<String> {
    // SAFETY: r is valid; user data is a TLV list of (type u8, len u8, value).
    unsafe {
        if !sys::nftnl_rule_is_set(r, sys::NFTNL_RULE_USERDATA as u16) {
            return None;
        }
        let mut len = 0u32;
        let p = sys::nftnl_rule_get_data(r, sys::NFTNL_RULE_USERDATA as u16, &mut len);
        if p.is_null() {
            return None;
        }
        let data = std::slice::from_raw_parts(p.cast::<u8>(), len as usize);
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
}

unsafe fn rule_fingerprint(r: *mut sys::nftnl_rule) -> String {
    let mut out = String::new();
    // SAFETY: r is valid; the iterator and the print buffer are ours.
    unsafe {
        let it = sys::nftnl_expr_iter_create(r);
        if it.is_null() {
            return out;
        }
        let mut buf = vec![0 as c_char; 1024];
        let mut e = sys::nftnl_expr_iter_next(it);
        while !e.is_null() {
            let name = string(sys::nftnl_expr_get_str(e, sys::NFTNL_EXPR_NAME as u16));
            if name == "counter" {
                out.push_str("[counter]");
            } else {
                let n = sys::nftnl_expr_snprintf(buf.as_mut_ptr(), buf.len(), e, 0, 0);
                let text = if n >= 0 {
                    string(buf.as_ptr())
                } else {
                    String::new()
                };
                out.push('[');
                out.push_str(&name);
                out.push(' ');
                out.push_str(text.trim());
                out.push(']');
            }
            e = sys::nftnl_expr_iter_next(it);
        }
        sys::nftnl_expr_iter_destroy(it);
    }
    out
}
