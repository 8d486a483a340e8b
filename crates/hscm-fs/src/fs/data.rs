//! File contents: reads straight from the target (the volume's RAM copy), writes in
//! place or to newly allocated blocks, truncation, fallocate and hole punching.
//!
//! Bytes past the end of a file inside its last block are undefined on the target:
//! whatever makes a file longer zeroes them first, so a hole or an extension always
//! reads as zeroes.

use std::sync::atomic::Ordering;

use super::*;

/// A mode of `fallocate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocate {
    /// Allocate (zeroed) blocks and extend the size (mode 0).
    Extend,
    /// Allocate without changing the size (FALLOC_FL_KEEP_SIZE).
    KeepSize,
    /// Deallocate, reading back as zeroes, size unchanged (PUNCH_HOLE | KEEP_SIZE).
    PunchHole,
}

/// New blocks are written (zero-filled around the data) this many at a time.
const FRESH_PIECE_BLOCKS: u64 = 256;

fn block_of(offset: u64) -> u64 {
    offset / BLOCK
}

/// How much of a write of `len` bytes at `offset` the free blocks can hold (at least
/// one byte, or NoSpace).
fn fits(st: &State, ino: u64, offset: u64, len: u64) -> Result<u64> {
    let blocks = st.meta.get(ino)?.blocks().expect("file");
    let mut free = st.alloc.free_now();
    let end = offset + len;
    let mut at = offset;
    while at < end {
        let next = ((block_of(at) + 1) * BLOCK).min(end);
        if !blocks.contains_key(&block_of(at)) {
            if free == 0 {
                break;
            }
            free -= 1;
        }
        at = next;
    }
    if at == offset {
        return Err(Error::NoSpace(format!(
            "no free block for a write at {offset}"
        )));
    }
    Ok(at - offset)
}

