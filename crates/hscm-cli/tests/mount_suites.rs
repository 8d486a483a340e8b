//! The outside suites against `hscm mount`, installed by scripts/setup.sh (`cargo
//! install pjdfstest fsx`): pjdfstest, the POSIX conformance suite, run beside tmpfs
//! on the same machine with the same configuration; fsx, 100,000 random operations
//! (mmap, truncate, fallocate and hole punching included) checked against its model.

use crate::util;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use util::{fs_volume, run, text};

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn suite(name: &str) -> Command {
    let installed = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        installed,
        "{name} is not installed: run scripts/setup.sh (cargo install {name})"
    );
    Command::new(name)
}

/// A formatted volume mounted at `dir/mnt` (with allow_other: the suites switch users).
struct Mounted {
    at: PathBuf,
}

impl Mounted {
    fn new(dir: &Path, durability: &str) -> Mounted {
        Mounted::with(dir, durability, &[])
    }

    fn with(dir: &Path, durability: &str, extra: &[&str]) -> Mounted {
        let v = fs_volume(dir, "256M", durability);
        let at = dir.join("mnt");
        std::fs::create_dir(&at).unwrap();
        let mut args = vec![
            "mount",
            v.to_str().unwrap(),
            at.to_str().unwrap(),
            "--allow-other",
            "--durability",
            durability,
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", text(&o));
        Mounted { at }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let o = run(&["umount", self.at.to_str().unwrap()]);
        if !o.status.success() {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.at)
                .status();
        }
    }
}

/// pjdfstest's summary line: (failed, passed).
fn pjdfstest(at: &Path) -> (u32, u32, String) {
    let o = suite("pjdfstest")
        .arg("-c")
        .arg(repo_file("scripts/fs/pjdfstest.toml"))
        .arg("-p")
        .arg(at)
        .current_dir(at)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let summary = out
        .lines()
        .find(|l| l.starts_with("Summary:"))
        .unwrap_or_else(|| panic!("no summary from pjdfstest:\n{out}"))
        .to_string();
    let count = |word: &str| -> u32 {
        summary
            .split(',')
            .find(|part| part.contains(word))
            .and_then(|part| part.split_whitespace().find_map(|w| w.parse().ok()))
            .unwrap_or_else(|| panic!("no {word} count in {summary:?}"))
    };
    let failures: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_end().ends_with("FAILED"))
        .collect();
    (count("failed"), count("passed"), failures.join("\n"))
}

