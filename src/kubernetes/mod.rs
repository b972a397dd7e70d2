//! The Kubernetes source (the `kubernetes` feature): a small list+watch client on smol, and
//! the pieces that turn cluster objects into edgenetd's model, merged with the TOML state
//! into one `DesiredState`.
//!
//! - [`client`]: HTTPS on smol + rustls (plain HTTP to a node-local proxy), paged lists, watches resumed by resourceVersion,
//!   relists on 410, back-off; the reflector keeps a store per kind.
//! - [`objects`]: lean serde structs of the API objects, only the fields edgenetd reads.
//! - [`translate`]: pure functions from cluster objects to the validated config types.
//! - [`compose`]: the one merge step (TOML + cluster -> one snapshot, published only when it
//!   changed; TOML wins a clash of meaning).
//! - [`order`]: the one stable sort the source's lists share (code size).
//! - [`pace`]: when to compose (after a quiet gap, at most a bound after the first change).
//! - [`cache`]: the last composed cluster state on disk, so a restart during an API outage
//!   keeps the cluster-derived rules (one on persistent storage, a reboot too).
//! - [`freshness`]: whether the state in force is this run's or the cache's, and as of when.
//! - [`reached`]: whether the API server answered a request opened after a given time (what a
//!   config from the cluster waits for to confirm itself).
//! - [`config_map`]: the fragments of `[kubernetes] config_map` this node takes, by key.
//! - [`kept_config`]: the file keeping the version last confirmed (read at a start without
//!   the API server and by `explain`).
//! - [`lease`]: status back to the cluster, a Lease per router renewed while every loop is
//!   live (`[kubernetes] status_namespace`).

pub mod cache;
pub mod client;
pub mod compose;
pub mod config_map;
pub mod freshness;
pub mod kept_config;
pub mod lease;
pub mod objects;
pub mod order;
pub mod pace;
pub mod reached;
pub mod translate;
pub mod watch;
