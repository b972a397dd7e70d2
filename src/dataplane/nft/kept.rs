//! Elements other programs put in a set with timeouts (fail2ban, CrowdSec, dnsmasq's nftset
//! add to edgenetd's dynamic sets), listed with what a rewrite needs to put them back as
//! they were: the key, the timeout, the expiry left ([`super::Batch::add_kept_elements`]).

use nftnl::nftnl_sys::libc;

use super::batch::{Batch, Op, Timing};
use super::build::objects::{self, ElemData};
use super::encode::RawKey;
use super::error::{CompileError, NftError};
use super::ffi::attr::elem;
use super::ffi::{self, NlMsg, Payload};
use super::ir::Set;
use super::read::dump::{ElemInfo, Listing};
use super::read::elements::{Elements, elem_info};
use super::socket::Nft;
use super::table_ref::TableRef;

/// One element as listed, with its timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptElem {
    /// Key, interval end marker (and data, unused: kept sets are plain sets).
    pub elem: ElemInfo,
    /// The element's timeout in milliseconds (0: it never expires).
    pub timeout_ms: u64,
    /// What is left of it, in milliseconds (`None`: it never expires).
    pub expires_ms: Option<u64>,
}

/// The elements of one set, with timing.
struct Timed<'a>(Elements<'a>);

impl Listing for Timed<'_> {
    type Item = KeptElem;
    const GET: i32 = libc::NFT_MSG_GETSETELEM;
    fn family(&self) -> u16 {
        self.0.family()
    }
    fn filter(&self) -> Result<Box<dyn Payload>, CompileError> {
        self.0.filter()
    }
    fn items(&self, msg: NlMsg<'_>, f: &mut dyn FnMut(KeptElem)) {
        if let Some(o) = ffi::Set::parse_elems(msg) {
            for e in o.view().elems() {
                let expires = e.u64(elem::EXPIRATION).filter(|x| *x > 0);
                f(KeptElem {
                    elem: elem_info(e),
                    // An element listed with an expiry but no timeout of its own took the
                    // set's default; 0 here would make it permanent, so the caller fills in
                    // the default (see `with_default_timeout`).
                    timeout_ms: e.u64(elem::TIMEOUT).unwrap_or(0),
                    expires_ms: expires,
                });
            }
        }
    }
}

impl KeptElem {
    /// This element with `default_ms` as its timeout when it expires without a timeout of
    /// its own (it took the set's default when it was added).
    pub fn with_default_timeout(mut self, default_ms: u64) -> KeptElem {
        if self.timeout_ms == 0 && self.expires_ms.is_some() {
            self.timeout_ms = default_ms;
        }
        self
    }
}

impl Batch {
    /// Adds elements as another program left them in a set with timeouts (`kept`, listed
    /// with [`Nft::list_kept_elements`]): same keys, same timeout, the expiry that was
    /// left. Plain sets only (no map data).
    pub fn add_kept_elements(
        &mut self,
        t: &TableRef,
        set: &Set,
        kept: &[KeptElem],
    ) -> Result<(), CompileError> {
        if set.data.is_some() || set.timeout.is_none() {
            return Err(CompileError::Invalid(format!(
                "set {}: only a plain set with timeouts keeps others' elements",
                set.name
            )));
        }
        let raw: Vec<(RawKey, ElemData)> = kept
            .iter()
            .map(|k| {
                // A kept element is of a plain set with timeouts: never a concatenated interval.
                let key = RawKey::plain(k.elem.key.clone(), k.elem.interval_end);
                (key, ElemData::None)
            })
            .collect();
        // What is left never exceeds the timeout (a set whose default was lowered since).
        let timing: Vec<Timing> = kept
            .iter()
            .map(|k| {
                let left = k.expires_ms.map(|x| match k.timeout_ms {
                    0 => x,
                    t => x.min(t),
                });
                (k.timeout_ms, left)
            })
            .collect();
        objects::set_named(t, &set.name, None)?;
        self.atomic(|b| b.write_elements(t, set, (&set.name, None), (&raw, Some(&timing)), Op::Add))
    }
}

impl Nft {
    /// Elements of `set` with their timing, sorted by key (empty when the set does not
    /// exist). The all-zero interval end `nft -f` adds in front of interval sets is left
    /// out, as in [`Nft::list_elements`].
    pub fn list_kept_elements(
        &mut self,
        t: &TableRef,
        set: &str,
    ) -> Result<Vec<KeptElem>, NftError> {
        let mut out = self.collect(&Timed(Elements { table: t, set }))?;
        out.retain(|e| !(e.elem.interval_end && e.elem.key.iter().all(|b| *b == 0)));
        out.sort_by(|a, b| a.elem.cmp(&b.elem));
        Ok(out)
    }
}
