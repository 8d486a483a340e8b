//! What a program wrote is what `stat`, `read` and `mmap` show, on every path a
//! mount serves files by, and what was acknowledged is there after a remount: many
//! files written, closed and stamped (as `git clone` and `tar` do), git itself, and
//! shared mappings that outlive their descriptor. Root only (FUSE passthrough);
//! elsewhere each test says so and passes.

use crate::mount_passthrough::{is_root, pattern, Mounted, MODES};
use crate::util::fs_volume;

use std::path::Path;
use std::process::Command;

/// Every way a mount serves files: durability and the flags of `hscm mount`.
pub(crate) const PATHS: [(&str, &[&str]); 3] = [
    ("on-flush", &[]),
    ("immediate", &[]),
    ("on-flush", &["--no-passthrough"]),
];

/// Runs `test` once per way of serving ([`PATHS`]), each on a fresh file system of
/// `size`, with a name for its messages; unmounts after each.
pub(crate) fn on_every_path(size: &str, test: impl Fn(&str, &crate::mount_passthrough::Mounted)) {
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let dir = tempfile::tempdir().unwrap();
        let v = crate::util::fs_volume(dir.path(), size, mode);
        let m = crate::mount_passthrough::Mounted::with(&v, &dir.path().join("mnt"), extra);
        test(&what, &m);
        m.unmount();
    }
}

/// Every test here needs root (FUSE passthrough) and holds the system's memory
/// for reading (see `util::SYSTEM_MEMORY`); None, said once, where not root.
pub(crate) fn root_and_memory() -> Option<std::sync::RwLockReadGuard<'static, ()>> {
    if !is_root() {
        eprintln!("skipped: FUSE passthrough needs root");
        return None;
    }
    Some(
        crate::util::SYSTEM_MEMORY
            .read()
            .unwrap_or_else(|e| e.into_inner()),
    )
}

fn size_of(i: usize) -> usize {
    1 + (i * 7919) % 60_000
}

/// A time in the past, as `tar` and `git clone` give the files they write.
fn stamp(i: usize) -> rustix::fs::Timespec {
    rustix::fs::Timespec {
        tv_sec: 1_500_000_000 + i as i64,
        tv_nsec: 0,
    }
}

fn set_mtime(path: &Path, i: usize) {
    let t = stamp(i);
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &rustix::fs::Timestamps {
            last_access: t,
            last_modification: t,
        },
        rustix::fs::AtFlags::empty(),
    )
    .unwrap();
}

fn check_file(path: &Path, i: usize, what: &str) {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path).unwrap();
    assert_eq!(
        md.len(),
        size_of(i) as u64,
        "{what}: size of {}",
        path.display()
    );
    assert_eq!(
        md.mtime(),
        stamp(i).tv_sec,
        "{what}: mtime of {}",
        path.display()
    );
}

/// Write, close, stamp and stat, file after file (the kernel's release of each
/// file runs behind the next one's requests), then again after a remount.
#[test]
fn files_written_closed_and_stamped_show_their_size_and_time() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let files: usize = std::env::var("HSCM_WRITE_CLOSE_STAT_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "768M", mode);
        let at = dir.path().join("mnt");
        let m = Mounted::with(&v, &at, extra);
        for i in 0..files {
            let p = m.path(&format!("f{i}"));
            std::fs::write(&p, pattern(i as u8, size_of(i))).unwrap();
            set_mtime(&p, i);
            check_file(&p, i, &what);
        }
        // And once more, when every release has long been served.
        for i in (0..files).step_by(97) {
            check_file(&m.path(&format!("f{i}")), i, &what);
        }
        m.unmount();
        let m = Mounted::with(&v, &at, extra);
        for i in (0..files).step_by(7) {
            let p = m.path(&format!("f{i}"));
            check_file(&p, i, &format!("{what}, remounted"));
            assert!(
                std::fs::read(&p).unwrap() == pattern(i as u8, size_of(i)),
                "{what}, remounted: bytes of f{i}"
            );
        }
        m.unmount();
    }
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success(),
        "git {args:?} in {}: {text}",
        dir.display()
    );
    text
}

