//! Desired state from a Kubernetes cluster (the `kubernetes` feature): the API objects
//! edgenetd reads ([`objects`]) and their pure translation into the same model the TOML
//! files validate into ([`translate`]).
//!
//! The design, the layering and what is still to come are in `docs/architecture.md`; the
//! operator's view (the `[kubernetes]` keys) is in the README.

pub mod objects;
pub mod translate;
