//! The metadata: every inode with its attributes, directory entries, block map,
//! symlink target and extended attributes, and the edits that change it. A live
//! operation and a replay after a crash change the metadata through the same
//! [`Meta::apply`], so what a mount rebuilds is what the operations made.

use std::collections::BTreeMap;

use crate::{Error, Result};
use hscm_durable::codec::{Dec, Enc};

/// The root directory's inode number (FUSE's FUSE_ROOT_ID).
pub const ROOT: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::File => 1,
            Kind::Dir => 2,
            Kind::Symlink => 3,
            Kind::Fifo => 4,
            Kind::Socket => 5,
            Kind::CharDevice => 6,
            Kind::BlockDevice => 7,
        }
    }

    fn from_code(c: u8, d: &Dec) -> Result<Kind> {
        Ok(match c {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::CharDevice,
            7 => Kind::BlockDevice,
            other => return Err(d.bad(format!("unknown file kind {other}")).into()),
        })
    }
}

/// A timestamp: seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Time {
    pub secs: i64,
    pub nanos: u32,
}

impl Time {
    pub fn now() -> Time {
        Time::from(std::time::SystemTime::now())
    }
}

impl From<std::time::SystemTime> for Time {
    /// Times before the epoch count as the epoch.
    fn from(t: std::time::SystemTime) -> Time {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Time {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        }
    }
}

/// An inode's attributes: what `stat` shows, less what is derived (blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    /// Permission bits, with setuid, setgid and sticky (mode & 0o7777).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    /// Bytes of blocks allocated to it (`st_blocks` * 512).
    pub allocated: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub crtime: Time,
}

/// What an inode holds beside its attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// File block → target block, for the blocks that are not holes.
    File(BTreeMap<u64, u64>),
    Dir {
        entries: BTreeMap<Vec<u8>, u64>,
        parent: u64,
    },
    Symlink(Vec<u8>),
    /// FIFOs, sockets and device nodes: attributes only.
    Special,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inode {
    pub attr: Attr,
    pub body: Body,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Inode {
    pub fn blocks(&self) -> Option<&BTreeMap<u64, u64>> {
        match &self.body {
            Body::File(b) => Some(b),
            _ => None,
        }
    }

    pub fn entries(&self) -> Option<&BTreeMap<Vec<u8>, u64>> {
        match &self.body {
            Body::Dir { entries, .. } => Some(entries),
            _ => None,
        }
    }
}

/// One change to the metadata. An operation is a list of edits, logged as one record
/// and applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Edit {
    /// A new inode with these attributes and, for a directory, its parent; for a
    /// symlink, its target.
    Create {
        attr: Attr,
        parent: u64,
        target: Vec<u8>,
    },
    /// New attributes for an existing inode (its kind and number do not change).
    SetAttr(Attr),
    /// The inode is gone, with its blocks.
    Drop {
        ino: u64,
    },
    Link {
        dir: u64,
        name: Vec<u8>,
        ino: u64,
    },
    Unlink {
        dir: u64,
        name: Vec<u8>,
    },
    /// A directory moved under another parent.
    Reparent {
        dir: u64,
        parent: u64,
    },
    /// File blocks `[file_block, file_block + count)` now live at target blocks
    /// `[target, target + count)`.
    Map {
        ino: u64,
        file_block: u64,
        target: u64,
        count: u64,
    },
    /// File blocks `[from, to)` become holes.
    Unmap {
        ino: u64,
        from: u64,
        to: u64,
    },
    SetXattr {
        ino: u64,
        name: Vec<u8>,
        value: Vec<u8>,
    },
    RemoveXattr {
        ino: u64,
        name: Vec<u8>,
    },
}

/// Every inode, and the next inode number to give out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub inodes: BTreeMap<u64, Inode>,
    pub next_ino: u64,
    /// What [`Meta::encode`] would return, in bytes: kept by every edit, so that an
    /// operation can be refused before its metadata would outgrow a checkpoint slot.
    encoded_len: u64,
}

