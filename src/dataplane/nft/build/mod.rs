//! IR -> libnftnl objects (through the `ffi` module), the step before [`super::batch`]
//! writes them as messages: [`objects`] makes tables, chains, flowtables, `ct helper`s, sets
//! with their definition, set elements and the empty shell of a rule; [`rule`] compiles a
//! rule's statements into the kernel expressions that fill it.

pub(super) mod objects;
pub(super) mod rule;
