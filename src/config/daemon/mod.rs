//! `[daemon]` and `[controller.*]`: how the daemon itself runs.

mod model;
mod raw;
mod validate;

pub use model::*;
pub use validate::{validate_controllers, validate_daemon};
