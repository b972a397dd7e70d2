//! Pure translations: API objects in, edgenetd's config model out. Nothing here does I/O or
//! keeps state between calls, so every rule is a unit test on fixtures.

pub mod services;
