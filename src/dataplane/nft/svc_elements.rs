//! Streaming element listing: each element of a set is handed to a callback as its dump
//! message is parsed, instead of collecting them all. The service controller checks 170k
//! elements at 10k services on every full compare; streaming keeps its peak memory at one
//! netlink message's worth instead of the whole set.

use nftnl::nftnl_sys::{self as sys, libc};

use super::batch::{TableRef, cstr};
use super::compile::family_code;
use super::dump::{ElemInfo, elem_info, is_enoent};
use super::error::NftError;
use super::socket::Nft;

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
        let filter = |nlh: *mut libc::nlmsghdr| {
            // SAFETY: a set object with table and name and no elements asks for its elements.
            unsafe {
                let o = sys::nftnl_set_alloc();
                let tname = cstr(&t.name);
                let sname = cstr(set);
                sys::nftnl_set_set_str(o, sys::NFTNL_SET_TABLE as u16, tname.as_ptr());
                sys::nftnl_set_set_str(o, sys::NFTNL_SET_NAME as u16, sname.as_ptr());
                sys::nftnl_set_elems_nlmsg_build_payload(nlh, o);
                sys::nftnl_set_free(o);
            }
        };
        let r = self.dump(
            libc::NFT_MSG_GETSETELEM,
            family_code(t.family),
            &filter,
            &mut |nlh| {
                // SAFETY: nlh is a complete NEWSETELEM message; elements are read through the
                // set's iterator and freed with the set.
                unsafe {
                    let o = sys::nftnl_set_alloc();
                    if sys::nftnl_set_elems_nlmsg_parse(nlh, o) >= 0 {
                        let it = sys::nftnl_set_elems_iter_create(o);
                        if !it.is_null() {
                            let mut e = sys::nftnl_set_elems_iter_next(it);
                            while !e.is_null() {
                                f(elem_info(e));
                                e = sys::nftnl_set_elems_iter_next(it);
                            }
                            sys::nftnl_set_elems_iter_destroy(it);
                        }
                    }
                    sys::nftnl_set_free(o);
                }
                Ok(())
            },
            restart,
        );
        match r {
            Err(e) if is_enoent(&e) => Ok(()),
            other => other,
        }
    }
}
