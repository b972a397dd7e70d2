//! The policy controller: config, plan, the kernel program, and real packets through it.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod adopt;
mod cli;
mod config;
mod count_log;
mod denied_flows;
mod dynamic_sets;
mod fault;
mod flow_offload;
mod fw4_family;
mod fw4_family_packets;
mod fw4_includes;
mod fw4_nat_packets;
mod fw4_redirect_packets;
mod helpers_packets;
mod ipsets;
mod ipsets_net;
mod loadfile;
mod match_config;
mod match_packets;
mod match_plan;
mod nat_config;
mod nat_packets;
mod notrack;
mod packets;
mod plan;
mod reflection;
mod service;
mod sets_helpers_config;
mod synflood;
mod time_packets;
mod zone_packets;