/// A repository with several pack files and loose objects, outside the mount.
fn source_repository(at: &Path) {
    std::fs::create_dir_all(at).unwrap();
    git(at, &["init", "-q", "-b", "main"]);
    for round in 0..4 {
        for i in 0..40 {
            let d = at.join(format!("d{}", i % 5));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join(format!("f{i}.txt")),
                pattern((round * 40 + i) as u8, 2000 + i * 300),
            )
            .unwrap();
        }
        git(at, &["add", "-A"]);
        git(at, &["commit", "-q", "-m", &format!("round {round}")]);
        // A pack per round: a local clone copies each, then stamps its time.
        git(at, &["repack", "-q"]);
    }
}

/// `git clone`, local (pack files copied, then stamped) and through the pack
/// protocol (index-pack), on every path; `git fsck` clean every time.
#[test]
fn git_clone_is_clean_on_every_path() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    source_repository(&src);
    let src_url = format!("file://{}", src.display());
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let inner = tempfile::tempdir().unwrap();
        let v = fs_volume(inner.path(), "256M", mode);
        let at = inner.path().join("mnt");
        let m = Mounted::with(&v, &at, extra);
        // The default path (on-flush with passthrough) is the one that lost sizes.
        let tries = if extra.is_empty() && mode == "on-flush" {
            20
        } else {
            3
        };
        for t in 0..tries {
            let local = m.path(&format!("local{t}"));
            git(
                &at,
                &[
                    "clone",
                    "-q",
                    src.to_str().unwrap(),
                    local.to_str().unwrap(),
                ],
            );
            let fsck = git(&local, &["fsck", "--full"]);
            assert!(!fsck.contains("error"), "{what}, try {t}: {fsck}");
            let status = git(&local, &["status", "--porcelain"]);
            assert!(status.is_empty(), "{what}, try {t}: {status}");
        }
        let remote = m.path("remote");
        git(
            &at,
            &[
                "clone",
                "-q",
                "--no-local",
                &src_url,
                remote.to_str().unwrap(),
            ],
        );
        git(&remote, &["fsck", "--full"]);
        m.unmount();
        let m = Mounted::with(&v, &at, extra);
        git(&m.path("local0"), &["fsck", "--full"]);
        git(&m.path("remote"), &["fsck", "--full"]);
        m.unmount();
    }
}

/// A file mapped, its descriptor closed, then written through the mapping around
/// fsyncs of another file: every byte written before the last fsync survives a
/// kill -9 of the daemon, and a clean unmount once the mapping is gone.
#[test]
fn a_mapping_that_outlives_its_descriptor_is_durable_at_the_next_fsync() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for mode in MODES {
        for crash in [true, false] {
            let what = format!("{mode}, {}", if crash { "kill -9" } else { "unmount" });
            let dir = tempfile::tempdir().unwrap();
            let v = fs_volume(dir.path(), "64M", mode);
            let at = dir.path().join("mnt");
            let m = Mounted::new(&v, &at);
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(m.path("mapped"))
                .unwrap();
            file.set_len(16384).unwrap();
            // SAFETY: the file is this test's own; nothing else resizes it while
            // it is mapped.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.unwrap();
            drop(file);
            map[0..6].copy_from_slice(b"AAAAAA");
            let other = std::fs::File::create(m.path("other")).unwrap();
            other.sync_all().unwrap();
            other.sync_all().unwrap();
            map[8192..8198].copy_from_slice(b"BBBBBB");
            other.sync_all().unwrap();
            drop(other);
            if crash {
                m.kill();
                drop(map);
            } else {
                // A mapping keeps the mount busy: it goes first.
                drop(map);
                m.unmount();
            }
            let m = Mounted::new(&v, &at);
            let got = std::fs::read(m.path("mapped")).unwrap();
            assert_eq!(got.len(), 16384, "{what}");
            assert_eq!(&got[0..6], b"AAAAAA", "{what}");
            assert_eq!(&got[8192..8198], b"BBBBBB", "{what}");
            m.unmount();
        }
    }
}

