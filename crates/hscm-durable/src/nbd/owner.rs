//! One owner per export across machines. A lock file keeps a second opener of a local
//! home out; an NBD export has no lock, and two machines writing one volume would
//! corrupt it. So the client keeps the export's last 4 KiB for an owner record (the
//! engines see the export 4 KiB shorter): who holds it (host, process, a random
//! token), since when, and a generation that every claim raises.
//!
//! - A writable open claims the export: it refuses one held by someone else, naming
//!   the holder, unless the URI says `take-over` (the holder's machine is gone or
//!   stopped). A claim is written with FUA and read back a moment later, so of two
//!   machines claiming at once the later one wins and the other is told.
//! - The holder checks the record before each flush and before writing anything again
//!   after a lost connection: once another opener took over, it is fenced: every write
//!   and flush fails, naming who took over. NBD has no compare-and-write, so between
//!   two checks a fenced holder's writes still reach the export; fencing at every
//!   write is the replicated home's work (DRBD's generation identifiers).
//! - A clean close releases the record; a crash leaves it held until a take-over,
//!   except that a claim held by a process of this same machine that no longer runs
//!   is taken without asking (a restart after a kill or power cut).

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::codec::{seal_at, sealed, CodecError, Dec, Enc};

/// Bytes kept at the end of every export for the owner record.
pub const OWNER_BLOCK: u64 = 4096;
const MAGIC: &[u8; 8] = b"HSCMOWN1";
/// How long a claimer waits before reading its claim back.
const SETTLE: Duration = Duration::from_millis(50);
const HELD: u8 = 1;
const FREE: u8 = 0;

/// What the owner block says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRecord {
    pub held: bool,
    pub generation: u64,
    pub token: u64,
    pub pid: u32,
    /// Seconds since the Unix epoch when it was claimed or released.
    pub since: u64,
    pub host: String,
}

