//! Element listing. Streaming first: each element of a set is handed to a callback as its
//! dump message is parsed, instead of collecting them all. The service controller checks 170k
//! elements at 10k services on every full compare; streaming keeps its peak memory at one
//! netlink message's worth instead of the whole set.

use nftnl::nftnl_sys::libc;

use super::dump::{ElemInfo, Listing, text};
use crate::dataplane::nft::build::objects::family_code;
use crate::dataplane::nft::error::{CompileError, NftError};
use crate::dataplane::nft::ffi::attr::{elem, set as set_attr};
use crate::dataplane::nft::ffi::{self, Elems, NlMsg, Payload, Ref, kind};
use crate::dataplane::nft::socket::Nft;
use crate::dataplane::nft::table_ref::TableRef;

/// The elements of one set.
pub(crate) struct Elements<'a> {
    /// Its table.
    pub(crate) table: &'a TableRef,
    /// Its name.
    pub(crate) set: &'a str,
}

impl Listing for Elements<'_> {
    type Item = ElemInfo;
    const GET: i32 = libc::NFT_MSG_GETSETELEM;
    fn family(&self) -> u16 {
        family_code(self.table.family)
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        // A set with table and name and no elements asks for its elements.
        let mut o = ffi::Set::new();
        o.set_str(set_attr::TABLE, &self.table.name)?
            .set_str(set_attr::NAME, self.set)?;
        Ok(Box::new(Elems(o)))
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(ElemInfo)) {
        if let Some(o) = ffi::Set::parse_elems(msg) {
            for e in o.view().elems() {
                f(elem_info(e));
            }
        }
    }
}

/// One element as listed: the bytes are copied out of libnftnl's element once, into the
/// value handed over.
pub(crate) fn elem_info(e: Ref<'_, kind::Elem>) -> ElemInfo {
    let flags = e.u32(elem::FLAGS).unwrap_or(0);
    let (data, chain) = match e.u32(elem::VERDICT) {
        Some(v) => (
            Some(v.to_ne_bytes().to_vec()),
            e.str(elem::CHAIN).map(|c| text(Some(c))),
        ),
        None => (e.data(elem::DATA).map(<[u8]>::to_vec), None),
    };
    ElemInfo {
        key: e.data(elem::KEY).map(<[u8]>::to_vec).unwrap_or_default(),
        interval_end: flags & libc::NFT_SET_ELEM_INTERVAL_END as u32 != 0,
        key_end: e.data(elem::KEY_END).map(<[u8]>::to_vec),
        data,
        chain,
    }
}

impl Nft {
    /// Hands `f` each element of `set` (in kernel order; nothing when the set does not
    /// exist). When a concurrent change interrupts the dump, `restart` is called and the
    /// elements come again from the start.
    pub fn for_each_element(
        &mut self,
        t: &TableRef,
        set: &str,
        f: &mut dyn FnMut(ElemInfo),
        restart: &mut dyn FnMut(),
    ) -> Result<(), NftError> {
        self.list(&Elements { table: t, set }, f, restart)
    }

    /// Elements of one set, sorted (empty when the set does not exist). The all-zero
    /// interval-end element that `nft -f` adds in front of interval sets is left out: it
    /// changes no lookup, and edgenetd never writes it.
    pub fn list_elements(&mut self, t: &TableRef, set: &str) -> Result<Vec<ElemInfo>, NftError> {
        let mut out = self.collect(&Elements { table: t, set })?;
        out.retain(|e| !(e.interval_end && e.key.iter().all(|b| *b == 0)));
        out.sort();
        Ok(out)
    }
}