#[test]
fn pjdfstest_fails_nothing_and_passes_as_many_cases_as_tmpfs() {
    // tmpfs on this machine, same configuration (/dev/shm is a tmpfs).
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let (_, tmpfs_passed, _) = pjdfstest(shm.path());
    // Both modes, with FUSE passthrough (the default for root) and without.
    for (durability, extra) in [
        ("immediate", &[][..]),
        ("on-flush", &[][..]),
        ("immediate", &["--no-passthrough"][..]),
        ("on-flush", &["--no-passthrough"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let m = Mounted::with(dir.path(), durability, extra);
        let ours = m.at.join("pjd");
        std::fs::create_dir(&ours).unwrap();
        let (failed, passed, which) = pjdfstest(&ours);
        assert_eq!(
            failed, 0,
            "pjdfstest failures on hscm ({durability} {extra:?}):\n{which}"
        );
        assert!(
            passed >= tmpfs_passed,
            "hscm ({durability} {extra:?}) passes {passed} cases, tmpfs {tmpfs_passed}"
        );
        eprintln!(
            "pjdfstest: hscm ({durability} {extra:?}) {passed} passed, 0 failed; tmpfs {tmpfs_passed} passed"
        );
    }
}

/// What scripts/fs/setid-bits.sh prints in `dir` (made writable for nobody).
fn setid_bits(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = Command::new("sh")
        .arg(repo_file("scripts/fs/setid-bits.sh"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn setuid_setgid_and_capabilities_are_dropped_as_on_tmpfs_in_both_modes() {
    // The file system drops them itself (the kernel's KILLPRIV_V2), and tells the
    // kernel to forget the mode it cached.
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let expected = setid_bits(shm.path());
    assert!(expected.contains("nobody-append 777"), "{expected}");
    for durability in ["immediate", "on-flush"] {
        let dir = tempfile::tempdir().unwrap();
        let m = Mounted::new(dir.path(), durability);
        let ours = m.at.join("setid");
        std::fs::create_dir(&ours).unwrap();
        assert_eq!(setid_bits(&ours), expected, "{durability}");
    }
}

#[test]
fn fsx_runs_100_000_operations_without_a_miscompare() {
    let dir = tempfile::tempdir().unwrap();
    // Durability does not change what fsx checks (contents); on-flush spares the syncs.
    let m = Mounted::new(dir.path(), "on-flush");
    let o = suite("fsx")
        .arg("-f")
        .arg(repo_file("scripts/fs/fsx.toml"))
        .args(["-N", "100000", "-S", "7", "-q", "-P"])
        .arg(dir.path())
        .arg(m.at.join("fsxfile"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "fsx found a difference:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `hscm bench fs-work` on a small tree: every step on every file system asked
/// for, in the JSON contract (`workload`, `fs`, `seconds`), with hscm's requests
/// and FUSE bound, and its ratios.
#[test]
fn bench_fs_work_json_times_every_step_on_every_file_system() {
    let _quiet = crate::util::SYSTEM_MEMORY
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let o = run(&[
        "bench",
        "fs-work",
        "--files",
        "300",
        "--c-units",
        "2",
        "--ls-entries",
        "100,400",
        "--fs",
        "tmpfs,ext4-sync,hscm,hscm-no-io-uring,hscm-immediate",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let steps = [
        "untar",
        "find",
        "du",
        "grep-cold",
        "grep-warm",
        "git-commit",
        "git-status",
        "rm-rf",
        "ls-l-100",
        "ls-l-400",
    ];
    for fs in [
        "tmpfs",
        "ext4-sync",
        "hscm",
        "hscm-no-io-uring",
        "hscm-immediate",
    ] {
        for step in steps {
            let r = rows
                .iter()
                .find(|r| r["fs"] == fs && r["workload"] == step)
                .unwrap_or_else(|| panic!("no {step} on {fs}"));
            assert!(r["seconds"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let untar = rows
        .iter()
        .find(|r| r["fs"] == "hscm" && r["workload"] == "untar")
        .unwrap();
    // At least a create per file reached the daemon.
    assert!(untar["requests"].as_u64().unwrap() >= 300, "{untar}");
    assert!(untar["bound_seconds"].as_f64().unwrap() > 0.0, "{untar}");
    assert!(v["ratios"]["untar hscm/tmpfs"].as_f64().is_some());
    assert!(v["ratios"]["untar hscm-immediate/ext4-sync"]
        .as_f64()
        .is_some());
    assert!(v["round_trip_us"]["hscm"].as_f64().unwrap() > 0.0);
    assert!(v["round_trip_us"]["hscm-no-io-uring"].as_f64().unwrap() > 0.0);
    assert!(v["round_trip_pinned_us"]["hscm"].as_f64().unwrap() > 0.0);
    assert!(v["ratios"]["untar hscm-no-io-uring/tmpfs"]
        .as_f64()
        .is_some());
    // Where the kernel has FUSE over io_uring, the bench serves hscm by it (turning
    // the switch on for its run) and hscm-no-io-uring by /dev/fuse.
    let rings_here = hscm_fuse::uring::kernel_switch().is_some();
    assert_eq!(
        v["io_uring"].as_bool(),
        Some(rings_here),
        "{}",
        v["io_uring"]
    );
    assert!(v["tree"]["files"].as_u64().unwrap() >= 300);
    let o = run(&["bench", "fs-work", "--fs", "zfs"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no file system \"zfs\""), "{}", text(&o));
}

/// Ctrl-C in the middle of `hscm bench fs-work`, while its own FUSE daemon serves
/// a mount and an ext4 loop mount lies beside it: the command says so and exits
/// with 130, and leaves no mount, no scratch directory and the kernel's io_uring
/// switch as it found it.
#[test]
fn ctrl_c_during_bench_fs_work_leaves_no_mount_behind() {
    let _quiet = crate::util::SYSTEM_MEMORY
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let switch_before = hscm_fuse::uring::kernel_switch();
    let mounts_under = |dir: &Path| -> Vec<String> {
        let prefix = format!("{}/", dir.display());
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|at| at.starts_with(&prefix))
            .map(String::from)
            .collect()
    };
    let mut child = util::hscm()
        .args([
            "bench",
            "fs-work",
            "--files",
            "3000",
            "--c-units",
            "2",
            "--ls-entries",
            "100",
            "--fs",
            "ext4,hscm",
            "--dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until hscm's own mount is up (its mount point is named hscm-on-flush), and
    // ext4's may still be there beside it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !mounts_under(dir.path())
        .iter()
        .any(|m| m.ends_with("/hscm-on-flush"))
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the bench ended before hscm was mounted"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no hscm mount after 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::Int).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("stopped by SIGINT"), "{err}");
    assert_eq!(mounts_under(dir.path()), Vec::<String>::new(), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(hscm_fuse::uring::kernel_switch(), switch_before);
}

#[test]
fn bench_fs_json_names_every_file_system_and_durable_comparison() {
    let _quiet = crate::util::SYSTEM_MEMORY
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let o = run(&[
        "bench",
        "fs",
        "--seconds",
        "0.1",
        "--size",
        "8M",
        "--memory-size",
        "16M",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    // The file systems of the main pass; the disk file runs the durable write only.
    let main_pass = [
        "hscm",
        "hscm-no-passthrough",
        "tmpfs",
        "ext4",
        "ext3",
        "fuse-passthrough",
    ];
    for fs in main_pass.iter().chain(&["disk-file"]) {
        assert!(rows.iter().any(|r| r["fs"] == *fs), "a row for {fs}");
    }
    // The RAM each file system used for the same data, hscm's files' RAM holding it.
    let memory = v["memory"].as_array().unwrap();
    for fs in main_pass {
        assert!(memory.iter().any(|m| m["fs"] == fs), "memory of {fs}");
    }
    let ours = memory.iter().find(|m| m["fs"] == "hscm").unwrap();
    assert_eq!(ours["data_bytes"], 16 << 20);
    assert!(
        ours["file_ram_bytes"].as_u64().unwrap() >= 16 << 20,
        "{ours}"
    );
    // The disk's bound runs the durable write only.
    assert!(rows
        .iter()
        .filter(|r| r["fs"] == "disk-file")
        .all(|r| r["durable"] == true && r["workload"] == "randwrite"));
    for field in [
        "workload", "bs", "jobs", "fs", "durable", "iops", "mbps", "p50_us", "p99_us", "engine",
        "cache",
    ] {
        assert!(
            rows.iter().all(|r| !r[field].is_null()),
            "every row has {field}"
        );
    }
    assert!(rows.iter().all(|r| r["iops"].as_f64().unwrap() > 0.0));
    let ratios = v["ratios"].as_object().unwrap();
    assert!(
        ratios.contains_key("randwrite bs4096 durable hscm/ext4")
            && ratios.contains_key("randwrite bs4096 durable hscm/disk-file"),
        "{ratios:?}"
    );
    for key in [
        "randread bs1024 hscm/ext3",
        "randread bs4096 libaio 4jobs hscm/ext4",
        "randrw bs4096 hscm/ext4",
        "randread bs4096 warm hscm/tmpfs",
        "randread bs4096 hscm/fuse-passthrough",
        "randread bs4096 hscm/hscm-no-passthrough",
        "memory hscm/tmpfs",
        "create hscm/ext4",
        "fileserver hscm/ext4",
        "video hscm/ext4",
    ] {
        assert!(ratios.contains_key(key), "{key} in {ratios:?}");
    }
    for workload in ["read", "write", "stat", "unlink"] {
        assert!(
            rows.iter()
                .any(|r| r["workload"] == workload && r["fs"] == "hscm"),
            "an hscm row for {workload}"
        );
    }
}
