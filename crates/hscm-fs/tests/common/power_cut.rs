//! Power cuts under the file system, shared by `tests/power_cut.rs` and the fuzz
//! target `fs_power_cut`: the durable RAM volume on a device model that keeps only
//! what a sync covered plus a random, possibly torn, subset of the rest. The device
//! fails at a chosen write or sync inside the run, then loses power; the volume and
//! the file system are reopened from what survived and compared with what must have
//! survived:
//!
//! * Immediate: every operation that returned; the one that failed may or may not
//!   have happened, wholly (the tree before it or after it, nothing in between).
//! * OnFlush: the tree as of the last fsync (names, kinds, sizes, links, modes, and
//!   every byte no later operation wrote in place).
//!
//! "After it" comes from a twin run on a memory target with the same choices.

use std::sync::Arc;

use hscm_block::MemTarget;
use hscm_fs::{Durability, FileSystem, MountOptions};
use hscm_volume::testing::FaultyBackend;
use hscm_volume::{CreateOptions, OpenOptions, Volume};
use rand::Rng;

use super::*;

pub const SIZE: u64 = 16 << 20;
/// Operations per round, at most (the run stops at the one the failure meets).
pub const OPS: u64 = 120;
pub fn open_volume(dev: &FaultyBackend) -> Arc<Volume> {
    let opts = OpenOptions {
        // The file system decides when to sync; the volume only writes through.
        durability: Some(hscm_volume::Durability::OnFlush),
        ..OpenOptions::default()
    };
    Arc::new(Volume::open_backend(Box::new(dev.clone()), &opts).unwrap())
}

pub fn device() -> FaultyBackend {
    let opts = CreateOptions::default();
    let dev = FaultyBackend::new(opts.backing_len(SIZE) as usize, "fs-dev");
    Volume::format(&dev, SIZE, &opts).unwrap();
    let vol = open_volume(&dev);
    // Old contents everywhere, so that a block whose new data was lost shows as
    // stale rather than as zeroes. Even: never a byte the operations write (odd).
    vol.write_at(0, &vec![STALE; SIZE as usize]).unwrap();
    vol.flush().unwrap();
    FileSystem::format(vol.as_ref(), 0, 0).unwrap();
    dev
}

pub const STALE: u8 = 0xee;

