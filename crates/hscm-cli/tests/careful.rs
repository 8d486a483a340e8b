//! A careful tool, as a new user meets it: one owner per volume, no panic on a closed
//! pipe or a full disk, nothing left behind by an error or Ctrl-C, honest replays, and
//! errors that say what and where, once.

use crate::util;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use util::{assert_clean_failure, entries, hscm, ok_json, run, signal, stderr, text, wait_until};

fn new_volume(dir: &Path, name: &str) -> String {
    let p = dir.join(name);
    let ps = p.to_str().unwrap().to_string();
    let o = run(&["volume", "create", &ps, "--size", "4M", "--chunk", "256k"]);
    assert!(o.status.success(), "{}", text(&o));
    ps
}

fn serve(volume: &str, socket: &Path) -> Child {
    util::serve(Path::new(volume), socket)
}

#[test]
fn a_served_volume_has_one_owner_until_it_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let volume = new_volume(dir.path(), "two.hscm");
    let mut first = serve(&volume, &dir.path().join("t1"));
    let holder = format!("process {} has it open read-write", first.id());

    // A second server on another socket, formatting over it, a read-only warm-up.
    let t2 = dir.path().join("t2");
    let attempts: [(&str, Vec<&str>); 3] = [
        (
            "second serve",
            vec!["serve", &volume, "--shm", t2.to_str().unwrap()],
        ),
        (
            "create --force",
            vec!["volume", "create", &volume, "--size", "8M", "--force"],
        ),
        ("info --load", vec!["volume", "info", &volume, "--load"]),
    ];
    for (what, args) in &attempts {
        let o = run(args);
        assert_clean_failure(&o, what);
        let err = stderr(&o);
        assert!(
            err.contains(&volume) && err.contains("is in use"),
            "{what}: {err}"
        );
        assert!(err.contains(&holder), "{what}: {err}");
    }
    // Nothing was formatted: the header still describes the 4 MiB volume.
    let j = ok_json(&["volume", "info", &volume, "--json"]);
    assert_eq!(j["volume_size"], 4 << 20);

    // The lock goes with its holder, however it ends.
    first.kill().unwrap();
    first.wait().unwrap();
    let mut second = serve(&volume, &t2);
    signal(second.id(), 15);
    assert!(second.wait().unwrap().success());
    let o = run(&["volume", "create", &volume, "--size", "8M", "--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// `hscm … | head -1`: the reader goes away; the command ends quietly with success.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let trace = util::request_trace(dir.path(), &[]);
    let runs: [Vec<&str>; 3] = [
        vec![
            "sim",
            "cache",
            "--trace",
            trace.to_str().unwrap(),
            "--policy",
            "lru,fifo",
            "--size",
            "1%,5%",
            "--csv",
        ],
        vec!["bench", "cache", "--requests", "50k", "--objects", "5k"],
        vec!["completions", "bash"],
    ];
    for args in &runs {
        let mut child = hscm()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before anything is written: every write meets a broken pipe.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        // Progress notes may go to standard error; no error and no panic may.
        let err = stderr(&o);
        assert!(
            !err.contains("error") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_full_disk_under_stdout_is_a_clear_error() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = hscm()
        .args(["completions", "bash"])
        .stdout(Stdio::from(full))
        .output()
        .unwrap();
    assert_clean_failure(&o, "stdout on a full disk");
    assert!(
        stderr(&o).contains("cannot write to standard output: No space left on device"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_operating_system_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.hscm");
    for cmd in ["info", "check"] {
        let o = run(&["volume", cmd, missing.to_str().unwrap()]);
        assert_clean_failure(&o, cmd);
        let err = stderr(&o);
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert!(err.contains(missing.to_str().unwrap()), "{err}");
    }
}

#[test]
fn a_json_command_answers_a_failure_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.hscm");
    std::fs::write(&junk, vec![0x5au8; 16384]).unwrap();
    let o = run(&["volume", "check", junk.to_str().unwrap(), "--json"]);
    assert_clean_failure(&o, "check --json");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON error object");
    assert_eq!(j["ok"], false);
    assert!(
        j["error"].as_str().unwrap().contains("not an hscm volume"),
        "{j}"
    );
}

#[test]
fn unreadable_input_is_named_escaped_and_for_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin.txt");
    std::fs::write(&bin, b"\x1b[2Jgarbage\x00\x01\xff\n").unwrap();
    let b = bin.to_str().unwrap();
    let o = run(&["sim", "cache", "--trace", b]);
    assert_clean_failure(&o, "sim cache");
    let err = stderr(&o);
    assert!(
        err.contains("oracle-general") && !err.contains("dramsim3"),
        "{err}"
    );
    assert!(
        !err.contains('\x1b'),
        "terminal escapes reach the terminal: {err:?}"
    );
    let o = run(&["sim", "memory", "compare", "--trace", b]);
    assert_clean_failure(&o, "sim memory");
    assert!(stderr(&o).contains("dramsim3"), "{}", stderr(&o));
    let o = run(&["kv", "bench", "--trace", b, "--records", "10"]);
    assert_clean_failure(&o, "kv bench");
    assert!(stderr(&o).contains("bin.txt:1: not text"), "{}", stderr(&o));
}

#[test]
fn impossible_requests_are_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let v = d.join("v.hscm");
    let vs = v.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["volume", "create", vs, "--size", "16M", "--chunk", "32M"],
            "larger than the volume",
        ),
        // Far beyond any machine's memory: it could never open.
        (
            vec!["volume", "create", vs, "--size", "64T"],
            "--larger-than-ram",
        ),
        (
            vec!["sim", "paging", "--trace", vs, "--memory", "0"],
            "at least one page",
        ),
    ];
    for (args, says) in &cases {
        let o = run(args);
        assert_clean_failure(&o, says);
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // Work sized beyond this machine's memory is refused before it allocates (an
    // allocation that fails aborts the process, with nothing cleaned up).
    let out = d.join("t.oracleGeneral");
    let oversized: [(Vec<&str>, &str); 2] = [
        (
            vec![
                "kv",
                "bench",
                "--records",
                "100G",
                "--dir",
                d.to_str().unwrap(),
            ],
            "needs about",
        ),
        (
            vec![
                "trace",
                "gen-requests",
                "--requests",
                "100G",
                "-o",
                out.to_str().unwrap(),
            ],
            "needs about",
        ),
    ];
    for (args, says) in &oversized {
        let o = run(args);
        assert_clean_failure(&o, says);
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    assert!(entries(d).is_empty(), "{:?}", entries(d));
    // Argument errors are clap's: exit status 2, the value named.
    for (args, says) in [
        (vec!["volume", "create", vs, "--size", "-5G"], "negative"),
        (
            vec!["sim", "cache", "--trace", vs, "--size", "0"],
            "at least one object",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // A fraction that comes to whole sectors is a size like any other.
    let j = {
        let o = run(&["volume", "create", vs, "--size", "1.5M", "--chunk", "256k"]);
        assert!(o.status.success(), "{}", text(&o));
        ok_json(&["volume", "info", vs, "--json"])
    };
    assert_eq!(j["volume_size"], 3 << 19);
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_string()
}

fn kv_replay(scratch: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "kv",
        "bench",
        "--mode",
        "standard",
        "--threads",
        "1",
        "--devices",
        "2",
        "--dir",
        scratch.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// The first record YCSB's load phase (and `--records 1`) inserts.
const YCSB_FIRST_KEY: &str = "user6284781860667377211";

#[test]
fn a_replay_reports_what_it_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let trace = write(
        dir.path(),
        "ops.txt",
        &format!(
            "INSERT fresh 100\nREAD fresh\nREAD {YCSB_FIRST_KEY}\nREAD nowhere\nUPDATE {YCSB_FIRST_KEY} 50\nDELETE fresh\nREAD fresh\n"
        ),
    );
    let o = kv_replay(scratch.path(), &["--trace", &trace, "--records", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &j["runs"][0];
    assert_eq!(r["workload"], "ops.txt");
    assert_eq!(r["trace"], trace);
    // The default workload (a-t) pauses 50 µs after each request; a replay does not.
    assert_eq!(r["gap_us"], 0);
    assert_eq!(r["ops"], 7);
    // Every read accounted for: found (fresh, the loaded record) and not found
    // (a key never loaded, a deleted one).
    assert_eq!(
        (r["reads"].as_u64(), r["reads_not_found"].as_u64()),
        (Some(4), Some(2)),
        "{r}"
    );
    assert_eq!(
        (
            r["inserts"].as_u64(),
            r["updates"].as_u64(),
            r["deletes"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(r["keys_never_loaded"], 1);
    assert!(
        stderr(&o).contains("1 distinct keys that --records 1 did not load"),
        "{}",
        stderr(&o)
    );
    // --ops replays the trace's first operations.
    let o = kv_replay(
        scratch.path(),
        &["--trace", &trace, "--records", "1", "--ops", "3"],
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (j["runs"][0]["ops"].as_u64(), j["runs"][0]["reads"].as_u64()),
        (Some(3), Some(2))
    );
    // A pause only when asked for.
    let o = kv_replay(
        scratch.path(),
        &["--trace", &trace, "--records", "1", "--gap-us", "7"],
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["runs"][0]["gap_us"], 7);
    // An empty store, filled by a load phase.
    let load = write(dir.path(), "load.txt", "INSERT a 10\nINSERT b 10\n");
    let run_trace = write(dir.path(), "run.txt", "READ a\nREAD b\nREAD c\n");
    let o = kv_replay(
        scratch.path(),
        &[
            "--trace",
            &run_trace,
            "--load-trace",
            &load,
            "--records",
            "0",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &j["runs"][0];
    assert_eq!(
        (r["reads"].as_u64(), r["reads_not_found"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(r["keys_never_loaded"], 1);
    assert!(
        entries(scratch.path()).is_empty(),
        "{:?}",
        entries(scratch.path())
    );
}

#[test]
fn a_bad_replay_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let huge = write(
        dir.path(),
        "huge.txt",
        "READ user1\nUPDATE user2 99999999999\n",
    );
    let empty = write(dir.path(), "empty.txt", "# nothing\n\n");
    for (args, says) in [
        (
            vec!["--trace", huge.as_str()],
            "huge.txt:2: NBYTES \"99999999999\"",
        ),
        (vec!["--trace", empty.as_str()], "holds no operations"),
        (vec!["--records", "0"], "--records must be at least 1"),
    ] {
        let o = kv_replay(scratch.path(), &args);
        assert_clean_failure(&o, says);
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["ok"], false);
    }
    assert!(
        entries(scratch.path()).is_empty(),
        "{:?}",
        entries(scratch.path())
    );
}

/// Ctrl-C (or SIGTERM) in the middle of a benchmark removes its scratch data and ends
/// with the status a shell expects of a command stopped by that signal.
#[test]
fn a_signal_removes_the_scratch_data() {
    let runs: [(Vec<&str>, &str, i32); 2] = [
        (
            vec![
                "bench",
                "volume",
                "--seconds",
                "60",
                "--size",
                "64M",
                "--targets",
                "ours,odirect",
            ],
            ".hscm-bench-",
            2,
        ),
        (
            vec![
                "kv",
                "bench",
                "--mode",
                "standard",
                "--records",
                "2000",
                "--ops",
                "2M",
            ],
            ".hscm-kv-",
            15,
        ),
    ];
    for (args, prefix, sig) in runs {
        let scratch = tempfile::tempdir().unwrap();
        let child = hscm()
            .args(&args)
            .arg("--dir")
            .arg(scratch.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the scratch directory holds data, then a little more.
        let started = wait_until(Duration::from_secs(60), || {
            std::fs::read_dir(scratch.path())
                .unwrap()
                .flatten()
                .any(|e| {
                    e.file_name().to_string_lossy().starts_with(prefix)
                        && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_some())
                })
        });
        assert!(started, "{args:?}: no scratch data appeared");
        std::thread::sleep(Duration::from_millis(300));
        signal(child.id(), sig);
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(128 + sig), "{args:?}: {}", stderr(&o));
        // Not without a word (issue 55).
        assert!(
            stderr(&o).contains("stopped by SIG"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            entries(scratch.path()).is_empty(),
            "{args:?} left {:?}",
            entries(scratch.path())
        );
    }
}

/// A trace written to a disk that fills up: an error naming the file, and no
/// half-written file under its name or any other.
#[test]
fn an_output_that_does_not_fit_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    assert!(mounted, "this test mounts a 64 KiB tmpfs: run it as root");
    let out = mnt.join("t.oracleGeneral");
    let o = run(&[
        "trace",
        "gen-requests",
        "--requests",
        "100k",
        "--objects",
        "10k",
        "-o",
        out.to_str().unwrap(),
    ]);
    let left = entries(&mnt);
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    assert_clean_failure(&o, "gen-requests on a full disk");
    let err = stderr(&o);
    assert!(
        err.contains(out.to_str().unwrap()) && err.contains("No space left"),
        "{err}"
    );
    assert!(left.is_empty(), "left {left:?}");
}

#[test]
fn completions_and_manual_come_from_the_command_definitions() {
    let o = run(&["completions", "bash"]);
    assert!(
        o.status.success() && text(&o).contains("_hscm()"),
        "{}",
        text(&o)
    );
    let o = run(&["man"]);
    assert!(
        o.status.success() && text(&o).contains(".TH hscm 1"),
        "{}",
        text(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let pages = entries(dir.path());
    for page in ["hscm.1", "hscm-volume-create.1", "hscm-kv-bench.1"] {
        assert!(
            pages.iter().any(|p| p == page),
            "{page} missing from {pages:?}"
        );
    }
    let mut page = std::fs::File::open(dir.path().join("hscm-volume-create.1")).unwrap();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut page, &mut s).unwrap();
    assert!(s.contains("larger\\-than\\-ram"), "{s}");
    // The synopsis shows what each option takes (issue 55).
    let mut page = std::fs::File::open(dir.path().join("hscm-mount.1")).unwrap();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut page, &mut s).unwrap();
    let synopsis = s.split(".SH SYNOPSIS").nth(1).unwrap_or_default();
    let synopsis = synopsis.split(".SH").next().unwrap_or_default();
    assert!(
        synopsis.contains("[\\-\\-durability <DURABILITY>]") && synopsis.contains("<VOLUME>"),
        "{synopsis}"
    );
    let _ = std::io::stdout().flush();
}
