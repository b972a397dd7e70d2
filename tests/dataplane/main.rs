//! The nftables dataplane: batches against the kernel, and `plan`'s text loaded with `nft -f`.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod nft;
mod plan_nft;