/// Encoded bytes of a checkpoint's header: the next inode number and the count.
const HEADER_LEN: u64 = 16;
/// Encoded bytes of an inode's attributes.
const ATTR_LEN: u64 = 8 + 1 + 2 + 4 * 4 + 8 + 8 + 4 * (8 + 4);
/// Encoded bytes of one run of a block map: file block, target block, count.
const RUN_LEN: u64 = 24;
/// Encoded bytes of a length-prefixed byte string, less the bytes themselves.
const BYTES_LEN: u64 = 4;

/// Encoded bytes of a directory entry named `name`.
fn entry_len(name: &[u8]) -> u64 {
    BYTES_LEN + name.len() as u64 + 8
}

/// Encoded bytes of an extended attribute.
fn xattr_len(name: &[u8], value: &[u8]) -> u64 {
    2 * BYTES_LEN + name.len() as u64 + value.len() as u64
}

/// Whether file block `b` starts a run in `blocks` (it is mapped, and block `b - 1`
/// is a hole or maps to a target block that does not precede `b`'s).
fn starts_run(blocks: &BTreeMap<u64, u64>, b: u64) -> bool {
    let Some(&t) = blocks.get(&b) else {
        return false;
    };
    let prev = b.checked_sub(1).and_then(|p| blocks.get(&p));
    !matches!(prev, Some(&pt) if pt.checked_add(1) == Some(t))
}

/// How many runs start at file blocks `[from, to]`: the cost of looking is the
/// number of mapped blocks there.
fn runs_starting_in(blocks: &BTreeMap<u64, u64>, from: u64, to: u64) -> u64 {
    if from > to {
        return 0;
    }
    blocks
        .range(from..=to)
        .filter(|(&b, _)| starts_run(blocks, b))
        .count() as u64
}

impl Inode {
    /// Encoded bytes of this inode in a checkpoint.
    fn encoded_len(&self) -> u64 {
        let body = match &self.body {
            Body::File(blocks) => 8 + RUN_LEN * runs(blocks).len() as u64,
            Body::Dir { entries, .. } => 16 + entries.keys().map(|n| entry_len(n)).sum::<u64>(),
            Body::Symlink(target) => BYTES_LEN + target.len() as u64,
            Body::Special => 0,
        };
        let xattrs: u64 = self.xattrs.iter().map(|(k, v)| xattr_len(k, v)).sum();
        ATTR_LEN + body + 4 + xattrs
    }
}

impl Edit {
    /// The most this edit can add to the encoded metadata, whatever it applies to:
    /// an operation whose edits could outgrow the room left is refused before any
    /// of them is applied.
    pub fn max_growth(&self) -> u64 {
        match self {
            Edit::Create { attr, target, .. } => {
                let body = match attr.kind {
                    Kind::File => 8,
                    Kind::Dir => 16,
                    Kind::Symlink => BYTES_LEN + target.len() as u64,
                    _ => 0,
                };
                ATTR_LEN + body + 4
            }
            Edit::Link { name, .. } => entry_len(name),
            Edit::Map { .. } => MAP_GROWTH,
            // A run split in two by the hole.
            Edit::Unmap { .. } => RUN_LEN,
            Edit::SetXattr { name, value, .. } => xattr_len(name, value),
            Edit::SetAttr(_)
            | Edit::Drop { .. }
            | Edit::Unlink { .. }
            | Edit::Reparent { .. }
            | Edit::RemoveXattr { .. } => 0,
        }
    }
}

/// The most a Map edit adds: a new run, and a run it lands in the middle of split in
/// two.
pub(crate) const MAP_GROWTH: u64 = 2 * RUN_LEN;

/// What the smallest file costs the metadata: its inode and a directory entry with
/// a name of this many bytes (for `statfs`'s count of the files that still fit).
pub(crate) const TYPICAL_NAME_LEN: u64 = 24;

