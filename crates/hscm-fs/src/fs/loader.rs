//! Loading files into their RAM (`ram.rs`): at mount, a background thread loads every
//! file the budget admits, files opened while not resident first; until a file is
//! wholly loaded, its reads go to the target. So the file system is usable the moment
//! it mounts, as the volume is (Baek & Park 2020, §3.3, rapid resilience).

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::*;
use crate::ROOT;

/// The loader copies a file in pieces of this size, holding the state lock (read) and
/// the file's lock for one piece at a time, so writers wait at most one piece.
const LOAD_PIECE: u64 = 1 << 20;

/// Where the file system records its default RAM budget: an extended attribute of
/// its root directory, in the `trusted` namespace (only root sees or changes it
/// through a mount), holding the budget in bytes as decimal text.
pub const RAM_BUDGET_XATTR: &[u8] = b"trusted.hscm.ram_budget";

impl FileSystem {
    /// Admits a file to RAM if the policy takes it, and asks for it to be loaded.
    pub(super) fn make_resident(&self, ino: u64, size: u64) {
        let is_open = |k: u64| self.state.read().open.contains_key(&k);
        match self.ram.admit(ino, size, is_open) {
            Ok(Some(f)) if !f.is_loaded() => {
                self.writes_in_place_see_ram();
                // An empty file (a new one) loads at once: its first open is then
                // served from RAM already.
                let background = self
                    .ram
                    .background
                    .load(std::sync::atomic::Ordering::Relaxed);
                if background && size > 0 {
                    self.ram.want(ino)
                } else if let Err(e) = self.load_file(ino) {
                    // Without a loader thread (a library user), open loads the file.
                    tracing::warn!("loading file {ino} into RAM: {e}; it is read from the target");
                    self.ram.forget(ino);
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("no RAM for file {ino}: {e}; it is read from the target"),
        }
    }

    /// A file's RAM, once every byte of it is there: what the kernel may read
    /// directly (FUSE passthrough).
    pub fn file_ram(&self, ino: u64) -> Option<Arc<FileRam>> {
        self.ram.get(ino).filter(|f| f.is_loaded())
    }

    /// From now on the kernel may write this file's RAM itself (a passthrough open
    /// that writes, whose shared mappings write too): keeps a hash of each block as
    /// the target holds it, to find what the kernel changed. False if the file is
    /// not wholly in RAM (the open must then be served otherwise).
    pub fn begin_kernel_writes(&self, ino: u64) -> Result<bool> {
        let Some(f) = self.file_ram(ino) else {
            return Ok(false);
        };
        // What the kernel may now write into RAM is bounded by what home can take.
        self.keep_ram_bound_in_step();
        let _same_file = f.lock.lock();
        let first = !f.kernel_may_write();
        f.start_sums()
            .map_err(|e| Error::Failed(format!("hashing file {ino} in RAM: {e}")))?;
        if first {
            // From here on the memfd's mtime is the file's (the kernel's writes move
            // it): it starts as the file's own, not the time the file was loaded.
            let a = self.state.read().meta.get(ino)?.attr;
            f.set_times(Some(a.atime), Some(a.mtime))
                .map_err(|e| Error::Failed(format!("setting file {ino}'s times in RAM: {e}")))?;
        }
        f.kernel_writers
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(true)
    }

    /// One open through which the kernel wrote RAM closed. (Its mappings may still
    /// write; the hashes stay until a write-back finds the file unchanged with no
    /// such open left.)
    pub fn end_kernel_writes(&self, ino: u64) {
        if let Some(f) = self.ram.get(ino) {
            let _ = f.kernel_writers.fetch_update(
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
                |n| n.checked_sub(1),
            );
        }
    }

    /// Writes home what the kernel wrote into a file's RAM behind the file system's
    /// back (passthrough writes, shared mappings): the blocks whose hash changed, and
    /// whatever the kernel appended. The file's size and mtime follow. Returns the
    /// bytes written.
    pub fn write_back_ram(&self, ino: u64) -> Result<u64> {
        let Some(f) = self.ram.get(ino) else {
            return Ok(0);
        };
        let _changes = f.changes.lock();
        let written = self.write_back_locked(ino, &f)?;
        // Whatever a close left waiting went home with this.
        self.ram.written_back(ino);
        Ok(written)
    }

    /// [`Self::write_back_ram`], the caller holding the file's `changes` lock.
    pub(super) fn write_back_locked(&self, ino: u64, f: &FileRam) -> Result<u64> {
        // A file without a name is gone at its last close and at the next mount:
        // nothing of it needs to reach home (and a full file system must not make
        // its close wait for room it is about to free).
        let unlinked = self
            .state
            .read()
            .meta
            .get(ino)
            .map_or(true, |i| i.attr.nlink == 0);
        if unlinked || f.sums.lock().is_none() {
            return Ok(0);
        }
        let ram_error =
            |e: std::io::Error| Error::Failed(format!("reading file {ino} from RAM: {e}"));
        let mut written = 0u64;
        let mut at = 0u64;
        // Blocks the kernel appended that hold only zeroes.
        let mut holes: Vec<usize> = Vec::new();
        // The file's end was read inside a block; how often a growing end was
        // followed.
        let (mut at_end, mut chases) = (false, 0);
        loop {
            // A piece's changed runs, found under the file's lock (no write of the
            // file system's own is half done) and written after it.
            // The size the file system knows: blocks past it are the kernel's
            // appends, written even where they hash as zeroes did.
            let known_size = match self.state.read().meta.get(ino) {
                Ok(inode) => inode.attr.size,
                Err(_) => return Ok(written),
            };
            let runs: Vec<(u64, Vec<u8>, Vec<u64>)> = {
                let _same_file = f.lock.lock();
                let len = f.byte_len().map_err(ram_error)?;
                if at_end || at >= len {
                    break;
                }
                let piece = f
                    .read(at, (len - at).min(LOAD_PIECE) as usize)
                    .map_err(ram_error)?;
                let sums = f.sums.lock();
                let Some(sums) = sums.as_ref() else {
                    return Ok(written);
                };
                let mut runs: Vec<(u64, Vec<u8>, Vec<u64>)> = Vec::new();
                for (i, block) in piece.chunks(BLOCK as usize).enumerate() {
                    let b = (at / BLOCK) as usize + i;
                    let mut padded = block.to_vec();
                    padded.resize(BLOCK as usize, 0);
                    let sum = sums::block_sum(&padded);
                    let offset = b as u64 * BLOCK;
                    let appended = offset + block.len() as u64 > known_size;
                    if sums.get(b) == Some(&sum) && !appended {
                        continue;
                    }
                    if offset >= known_size && block.iter().all(|&x| x == 0) {
                        // Zeroes past the end the file system knows: a hole, as
                        // the size change at the end leaves it (a sparse 2 GiB file
                        // must not be written out block by block).
                        holes.push(b);
                        continue;
                    }
                    match runs.last_mut() {
                        Some(r) if r.0 + r.1.len() as u64 == offset => {
                            r.1.extend_from_slice(block);
                            r.2.push(sum);
                        }
                        _ => runs.push((offset, block.to_vec(), vec![sum])),
                    }
                }
                if piece.is_empty() {
                    break;
                }
                // The next piece starts at a block boundary: block numbers are
                // counted from `at`. A piece that ended inside a block (the file's
                // end then) is followed, if the kernel has appended meanwhile, by
                // that whole block again; read from an unaligned `at`, every block
                // after it went home shifted (acknowledged bytes overwritten by
                // bytes from further on: found by power_cut_concurrent.rs).
                let end = at + piece.len() as u64;
                if end % BLOCK == 0 {
                    at = end;
                } else if chases < 4 && f.byte_len().map_err(ram_error)? > end {
                    chases += 1;
                    at = end - end % BLOCK;
                } else {
                    // The rest, if the kernel appends on, goes with the next
                    // write-back (blocks past the size home knows always go).
                    at_end = true;
                }
                runs
            };
            for (offset, bytes, new_sums) in runs {
                let how = WriteOptions {
                    all_or_nothing: true,
                    drop_setid: DropSetid::Keep,
                };
                tracing::debug!(
                    "write-back of file {ino}: {} bytes at {offset}",
                    bytes.len()
                );
                self.write_inner(ino, offset, &bytes, how, false)?;
                written += bytes.len() as u64;
                // What went home is what these hashes describe; a later change by
                // the kernel makes them differ again.
                let _same_file = f.lock.lock();
                if let Some(sums) = f.sums.lock().as_mut() {
                    let first = (offset / BLOCK) as usize;
                    if sums.len() < first + new_sums.len() {
                        // Blocks the kernel appended: known from here on (any gap
                        // before them stays unknown).
                        sums.resize(first + new_sums.len(), sums::UNKNOWN_SUM);
                    }
                    sums[first..first + new_sums.len()].copy_from_slice(&new_sums);
                }
            }
        }
        // The size the kernel's writes gave the file, where they ended in zeroes
        // the runs above did not write.
        let len = {
            let _same_file = f.lock.lock();
            f.byte_len().map_err(ram_error)?
        };
        let grew = self.extend_for_write_back(ino, len)?;
        if !holes.is_empty() {
            let _same_file = f.lock.lock();
            if let Some(sums) = f.sums.lock().as_mut() {
                for b in holes {
                    if sums.len() <= b {
                        sums.resize(b + 1, sums::UNKNOWN_SUM);
                    }
                    sums[b] = sums::zero_sum();
                }
            }
        }
        // The hashes go only when nothing can write RAM behind the file system's
        // back any more: no open through which the kernel writes, and no shared
        // mapping that outlived its open (it keeps the kernel's backing file open
        // for writing, and writes on after every close).
        if written == 0
            && !grew
            && f.kernel_writers.load(std::sync::atomic::Ordering::Acquire) == 0
            && !f.may_be_written_elsewhere()
        {
            *f.sums.lock() = None;
        }
        Ok(written)
    }

    /// [`Self::write_back_ram`] for every file the kernel may have written. An error
    /// of `ino`'s own is returned; another file's is logged, and that file's own
    /// fsync or close reports it (as a failed writeback is reported to the file it
    /// belongs to).
    pub fn write_back_all(&self, ino: Option<u64>) -> Result<u64> {
        let mut total = 0;
        for other in self.ram.kernel_written() {
            let done = self.write_back_ram(other);
            self.close_if_idle(other);
            match done {
                Ok(n) => total += n,
                Err(e) if Some(other) == ino => return Err(e),
                Err(e) => tracing::warn!("writing home what the kernel wrote in file {other}: {e}"),
            }
        }
        if total > 0 {
            self.keep_ram_bound_in_step();
        }
        Ok(total)
    }

    /// [`Self::write_back_ram`] for every file the kernel may have written, each
    /// failure kept: the files whose writes did not go home, and why. At unmount,
    /// what must be reported to whoever stops the mount.
    pub fn write_back_each(&self) -> Vec<(u64, Error)> {
        self.ram
            .kernel_written()
            .into_iter()
            .filter_map(|ino| {
                let done = self.write_back_ram(ino);
                self.close_if_idle(ino);
                done.err().map(|e| (ino, e))
            })
            .collect()
    }

    /// Closes the daemon's descriptor of a file's RAM unless the file is open.
    pub(super) fn close_if_idle(&self, ino: u64) {
        if !self.state.read().open.contains_key(&ino) {
            self.ram.close_idle(ino);
        }
    }

    /// Files the policy counts at their size when admitted enter RAM empty when
    /// new, so it cannot see them grow: at a file's last close, while the files'
    /// RAM holds more than the budget, closed files leave it (this one first, then
    /// up to 64 others, whose own close may have come before the kernel let go of
    /// them), each once what the kernel wrote into it is home.
    pub(super) fn shed_over_budget(&self, closed: u64) {
        for ino in self.ram.resident_files(closed, 64) {
            if !self.ram.over_budget() {
                return;
            }
            if self.state.read().open.contains_key(&ino) || self.write_back_ram(ino).is_err() {
                continue;
            }
            // Under the state lock, which an open takes to count itself: no open
            // can take the file's RAM between this check and its removal.
            let st = self.state.read();
            if !st.open.contains_key(&ino) {
                self.ram.shed(ino);
            }
        }
    }

    /// Whether the file system is close enough to full that the kernel should not
    /// write files' RAM by itself: the daemon then sees every write, and can wait
    /// for the room a file being released frees, and answer ENOSPC exactly, where a
    /// kernel write into a full RAM could only fail. Close means less free than the
    /// RAM's margin over the file system's capacity (`store.rs`), counting as
    /// used what closes left in RAM to go home later.
    pub fn near_full(&self) -> bool {
        let free = self.statfs().free_blocks * BLOCK;
        free < self.ram.margin() + self.ram.deferred_bytes()
    }

    /// Writes `bytes`, file offset `file_at`, to the target at `target_at`, within
    /// blocks the file maps contiguously there. Where the bytes start or end inside
    /// a block and the file's RAM holds the rest of that block, the write is
    /// widened to whole blocks from RAM: the device then reads nothing to merge
    /// (an unaligned write costs it a read of each partial block: `tar` writes
    /// 10 KiB at a time). Called under the file's lock, before RAM takes the bytes.
    /// RAM's bytes around the write are what the target holds, or bytes the kernel
    /// wrote there since and a write-back would take home anyway. Returns the hashes
    /// of the partial blocks so written whole, as the target now holds them
    /// ([`FileRam::write_with_edges`]).
    pub(super) fn write_file_bytes(
        &self,
        ram: Option<&FileRam>,
        file_at: u64,
        target_at: u64,
        bytes: &[u8],
    ) -> hscm_block::Result<Vec<(u64, u64)>> {
        let end = file_at + bytes.len() as u64;
        let (head, tail) = (file_at % BLOCK, end.next_multiple_of(BLOCK) - end);
        let ram = ram.filter(|f| (head > 0 || tail > 0) && f.is_loaded());
        let Some(f) = ram else {
            self.target.write_at(target_at, bytes, WriteFlags::NONE)?;
            return Ok(Vec::new());
        };
        let around = |at: u64, len: u64| -> Option<Vec<u8>> {
            let mut got = f.read(at, len as usize).ok()?;
            got.resize(len as usize, 0);
            Some(got)
        };
        let (Some(before), Some(after)) = (around(file_at - head, head), around(end, tail)) else {
            self.target.write_at(target_at, bytes, WriteFlags::NONE)?;
            return Ok(Vec::new());
        };
        let mut whole = Vec::with_capacity((head + bytes.len() as u64 + tail) as usize);
        whole.extend_from_slice(&before);
        whole.extend_from_slice(bytes);
        whole.extend_from_slice(&after);
        self.target
            .write_at(target_at - head, &whole, WriteFlags::NONE)?;
        Ok(sums::edge_sums(file_at - head, &whole, file_at, end))
    }

    /// A path of `ino` from the root (`/a/b`), for messages; None for a file
    /// without a name.
    pub fn path_of(&self, ino: u64) -> Option<String> {
        let st = self.state.read();
        let mut parts: Vec<String> = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let (dir, name) = st.meta.inodes.iter().find_map(|(&d, inode)| {
                inode.entries()?.iter().find_map(|(name, &child)| {
                    (child == at).then(|| (d, String::from_utf8_lossy(name).into_owned()))
                })
            })?;
            parts.push(name);
            at = dir;
            if parts.len() > 4096 {
                return None;
            }
        }
        parts.reverse();
        Some(format!("/{}", parts.join("/")))
    }

    /// A file's attributes as the kernel sees them while it writes the file's RAM
    /// itself: the size and mtime its writes gave the memfd.
    pub(super) fn live_attr(&self, mut a: Attr) -> Attr {
        if a.kind != Kind::File {
            return a;
        }
        if let Some(f) = self.ram.get(a.ino) {
            if f.kernel_may_write() {
                if let Some((len, pages, mtime)) = f.live() {
                    a.size = len;
                    // Blocks not mapped yet (their write-back waits for an fsync)
                    // hold the file's bytes all the same: `du` counts them.
                    a.allocated = a.allocated.max(pages.min(len.next_multiple_of(BLOCK)));
                    // The memfd's mtime is the file's while the kernel may write
                    // it (set from the file's at the first such open, and by
                    // setattr).
                    let t = Time::from(mtime);
                    a.mtime = t;
                    a.ctime = a.ctime.max(t);
                }
            }
        }
        a
    }

    /// For tests: a file's bytes as the target holds them, whatever RAM holds.
    #[doc(hidden)]
    pub fn read_from_target(&self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>> {
        let st = self.state.read();
        let inode = st.meta.get(ino)?;
        expect_kind(inode, Kind::File)?;
        let end = inode.attr.size.min(offset.saturating_add(u64::from(len)));
        if offset >= end {
            return Ok(Vec::new());
        }
        self.read_target(inode, offset, end)
    }

    /// The RAM budget recorded in the file system (`hscm volume create --fs --ram`).
    pub fn recorded_ram_budget(&self) -> Option<u64> {
        let v = self.getxattr(ROOT, RAM_BUDGET_XATTR).ok()?;
        std::str::from_utf8(&v).ok()?.trim().parse().ok()
    }

    /// Records the RAM budget mounts use by default.
    pub fn set_ram_budget(&self, budget: u64) -> Result<()> {
        self.setxattr(
            ROOT,
            RAM_BUDGET_XATTR,
            budget.to_string().as_bytes(),
            false,
            false,
        )
    }

    pub fn ram_usage(&self) -> RamUsage {
        self.ram.usage()
    }

    /// Loads a resident file's bytes from the target into its RAM now (nothing if it
    /// is not resident, loaded already, or gone).
    pub fn load_file(&self, ino: u64) -> Result<()> {
        let Some(f) = self.ram.get(ino) else {
            return Ok(());
        };
        let mut at = 0u64;
        while !f.is_loaded() {
            let st = self.state.read();
            let Ok(inode) = st.meta.get(ino) else {
                return Ok(());
            };
            let _bytes = f.lock.lock();
            let size = inode.attr.size;
            let io = |e: std::io::Error| Error::Failed(format!("loading file {ino} into RAM: {e}"));
            if at == 0 {
                f.set_len(size).map_err(io)?;
            }
            if at >= size {
                f.set_loaded();
                break;
            }
            let end = size.min(at + LOAD_PIECE);
            let bytes = self.read_target(inode, at, end)?;
            f.write(at, &bytes).map_err(io)?;
            at = end;
        }
        Ok(())
    }

    /// Starts the thread that loads files into RAM: those opened first, then every
    /// file in inode order while the budget admits them. It ends with the file system.
    pub fn load_in_background(self: &Arc<Self>) -> Option<std::thread::JoinHandle<()>> {
        let files: Vec<(u64, u64)> = {
            let st = self.state.read();
            let mut v: Vec<(u64, u64)> = st
                .meta
                .inodes
                .values()
                .filter(|i| i.attr.kind == Kind::File)
                .map(|i| (i.attr.ino, i.attr.size))
                .collect();
            v.sort_unstable();
            v
        };
        self.ram
            .background
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let weak: Weak<FileSystem> = Arc::downgrade(self);
        let ram = self.ram.clone();
        std::thread::Builder::new()
            .name("hscm-fs-loader".into())
            .spawn(move || run_loader(weak, ram, files))
            .ok()
    }

    /// Ends the loader thread (at unmount).
    pub fn stop_loading(&self) {
        self.ram
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.ram.queued.notify_all();
    }
}

fn run_loader(fs: Weak<FileSystem>, ram: Arc<ram::Ram>, files: Vec<(u64, u64)>) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut sweep = files.into_iter();
    let mut sweep_done = false;
    while !ram.stop.load(Relaxed) {
        let asked = {
            let mut q = ram.queue.lock();
            if q.is_empty() && sweep_done {
                // Nothing asked for and the sweep is over: wait for an open. The
                // file system is not held meanwhile, so it can go.
                ram.queued.wait_for(&mut q, Duration::from_millis(200));
            }
            q.pop_front()
        };
        let Some(fs) = fs.upgrade() else { return };
        let ino = match asked {
            Some(ino) => ino,
            None if sweep_done => continue,
            None => match sweep.next() {
                Some((ino, size)) if fs.admit_in_sweep(ino, size) => ino,
                Some(_) => continue,
                None => {
                    sweep_done = true;
                    continue;
                }
            },
        };
        if let Err(e) = fs.load_file(ino) {
            tracing::warn!("loading file {ino} into RAM: {e}; it is read from the target");
            ram.forget(ino);
        }
        fs.close_if_idle(ino);
    }
}

impl FileSystem {
    /// The sweep admits a file only while the budget has room, evicting nothing:
    /// what users open decides what goes.
    fn admit_in_sweep(&self, ino: u64, size: u64) -> bool {
        if !self.ram.has_room(size) {
            return false;
        }
        let is_open = |k: u64| self.state.read().open.contains_key(&k);
        let admitted = matches!(self.ram.admit(ino, size, is_open), Ok(Some(_)));
        if admitted {
            self.writes_in_place_see_ram();
        }
        admitted
    }

    /// After a file is admitted: waits out the writes in place that looked for its
    /// RAM before it existed (they write the target only), so that the loader, which
    /// copies the target, sees their bytes. Later ones find the RAM and change it.
    fn writes_in_place_see_ram(&self) {
        drop(self.in_place.write());
    }
}
