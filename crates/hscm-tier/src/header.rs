//! The tiered volume's header: the first 4 KiB of the home device, naming the geometry
//! and the DRAM tier's policy, with a checksum. Data starts right after it.

use hscm_durable::Durability;
use hscm_policy::cache::{AdmissionName, EvictionName};
use serde::Serialize;

use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"HSCMTIER";
pub const VERSION: u32 = 1;
/// Header bytes before the data; also the alignment of every device request.
pub const HEADER_LEN: u64 = 4096;

/// What a tiered volume is made of; fixed when it is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TierConfig {
    /// Data bytes (a multiple of `block`).
    pub size: u64,
    /// The unit of caching, 4 KiB to 1 MiB, a power of two.
    pub block: u32,
    /// DRAM given to the hot blocks (a multiple of `block`).
    pub ram: u64,
    pub eviction: EvictionName,
    /// None: every missed block is admitted.
    pub admission: Option<AdmissionName>,
    /// A run of sequential requests longer than this many bytes is served without
    /// entering DRAM (0: never), so a scan does not wash out the hot set.
    pub sequential_cutoff: u64,
    #[serde(serialize_with = "durability_name")]
    pub durability: Durability,
    /// The durable fast tier between DRAM and home, if the volume has one (its path is
    /// in the header too: [`read_fast_path`]).
    pub fast: Option<FastConfig>,
}

/// Where a write is durable before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// On home (the fast tier, if any, holds clean copies only).
    WriteThrough,
    /// On the fast tier; a background thread copies dirty blocks home later, in block
    /// order.
    WriteBack,
}

impl WriteMode {
    pub const ALL: [WriteMode; 2] = [WriteMode::WriteThrough, WriteMode::WriteBack];

    pub fn name(self) -> &'static str {
        match self {
            WriteMode::WriteThrough => "write-through",
            WriteMode::WriteBack => "write-back",
        }
    }

    pub fn from_name(s: &str) -> Option<WriteMode> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// The fast tier's geometry and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FastConfig {
    /// Bytes of blocks it caches (a multiple of the block); the device holds a reserve
    /// of slots and the records besides.
    pub size: u64,
    pub mode: WriteMode,
    pub eviction: EvictionName,
    pub admission: Option<AdmissionName>,
    /// Pairs the fast device with this volume (also in the fast device's header).
    pub id: u64,
}

impl FastConfig {
    /// A write-back tier of `size` bytes under LRU, admitting every miss.
    pub fn new(size: u64) -> FastConfig {
        let id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(48);
        FastConfig {
            size,
            mode: WriteMode::WriteBack,
            eviction: EvictionName::Lru,
            admission: None,
            id: id | 1,
        }
    }
}

/// Longest fast-tier path the header holds, in bytes.
pub const MAX_FAST_PATH: usize = 1024;

fn durability_name<S: serde::Serializer>(d: &Durability, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(d.name())
}

/// bcache's default sequential cutoff (one definition, shared with `hscm sim cache`).
pub use hscm_policy::cache::DEFAULT_SEQUENTIAL_CUTOFF;

