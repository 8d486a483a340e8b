//! `hscm mount` among other mounts and other users: it unmounts only itself (never a
//! file system under or over it), refuses places no one means to mount on, mounts
//! `nosuid,nodev` and open to every user under the kernel's checks (as tmpfs) unless
//! asked otherwise, keeps its log where no one else can write, keeps modes through
//! `cp -a`, `rsync -aA` and `tar -p`, and stops on every signal once it is no longer busy.
//! These tests need root (mounting tmpfs); without it they say so and pass.

use crate::util;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use util::{
    fs_volume as volume, hscm, mount_foreground, run, signal, text, tiered_volume, wait_until,
};

fn root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    eprintln!("skipped: needs root");
    false
}

fn sh(cmd: &str) {
    let st = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(st.success(), "{cmd}");
}

/// The mounts at `at`, bottom first: (type, source, options).
fn mounts_at(at: &Path) -> Vec<(String, String, String)> {
    let at = std::fs::canonicalize(at).unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    hscm_fuse::mounts::parse_mountinfo(&info)
        .into_iter()
        .filter(|m| m.point == at)
        .map(|m| {
            let line = info
                .lines()
                .find(|l| l.split(' ').nth(2) == Some(m.device.as_str()))
                .unwrap()
                .to_string();
            let opts = line.split(' ').nth(5).unwrap_or("").to_string();
            let super_opts = line.rsplit(' ').next().unwrap_or("").to_string();
            (m.fstype, m.source, format!("{opts} {super_opts}"))
        })
        .collect()
}

/// A temporary directory with a 16 MiB file-system volume in `durability` mode and
/// an empty mount point, cleaned up whatever happens.
fn scene(durability: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Cleanup) {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "16M", durability);
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let cleanup = Cleanup(at.clone());
    (dir, v, at, cleanup)
}

