//! Forgetting remembered clients of sticky services whose backend is gone (their recorder
//! chains are chains on demand, see `on_demand`).

use crate::config::service::Protocol;
use crate::dataplane::nft::ir::Element;
use crate::dataplane::nft::{Batch, NftError, Op};
use crate::sync::SyncError;

use super::super::layout::{self, Remembered};
use super::super::model::{Model, VipKey};
use super::{Kernel, TAG_SHARED, nft_err};

/// Attempts at forgetting stale clients: an element may expire between the dump and the
/// delete, which fails the whole delete batch.
const SWEEP_ATTEMPTS: usize = 3;

/// True when `r` names a live backend of its service, which is still sticky.
fn still_valid(desired: &Model, r: &Remembered) -> bool {
    let Some(proto) = Protocol::from_number(r.proto) else {
        return false;
    };
    let key = VipKey {
        addr: r.vip,
        proto,
        port: r.port,
    };
    desired.get(&key).is_some_and(|e| {
        e.sticky_timeout().is_some() && e.backends().binary_search(&r.backend).is_ok()
    })
}

impl Kernel {
    /// Forgets every remembered client whose backend is not a live backend of its (still
    /// sticky) service in `desired`: such a client's next connection is dealt anew instead
    /// of going to a removed, drained or down backend. Reads both sticky maps whole; called
    /// only when a sticky service lost a backend, and at each full compare.
    pub(in crate::controller::service) fn sweep_sticky(
        &mut self,
        desired: &Model,
    ) -> Result<(), SyncError> {
        for attempt in 1..=SWEEP_ATTEMPTS {
            let mut batch = Batch::new();
            batch.tag(TAG_SHARED);
            let mut stale_total = 0;
            for v4 in [true, false] {
                let stale = self
                    .stale_clients(v4, desired)
                    .map_err(|e| nft_err("list remembered clients", e))?;
                if stale.is_empty() {
                    continue;
                }
                stale_total += stale.len();
                let mut def = layout::sticky_map(v4);
                def.data = None;
                batch
                    .elements(&self.table, &def, &stale, Op::Delete)
                    .map_err(|e| nft_err("compile remembered clients", e.into()))?;
            }
            if stale_total == 0 {
                return Ok(());
            }
            match self.commit(batch) {
                Ok(c) => {
                    self.generation = Some(c.generation);
                    log::info!(
                        "service: forgot {stale_total} clients remembered with a backend no longer in use"
                    );
                    return Ok(());
                }
                Err(NftError::Rejected(_)) if attempt < SWEEP_ATTEMPTS => continue,
                Err(e) => return Err(nft_err("forget remembered clients", e)),
            }
        }
        Ok(())
    }

    /// Keys of the remembered clients of one family that `desired` no longer backs.
    fn stale_clients(&mut self, v4: bool, desired: &Model) -> Result<Vec<Element>, NftError> {
        let stale = std::cell::RefCell::new(Vec::new());
        self.nft.socket().for_each_element(
            &self.table,
            layout::sticky_map_name(v4),
            &mut |info| {
                let data = info.data.as_deref().unwrap_or(&[]);
                if let Some(r) = layout::remembered(v4, &info.key, data)
                    && !still_valid(desired, &r)
                {
                    stale.borrow_mut().push(r.key());
                }
            },
            &mut || stale.borrow_mut().clear(),
        )?;
        Ok(stale.into_inner())
    }
}
