//! The only code that speaks netlink. Knows nothing of TOML or Kubernetes.
pub mod conntrack;
pub mod nft;
pub mod route;
