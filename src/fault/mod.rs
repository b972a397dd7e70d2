//! Test hooks of the `fault-injection` build; the module is not compiled otherwise, so no
//! release type, config model or persisted format carries them.
//!
//! Two layers, each child its own node in `tests/repo/layering.rs`:
//! - side tables the production code consults, below everything (they use nothing of the
//!   crate): [`kernel_reject`], the rule groups the policy program builder makes the kernel
//!   refuse, filled by the config parser (the rule key `inject_kernel_reject`) or by tests
//!   directly (pod isolation units); [`hang`], the `[[track]]` probers that wedge (the track
//!   key `inject_hang`); [`lease`], the Lease's renewal period shortened (the `[kubernetes]`
//!   key `inject_status_renew_ms`); [`by_name`], the hooks ordinary config triggers by a reserved name
//!   prefix (a service whose elements the kernel refuses, a hanging backend check);
//! - [`test_controller`], the `[[test_controller]]` section and its controller, above config
//!   and the controllers (it uses them; the daemon's registry starts it).
//!
//! Code outside this module reaches it through [`fault_hook!`](crate::fault_hook), which
//! compiles to its fallback in other builds, so a hook is one named call, not a pair of
//! `cfg` attributes.

pub mod by_name;
pub mod hang;
pub mod kernel_reject;
pub mod lease;
pub mod test_controller;
