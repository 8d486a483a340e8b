//! Several devices on one power supply, each a flat namespace of files: the media the
//! key-value store runs on in its power-cut tests.
//!
//! A file's bytes are a [`CrashImage`]; the namespace has a live and a durable copy too
//! (a create or remove survives a power cut only after `sync_dir`; `replace` is atomic
//! and durable). Injected failures count writes and syncs across all devices.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Countdown, CrashImage, XorShift};
use crate::media::{Media, MediaFile};

/// The machine: its devices and its power.
#[derive(Clone)]
pub struct FaultyDisks {
    machine: Arc<Mutex<Machine>>,
}

struct Machine {
    disks: Vec<Disk>,
    powered: bool,
    faults: Countdown,
}

#[derive(Default)]
struct Disk {
    files: HashMap<u64, CrashImage>,
    live_names: BTreeMap<String, u64>,
    durable_names: BTreeMap<String, u64>,
    next_inode: u64,
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

impl Machine {
    fn powered(&self) -> io::Result<()> {
        if self.powered {
            Ok(())
        } else {
            Err(eio())
        }
    }

    fn count_write(&mut self) -> io::Result<()> {
        self.powered()?;
        self.faults.write()
    }

    fn count_sync(&mut self) -> io::Result<()> {
        self.powered()?;
        self.faults.sync()
    }
}

impl FaultyDisks {
    /// `devices` empty devices, powered.
    pub fn new(devices: usize) -> FaultyDisks {
        FaultyDisks {
            machine: Arc::new(Mutex::new(Machine {
                disks: (0..devices).map(|_| Disk::default()).collect(),
                powered: true,
                faults: Countdown::default(),
            })),
        }
    }

    /// One [`Media`] per device, in order.
    pub fn media(&self) -> Vec<Arc<dyn Media>> {
        let n = self.machine.lock().disks.len();
        (0..n)
            .map(|disk| {
                Arc::new(FaultyMedia {
                    machine: self.machine.clone(),
                    disk,
                }) as Arc<dyn Media>
            })
            .collect()
    }

    /// The `n`-th write from now (0 = the next) fails with `errno`, and all after it.
    pub fn fail_write_after(&self, n: u64, errno: i32) {
        self.machine.lock().faults.fail_write_after(n, errno);
    }

    /// The `n`-th sync (of a file or a directory) from now fails with EIO, and all after.
    pub fn fail_sync_after(&self, n: u64) {
        self.machine.lock().faults.fail_sync_after(n);
    }

    /// Cuts the power: every device answers EIO from now on, and the returned machine
    /// holds what a restart would find (the durable namespace, each file torn as
    /// [`CrashImage::after_power_cut`] describes).
    pub fn power_cut(&self, seed: u64) -> FaultyDisks {
        let mut m = self.machine.lock();
        m.powered = false;
        let mut rng = XorShift::new(seed);
        let disks = m
            .disks
            .iter()
            .map(|disk| {
                let mut files = HashMap::new();
                for inode in disk.durable_names.values() {
                    let image = disk.files[inode].after_power_cut(rng.next());
                    files.insert(*inode, CrashImage::new(image));
                }
                Disk {
                    files,
                    live_names: disk.durable_names.clone(),
                    durable_names: disk.durable_names.clone(),
                    next_inode: disk.next_inode,
                }
            })
            .collect();
        FaultyDisks {
            machine: Arc::new(Mutex::new(Machine {
                disks,
                powered: true,
                faults: Countdown::default(),
            })),
        }
    }
}

struct FaultyMedia {
    machine: Arc<Mutex<Machine>>,
    disk: usize,
}

impl FaultyMedia {
    fn not_found(&self, name: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("disk{}/{name}: no such file", self.disk),
        )
    }
}

impl Media for FaultyMedia {
    fn describe(&self) -> String {
        format!("disk{}", self.disk)
    }

    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn MediaFile>> {
        let mut m = self.machine.lock();
        m.powered()?;
        let disk = &mut m.disks[self.disk];
        let inode = match disk.live_names.get(name) {
            Some(&inode) => inode,
            None if create => {
                disk.next_inode += 1;
                let inode = disk.next_inode;
                disk.files.insert(inode, CrashImage::new(Vec::new()));
                disk.live_names.insert(name.to_string(), inode);
                inode
            }
            None => return Err(self.not_found(name)),
        };
        Ok(Arc::new(FaultyFile {
            machine: self.machine.clone(),
            disk: self.disk,
            inode,
        }))
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        let m = self.machine.lock();
        m.powered()?;
        let disk = &m.disks[self.disk];
        let inode = disk
            .live_names
            .get(name)
            .ok_or_else(|| self.not_found(name))?;
        Ok(disk.files[inode].live().to_vec())
    }

