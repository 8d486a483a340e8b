//! The file system: mounting (checkpoint, then log replay), the commit of operations'
//! records, checkpoints, and the state every operation shares. The operations are in
//! `names` (the namespace and attributes) and `data` (file contents).

mod data;
mod deferred;
mod loader;
mod log;
mod names;
mod ram;
mod store;
mod sums;

pub use data::Allocate;
pub use loader::RAM_BUDGET_XATTR;
pub use names::{Owner, XATTR_BYTES_PER_INODE};
pub use ram::{FileRam, RamBacking, RamOptions, RamUsage};

use std::collections::HashMap;
use std::sync::Arc;

use hscm_block::{BlockTarget, WriteFlags};
use parking_lot::{Mutex, RwLock};

use log::{log_tail, LogWriter};

use crate::alloc::Allocator;
use crate::format::{self, Geometry, Superblock, BLOCK, FORMAT_VERSION};
use crate::meta::{self, Attr, Body, Edit, Inode, Kind, Meta, Time};
use crate::{Error, Result};

/// When an operation is durable: the one vocabulary every engine shares.
/// `Immediate`: before it returns (every completed write, create, rename… survives a
/// power cut); `OnFlush`: at the next fsync or fdatasync of any file (it commits
/// everything). `WriteBack` is `OnFlush` here: the file system already keeps what was
/// written in RAM until an fsync, so a mount asked for it mounts on-flush.
pub use hscm_durable::Durability;

#[derive(Debug, Clone)]
pub struct MountOptions {
    pub durability: Durability,
    /// Write nothing: no checkpoint at mount, no operation that changes anything.
    pub read_only: bool,
    /// Which files keep their bytes in RAM (docs/fs.md, "RAM by use").
    pub ram: RamOptions,
    /// On-flush: at most this many bytes of files the kernel wrote in RAM may wait,
    /// after their close, for the next fsync to take them home; past it a close
    /// takes them home itself. Bounds the next fsync's work.
    pub dirty_max: u64,
}

/// The default of [`MountOptions::dirty_max`].
pub const DEFAULT_DIRTY_MAX: u64 = 256 << 20;

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            durability: Durability::Immediate,
            read_only: false,
            ram: RamOptions::default(),
            dirty_max: DEFAULT_DIRTY_MAX,
        }
    }
}

/// What `setattr` changes; None leaves it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<Time>,
    pub mtime: Option<Time>,
    /// The setuid and setgid bits the change drops (a chown, a truncate).
    pub drop_setid: DropSetid,
}

/// How a write treats what it cannot fit and the file's setuid and setgid bits.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// All of the bytes or none (ENOSPC): for writers that cannot retry the rest of
    /// a short write. Otherwise a write that does not fit writes what does.
    pub all_or_nothing: bool,
    pub drop_setid: DropSetid,
}

/// No one's group: a caller outside every file's group.
pub const NO_GROUP: u32 = u32::MAX;

/// Which of a file's setuid and setgid bits an operation drops, by Linux's rules.
/// A setgid bit without group execute marks mandatory locking rather than a
/// privilege, so the caller's group decides whether it goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DropSetid {
    /// Neither: the caller holds CAP_FSETID, or the change is not one that drops them.
    #[default]
    Keep,
    /// A write, truncate or fallocate by a caller without CAP_FSETID whose group is
    /// `caller_gid`: setuid; setgid unless the group may not execute and the
    /// caller is in the file's group.
    Modify { caller_gid: u32 },
    /// A chown of a file that is not a directory: setuid always; setgid where the
    /// group may execute, or where the caller is neither privileged nor in the
    /// file's group.
    Chown { caller_gid: u32, privileged: bool },
}