/// The snapshots of a run of `ops` operations chosen by `choices` on a memory
/// target: after each operation (index 0: before any), with fsyncs where the real
/// run has them.
fn twin<R: Rng>(choices: R, ops: u64, durability: Durability) -> Vec<Snapshot> {
    let target = Arc::new(MemTarget::new(SIZE as usize));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let fs = FileSystem::mount(
        target,
        MountOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap();
    let mut rng = choices;
    let mut out = vec![snapshot(&fs)];
    for i in 0..ops {
        let _ = random_op(&fs, &mut rng, &mut Vec::new());
        if durability == Durability::OnFlush && i % 10 == 9 {
            fs.sync_all().unwrap();
        }
        out.push(snapshot(&fs));
    }
    out
}

/// One power-cut round: `OPS` operations chosen by `choices()` (called once for
/// the run and once for its twin: the same choices each time) on the volume's
/// device model, which fails at a write or sync that `seed` picks and then loses
/// power (`seed` also decides what survives); the file system is mounted again
/// from what survived and compared with what must have.
pub fn round<R: Rng>(seed: u64, durability: Durability, choices: impl Fn() -> R) {
    let mut pick = rng(seed ^ 0x5eed);
    let dev = device();
    let vol = open_volume(&dev);
    let fs = FileSystem::mount(
        vol.clone(),
        MountOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap();
    // The device fails for good at a random write or sync of the run (mounting made a
    // few of each already); the operation that meets it fails with EIO or EROFS.
    if pick.gen_bool(0.5) {
        dev.fail_write_after(pick.gen_range(0..OPS), 5);
    } else {
        dev.fail_sync_after(pick.gen_range(0..OPS / 2));
    }
    let mut rng = choices();
    let mut synced = snapshot(&fs);
    let mut touched: Vec<(u64, u64, u64)> = Vec::new();
    let mut failed = None;
    for i in 1..=OPS {
        let (what, outcome) = random_op(&fs, &mut rng, &mut touched);
        if matches!(outcome, Err(5 | 30)) {
            failed = Some((i, what));
            break;
        }
        if durability == Durability::OnFlush && i % 10 == 0 {
            if fs.sync_all().is_err() {
                // The cut lands in this fsync: the tree is the last fsync's or this one's.
                failed = Some((i, "fsync".into()));
                break;
            }
            synced = snapshot(&fs);
            touched.clear();
        }
    }
    let survivor = dev.power_cut(seed);
    drop(fs);
    drop(vol);
    let vol = open_volume(&survivor);
    let fs = FileSystem::mount(
        vol,
        MountOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("seed {seed}: the file system does not mount after the cut: {e}"));
    let found = snapshot(&fs);
    let (at, what) = failed.unwrap_or((OPS, "nothing failed".into()));
    match durability {
        Durability::Immediate => {
            let twin = twin(choices(), at, durability);
            let after = &twin[at as usize];
            let before = &twin[at as usize - 1];
            assert!(
                found == *before || found == *after || partly(&found, before, after),
                "seed {seed}: after a cut inside op {at} ({what}) the tree is neither the one \
                 before it nor the one after it\nfound:\n{}\nbefore:\n{}\nafter:\n{}",
                found.brief(),
                before.brief(),
                after.brief()
            );
        }
        // A cut inside an fsync: its records are one write, which the cut may keep
        // only in part; replay takes the whole records before the first torn one, so
        // the tree is the last fsync's plus the first few operations after it.
        Durability::OnFlush | Durability::WriteBack if what == "fsync" => {
            let twin = twin(choices(), at, durability);
            let since = (at - 10) as usize;
            let prefixes: Vec<&Snapshot> = twin[since..=at as usize].iter().collect();
            check_synced(seed, &found, &prefixes, &synced, &touched);
        }
        Durability::OnFlush | Durability::WriteBack => {
            check_synced(seed, &found, &[&synced], &synced, &touched)
        }
    }
}

/// An interrupted write, truncate or fallocate: the names and every file's
/// metadata as before or as after it, and each byte of a file's contents as before,
/// as after, or zero (a write is not atomic across a crash on any file system; a
/// file's growth zeroes the tail of its last block first).
fn partly(found: &Snapshot, before: &Snapshot, after: &Snapshot) -> bool {
    let names = |s: &Snapshot| s.nodes.keys().cloned().collect::<Vec<_>>();
    if names(found) != names(before) && names(found) != names(after) {
        return false;
    }
    found.nodes.iter().all(|(path, node)| {
        let (b, a) = (before.nodes.get(path), after.nodes.get(path));
        let Node::File {
            data,
            perm,
            nlink,
            ino,
        } = node
        else {
            return Some(node) == b || Some(node) == a;
        };
        [b, a].into_iter().flatten().any(|other| match other {
            Node::File {
                data: d,
                perm: p,
                nlink: n,
                ino: i,
            } => {
                (perm, nlink, ino) == (p, n, i)
                    && [b, a]
                        .into_iter()
                        .flatten()
                        .any(|o| matches!(o, Node::File { data: od, .. } if od.len() == data.len()))
                    && data.iter().enumerate().all(|(k, &x)| {
                        let at = |n: Option<&Node>| match n {
                            Some(Node::File { data, .. }) => data.get(k).copied(),
                            _ => None,
                        };
                        x == 0 || Some(x) == at(b) || Some(x) == at(a) || d.get(k) == Some(&x)
                    })
            }
            _ => false,
        })
    })
}

/// The tree as of the last fsync: everything but bytes written in place since.
/// `shapes`: the trees whose names, kinds, sizes and links may be found.
fn check_synced(
    seed: u64,
    found: &Snapshot,
    shapes: &[&Snapshot],
    synced: &Snapshot,
    touched: &[(u64, u64, u64)],
) {
    let shape = |s: &Snapshot| {
        s.nodes
            .iter()
            .map(|(p, n)| {
                let n = match n {
                    Node::File {
                        data,
                        perm,
                        nlink,
                        ino,
                    } => {
                        format!("file {} {perm:o} {nlink} {ino}", data.len())
                    }
                    other => format!("{other:?}"),
                };
                (p.clone(), n)
            })
            .collect::<Vec<_>>()
    };
    assert!(
        shapes.iter().any(|s| shape(found) == shape(s)),
        "seed {seed}: names, kinds, sizes and links as of the last fsync\nfound:\n{}\nsynced:\n{}",
        found.brief(),
        synced.brief()
    );
    for (path, node) in &synced.nodes {
        let (
            Node::File {
                data: want, ino, ..
            },
            Some(Node::File { data: got, .. }),
        ) = (node, found.nodes.get(path))
        else {
            continue;
        };
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            let written = touched
                .iter()
                .any(|&(t, from, to)| t == *ino && (from..to).contains(&(i as u64)));
            assert!(
                w == g || written,
                "seed {seed}: {path} byte {i} was {w} at the last fsync and nothing wrote it since, now {g}"
            );
        }
    }
}
