//! What the file system tests share: a small namespace to act on by path, a
//! snapshot of a whole tree, and random operations.
#![allow(dead_code)] // each test binary uses part of it

pub mod concurrent_cut;
pub mod extreme;
pub mod power_cut;

use std::collections::BTreeMap;

use hscm_fs::{Allocate, Error, FileSystem, Kind, Owner, RenameFlags, SetAttr, ROOT};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub const OWNER: Owner = Owner { uid: 0, gid: 0 };

/// Offsets within a few blocks, around block boundaries so that edges are common:
/// what the data-path property tests write, truncate and punch at. (Only in test
/// builds: the fuzz targets that share this module have no proptest.)
#[cfg(test)]
pub fn edge_offset() -> impl proptest::strategy::Strategy<Value = u64> + Clone {
    use proptest::prelude::*;
    prop_oneof![
        0..40_000u64,
        (0..10u64).prop_map(|b| b * 4096),
        (1..10u64).prop_map(|b| b * 4096 - 1)
    ]
}

/// One node of a snapshot: what a reader of the tree can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir {
        perm: u16,
    },
    /// Contents, permission bits, the inode's link count and number.
    File {
        data: Vec<u8>,
        perm: u16,
        nlink: u32,
        ino: u64,
    },
    Symlink(Vec<u8>),
}

/// Every path under the root, with what it holds; hard links show as the same
/// contents under two paths, and `links` groups the paths of each inode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub nodes: BTreeMap<String, Node>,
    pub links: Vec<Vec<String>>,
}

pub fn snapshot(fs: &FileSystem) -> Snapshot {
    let mut s = Snapshot::default();
    let mut by_ino: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    walk(fs, ROOT, "", &mut s, &mut by_ino);
    s.links = by_ino.into_values().filter(|v| v.len() > 1).collect();
    s
}

fn walk(
    fs: &FileSystem,
    dir: u64,
    prefix: &str,
    s: &mut Snapshot,
    by_ino: &mut BTreeMap<u64, Vec<String>>,
) {
    for (name, ino, kind) in fs.readdir(dir).unwrap() {
        let path = format!("{prefix}/{}", String::from_utf8_lossy(&name));
        let attr = fs.getattr(ino).unwrap();
        assert_eq!(
            attr.kind, kind,
            "{path}: readdir and getattr agree on its kind"
        );
        let node = match kind {
            Kind::Dir => {
                walk(fs, ino, &path, s, by_ino);
                Node::Dir { perm: attr.perm }
            }
            Kind::File => {
                let data = fs.read(ino, 0, attr.size as u32 + 10).unwrap();
                assert_eq!(
                    data.len() as u64,
                    attr.size,
                    "{path}: a read to the end gives size bytes"
                );
                by_ino.entry(ino).or_default().push(path.clone());
                Node::File {
                    data,
                    perm: attr.perm,
                    nlink: attr.nlink,
                    ino,
                }
            }
            Kind::Symlink => Node::Symlink(fs.readlink(ino).unwrap()),
            other => panic!("{path}: unexpected {other:?}"),
        };
        s.nodes.insert(path, node);
    }
}

