//! The Kubernetes source (the `kubernetes` feature): cluster objects -> edgenetd's model,
//! merged with the TOML state into one `DesiredState`.
//!
//! - [`translate`]: pure functions from cluster objects to the validated config types.
//! - [`compose`]: the one merge step (TOML + cluster -> one snapshot, published only when it
//!   changed; TOML wins a clash of meaning).
//! - [`pace`]: when to compose (after a quiet gap, at most a bound after the first change).
//! - [`cache`]: the last composed cluster state on disk, so a restart during an API outage
//!   keeps the cluster-derived rules.

pub mod cache;
pub mod compose;
pub mod pace;
pub mod translate;
