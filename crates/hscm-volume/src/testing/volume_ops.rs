//! Whole-volume operation sequences against a model, for fuzzing (after redb's
//! `fuzz_redb.rs`): bytes decode into a volume layout and a sequence of block-layer
//! requests, loader steps, injected device failures (a countdown to a failing write or
//! sync), power cuts and clean closes, each followed by a reopen that must find what
//! the model says may have survived.
//!
//! The model works in 512-byte blocks, the unit [`FaultyBackend::power_cut`] tears at.
//! Per block it keeps what a read may return (one value, or two after a failed request
//! whose bytes may or may not have reached RAM) and what a restart may find: the last
//! value known durable and every value written since. The engine writes whole sectors
//! from its RAM copy, so every block on the device holds one of those versions.
//!
//! The same function backs the `volume_ops` cargo-fuzz target and a bounded run in the
//! crate's tests (`tests/volume_ops.rs`), so the test command fuzzes too. The driver is
//! generic over the [`Engine`] it runs ([`run_engine`]): the tiered volume
//! (`hscm-tier`) runs the same sequences and model through it.

use hscm_block::{BlockTarget, WriteFlags, ZeroFlags};
use rustix::io::Errno;

use super::FaultyBackend;
use crate::{CreateOptions, Durability, OpenOptions, Volume, MIN_JOURNAL};

/// The fuzzed volume's size: 16 sectors, so sequences revisit the same bytes.
pub const VOLUME_SIZE: u64 = 64 << 10;
const CHUNK: u32 = 8 << 10;
const BLOCK: usize = 512;
const BLOCKS: usize = VOLUME_SIZE as usize / BLOCK;
/// The longest request drawn: a few chunks, so requests cross chunk boundaries.
const MAX_REQUEST: u64 = 20_000;

/// One step of a sequence.
#[derive(Debug, Clone)]
pub enum Op {
    Write {
        offset: u64,
        len: u64,
        seed: u8,
        fua: bool,
    },
    Read {
        offset: u64,
        len: u64,
        /// Read through the lending interface rather than into a buffer.
        lend: bool,
    },
    Flush,
    Discard {
        offset: u64,
        len: u64,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        len: u64,
        fua: bool,
    },
    LoadStep,
    Checkpoint,
    /// The `after`-th device write from now fails with `errno`, and every one after it.
    FailWrite {
        after: u64,
        errno: i32,
    },
    /// The `after`-th device sync from now fails, and every one after it.
    FailSync {
        after: u64,
    },
    /// The power goes; the volume restarts on what the device kept.
    PowerCut {
        seed: u64,
        background_load: bool,
    },
    /// A clean close, then a power cut: nothing may be lost.
    CloseAndReopen {
        seed: u64,
    },
}

/// What a sequence did, for the runner's summary.
#[derive(Debug, Default, Clone, Copy)]
pub struct Outcome {
    pub ops: usize,
    pub restarts: usize,
    pub refused: usize,
}

/// Runs every input through `run` (the driver for one engine), panicking at the first
/// broken promise with the input in hex (to save and replay), and checks that the
/// inputs reached the interesting paths: more restarts than sequences, and at least one
/// request refused after a failure. Returns the totals.
/// How many seeded sequences a bounded run in `cargo test` tries: `HSCM_FUZZ_CASES`
/// when set (for a longer run), else `default`.
pub fn fuzz_cases(default: usize) -> usize {
    std::env::var("HSCM_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Runs every input saved under `dirs` (regression inputs kept with the tests, and
/// whatever a local cargo-fuzz run left in its untracked corpus; a missing directory
/// holds none) through `run`, panicking with the file's name at the first that
/// breaks a promise. How many it ran.
pub fn replay_saved<T>(
    dirs: &[&std::path::Path],
    run: impl Fn(&[u8]) -> Result<T, String>,
) -> usize {
    let mut replayed = 0;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let input = std::fs::read(&path).expect("a saved input");
            if let Err(broken) = run(&input) {
                panic!("{}: {broken}", path.display());
            }
            replayed += 1;
        }
    }
    replayed
}