impl TierConfig {
    /// A volume of `size` bytes with `ram` bytes of DRAM, 4 KiB blocks, LRU, no
    /// admission filter, a 4 MiB sequential cutoff, every write durable on return.
    pub fn new(size: u64, ram: u64) -> TierConfig {
        TierConfig {
            size,
            block: 4096,
            ram,
            eviction: EvictionName::Lru,
            admission: None,
            sequential_cutoff: DEFAULT_SEQUENTIAL_CUTOFF,
            durability: Durability::Immediate,
            fast: None,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.durability == Durability::WriteBack {
            return Err(Error::Config(
                "a tiered volume has no write-back durability (use on-flush; its fast tier has a write-back mode of its own)".into(),
            ));
        }
        let b = u64::from(self.block);
        if !(4096..=1 << 20).contains(&b) || !b.is_power_of_two() {
            return Err(Error::Config(format!(
                "block size {b} must be a power of two from 4 KiB to 1 MiB"
            )));
        }
        if self.size == 0 || self.size % b != 0 {
            return Err(Error::Config(format!(
                "size {} must be a positive multiple of the {b}-byte block",
                self.size
            )));
        }
        if self.ram < b || self.ram % b != 0 {
            return Err(Error::Config(format!(
                "DRAM tier {} must be a positive multiple of the {b}-byte block",
                self.ram
            )));
        }
        if let Some(f) = &self.fast {
            if f.size < b || f.size % b != 0 {
                return Err(Error::Config(format!(
                    "fast tier {} must be a positive multiple of the {b}-byte block",
                    f.size
                )));
            }
            if f.size / b > u64::from(u32::MAX / 2) {
                return Err(Error::Config(format!(
                    "fast tier {} holds more than 2^31 blocks of {b} bytes",
                    f.size
                )));
            }
        }
        Ok(())
    }

    /// Where block `block` lives on home.
    pub fn home_offset(&self, block: u64) -> u64 {
        HEADER_LEN + block * u64::from(self.block)
    }

    /// Blocks of DRAM.
    pub fn ram_blocks(&self) -> u64 {
        self.ram / u64::from(self.block)
    }

    /// The header's bytes; `fast_path` names the fast device (empty without one).
    pub(crate) fn encode(&self, fast_path: &str) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.block.to_le_bytes());
        h[16..24].copy_from_slice(&self.size.to_le_bytes());
        h[24..32].copy_from_slice(&self.ram.to_le_bytes());
        h[32..40].copy_from_slice(&self.sequential_cutoff.to_le_bytes());
        h[40] = match self.durability {
            Durability::Immediate => 0,
            // `validate` refuses write-back before any header is written.
            Durability::OnFlush | Durability::WriteBack => 1,
        };
        put_name(&mut h[48..80], self.eviction.name());
        put_name(&mut h[80..112], self.admission.map_or("", |a| a.name()));
        if let Some(f) = &self.fast {
            h[112..120].copy_from_slice(&f.size.to_le_bytes());
            h[120] = match f.mode {
                WriteMode::WriteThrough => 0,
                WriteMode::WriteBack => 1,
            };
            h[128..136].copy_from_slice(&f.id.to_le_bytes());
            put_name(&mut h[136..168], f.eviction.name());
            put_name(&mut h[168..200], f.admission.map_or("", |a| a.name()));
            let p = &fast_path.as_bytes()[..fast_path.len().min(MAX_FAST_PATH)];
            h[200..202].copy_from_slice(&(p.len() as u16).to_le_bytes());
            h[202..202 + p.len()].copy_from_slice(p);
        }
        hscm_durable::codec::seal_at(&mut h, HEADER_LEN as usize - 4);
        h
    }

    /// Reads a header back; `path` names the device in errors.
    pub(crate) fn decode(h: &[u8], path: &str) -> Result<TierConfig> {
        let bad = |why: String| Error::BadHeader {
            path: path.to_string(),
            why,
        };
        if h.len() < HEADER_LEN as usize || &h[..8] != MAGIC {
            return Err(Error::NotTiered {
                path: path.to_string(),
                why: "no HSCMTIER magic in its first bytes".into(),
            });
        }
        if !hscm_durable::codec::sealed(h, HEADER_LEN as usize - 4) {
            return Err(bad("checksum mismatch".into()));
        }
        let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(format!(
                "format version {version}; this build reads {VERSION}"
            )));
        }
        let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
        let durability = match h[40] {
            0 => Durability::Immediate,
            1 => Durability::OnFlush,
            d => return Err(bad(format!("unknown durability code {d}"))),
        };
        let eviction = get_name(&h[48..80]);
        let eviction = EvictionName::from_name(&eviction)
            .ok_or_else(|| bad(format!("unknown eviction policy {eviction:?}")))?;
        let admission = get_name(&h[80..112]);
        let admission = if admission.is_empty() {
            None
        } else {
            Some(
                AdmissionName::from_name(&admission)
                    .ok_or_else(|| bad(format!("unknown admission filter {admission:?}")))?,
            )
        };
        let fast_size = u64_at(112);
        let fast = if fast_size == 0 {
            None
        } else {
            let mode = match h[120] {
                0 => WriteMode::WriteThrough,
                1 => WriteMode::WriteBack,
                m => return Err(bad(format!("unknown fast-tier write mode code {m}"))),
            };
            let eviction = get_name(&h[136..168]);
            let eviction = EvictionName::from_name(&eviction)
                .ok_or_else(|| bad(format!("unknown fast-tier eviction policy {eviction:?}")))?;
            let admission = get_name(&h[168..200]);
            let admission = if admission.is_empty() {
                None
            } else {
                Some(AdmissionName::from_name(&admission).ok_or_else(|| {
                    bad(format!("unknown fast-tier admission filter {admission:?}"))
                })?)
            };
            Some(FastConfig {
                size: fast_size,
                mode,
                eviction,
                admission,
                id: u64_at(128),
            })
        };
        let cfg = TierConfig {
            fast,
            block: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
            size: u64_at(16),
            ram: u64_at(24),
            sequential_cutoff: u64_at(32),
            durability,
            eviction,
            admission,
        };
        cfg.validate().map_err(|e| bad(e.to_string()))?;
        Ok(cfg)
    }
}

