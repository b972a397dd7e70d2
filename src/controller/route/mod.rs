//! The route controller: owned routes and routing rules (see `plan` for the planning rules).

pub mod plan;