/// msync(MS_SYNC) of a shared mapping is durable when it returns, as on a local
/// file system: a file mapped read-write (its descriptor kept, or closed before
/// the writes), written, msync'ed, then the daemon killed with -9: every byte
/// msync covered is there after a remount, in both modes. (A mapping of a
/// passthrough open maps the file's RAM itself, and its msync never reaches the
/// daemon; read-write opens are served through the page cache so that it does.)
#[test]
fn msync_is_durable_when_it_returns() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for mode in MODES {
        for keep_descriptor in [true, false] {
            let what = format!(
                "{mode}, descriptor {}",
                if keep_descriptor { "kept" } else { "closed" }
            );
            let dir = tempfile::tempdir().unwrap();
            let v = fs_volume(dir.path(), "64M", mode);
            let at = dir.path().join("mnt");
            let m = Mounted::new(&v, &at);
            // A file that was in RAM and read before it is mapped, and a new one.
            std::fs::write(m.path("old"), pattern(3, 65536)).unwrap();
            assert_eq!(std::fs::read(m.path("old")).unwrap(), pattern(3, 65536));
            let mut maps = Vec::new();
            let mut files = Vec::new();
            for name in ["old", "new"] {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(m.path(name))
                    .unwrap();
                file.set_len(65536).unwrap();
                // SAFETY: the file is this test's own; nothing else resizes it
                // while it is mapped.
                let map = unsafe { memmap2::MmapMut::map_mut(&file) }.unwrap();
                maps.push(map);
                if keep_descriptor {
                    files.push(file);
                }
            }
            for (i, map) in maps.iter_mut().enumerate() {
                map[100..106].copy_from_slice(b"MSYNC1");
                map[40000..40006].copy_from_slice(format!("PAGE{i:02}").as_bytes());
                map.flush().unwrap();
            }
            m.kill();
            drop(maps);
            drop(files);
            let m = Mounted::new(&v, &at);
            for (i, name) in ["old", "new"].into_iter().enumerate() {
                let got = std::fs::read(m.path(name)).unwrap();
                assert_eq!(got.len(), 65536, "{what}: {name}");
                assert_eq!(&got[100..106], b"MSYNC1", "{what}: {name}");
                assert_eq!(
                    &got[40000..40006],
                    format!("PAGE{i:02}").as_bytes(),
                    "{what}: {name}"
                );
                if name == "old" {
                    let mut want = pattern(3, 65536);
                    want[100..106].copy_from_slice(b"MSYNC1");
                    want[40000..40006].copy_from_slice(b"PAGE00");
                    assert!(got == want, "{what}: the rest of {name} changed");
                }
            }
            m.unmount();
        }
    }
}

/// More written than the file system holds, by write(2) into RAM: the close
/// reports ENOSPC (dd fails), a file closed before is intact after a remount, and
/// an unmount that leaves data behind ends with an error; once the file is
/// removed, unmounting is clean again.
#[test]
fn a_full_file_system_is_the_close_s_error_and_the_unmount_s() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "64M", mode);
        let at = dir.path().join("mnt");
        let m = Mounted::with(&v, &at, extra);
        std::fs::write(m.path("kept"), pattern(3, 1 << 20)).unwrap();
        let dd = |name: &str| {
            Command::new("dd")
                // Not zeroes: zeroes past a file's end stay holes, and fit.
                .arg("if=/dev/urandom")
                .arg(format!("of={}", at.join(name).display()))
                .args(["bs=1M", "count=128", "status=none"])
                .output()
                .unwrap()
        };
        let o = dd("big");
        assert!(
            !o.status.success(),
            "{what}: dd of 128 MiB into 64 MiB succeeded"
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("No space left"), "{what}: {err}");
        let (umount, status) = m.unmount_status();
        // Immediate mode and the page cache refuse at write(2): nothing is left.
        if mode == "on-flush" && extra.is_empty() {
            assert!(
                !status.success(),
                "{what}: the daemon left data behind and said nothing"
            );
            // `hscm umount` too, naming the file.
            let said = String::from_utf8_lossy(&umount.stderr);
            assert!(
                !umount.status.success()
                    && said.contains("big")
                    && said.contains("did not all reach"),
                "{what}: hscm umount left data behind and said: {said}"
            );
        } else {
            assert!(
                umount.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&umount.stderr)
            );
        }
        let m = Mounted::with(&v, &at, extra);
        assert!(
            std::fs::read(m.path("kept")).unwrap() == pattern(3, 1 << 20),
            "{what}"
        );
        std::fs::remove_file(m.path("big")).unwrap();
        let o = dd("big2");
        assert!(!o.status.success(), "{what}: second dd");
        std::fs::remove_file(m.path("big2")).unwrap();
        let (umount, status) = m.unmount_status();
        assert!(
            umount.status.success() && status.success(),
            "{what}: a clean unmount after rm: {}",
            String::from_utf8_lossy(&umount.stderr)
        );
    }
}