/// The fast device's path as the header names it (empty without a fast tier). A
/// relative path is relative to the directory of home.
pub(crate) fn read_fast_path(h: &[u8]) -> String {
    let n = usize::from(u16::from_le_bytes([h[200], h[201]])).min(MAX_FAST_PATH);
    String::from_utf8_lossy(&h[202..202 + n]).into_owned()
}

/// Writes `bytes` (a whole number of sectors) at `offset` of home from an aligned copy,
/// as a device opened with O_DIRECT needs.
pub(crate) fn write_region(
    home: &dyn hscm_durable::device::Backend,
    offset: u64,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut buf = hscm_durable::device::AlignedBuf::zeroed(bytes.len());
    buf[..bytes.len()].copy_from_slice(bytes);
    home.write_at(offset, &buf[..bytes.len()])
}

/// Reads `len` bytes (a whole number of sectors) at `offset` of home into an aligned
/// buffer.
pub(crate) fn read_region(
    home: &dyn hscm_durable::device::Backend,
    offset: u64,
    len: usize,
) -> std::io::Result<hscm_durable::device::AlignedBuf> {
    let mut buf = hscm_durable::device::AlignedBuf::zeroed(len);
    home.read_at(offset, &mut buf[..len])?;
    Ok(buf)
}

fn put_name(field: &mut [u8], name: &str) {
    let n = name.len().min(field.len() - 1);
    field[0] = n as u8;
    field[1..1 + n].copy_from_slice(&name.as_bytes()[..n]);
}

fn get_name(field: &[u8]) -> String {
    let n = usize::from(field[0]).min(field.len() - 1);
    String::from_utf8_lossy(&field[1..1 + n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_damage_is_named() {
        let mut cfg = TierConfig::new(1 << 30, 64 << 20);
        cfg.admission = Some(AdmissionName::SecondMiss);
        cfg.eviction = EvictionName::S3fifo;
        cfg.durability = Durability::OnFlush;
        let h = cfg.encode("");
        assert_eq!(TierConfig::decode(&h, "v").unwrap(), cfg);
        let mut fast = FastConfig::new(1 << 24);
        fast.admission = Some(AdmissionName::SeenBefore);
        fast.mode = WriteMode::WriteThrough;
        let with_fast = TierConfig {
            fast: Some(fast),
            ..cfg
        };
        let h2 = with_fast.encode("/dev/pmem0");
        assert_eq!(TierConfig::decode(&h2, "v").unwrap(), with_fast);
        assert_eq!(read_fast_path(&h2), "/dev/pmem0");
        assert_eq!(read_fast_path(&h), "");
        let mut torn = h.clone();
        torn[20] ^= 1;
        let e = TierConfig::decode(&torn, "v").unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        let e = TierConfig::decode(&[0; 4096], "v").unwrap_err().to_string();
        assert!(e.contains("not a tiered volume"), "{e}");
    }

    #[test]
    fn configurations_outside_the_limits_are_refused() {
        let ok = TierConfig::new(1 << 20, 1 << 16);
        assert!(ok.validate().is_ok());
        for bad in [
            TierConfig { block: 2048, ..ok },
            TierConfig {
                block: 3 << 12,
                ..ok
            },
            TierConfig {
                block: 2 << 20,
                ..ok
            },
            TierConfig { size: 5000, ..ok },
            TierConfig { ram: 0, ..ok },
            TierConfig { ram: 6000, ..ok },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
