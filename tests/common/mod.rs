//! The one test harness: every integration test file does `mod common;` and finds here the
//! daemon handle, the HTTP client, the exact-series metric reader, the topology builder and
//! the waits on observable events.
#![allow(dead_code)]

pub mod bin;
pub mod controller;
pub mod daemon;
#[cfg(feature = "kubernetes")]
pub mod fake_apiserver;
pub mod http;
#[cfg(feature = "kubernetes")]
pub mod kube;
pub mod links;
#[cfg(feature = "kubernetes")]
pub mod local_proxy;
pub mod metrics;
pub mod netns;
pub mod policy;
pub mod routes;
pub mod scratch;
pub mod service_lab;
pub mod shell;
pub mod topology;
pub mod wait;