impl Snapshot {
    /// One line per path, file contents as length and checksum: readable in a failure.
    pub fn brief(&self) -> String {
        self.nodes
            .iter()
            .map(|(path, node)| match node {
                Node::File {
                    data,
                    perm,
                    nlink,
                    ino,
                } => format!(
                    "{path}: file #{ino} {} bytes crc {:08x} mode {perm:o} links {nlink}",
                    data.len(),
                    crc(data)
                ),
                other => format!("{path}: {other:?}"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn crc(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The inode at `path` ("" is the root).
pub fn resolve(fs: &FileSystem, path: &str) -> Result<u64, Error> {
    let mut ino = ROOT;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = fs.lookup(ino, part.as_bytes())?.ino;
    }
    Ok(ino)
}

/// (parent inode, last name).
pub fn split(fs: &FileSystem, path: &str) -> Result<(u64, String), Error> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    Ok((resolve(fs, dir)?, name.to_string()))
}

/// A path in a small namespace: up to two levels of a few names, so that
/// operations collide often.
pub fn random_path(rng: &mut impl Rng) -> String {
    let names = ["a", "b", "c", "d"];
    let depth = rng.gen_range(1..=2);
    (0..depth)
        .map(|_| names[rng.gen_range(0..names.len())])
        .collect::<Vec<_>>()
        .join("/")
}

/// One operation, run on the file system; its outcome (Ok or the errno) and a
/// description, for failure messages. `touched`: the inodes and byte ranges an
/// operation may have written in place, for the OnFlush check (an end of u64::MAX:
/// to the end of the file).
pub fn random_op(
    fs: &FileSystem,
    rng: &mut impl Rng,
    touched: &mut Vec<(u64, u64, u64)>,
) -> (String, Result<(), i32>) {
    let path = random_path(rng);
    let mut touch = |from: u64, to: u64| {
        if let Ok(ino) = resolve(fs, &path) {
            touched.push((ino, from, to));
        }
    };
    let errno = |r: Result<(), Error>| r.map_err(|e| e.errno());
    let choice = rng.gen_range(0..100);
    let described;
    let outcome = match choice {
        0..=14 => {
            described = format!("create {path}");
            errno(split(fs, &path).and_then(|(p, n)| {
                fs.mknod(p, n.as_bytes(), Kind::File, 0o644, 0, OWNER)
                    .map(|_| ())
            }))
        }
        15..=24 => {
            described = format!("mkdir {path}");
            errno(
                split(fs, &path)
                    .and_then(|(p, n)| fs.mkdir(p, n.as_bytes(), 0o755, OWNER).map(|_| ())),
            )
        }
        25..=49 => {
            let offset = rng.gen_range(0..20_000u64);
            let len = rng.gen_range(1..9_000usize);
            let byte = rng.gen::<u8>() | 1;
            described = format!("write {path} [{offset}, +{len}) = {byte}");
            // A write past the end zeroes the old last block's tail in place.
            let past_end = resolve(fs, &path)
                .and_then(|ino| fs.getattr(ino))
                .is_ok_and(|a| offset > a.size);
            if past_end {
                touch(0, u64::MAX);
            } else {
                touch(offset, offset + len as u64);
            }
            errno(
                resolve(fs, &path)
                    .and_then(|ino| fs.write(ino, offset, &vec![byte; len]).map(|_| ())),
            )
        }
        50..=57 => {
            let size = rng.gen_range(0..24_000u64);
            described = format!("truncate {path} to {size}");
            // Growing zeroes the old last block's tail in place.
            touch(0, u64::MAX);
            errno(resolve(fs, &path).and_then(|ino| {
                fs.setattr(
                    ino,
                    SetAttr {
                        size: Some(size),
                        ..SetAttr::default()
                    },
                )
                .map(|_| ())
            }))
        }
        58..=65 => {
            described = format!("unlink {path}");
            errno(split(fs, &path).and_then(|(p, n)| fs.unlink(p, n.as_bytes())))
        }
        66..=70 => {
            described = format!("rmdir {path}");
            errno(split(fs, &path).and_then(|(p, n)| fs.rmdir(p, n.as_bytes())))
        }
        71..=82 => {
            let to = random_path(rng);
            let flags = match rng.gen_range(0..4) {
                0 => RenameFlags {
                    no_replace: true,
                    exchange: false,
                },
                1 => RenameFlags {
                    no_replace: false,
                    exchange: true,
                },
                _ => RenameFlags::default(),
            };
            described = format!("rename {path} -> {to} {flags:?}");
            errno(split(fs, &path).and_then(|(p, n)| {
                let (q, m) = split(fs, &to)?;
                fs.rename(p, n.as_bytes(), q, m.as_bytes(), flags)
            }))
        }
        83..=87 => {
            let to = random_path(rng);
            described = format!("link {path} -> {to}");
            errno(resolve(fs, &path).and_then(|ino| {
                let (q, m) = split(fs, &to)?;
                fs.link(ino, q, m.as_bytes()).map(|_| ())
            }))
        }
        88..=91 => {
            let offset = rng.gen_range(0..20_000u64);
            let len = rng.gen_range(1..12_000u64);
            let punch = rng.gen_bool(0.5);
            described = format!("fallocate {path} [{offset}, +{len}) punch={punch}");
            touch(0, u64::MAX);
            let mode = if punch {
                Allocate::PunchHole
            } else {
                Allocate::Extend
            };
            errno(resolve(fs, &path).and_then(|ino| fs.fallocate(ino, offset, len, mode)))
        }
        92..=95 => {
            let target = random_path(rng);
            described = format!("symlink {path} -> {target}");
            errno(split(fs, &path).and_then(|(p, n)| {
                fs.symlink(p, n.as_bytes(), target.as_bytes(), OWNER)
                    .map(|_| ())
            }))
        }
        _ => {
            let mode = rng.gen_range(0..0o1000u32);
            described = format!("chmod {path} {mode:o}");
            errno(resolve(fs, &path).and_then(|ino| {
                fs.setattr(
                    ino,
                    SetAttr {
                        mode: Some(mode),
                        ..SetAttr::default()
                    },
                )
                .map(|_| ())
            }))
        }
    };
    (described, outcome)
}

pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}
