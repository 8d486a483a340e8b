//! Migration between a fast and a slow memory device (DRAM and PCM in the HSCM
//! paper): one trait that WARM and RaPP implement, so the memory controller holds any
//! policy and a new one plugs in without touching it.

use crate::{Rapp, Warm};

/// One access as a migration policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryAccess<K> {
    /// The migration unit (a row, a page, a frame).
    pub unit: K,
    /// Served by the slow device.
    pub in_slow: bool,
    pub is_write: bool,
    /// Hit the device's open row.
    pub row_hit: bool,
}

/// What the controller must do after an access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrationDecision<K> {
    Stay,
    /// Move this unit to the fast device.
    Migrate(K),
    /// The policy's remap table is full: first move every listed unit back to its
    /// home in the slow device, then move this one.
    ResetThenMigrate {
        restore: Vec<K>,
        migrate: K,
    },
}

/// A policy that decides which units move to the fast device.
pub trait MigrationPolicy<K>: Send {
    /// Sees one access and decides.
    fn observe(&mut self, access: MemoryAccess<K>) -> MigrationDecision<K>;
    /// The controller moved `unit` out of the fast device on its own (to make room).
    fn forget(&mut self, _unit: &K) {}
    /// Remap-table resets so far (0 for a policy without a table).
    fn resets(&self) -> u64 {
        0
    }
}

/// WARM (the HSCM paper, §3): counts only accesses served by the slow device.
impl<K: Copy + Eq + std::hash::Hash + Send> MigrationPolicy<K> for Warm<K> {
    fn observe(&mut self, a: MemoryAccess<K>) -> MigrationDecision<K> {
        if !a.in_slow {
            return MigrationDecision::Stay;
        }
        self.on_slow_access(a.unit, a.is_write, a.row_hit)
    }

    fn forget(&mut self, unit: &K) {
        Warm::forget(self, unit);
    }

    fn resets(&self) -> u64 {
        Warm::resets(self)
    }
}

/// RaPP (Ramos et al., ICS 2011): ranks every access, migrates a hot slow unit.
impl<K: Copy + Eq + std::hash::Hash + Send> MigrationPolicy<K> for Rapp<K> {
    fn observe(&mut self, a: MemoryAccess<K>) -> MigrationDecision<K> {
        if self.on_access(a.unit, a.in_slow, a.is_write) {
            MigrationDecision::Migrate(a.unit)
        } else {
            MigrationDecision::Stay
        }
    }
}