/// Encoded bytes an empty file named with [`TYPICAL_NAME_LEN`] bytes adds.
pub(crate) const FILE_COST: u64 = ATTR_LEN + 8 + 4 + BYTES_LEN + TYPICAL_NAME_LEN + 8;

/// The most a data block adds to the metadata (a run of its own).
pub(crate) const BLOCK_COST: u64 = RUN_LEN;

impl Meta {
    /// A file system with an empty root directory.
    pub fn new(uid: u32, gid: u32, now: Time) -> Meta {
        let mut m = Meta {
            inodes: BTreeMap::new(),
            next_ino: ROOT + 1,
            encoded_len: HEADER_LEN,
        };
        let root = Attr {
            ino: ROOT,
            kind: Kind::Dir,
            perm: 0o755,
            nlink: 2,
            uid,
            gid,
            rdev: 0,
            size: 0,
            allocated: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
        };
        m.apply(&Edit::Create {
            attr: root,
            parent: ROOT,
            target: Vec::new(),
        })
        .expect("an empty file system takes its root");
        m
    }

    /// The bytes [`Meta::encode`] returns, without encoding.
    pub fn encoded_len(&self) -> u64 {
        self.encoded_len
    }

    fn computed_len(&self) -> u64 {
        HEADER_LEN + self.inodes.values().map(Inode::encoded_len).sum::<u64>()
    }

    pub fn get(&self, ino: u64) -> Result<&Inode> {
        self.inodes.get(&ino).ok_or(Error::NotFound)
    }

