//! Root's `hscm status` lists other users' instances too, so it must trust only
//! what those users could have made: a registry directory owned by the user its
//! place names, mode 0700, and sockets answered by that user's processes. What an
//! instance reports prints harmless on a terminal, and a socket that answers a
//! byte at a time cannot hold the listing up. Root only (it plays `nobody`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::util::hscm;

/// A status server as `nobody` at `socket`: answers each connection with a status
/// whose address is `address`, or, when `address` is empty, one byte a second.
fn serve_as_nobody(socket: &Path, address: &str) -> Child {
    let script = r#"
import json, os, socket, sys, time
path, address = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
while True:
    c, _ = s.accept()
    if address:
        c.sendall(json.dumps({"pid": os.getpid(), "frontend": "nbd", "address": address,
                              "volume": "/v", "kind": "flat"}).encode())
        c.close()
    else:
        for b in b'{"pid": 1, "frontend": "nbd"}':
            c.send(bytes([b]))
            time.sleep(1)
"#;
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            script,
        ])
        .arg(socket)
        .arg(address)
        .spawn()
        .unwrap()
}

fn nobody_dir(path: &Path, mode: u32) {
    std::fs::create_dir(path).unwrap();
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(path.exists(), "{} never appeared", path.display());
}

#[test]
fn root_lists_only_what_users_could_have_registered_and_prints_it_harmless() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // nobody's own place, as `hscm` makes it: listed.
    let own = tmp.path().join("hscm-65534");
    nobody_dir(&own, 0o700);
    // A place named for uid 4242 but made by nobody, and one open to everyone.
    let planted = tmp.path().join("hscm-4242");
    nobody_dir(&planted, 0o700);
    let open = tmp.path().join("hscm-65533");
    nobody_dir(&open, 0o777);
    let sockets = [
        (
            own.join("status-real-1.sock"),
            "NOBODY\u{1b}]0;pwned\u{7}\u{1b}[2J",
        ),
        (own.join("status-slow-2.sock"), ""),
        (planted.join("status-fake-3.sock"), "PLANTED"),
        (open.join("status-fake-4.sock"), "OPENDIR"),
    ];
    let mut servers: Vec<Child> = sockets
        .iter()
        .map(|(path, address)| serve_as_nobody(path, address))
        .collect();
    for (path, _) in &sockets {
        wait_for(path);
    }
    let start = Instant::now();
    let o = hscm()
        .arg("status")
        .env("TMPDIR", tmp.path())
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let took = start.elapsed();
    for s in &mut servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        out.contains("NOBODY"),
        "nobody's own instance is listed: {out} {err}"
    );
    assert!(
        !out.contains("PLANTED") && !out.contains("OPENDIR"),
        "a place nobody could not own was read: {out}"
    );
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{7}') && !err.contains('\u{1b}'),
        "escape sequences reached the terminal: {out:?}"
    );
    assert!(out.contains("\\u{1b}]0;pwned"), "shown escaped: {out}");
    assert!(
        took < Duration::from_secs(6),
        "a socket answering a byte a second held the listing {took:?}"
    );
}

/// Another user made `$TMPDIR/hscm-UID` first: the user's hscm steps around it
/// (to `hscm-UID-1`) instead of refusing to run.
#[test]
fn a_runtime_directory_squatted_by_another_user_is_stepped_around() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    // Root squats nobody's name.
    std::fs::create_dir(tmp.path().join("hscm-65534")).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_hscm"))
        .args(["status", "--json"])
        .env("TMPDIR", tmp.path())
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let moved = tmp.path().join("hscm-65534-1");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&moved).unwrap();
    assert_eq!(meta.uid(), 65534);
    assert_eq!(meta.mode() & 0o777, 0o700);
}
