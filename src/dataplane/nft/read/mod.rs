//! Kernel -> what edgenetd compares with its IR: the NFT_MSG_GET* dumps, parsed with
//! libnftnl. [`dump`] lists tables, chains, rules (with their fingerprint) and sets, and holds
//! the listing machinery the others use; `objects` lists stateful objects and flowtables;
//! `elements` streams the elements of one set.

pub mod dump;
pub(super) mod elements;
pub(super) mod objects;
