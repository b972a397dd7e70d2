//! `edgenetd explain`: offline answers, the service paths, and the kernel held to its predictions.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod differential;
mod include_differential;
mod lift;
mod nat;
mod nat_differential;
mod offline;
mod services;
