//! One running instance's state at one moment. `hscm status --json` prints it and
//! `/metrics` renders the same snapshot, so the two agree by construction: a counter
//! read from both at the same moment is the same number.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What `hscm status` shows of one instance, and what its metrics are made of.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Status {
    pub pid: u32,
    /// `nbd`, `mount` or `serve`.
    pub frontend: String,
    /// Where clients reach it: the NBD URI, the mount point, the shared-memory socket.
    pub address: String,
    /// The volume file or device (its canonical path).
    pub volume: String,
    /// Where `--metrics` serves Prometheus text (`http://ADDR:PORT/metrics`), if asked.
    pub metrics_address: Option<String>,
    /// `flat`, `tiered` or `fs`.
    pub kind: String,
    /// The hscm that serves it.
    pub version: String,
    /// When it started serving (seconds since the Unix epoch).
    pub started_at: u64,
    pub uptime_s: f64,
    /// The volume's size (the file system's data area for a mount).
    pub size_bytes: u64,
    /// Bytes in use, where the engine knows (a file system's used blocks).
    pub used_bytes: Option<u64>,
    /// `immediate`, `on-flush` or `write-back`.
    pub durability: String,
    pub load: Load,
    /// Bytes acknowledged but not yet on the home device (write-back), or whose only
    /// durable copy is on the fast tier.
    pub dirty_bytes: u64,
    /// The bound on those, where there is one.
    pub dirty_max_bytes: Option<u64>,
    pub journal: Option<Journal>,
    pub device: Device,
    /// Requests by kind, as the front-end served them.
    pub ops: Vec<Op>,
    /// Each tier of a tiered volume, DRAM first.
    pub tiers: Vec<Tier>,
    /// Space and inodes of a mounted file system.
    pub fs: Option<FsSpace>,
    pub clients: Clients,
    /// Errors by kind (`request`, `protocol`, …), since start.
    pub errors: BTreeMap<String, u64>,
    pub health: Health,
    /// The home on the network (an NBD export), where the volume has one.
    pub home: Option<RemoteHome>,
    /// How a mount's requests travel between the kernel and hscm.
    pub fuse: Option<FuseTransport>,
    /// The members of a mirrored home (docs/mirror.md), where the volume has one.
    pub mirror: Option<Mirror>,
}

/// A mirrored home: its generation, quorum, and where each member stands.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Mirror {
    pub generation: u64,
    pub epoch: u64,
    /// Members in sync now (the local one included), and how many writes need.
    pub in_sync: u64,
    pub quorum: u64,
    /// `io-error` or `suspend-io`.
    pub on_no_quorum: String,
    /// Why this primary refuses writes for good (another was promoted).
    pub fenced: Option<String>,
    /// The local member first.
    pub members: Vec<MirrorMember>,
    /// The most a crash of the primary now makes resync copy to each member (the
    /// extents its activity log lists).
    pub crash_copy_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MirrorMember {
    pub name: String,
    /// `in-sync`, `behind` or `needs-full-copy`.
    pub state: String,
    /// Why it does not answer now.
    pub absent: Option<String>,
    /// Bytes resync must still copy to it, and has copied since start.
    pub to_copy_bytes: u64,
    pub copied_bytes: u64,
}

impl Mirror {
    pub fn from_status(m: &hscm_durable::mirror::MirrorStatus) -> Mirror {
        Mirror {
            generation: m.generation,
            epoch: m.epoch,
            in_sync: m.in_sync as u64,
            quorum: m.needed as u64,
            on_no_quorum: m.on_no_quorum.name().into(),
            fenced: m.fenced.clone(),
            crash_copy_bytes: m.crash_copy,
            members: m
                .members
                .iter()
                .map(|x| MirrorMember {
                    name: x.name.clone(),
                    state: x.state.name().into(),
                    absent: x.absent.clone(),
                    to_copy_bytes: x.to_copy,
                    copied_bytes: x.copied,
                })
                .collect(),
        }
    }
}