/// More files than this process may hold descriptors for (20,000 on this machine
/// kind, where root cannot raise it): every file is in RAM and reads back right
/// (the files' RAM is a private tmpfs: a descriptor only while a file is in use),
/// `syncfs` returns 0, and `hscm status` still reaches the mount.
/// `HSCM_MANY_FILES` sets the count (200,000 by hand).
#[test]
fn a_tree_larger_than_the_descriptor_limit_is_served_whole() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let files: usize = std::env::var("HSCM_MANY_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25_000);
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "1G", "on-flush");
    let at = dir.path().join("mnt");
    let m = Mounted::new(&v, &at);
    let path = |i: usize| m.path(&format!("d{}/f{i}", i / 1000));
    for i in 0..files {
        if i % 1000 == 0 {
            std::fs::create_dir(m.path(&format!("d{}", i / 1000))).unwrap();
        }
        std::fs::write(path(i), format!("file {i}\n")).unwrap();
    }
    let o = Command::new("sync").arg("-f").arg(&at).output().unwrap();
    assert!(
        o.status.success(),
        "syncfs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for i in (0..files).step_by(97).chain([files - 1]) {
        let mut value = [0u8; 32];
        let n = rustix::fs::getxattr(path(i), "trusted.hscm.in_ram", &mut value).unwrap();
        assert_eq!(&value[..n], b"passthrough", "file {i} is not in RAM");
        assert_eq!(
            std::fs::read_to_string(path(i)).unwrap(),
            format!("file {i}\n")
        );
    }
    let o = crate::util::run(&["status", "--json"]);
    assert!(o.status.success(), "{}", crate::util::text(&o));
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(
        listed.contains(at.to_str().unwrap()),
        "hscm status lost the mount: {listed}"
    );
    m.unmount();
}

/// With `--suid`: a file opened for writing by its owner (not root), then made
/// setuid and setgid by root, then written through that open: the write drops
/// both bits, as on tmpfs, by the time the close returns.
#[test]
fn a_write_through_an_earlier_open_drops_setuid_and_setgid() {
    use std::os::unix::fs::PermissionsExt;
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "64M", mode);
        let at = dir.path().join("mnt");
        let m = Mounted::with(&v, &at, &["--suid"]);
        let f = m.path("prog");
        std::fs::write(&f, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o775)).unwrap();
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755)).unwrap();
        let go = m.path("go");
        // The owner opens, waits for root's chmod, then writes and closes.
        let script = format!(
            "exec 3>>{f}; echo opened; while [ ! -e {go} ]; do sleep 0.05; done; echo evil >&3; exec 3>&-",
            f = f.display(),
            go = go.display()
        );
        let mut owner = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                &script,
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(owner.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "opened");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o6775)).unwrap();
        std::fs::write(&go, b"").unwrap();
        assert!(owner.wait().unwrap().success());
        let perm = std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            perm, 0o775,
            "{mode}: setuid/setgid kept after a write: {perm:o}"
        );
        m.unmount();
    }
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `/proc/PID/status` figure in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// 2,000 opens of a 5,000-entry directory cost the daemon no copy of it each;
/// a listing made while files are created and removed lists every entry that
/// stayed exactly once, and nothing twice.
#[test]
fn open_directories_cost_no_copy_and_list_each_entry_once() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "256M", "on-flush");
    let at = dir.path().join("mnt");
    let m = Mounted::new(&v, &at);
    let d = m.path("big");
    std::fs::create_dir(&d).unwrap();
    for i in 0..5000 {
        std::fs::File::create(d.join(format!("kept-{i:05}-{}", "x".repeat(40)))).unwrap();
    }
    for i in 0..500 {
        std::fs::File::create(d.join(format!("gone-{i:05}"))).unwrap();
    }
    let before = rss_kib(m.pid());
    let mut handles = Vec::new();
    for _ in 0..2000 {
        let mut it = std::fs::read_dir(&d).unwrap();
        it.next().unwrap().unwrap();
        handles.push(it);
    }
    let grown = rss_kib(m.pid()).saturating_sub(before);
    eprintln!("2,000 open listings of 5,500 entries: the daemon grew by {grown} KiB");
    assert!(grown < 64 << 10, "2,000 open listings took {grown} KiB");
    drop(handles);
    // A listing with changes between its reads.
    let mut names = Vec::new();
    for (n, entry) in std::fs::read_dir(&d).unwrap().enumerate() {
        names.push(entry.unwrap().file_name().into_string().unwrap());
        if n % 10 == 0 && n / 10 < 500 {
            std::fs::remove_file(d.join(format!("gone-{:05}", n / 10))).unwrap();
            std::fs::File::create(d.join(format!("new-{n:05}"))).unwrap();
        }
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "an entry listed twice");
    let kept = names.iter().filter(|n| n.starts_with("kept-")).count();
    assert_eq!(kept, 5000, "every entry present throughout, once");
    m.unmount();
}

