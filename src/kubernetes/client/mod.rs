//! A small HTTPS/1.1 list+watch client for the Kubernetes API, on smol and rustls; plain
//! HTTP/1.1 to a node-local proxy on loopback (KubeEdge's MetaServer, OpenYurt's YurtHub).
//!
//! - [`endpoint`]: where the API server is and how to authenticate (CA file, bearer token
//!   re-read at each connect, or a client certificate for k3s); opens one connection, TLS
//!   or plain, as one stream type, so everything above it is written once.
//! - [`http`]: one request on one connection: the head parsed with `httparse`, bodies framed by
//!   Content-Length or chunked transfer encoding, every size bounded and every read bounded in
//!   time, so a broken or hung server can neither exhaust memory nor wedge the caller.
//! - [`json`]: objects read field by field straight out of the JSON text (no derived
//!   decoders, no value tree).
//! - [`labels`]: an object's kept labels, sorted pairs in one allocation.
//! - [`meta`]: the generic shapes: `metadata` (namespace, name, `resourceVersion`, labels),
//!   list pages, watch events and `Status`; the object structs embed and re-export them.
//! - [`reflector`]: client-go's reflector: paged list, then watch from the list's
//!   resourceVersion, resume after drops, relist on 410 Gone, back off on errors; keeps a
//!   [`Store`] and fires a [`crate::sync::Trigger`] when it changed.
//! - [`backoff`]: bounded exponential back-off with jitter, and `Retry-After`.
//! - [`tls`]: the TLS algorithms offered (TLS 1.3 with what API servers speak, and no more).

pub mod backoff;
pub mod endpoint;
pub mod error;
pub mod http;
pub mod json;
pub mod labels;
pub mod meta;
pub mod reflector;
pub mod store;
pub mod tls;

pub use endpoint::{Auth, Endpoint, Transport};
pub use error::Error;
pub use labels::Labels;
pub use meta::{HasMeta, ObjectMeta};
pub use reflector::{Reflector, ReflectorConfig};
pub use store::{Changes, ObjectKey, Store, WatchStatus};