    fn get_mut(&mut self, ino: u64) -> Result<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(Error::NotFound)
    }

    fn dir_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<Vec<u8>, u64>> {
        match &mut self.get_mut(dir)?.body {
            Body::Dir { entries, .. } => Ok(entries),
            _ => Err(Error::NotDir),
        }
    }

    fn file_mut(&mut self, ino: u64) -> Result<&mut BTreeMap<u64, u64>> {
        match &mut self.get_mut(ino)?.body {
            Body::File(b) => Ok(b),
            _ => Err(Error::Invalid(format!("inode {ino} is not a regular file"))),
        }
    }

    /// Applies one edit; returns the target blocks it released. An edit that does not
    /// fit the metadata (a replay of a damaged log) is an error and changes nothing.
    pub fn apply(&mut self, edit: &Edit) -> Result<Vec<u64>> {
        let mut freed = Vec::new();
        match edit {
            Edit::Create {
                attr,
                parent,
                target,
            } => {
                if self.inodes.contains_key(&attr.ino) {
                    return Err(Error::Corrupt(format!("inode {} created twice", attr.ino)));
                }
                let body = match attr.kind {
                    Kind::File => Body::File(BTreeMap::new()),
                    Kind::Dir => Body::Dir {
                        entries: BTreeMap::new(),
                        parent: *parent,
                    },
                    Kind::Symlink => Body::Symlink(target.clone()),
                    _ => Body::Special,
                };
                let inode = Inode {
                    attr: *attr,
                    body,
                    xattrs: BTreeMap::new(),
                };
                self.encoded_len += inode.encoded_len();
                self.inodes.insert(attr.ino, inode);
                self.next_ino = self.next_ino.max(attr.ino.saturating_add(1));
            }
            Edit::SetAttr(attr) => {
                let inode = self.get_mut(attr.ino)?;
                if inode.attr.kind != attr.kind {
                    return Err(Error::Corrupt(format!("inode {} changed kind", attr.ino)));
                }
                inode.attr = *attr;
            }
            Edit::Drop { ino } => {
                let inode = self.inodes.remove(ino).ok_or(Error::NotFound)?;
                self.encoded_len -= inode.encoded_len();
                if let Body::File(blocks) = inode.body {
                    freed.extend(blocks.into_values());
                }
            }
            Edit::Link { dir, name, ino } => {
                if self.dir_mut(*dir)?.insert(name.clone(), *ino).is_none() {
                    self.encoded_len += entry_len(name);
                }
            }
            Edit::Unlink { dir, name } => {
                self.dir_mut(*dir)?.remove(name).ok_or(Error::NotFound)?;
                self.encoded_len -= entry_len(name);
            }
            Edit::Reparent { dir, parent: p } => match &mut self.get_mut(*dir)?.body {
                Body::Dir { parent, .. } => *parent = *p,
                _ => return Err(Error::NotDir),
            },
            Edit::Map {
                ino,
                file_block,
                target,
                count,
            } => {
                let blocks = self.file_mut(*ino)?;
                // Only runs starting in [file_block, end] can change.
                let end = file_block.saturating_add(*count);
                let before = runs_starting_in(blocks, *file_block, end);
                for i in 0..*count {
                    if let Some(old) = blocks.insert(file_block + i, target + i) {
                        freed.push(old);
                    }
                }
                let after = runs_starting_in(blocks, *file_block, end);
                self.encoded_len = self.encoded_len + RUN_LEN * after - RUN_LEN * before;
            }
            Edit::Unmap { ino, from, to } => {
                let blocks = self.file_mut(*ino)?;
                let before = runs_starting_in(blocks, *from, *to);
                let gone: Vec<u64> = blocks.range(*from..*to).map(|(&k, _)| k).collect();
                for k in gone {
                    freed.extend(blocks.remove(&k));
                }
                let after = runs_starting_in(blocks, *from, *to);
                self.encoded_len = self.encoded_len + RUN_LEN * after - RUN_LEN * before;
            }
            Edit::SetXattr { ino, name, value } => {
                let old = self
                    .get_mut(*ino)?
                    .xattrs
                    .insert(name.clone(), value.clone());
                if let Some(old) = old {
                    self.encoded_len -= xattr_len(name, &old);
                }
                self.encoded_len += xattr_len(name, value);
            }
            Edit::RemoveXattr { ino, name } => {
                let old = self
                    .get_mut(*ino)?
                    .xattrs
                    .remove(name)
                    .ok_or(Error::NoAttribute)?;
                self.encoded_len -= xattr_len(name, &old);
            }
        }
        Ok(freed)
    }

    /// Every target block some file maps.
    pub fn mapped_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.inodes
            .values()
            .filter_map(|i| i.blocks())
            .flat_map(|b| b.values().copied())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u64(self.next_ino).u64(self.inodes.len() as u64);
        for inode in self.inodes.values() {
            encode_attr(&mut e, &inode.attr);
            match &inode.body {
                Body::File(blocks) => {
                    let runs = runs(blocks);
                    e.u64(runs.len() as u64);
                    for (file_block, target, count) in runs {
                        e.u64(file_block).u64(target).u64(count);
                    }
                }
                Body::Dir { entries, parent } => {
                    e.u64(*parent).u64(entries.len() as u64);
                    for (name, ino) in entries {
                        e.bytes(name).u64(*ino);
                    }
                }
                Body::Symlink(target) => {
                    e.bytes(target);
                }
                Body::Special => {}
            }
            e.u32(inode.xattrs.len() as u32);
            for (k, v) in &inode.xattrs {
                e.bytes(k).bytes(v);
            }
        }
        e.0
    }

    /// The metadata a checkpoint holds, for a target of `target_blocks` blocks (no
    /// file maps a block outside it).
    pub fn decode(bytes: &[u8], target_blocks: u64) -> Result<Meta> {
        let mut d = Dec::new(bytes, "the checkpoint");
        let next_ino = d.u64()?;
        let count = d.u64()?;
        let mut inodes = BTreeMap::new();
        for _ in 0..count {
            let attr = decode_attr(&mut d)?;
            let body = match attr.kind {
                Kind::File => {
                    let mut blocks = BTreeMap::new();
                    for _ in 0..d.u64()? {
                        let (file_block, target, count) = (d.u64()?, d.u64()?, d.u64()?);
                        if target
                            .checked_add(count)
                            .is_none_or(|end| end > target_blocks)
                            || file_block.checked_add(count).is_none()
                        {
                            return Err(d
                                .bad(format!(
                                    "a run of {count} blocks at {target} (of {target_blocks})"
                                ))
                                .into());
                        }
                        for i in 0..count {
                            blocks.insert(file_block + i, target + i);
                        }
                    }
                    Body::File(blocks)
                }
                Kind::Dir => {
                    let parent = d.u64()?;
                    let mut entries = BTreeMap::new();
                    for _ in 0..d.u64()? {
                        let name = d.bytes()?;
                        entries.insert(name, d.u64()?);
                    }
                    Body::Dir { entries, parent }
                }
                Kind::Symlink => Body::Symlink(d.bytes()?),
                _ => Body::Special,
            };
            let mut xattrs = BTreeMap::new();
            for _ in 0..d.u32()? {
                let k = d.bytes()?;
                xattrs.insert(k, d.bytes()?);
            }
            inodes.insert(attr.ino, Inode { attr, body, xattrs });
        }
        if !d.is_empty() {
            return Err(d.bad("bytes after the last inode").into());
        }
        if !matches!(inodes.get(&ROOT), Some(i) if i.attr.kind == Kind::Dir) {
            return Err(Error::Corrupt(
                "the checkpoint has no root directory".into(),
            ));
        }
        let mut meta = Meta {
            inodes,
            next_ino,
            encoded_len: 0,
        };
        // Not `bytes.len()`: a checkpoint another writer made may hold runs or
        // entries that encode shorter.
        meta.encoded_len = meta.computed_len();
        Ok(meta)
    }
}

