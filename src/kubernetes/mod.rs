//! The Kubernetes source (feature `kubernetes`): a small list+watch client on smol and the
//! pieces that turn cluster objects into edgenetd's desired state.

pub mod client;
