//! Desired state from a Kubernetes cluster (the `kubernetes` feature): the API objects
//! edgenetd reads ([`objects`]) and their pure translation into the same model the TOML
//! files validate into ([`translate`]).
//!
//! The `[kubernetes]` section itself is parsed in `config::kubernetes` in every build; the
//! operator's view (its keys, what works so far) is in the README, "Fed by a cluster".

pub mod objects;
pub mod translate;