impl FileSystem {
    /// Up to `len` bytes at `offset` (fewer at the end of the file): from the file's
    /// RAM once it is loaded, else from the target.
    pub fn read(&self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>> {
        let st = self.state.read();
        let inode = st.meta.get(ino)?;
        expect_kind(inode, Kind::File)?;
        let ram_error =
            |e: std::io::Error| Error::Failed(format!("reading file {ino} from RAM: {e}"));
        let ram = self.file_ram(ino);
        let size = match &ram {
            // The kernel may have written RAM past the size the file system knows.
            Some(f) if f.kernel_may_write() => f.byte_len().map_err(ram_error)?,
            _ => inode.attr.size,
        };
        if offset >= size {
            return Ok(Vec::new());
        }
        let end = size.min(offset.saturating_add(u64::from(len)));
        if let Some(f) = ram {
            return f.read(offset, (end - offset) as usize).map_err(ram_error);
        }
        self.read_target(inode, offset, end)
    }

    /// The bytes `[offset, end)` of a file (inside its size) from the target.
    pub(super) fn read_target(&self, inode: &Inode, offset: u64, end: u64) -> Result<Vec<u8>> {
        let blocks = inode.blocks().expect("file");
        let mut out = Vec::with_capacity((end - offset) as usize);
        let mut at = offset;
        while at < end {
            let fb = block_of(at);
            let within = at % BLOCK;
            // A run of blocks contiguous on the target is one read.
            let mut n = (BLOCK - within).min(end - at);
            match blocks.get(&fb) {
                Some(&tb) => {
                    let mut next = fb + 1;
                    while at + n < end && blocks.get(&next) == Some(&(tb + (next - fb))) {
                        n += (BLOCK).min(end - at - n);
                        next += 1;
                    }
                    self.target.read_with(
                        self.block_offset(tb) + within,
                        n as usize,
                        &mut |_, piece| out.extend_from_slice(piece),
                    )?;
                }
                None => out.resize(out.len() + n as usize, 0),
            }
            at += n;
        }
        Ok(out)
    }

    /// Writes `data` at `offset`; the file grows as needed. As a disk does, a write
    /// that does not fit writes what does (and says how much); ENOSPC only when
    /// nothing fits. Drops setuid and setgid, as a write by a caller without
    /// privileges outside the file's group does.
    pub fn write(&self, ino: u64, offset: u64, data: &[u8]) -> Result<u32> {
        self.write_with(
            ino,
            offset,
            data,
            WriteOptions {
                all_or_nothing: false,
                drop_setid: DropSetid::Modify {
                    caller_gid: NO_GROUP,
                },
            },
        )
    }

    /// Writes all of `data` at `offset`, or nothing (ENOSPC). For writers that
    /// cannot retry the rest of a short write: the kernel's writeback of cached
    /// pages takes any answer but an error as the whole page written.
    pub fn write_whole(&self, ino: u64, offset: u64, data: &[u8]) -> Result<()> {
        self.write_with(
            ino,
            offset,
            data,
            WriteOptions {
                all_or_nothing: true,
                drop_setid: DropSetid::Modify {
                    caller_gid: NO_GROUP,
                },
            },
        )
        .map(|_| ())
    }

    /// [`write`](Self::write) as `how` says.
    pub fn write_with(&self, ino: u64, offset: u64, data: &[u8], how: WriteOptions) -> Result<u32> {
        self.write_inner(ino, offset, data, how, true)
    }

    /// A write owed durability only at the next fsync, into a file the kernel may
    /// write itself (after [`begin_kernel_writes`](Self::begin_kernel_writes)):
    /// into the file's RAM alone, as a passthrough write goes, for the next
    /// write-back to take home ([`write_back_ram`](Self::write_back_ram)). Serves
    /// writes that reach the daemon through the page cache (an open whose shared
    /// mappings must reach the file system at msync) at the cost of a copy, not a
    /// write of the target each. A file not in RAM, or not open for the kernel to
    /// write, takes the ordinary [`write_with`](Self::write_with).
    pub fn write_to_ram(
        &self,
        ino: u64,
        offset: u64,
        data: &[u8],
        how: WriteOptions,
    ) -> Result<u32> {
        let Some(f) = self.file_ram(ino).filter(|f| f.kernel_may_write()) else {
            return self.write_with(ino, offset, data, how);
        };
        check_write_range(offset, data.len())?;
        f.write_behind(offset, data).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                Error::NoSpace(format!("file {ino}'s RAM is full: {e}"))
            } else {
                Error::Failed(format!("writing file {ino}'s RAM: {e}"))
            }
        })?;
        Ok(data.len() as u32)
    }

    /// A write to the file and, with `to_ram`, to its RAM; without, to the target
    /// only (bytes that came from RAM: writes through a shared mapping).
    pub(super) fn write_inner(
        &self,
        ino: u64,
        offset: u64,
        data: &[u8],
        how: WriteOptions,
        to_ram: bool,
    ) -> Result<u32> {
        if data.is_empty() {
            return Ok(0);
        }
        check_write_range(offset, data.len())?;
        // Without `to_ram` the caller is a write-back, which holds the lock.
        let ram = self.ram.get(ino).filter(|_| to_ram);
        let _changes = ram.as_ref().map(|f| f.changes.lock());
        if let Some(written) = self.write_in_place(ino, offset, data, how.drop_setid, to_ram)? {
            return Ok(written);
        }
        self.with_space(ino, || {
            self.mutate(|st, edits| {
                let inode = st.meta.get(ino)?;
                expect_kind(inode, Kind::File)?;
                let ram = self.ram.get(ino).filter(|_| to_ram);
                let _same_file = ram.as_ref().map(|f| f.lock.lock());
                let mut a = inode.attr;
                // As a disk does: a short write while there is room, ENOSPC when none.
                let fit = fits(st, ino, offset, data.len() as u64)?;
                if how.all_or_nothing && fit < data.len() as u64 {
                    return Err(Error::NoSpace(format!(
                        "room for {fit} of the {} bytes written at {offset}",
                        data.len()
                    )));
                }
                let data = &data[..fit as usize];
                if let Some(f) = &ram {
                    self.reserve_ram(ino, f, offset, data.len() as u64)?;
                }
                let end = offset + data.len() as u64;
                if offset > a.size {
                    self.zero_tail(st, ino, a.size, offset)?;
                }
                let edges = self.put_bytes(
                    st,
                    edits,
                    ino,
                    offset,
                    data.len() as u64,
                    Some((data, ram.as_deref())),
                )?;
                if let Some(f) = &ram {
                    self.mirror(ino, f.write_with_edges(offset, data, &edges))?;
                }
                let now = self.write_time(ino, to_ram);
                a.size = a.size.max(end);
                a.mtime = now;
                a.ctime = a.ctime.max(now);
                a.perm = how.drop_setid.apply(a.perm, a.gid);
                edits.push(Edit::SetAttr(a));
                Ok(data.len() as u32)
            })
        })
    }

    /// A write inside the file, over blocks it already has: the bytes go in place
    /// while other operations run (the state lock is held only to look the blocks
    /// up), then the new mtime is an operation of its own. In Immediate mode the
    /// bytes are made durable by one sync before this returns. `None` when the
    /// write needs more (a block to allocate, a file to grow): the caller does it
    /// whole.
    ///
    /// Safe without the state lock because the blocks cannot change owner meanwhile:
    /// a block a truncate or unlink frees becomes free for reuse only under
    /// `in_place` held exclusively, which waits for this write. A truncate that
    /// cuts the range first leaves these bytes in a block no file maps.
    fn write_in_place(
        &self,
        ino: u64,
        offset: u64,
        data: &[u8],
        drop_setid: DropSetid,
        to_ram: bool,
    ) -> Result<Option<u32>> {
        self.refuse_writes()?;
        let end = offset + data.len() as u64;
        let in_flight = self.in_place.read();
        // (target offset, offset in data, length): runs contiguous on the target.
        let mut runs: Vec<(u64, usize, usize)> = Vec::new();
        let ram = self.ram.get(ino).filter(|_| to_ram);
        let cut;
        {
            let st = self.state.read();
            // Under the state lock, as the block lookup: whatever frees blocks bumps
            // it under the state lock held exclusively.
            cut = ram.as_ref().map(|f| f.cut.load(Ordering::Acquire));
            let inode = st.meta.get(ino)?;
            expect_kind(inode, Kind::File)?;
            if end > inode.attr.size {
                return Ok(None);
            }
            let blocks = inode.blocks().expect("file");
            let mut at = offset;
            while at < end {
                let Some(&tb) = blocks.get(&block_of(at)) else {
                    return Ok(None);
                };
                let n = (BLOCK - at % BLOCK).min(end - at) as usize;
                let on_target = self.block_offset(tb) + at % BLOCK;
                let from = (at - offset) as usize;
                match runs.last_mut() {
                    Some(last) if last.0 + last.2 as u64 == on_target => last.2 += n,
                    _ => runs.push((on_target, from, n)),
                }
                at += n as u64;
            }
        }
        // The target and RAM change under the file's lock, in one order for both.
        let same_file = ram.as_ref().map(|f| f.lock.lock());
        if let Some(f) = &ram {
            self.reserve_ram(ino, f, offset, data.len() as u64)?;
        }
        let mut edges = Vec::new();
        for (on_target, from, n) in runs {
            let file_at = offset + from as u64;
            match self.write_file_bytes(ram.as_deref(), file_at, on_target, &data[from..from + n]) {
                Ok(sums) => edges.extend(sums),
                Err(e) => return Err(self.fail(format!("writing file data: {e}"), Some(e.errno()))),
            }
        }
        if let (Some(f), Some(cut)) = (&ram, cut) {
            // Blocks freed since the lookup took these bytes to a block no file
            // maps: RAM must not show them either.
            if f.cut.load(Ordering::Acquire) == cut {
                self.mirror(ino, f.write_with_edges(offset, data, &edges))?;
            }
        }
        drop(same_file);
        drop(in_flight);
        let mut drops_setid = false;
        let (written, seq) = self.record(|st, edits| {
            let mut a = st.meta.get(ino)?.attr;
            let now = self.write_time(ino, to_ram);
            a.mtime = now;
            a.ctime = a.ctime.max(now);
            let perm = drop_setid.apply(a.perm, a.gid);
            drops_setid = perm != a.perm;
            a.perm = perm;
            edits.push(Edit::SetAttr(a));
            Ok(Some(data.len() as u32))
        })?;
        if self.durability == Durability::Immediate {
            match seq {
                // A dropped setuid bit must not come back over new bytes after a
                // crash: that record is committed with the bytes.
                Some(seq) if drops_setid => self.commit(seq)?,
                // Only the times changed: the bytes are durable with one sync, and
                // the new mtime rides with the next commit, as fdatasync allows.
                _ => self.sync()?,
            }
        }
        Ok(written)
    }

    /// Sets the size: blocks past it are freed, a longer file reads zeroes.
    pub fn truncate(&self, ino: u64, size: u64) -> Result<()> {
        if size > i64::MAX as u64 {
            return Err(Error::Invalid("a size past the largest file".into()));
        }
        let ram = self.ram.get(ino);
        let _changes = ram.as_ref().map(|f| f.changes.lock());
        self.catch_up_with_kernel(ino, ram.as_deref())?;
        self.mutate(|st, edits| {
            let inode = st.meta.get(ino)?;
            expect_kind(inode, Kind::File)?;
            let mut a = inode.attr;
            let ram = self.ram.get(ino);
            let _same_file = ram.as_ref().map(|f| f.lock.lock());
            if size > a.size {
                self.zero_tail(st, ino, a.size, size)?;
            } else {
                edits.push(Edit::Unmap {
                    ino,
                    from: size.div_ceil(BLOCK),
                    to: u64::MAX,
                });
            }
            if let Some(f) = &ram {
                if size < a.size {
                    f.cut.fetch_add(1, Ordering::AcqRel);
                }
                self.mirror(ino, f.set_len(size))?;
            }
            let now = Time::now();
            a.size = size;
            a.mtime = now;
            a.ctime = now;
            edits.push(Edit::SetAttr(a));
            Ok(())
        })
    }

    pub fn fallocate(&self, ino: u64, offset: u64, len: u64, mode: Allocate) -> Result<()> {
        self.fallocate_with(ino, offset, len, mode, DropSetid::Keep)
    }

    /// [`fallocate`](Self::fallocate), dropping setuid and setgid as `drop_setid`
    /// says, in the same record (Linux drops them for a caller without
    /// CAP_FSETID, as for a write).
    pub fn fallocate_with(
        &self,
        ino: u64,
        offset: u64,
        len: u64,
        mode: Allocate,
        drop_setid: DropSetid,
    ) -> Result<()> {
        let end = offset
            .checked_add(len)
            .filter(|&e| len > 0 && e <= i64::MAX as u64)
            .ok_or_else(|| Error::Invalid("fallocate of an empty or too large range".into()))?;
        let ram = self.ram.get(ino);
        let _changes = ram.as_ref().map(|f| f.changes.lock());
        self.catch_up_with_kernel(ino, ram.as_deref())?;
        self.with_space(ino, || {
            self.mutate(|st, edits| {
                let inode = st.meta.get(ino)?;
                expect_kind(inode, Kind::File)?;
                let mut a = inode.attr;
                let now = Time::now();
                let ram = self.ram.get(ino);
                let _same_file = ram.as_ref().map(|f| f.lock.lock());
                match mode {
                    Allocate::PunchHole => {
                        let (first_whole, end_whole) = (offset.div_ceil(BLOCK), block_of(end));
                        // The partial blocks at either end are zeroed in place.
                        let zero_end = end.min(first_whole * BLOCK).min(a.size);
                        if offset < zero_end {
                            self.zero_mapped(st, ino, offset, zero_end)?;
                        }
                        let zero_start = (end_whole * BLOCK).max(offset);
                        if zero_start < end.min(a.size) && end_whole >= first_whole {
                            self.zero_mapped(st, ino, zero_start, end.min(a.size))?;
                        }
                        if end_whole > first_whole {
                            edits.push(Edit::Unmap {
                                ino,
                                from: first_whole,
                                to: end_whole,
                            });
                        }
                        if let Some(f) = &ram {
                            f.cut.fetch_add(1, Ordering::AcqRel);
                            let stop = end.min(a.size);
                            if offset < stop {
                                self.mirror(ino, f.punch(offset, stop - offset))?;
                            }
                        }
                    }
                    Allocate::Extend | Allocate::KeepSize => {
                        if mode == Allocate::Extend && end > a.size {
                            self.zero_tail(st, ino, a.size, end)?;
                        }
                        // No bytes, so no hashes to tell RAM.
                        let _ = self.put_bytes(st, edits, ino, offset, len, None)?;
                        if mode == Allocate::Extend {
                            if let (Some(f), true) = (&ram, end > a.size) {
                                self.mirror(ino, f.set_len(end))?;
                            }
                            a.size = a.size.max(end);
                        }
                    }
                }
                a.ctime = now;
                if mode != Allocate::KeepSize {
                    a.mtime = now;
                }
                a.perm = drop_setid.apply(a.perm, a.gid);
                edits.push(Edit::SetAttr(a));
                Ok(())
            })
        })
    }

    /// The mtime a write gives the file: now for the file system's own writes; for a
    /// write-back (`to_ram` false), the time the kernel's writes gave the file's RAM,
    /// so that a write-back running after a `touch -d` or a `tar` that set the time
    /// keeps that time rather than stamping the moment it ran.
    fn write_time(&self, ino: u64, to_ram: bool) -> Time {
        if to_ram {
            return Time::now();
        }
        self.ram
            .get(ino)
            .and_then(|f| f.modified())
            .map(Time::from)
            .unwrap_or_else(Time::now)
    }

    /// Makes a file `size` long without writing its new blocks (they stay holes):
    /// what a write-back owes for zeroes the kernel appended. True if it grew.
    /// The caller holds the file's `changes` lock.
    pub(super) fn extend_for_write_back(&self, ino: u64, size: u64) -> Result<bool> {
        if self.state.read().meta.get(ino)?.attr.size >= size {
            return Ok(false);
        }
        let stamp = self.write_time(ino, false);
        self.mutate(|st, edits| {
            let mut a = st.meta.get(ino)?.attr;
            if a.size >= size {
                return Ok(false);
            }
            self.zero_tail(st, ino, a.size, size)?;
            a.size = size;
            a.mtime = stamp;
            a.ctime = a.ctime.max(stamp);
            edits.push(Edit::SetAttr(a));
            Ok(true)
        })
    }

    /// Before an operation that depends on a file's size (truncate, fallocate):
    /// what the kernel wrote in RAM goes home first, so the size the file system
    /// knows is the one the kernel has shown.
    /// The caller holds the file's `changes` lock.
    fn catch_up_with_kernel(&self, ino: u64, ram: Option<&FileRam>) -> Result<()> {
        if let Some(f) = ram.filter(|f| f.kernel_may_write()) {
            self.write_back_locked(ino, f)?;
        }
        Ok(())
    }

    /// Room in RAM for a write, taken before the target is written (see
    /// [`FileRam::reserve`]).
    fn reserve_ram(&self, ino: u64, f: &FileRam, offset: u64, len: u64) -> Result<()> {
        f.reserve(offset, len).map_err(|e| match e.raw_os_error() {
            Some(28) => Error::NoSpace(format!(
                "the files' RAM is full (writing {len} bytes of file {ino})"
            )),
            _ => self.fail(format!("changing file {ino} in RAM: {e}"), e.raw_os_error()),
        })
    }

    /// A change to a file's RAM failed (the system is out of memory for shmem): the
    /// RAM copy can no longer be trusted, so the file system refuses writes from now
    /// on, as after a failed device write.
    fn mirror(&self, ino: u64, result: std::io::Result<()>) -> Result<()> {
        result.map_err(|e| self.fail(format!("changing file {ino} in RAM: {e}"), e.raw_os_error()))
    }

    /// fsync and fdatasync: commits everything done so far.
    pub fn fsync(&self, _ino: u64) -> Result<()> {
        self.sync_all()
    }

    /// Runs a data operation; if it ran out of space while freed blocks wait for
    /// their record to be durable, commits and tries once more.
    ///
    /// Files unlinked while open hold their blocks until their last handle closes,
    /// and FUSE sends that close after close(2) has returned: a program that closes,
    /// unlinks and writes again may find the space still held. So while such files
    /// exist, a write that finds no space waits for their release, up to a second.
    fn with_space<T>(&self, ino: u64, op: impl Fn() -> Result<T>) -> Result<T> {
        const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(10);
        let mut waits = 0;
        loop {
            match op() {
                Err(Error::NoSpace(_)) if self.state.read().alloc.has_pending() => {
                    self.sync_all()?;
                    return op();
                }
                Err(Error::NoSpace(why)) => {
                    if waits == 100 || !self.unlinked_while_open(ino) {
                        return Err(Error::NoSpace(why));
                    }
                    waits += 1;
                    std::thread::sleep(RELEASE_WAIT);
                }
                other => return other,
            }
        }
    }

    /// Another file than `writing`, whose last name is gone, is kept (with its
    /// blocks) by an open handle. (`writing` itself may be one: its close, which
    /// writes it home first, must not wait for itself.)
    fn unlinked_while_open(&self, writing: u64) -> bool {
        let st = self.state.read();
        st.open.keys().any(|&ino| {
            ino != writing && st.meta.inodes.get(&ino).is_some_and(|i| i.attr.nlink == 0)
        })
    }

    /// Writes `data` over `[offset, offset + len)` of a file: mapped blocks in place,
    /// holes into new blocks (filled out with zeroes), whose Map edits it adds. With
    /// no data (fallocate), mapped blocks are left alone and holes get zeroed blocks.
    /// All or nothing: without space for every new block, nothing is written.
    /// Returns the hashes of the partial blocks it wrote whole, as the target holds
    /// them ([`FileRam::write_with_edges`]).
    fn put_bytes(
        &self,
        st: &mut State,
        edits: &mut Vec<Edit>,
        ino: u64,
        offset: u64,
        len: u64,
        data: Option<(&[u8], Option<&FileRam>)>,
    ) -> Result<Vec<(u64, u64)>> {
        // The bytes (None: zeroes), and the file's RAM to take the rest of partial
        // blocks from (`write_file_bytes`).
        let (data, ram) = match data {
            Some((bytes, ram)) => (Some(bytes), ram),
            None => (None, None),
        };
        let end = offset + len;
        // The part of the block map this range touches (not the whole map: a large
        // file's would cost more than the write).
        let blocks: std::collections::BTreeMap<u64, u64> = st
            .meta
            .get(ino)?
            .blocks()
            .expect("file")
            .range(block_of(offset)..=block_of(end - 1))
            .map(|(&f, &t)| (f, t))
            .collect();
        let (first, last) = (block_of(offset), block_of(end - 1));
        // Counted before they are listed, so that the work is bounded by the free
        // blocks rather than by the range asked (fallocate of 8 EiB).
        let hole_count = (last - first + 1) - blocks.len() as u64;
        if hole_count > st.alloc.free_now() {
            return Err(Error::NoSpace(format!(
                "{hole_count} blocks wanted, {} free",
                st.alloc.free_now()
            )));
        }
        let holes: Vec<u64> = (first..=last)
            .filter(|b| !blocks.contains_key(b))
            .take(hole_count as usize)
            .collect();
        let runs = self.allocate(st, hole_count)?;
        // Each run of new blocks is one Map edit: refused here, before any byte is
        // written in place, if the metadata area could not describe them.
        if let Err(e) = self.metadata_room(st, runs.len() as u64 * meta::MAP_GROWTH) {
            st.alloc.release(runs.iter().flat_map(|&(s, c)| s..s + c));
            return Err(e);
        }
        let start = self.geometry.data_start();
        // Holes, in file order, get the allocated blocks in order.
        let mut new_blocks = runs
            .iter()
            .flat_map(|&(s, n)| (s..s + n).map(|b| b + start));
        let mut fresh: Vec<(u64, u64)> = holes
            .iter()
            .map(|&f| (f, new_blocks.next().unwrap()))
            .collect();
        fresh.sort_unstable();
        let mut edges = Vec::new();
        let result = (|| -> Result<()> {
            // Mapped blocks: the bytes in place, a run at a time.
            let mut at = offset;
            while at < end {
                let fb = block_of(at);
                let mut n = (BLOCK - at % BLOCK).min(end - at);
                let (target, data) = match (blocks.get(&fb), data) {
                    (Some(&tb), Some(data)) => (tb, data),
                    _ => {
                        at += n;
                        continue;
                    }
                };
                let mut next = fb + 1;
                while at + n < end && blocks.get(&next) == Some(&(target + (next - fb))) {
                    n += BLOCK.min(end - at - n);
                    next += 1;
                }
                let from = (at - offset) as usize;
                edges.extend(self.write_file_bytes(
                    ram,
                    at,
                    self.block_offset(target) + at % BLOCK,
                    &data[from..from + n as usize],
                )?);
                at += n;
            }
            // New blocks: whole blocks, the bytes with zeroes around them, a run of
            // blocks contiguous in the file and on the target at a time.
            let mut i = 0;
            while i < fresh.len() {
                let mut j = i + 1;
                while j < fresh.len()
                    && fresh[j].0 == fresh[j - 1].0 + 1
                    && fresh[j].1 == fresh[j - 1].1 + 1
                {
                    j += 1;
                }
                let (f0, t0, count) = (fresh[i].0, fresh[i].1, (j - i) as u64);
                // In pieces, so that a fallocate of gigabytes never holds them in a
                // buffer.
                let mut done = 0;
                while done < count {
                    let n = (count - done).min(FRESH_PIECE_BLOCKS);
                    let piece_start = (f0 + done) * BLOCK;
                    let mut buf = vec![0u8; (n * BLOCK) as usize];
                    if let Some(data) = data {
                        let (lo, hi) = (offset.max(piece_start), end.min(piece_start + n * BLOCK));
                        if lo < hi {
                            buf[(lo - piece_start) as usize..(hi - piece_start) as usize]
                                .copy_from_slice(
                                    &data[(lo - offset) as usize..(hi - offset) as usize],
                                );
                        }
                    }
                    self.target
                        .write_at(self.block_offset(t0 + done), &buf, WriteFlags::NONE)?;
                    if data.is_some() {
                        edges.extend(super::sums::edge_sums(piece_start, &buf, offset, end));
                    }
                    done += n;
                }
                st.data_first = true;
                edits.push(Edit::Map {
                    ino,
                    file_block: f0,
                    target: t0,
                    count,
                });
                i = j;
            }
            Ok(())
        })();
        if let Err(e) = result {
            st.alloc.release(fresh.iter().map(|&(_, t)| t - start));
            edits.retain(|e| !matches!(e, Edit::Map { .. }));
            return Err(e);
        }
        Ok(edges)
    }

    /// `n` free blocks (data-relative runs), or NoSpace with nothing taken.
    fn allocate(&self, st: &mut State, n: u64) -> Result<Vec<(u64, u64)>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let runs = st.alloc.allocate(n);
        let got: u64 = runs.iter().map(|r| r.1).sum();
        if got < n {
            st.alloc.release(runs.iter().flat_map(|&(s, c)| s..s + c));
            return Err(Error::NoSpace(format!("{n} blocks wanted, {got} free")));
        }
        Ok(runs)
    }

    /// Before a file grows from `old_size`: zeroes the undefined bytes after it in its
    /// last block, up to `new_size`.
    /// The record that makes the file longer must not reach the device before these
    /// zeroes, or bytes truncated away earlier could come back after a crash.
    fn zero_tail(&self, st: &mut State, ino: u64, old_size: u64, new_size: u64) -> Result<()> {
        if old_size % BLOCK == 0 {
            return Ok(());
        }
        let block_end = (block_of(old_size) + 1) * BLOCK;
        self.zero_mapped(st, ino, old_size, new_size.min(block_end))?;
        st.data_first = true;
        Ok(())
    }

    /// Zeroes `[from, to)` where it is mapped (holes read zeroes already), on the
    /// target alone: the file's RAM hashes of those blocks are forgotten, since RAM
    /// may hold there what the kernel wrote and the next write-back must take.
    fn zero_mapped(&self, st: &State, ino: u64, from: u64, to: u64) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        if let Some(f) = self.ram.get(ino) {
            f.target_changed(block_of(from)..block_of(to - 1) + 1);
        }
        let blocks = st.meta.get(ino)?.blocks().expect("file");
        let mut at = from;
        while at < to {
            let n = (BLOCK - at % BLOCK).min(to - at);
            if let Some(&tb) = blocks.get(&block_of(at)) {
                self.target.write_zeroes(
                    self.block_offset(tb) + at % BLOCK,
                    n,
                    hscm_block::ZeroFlags::default(),
                )?;
            }
            at += n;
        }
        Ok(())
    }
}

/// A write must end within the largest file (i64::MAX bytes, as the kernel's
/// offsets are signed).
fn check_write_range(offset: u64, len: usize) -> Result<()> {
    if offset
        .checked_add(len as u64)
        .is_none_or(|e| e > i64::MAX as u64)
    {
        return Err(Error::Invalid("a write past the largest file".into()));
    }
    Ok(())
}
