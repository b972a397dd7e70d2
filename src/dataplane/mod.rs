//! The only code that speaks netlink. Knows nothing of TOML or Kubernetes.
pub mod conntrack;
mod netlink_send;
pub mod nflog;
pub mod nft;
pub mod route;