/// A block map as runs: (file block, target block, count).
pub(crate) fn runs(blocks: &BTreeMap<u64, u64>) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for (&f, &t) in blocks {
        match out.last_mut() {
            Some((f0, t0, n)) if *f0 + *n == f && *t0 + *n == t => *n += 1,
            _ => out.push((f, t, 1)),
        }
    }
    out
}

fn encode_attr(e: &mut Enc, a: &Attr) {
    e.u64(a.ino)
        .u8(a.kind.code())
        .u16(a.perm)
        .u32(a.nlink)
        .u32(a.uid)
        .u32(a.gid)
        .u32(a.rdev)
        .u64(a.size)
        .u64(a.allocated);
    for t in [a.atime, a.mtime, a.ctime, a.crtime] {
        e.i64(t.secs).u32(t.nanos);
    }
}

fn decode_attr(d: &mut Dec) -> Result<Attr> {
    let ino = d.u64()?;
    let kind = Kind::from_code(d.u8()?, d)?;
    let (perm, nlink, uid, gid, rdev) = (d.u16()?, d.u32()?, d.u32()?, d.u32()?, d.u32()?);
    let (size, allocated) = (d.u64()?, d.u64()?);
    let mut t = [Time::default(); 4];
    for slot in &mut t {
        *slot = Time {
            secs: d.i64()?,
            nanos: d.u32()?,
        };
    }
    Ok(Attr {
        ino,
        kind,
        perm,
        nlink,
        uid,
        gid,
        rdev,
        size,
        allocated,
        atime: t[0],
        mtime: t[1],
        ctime: t[2],
        crtime: t[3],
    })
}

