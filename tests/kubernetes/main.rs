//! The Kubernetes source (feature `kubernetes`): the client against the fake API server, the daemon fed by it, health-check node ports, NetworkPolicies and ClusterNetworkPolicies with real packets.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod client;
mod cluster_config;
mod cluster_network_policies;
mod daemon;
mod explain_pods;
mod fleets;
mod health_ports;
mod lease;
mod pod_guard;
mod pod_policy_packets;