    fn exists(&self, name: &str) -> bool {
        self.machine.lock().disks[self.disk]
            .live_names
            .contains_key(name)
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let m = self.machine.lock();
        m.powered()?;
        Ok(m.disks[self.disk].live_names.keys().cloned().collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut m = self.machine.lock();
        m.powered()?;
        match m.disks[self.disk].live_names.remove(name) {
            Some(_) => Ok(()),
            None => Err(self.not_found(name)),
        }
    }

    fn replace(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut m = self.machine.lock();
        m.count_write()?;
        m.count_sync()?;
        let disk = &mut m.disks[self.disk];
        disk.next_inode += 1;
        let inode = disk.next_inode;
        disk.files.insert(inode, CrashImage::new(bytes.to_vec()));
        disk.live_names.insert(name.to_string(), inode);
        disk.durable_names.insert(name.to_string(), inode);
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut m = self.machine.lock();
        m.count_sync()?;
        let disk = &mut m.disks[self.disk];
        disk.durable_names = disk.live_names.clone();
        Ok(())
    }
}

/// An open file: it keeps its bytes even after its name is removed, as on Unix.
struct FaultyFile {
    machine: Arc<Mutex<Machine>>,
    disk: usize,
    inode: u64,
}

impl FaultyFile {
    fn with<T>(&self, f: impl FnOnce(&mut CrashImage) -> io::Result<T>) -> io::Result<T> {
        let mut m = self.machine.lock();
        m.powered()?;
        let image = m.disks[self.disk]
            .files
            .get_mut(&self.inode)
            .expect("an open file's inode stays until the machine goes");
        f(image)
    }
}

impl MediaFile for FaultyFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|img| Ok(img.live().len() as u64))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|img| {
            img.set_len(len as usize);
            Ok(())
        })
    }

    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.machine.lock().count_write()?;
        self.with(|img| {
            img.write(offset as usize, bytes);
            Ok(())
        })
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(|img| {
            let at = offset as usize;
            let bytes = img
                .live()
                .get(at..at + buf.len())
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end"))?;
            buf.copy_from_slice(bytes);
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.machine.lock().count_sync()?;
        self.with(|img| {
            img.sync();
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_file_survives_only_once_its_directory_is_synced() {
        let disks = FaultyDisks::new(2);
        let media = disks.media();
        let f = media[1].open("a.log", true).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        let after = disks.power_cut(7);
        assert!(
            !after.media()[1].exists("a.log"),
            "a name no sync_dir covered survived"
        );

        let disks = FaultyDisks::new(1);
        let media = disks.media();
        let f = media[0].open("a.log", true).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        media[0].sync_dir().unwrap();
        media[0].remove("a.log").unwrap();
        // Not durable yet: the file is back after the cut, with its synced bytes.
        let after = disks.power_cut(7);
        assert_eq!(after.media()[0].read("a.log").unwrap(), b"hello");
        assert!(media[0].list().is_err(), "the old machine has no power");
    }

    #[test]
    fn replace_is_atomic_and_durable_and_failures_count_across_devices() {
        let disks = FaultyDisks::new(2);
        let media = disks.media();
        media[0].replace("m", b"one").unwrap();
        media[0].replace("m", b"two").unwrap();
        assert_eq!(disks.power_cut(1).media()[0].read("m").unwrap(), b"two");

        let disks = FaultyDisks::new(2);
        let media = disks.media();
        let a = media[0].open("x", true).unwrap();
        let b = media[1].open("y", true).unwrap();
        disks.fail_sync_after(1);
        a.sync_data().unwrap();
        assert_eq!(b.sync_data().unwrap_err().raw_os_error(), Some(5));
        disks.fail_write_after(0, 28);
        assert_eq!(
            a.write_all_at(b"z", 0).unwrap_err().raw_os_error(),
            Some(28)
        );
    }
}
