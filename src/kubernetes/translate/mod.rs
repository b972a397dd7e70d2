//! Pure translation: cluster objects in, edgenetd's validated model out. No I/O, no clock.

pub mod nodes;
