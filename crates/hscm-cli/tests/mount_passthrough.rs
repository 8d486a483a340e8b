//! FUSE passthrough through the kernel: every way of mixing opens of one file
//! (readers then a writer, a writer then readers, shared writable mmap, truncate
//! while mapped, O_APPEND, rename over an open file, an open through the page cache
//! beside passthrough ones) reads back exactly what was acknowledged, at once and
//! after a remount, in both durability modes. Root only (registering a backing file
//! takes CAP_SYS_ADMIN); elsewhere each test says so and passes.

use crate::util;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use util::{fs_volume, mount_foreground, run, text, wait_until};

pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub(crate) struct Mounted {
    pub(crate) at: PathBuf,
    daemon: Option<Child>,
}

impl Mounted {
    pub(crate) fn new(volume: &Path, at: &Path) -> Mounted {
        Self::with(volume, at, &[])
    }

    /// Mounted with `extra` flags of `hscm mount`.
    pub(crate) fn with(volume: &Path, at: &Path, extra: &[&str]) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        let daemon = mount_foreground(volume, at, extra);
        Mounted {
            at: at.to_path_buf(),
            daemon: Some(daemon),
        }
    }

    /// The daemon's process ID.
    pub(crate) fn pid(&self) -> u32 {
        self.daemon.as_ref().unwrap().id()
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.at.join(name)
    }

    pub(crate) fn unmount(mut self) {
        let o = run(&["umount", self.at.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        let status = self.daemon.take().unwrap().wait().unwrap();
        assert!(status.success(), "the daemon ended with {status}");
    }

    /// `hscm umount`'s output and the daemon's exit status (to check a failing
    /// unmount).
    pub(crate) fn unmount_status(mut self) -> (std::process::Output, std::process::ExitStatus) {
        let o = run(&["umount", self.at.to_str().unwrap()]);
        (o, self.daemon.take().unwrap().wait().unwrap())
    }

    /// kill -9 of the daemon, then the dead mount detached (as after a crash).
    pub(crate) fn kill(mut self) {
        let mut daemon = self.daemon.take().unwrap();
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        let o = Command::new("fusermount3")
            .arg("-uz")
            .arg(&self.at)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.daemon.is_some() {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.at)
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Whether the kernel serves read-only opens of `path` by passthrough from RAM (the
/// mount's `trusted.hscm.in_ram` attribute).
fn served_from_ram(path: &Path) -> bool {
    let mut value = [0u8; 32];
    match rustix::fs::getxattr(path, "trusted.hscm.in_ram", &mut value) {
        Ok(n) => &value[..n] == b"passthrough",
        Err(_) => false,
    }
}

/// Waits until the background loader has the file in RAM (reads go by passthrough).
fn wait_in_ram(path: &Path) {
    assert!(
        wait_until(Duration::from_secs(20), || served_from_ram(path)),
        "{} never came to be served from RAM",
        path.display()
    );
}

pub(crate) fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

fn read_all(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// A fresh file system with `name` holding `content`, mounted again so that the
/// file loads into RAM; `check` runs on the mount; then it is mounted once more and
/// every file in `expect` must read back as given.
fn scenario(
    durability: &str,
    files: &[(&str, Vec<u8>)],
    check: impl FnOnce(&Mounted),
    expect: impl FnOnce(&Mounted),
) {
    if !is_root() {
        eprintln!("skipped: FUSE passthrough needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "64M", durability);
    let at = dir.path().join("mnt");
    let m = Mounted::new(&v, &at);
    for (name, content) in files {
        std::fs::write(m.path(name), content).unwrap();
    }
    m.unmount();
    let m = Mounted::new(&v, &at);
    for (name, _) in files {
        wait_in_ram(&m.path(name));
    }
    check(&m);
    m.unmount();
    let m = Mounted::new(&v, &at);
    expect(&m);
    m.unmount();
}

pub(crate) const MODES: [&str; 2] = ["on-flush", "immediate"];

#[test]
fn readers_then_a_writer() {
    for mode in MODES {
        let old = pattern(1, 300_000);
        let mut new = old.clone();
        new[5000..9000].copy_from_slice(&pattern(7, 4000));
        let expected = new.clone();
        scenario(
            mode,
            &[("f", old.clone())],
            |m| {
                let reader = File::open(m.path("f")).unwrap();
                let mut buf = vec![0u8; 4000];
                reader.read_exact_at(&mut buf, 5000).unwrap();
                assert_eq!(buf, old[5000..9000]);
                let writer = OpenOptions::new().write(true).open(m.path("f")).unwrap();
                writer.write_all_at(&pattern(7, 4000), 5000).unwrap();
                reader.read_exact_at(&mut buf, 5000).unwrap();
                assert_eq!(buf, pattern(7, 4000), "{mode}: the reader sees the write");
                writer.sync_all().unwrap();
                drop(writer);
                assert!(read_all(&m.path("f")) == new, "{mode}: a new open sees it");
            },
            |m| {
                assert!(
                    read_all(&m.path("f")) == expected,
                    "{mode}: after a remount"
                )
            },
        );
    }
}

#[test]
fn a_writer_then_readers() {
    for mode in MODES {
        let old = pattern(2, 100_000);
        let mut new = old.clone();
        new.extend_from_slice(&pattern(9, 50_000));
        new[10..20].copy_from_slice(&[0xee; 10]);
        let expected = new.clone();
        scenario(
            mode,
            &[("f", old)],
            |m| {
                let writer = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(m.path("f"))
                    .unwrap();
                writer.write_all_at(&[0xee; 10], 10).unwrap();
                writer.write_all_at(&pattern(9, 50_000), 100_000).unwrap();
                assert_eq!(
                    std::fs::metadata(m.path("f")).unwrap().len(),
                    150_000,
                    "{mode}: stat sees the size the write made"
                );
                let reader = File::open(m.path("f")).unwrap();
                let mut got = Vec::new();
                (&reader).read_to_end(&mut got).unwrap();
                assert!(got == new, "{mode}: a reader opened after sees every write");
                // Closed without fsync: the close takes them home.
            },
            |m| {
                assert!(
                    read_all(&m.path("f")) == expected,
                    "{mode}: after a remount"
                )
            },
        );
    }
}

#[test]
fn shared_writable_mappings_are_durable_at_fsync_and_close() {
    for mode in MODES {
        let old = pattern(3, 64 << 10);
        let mut new = old.clone();
        new[100..200].fill(0x5a);
        new[40_000..40_100].fill(0xa5);
        let expected = new.clone();
        scenario(
            mode,
            &[("f", old)],
            |m| {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(m.path("f"))
                    .unwrap();
                // SAFETY: a shared mapping of a file only this test uses; nothing
                // truncates it while mapped.
                let mut map = unsafe { memmap2::MmapMut::map_mut(&f) }.unwrap();
                map[100..200].fill(0x5a);
                map.flush().unwrap();
                f.sync_all().unwrap();
                let mut got = vec![0u8; 100];
                File::open(m.path("f"))
                    .unwrap()
                    .read_exact_at(&mut got, 100)
                    .unwrap();
                assert_eq!(got, vec![0x5a; 100], "{mode}: readers see the mapping");
                // Written after the last fsync: the close (with the mapping gone)
                // takes it home.
                map[40_000..40_100].fill(0xa5);
                drop(map);
                drop(f);
            },
            |m| {
                assert!(
                    read_all(&m.path("f")) == expected,
                    "{mode}: after a remount"
                )
            },
        );
    }
}

#[test]
fn truncate_while_mapped() {
    for mode in MODES {
        let old = pattern(4, 200_000);
        let expected = old[..10_000].to_vec();
        scenario(
            mode,
            &[("f", old.clone())],
            |m| {
                let f = File::open(m.path("f")).unwrap();
                // SAFETY: a read-only mapping; only its first 10,000 bytes are read
                // after the truncate, which keeps them.
                let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
                assert_eq!(map[150_000], old[150_000]);
                OpenOptions::new()
                    .write(true)
                    .open(m.path("f"))
                    .unwrap()
                    .set_len(10_000)
                    .unwrap();
                assert_eq!(map[..10_000], old[..10_000], "{mode}: the kept part");
                assert_eq!(std::fs::metadata(m.path("f")).unwrap().len(), 10_000);
                assert!(read_all(&m.path("f")) == old[..10_000], "{mode}");
                drop(map);
            },
            |m| {
                assert!(
                    read_all(&m.path("f")) == expected,
                    "{mode}: after a remount"
                )
            },
        );
    }
}

#[test]
fn appends_from_two_opens() {
    for mode in MODES {
        let old = pattern(5, 5000);
        let mut expected = old.clone();
        for i in 0..20u8 {
            expected.extend_from_slice(&[i; 333]);
        }
        let want = expected.clone();
        scenario(
            mode,
            &[("log", old)],
            |m| {
                let open = || OpenOptions::new().append(true).open(m.path("log")).unwrap();
                let (mut a, mut b) = (open(), open());
                for i in 0..20u8 {
                    let w = if i % 2 == 0 { &mut a } else { &mut b };
                    w.write_all(&[i; 333]).unwrap();
                }
                a.sync_all().unwrap();
                assert!(read_all(&m.path("log")) == want, "{mode}: appends in order");
            },
            |m| {
                assert!(
                    read_all(&m.path("log")) == expected,
                    "{mode}: after a remount"
                )
            },
        );
    }
}

#[test]
fn rename_over_an_open_file() {
    for mode in MODES {
        let (a, b) = (pattern(6, 70_000), pattern(8, 30_000));
        let expected = b.clone();
        scenario(
            mode,
            &[("a", a.clone()), ("b", b.clone())],
            |m| {
                let old_reader = File::open(m.path("a")).unwrap();
                std::fs::rename(m.path("b"), m.path("a")).unwrap();
                let mut got = Vec::new();
                (&old_reader).read_to_end(&mut got).unwrap();
                assert!(
                    got == a,
                    "{mode}: an open of the replaced file reads it still"
                );
                assert!(
                    read_all(&m.path("a")) == b,
                    "{mode}: the name reads the new file"
                );
                let mut w = OpenOptions::new().append(true).open(m.path("a")).unwrap();
                w.write_all(b"!").unwrap();
                w.sync_all().unwrap();
            },
            |m| {
                let mut want = expected.clone();
                want.push(b'!');
                assert!(read_all(&m.path("a")) == want, "{mode}: after a remount");
                assert!(!m.path("b").exists());
            },
        );
    }
}

#[test]
fn an_open_through_the_page_cache_beside_passthrough_ones() {
    // A file created and still open is served through the page cache until it is
    // loaded; every other open of it must then take the same path (the kernel
    // refuses to mix them, with EIO in the opener).
    for mode in MODES {
        scenario(
            mode,
            &[],
            |m| {
                let mut w = File::create(m.path("new")).unwrap();
                w.write_all(&pattern(9, 20_000)).unwrap();
                for _ in 0..20 {
                    let got = read_all(&m.path("new"));
                    assert!(got == pattern(9, 20_000), "{mode}: a second open reads it");
                    std::thread::sleep(Duration::from_millis(20));
                }
                w.write_all(b"tail").unwrap();
                w.sync_all().unwrap();
                drop(w);
                wait_in_ram(&m.path("new"));
                let mut want = pattern(9, 20_000);
                want.extend_from_slice(b"tail");
                assert!(read_all(&m.path("new")) == want, "{mode}");
            },
            |m| {
                let mut want = pattern(9, 20_000);
                want.extend_from_slice(b"tail");
                assert!(read_all(&m.path("new")) == want, "{mode}: after a remount");
            },
        );
    }
}

#[test]
fn direct_io_opens_and_setuid_files_are_served_correctly() {
    // O_DIRECT readers and a setuid file (whose writes must drop the bit, so they go
    // through the file system) beside passthrough opens.
    for mode in MODES {
        scenario(
            mode,
            &[("s", pattern(10, 8192))],
            |m| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(m.path("s"), std::fs::Permissions::from_mode(0o4755))
                    .unwrap();
                let reader = OpenOptions::new()
                    .read(true)
                    .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
                    .open(m.path("s"));
                if let Ok(mut r) = reader {
                    let mut got = Vec::new();
                    let _ = r.read_to_end(&mut got);
                }
                let w = OpenOptions::new().write(true).open(m.path("s")).unwrap();
                w.write_all_at(b"x", 0).unwrap();
                w.sync_all().unwrap();
                drop(w);
                assert_eq!(read_all(&m.path("s"))[0], b'x', "{mode}");
            },
            |m| assert_eq!(read_all(&m.path("s"))[0], b'x', "{mode}: after a remount"),
        );
    }
}

/// What `trusted.hscm.in_ram` says of a file: passthrough, ram or device.
fn in_ram(path: &Path) -> String {
    let mut value = [0u8; 32];
    let n = rustix::fs::getxattr(path, "trusted.hscm.in_ram", &mut value).unwrap();
    String::from_utf8_lossy(&value[..n]).into_owned()
}

#[test]
fn a_file_system_twice_its_ram_budget_reads_back_everything() {
    if !is_root() {
        eprintln!("skipped: reading trusted.hscm.in_ram needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v = util::volume_with(dir.path(), "96M", "on-flush", &["--fs", "--ram", "16M"]);
    let at = dir.path().join("mnt");
    let files: Vec<(String, Vec<u8>)> = (0..8u8)
        .map(|i| (format!("f{i}"), pattern(i.wrapping_mul(37), 4 << 20)))
        .collect();
    let m = Mounted::new(&v, &at);
    for (name, content) in &files {
        std::fs::write(m.path(name), content).unwrap();
    }
    for (name, content) in &files {
        assert!(read_all(&m.path(name)) == *content, "{name}");
    }
    m.unmount();
    // 32 MiB of files, 16 MiB of RAM: some are read from the device, and every one
    // reads back whole, again and again, whichever is resident.
    let m = Mounted::new(&v, &at);
    for _ in 0..2 {
        for (name, content) in &files {
            assert!(
                read_all(&m.path(name)) == *content,
                "{name} after a remount"
            );
        }
    }
    let states: Vec<String> = files.iter().map(|(n, _)| in_ram(&m.path(n))).collect();
    assert!(
        states.iter().any(|s| s == "device"),
        "a 16 MiB budget holds all 32 MiB of files: {states:?}"
    );
    // A file written while it is not resident reaches the device, and reads back.
    let last = &files[7].0;
    let f = OpenOptions::new().write(true).open(m.path(last)).unwrap();
    f.write_all_at(b"changed", 1000).unwrap();
    f.sync_all().unwrap();
    drop(f);
    m.unmount();
    let m = Mounted::new(&v, &at);
    let mut want = files[7].1.clone();
    want[1000..1007].copy_from_slice(b"changed");
    assert!(read_all(&m.path(last)) == want);
    m.unmount();
}

#[test]
fn a_background_mount_takes_the_ram_and_passthrough_flags() {
    if !is_root() {
        eprintln!("skipped: reading trusted.hscm.in_ram needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v = util::volume_with(dir.path(), "64M", "on-flush", &["--fs", "--ram", "4M"]);
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let umount = || {
        let o = run(&["umount", at.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
    };
    let mount = |extra: &[&str]| {
        let mut args = vec!["mount", v.to_str().unwrap(), at.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", text(&o));
    };
    mount(&[]);
    for i in 0..4 {
        std::fs::write(at.join(format!("f{i}")), pattern(i, 3 << 20)).unwrap();
    }
    umount();
    // --ram overrides the 4 MiB the volume records: every file comes into RAM.
    mount(&["--ram", "32M"]);
    for i in 0..4 {
        wait_in_ram(&at.join(format!("f{i}")));
    }
    umount();
    // --no-passthrough: in RAM, read through the daemon.
    mount(&["--ram", "32M", "--no-passthrough"]);
    let f = at.join("f0");
    assert!(
        wait_until(Duration::from_secs(20), || in_ram(&f) == "ram"),
        "{}",
        in_ram(&f)
    );
    assert!(read_all(&f) == pattern(0, 3 << 20));
    umount();
}

#[test]
fn bad_ram_flags_are_refused_by_name_and_leave_the_volume_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "32M", "on-flush");
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let (vs, ats) = (v.to_str().unwrap(), at.to_str().unwrap());
    for (args, named) in [
        (
            vec!["mount", vs, ats, "--ram-policy", "nonsense"],
            "nonsense",
        ),
        (vec!["mount", vs, ats, "--ram", "12Q"], "12Q"),
        (vec!["mount", vs, ats, "--ram", "-1"], "-1"),
    ] {
        let o = run(&args);
        assert!(!o.status.success(), "{args:?} was taken");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(named),
            "{args:?}: the error names {named}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // Nothing was mounted or written: the volume mounts and holds what it held.
    if !is_root() {
        return;
    }
    let m = Mounted::new(&v, &at);
    std::fs::write(m.path("kept"), b"kept").unwrap();
    m.unmount();
    let o = run(&["mount", vs, ats, "--ram-policy", "nonsense"]);
    assert!(!o.status.success());
    let m = Mounted::new(&v, &at);
    assert_eq!(read_all(&m.path("kept")), b"kept");
    m.unmount();
}