pub(crate) fn encode_edits(edits: &[Edit]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(edits.len() as u32);
    for edit in edits {
        match edit {
            Edit::Create {
                attr,
                parent,
                target,
            } => {
                e.u8(1);
                encode_attr(&mut e, attr);
                e.u64(*parent).bytes(target);
            }
            Edit::SetAttr(attr) => {
                e.u8(2);
                encode_attr(&mut e, attr);
            }
            Edit::Drop { ino } => {
                e.u8(3).u64(*ino);
            }
            Edit::Link { dir, name, ino } => {
                e.u8(4).u64(*dir).bytes(name).u64(*ino);
            }
            Edit::Unlink { dir, name } => {
                e.u8(5).u64(*dir).bytes(name);
            }
            Edit::Reparent { dir, parent } => {
                e.u8(6).u64(*dir).u64(*parent);
            }
            Edit::Map {
                ino,
                file_block,
                target,
                count,
            } => {
                e.u8(7).u64(*ino).u64(*file_block).u64(*target).u64(*count);
            }
            Edit::Unmap { ino, from, to } => {
                e.u8(8).u64(*ino).u64(*from).u64(*to);
            }
            Edit::SetXattr { ino, name, value } => {
                e.u8(9).u64(*ino).bytes(name).bytes(value);
            }
            Edit::RemoveXattr { ino, name } => {
                e.u8(10).u64(*ino).bytes(name);
            }
        }
    }
    e.0
}

pub(crate) fn decode_edits(bytes: &[u8]) -> Result<Vec<Edit>> {
    let mut d = Dec::new(bytes, "a log record");
    let n = d.u32()?;
    let mut edits = Vec::with_capacity(n.min(1024) as usize);
    for _ in 0..n {
        let edit = match d.u8()? {
            1 => Edit::Create {
                attr: decode_attr(&mut d)?,
                parent: d.u64()?,
                target: d.bytes()?,
            },
            2 => Edit::SetAttr(decode_attr(&mut d)?),
            3 => Edit::Drop { ino: d.u64()? },
            4 => Edit::Link {
                dir: d.u64()?,
                name: d.bytes()?,
                ino: d.u64()?,
            },
            5 => Edit::Unlink {
                dir: d.u64()?,
                name: d.bytes()?,
            },
            6 => Edit::Reparent {
                dir: d.u64()?,
                parent: d.u64()?,
            },
            7 => Edit::Map {
                ino: d.u64()?,
                file_block: d.u64()?,
                target: d.u64()?,
                count: d.u64()?,
            },
            8 => Edit::Unmap {
                ino: d.u64()?,
                from: d.u64()?,
                to: d.u64()?,
            },
            9 => Edit::SetXattr {
                ino: d.u64()?,
                name: d.bytes()?,
                value: d.bytes()?,
            },
            10 => Edit::RemoveXattr {
                ino: d.u64()?,
                name: d.bytes()?,
            },
            other => return Err(d.bad(format!("unknown edit {other}")).into()),
        };
        edits.push(edit);
    }
    if !d.is_empty() {
        return Err(d.bad("bytes after the last edit").into());
    }
    Ok(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint holding one file whose blocks are the target's `[1000, 1010)`.
    fn checkpoint_mapping_blocks_1000_to_1010() -> Vec<u8> {
        let now = Time::now();
        let mut m = Meta::new(0, 0, now);
        let file = Attr {
            ino: 2,
            kind: Kind::File,
            perm: 0o644,
            ..m.get(ROOT).unwrap().attr
        };
        m.apply(&Edit::Create {
            attr: file,
            parent: ROOT,
            target: Vec::new(),
        })
        .unwrap();
        m.apply(&Edit::Map {
            ino: 2,
            file_block: 0,
            target: 1000,
            count: 10,
        })
        .unwrap();
        m.encode()
    }

    #[test]
    fn a_checkpoint_mapping_blocks_past_the_target_is_refused_by_name() {
        let bytes = checkpoint_mapping_blocks_1000_to_1010();
        assert!(Meta::decode(&bytes, 1010).is_ok());
        let err = Meta::decode(&bytes, 1005).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt(why) if why.contains("a run of 10 blocks at 1000 (of 1005)")),
            "{err}"
        );
    }
}