impl DropSetid {
    /// `perm` of a file of group `file_gid` once the operation has dropped them.
    pub fn apply(self, perm: u16, file_gid: u32) -> u16 {
        const SETUID: u16 = 0o4000;
        const SETGID: u16 = 0o2000;
        const GROUP_EXEC: u16 = 0o010;
        let group_exec = perm & GROUP_EXEC != 0;
        let drop_setgid = match self {
            DropSetid::Keep => return perm,
            DropSetid::Modify { caller_gid } => group_exec || caller_gid != file_gid,
            DropSetid::Chown {
                caller_gid,
                privileged,
            } => group_exec || !(privileged || caller_gid == file_gid),
        };
        let mut p = perm & !SETUID;
        if drop_setgid {
            p &= !SETGID;
        }
        p
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RenameFlags {
    /// Fail with `Exists` rather than replace (RENAME_NOREPLACE).
    pub no_replace: bool,
    /// Swap the two names, both of which must exist (RENAME_EXCHANGE).
    pub exchange: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u64,
    pub blocks: u64,
    pub free_blocks: u64,
    pub files: u64,
    pub free_files: u64,
    pub name_max: u32,
}

/// The longest name, as every Linux file system.
pub(crate) const NAME_MAX: usize = 255;

pub struct FileSystem {
    target: Arc<dyn BlockTarget>,
    geometry: Geometry,
    durability: Durability,
    /// Why this mount writes nothing (the target refuses writes, the caller asked,
    /// or the metadata found does not fit a checkpoint slot); None when it writes.
    read_only: Option<String>,
    state: RwLock<State>,
    /// Held for a whole commit, so records reach the log in the order they were made.
    log: Mutex<LogWriter>,
    /// The first failure to write or sync, with its errno (hscm-durable's poison, as
    /// the volumes keep theirs): from then on, writes are refused.
    failed: hscm_durable::Poison,
    /// Held shared by each write into blocks a file already has, from looking the
    /// blocks up until the bytes are on the target (without the state lock, so that
    /// such writes overlap); held exclusively while freed blocks become free for
    /// reuse, so that no such write lands in a block another file has since got.
    in_place: RwLock<()>,
    /// Refuse operations whose metadata would outgrow a checkpoint slot; off only in
    /// tests that make the metadata an hscm without the bound could leave.
    bound_metadata: std::sync::atomic::AtomicBool,
    /// The files' bytes in RAM (`ram.rs`).
    ram: Arc<ram::Ram>,
    /// [`MountOptions::dirty_max`].
    dirty_max: u64,
}

struct State {
    meta: Meta,
    alloc: Allocator,
    /// Records made but not yet on the target: (sequence number, payload).
    unwritten: Vec<(u64, Vec<u8>)>,
    /// Some unwritten record depends on data written before it: blocks it maps for
    /// the first time, or a tail zeroed before the file grew. The next commit syncs
    /// that data before writing the records; without such data, one sync suffices.
    data_first: bool,
    next_seq: u64,
    durable_seq: u64,
    /// Open handles per inode: an unlinked file lives until its last one closes.
    open: HashMap<u64, u32>,
}

impl FileSystem {
    /// Writes an empty file system (a root directory owned by `uid`:`gid`) over the
    /// whole target.
    pub fn format(target: &dyn BlockTarget, uid: u32, gid: u32) -> Result<Geometry> {
        let geometry = Geometry::for_size(target.size())?;
        let meta = Meta::new(uid, gid, Time::now());
        let checkpoint = meta.encode();
        target.write_at(geometry.checkpoint_offset(0), &checkpoint, WriteFlags::NONE)?;
        // A log that starts with anything but record 1 is empty.
        target.write_zeroes(
            geometry.log_offset(),
            BLOCK,
            hscm_block::ZeroFlags::default(),
        )?;
        let sb = Superblock {
            version: FORMAT_VERSION,
            geometry,
            generation: 1,
            slot: 0,
            checkpoint_len: checkpoint.len() as u64,
            checkpoint_crc: crc32c::crc32c(&checkpoint),
            next_seq: 1,
        };
        target.flush()?;
        target.write_at(0, &sb.encode(), WriteFlags::NONE)?;
        // The other copy must not outrank this one.
        target.write_zeroes(BLOCK, BLOCK, hscm_block::ZeroFlags::default())?;
        target.flush()?;
        Ok(geometry)
    }

    /// Mounts the file system on `target`: reads the newest checkpoint, replays the
    /// log after it, drops files that were unlinked while open, and writes a fresh
    /// checkpoint (so that no record of an earlier life can follow the new ones).
    pub fn mount(target: Arc<dyn BlockTarget>, opts: MountOptions) -> Result<FileSystem> {
        let (sb, meta, at, last_seq) = load(target.as_ref())?;
        let geometry = sb.geometry;
        let alloc = Allocator::new(
            geometry.data_blocks(),
            meta.mapped_blocks()
                .map(|b| b.wrapping_sub(geometry.data_start())),
        )?;
        let read_only = if target.capabilities().read_only {
            Some("the target is read-only".to_string())
        } else if opts.read_only {
            Some("mounted read-only".to_string())
        } else if meta.encoded_len() > geometry.checkpoint_len() {
            // Written by an hscm that did not bound its metadata: whatever is there can
            // still be read, but no checkpoint could hold it.
            let why = format!(
                "the metadata ({} bytes) is larger than a checkpoint slot ({} bytes); mounted read-only so its files can be copied out",
                meta.encoded_len(),
                geometry.checkpoint_len()
            );
            tracing::warn!("{why}");
            Some(why)
        } else {
            None
        };
        let tail = log_tail(target.as_ref(), &geometry, at)?;
        let fs = FileSystem {
            target,
            geometry,
            durability: match opts.durability {
                Durability::WriteBack => Durability::OnFlush,
                d => d,
            },
            read_only,
            state: RwLock::new(State {
                meta,
                alloc,
                unwritten: Vec::new(),
                data_first: false,
                next_seq: last_seq + 1,
                durable_seq: last_seq,
                open: HashMap::new(),
            }),
            log: Mutex::new(LogWriter {
                at,
                generation: sb.generation,
                slot: sb.slot,
                tail,
            }),
            failed: hscm_durable::Poison::default(),
            in_place: RwLock::new(()),
            bound_metadata: std::sync::atomic::AtomicBool::new(true),
            ram: Arc::new(ram::Ram::new(
                opts.ram.clone(),
                geometry.data_blocks() * BLOCK,
            )),
            dirty_max: opts.dirty_max,
        };
        if fs.read_only.is_some() {
            // Files unlinked while open stay until a mount that writes drops them.
            return Ok(fs);
        }
        let orphans: Vec<u64> = {
            let st = fs.state.read();
            st.meta
                .inodes
                .values()
                .filter(|i| i.attr.nlink == 0)
                .map(|i| i.attr.ino)
                .collect()
        };
        if !orphans.is_empty() {
            fs.mutate(|_, edits| {
                edits.extend(orphans.iter().map(|&ino| Edit::Drop { ino }));
                Ok(())
            })?;
        }
        let mut log = fs.log.lock();
        fs.checkpoint(&mut log)?;
        drop(log);
        Ok(fs)
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// For tests: stop refusing operations whose metadata outgrows a checkpoint slot,
    /// as hscm did before it bounded them, to make the volumes it left.
    #[doc(hidden)]
    pub fn unbound_metadata_for_testing(&self) {
        self.bound_metadata
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// NoSpace if `growth` more bytes of metadata would not fit a checkpoint slot.
    fn metadata_room(&self, st: &State, growth: u64) -> Result<()> {
        let (used, limit) = (st.meta.encoded_len(), self.geometry.checkpoint_len());
        let bounded = self
            .bound_metadata
            .load(std::sync::atomic::Ordering::Relaxed);
        if bounded && used.saturating_add(growth) > limit {
            return Err(Error::NoSpace(format!(
                "the metadata area is full ({used} of {limit} bytes used; this operation needs up to {growth} more)"
            )));
        }
        Ok(())
    }

    /// Why this mount refuses every change, if it does.
    pub fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// The metadata's size against what a checkpoint slot holds: (used, limit) bytes.
    pub fn metadata_usage(&self) -> (u64, u64) {
        (
            self.state.read().meta.encoded_len(),
            self.geometry.checkpoint_len(),
        )
    }

    /// Why the file system refuses every change after a failed write or sync, if it
    /// does.
    pub fn failure(&self) -> Option<String> {
        self.failed.get().map(|f| f.reason.clone())
    }

    /// The errno of the failure that made it refuse changes, where the device gave one.
    pub fn failure_errno(&self) -> Option<i32> {
        self.failed.get().and_then(|f| f.errno)
    }

    fn refuse_if_failed(&self) -> Result<()> {
        match self.failed.get() {
            Some(f) => Err(Error::Failed(f.reason.clone())),
            None => Ok(()),
        }
    }

    /// Refuses a change: after a failure, or on a read-only mount.
    fn refuse_writes(&self) -> Result<()> {
        self.refuse_if_failed()?;
        match &self.read_only {
            Some(why) => Err(Error::ReadOnly(why.clone())),
            None => Ok(()),
        }
    }

    /// Records the first failure (with the device's errno, where it gave one); every
    /// later write is refused with it.
    fn fail(&self, why: String, errno: Option<i32>) -> Error {
        if self.failed.set(why.clone(), errno) {
            tracing::error!("{why}; the file system now refuses writes");
        }
        Error::Failed(why)
    }

    /// Runs an operation: `op` checks it, writes its data (to blocks it allocates,
    /// or in place) and lists its edits; they are applied and made one record. In
    /// Immediate mode the record is committed before this returns.
    fn mutate<T>(&self, op: impl FnOnce(&mut State, &mut Vec<Edit>) -> Result<T>) -> Result<T> {
        let (out, seq) = self.record(op)?;
        if let (Some(seq), Durability::Immediate) = (seq, self.durability) {
            self.commit(seq)?;
        }
        Ok(out)
    }

    /// [`Self::mutate`] without the commit: the record, if the operation made one,
    /// and its sequence number, for the caller to commit (or let the next commit
    /// take).
    fn record<T>(
        &self,
        op: impl FnOnce(&mut State, &mut Vec<Edit>) -> Result<T>,
    ) -> Result<(T, Option<u64>)> {
        self.refuse_writes()?;
        let (out, seq) = {
            let mut st = self.state.write();
            let mut edits = Vec::new();
            let out = match op(&mut st, &mut edits) {
                Ok(out) => out,
                // The target failed under a data write: nothing is trusted to reach
                // it any more.
                Err(Error::Target(e)) => {
                    return Err(self.fail(format!("writing file data: {e}"), Some(e.errno())))
                }
                Err(e) => return Err(e),
            };
            if edits.is_empty() {
                return Ok((out, None));
            }
            // Refused before anything is applied: the metadata must always fit a
            // checkpoint slot, or the next checkpoint (and every mount) would fail.
            let growth: u64 = edits.iter().map(Edit::max_growth).sum();
            if let Err(e) = self.metadata_room(&st, growth) {
                // Map edits name blocks this operation took; nothing maps them yet.
                let start = self.geometry.data_start();
                let fresh = edits.iter().filter_map(|e| match e {
                    Edit::Map { target, count, .. } => {
                        Some(*target - start..*target - start + *count)
                    }
                    _ => None,
                });
                st.alloc.release(fresh.flatten());
                return Err(e);
            }
            let seq = st.next_seq;
            let mut freed = Vec::new();
            for e in &edits {
                if let Edit::Drop { ino } = e {
                    self.ram.forget(*ino);
                }
                match st.meta.apply(e) {
                    Ok(f) => freed.extend(f),
                    // The operation checked everything first: this is a bug, and
                    // the metadata in RAM is no longer what the log says.
                    Err(err) => {
                        return Err(self.fail(format!("an edit did not apply: {err}"), None))
                    }
                }
            }
            let start = self.geometry.data_start();
            st.alloc
                .free_after(seq, freed.into_iter().map(|b| b - start));
            st.unwritten.push((seq, meta::encode_edits(&edits)));
            st.next_seq += 1;
            (out, seq)
        };
        Ok((out, Some(seq)))
    }

    /// The attributes `stat` shows, with what is derived filled in.
    fn attr_of(inode: &Inode) -> Attr {
        let mut a = inode.attr;
        match &inode.body {
            Body::File(blocks) => a.allocated = blocks.len() as u64 * BLOCK,
            Body::Dir { .. } => {
                a.size = BLOCK;
                a.allocated = BLOCK;
            }
            _ => a.allocated = 0,
        }
        a
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        let a = Self::attr_of(self.state.read().meta.get(ino)?);
        Ok(self.live_attr(a))
    }

    /// Space and inodes: data blocks free, and no more of either than the metadata
    /// area has room to describe (a file as an empty one with a
    /// `meta::TYPICAL_NAME_LEN`-byte name, a block as a run of its own: the most it
    /// can cost).
    pub fn statfs(&self) -> StatFs {
        let st = self.state.read();
        let files = st.meta.inodes.len() as u64;
        let room = self
            .geometry
            .checkpoint_len()
            .saturating_sub(st.meta.encoded_len());
        let free_files = room / meta::FILE_COST;
        StatFs {
            block_size: BLOCK,
            blocks: st.alloc.blocks(),
            free_blocks: st.alloc.available().min(room / meta::BLOCK_COST),
            files: files + free_files,
            free_files,
            name_max: NAME_MAX as u32,
        }
    }

    /// A handle opened on `ino`: while one is open, the file outlives its last name.
    pub fn open(&self, ino: u64) -> Result<Attr> {
        let mut st = self.state.write();
        let attr = Self::attr_of(st.meta.get(ino)?);
        *st.open.entry(ino).or_default() += 1;
        drop(st);
        if attr.kind == Kind::File {
            self.make_resident(ino, attr.size);
        }
        Ok(attr)
    }

    /// Closes a handle; the last one of an unlinked file drops it and frees its blocks.
    pub fn release(&self, ino: u64) -> Result<()> {
        let (last, drop_now) = {
            let mut st = self.state.write();
            let n = st.open.entry(ino).or_default();
            *n = n.saturating_sub(1);
            let last = *n == 0;
            if last {
                st.open.remove(&ino);
            }
            let unlinked = matches!(st.meta.inodes.get(&ino), Some(i) if i.attr.nlink == 0);
            (last, last && unlinked)
        };
        if last {
            self.ram.closed(ino);
            if !drop_now && self.ram.over_budget() {
                self.shed_over_budget(ino);
            }
            self.ram.close_idle(ino);
        }
        if drop_now {
            self.mutate(|st, edits| {
                if matches!(st.meta.inodes.get(&ino), Some(i) if i.attr.nlink == 0)
                    && !st.open.contains_key(&ino)
                {
                    edits.push(Edit::Drop { ino });
                }
                Ok(())
            })?;
        }
        if last {
            // Space used or freed at home by this file since it opened: RAM's
            // bound follows (cheap unless it moved by more than a quarter margin).
            self.keep_ram_bound_in_step();
        }
        Ok(())
    }

    /// RAM's bound follows home's free space (`store.rs`).
    pub(crate) fn keep_ram_bound_in_step(&self) {
        // Most mounts have no budget, hence no bound to move: no statfs per open.
        if !self.ram.has_bound_to_keep() {
            return;
        }
        let s = self.statfs();
        self.ram.keep_bound_in_step(s.free_blocks * s.block_size);
    }

    /// A target block's byte offset.
    fn block_offset(&self, block: u64) -> u64 {
        block * BLOCK
    }
}

/// Reads the newest valid checkpoint and replays the log after it: the metadata,
/// the byte after the last good record, and that record's sequence number.
fn load(target: &dyn BlockTarget) -> Result<(Superblock, Meta, u64, u64)> {
    if target.size() < 2 * BLOCK {
        return Err(Error::NotFormatted);
    }
    let mut copies = Vec::new();
    let mut first_error = None;
    for slot in 0..2u64 {
        let mut block = vec![0u8; BLOCK as usize];
        target.read_at(slot * BLOCK, &mut block)?;
        match Superblock::decode(&block) {
            Ok(sb) if u64::from(sb.slot) == slot => copies.push(sb),
            Ok(_) => {}
            Err(e @ Error::NewerFormat { .. }) => return Err(e),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    copies.sort_by_key(|sb| std::cmp::Reverse(sb.generation));
    let Some(&sb) = copies.first() else {
        return Err(first_error.unwrap_or(Error::NotFormatted));
    };
    let g = sb.geometry;
    if g.total_blocks * BLOCK > target.size() || Geometry::for_size(g.total_blocks * BLOCK)? != g {
        return Err(Error::Corrupt(format!(
            "the superblock describes {} blocks; the target holds {}",
            g.total_blocks,
            target.size() / BLOCK
        )));
    }
    let mut checkpoint = vec![0u8; sb.checkpoint_len as usize];
    target.read_at(g.checkpoint_offset(sb.slot), &mut checkpoint)?;
    if crc32c::crc32c(&checkpoint) != sb.checkpoint_crc {
        return Err(Error::Corrupt(format!(
            "checkpoint {} (slot {}) does not match its checksum",
            sb.generation, sb.slot
        )));
    }
    let mut meta = Meta::decode(&checkpoint, g.total_blocks)?;
    let mut log = vec![0u8; g.log_len() as usize];
    target.read_at(g.log_offset(), &mut log)?;
    let (mut at, mut seq) = (0u64, sb.next_seq);
    while let Some((payload, len)) = format::decode_record(&log[at as usize..], seq) {
        replay_record(&g, &mut meta, seq, payload)?;
        at += len;
        seq += 1;
    }
    Ok((sb, meta, at, seq - 1))
}

/// Applies one log record's edits, checked as damage could make them.
fn replay_record(g: &Geometry, meta: &mut Meta, seq: u64, payload: &[u8]) -> Result<()> {
    for edit in meta::decode_edits(payload)? {
        check_edit(g, &edit)?;
        meta.apply(&edit)
            .map_err(|e| Error::Corrupt(format!("log record {seq} does not apply: {e}")))?;
    }
    Ok(())
}

/// The target the fuzz entry points replay onto.
const FUZZ_TARGET_SIZE: u64 = 16 << 20;

/// For the fuzz targets: what a mount makes of a checkpoint and the payloads of the
/// log records after it, once their checksums hold (as a bug, rather than damage,
/// would write them), on a 16 MiB target. Returns the checkpoint the result encodes
/// to.
#[doc(hidden)]
pub fn replay_for_fuzzing(checkpoint: &[u8], records: &[&[u8]]) -> Result<Vec<u8>> {
    let g = Geometry::for_size(FUZZ_TARGET_SIZE)?;
    let mut meta = Meta::decode(checkpoint, g.total_blocks)?;
    for (seq, payload) in records.iter().enumerate() {
        replay_record(&g, &mut meta, seq as u64, payload)?;
    }
    Ok(meta.encode())
}

/// For the fuzz targets: a checkpoint decoded and encoded again.
#[doc(hidden)]
pub fn reencode_for_fuzzing(checkpoint: &[u8]) -> Result<Vec<u8>> {
    let g = Geometry::for_size(FUZZ_TARGET_SIZE)?;
    Ok(Meta::decode(checkpoint, g.total_blocks)?.encode())
}

/// A block map edit must stay inside the data area (a record that checks out but
/// says otherwise is damage, not an instruction).
fn check_edit(g: &Geometry, edit: &Edit) -> Result<()> {
    if let Edit::Map { target, count, .. } = edit {
        let end = target.checked_add(*count);
        if *target < g.data_start() || end.is_none_or(|e| e > g.total_blocks) {
            return Err(Error::Corrupt(format!(
                "a log record maps blocks [{target}, +{count}) outside the data area"
            )));
        }
    }
    Ok(())
}

/// Names: 1-255 bytes, no '/', not "." or "..".
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong(name.len()));
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(Error::Invalid(format!(
            "{:?} cannot be a name",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

/// The kind an inode must be for an operation, or the errno-bearing reason.
pub(crate) fn expect_kind(inode: &Inode, kind: Kind) -> Result<()> {
    match (inode.attr.kind, kind) {
        (a, b) if a == b => Ok(()),
        (_, Kind::Dir) => Err(Error::NotDir),
        (Kind::Dir, _) => Err(Error::IsDir),
        _ => Err(Error::Invalid("wrong kind of file".into())),
    }
}
