//! Listing a table's stateful objects (`ct helper`s) and flowtables. They take handles from
//! the same per-table counter as chains, sets and rules, so whoever reasons about a table's
//! handles (adoption after a restart) must see them too.

use nftnl::nftnl_sys::libc;

use super::dump::{Listing, table_filter};
use crate::dataplane::nft::build::objects::family_code;
use crate::dataplane::nft::error::{CompileError, NftError};
use crate::dataplane::nft::ffi::{NlMsg, Payload};
use crate::dataplane::nft::socket::Nft;
use crate::dataplane::nft::table_ref::TableRef;

/// `NFT_MSG_GETFLOWTABLE` (the libc crate does not name it).
const NFT_MSG_GETFLOWTABLE: i32 = 23;

/// A stateful object as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Name in the table.
    pub name: String,
    /// NFT_OBJECT_* type (3 = ct helper, 4 = limit).
    pub kind: u32,
    /// For a ct helper, the kernel helper it names (`ftp`); empty otherwise.
    pub helper: String,
    /// For a limit: its rate, unit (seconds) and burst, so an edited rate is drift.
    pub limit: Option<(u64, u64, u32)>,
    /// Kernel handle.
    pub handle: u64,
}

/// A flowtable as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowtableInfo {
    /// Name in the table.
    pub name: String,
    /// NFT_FLOWTABLE_* flags.
    pub flags: u32,
    /// Kernel handle.
    pub handle: u64,
}

/// The stateful objects of one table.
struct Objects<'a>(&'a TableRef);

impl Listing for Objects<'_> {
    type Item = ObjectInfo;
    const GET: i32 = libc::NFT_MSG_GETOBJ;
    fn family(&self) -> u16 {
        family_code(self.0.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        table_filter(self.0)
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(ObjectInfo)) {
        let mut table = None;
        let mut info = ObjectInfo {
            name: String::new(),
            kind: 0,
            helper: String::new(),
            limit: None,
            handle: 0,
        };
        for (ty, value) in attributes(msg.bytes().get(NFGEN_HDR_LEN..).unwrap_or_default()) {
            match ty {
                NFTA_OBJ_TABLE => table = Some(c_string(value)),
                NFTA_OBJ_NAME => info.name = c_string(value),
                NFTA_OBJ_TYPE => info.kind = value.try_into().map_or(0, u32::from_be_bytes),
                NFTA_OBJ_DATA if info.kind == NFT_OBJECT_CT_HELPER => {
                    let name = attributes(value).find(|(t, _)| *t == NFTA_CT_HELPER_NAME);
                    info.helper = name.map(|(_, v)| c_string(v)).unwrap_or_default();
                }
                NFTA_OBJ_DATA if info.kind == NFT_OBJECT_LIMIT => {
                    let mut l = (0, 0, 0);
                    for (t, v) in attributes(value) {
                        match t {
                            NFTA_LIMIT_RATE => l.0 = v.try_into().map_or(0, u64::from_be_bytes),
                            NFTA_LIMIT_UNIT => l.1 = v.try_into().map_or(0, u64::from_be_bytes),
                            NFTA_LIMIT_BURST => l.2 = v.try_into().map_or(0, u32::from_be_bytes),
                            _ => {}
                        }
                    }
                    info.limit = Some(l);
                }
                NFTA_OBJ_HANDLE => info.handle = value.try_into().map_or(0, u64::from_be_bytes),
                _ => {}
            }
        }
        if table.as_deref() == Some(self.0.name.as_str()) {
            f(info);
        }
    }
}

/// The flowtables of one table.
struct Flowtables<'a>(&'a TableRef);