/// A `--ram 32M` mount given 96 MiB of new files, each written and closed: the
/// files' RAM stays within the budget (files leave it at their close), and every
/// file reads back right, from RAM or from the device, and after a remount.
#[test]
fn new_files_keep_to_the_ram_budget() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "256M", mode);
        let at = dir.path().join("mnt");
        let m = Mounted::with(&v, &at, &["--ram", "32M"]);
        for i in 0..24 {
            std::fs::write(m.path(&format!("f{i}")), pattern(i as u8, 4 << 20)).unwrap();
        }
        // The kernel releases the last file after close(2) returns: until its
        // release is served the file counts as open.
        let mut ram = files_ram(&at);
        crate::util::wait_until(std::time::Duration::from_secs(5), || {
            ram = files_ram(&at);
            ram <= 32 << 20
        });
        assert!(
            ram <= 32 << 20,
            "{mode}: {ram} bytes of files in RAM over a 32 MiB budget"
        );
        for i in 0..24 {
            assert!(std::fs::read(m.path(&format!("f{i}"))).unwrap() == pattern(i as u8, 4 << 20));
        }
        m.unmount();
        let m = Mounted::with(&v, &at, &["--ram", "32M"]);
        for i in (0..24).step_by(5) {
            assert!(std::fs::read(m.path(&format!("f{i}"))).unwrap() == pattern(i as u8, 4 << 20));
        }
        m.unmount();
    }
}

/// Under a RAM budget, files read from home hold space there and none in RAM: the
/// files' RAM must then take no more than home can (the private tmpfs's size
/// follows home's free space), so a writer filling the file system meets ENOSPC
/// at write(2), not first at close. On-flush, passthrough (immediate mode's writes
/// reach the file system, which refuses them itself).
#[test]
fn under_a_ram_budget_ram_takes_no_more_than_home_can() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "64M", "on-flush");
    let at = dir.path().join("mnt");
    let m = Mounted::with(&v, &at, &["--ram", "8M"]);
    for i in 0..6 {
        std::fs::write(m.path(&format!("f{i}")), pattern(i as u8, 8 << 20)).unwrap();
    }
    m.unmount();
    // Mounted again: the 48 MiB of files are at home, at most the budget in RAM.
    let m = Mounted::with(&v, &at, &["--ram", "8M"]);
    let free = rustix::fs::statvfs(&at).unwrap();
    let free_mib = (free.f_bavail * free.f_frsize) >> 20;
    let writer = r#"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
chunk = os.urandom(1 << 20)
for n in range(64):
    try:
        os.write(fd, chunk)
    except OSError as e:
        print(f"write-error {n} {e.errno}")
        sys.exit(0)
try:
    os.close(fd)
    print("ok")
except OSError as e:
    print(f"close-error {e.errno}")
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(writer)
        .arg(m.path("big"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let written: u64 = said
        .strip_prefix("write-error ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "64 MiB into {free_mib} MiB free did not fail at write(2): {said} {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    assert!(said.ends_with(" 28"), "{said}");
    // The budget, home's free space and the margin (8 MiB at this size), and no more.
    assert!(
        written <= 8 + free_mib + 8 + 1,
        "{written} MiB went into RAM with {free_mib} MiB free at home"
    );
    std::fs::remove_file(m.path("big")).unwrap();
    m.unmount();
    let m = Mounted::with(&v, &at, &["--ram", "8M"]);
    for i in 0..6 {
        assert!(std::fs::read(m.path(&format!("f{i}"))).unwrap() == pattern(i as u8, 8 << 20));
    }
    m.unmount();
}

/// A tree written, then removed (`rm -rf`), on every path: `syncfs` answers 0
/// after each step, as on any local file system (an fsync-class error is data
/// loss to careful programs).
#[test]
fn syncfs_fails_only_for_data_that_did_not_go_home() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "128M", mode);
        let at = dir.path().join("mnt");
        let m = Mounted::with(&v, &at, extra);
        let syncfs = |step: &str| {
            let o = Command::new("sync").arg("-f").arg(&at).output().unwrap();
            assert!(
                o.status.success(),
                "{what}, {step}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        for round in 0..3 {
            let tree = m.path("tree");
            for i in 0..300 {
                let d = tree.join(format!("d{}", i % 7));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join(format!("f{i}")), pattern(i as u8, 100 + i * 37)).unwrap();
            }
            if round != 2 {
                syncfs("after writing the tree");
            }
            std::fs::remove_dir_all(&tree).unwrap();
            syncfs("after rm -rf");
        }
        m.unmount();
    }
}