pub fn check_sequences(
    inputs: impl IntoIterator<Item = Vec<u8>>,
    run: impl Fn(&[u8]) -> Result<Outcome, String>,
) -> Outcome {
    let mut total = Outcome::default();
    let mut cases = 0;
    for input in inputs {
        cases += 1;
        match run(&input) {
            Ok(o) => {
                total.ops += o.ops;
                total.restarts += o.restarts;
                total.refused += o.refused;
            }
            Err(broken) => {
                let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
                panic!("{broken}\ninput (hex): {hex}");
            }
        }
    }
    assert!(
        total.restarts > cases,
        "only {} restarts in {cases} sequences",
        total.restarts
    );
    assert!(
        total.refused > 0,
        "no request was ever refused after a failure"
    );
    total
}

/// An engine the driver runs: a block target over a [`FaultyBackend`] that closes
/// cleanly; the volume's loader step and checkpoint are its own extra steps.
pub trait Engine: Sized {
    fn target(&self) -> &dyn BlockTarget;
    /// One step of background work, if the engine has any (the volume's loader).
    fn load_step(&self) -> Result<(), String> {
        Ok(())
    }
    /// Writes what it holds back home, if it defers that (the volume's checkpoint).
    fn checkpoint(&self) -> Result<(), String> {
        Ok(())
    }
    /// A clean close: afterwards everything acknowledged is durable.
    fn close(self) -> Result<(), String>;
}