impl OwnerRecord {
    /// This process's claim of generation `generation`.
    pub fn mine(generation: u64) -> OwnerRecord {
        OwnerRecord {
            held: true,
            generation,
            token: random_u64() | 1,
            pid: std::process::id(),
            since: now(),
            host: hostname(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let host = &self.host.as_bytes()[..self.host.len().min(255)];
        let mut e = Enc(Vec::with_capacity(OWNER_BLOCK as usize));
        e.raw(MAGIC) // 0
            .u8(if self.held { HELD } else { FREE }) // 8
            .raw(&[0; 7])
            .u64(self.generation) // 16
            .u64(self.token) // 24
            .u32(self.pid) // 32
            .raw(&[0; 4])
            .u64(self.since) // 40
            .u8(host.len() as u8) // 48
            .raw(host); // 49
        let mut b = e.0;
        b.resize(OWNER_BLOCK as usize, 0);
        seal_at(&mut b, OWNER_BLOCK as usize - 4);
        b
    }

    /// None for a block that holds no record (a new export, or one whose last 4 KiB
    /// something else wrote): nobody holds it.
    pub fn decode(b: &[u8]) -> Option<OwnerRecord> {
        if b.len() != OWNER_BLOCK as usize || &b[..8] != MAGIC {
            return None;
        }
        if !sealed(b, OWNER_BLOCK as usize - 4) {
            return None;
        }
        let mut d = Dec::new(&b[8..], "the export's owner record");
        let mut fields = || -> Result<_, CodecError> {
            let held = d.u8()? == HELD;
            d.raw(7)?;
            let (generation, token, pid) = (d.u64()?, d.u64()?, d.u32()?);
            d.raw(4)?;
            let since = d.u64()?;
            let host_len = usize::from(d.u8()?);
            let host = String::from_utf8_lossy(d.raw(host_len)?).into_owned();
            Ok(OwnerRecord {
                held,
                generation,
                token,
                pid,
                since,
                host,
            })
        };
        fields().ok()
    }

    /// Whether the holder was a process of this machine that no longer runs. (Two
    /// containers sharing a host name and not each other's process table would see
    /// each other as gone: give them distinct names.)
    pub fn is_dead_here(&self) -> bool {
        self.host == hostname()
            && self.pid != std::process::id()
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// "host-a (pid 412, since 2026-11-29 00:12:05 UTC, generation 3)"
    pub fn describe(&self) -> String {
        format!(
            "{} (pid {}, since {}, generation {})",
            self.host,
            self.pid,
            utc(self.since),
            self.generation
        )
    }
}

/// Reads and durably writes the owner block.
pub(crate) trait OwnerIo {
    fn read_owner(&self, buf: &mut [u8]) -> io::Result<()>;
    fn write_owner(&self, bytes: &[u8]) -> io::Result<()>;
}

/// Reads, claims and checks the owner record.
pub(crate) struct Claim<'a>(pub &'a dyn OwnerIo);

impl Claim<'_> {
    pub fn current(&self) -> io::Result<Option<OwnerRecord>> {
        let mut b = vec![0u8; OWNER_BLOCK as usize];
        self.0.read_owner(&mut b)?;
        Ok(OwnerRecord::decode(&b))
    }

    /// Claims the export; Err(PermissionDenied) naming the holder where someone holds
    /// it and `take_over` is false, or where another claimer won a race.
    pub fn claim(&self, what: &str, take_over: bool) -> io::Result<OwnerRecord> {
        let before = self.current()?;
        if let Some(r) = before.as_ref().filter(|r| r.held) {
            if r.is_dead_here() {
                // This machine's own holder crashed (killed, power cut): its claim is
                // stale, and nobody else can be writing under it.
                tracing::warn!("{what}: its holder {} is gone; claiming it", r.describe());
            } else if !take_over {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{what} is in use by {}; if that machine is gone or its hscm stopped, \
                         open it with ?take-over (docs/remote.md)",
                        r.describe()
                    ),
                ));
            }
            tracing::warn!("{what}: taking over from {}", r.describe());
        }
        let mine = OwnerRecord::mine(before.map_or(1, |r| r.generation + 1));
        self.0.write_owner(&mine.encode())?;
        std::thread::sleep(SETTLE);
        match self.current()? {
            Some(r) if r.token == mine.token => Ok(mine),
            Some(r) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{what}: {} claimed it at the same moment; it is theirs",
                    r.describe()
                ),
            )),
            None => Err(io::Error::other(format!(
                "{what}: the owner record just written reads back as nothing"
            ))),
        }
    }

    /// Ok while `mine` still holds the export; Err naming who took it over.
    pub fn check(&self, what: &str, mine: &OwnerRecord) -> io::Result<()> {
        match self.current()? {
            Some(r) if r.token == mine.token && r.held => Ok(()),
            Some(r) if r.held => Err(fenced(what, &r)),
            _ => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{what}: its owner record was released or overwritten by someone else; writes refused"),
            )),
        }
    }

    /// Marks the record free (a clean close); leaves it alone if someone took over.
    pub fn release(&self, mine: &OwnerRecord) -> io::Result<()> {
        if self.current()?.is_some_and(|r| r.token == mine.token) {
            let free = OwnerRecord {
                held: false,
                since: now(),
                ..mine.clone()
            };
            self.0.write_owner(&free.encode())?;
        }
        Ok(())
    }
}

/// A random 64-bit number (claim tokens, mirror set and member ids): the standard
/// library's per-process random hasher keys, which is all uniqueness needs here.
pub(crate) fn random_u64() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

pub(crate) fn fenced(what: &str, by: &OwnerRecord) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{what} was taken over by {}: this opener no longer owns it; writes refused",
            by.describe()
        ),
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unnamed host".into())
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (civil-from-days, Howard
/// Hinnant's algorithm).
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_damage_reads_as_none() {
        let r = OwnerRecord::mine(7);
        let b = r.encode();
        assert_eq!(OwnerRecord::decode(&b), Some(r.clone()));
        let mut torn = b.clone();
        torn[30] ^= 1;
        assert_eq!(OwnerRecord::decode(&torn), None);
        assert_eq!(OwnerRecord::decode(&[0u8; 4096]), None);
        assert!(r.describe().contains("generation 7"), "{}", r.describe());
    }

    /// The record's bytes (a CRC-32C of the block less its seal stands for them): what
    /// exports hold, so no change of the code may move them.
    #[test]
    fn the_record_is_its_documented_layout() {
        let r = OwnerRecord {
            held: true,
            generation: 7,
            token: 0x1122_3344_5566_7788,
            pid: 4242,
            since: 1_795_000_000,
            host: "storage1".into(),
        };
        let b = r.encode();
        assert_eq!(b.len() as u64, OWNER_BLOCK);
        assert_eq!(crc32c::crc32c(&b[..b.len() - 4]), 0xf10a_c7ef);
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_795_000_000), "2026-11-18 11:06:40 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
    }
}
