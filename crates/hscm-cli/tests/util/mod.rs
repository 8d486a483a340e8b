//! The one harness the CLI's integration tests share: run `hscm` as a user would and
//! read what it printed.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `hscm` binary under test.
pub fn hscm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hscm"))
}

/// Runs `hscm ARGS` to completion.
pub fn run(args: &[&str]) -> Output {
    hscm().args(args).output().expect("run hscm")
}

/// Standard output and standard error together, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `hscm ARGS`, asserts success and parses standard output as JSON.
pub fn ok_json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "hscm {args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("hscm {args:?}: not JSON ({e}): {}", text(&o)))
}

/// A failure as a user should meet it: exit status 1, one `hscm: error:` line, no
/// panic, no abort.
pub fn assert_clean_failure(o: &Output, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: {}", text(o));
    assert!(err.contains("hscm: error: "), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// Polls `f` until it holds or `deadline` passes.
pub fn wait_until(deadline: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Entries of a directory, by name.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Sends `signal` (a number: 2 is SIGINT, 15 SIGTERM, 9 SIGKILL) to process `pid`.
pub fn signal(pid: u32, signal: i32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// `hscm serve VOLUME --shm SOCKET` as a child, once it accepts clients.
pub fn serve(volume: &Path, socket: &Path) -> Child {
    let child = hscm()
        .arg("serve")
        .arg(volume)
        .arg("--shm")
        .arg(socket)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hscm serve");
    hscm_ring::wait_for_server(socket, Duration::from_secs(20)).expect("server did not come up");
    child
}

/// A small Zipf request trace in `dir` (20k requests over 2k objects, `extra`
/// arguments to `trace gen-requests` added), for the cache simulator.
pub fn request_trace(dir: &Path, extra: &[&str]) -> PathBuf {
    let t = dir.join("t.oracleGeneral.zst");
    let mut args = vec![
        "trace",
        "gen-requests",
        "--requests",
        "20k",
        "--objects",
        "2k",
        "-o",
        t.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    t
}

/// A volume of `size` at `dir/v.hscm` with `durability`, made by `hscm volume create`
/// with `extra` flags.
pub fn volume_with(dir: &Path, size: &str, durability: &str, extra: &[&str]) -> PathBuf {
    let v = dir.join("v.hscm");
    let mut args = vec![
        "volume",
        "create",
        v.to_str().unwrap(),
        "--size",
        size,
        "--durability",
        durability,
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    v
}

/// A volume of `size` at `dir/v.hscm` formatted with hscm's file system, for `hscm mount`.
pub fn fs_volume(dir: &Path, size: &str, durability: &str) -> PathBuf {
    volume_with(dir, size, durability, &["--fs"])
}

/// Spawns `cmd` with standard output piped and waits for its first line, which must
/// start with `prefix` (what a server prints once it serves); the child and the line.
pub fn spawn_until_line(cmd: &mut Command, prefix: &str) -> (Child, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hscm");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with(prefix), "printed {line:?}");
    (child, line.trim().to_string())
}

/// `hscm mount VOLUME AT --foreground EXTRA…` as a child, once it serves.
pub fn mount_foreground(volume: &Path, at: &Path, extra: &[&str]) -> Child {
    let mut cmd = hscm();
    cmd.arg("mount")
        .arg(volume)
        .arg(at)
        .arg("--foreground")
        .args(extra);
    spawn_until_line(&mut cmd, "mounted").0
}

/// A volume of `size` with a tiered layout (`--ram`).
pub fn tiered_volume(dir: &Path, size: &str, ram: &str) -> PathBuf {
    let v = dir.join("tiered.hscm");
    let o = run(&[
        "volume",
        "create",
        v.to_str().unwrap(),
        "--size",
        size,
        "--ram",
        ram,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    v
}

/// `hscm bench fs` measures memory system-wide (shmem, the page cache): the test
/// that runs it holds this for writing, and tests that fill or free much memory
/// hold it for reading, so that no other test's pages come or go meanwhile.
pub static SYSTEM_MEMORY: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A server process (nbdkit, qemu-nbd, hscm nbd), killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_for(socket: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("the server ended ({s}) before making {}", socket.display());
        }
        assert!(
            Instant::now() < deadline,
            "no socket at {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn nbdkit(socket: &Path, args: &[&str]) -> Proc {
    let _ = std::fs::remove_file(socket);
    let mut child = Command::new("nbdkit")
        .args([
            "-f",
            "--exit-with-parent",
            "--unix",
            socket.to_str().unwrap(),
        ])
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdkit (scripts/setup.sh installs it)");
    wait_for(socket, &mut child);
    Proc(child)
}

pub fn unix_uri(socket: &Path, query: &str) -> String {
    format!("nbd+unix:///?socket={}{query}", socket.display())
}

/// `hscm nbd HOME --socket SOCKET` once it serves.
pub fn hscm_nbd(home: &str, socket: &Path) -> Proc {
    let _ = std::fs::remove_file(socket);
    let mut cmd = hscm();
    cmd.args(["nbd", home, "--socket", socket.to_str().unwrap()]);
    Proc(spawn_until_line(&mut cmd, "nbd").0)
}

/// fio's NBD engine on `uri`: random 4 KiB writes at queue depth 8 over `size`, each
/// block carrying fio's CRC-32C, with `extra` (`--do_verify=1` to write then check,
/// `--verify_only=1` to check what an earlier run wrote); fails the test on any bad
/// block. Runs in `dir`, where fio leaves its verify state file.
pub fn fio_verify(dir: &Path, uri: &str, size: &str, extra: &[&str]) {
    let o = Command::new("fio")
        .current_dir(dir)
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=8",
            &format!("--size={size}"),
            "--verify=crc32c",
            "--verify_fatal=1",
            "--randseed=7",
        ])
        .args(extra)
        .output()
        .expect("fio (scripts/setup.sh installs it)");
    assert!(o.status.success(), "fio {extra:?}: {}", text(&o));
    assert!(!text(&o).contains("verify: bad"), "{}", text(&o));
}

pub fn tool(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs libnbd-bin)"))
}
