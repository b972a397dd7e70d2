//! The only code that speaks netlink. Knows nothing of TOML or Kubernetes.
pub mod nft;
pub mod route;
