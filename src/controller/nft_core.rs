//! What the two nftables controllers (policy and service) share: the tables edgenetd owns,
//! the nftables socket that records this process's commits, and the foreign-commit check
//! that decides whether a sync may trust its cache.
//!
//! Every commit to nftables, by anyone, moves the ruleset generation. Only a commit by
//! another process can change a table this process owns behind its back; the policy and
//! service controllers' own commits are recorded in the one [`GenerationWatch`] the daemon
//! hands to both, so neither takes the other's write for drift. A foreign commit is noticed
//! twice: by the watch thread, which wakes the controller at once ([`NftCore::new`]), and by
//! every sync, which reads the generation itself ([`NftSession::check`]), so a watch that
//! could not start costs only the early wake-up.

use std::time::{Duration, Instant};

use crate::config::DaemonSettings;
use crate::controller::cache::{Decision, Invalidation, KernelCache};
use crate::dataplane::nft::ir::Family;
use crate::dataplane::nft::{Batch, Commit, GenerationWatch, Nft, NftError, TableRef};
use crate::sync::Trigger;

/// How often the process reads the ruleset generation to notice other processes' commits.
///
/// One interval for both controllers: the watch polls once for the process at the shortest
/// interval any subscriber asks for, so when the policy controller asked for 500 ms and the
/// service controller for 1 s, the daemon polled every 500 ms anyway (every second only with
/// the policy controller disabled). Half a second bounds
/// how long a table deleted by hand stays missing, for one tiny netlink round trip, twice a
/// second.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// The nftables tables edgenetd owns, one per nftables controller (and nothing else).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnedTable {
    /// `inet <prefix>-policy`, the policy controller's.
    Policy,
    /// `inet <prefix>-service`, the service controller's.
    Service,
}

impl OwnedTable {
    /// The controller that owns the table ("policy", "service"), for logs.
    pub fn controller(self) -> &'static str {
        match self {
            OwnedTable::Policy => "policy",
            OwnedTable::Service => "service",
        }
    }

    /// The table under `settings`' prefix. Family `inet`: one table holds the IPv4 and the
    /// IPv6 rules, so a dual-stack rule is written once.
    pub fn of(self, settings: &DaemonSettings) -> TableRef {
        let name = match self {
            OwnedTable::Policy => settings.policy_table(),
            OwnedTable::Service => settings.service_table(),
        };
        TableRef::new(Family::Inet, name)
    }
}

/// A controller's link to the foreign-commit watch: made once, in the constructor; opens the
/// socket of each sync (see [`NftSession`]).
pub struct NftCore {
    /// This process's nftables commits, shared with the other nftables controller.
    watch: GenerationWatch,
    /// Set by the watch on a foreign commit; every cache of [`NftCore::cache`] shares it.
    invalidation: Invalidation,
}

impl NftCore {
    /// Subscribes `owner`'s controller to `watch`: every commit to nftables by another
    /// process, noticed within [`WATCH_INTERVAL`], invalidates the controller's cache and
    /// fires `trigger`, so drift is repaired at once rather than at the next period. Call it
    /// on the thread (network namespace) the controller programs: the watch's socket opens
    /// there. Without a watch (its thread could not start), a warning says drift is found at
    /// each period instead.
    pub fn new(owner: OwnedTable, watch: GenerationWatch, trigger: Trigger) -> NftCore {
        let invalidation = Invalidation::default();
        let flag = invalidation.clone();
        let on_foreign = move || {
            flag.invalidate();
            trigger.fire();
        };
        if let Err(e) = watch.subscribe(WATCH_INTERVAL, on_foreign) {
            log::warn!(
                "{}: no nftables commit watch ({e}); drift is found at each period",
                owner.controller()
            );
        }
        NftCore {
            watch,
            invalidation,
        }
    }

    /// A core that `watch` records commits in but never wakes (no watch thread): for a
    /// benchmark or a tool that drives syncs itself. A sync still notices foreign commits
    /// through the generation it reads.
    pub fn unwatched(watch: GenerationWatch) -> NftCore {
        NftCore {
            watch,
            invalidation: Invalidation::default(),
        }
    }

    /// An empty cache that the watch invalidates.
    pub fn cache<S>(&self) -> KernelCache<S> {
        KernelCache::with_invalidation(self.invalidation.clone())
    }

    /// Opens the socket in the calling thread's network namespace (call it on the daemon's
    /// thread, then move the session into the blocking sync).
    pub fn open(&self) -> Result<NftSession, NftError> {
        NftSession::open(self.watch.clone())
    }
}

/// The socket of an nftables controller: every commit through it is recorded as this
/// process's own in the shared [`GenerationWatch`].
pub struct NftSession {
    /// The socket; commits go through [`NftSession::commit`].
    nft: Nft,
    /// This process's nftables commits.
    watch: GenerationWatch,
}

/// What [`NftSession::check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerationCheck {
    /// Another process committed since the generation the controller last saw.
    pub foreign: bool,
    /// Whether the sync may trust the cache.
    pub decision: Decision,
}

impl NftSession {
    /// Opens the socket (in the calling thread's network namespace); `watch` records this
    /// process's commits (share the controllers' watch so they know each other's).
    pub fn open(watch: GenerationWatch) -> Result<NftSession, NftError> {
        Ok(NftSession {
            nft: Nft::open()?,
            watch,
        })
    }

    /// The socket, for reading (listings, table states); write through
    /// [`NftSession::commit`], so the commit is not taken for a foreign one.
    pub fn socket(&mut self) -> &mut Nft {
        &mut self.nft
    }

    /// The ruleset generation now.
    pub fn generation(&mut self) -> Result<u32, NftError> {
        self.nft.generation()
    }

    /// Executes `batch` and records its generation as this process's own.
    pub fn commit(&mut self, batch: Batch) -> Result<Commit, NftError> {
        let commit = self.nft.execute(batch)?;
        self.watch.record_own(commit.generation);
        Ok(commit)
    }

    /// Whether a sync may trust `cache`. `seen` is the generation after the controller's
    /// last commit or check (`None`: unknown, taken as foreign), `generation` the one this
    /// sync read. The generation moves with every commit; only one by another process (not
    /// this controller's, not the other nftables controller's) can have touched the table,
    /// and then the cache is invalidated.
    pub fn check<S>(
        &self,
        cache: &mut KernelCache<S>,
        seen: Option<u32>,
        generation: u32,
        now: Instant,
        period: Duration,
    ) -> GenerationCheck {
        let foreign = match seen {
            Some(g) => g != generation && self.watch.foreign_between(g, generation),
            None => true,
        };
        if foreign {
            cache.invalidate();
        }
        // The generation is read at every sync, so the event source never misses a commit.
        let decision = cache.decide(now, period, true);
        GenerationCheck { foreign, decision }
    }
}