impl Engine for Volume {
    fn target(&self) -> &dyn BlockTarget {
        self
    }
    fn load_step(&self) -> Result<(), String> {
        Volume::load_step(self)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn checkpoint(&self) -> Result<(), String> {
        Volume::checkpoint(self).map_err(|e| e.to_string())
    }
    fn close(self) -> Result<(), String> {
        Volume::close(self).map_err(|e| e.to_string())
    }
}

/// What an engine's runner sets up from the input's first byte.
pub struct Setup<E> {
    pub durability: Durability,
    /// The formatted device (the engine's on-media layout already on it).
    pub device: FaultyBackend,
    /// Opens the engine on a device (`true`: let background work run by itself).
    #[allow(clippy::type_complexity)]
    pub open: Box<dyn Fn(&FaultyBackend, bool) -> Result<E, String>>,
    /// Names the layout in failure messages.
    pub describe: String,
}

/// Runs the sequence `input` decodes to. `Err` describes the first broken promise
/// (the step, the request and what was read); anything else is a pass.
pub fn run(input: &[u8]) -> Result<Outcome, String> {
    run_engine(input, |layout| {
        let journaled = layout & 2 != 0;
        // Write-back sessions exist only without a journal.
        let durability = match (layout & 1, layout & 8 != 0 && !journaled) {
            (_, true) => Durability::WriteBack,
            (0, false) => Durability::Immediate,
            _ => Durability::OnFlush,
        };
        let opts = CreateOptions {
            chunk_size: CHUNK,
            durability,
            overwrite: false,
            journal_size: if journaled { MIN_JOURNAL } else { 0 },
        };
        let device = FaultyBackend::new(opts.backing_len(VOLUME_SIZE) as usize, "fuzzed device");
        Volume::format(&device, VOLUME_SIZE, &opts).map_err(|e| format!("format: {e}"))?;
        Ok(Setup {
            durability,
            device,
            open: Box::new(open),
            describe: format!("{durability:?}, journaled {journaled}"),
        })
    })
}

/// [`run`] for any engine: `setup` turns the input's first byte into a formatted
/// device and the way to open the engine on it. Every engine is driven over a
/// [`VOLUME_SIZE`]-byte target.
pub fn run_engine<E: Engine>(
    input: &[u8],
    setup: impl FnOnce(u8) -> Result<Setup<E>, String>,
) -> Result<Outcome, String> {
    let mut input = Input {
        bytes: input,
        at: 0,
    };
    let Some(layout) = input.byte() else {
        return Ok(Outcome::default());
    };
    let Setup {
        durability,
        mut device,
        open,
        describe,
    } = setup(layout)?;
    let mut volume = open(&device, layout & 4 != 0)?;
    let mut model = Model::new(durability);
    let mut outcome = Outcome::default();
    let mut step = 0;
    while let Some(op) = input.op() {
        step += 1;
        let context = |what: String| format!("step {step} ({op:?}), {describe}: {what}");
        let restart = match op {
            Op::FailWrite { after, errno } => {
                model.armed = true;
                device.fail_write_after(after, errno);
                None
            }
            Op::FailSync { after } => {
                model.armed = true;
                device.fail_sync_after(after);
                None
            }
            Op::PowerCut {
                seed,
                background_load,
            } => Some((seed, background_load, false)),
            Op::CloseAndReopen { seed } => Some((seed, seed & 2 == 0, true)),
            _ => {
                if model.apply(&volume, &op).map_err(context)? == Applied::Refused {
                    outcome.refused += 1;
                }
                None
            }
        };
        if let Some((seed, background_load, clean)) = restart {
            if clean {
                let closed = volume.close();
                model.closed(closed.is_ok()).map_err(context)?;
            } else {
                drop(volume);
            }
            device = device.power_cut(seed);
            volume = open(&device, background_load).map_err(context)?;
            model.restarted(volume.target()).map_err(context)?;
            outcome.restarts += 1;
        }
        outcome.ops += 1;
    }
    if !model.poisoned {
        // A last clean close must keep everything.
        let closed = volume.close();
        model
            .closed(closed.is_ok())
            .map_err(|e| format!("final close: {e}"))?;
        let survivor = device.power_cut(1);
        let volume = open(&survivor, false).map_err(|e| format!("final reopen: {e}"))?;
        model
            .restarted(volume.target())
            .map_err(|e| format!("after the final close: {e}"))?;
    }
    Ok(outcome)
}

fn open(device: &FaultyBackend, background_load: bool) -> Result<Volume, String> {
    let opts = OpenOptions {
        background_load,
        huge_pages: false,
        ..OpenOptions::default()
    };
    Volume::open_backend(Box::new(device.clone()), &opts)
        .map_err(|e| format!("reopen refused: {e}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    Done,
    /// The first request to fail after a failure was injected: it may or may not have
    /// changed anything.
    Failed,
    /// Refused after an injected failure, as it must be: it changed nothing.
    Refused,
}

struct Model {
    durability: Durability,
    blocks: Vec<Block>,
    /// A failure was injected and not yet observed.
    armed: bool,
    /// A request failed: the volume must refuse writes until it restarts.
    poisoned: bool,
    /// Numbers the versions written, so equal seeds still write different bytes.
    writes: u64,
}

struct Block {
    /// What a read may return.
    live: Vec<Box<[u8]>>,
    /// What a restart may find: the last value known durable, then every later one.
    survivors: Vec<Box<[u8]>>,
}

impl Model {
    fn new(durability: Durability) -> Model {
        let zero: Box<[u8]> = vec![0u8; BLOCK].into();
        Model {
            durability,
            blocks: (0..BLOCKS)
                .map(|_| Block {
                    live: vec![zero.clone()],
                    survivors: vec![zero.clone()],
                })
                .collect(),
            armed: false,
            poisoned: false,
            writes: 0,
        }
    }

    fn apply<E: Engine>(&mut self, volume: &E, op: &Op) -> Result<Applied, String> {
        let target = volume.target();
        match *op {
            Op::Write {
                offset,
                len,
                seed,
                fua,
            } => {
                self.writes += 1;
                let version = self.writes;
                let data: Vec<u8> = (0..len)
                    .map(|i| {
                        (i as u8).wrapping_mul(seed | 1) ^ (version as u8) ^ ((version >> 8) as u8)
                    })
                    .collect();
                let result = target.write_at(offset, &data, WriteFlags { fua });
                self.written(offset, &data, fua, result.map_err(|e| e.to_string()))
            }
            Op::Discard { offset, len, fua } => {
                let result = target.discard(offset, len, WriteFlags { fua });
                self.written(
                    offset,
                    &vec![0; len as usize],
                    fua,
                    result.map_err(|e| e.to_string()),
                )
            }
            Op::WriteZeroes { offset, len, fua } => {
                let flags = ZeroFlags {
                    fua,
                    may_trim: true,
                    fast_only: false,
                };
                let result = target.write_zeroes(offset, len, flags);
                self.written(
                    offset,
                    &vec![0; len as usize],
                    fua,
                    result.map_err(|e| e.to_string()),
                )
            }
            Op::Read { offset, len, lend } => {
                let mut got = vec![0u8; len as usize];
                let read = if lend {
                    target.read_with(offset, len as usize, &mut |at, bytes| {
                        got[at..at + bytes.len()].copy_from_slice(bytes)
                    })
                } else {
                    target.read_at(offset, &mut got)
                };
                read.map_err(|e| format!("a read failed: {e}"))?;
                self.check_live(offset, &got)?;
                Ok(Applied::Done)
            }
            Op::Flush => {
                let result = target.flush();
                let outcome = self.outcome(result.map_err(|e| e.to_string()))?;
                if outcome == Applied::Done {
                    for b in &mut self.blocks {
                        b.survivors = vec![b.live[0].clone()];
                    }
                }
                Ok(outcome)
            }
            Op::LoadStep => {
                volume
                    .load_step()
                    .map_err(|e| format!("a loader step failed: {e}"))?;
                Ok(Applied::Done)
            }
            Op::Checkpoint => self.outcome(volume.checkpoint()),
            Op::FailWrite { .. }
            | Op::FailSync { .. }
            | Op::PowerCut { .. }
            | Op::CloseAndReopen { .. } => {
                unreachable!("the runner handles device events")
            }
        }
    }

    /// Judges a write-like request's result and records what it changed.
    fn written(
        &mut self,
        offset: u64,
        data: &[u8],
        fua: bool,
        result: Result<(), String>,
    ) -> Result<Applied, String> {
        let durable = fua || self.durability == Durability::Immediate;
        let outcome = self.outcome(result)?;
        for (index, range) in touched_blocks(offset, data.len() as u64) {
            let block = &mut self.blocks[index];
            // Writes succeed only with one known value (a refused request changes nothing).
            let before = block.live[0].clone();
            let mut after = before.to_vec();
            after[range.clone()].copy_from_slice(
                &data[range.start + index * BLOCK - offset as usize..][..range.len()],
            );
            let after: Box<[u8]> = after.into();
            match outcome {
                Applied::Refused => {}
                Applied::Done => {
                    block.live = vec![after.clone()];
                    if durable {
                        block.survivors = vec![after];
                    } else {
                        push_new(&mut block.survivors, after);
                    }
                }
                // The request that failed may have changed RAM and the device, or not.
                Applied::Failed => {
                    push_new(&mut block.live, after.clone());
                    push_new(&mut block.survivors, after);
                }
            }
        }
        Ok(outcome)
    }

    /// Ok is a promise kept unless the volume owes a refusal; an error must come from an
    /// injected failure.
    fn outcome(&mut self, result: Result<(), String>) -> Result<Applied, String> {
        match result {
            Ok(()) if self.poisoned => Err("a request succeeded after the device failed".into()),
            Ok(()) => Ok(Applied::Done),
            Err(e) if !self.armed && !self.poisoned => {
                Err(format!("failed with no failure injected: {e}"))
            }
            Err(_) if self.poisoned => Ok(Applied::Refused),
            Err(_) => {
                self.poisoned = true;
                Ok(Applied::Failed)
            }
        }
    }

    fn check_live(&self, offset: u64, got: &[u8]) -> Result<(), String> {
        for (index, range) in touched_blocks(offset, got.len() as u64) {
            let seen = &got[range.start + index * BLOCK - offset as usize..][..range.len()];
            let block = &self.blocks[index];
            if !block.live.iter().any(|v| &v[range.clone()] == seen) {
                return Err(format!(
                    "read at {offset}+{}: bytes {}..{} of block {index} match none of the {} value(s) it may hold",
                    got.len(),
                    range.start,
                    range.end,
                    block.live.len()
                ));
            }
        }
        Ok(())
    }

    /// A clean close that succeeded made everything durable.
    fn closed(&mut self, ok: bool) -> Result<(), String> {
        if ok && self.poisoned {
            return Err("close succeeded after the device failed".into());
        }
        if !ok && !self.armed && !self.poisoned {
            return Err("close failed with no failure injected".into());
        }
        if ok {
            for b in &mut self.blocks {
                b.survivors = vec![b.live[0].clone()];
            }
        }
        Ok(())
    }

    /// After a restart: every block holds a version that may have survived; from here
    /// on it is the one known value.
    fn restarted(&mut self, volume: &dyn BlockTarget) -> Result<(), String> {
        let mut image = vec![0u8; VOLUME_SIZE as usize];
        volume
            .read_at(0, &mut image)
            .map_err(|e| format!("reading after the restart: {e}"))?;
        for (index, block) in self.blocks.iter_mut().enumerate() {
            let seen = &image[index * BLOCK..][..BLOCK];
            if !block.survivors.iter().any(|v| &v[..] == seen) {
                let newest = block.survivors.last().map(|v| v[..8].to_vec());
                return Err(format!(
                    "after the restart block {index} (bytes {}..{}) holds none of the {} version(s) that may survive \
                     (starts {:?}, the newest written starts {newest:?})",
                    index * BLOCK,
                    (index + 1) * BLOCK,
                    block.survivors.len(),
                    &seen[..8]
                ));
            }
            let seen: Box<[u8]> = seen.into();
            block.live = vec![seen.clone()];
            block.survivors = vec![seen];
        }
        self.armed = false;
        self.poisoned = false;
        Ok(())
    }
}

fn push_new(versions: &mut Vec<Box<[u8]>>, v: Box<[u8]>) {
    if !versions.contains(&v) {
        versions.push(v);
    }
}

/// The blocks `[offset, offset + len)` touches, each with the byte range inside it.
fn touched_blocks(offset: u64, len: u64) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> {
    let end = offset + len;
    let first = (offset / BLOCK as u64) as usize;
    let last = if len == 0 {
        first
    } else {
        ((end - 1) / BLOCK as u64) as usize + 1
    };
    (first..last).map(move |index| {
        let start = (index * BLOCK) as u64;
        let from = offset.max(start) - start;
        let to = end.min(start + BLOCK as u64) - start;
        (index, from as usize..to as usize)
    })
}

/// Reads the input a few bytes at a time; a sequence ends where the bytes do.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.byte()?, self.byte()?]))
    }

    /// A value in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> Option<u64> {
        Some(u64::from(self.u16()?) % n)
    }

