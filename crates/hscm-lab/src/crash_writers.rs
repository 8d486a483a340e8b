//! The child side of the kill -9 tests (`hscm debug …`, hidden, not a stable
//! interface): a writer opens a volume (possibly still warming up), a key-value store
//! or a running server's queues, writes stamped data, and reports each
//! acknowledgement on stdout, so the test that kills it knows what must survive.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use hscm_volume::testing::stamped_block;
use hscm_volume::{Durability, OpenOptions, Volume};
use rand::{Rng, SeedableRng};

/// The writers, as `hscm debug` subcommands.
// The variant names are the subcommand names the crash tests call.
#[allow(clippy::enum_variant_names)]
#[derive(clap::Subcommand)]
pub enum Writer {
    /// Write stamped blocks forever, printing "A <block> <version>" after each
    /// acknowledged write; the crash test kills it with SIGKILL.
    CrashWriter {
        path: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 1536)]
        block: usize,
        #[arg(long, default_value = "immediate")]
        durability: Durability,
    },
    /// Key-value puts and deletes in a mode, "A <key> <version>" after each ack.
    KvWriter {
        dir: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value = "sprint")]
        mode: String,
    },
    /// The same through a running `hscm serve` (FUA writes over the ring).
    RingWriter {
        socket: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 4096)]
        block: usize,
    },
}

impl Writer {
    /// Runs the writer until it is killed (or fails).
    pub fn run(&self) -> Result<()> {
        match self {
            Writer::CrashWriter {
                path,
                seed,
                block,
                durability,
            } => crash_writer(path, *seed, *block, *durability),
            Writer::KvWriter { dir, seed, mode } => kv_writer(dir, *seed, mode),
            Writer::RingWriter {
                socket,
                seed,
                block,
            } => ring_writer(socket, *seed, *block),
        }
    }
}

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
        if durability.needs_flush() && rng.gen_ratio(1, 4) {
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
            hscm_ring::WriteFlags::FUA,
        )?;
        writeln!(out, "A {b} {version}")?;
        out.flush()?;
    }
    Ok(())
}

/// The value the kv crash test writes for a key at a version.
pub fn kv_value(key: u64, version: u64) -> Vec<u8> {
    let mut v = format!("{key}/{version}/").into_bytes();
    let len = 64 + (key * 37 + version) as usize % 900;
    while v.len() < len {
        v.push((version as u8).wrapping_add(v.len() as u8));
    }
    v
}

/// The key-value store in `mode` (small buffers, so logs sync and caches churn
/// within a round): puts and deletes of random keys from two threads, each reported
/// as "W|D <key> <version>" before and "A <key> <version>" after it is acknowledged.
pub fn kv_writer(dir: &Path, seed: u64, mode: &str) -> Result<()> {
    use hscm_kv::{KvOptions, KvStore, Mode, Primaries};
    let mode = Mode::from_name(mode).ok_or_else(|| anyhow::anyhow!("unknown mode {mode}"))?;
    let store = KvStore::open(
        dir,
        KvOptions {
            mode,
            buffer_bytes: 48 << 10,
            cache_bytes: 64 << 10,
            // A kill can land between the synced runs of a log sync.
            sync_piece: 8 << 10,
            primaries: Primaries::Fixed(1),
            ..KvOptions::default()
        },
    )?;
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (store, out) = (&store, &out);
            s.spawn(move || -> Result<()> {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(seed * 2 + t);
                // Each thread owns the keys of its parity, so one op per key is in flight.
                for version in (seed << 32).. {
                    let key = rng.gen_range(0..200u64) * 2 + t;
                    let name = format!("key{key}");
                    let delete = rng.gen_ratio(1, 8);
                    {
                        let mut o = out.lock().unwrap();
                        writeln!(o, "{} {key} {version}", if delete { "D" } else { "W" })?;
                        o.flush()?;
                    }
                    if delete {
                        store.delete(name.as_bytes())?;
                    } else {
                        store.put(name.as_bytes(), &kv_value(key, version))?;
                    }
                    if rng.gen_ratio(1, 3) {
                        store.get(name.as_bytes())?;
                    }
                    let mut o = out.lock().unwrap();
                    writeln!(o, "A {key} {version}")?;
                    o.flush()?;
                }
                Ok(())
            });
        }
    });
    Ok(())
}
