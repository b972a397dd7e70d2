//! Every call into libnftnl (and the nf_tables socket's libmnl) lives here, behind safe
//! types: the rest of the crate denies `unsafe`.
//!
//! - [`Obj`]: an owned libnftnl object (table, chain, rule, set, set element, expression),
//!   freed on drop; adding an expression to a rule or an element to a set consumes it.
//!   [`Ref`] borrows one for reading (`view.rs`); [`Udata`] builds user data.
//! - [`attr`]: typed attributes. A setter only takes the value shape libnftnl reads for its
//!   attribute, a string with a NUL inside is [`CompileError::NulInName`], data longer than
//!   the kernel's 64 bytes is refused, and every object tracks an upper bound of its encoded
//!   size so no message outgrows the buffer libnftnl writes it into (it does not check).
//! - `msg.rs`: received messages ([`NlMsg`], bounds-checked) and payloads; `batch_buf.rs`,
//!   `nf_socket.rs`: the batch and the socket.
//!
//! [`CompileError::NulInName`]: super::CompileError::NulInName
#![allow(unsafe_code)]

pub(crate) mod attr;
mod batch_buf;
mod msg;
mod nf_socket;
mod object;
mod udata;
mod view;

pub(crate) use batch_buf::BatchBuf;
pub(crate) use msg::{Elems, Empty, NlMsg, Payload, Request, fits};
pub(crate) use nf_socket::{NfSocket, aligned_copy, parse_gen};
pub(crate) use object::{Obj, kind, with_cstr};
#[cfg(test)]
pub(crate) use udata::TABLE_TAG_MAX;
pub(crate) use udata::{TABLE_TAG_TLV, Udata, encode_table_tag};
pub(crate) use view::Ref;

/// An owned table.
pub(crate) type Table = Obj<kind::Table>;
/// An owned chain.
pub(crate) type Chain = Obj<kind::Chain>;
/// An owned rule.
pub(crate) type Rule = Obj<kind::Rule>;
/// An owned set.
pub(crate) type Set = Obj<kind::Set>;
/// An owned flowtable.
pub(crate) type Flowtable = Obj<kind::Flowtable>;
/// An owned set element.
pub(crate) type Elem = Obj<kind::Elem>;
pub(crate) type Object = Obj<kind::Object>;
/// An owned expression of kind `K`.
pub(crate) type Expr<K> = Obj<K>;

#[cfg(test)]
mod tests;
