//! Who may use the control socket: root, and members of [`ADMIN_GROUP`].
//!
//! The groups are the peer's own at `connect(2)` (`SO_PEERGROUPS`), not the group database's
//! idea of its user: a process that dropped its groups is not an admin, and one started by
//! `sg edgenetd-admin` is. `/proc/PID/status` would say the same but is racy (the pid may
//! exit and be reused) and invisible under the unit's `ProtectProc=invisible`.

use std::os::fd::AsFd;

use crate::sys::{self, PeerCredentials};

/// The group whose members may apply and confirm configurations.
pub const ADMIN_GROUP: &str = "edgenetd-admin";

/// Why a connection is not served.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The peer is neither root nor in the admin group.
    #[error("uid {uid} (pid {pid}) is neither root nor a member of group {ADMIN_GROUP}")]
    NotAdmin {
        /// The peer's user id.
        uid: u32,
        /// The peer's process id.
        pid: i32,
    },
    /// The kernel did not tell who the peer is.
    #[error("cannot read the peer's credentials: {0}")]
    Credentials(std::io::Error),
}

/// Decides whether the peer on `stream` may use the socket; `admin_gid` is the admin
/// group's id (`None`: no such group, so only root may).
pub fn authorize(stream: impl AsFd, admin_gid: Option<u32>) -> Result<PeerCredentials, Refusal> {
    let cred = sys::peer_credentials(stream).map_err(Refusal::Credentials)?;
    if is_admin(&cred, admin_gid) {
        Ok(cred)
    } else {
        Err(Refusal::NotAdmin {
            uid: cred.uid,
            pid: cred.pid,
        })
    }
}

/// Root, or the admin group as primary or supplementary group.
pub fn is_admin(cred: &PeerCredentials, admin_gid: Option<u32>) -> bool {
    cred.uid == 0 || admin_gid.is_some_and(|gid| cred.gid == gid || cred.groups.contains(&gid))
}

/// The admin group's id, looked up at every connection (a group created after the daemon
/// started counts at once); `None` when it does not exist or cannot be looked up.
pub fn admin_gid() -> Option<u32> {
    sys::group_id(ADMIN_GROUP).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(uid: u32, gid: u32, groups: &[u32]) -> PeerCredentials {
        PeerCredentials {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn root_and_admin_group_members_only() {
        assert!(is_admin(&cred(0, 0, &[]), None));
        assert!(is_admin(&cred(1000, 1000, &[27, 990]), Some(990)));
        assert!(is_admin(&cred(1000, 990, &[]), Some(990)));
        assert!(!is_admin(&cred(1000, 1000, &[27]), Some(990)));
        assert!(!is_admin(&cred(1000, 1000, &[990]), None));
    }
}