impl Listing for Flowtables<'_> {
    type Item = FlowtableInfo;
    const GET: i32 = NFT_MSG_GETFLOWTABLE;
    fn family(&self) -> u16 {
        family_code(self.0.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        table_filter(self.0)
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(FlowtableInfo)) {
        let mut table = None;
        let mut info = FlowtableInfo {
            name: String::new(),
            flags: 0,
            handle: 0,
        };
        for (ty, value) in attributes(msg.bytes().get(NFGEN_HDR_LEN..).unwrap_or_default()) {
            match ty {
                NFTA_FLOWTABLE_TABLE => table = Some(c_string(value)),
                NFTA_FLOWTABLE_NAME => info.name = c_string(value),
                NFTA_FLOWTABLE_HANDLE => {
                    info.handle = value.try_into().map_or(0, u64::from_be_bytes);
                }
                NFTA_FLOWTABLE_FLAGS => info.flags = value.try_into().map_or(0, u32::from_be_bytes),
                _ => {}
            }
        }
        if table.as_deref() == Some(self.0.name.as_str()) {
            f(info);
        }
    }
}

// Both replies are read without libnftnl: the libnftnl 1.2 of Debian 12 exports no
// flowtable getter with a length, and its object getter gives none for the table and name
// (the typed views need one). They are a handful of flat attributes.

/// `nlmsghdr` and `nfgenmsg`: where a reply's attributes start.
const NFGEN_HDR_LEN: usize = 20;
/// `NFTA_OBJ_*` attribute types.
const NFTA_OBJ_TABLE: u16 = 1;
const NFTA_OBJ_NAME: u16 = 2;
const NFTA_OBJ_TYPE: u16 = 3;
const NFTA_OBJ_DATA: u16 = 4;
const NFTA_OBJ_HANDLE: u16 = 6;
/// `NFT_OBJECT_CT_HELPER`, and its `NFTA_CT_HELPER_NAME` inside `NFTA_OBJ_DATA`.
const NFT_OBJECT_CT_HELPER: u32 = 3;
const NFTA_CT_HELPER_NAME: u16 = 1;
/// `NFT_OBJECT_LIMIT`, and its `NFTA_LIMIT_*` inside `NFTA_OBJ_DATA`.
const NFT_OBJECT_LIMIT: u32 = 4;
const NFTA_LIMIT_RATE: u16 = 1;
const NFTA_LIMIT_UNIT: u16 = 2;
const NFTA_LIMIT_BURST: u16 = 3;
/// `NFTA_FLOWTABLE_*` attribute types.
const NFTA_FLOWTABLE_TABLE: u16 = 1;
const NFTA_FLOWTABLE_NAME: u16 = 2;
const NFTA_FLOWTABLE_HANDLE: u16 = 5;
const NFTA_FLOWTABLE_FLAGS: u16 = 7;

/// The (type, value) of each top-level netlink attribute in `bytes`; stops at the first
/// malformed one.
fn attributes(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes(bytes.get(0..2)?.try_into().ok()?));
        let ty = u16::from_ne_bytes(bytes.get(2..4)?.try_into().ok()?) & 0x3fff;
        let value = bytes.get(4..len)?;
        bytes = bytes.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((ty, value))
    })
}

