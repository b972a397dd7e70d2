//! Pure translations: cluster objects in, edgenetd's validated model out. Nothing here does
//! I/O or keeps state between calls, so every rule is a unit test on fixtures.

pub mod health_ports;
pub mod network_policies;
pub mod nodes;
pub mod services;
pub mod sloppy;
