//! `hscm mount` through the kernel: files written through the mount read back, across
//! an unmount and a remount; a daemon killed with files open loses nothing it
//! acknowledged; bad volumes and places are clear errors.

use crate::util;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use util::{fs_volume as volume, mount_foreground, run, text};

fn umount(at: &Path) {
    let o = run(&["umount", at.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Detaches a mount whose daemon died (the kernel answers ENOTCONN until then).
fn detach(at: &Path) {
    let _ = Command::new("fusermount3")
        .arg("-uz")
        .arg(at)
        .stderr(Stdio::null())
        .status();
}

/// Unmounts whatever is left at `at` when a test fails, so that the next test (and
/// the temporary directory's removal) do not meet a dead mount.
struct Detach(PathBuf);

impl Drop for Detach {
    fn drop(&mut self) {
        detach(&self.0);
    }
}

#[test]
fn files_written_through_the_mount_read_back_after_a_remount() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "64M", "immediate");
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _guard = Detach(at.clone());
    let o = run(&["mount", v.to_str().unwrap(), at.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::create_dir_all(at.join("a/b")).unwrap();
    std::fs::write(at.join("a/b/big"), &big).unwrap();
    std::fs::write(at.join("small"), b"hello").unwrap();
    std::os::unix::fs::symlink("a/b/big", at.join("link")).unwrap();
    std::fs::hard_link(at.join("small"), at.join("small2")).unwrap();
    std::fs::rename(at.join("small2"), at.join("a/moved")).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(at.join("small"))
        .unwrap();
    f.write_all(b" world").unwrap();
    drop(f);
    umount(&at);
    assert!(!at.join("small").exists(), "unmounted");
    let o = run(&["mount", v.to_str().unwrap(), at.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(at.join("a/b/big")).unwrap(), big);
    assert_eq!(std::fs::read(at.join("link")).unwrap(), big);
    assert_eq!(std::fs::read(at.join("a/moved")).unwrap(), b"hello world");
    assert_eq!(std::fs::metadata(at.join("small")).unwrap().nlink(), 2);
    let mut names: Vec<String> = std::fs::read_dir(&at)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "link", "small"]);
    umount(&at);
}

/// Rounds of the kill loops; `HSCM_MOUNT_KILL_ROUNDS` asks for more.
fn kill_rounds(default: u32) -> u32 {
    std::env::var("HSCM_MOUNT_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_daemon_killed_with_files_open_loses_nothing_it_acknowledged() {
    killed_with_files_open("immediate");
}

#[test]
fn a_daemon_killed_in_on_flush_mode_loses_nothing_that_was_synced() {
    // The writeback cache holds written pages in the kernel: fsync must send them
    // all before the commit it answers.
    killed_with_files_open("on-flush");
}

/// Kill -9 loops: files written (and, in on-flush mode, fsynced) before each kill are
/// all back after the remount.
fn killed_with_files_open(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "64M", durability);
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _guard = Detach(at.clone());
    let mut acknowledged: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for round in 0..kill_rounds(5) {
        let mut daemon = mount_foreground(&v, &at, &[]);
        // Everything acknowledged so far is there.
        for (path, data) in &acknowledged {
            assert_eq!(
                &std::fs::read(path).unwrap(),
                data,
                "round {round}: {}",
                path.display()
            );
        }
        // New files, one held open, then the daemon dies mid-work.
        let open = std::fs::File::create(at.join(format!("open{round}"))).unwrap();
        for i in 0..20u32 {
            let path = at.join(format!("r{round}-f{i}"));
            let data = vec![(round * 20 + i) as u8; 1000 + i as usize * 300];
            let mut f = std::fs::File::create(&path).unwrap();
            f.write_all(&data).unwrap();
            if durability == "on-flush" {
                f.sync_all().unwrap();
            }
            acknowledged.push((path, data));
        }
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        let err = std::fs::metadata(at.join("r0-f0")).unwrap_err();
        // ENOTCONN; ECONNABORTED where the kernel aborted the connection as it
        // cancelled the mount's io_uring queues; ECANCELED for a request the kernel
        // gave a ring queue that was being torn down (seen once the switch was on
        // for every mount of a test run).
        assert!(
            matches!(err.raw_os_error(), Some(107) | Some(103) | Some(125)),
            "a dead mount says ENOTCONN, ECONNABORTED or ECANCELED: {err}"
        );
        drop(open);
        detach(&at);
    }
    let mut daemon = mount_foreground(&v, &at, &[]);
    for (path, data) in &acknowledged {
        assert_eq!(&std::fs::read(path).unwrap(), data, "{}", path.display());
    }
    umount(&at);
    assert!(daemon.wait().unwrap().success());
}

/// Writes 1 MiB chunks to a new file until a write, or the fsync after the last,
/// fails; returns that error. `limit` bounds the bytes tried.
fn fill_until_full(path: &Path, limit: u64) -> std::io::Error {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![1u8; 1 << 20];
    let mut written = 0;
    while written < limit {
        if let Err(e) = f.write_all(&chunk) {
            return e;
        }
        written += chunk.len() as u64;
    }
    f.sync_all()
        .expect_err("a file twice the volume's size was written and synced")
}

fn full_then_freed(durability: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "16M", durability);
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _guard = Detach(at.clone());
    let mut daemon = mount_foreground(&v, &at, extra);
    let err = fill_until_full(&at.join("fill"), 32 << 20);
    assert_eq!(err.raw_os_error(), Some(28), "ENOSPC, not EIO: {err}");
    std::fs::remove_file(at.join("fill")).unwrap();
    let write_mib = |name: &str| {
        let mut f = std::fs::File::create(at.join(name)).unwrap();
        f.write_all(&vec![2u8; 1 << 20])
            .unwrap_or_else(|e| panic!("{durability} {extra:?}: {name}: {e}"));
        f.sync_all().unwrap();
    };
    write_mib("after");
    // Full again; a rename over the file frees its space as the unlink did.
    std::fs::write(at.join("tiny"), b"t").unwrap();
    let err = fill_until_full(&at.join("fill"), 32 << 20);
    assert_eq!(err.raw_os_error(), Some(28), "ENOSPC again: {err}");
    std::fs::rename(at.join("tiny"), at.join("fill")).unwrap();
    write_mib("after-rename");
    umount(&at);
    assert!(daemon.wait().unwrap().success());
}

#[test]
fn a_full_file_system_says_no_space_at_the_write_and_frees_it_on_unlink() {
    full_then_freed("immediate", &[]);
    full_then_freed("on-flush", &["--no-writeback-cache"]);
}

#[test]
fn a_full_file_system_with_the_writeback_cache_says_no_space_by_fsync() {
    // Written pages wait in the kernel, so the write itself cannot know; the fsync
    // (as on NFS) reports the pages the file system refused, with ENOSPC.
    full_then_freed("on-flush", &[]);
}

#[test]
fn bad_volumes_and_places_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _guard = Detach(at.clone());
    // A volume without a file system.
    let plain = dir.path().join("plain.hscm");
    let o = run(&["volume", "create", plain.to_str().unwrap(), "--size", "16M"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["mount", plain.to_str().unwrap(), at.to_str().unwrap()]);
    assert!(!o.status.success());
    // Named by its kind (the serving layer read the header), with what to do instead.
    assert!(
        text(&o).contains("flat volume, which has no file system")
            && text(&o).contains("hscm volume create --fs"),
        "{}",
        text(&o)
    );
    // No such volume; a mount point that is not a directory.
    let o = run(&["mount", "/nonexistent.hscm", at.to_str().unwrap()]);
    assert!(
        !o.status.success() && text(&o).contains("nonexistent"),
        "{}",
        text(&o)
    );
    let v = volume(dir.path(), "16M", "immediate");
    let o = run(&["mount", v.to_str().unwrap(), v.to_str().unwrap()]);
    assert!(
        !o.status.success() && text(&o).contains("not a directory"),
        "{}",
        text(&o)
    );
    // Unmounting what is not an hscm mount.
    let o = run(&["umount", dir.path().to_str().unwrap()]);
    assert!(
        !o.status.success() && text(&o).contains("not an hscm mount"),
        "{}",
        text(&o)
    );
}

#[test]
fn sqlite_in_wal_mode_stays_intact_across_kills_of_the_daemon() {
    sqlite_killed("immediate");
}

#[test]
fn sqlite_in_wal_mode_stays_intact_across_kills_in_on_flush_mode() {
    // sqlite fsyncs its WAL at each commit; with the kernel's writeback cache in
    // between, every committed row must still be back.
    sqlite_killed("on-flush");
}

fn sqlite_killed(durability: &str) {
    assert!(
        Command::new("sqlite3").arg("-version").output().is_ok(),
        "sqlite3 is not installed: run scripts/setup.sh"
    );
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "64M", durability);
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _guard = Detach(at.clone());
    let db = at.join("t.db");
    let sql = |script: &str| {
        let o = Command::new("sqlite3")
            .arg(&db)
            .arg(script)
            .output()
            .unwrap();
        assert!(o.status.success(), "sqlite3 {script}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let mut committed = 0u32;
    for round in 0..kill_rounds(5) {
        let mut daemon = mount_foreground(&v, &at, &[]);
        if round == 0 {
            sql("PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);");
        }
        assert_eq!(sql("PRAGMA integrity_check;"), "ok", "round {round}");
        assert_eq!(
            sql("SELECT count(*) FROM t;"),
            committed.to_string(),
            "round {round}: every committed row"
        );
        // A writer mid-transaction when the daemon dies: what it committed stays.
        for _ in 0..10 {
            sql(&format!(
                "BEGIN; INSERT INTO t(v) VALUES (hex(randomblob(300))); INSERT INTO t(v) VALUES ('x{committed}'); COMMIT;"
            ));
            committed += 2;
        }
        let mut busy = Command::new("sqlite3")
            .arg(&db)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        writeln!(
            busy.stdin.as_mut().unwrap(),
            "BEGIN; INSERT INTO t(v) VALUES (hex(randomblob(5000)));"
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        let _ = busy.kill();
        let _ = busy.wait();
        detach(&at);
    }
    let mut daemon = mount_foreground(&v, &at, &[]);
    assert_eq!(sql("PRAGMA integrity_check;"), "ok");
    assert_eq!(sql("SELECT count(*) FROM t;"), committed.to_string());
    umount(&at);
    assert!(daemon.wait().unwrap().success());
}

#[test]
fn unmounting_a_busy_mount_says_so_and_leaves_it_serving() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "16M", "immediate");
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _guard = Detach(at.clone());
    let mut daemon = mount_foreground(&v, &at, &[]);
    std::fs::write(at.join("f"), b"kept").unwrap();
    let held = std::fs::File::open(at.join("f")).unwrap();
    let o = run(&["umount", at.to_str().unwrap()]);
    assert!(!o.status.success(), "a busy mount is not unmounted");
    assert!(text(&o).contains("is a process using it"), "{}", text(&o));
    assert_eq!(
        std::fs::read(at.join("f")).unwrap(),
        b"kept",
        "still serving"
    );
    drop(held);
    umount(&at);
    assert!(daemon.wait().unwrap().success());
}