/// Unmounts everything at `at` when the test ends, whatever happened.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for _ in 0..4 {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn umount_ok(at: &Path) {
    let o = run(&["umount", at.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn unmounting_leaves_a_file_system_underneath_alone() {
    if !root() {
        return;
    }
    let (_dir, v, at, _c) = scene("immediate");
    sh(&format!("mount -t tmpfs tmpfs {}", at.display()));
    std::fs::write(at.join("keep"), b"keep").unwrap();

    let o = run(&["mount", v.to_str().unwrap(), at.to_str().unwrap()]);
    assert!(!o.status.success(), "a non-empty mount point is refused");
    assert!(text(&o).contains("not empty"), "{}", text(&o));

    let mut daemon = mount_foreground(&v, &at, &["--nonempty"]);
    assert!(!at.join("keep").exists(), "hidden while mounted");
    std::fs::write(at.join("inside"), b"x").unwrap();
    umount_ok(&at);
    assert!(daemon.wait().unwrap().success());
    only_the_tmpfs_is_left(&at);

    // The same with a signal instead of `hscm umount`; what the daemon said is kept
    // for the failure's message.
    let log = _dir.path().join("daemon.log");
    let mut cmd = hscm();
    cmd.arg("mount")
        .arg(&v)
        .arg(&at)
        .args(["--foreground", "--nonempty"])
        .env("HSCM_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap());
    let mut daemon = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(daemon.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("mounted"), "printed {line:?}");
    signal(daemon.id(), 15);
    let status = daemon.wait().unwrap();
    assert!(
        status.success(),
        "{status}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    only_the_tmpfs_is_left(&at);
}

fn only_the_tmpfs_is_left(at: &Path) {
    let kinds: Vec<String> = mounts_at(at).into_iter().map(|m| m.0).collect();
    assert_eq!(kinds, ["tmpfs"], "only the hscm mount went");
    assert_eq!(std::fs::read(at.join("keep")).unwrap(), b"keep");
}

#[test]
fn a_mount_covered_by_another_is_never_unmounted_through_it() {
    if !root() {
        return;
    }
    let (dir, v, at, _c) = scene("immediate");
    let mut daemon = mount_foreground(&v, &at, &[]);
    std::fs::write(at.join("f"), b"under").unwrap();

    // A second hscm mount on the same place is refused by name.
    let w = dir.path().join("w.hscm");
    let o = run(&[
        "volume",
        "create",
        w.to_str().unwrap(),
        "--size",
        "16M",
        "--fs",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["mount", w.to_str().unwrap(), at.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("already holds an hscm mount"),
        "{}",
        text(&o)
    );

    // A tmpfs over it: `hscm umount` and the daemon's signals leave both alone.
    sh(&format!("mount -t tmpfs tmpfs {}", at.display()));
    std::fs::write(at.join("top"), b"top").unwrap();
    let o = run(&["umount", at.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("tmpfs"), "{}", text(&o));
    signal(daemon.id(), 15);
    std::thread::sleep(Duration::from_millis(300));
    assert!(daemon.try_wait().unwrap().is_none(), "still serving");
    let kinds: Vec<String> = mounts_at(&at).into_iter().map(|m| m.0).collect();
    assert_eq!(kinds, ["fuse.hscm", "tmpfs"]);
    assert_eq!(std::fs::read(at.join("top")).unwrap(), b"top");

    // Once uncovered, the next signal stops it.
    sh(&format!("umount {}", at.display()));
    assert_eq!(std::fs::read(at.join("f")).unwrap(), b"under");
    signal(daemon.id(), 2);
    assert!(wait_until(Duration::from_secs(10), || daemon
        .try_wait()
        .unwrap()
        .is_some()));
    assert!(mounts_at(&at).is_empty());
}

#[test]
fn a_busy_mount_stops_on_a_later_signal_once_free() {
    let (_dir, v, at, _c) = scene("immediate");
    let mut daemon = mount_foreground(&v, &at, &[]);
    std::fs::write(at.join("f"), b"kept").unwrap();
    let held = std::fs::File::open(at.join("f")).unwrap();
    signal(daemon.id(), 2);
    std::thread::sleep(Duration::from_millis(300));
    assert!(daemon.try_wait().unwrap().is_none(), "busy: still serving");
    drop(held);
    signal(daemon.id(), 2);
    assert!(wait_until(Duration::from_secs(10), || daemon
        .try_wait()
        .unwrap()
        .is_some()));
    assert!(daemon.wait().unwrap().success());
    let daemon2 = mount_foreground(&v, &at, &[]);
    assert_eq!(std::fs::read(at.join("f")).unwrap(), b"kept");
    let mut daemon2 = daemon2;
    signal(daemon2.id(), 15);
    assert!(daemon2.wait().unwrap().success());
}

#[test]
fn root_mounts_are_nosuid_nodev_and_open_to_other_users_under_permissions() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = volume(dir.path(), "16M", "immediate");
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let _c = Cleanup(at.clone());
    let mut daemon = mount_foreground(&v, &at, &[]);
    let opts = mounts_at(&at)[0].2.clone();
    for want in ["nosuid", "nodev", "allow_other"] {
        assert!(opts.contains(want), "{want} in {opts}");
    }
    std::fs::write(at.join("public"), b"for all").unwrap();
    std::fs::set_permissions(at.join("public"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(at.join("secret"), b"root's").unwrap();
    std::fs::set_permissions(at.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = as_nobody(&["cat", at.join("public").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, b"for all");
    let o = as_nobody(&["cat", at.join("secret").to_str().unwrap()]);
    assert!(
        !o.status.success(),
        "the kernel's permission checks still hold"
    );
    signal(daemon.id(), 15);
    assert!(daemon.wait().unwrap().success());

    // --private, --suid and --dev give the old behaviour back.
    let mut daemon = mount_foreground(&v, &at, &["--private", "--suid", "--dev"]);
    let opts = mounts_at(&at)[0].2.clone();
    for unwanted in ["nosuid", "nodev", "allow_other"] {
        assert!(!opts.contains(unwanted), "{unwanted} in {opts}");
    }
    let o = as_nobody(&["cat", at.join("public").to_str().unwrap()]);
    assert!(!o.status.success(), "a private mount is its owner's alone");
    signal(daemon.id(), 15);
    assert!(daemon.wait().unwrap().success());
}

#[test]
fn background_mounts_log_one_file_each_where_no_one_else_writes() {
    let dir = tempfile::tempdir().unwrap();
    // A neighbour's trap in the shared temporary directory the log used to go to.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, tmp.join("hscm-mount-v.log")).unwrap();
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();

    let mut logs = Vec::new();
    let mut points = Vec::new();
    for name in ["a", "b"] {
        let vdir = dir.path().join(name);
        std::fs::create_dir(&vdir).unwrap();
        let v = volume(&vdir, "16M", "immediate");
        let at = dir.path().join(format!("mnt-{name}"));
        std::fs::create_dir(&at).unwrap();
        let o = hscm()
            .env("TMPDIR", &tmp)
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["mount", v.to_str().unwrap(), at.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let log = out
            .split("(log: ")
            .nth(1)
            .and_then(|s| s.strip_suffix(")\n"))
            .unwrap_or_else(|| panic!("names its log: {out}"))
            .to_string();
        assert!(
            log.starts_with(runtime.join("hscm").to_str().unwrap()),
            "{log}"
        );
        let mode = std::fs::metadata(&log).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{log}");
        logs.push(log);
        points.push(at);
    }
    assert_ne!(logs[0], logs[1], "one log per mount");
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(!text.contains('\u{1b}'), "no colour codes in {log}: {text}");
    }
    for at in &points {
        umount_ok(at);
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let mode = std::fs::metadata(runtime.join("hscm")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // A mount that ended cleanly takes its log with it (the process removes it
    // just after it lets go of the volume, which `hscm umount` waits for).
    for log in &logs {
        crate::util::wait_until(std::time::Duration::from_secs(5), || {
            !std::path::Path::new(log).exists()
        });
        assert!(
            !std::path::Path::new(log).exists(),
            "{log} outlived its clean unmount"
        );
    }
}

#[test]
fn cp_a_rsync_a_and_tar_p_keep_modes_as_on_tmpfs() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("f644"), b"a").unwrap();
    std::fs::write(src.join("sub/f755"), b"b").unwrap();
    std::fs::write(src.join("f600"), b"c").unwrap();
    sh(&format!(
        "chmod 644 {0}/f644; chmod 755 {0}/sub/f755 {0}/sub; chmod 600 {0}/f600; chmod 750 {0}",
        src.display()
    ));
    let v = volume(dir.path(), "16M", "immediate");
    let at = dir.path().join("mnt");
    let tmpfs = dir.path().join("tmpfs");
    std::fs::create_dir(&at).unwrap();
    std::fs::create_dir(&tmpfs).unwrap();
    let _c = Cleanup(at.clone());
    let _t = Cleanup(tmpfs.clone());
    sh(&format!("mount -t tmpfs tmpfs {}", tmpfs.display()));
    let mut daemon = mount_foreground(&v, &at, &[]);
    let modes = |root: &Path| -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for rel in [
            "cp",
            "cp/f644",
            "cp/sub",
            "cp/sub/f755",
            "cp/f600",
            "tar/src/f644",
            "tar/src/sub/f755",
            "rsync",
            "rsync/f644",
            "rsync/sub/f755",
            "rsync/f600",
        ] {
            let m = std::fs::metadata(root.join(rel)).unwrap().mode() & 0o7777;
            out.push((rel.to_string(), m));
        }
        out
    };
    for root in [&at, &tmpfs] {
        sh(&format!("cp -a {} {}/cp", src.display(), root.display()));
        sh(&format!(
            "mkdir {1}/tar && tar -C {0} -cf - src | tar -C {1}/tar -xpf -",
            dir.path().display(),
            root.display()
        ));
        // -A copies ACLs too: refused by hscm, so rsync falls back to the mode.
        sh(&format!(
            "rsync -aA {}/ {}/rsync",
            src.display(),
            root.display()
        ));
    }
    assert_eq!(modes(&at), modes(&tmpfs));
    assert_eq!(modes(&at)[1], ("cp/f644".to_string(), 0o644));
    signal(daemon.id(), 15);
    assert!(daemon.wait().unwrap().success());
}

#[test]
fn a_read_only_mount_serves_reads_and_refuses_writes() {
    let (_dir, v, at, _c) = scene("immediate");
    let mut daemon = mount_foreground(&v, &at, &[]);
    std::fs::write(at.join("f"), b"data").unwrap();
    signal(daemon.id(), 15);
    assert!(daemon.wait().unwrap().success());
    let before = std::fs::read(&v).unwrap();
    let mut daemon = mount_foreground(&v, &at, &["--read-only"]);
    assert_eq!(std::fs::read(at.join("f")).unwrap(), b"data");
    let err = std::fs::write(at.join("g"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(30), "EROFS: {err}");
    signal(daemon.id(), 15);
    assert!(daemon.wait().unwrap().success());
    assert!(std::fs::read(&v).unwrap() == before, "nothing written");
}

#[test]
fn a_tiered_volume_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let t = tiered_volume(dir.path(), "64M", "16M");
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let o = run(&["mount", t.to_str().unwrap(), at.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("tiered volume, which has no file system"),
        "{}",
        text(&o)
    );
}

#[test]
fn filling_the_metadata_through_the_mount_loses_nothing_acknowledged() {
    for durability in ["immediate", "on-flush"] {
        let (_dir, v, at, _c) = scene(durability);
        let mut daemon = mount_foreground(&v, &at, &[]);
        let mut made = 0;
        let err = loop {
            match std::fs::File::create(at.join(format!("file-{made:06}"))) {
                Ok(_) => made += 1,
                Err(e) => break e,
            }
            assert!(made < 200_000, "never full");
        };
        assert_eq!(err.raw_os_error(), Some(28), "{durability}: ENOSPC: {err}");
        let st = rustix::fs::statvfs(&at).unwrap();
        assert!(
            st.f_ffree <= 1,
            "{durability}: statvfs shows {} free inodes",
            st.f_ffree
        );
        // fsync commits every acknowledged create.
        std::fs::File::open(at.join("file-000000"))
            .unwrap()
            .sync_all()
            .expect("fsync after ENOSPC");
        signal(daemon.id(), 15);
        assert!(daemon.wait().unwrap().success());
        let mut daemon = mount_foreground(&v, &at, &[]);
        let names = std::fs::read_dir(&at).unwrap().count();
        assert_eq!(names, made, "{durability}: every acknowledged file is back");
        std::fs::remove_file(at.join("file-000001")).unwrap();
        std::fs::File::create(at.join("again")).expect("room again after an unlink");
        signal(daemon.id(), 15);
        assert!(daemon.wait().unwrap().success());
    }
}
