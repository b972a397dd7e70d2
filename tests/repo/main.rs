//! The repository itself: the CLI and its man page, the layering, the docs' figures, the manifests, the dashboard and the harness.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod dashboard;
mod deploy_manifests;
mod docs_figures;
mod harness;
mod layering;
mod man_page;
mod metrics_table;
