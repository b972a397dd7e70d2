//! Shared support for integration tests. Each test file does `mod common;`.
#![allow(dead_code)]

pub mod daemon;
pub mod netns;