/// An unprivileged user on a root mount of a 64 MiB file system writes 512 MiB by
/// write(2), by ftruncate and a shared mapping, and by many files
/// (`scripts/fs/fill.py`), in both modes: nothing succeeds that is then lost (every
/// file whose writes and close succeeded is whole after a remount), and the mount's
/// RAM (its files' RAM plus the daemon's) stays under the file system's size plus
/// 64 MiB.
#[test]
fn a_neighbour_filling_the_file_system_neither_takes_the_machine_s_memory_nor_loses_data() {
    use std::os::unix::fs::PermissionsExt;
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let fill = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fs/fill.py");
    for mode in MODES {
        for how in ["write", "map", "files"] {
            let what = format!("{mode}, {how}");
            let dir = tempfile::tempdir().unwrap();
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let v = fs_volume(dir.path(), "64M", mode);
            let at = dir.path().join("mnt");
            let m = Mounted::new(&v, &at);
            let home = m.path("nobody");
            std::fs::create_dir(&home).unwrap();
            std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
            // The system's Python: one under root's home is not nobody's to run.
            let o = Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "/usr/bin/python3",
                ])
                .arg(&fill)
                .arg(&home)
                .arg(how)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&o.stdout).to_string();
            let acknowledged: Vec<String> = said
                .lines()
                .filter_map(|l| l.strip_prefix("ok "))
                .map(str::to_string)
                .collect();
            let stderr = String::from_utf8_lossy(&o.stderr);
            // SIGBUS: a shared mapping written past what the file system holds.
            let bus = std::os::unix::process::ExitStatusExt::signal(&o.status) == Some(7);
            assert!(
                said.contains("error") || bus,
                "{what}: 512 MiB fitted in 64 MiB, or the writer never ran: {said} {stderr}"
            );
            if how == "files" {
                assert!(acknowledged.len() >= 8, "{what}: {said} {stderr}");
            }
            let files_ram = files_ram(&at);
            // The daemon's own memory: its anonymous pages and the shared memory it
            // maps that is not a file's (none here). Not its resident binary and
            // libraries (RssFile: about 23 MiB of a debug build's text, page cache
            // the kernel can drop), which VmRSS counted.
            let daemon =
                (status_kib(m.pid(), "RssAnon:") << 10) + (status_kib(m.pid(), "RssShmem:") << 10);
            eprintln!("{what}: files' RAM {files_ram} bytes, daemon {daemon} bytes, {} files acknowledged", acknowledged.len());
            assert!(
                files_ram + daemon < (64 + 64) << 20,
                "{what}: files' RAM {files_ram} + daemon {daemon} bytes on a 64 MiB file system"
            );
            // The mapping's process died of SIGBUS with the file open in RAM, or
            // the writes went home: either way, unmount and look.
            let _ = m.unmount_status();
            let m = Mounted::new(&v, &at);
            for name in &acknowledged {
                let got = std::fs::read(m.path(&format!("nobody/{name}"))).unwrap();
                let want = fill_pattern(name, got.len());
                assert!(got == want, "{what}: {name} is not what was acknowledged");
                let mib = if name == "big" || name == "mapped" {
                    512
                } else {
                    1
                };
                assert_eq!(got.len(), mib << 20, "{what}: {name}'s size");
            }
            m.unmount_status();
        }
    }
}

/// What `hscm status` says the files of the mount at `at` hold in RAM.
fn files_ram(at: &Path) -> u64 {
    let o = crate::util::run(&["status", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let me = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["address"].as_str() == at.to_str())
        .expect("the mount in hscm status");
    me["fs"]["ram_bytes"].as_u64().unwrap()
}

/// `pattern()` of scripts/fs/fill.py.
fn fill_pattern(name: &str, n: usize) -> Vec<u8> {
    let seed = name.bytes().map(u32::from).sum::<u32>() % 251;
    (0..n)
        .map(|k| ((seed + (k % 4096) as u32) % 251 + 1) as u8)
        .collect()
}
