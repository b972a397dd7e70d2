//! A table's *tag*: a short string its writer keeps in the table's user data
//! (`NFTA_TABLE_USERDATA`, written by [`super::Batch::table_tagged`]), so a restarted writer
//! can tell whether the table already holds what it would write. Stored as a TLV of a type
//! nft does not know (nft lists only its own comment TLV, so the tag stays invisible in
//! `nft list ruleset`).

use nftnl::nftnl_sys::libc;

use super::build::objects::family_code;
use super::error::{CompileError, NftError};
use super::ffi::attr::table;
use super::ffi::{self, NlMsg, Payload, TABLE_TAG_TLV as TAG_TLV};
#[cfg(test)]
use super::ffi::{TABLE_TAG_MAX as TAG_MAX, encode_table_tag as encode};
use super::read::dump::{Listing, family_of, named};
use super::socket::Nft;
use super::table_ref::TableRef;

/// What the kernel holds about a table itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableState {
    /// `NFT_TABLE_F_*` flags (e.g. dormant).
    pub flags: u32,
    /// The tag its writer stored, if any.
    pub tag: Option<String>,
}

/// The tag in a table's user data: a TLV list of (type u8, len u8, value), read defensively
/// (the user data is whatever the table's writer put there).
pub fn decode(data: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 2 <= data.len() {
        let (ty, l) = (data[i], data[i + 1] as usize);
        let v = data.get(i + 2..i + 2 + l)?;
        if ty == TAG_TLV {
            let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
            return Some(String::from_utf8_lossy(&v[..end]).into_owned());
        }
        i += 2 + l;
    }
    None
}

/// One table, with its flags and user data.
struct Tables<'a>(&'a TableRef);

impl Listing for Tables<'_> {
    type Item = TableState;
    const GET: i32 = libc::NFT_MSG_GETTABLE;
    fn family(&self) -> u16 {
        family_code(self.0.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        Ok(Box::new(ffi::Empty))
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(TableState)) {
        let Some(o) = ffi::Table::parse(msg) else {
            return;
        };
        let v = o.view();
        let family = v.u32(table::FAMILY).and_then(family_of);
        if family != Some(self.0.family) || !named(v.str(table::NAME), &self.0.name) {
            return;
        }
        f(TableState {
            flags: v.u32(table::FLAGS).unwrap_or(0),
            tag: v.blob(table::USERDATA).and_then(decode),
        });
    }
}

impl Nft {
    /// The table's flags and tag (`None` when the table does not exist).
    pub fn table_state(&mut self, t: &TableRef) -> Result<Option<TableState>, NftError> {
        Ok(self.collect(&Tables(t))?.pop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_survives_encoding_and_other_tlvs_are_skipped() {
        let bytes = encode("policy 0123abcd").unwrap();
        assert_eq!(decode(&bytes).as_deref(), Some("policy 0123abcd"));
        let mut with_comment = vec![0, 3, b'h', b'i', 0];
        with_comment.extend_from_slice(&bytes);
        assert_eq!(decode(&with_comment).as_deref(), Some("policy 0123abcd"));
        assert_eq!(decode(&[0, 3, b'h', b'i', 0]), None, "a comment is no tag");
        assert_eq!(decode(&[TAG_TLV, 9, b'x']), None, "truncated TLV");
    }

    #[test]
    fn a_long_tag_is_cut_to_fit_one_tlv() {
        let long = "é".repeat(TAG_MAX);
        let tag = decode(&encode(&long).unwrap()).unwrap();
        assert!(
            tag.len() <= TAG_MAX && long.starts_with(&tag),
            "{}",
            tag.len()
        );
    }
}
