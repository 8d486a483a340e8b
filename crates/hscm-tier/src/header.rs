//! The tiered volume's header: the first 4 KiB of the home device, naming the geometry
//! and the DRAM tier's policy, with a checksum. Data starts right after it.

use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_volume::Durability;
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
}

fn durability_name<S: serde::Serializer>(d: &Durability, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match d {
        Durability::Immediate => "immediate",
        Durability::OnFlush => "on-flush",
    })
}

/// bcache's default sequential cutoff.
pub const DEFAULT_SEQUENTIAL_CUTOFF: u64 = 4 << 20;

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
        }
    }

    pub fn validate(&self) -> Result<()> {
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

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.block.to_le_bytes());
        h[16..24].copy_from_slice(&self.size.to_le_bytes());
        h[24..32].copy_from_slice(&self.ram.to_le_bytes());
        h[32..40].copy_from_slice(&self.sequential_cutoff.to_le_bytes());
        h[40] = match self.durability {
            Durability::Immediate => 0,
            Durability::OnFlush => 1,
        };
        put_name(&mut h[48..80], self.eviction.name());
        put_name(&mut h[80..112], self.admission.map_or("", |a| a.name()));
        let crc = crc32c::crc32c(&h[..HEADER_LEN as usize - 4]);
        h[HEADER_LEN as usize - 4..].copy_from_slice(&crc.to_le_bytes());
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
        let n = HEADER_LEN as usize;
        let stored = u32::from_le_bytes(h[n - 4..n].try_into().expect("4 bytes"));
        if crc32c::crc32c(&h[..n - 4]) != stored {
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
        let cfg = TierConfig {
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

/// Writes `bytes` (a whole number of sectors) at `offset` of home from an aligned copy,
/// as a device opened with O_DIRECT needs.
pub(crate) fn write_region(
    home: &dyn hscm_volume::Backend,
    offset: u64,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut buf = hscm_volume::AlignedBuf::zeroed(bytes.len());
    buf[..bytes.len()].copy_from_slice(bytes);
    home.write_at(offset, &buf[..bytes.len()])
}

/// Reads `len` bytes (a whole number of sectors) at `offset` of home into an aligned
/// buffer.
pub(crate) fn read_region(
    home: &dyn hscm_volume::Backend,
    offset: u64,
    len: usize,
) -> std::io::Result<hscm_volume::AlignedBuf> {
    let mut buf = hscm_volume::AlignedBuf::zeroed(len);
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
        let h = cfg.encode();
        assert_eq!(TierConfig::decode(&h, "v").unwrap(), cfg);
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
