//! The README's "Use" section as a newcomer runs it: its file-system and NBD blocks,
//! line by line, in a fresh directory, with two rewrites only: `./target/release/hscm`
//! is the binary under test, and the NBD socket lies in that directory rather than in
//! /tmp. The Python block runs in the Python suite (`crates/hscm-py/tests/test_readme.py`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shell blocks of the README's "Use" section, before the text that follows them
/// ("The volume and everything else"), each as its command lines.
pub(crate) fn use_blocks() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split_once("\n## Use\n")
        .expect("README.md has a \"## Use\" section")
        .1;
    let section = section
        .split_once("The volume and everything else")
        .map_or(section, |(first, _)| first);
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in section.lines() {
        match (&mut current, line.trim_start().starts_with("```")) {
            (None, true) => current = Some(Vec::new()),
            (Some(_), true) => blocks.push(current.take().unwrap()),
            (Some(lines), false) if !line.trim().is_empty() => lines.push(line.to_string()),
            _ => {}
        }
    }
    blocks
}

fn shell(dir: &Path, line: &str) -> std::process::Output {
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", line])
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_use_sections_file_system_and_nbd_blocks_run_as_written() {
    if !rustix::process::geteuid().is_root() {
        // A user's mount goes through fusermount3, which mount_user.rs tests.
        eprintln!("skipped: the mount line runs as root here");
        return;
    }
    let blocks = use_blocks();
    assert!(
        blocks.len() >= 3,
        "the Use section's three blocks: {blocks:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("disk.sock");
    let rewrite = |line: &str| {
        line.replace("./target/release/hscm", env!("CARGO_BIN_EXE_hscm"))
            .replace("/tmp/disk.sock", sock.to_str().unwrap())
    };
    let (files, nbd) = (&blocks[0], &blocks[1]);
    assert!(files[0].contains("--fs"), "{files:?}");
    for line in files {
        let o = shell(dir.path(), &rewrite(line));
        assert!(o.status.success(), "{line}\n{}", crate::util::text(&o));
    }
    // The mount was unmounted by the block's last line, and the volume holds a file
    // system.
    let mounted = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let at = dir.path().join("files");
    assert!(
        !mounted.contains(&format!(" {} ", at.display())),
        "still mounted"
    );
    assert!(dir.path().join("files.hscm").exists());
    // The NBD block: the last line serves until Ctrl-C, so it runs beside a client of
    // the URI its comment names, then gets the Ctrl-C.
    let (serve, before) = nbd.split_last().expect("a block");
    assert!(serve.contains("until Ctrl-C"), "{serve}");
    for line in before {
        let o = shell(dir.path(), &rewrite(line));
        assert!(o.status.success(), "{line}\n{}", crate::util::text(&o));
    }
    let mut server = Command::new("bash")
        .args(["-c", &format!("exec {}", rewrite(serve))])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "no socket at {}", sock.display());
        assert!(server.try_wait().unwrap().is_none(), "the server ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    assert!(
        serve.contains("nbd+unix:///?socket=/tmp/disk.sock"),
        "{serve}"
    );
    let o = Command::new("nbdinfo")
        .args(["--size", &uri])
        .output()
        .expect("nbdinfo (Debian package libnbd-bin; scripts/setup.sh installs it)");
    assert!(o.status.success(), "{}", crate::util::text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1073741824");
    let pid = rustix::process::Pid::from_child(&server);
    rustix::process::kill_process(pid, rustix::process::Signal::Int).unwrap();
    let o = server.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "Ctrl-C stops it cleanly: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
