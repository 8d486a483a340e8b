//! Where the files' RAM lives: a private tmpfs of the mount's own, or memfds.
//!
//! The private tmpfs (`fsopen("tmpfs")` with `size=` the file system's data
//! capacity, `fsmount`, never attached to any directory: it is reachable only
//! through the daemon's descriptor) does three things memfds cannot:
//! * **A bound the kernel enforces.** The files' RAM can never exceed what the file
//!   system can hold, whoever writes and however (write(2) by passthrough, a shared
//!   mapping, many files): a write past it fails with ENOSPC in the program that
//!   wrote, as on tmpfs, instead of filling the machine's memory and failing later
//!   at the write-back.
//! * **No descriptor per file.** Each file has a name in the tmpfs; the daemon opens
//!   it while the file is open or being worked on and closes it after, so a tree of
//!   a million files costs no million descriptors.
//! * **One place to see it.** `df` of the tmpfs is what the files hold in RAM.
//!
//! Making one takes CAP_SYS_ADMIN (the same as FUSE passthrough); without it, each
//! file's RAM is a memfd of its own, unbounded, one descriptor each (bounded by a
//! descriptor budget: past it, files are read from the target).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};

/// A private tmpfs holding the files' RAM, each under a name of its own.
pub(crate) struct Store {
    root: OwnedFd,
    next: AtomicU64,
    /// Its size now (see [`Store::keep_in_step`]).
    size: AtomicU64,
    /// The size it was made with: the file system's capacity plus the margin.
    full_size: u64,
    margin: u64,
}

impl Store {
    /// A new private tmpfs for a file system that holds `capacity` bytes of data:
    /// that much, plus a margin (1/32, at least 8 MiB, rounded up to whole pages).
    /// The file system's own copies into RAM never fail for room (a failed copy
    /// stops all writes); only the kernel's writes beyond what home can take meet
    /// the bound, at write(2), or, within the margin, at close or fsync.
    pub(crate) fn private_tmpfs(capacity: u64) -> std::io::Result<Store> {
        let margin = (capacity / 32).max(8 << 20);
        let size = capacity.saturating_add(margin);
        use rustix::mount::{
            fsconfig_create, fsconfig_set_string, fsmount, fsopen, FsMountFlags, FsOpenFlags,
            MountAttrFlags,
        };
        let size = size.div_ceil(4096) * 4096;
        let fs = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
        fsconfig_set_string(fs.as_fd(), "size", size.to_string())?;
        fsconfig_set_string(fs.as_fd(), "mode", "0700")?;
        fsconfig_create(fs.as_fd())?;
        let root = fsmount(
            fs.as_fd(),
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
        )?;
        Ok(Store {
            root,
            next: AtomicU64::new(0),
            size: AtomicU64::new(size),
            full_size: size,
            margin,
        })
    }

    /// How much more it holds than the file system's capacity.
    pub(crate) fn margin(&self) -> u64 {
        self.margin
    }

    /// The bytes its files may hold.
    pub(crate) fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// Keeps the size in step with what home can still take, under a RAM budget:
    /// the files' RAM may hold the budget (`loads`: files copied in from home take
    /// no room there) or what it holds now if more, plus home's free space (what
    /// writes can still add), plus the margin, and never more than the size it was
    /// made with. Without a budget every file is in RAM, and the size it was made
    /// with is already home's capacity plus the margin; under one, files read from
    /// home hold space there and none here, and a fixed size would let RAM take up
    /// to the whole capacity when home can take far less. Resized only when it
    /// moved by more than a quarter of the margin, so most calls cost one statvfs.
    pub(crate) fn keep_in_step(&self, loads: u64, home_free: u64) -> std::io::Result<()> {
        let want = self
            .used()
            .max(loads)
            .saturating_add(home_free)
            .saturating_add(self.margin)
            .min(self.full_size)
            .div_ceil(4096)
            * 4096;
        if want.abs_diff(self.size()) <= self.margin / 4 {
            return Ok(());
        }
        self.set_size(want)
    }

