//! The tiered volume's header: the first 4 KiB of the home device, naming the geometry
//! and the DRAM tier's policy, with a checksum. Data starts right after it.

use hscm_durable::codec::{CodecError, Dec, Enc};
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
    /// Layout: docs/tier.md; the offsets in the comments are the fields' places.
    pub(crate) fn encode(&self, fast_path: &str) -> Vec<u8> {
        let mut e = Enc(Vec::with_capacity(HEADER_LEN as usize));
        e.raw(MAGIC) // 0
            .u32(VERSION) // 8
            .u32(self.block) // 12
            .u64(self.size) // 16
            .u64(self.ram) // 24
            .u64(self.sequential_cutoff) // 32
            .u8(match self.durability {
                Durability::Immediate => 0,
                // `validate` refuses write-back before any header is written.
                Durability::OnFlush | Durability::WriteBack => 1,
            }) // 40
            .raw(&[0; 7])
            .raw(&name_field(self.eviction.name())) // 48
            .raw(&name_field(self.admission.map_or("", |a| a.name()))); // 80
        if let Some(f) = &self.fast {
            let p = &fast_path.as_bytes()[..fast_path.len().min(MAX_FAST_PATH)];
            e.u64(f.size) // 112
                .u8(match f.mode {
                    WriteMode::WriteThrough => 0,
                    WriteMode::WriteBack => 1,
                }) // 120
                .raw(&[0; 7])
                .u64(f.id) // 128
                .raw(&name_field(f.eviction.name())) // 136
                .raw(&name_field(f.admission.map_or("", |a| a.name()))) // 168
                .u16(p.len() as u16) // 200
                .raw(p); // 202
        }
        let mut h = e.0;
        h.resize(HEADER_LEN as usize, 0);
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
        let mut d = Dec::new(&h[8..], "the tier header");
        let codec = |e: CodecError| bad(e.0);
        let version = d.u32().map_err(codec)?;
        if version != VERSION {
            return Err(bad(format!(
                "format version {version}; this build reads {VERSION}"
            )));
        }
        let block = d.u32().map_err(codec)?;
        let size = d.u64().map_err(codec)?;
        let ram = d.u64().map_err(codec)?;
        let sequential_cutoff = d.u64().map_err(codec)?;
        let durability = match d.u8().map_err(codec)? {
            0 => Durability::Immediate,
            1 => Durability::OnFlush,
            c => return Err(bad(format!("unknown durability code {c}"))),
        };
        d.raw(7).map_err(codec)?;
        let eviction = get_name(d.raw(NAME_FIELD).map_err(codec)?);
        let eviction = EvictionName::from_name(&eviction)
            .ok_or_else(|| bad(format!("unknown eviction policy {eviction:?}")))?;
        let admission = get_name(d.raw(NAME_FIELD).map_err(codec)?);
        let admission = if admission.is_empty() {
            None
        } else {
            Some(
                AdmissionName::from_name(&admission)
                    .ok_or_else(|| bad(format!("unknown admission filter {admission:?}")))?,
            )
        };
        let fast_size = d.u64().map_err(codec)?;
        let fast = if fast_size == 0 {
            None
        } else {
            let mode = match d.u8().map_err(codec)? {
                0 => WriteMode::WriteThrough,
                1 => WriteMode::WriteBack,
                m => return Err(bad(format!("unknown fast-tier write mode code {m}"))),
            };
            d.raw(7).map_err(codec)?;
            let id = d.u64().map_err(codec)?;
            let eviction = get_name(d.raw(NAME_FIELD).map_err(codec)?);
            let eviction = EvictionName::from_name(&eviction)
                .ok_or_else(|| bad(format!("unknown fast-tier eviction policy {eviction:?}")))?;
            let admission = get_name(d.raw(NAME_FIELD).map_err(codec)?);
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
                id,
            })
        };
        let cfg = TierConfig {
            fast,
            block,
            size,
            ram,
            sequential_cutoff,
            durability,
            eviction,
            admission,
        };
        cfg.validate().map_err(|e| bad(e.to_string()))?;
        Ok(cfg)
    }
}

/// Where the fast device's path lies in the header: its length (u16), then its bytes.
const FAST_PATH_AT: usize = 200;

/// The fast device's path as the header names it (empty without a fast tier). A
/// relative path is relative to the directory of home.
pub(crate) fn read_fast_path(h: &[u8]) -> String {
    let mut d = Dec::new(
        h.get(FAST_PATH_AT..).unwrap_or_default(),
        "the fast tier's path",
    );
    let n = d.u16().map_or(0, usize::from).min(MAX_FAST_PATH);
    d.raw(n)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default()
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

/// Bytes of a policy's name field: its length (one byte), then the name, then zeroes.
const NAME_FIELD: usize = 32;

fn name_field(name: &str) -> [u8; NAME_FIELD] {
    let mut field = [0u8; NAME_FIELD];
    let n = name.len().min(NAME_FIELD - 1);
    field[0] = n as u8;
    field[1..1 + n].copy_from_slice(&name.as_bytes()[..n]);
    field
}

fn get_name(field: &[u8]) -> String {
    let n = usize::from(field[0]).min(field.len() - 1);
    String::from_utf8_lossy(&field[1..1 + n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration without a fast tier, and the same with one of `mode`.
    fn configs(mode: WriteMode) -> (TierConfig, TierConfig) {
        let mut cfg = TierConfig::new(1 << 30, 64 << 20);
        cfg.admission = Some(AdmissionName::SecondMiss);
        cfg.eviction = EvictionName::S3fifo;
        cfg.durability = Durability::OnFlush;
        let mut fast = FastConfig::new(1 << 24);
        fast.admission = Some(AdmissionName::SeenBefore);
        fast.mode = mode;
        fast.id = 0x0123_4567_89ab_cdef;
        let with_fast = TierConfig {
            fast: Some(fast),
            ..cfg
        };
        (cfg, with_fast)
    }

    #[test]
    fn a_header_reads_back_and_damage_is_named() {
        let (cfg, with_fast) = configs(WriteMode::WriteThrough);
        let h = cfg.encode("");
        assert_eq!(TierConfig::decode(&h, "v").unwrap(), cfg);
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

    /// The bytes tiered volumes on disk hold, with and without a fast tier: no change
    /// of the code may move them (a CRC-32C of the header page stands for them).
    #[test]
    fn encoding_is_the_documented_layout() {
        let (cfg, with_fast) = configs(WriteMode::WriteBack);
        let plain = cfg.encode("");
        let fast = with_fast.encode("../fast.tier0");
        // Of the page less its seal: a sealed page's own CRC-32C is a constant.
        let body = |h: &[u8]| crc32c::crc32c(&h[..HEADER_LEN as usize - 4]);
        assert_eq!(plain.len() as u64, HEADER_LEN);
        assert_eq!(&plain[..8], MAGIC);
        assert_eq!(body(&plain), 0xb664_f619);
        assert_eq!(body(&fast), 0x3ef2_11de);
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
