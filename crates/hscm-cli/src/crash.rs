//! The child side of the kill -9 test: opens a volume (possibly still warming up) and
//! writes stamped blocks, reporting each acknowledgement on stdout.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use hscm_store::testing::stamped_block;
use hscm_store::{Durability, OpenOptions, Volume};
use rand::{Rng, SeedableRng};

pub fn crash_writer(path: &Path, seed: u64, block: usize, durability: Durability) -> Result<()> {
    let vol = Volume::open(
        path,
        &OpenOptions {
            durability: Some(durability),
            ..OpenOptions::default()
        },
    )?;
    let blocks = vol.size() / block as u64;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut out = std::io::stdout().lock();
    // Versions only grow across runs: the seed's high bits keep them apart.
    for version in (seed << 32).. {
        let b = rng.gen_range(0..blocks);
        writeln!(out, "W {b} {version}")?;
        out.flush()?;
        vol.write_at(b * block as u64, &stamped_block(b, version, block))?;
        if durability == Durability::OnFlush && rng.gen_ratio(1, 4) {
            vol.flush()?;
            writeln!(out, "F")?;
        }
        writeln!(out, "A {b} {version}")?;
        out.flush()?;
    }
    Ok(())
}

/// The same, through a server's shared-memory queues: each write is FUA, so an
/// acknowledgement promises durability whatever happens to the server afterwards.
pub fn ring_writer(socket: &Path, seed: u64, block: usize) -> Result<()> {
    anyhow::ensure!(block % 512 == 0, "--block must be whole 512-byte sectors");
    let client = hscm_ring::Client::connect(socket, &hscm_ring::ClientOptions::default())?;
    let mut q = client.queue()?;
    let blocks = client.geometry().volume_size / block as u64;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut out = std::io::stdout().lock();
    for version in (seed << 32).. {
        let b = rng.gen_range(0..blocks);
        writeln!(out, "W {b} {version}")?;
        out.flush()?;
        q.write(
            b * (block as u64 / 512),
            &stamped_block(b, version, block),
            true,
        )?;
        writeln!(out, "A {b} {version}")?;
        out.flush()?;
    }
    Ok(())
}