/// A NUL-terminated string attribute's text.
fn c_string(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

impl Nft {
    /// Stateful objects (`ct helper`s) of a table (empty when the table does not exist).
    pub fn list_objects(&mut self, t: &TableRef) -> Result<Vec<ObjectInfo>, NftError> {
        self.collect(&Objects(t))
    }

    /// Flowtables of a table (empty when the table does not exist, and on a kernel that
    /// has none).
    pub fn list_flowtables(&mut self, t: &TableRef) -> Result<Vec<FlowtableInfo>, NftError> {
        self.collect(&Flowtables(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::nft::ir::Family;

    /// Every item `listing` reads from the message at the start of `bytes`.
    fn items<L: Listing>(listing: &L, bytes: &[u8]) -> Vec<L::Item> {
        let msg = NlMsg::first(bytes).expect("a whole, aligned message");
        let mut out = Vec::new();
        listing.items(msg, &mut |i| out.push(i));
        out
    }

    fn table(name: &str) -> TableRef {
        TableRef {
            family: Family::Inet,
            name: name.into(),
        }
    }

    /// Netlink messages are read in place from 4-byte aligned buffers.
    #[repr(align(4))]
    struct Aligned<const N: usize>([u8; N]);

    /// A 6.1 kernel's answer to an object dump: `ct helper "helper-ftp"` (ftp, tcp) of
    /// `inet edgenetd-policy`, handle 9.
    static CT_HELPER: Aligned<112> = Aligned([
        112, 0, 0, 0, 18, 10, 2, 8, 10, 0, 0, 128, 110, 38, 78, 182, 1, 0, 0, 2, 20, 0, 1, 0, 101,
        100, 103, 101, 110, 101, 116, 100, 45, 112, 111, 108, 105, 99, 121, 0, 15, 0, 2, 0, 104,
        101, 108, 112, 101, 114, 45, 102, 116, 112, 0, 0, 8, 0, 3, 0, 0, 0, 0, 3, 12, 0, 6, 0, 0,
        0, 0, 0, 0, 0, 0, 9, 8, 0, 5, 0, 0, 0, 0, 1, 28, 0, 4, 0, 8, 0, 1, 0, 102, 116, 112, 0, 5,
        0, 3, 0, 6, 0, 0, 0, 6, 0, 2, 0, 0, 1, 0, 0,
    ]);

    #[test]
    fn a_kernels_ct_helper_object_is_read_with_its_handle() {
        let t = table("edgenetd-policy");
        let got = items(&Objects(&t), &CT_HELPER.0);
        assert_eq!(
            got,
            [ObjectInfo {
                name: "helper-ftp".into(),
                kind: NFT_OBJECT_CT_HELPER,
                helper: "ftp".into(),
                limit: None,
                handle: 9,
            }]
        );
        assert!(items(&Objects(&table("other")), &CT_HELPER.0).is_empty());
    }

    /// A flowtable message as the kernel shapes it (table, name, hook, use, handle, flags).
    fn flowtable_message() -> Vec<u8> {
        let attr = |ty: u16, value: &[u8]| {
            let mut a = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
            a.extend(ty.to_ne_bytes());
            a.extend(value);
            a.resize(a.len().next_multiple_of(4), 0);
            a
        };
        let mut body = vec![1, 0, 0, 0];
        body.extend(attr(NFTA_FLOWTABLE_TABLE, b"t\0"));
        body.extend(attr(NFTA_FLOWTABLE_NAME, b"ft\0"));
        body.extend(attr(3 | 0x8000, &attr(2, &0i32.to_be_bytes())));
        body.extend(attr(4, &1u32.to_be_bytes()));
        body.extend(attr(NFTA_FLOWTABLE_HANDLE, &12u64.to_be_bytes()));
        body.extend(attr(NFTA_FLOWTABLE_FLAGS, &1u32.to_be_bytes()));
        let mut msg = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        msg.extend([0; 12]);
        msg.extend(body);
        msg
    }

    #[test]
    fn a_flowtable_is_read_with_its_handle_and_a_cut_message_reads_no_garbage() {
        let bytes = flowtable_message();
        let got = items(&Flowtables(&table("t")), &bytes);
        let want = FlowtableInfo {
            name: "ft".into(),
            flags: 1,
            handle: 12,
        };
        assert_eq!(got, [want]);
        for cut in 0..bytes.len() {
            let mut short = bytes[..cut].to_vec();
            if short.len() >= 4 {
                short[0..4].copy_from_slice(&(cut as u32).to_ne_bytes());
            }
            let Some(msg) = NlMsg::first(&short) else {
                continue;
            };
            let mut n = 0;
            Flowtables(&table("t")).items(msg, &mut |_| n += 1);
            assert!(n <= 1, "{cut}");
        }
    }
}