    /// A byte range inside the volume, at any offset and length.
    fn range(&mut self) -> Option<(u64, u64)> {
        let offset = self.below(VOLUME_SIZE)?;
        let len = 1 + self.below((VOLUME_SIZE - offset).min(MAX_REQUEST))?;
        Some((offset, len))
    }

    /// Whole sectors, at most three.
    fn sectors(&mut self) -> Option<(u64, u64)> {
        let sectors = VOLUME_SIZE / crate::IO_ALIGN;
        let first = self.below(sectors)?;
        let count = 1 + self.below((sectors - first).min(3))?;
        Some((first * crate::IO_ALIGN, count * crate::IO_ALIGN))
    }

    fn op(&mut self) -> Option<Op> {
        let kind = self.byte()?;
        Some(match kind % 32 {
            // Writes at any offset and length, or in whole sectors: the engine's path
            // that writes without loading the chunk first.
            class @ 0..=10 => {
                let (offset, len) = if class <= 7 {
                    self.range()?
                } else {
                    self.sectors()?
                };
                let seed = self.byte()?;
                let fua = seed & 0x80 != 0;
                Op::Write {
                    offset,
                    len,
                    seed,
                    fua,
                }
            }
            class @ (11..=15 | 18..=21) => {
                let (offset, len) = self.range()?;
                let flag = kind & 0x80 != 0;
                match class {
                    11..=15 => Op::Read {
                        offset,
                        len,
                        lend: flag,
                    },
                    18..=19 => Op::Discard {
                        offset,
                        len,
                        fua: flag,
                    },
                    _ => Op::WriteZeroes {
                        offset,
                        len,
                        fua: flag,
                    },
                }
            }
            16..=17 => Op::Flush,
            22..=24 => Op::LoadStep,
            25 => Op::Checkpoint,
            26 => {
                let b = self.byte()?;
                let errno = if b & 1 == 0 { Errno::IO } else { Errno::NOSPC }.raw_os_error();
                Op::FailWrite {
                    after: u64::from(b >> 1) % 16,
                    errno,
                }
            }
            27 => Op::FailSync {
                after: u64::from(self.byte()?) % 8,
            },
            28..=30 => {
                let seed = u64::from(self.u16()?) | 1;
                Op::PowerCut {
                    seed,
                    background_load: kind & 0x80 != 0,
                }
            }
            _ => Op::CloseAndReopen {
                seed: u64::from(self.u16()?) | 1,
            },
        })
    }
}