    /// Reconfigures the tmpfs's size (tmpfs refuses one below what it holds).
    fn set_size(&self, bytes: u64) -> std::io::Result<()> {
        use rustix::mount::{fsconfig_reconfigure, fsconfig_set_string, fspick, FsPickFlags};
        let fs = fspick(
            self.root.as_fd(),
            "",
            FsPickFlags::FSPICK_EMPTY_PATH | FsPickFlags::FSPICK_CLOEXEC,
        )?;
        fsconfig_set_string(fs.as_fd(), "size", bytes.to_string())?;
        fsconfig_reconfigure(fs.as_fd())?;
        self.size.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// A new empty file for `ino`, under a name no other file had (a file
    /// forgotten and admitted again gets a new one, so the old one's removal
    /// cannot take the new one's name).
    pub(crate) fn create(&self, ino: u64) -> std::io::Result<(String, File)> {
        let name = format!("{ino}.{}", self.next.fetch_add(1, Ordering::Relaxed));
        let fd = rustix::fs::openat(
            &self.root,
            name.as_str(),
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        Ok((name, File::from(fd)))
    }

    /// Opens a file made by [`Store::create`], for reading and writing, or for
    /// reading only.
    pub(crate) fn open(&self, name: &str, write: bool) -> std::io::Result<File> {
        let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
        let fd = rustix::fs::openat(&self.root, name, access | OFlags::CLOEXEC, Mode::empty())?;
        Ok(File::from(fd))
    }

    /// A file's status, without opening it.
    pub(crate) fn stat(&self, name: &str) -> std::io::Result<rustix::fs::Stat> {
        Ok(rustix::fs::statat(
            &self.root,
            name,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// Removes a file's name (its pages go once nothing has it open).
    pub(crate) fn remove(&self, name: &str) {
        if let Err(e) = rustix::fs::unlinkat(&self.root, name, rustix::fs::AtFlags::empty()) {
            tracing::warn!("removing {name} from the files' RAM: {e}");
        }
    }

    /// Bytes its files hold now.
    pub(crate) fn used(&self) -> u64 {
        rustix::fs::fstatvfs(&self.root)
            .map(|s| (s.f_blocks - s.f_bfree) * s.f_frsize)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// The bound is the kernel's: a write past the size fails with ENOSPC, and a
    /// removed file gives its room back. Root only (fsopen needs CAP_SYS_ADMIN).
    #[test]
    fn a_private_tmpfs_refuses_what_it_cannot_hold() {
        // 1 MiB of capacity: an 8 MiB margin makes a 9 MiB tmpfs.
        let store = match Store::private_tmpfs(1 << 20) {
            Ok(store) => store,
            Err(e) => {
                eprintln!("skipped: no private tmpfs here ({e})");
                return;
            }
        };
        let (name, file) = store.create(1).unwrap();
        file.write_all_at(&vec![7u8; 3 << 20], 0).unwrap();
        let err = file.write_all_at(&vec![7u8; 8 << 20], 3 << 20).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28), "{err}");
        assert!(store.used() >= 3 << 20);
        let again = store.open(&name, false).unwrap();
        let mut byte = [0u8; 1];
        again.read_exact_at(&mut byte, 12345).unwrap();
        assert_eq!(byte, [7]);
        assert!(store.stat(&name).unwrap().st_size as u64 >= 3 << 20);
        drop((file, again));
        store.remove(&name);
        assert!(store.used() < 1 << 20, "the room came back");
        let (other, _) = store.create(1).unwrap();
        assert_ne!(other, name, "names are never reused");
    }

    /// The size follows home's free space: home with room for 1 MiB more lets RAM
    /// take what it holds plus that plus the margin, and no more.
    #[test]
    fn the_bound_follows_home_s_free_space() {
        let store = match Store::private_tmpfs(64 << 20) {
            Ok(store) => store,
            Err(e) => {
                eprintln!("skipped: no private tmpfs here ({e})");
                return;
            }
        };
        let (_, file) = store.create(1).unwrap();
        file.write_all_at(&vec![7u8; 4 << 20], 0).unwrap();
        // Home has 1 MiB free (files read from home hold the rest); a 2 MiB budget.
        store.keep_in_step(2 << 20, 1 << 20).unwrap();
        let size = store.size();
        assert!(size < 64 << 20, "shrunk to {size}");
        assert!(size >= (4 << 20) + (1 << 20) + store.margin(), "{size}");
        let past = file
            .write_all_at(&vec![7u8; (size - (4 << 20)) as usize + (1 << 20)], 4 << 20)
            .unwrap_err();
        assert_eq!(past.raw_os_error(), Some(28), "{past}");
        // Home freed space: RAM may take it again.
        store.keep_in_step(2 << 20, 60 << 20).unwrap();
        assert!(store.size() >= 64 << 20, "{}", store.size());
        // Never past the size it was made with.
        store.keep_in_step(1 << 40, 1 << 40).unwrap();
        assert!(store.size() <= (64 << 20) + store.margin() + 4096);
    }
}
