//! Configuration: raw TOML -> validated, immutable [`DesiredState`].

/// The validated desired state (placeholder until the config module lands).
#[derive(Debug, Clone, Default)]
pub struct DesiredState {}
