//! The Kubernetes source (feature `kubernetes`): the client against the fake API server, the daemon fed by it, health-check node ports, NetworkPolicies with real packets.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod client;
mod cluster_config;
mod daemon;
mod fleets;
mod health_ports;
mod pod_policy_packets;