/// A mount's transport (docs/fs.md, "Round trips").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FuseTransport {
    /// `io_uring` (every queue registered: requests arrive by the rings) or
    /// `dev-fuse`.
    pub kind: String,
    /// Requests the rings carried.
    pub ring_requests: u64,
}

/// How a home on an NBD export is doing (docs/remote.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RemoteHome {
    /// Whether the last attempt to reach it succeeded.
    pub reachable: bool,
    /// Connections lost and made again.
    pub reconnects: u64,
    /// Requests that failed after their retries (server errors included).
    pub failed_requests: u64,
    /// The last failure, for the operator.
    pub last_error: Option<String>,
}

impl RemoteHome {
    pub fn from_health(h: &hscm_durable::device::RemoteHealth) -> RemoteHome {
        use std::sync::atomic::Ordering::Relaxed;
        RemoteHome {
            reachable: h.reachable.load(Relaxed),
            reconnects: h.reconnects.load(Relaxed),
            failed_requests: h.failed_requests.load(Relaxed),
            last_error: h.last_error.lock().clone(),
        }
    }
}

/// How far the RAM copy has loaded.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Load {
    pub loaded_bytes: u64,
    pub total_bytes: u64,
    /// `running`, `done`, `stopped` or `failed`.
    pub state: String,
}

/// The flat volume's journal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Journal {
    pub size_bytes: u64,
    /// What a crash now would replay.
    pub in_use_bytes: u64,
    pub batches: u64,
    pub records: u64,
    pub checkpoints: u64,
    pub replayed_batches: u64,
}

/// What the instance asked of its devices since it opened the volume: the flash wear.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Device {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub written_bytes: u64,
    pub syncs: u64,
}

/// One kind of request.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Op {
    pub op: String,
    /// Requests that succeeded.
    pub count: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Requests per bucket of [`hscm_block::LATENCY_BOUNDS_S`] (not cumulative; the
    /// last is above every bound), failures included.
    pub latency_buckets: Vec<u64>,
    pub latency_sum_s: f64,
}

impl Op {
    pub fn from_snapshot(s: &hscm_block::OpSnapshot) -> Op {
        Op {
            op: s.op.to_string(),
            count: s.count,
            bytes: s.bytes,
            errors: s.errors,
            latency_buckets: s.latency.buckets.clone(),
            latency_sum_s: s.latency.sum_ns as f64 / 1e9,
        }
    }
}

/// One tier's counters (block lookups).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Tier {
    /// `dram` or `fast`.
    pub tier: String,
    pub hits: u64,
    pub misses: u64,
    pub promotions: u64,
    pub evictions: u64,
    pub demotions: u64,
    /// Blocks written back to home.
    pub written_back: u64,
    pub dirty_bytes: u64,
    pub occupancy_bytes: u64,
    pub capacity_bytes: u64,
}

impl Tier {
    /// Hits over lookups, or None before the first lookup.
    pub fn hit_ratio(&self) -> Option<f64> {
        let lookups = self.hits + self.misses;
        (lookups > 0).then(|| self.hits as f64 / lookups as f64)
    }
}

/// A mounted file system's space and inodes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FsSpace {
    pub size_bytes: u64,
    pub free_bytes: u64,
    pub files: u64,
    pub free_files: u64,
    /// Bytes of file data held in RAM, and the budget for them (None: every file).
    pub ram_bytes: u64,
    pub ram_budget_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Clients {
    /// Connected now.
    pub connected: u64,
    /// Connected since start.
    pub total: u64,
}

/// Whether the instance still accepts writes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Health {
    pub ok: bool,
    /// Why not: the failure that made it refuse writes.
    pub reason: Option<String>,
}

impl Health {
    pub fn from_failure(failure: Option<String>) -> Health {
        Health {
            ok: failure.is_none(),
            reason: failure,
        }
    }
}
