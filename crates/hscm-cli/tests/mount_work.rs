//! The paths that make many small files fast keep the truth: the kernel keeps
//! names, absences and attributes for long (the daemon is their only writer),
//! lists directories with their attributes (readdirplus), closes files without a
//! FLUSH, and in on-flush mode a close leaves its file's write-back to the next
//! fsync (bounded by `--dirty-max`). What a program sees is right at once, and what
//! was acknowledged (by an fsync in on-flush mode, by each call in immediate mode)
//! is there after kill -9. Root only (FUSE passthrough); elsewhere each test says
//! so and passes.

use crate::mount_passthrough::{pattern, Mounted};
use crate::mount_truth::{on_every_path, root_and_memory, PATHS};
use crate::util::{fs_volume, run};

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

fn missing(path: &Path) -> bool {
    matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Absent names the kernel was told of stay absent only until this mount makes
/// them; attributes it keeps follow every change (links, renames, modes, sizes).
#[test]
fn names_and_attributes_the_kernel_keeps_follow_every_change() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "64M", mode);
        let m = Mounted::with(&v, &dir.path().join("mnt"), extra);
        let (a, b, d) = (m.path("a"), m.path("b"), m.path("d"));
        for _ in 0..3 {
            assert!(missing(&a) && missing(&b) && missing(&d), "{what}");
        }
        std::fs::write(&a, b"one").unwrap();
        assert_eq!(
            std::fs::read(&a).unwrap(),
            b"one",
            "{what}: made after a miss"
        );
        std::fs::hard_link(&a, &b).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().nlink(), 2, "{what}: a link");
        std::fs::remove_file(&b).unwrap();
        assert!(missing(&b), "{what}: unlinked");
        assert_eq!(
            std::fs::metadata(&a).unwrap().nlink(),
            1,
            "{what}: after unlink"
        );
        std::fs::rename(&a, &b).unwrap();
        assert!(missing(&a), "{what}: renamed away");
        assert_eq!(std::fs::read(&b).unwrap(), b"one", "{what}: renamed to");
        std::fs::write(&a, b"two, longer").unwrap();
        std::fs::rename(&a, &b).unwrap();
        assert_eq!(
            std::fs::read(&b).unwrap(),
            b"two, longer",
            "{what}: renamed over"
        );
        assert_eq!(std::fs::metadata(&b).unwrap().len(), 11, "{what}: its size");
        std::fs::create_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(m.path("")).unwrap().nlink(),
            3,
            "{what}: mkdir"
        );
        std::fs::remove_dir(&d).unwrap();
        assert!(missing(&d), "{what}: rmdir");
        assert_eq!(
            std::fs::metadata(m.path("")).unwrap().nlink(),
            2,
            "{what}: rmdir"
        );
        std::os::unix::fs::symlink("b", &d).unwrap();
        assert_eq!(std::fs::read_link(&d).unwrap(), Path::new("b"), "{what}");
        std::fs::remove_file(&d).unwrap();
        std::os::unix::fs::symlink("elsewhere", &d).unwrap();
        assert_eq!(
            std::fs::read_link(&d).unwrap(),
            Path::new("elsewhere"),
            "{what}: a cached symlink target is the new link's"
        );
        let mut perms = std::fs::metadata(&b).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
        std::fs::set_permissions(&b, perms).unwrap();
        assert_eq!(
            std::fs::metadata(&b).unwrap().mode() & 0o777,
            0o600,
            "{what}"
        );
        let f = std::fs::OpenOptions::new().write(true).open(&b).unwrap();
        f.set_len(100_000).unwrap();
        drop(f);
        assert_eq!(
            std::fs::metadata(&b).unwrap().len(),
            100_000,
            "{what}: truncate"
        );
        m.unmount();
    }
}

/// `ls -l` (readdirplus), `stat` and `du` show every file's size and blocks right
/// after it was written and closed, before any fsync takes it home.
#[test]
fn listings_show_sizes_and_blocks_before_any_fsync() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for (mode, extra) in PATHS {
        let what = format!("{mode} {extra:?}");
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "256M", mode);
        let m = Mounted::with(&v, &dir.path().join("mnt"), extra);
        std::fs::create_dir(m.path("t")).unwrap();
        let mut want = BTreeMap::new();
        for i in 0..600usize {
            let len = (i * 7919) % 30_000;
            std::fs::write(m.path(&format!("t/f{i:04}")), pattern(i as u8, len)).unwrap();
            want.insert(format!("f{i:04}"), len as u64);
        }
        let o = Command::new("ls")
            .arg("-ln")
            .arg(m.path("t"))
            .output()
            .unwrap();
        assert!(o.status.success());
        let listed: BTreeMap<String, u64> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[8].to_string(), f[4].parse().unwrap())
            })
            .collect();
        assert_eq!(listed, want, "{what}: ls -l");
        let mut blocks = 0;
        for (name, len) in &want {
            let md = std::fs::metadata(m.path(&format!("t/{name}"))).unwrap();
            assert_eq!(md.len(), *len, "{what}: stat {name}");
            assert!(
                md.blocks() * 512 >= *len,
                "{what}: {name} of {len} bytes shows {} blocks",
                md.blocks()
            );
            blocks += md.blocks();
        }
        let o = Command::new("du")
            .args(["-s", "--block-size=512"])
            .arg(m.path("t"))
            .output()
            .unwrap();
        let du: u64 = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(du >= blocks, "{what}: du {du} blocks, the files {blocks}");
        m.unmount();
    }
}

/// The kernel keeps directory listings across opens (`FOPEN_CACHE_DIR` with
/// `FOPEN_KEEP_CACHE`): listing a directory again asks the daemon for nothing, and
/// every change made through the mount (create, unlink, rename in, rename out,
/// mkdir) shows in the next listing.
#[test]
fn listings_the_kernel_keeps_follow_every_change() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    on_every_path("64M", |what, m| {
        let (d, other) = (m.path("d"), m.path("other"));
        std::fs::create_dir(&d).unwrap();
        std::fs::create_dir(&other).unwrap();
        for i in 0..50 {
            std::fs::write(d.join(format!("f{i}")), b"x").unwrap();
        }
        std::fs::write(other.join("moved-in"), b"y").unwrap();
        let names = |dir: &Path| -> Vec<String> {
            let mut n: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        let readdirs = || -> u64 {
            status_of(&m.at)["ops"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["op"] == "readdir" || o["op"] == "readdirplus")
                .map(|o| o["count"].as_u64().unwrap())
                .sum()
        };
        let mut model: Vec<String> = (0..50).map(|i| format!("f{i}")).collect();
        model.sort();
        assert_eq!(names(&d), model, "{what}: first listing");
        let asked = readdirs();
        assert_eq!(names(&d), model, "{what}: again");
        assert_eq!(
            readdirs(),
            asked,
            "{what}: the second listing came from the kernel's cache"
        );
        for change in ["create", "unlink", "rename in", "rename out", "mkdir"] {
            match change {
                "create" => {
                    std::fs::write(d.join("new"), b"z").unwrap();
                    model.push("new".into());
                }
                "unlink" => {
                    std::fs::remove_file(d.join("f3")).unwrap();
                    model.retain(|n| n != "f3");
                }
                "rename in" => {
                    std::fs::rename(other.join("moved-in"), d.join("moved-in")).unwrap();
                    model.push("moved-in".into());
                }
                "rename out" => {
                    std::fs::rename(d.join("f7"), other.join("f7")).unwrap();
                    model.retain(|n| n != "f7");
                }
                _ => {
                    std::fs::create_dir(d.join("sub")).unwrap();
                    model.push("sub".into());
                }
            }
            model.sort();
            assert_eq!(names(&d), model, "{what}: after {change}");
        }
        assert_eq!(names(&other), ["f7"], "{what}: the other directory");
    });
}

/// The requests docs/fs.md counts per operation ("Requests per operation", "The
/// directory's getattr"), as a budget nothing may grow: a create sends a lookup, the
/// create and the directory's getattr (and a release it does not wait for); an
/// unlink, a mkdir and a rename their own request and the directory's getattr (a
/// mkdir and a rename a lookup too); a stat repeated, nothing.
#[test]
fn requests_per_operation_stay_within_what_docs_fs_md_counts() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    const N: u64 = 40;
    on_every_path("64M", |what, m| {
        let counts = || -> BTreeMap<String, u64> {
            status_of(&m.at)["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    (
                        o["op"].as_str().unwrap().to_string(),
                        o["count"].as_u64().unwrap(),
                    )
                })
                .collect()
        };
        let d = m.path("d");
        std::fs::create_dir(&d).unwrap();
        let step = |name: &str, work: &dyn Fn(u64), budget: &[(&str, u64)]| {
            let before = counts();
            for i in 0..N {
                work(i);
            }
            let after = counts();
            let sent: BTreeMap<&str, u64> = after
                .iter()
                .map(|(op, n)| (op.as_str(), n - before.get(op).copied().unwrap_or(0)))
                .filter(|(op, n)| *n > 0 && *op != "release")
                .collect();
            let allowed: BTreeMap<&str, u64> = budget.iter().copied().collect();
            for (op, n) in &sent {
                let most = allowed.get(op).copied().unwrap_or(0);
                assert!(
                    *n <= most,
                    "{what}: {name} x{N} sent {n} {op} (at most {most}); all: {sent:?}"
                );
            }
        };
        step(
            "create",
            &|i| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(d.join(format!("f{i}")))
                    .unwrap();
                drop(f);
            },
            // In immediate mode a writable close sends a FLUSH: the file's RAM goes
            // home before the close returns.
            &[
                ("lookup", N),
                ("create", N),
                ("getattr", N),
                ("flush", if what.starts_with("immediate") { N } else { 0 }),
            ],
        );
        // The first stat may ask (without passthrough, the kernel forgets a file's
        // attributes at a writable close); the second must not.
        step(
            "stat",
            &|i| {
                std::fs::symlink_metadata(d.join(format!("f{i}"))).unwrap();
            },
            // Plus one: the directory's, which the last create made the kernel forget.
            &[("getattr", N + 1)],
        );
        step(
            "stat again",
            &|i| {
                std::fs::symlink_metadata(d.join(format!("f{i}"))).unwrap();
            },
            &[("getattr", 1)],
        );
        step(
            "mkdir",
            &|i| std::fs::create_dir(d.join(format!("sub{i}"))).unwrap(),
            &[("lookup", N), ("mkdir", N), ("getattr", N)],
        );
        step(
            "rename",
            &|i| std::fs::rename(d.join(format!("sub{i}")), d.join(format!("dir{i}"))).unwrap(),
            &[("lookup", N), ("rename", N), ("getattr", N)],
        );
        step(
            "unlink",
            &|i| std::fs::remove_file(d.join(format!("f{i}"))).unwrap(),
            &[("unlink", N), ("getattr", N)],
        );
    });
}

/// What `hscm status` says of the mount at `at`.
pub(crate) fn status_of(at: &Path) -> serde_json::Value {
    let o = run(&["status", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["address"].as_str() == at.to_str())
        .expect("the mount in hscm status")
        .clone()
}

/// The mount's device counters, as `hscm status` shows them.
fn device_writes(at: &Path) -> (u64, u64) {
    let me = status_of(at);
    (
        me["device"]["writes"].as_u64().unwrap(),
        me["device"]["written_bytes"].as_u64().unwrap(),
    )
}

/// On-flush: a close leaves the device alone; the next fsync takes every waiting
/// file home, and a kill -9 after it loses none of them. Past `--dirty-max`, the
/// closes write home themselves.
#[test]
fn on_flush_closes_wait_for_the_next_fsync_within_dirty_max() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "256M", "on-flush");
    let at = dir.path().join("mnt");
    let m = Mounted::new(&v, &at);
    let before = device_writes(&at);
    for i in 0..200usize {
        std::fs::write(m.path(&format!("f{i}")), pattern(i as u8, 5000)).unwrap();
    }
    let closed = device_writes(&at);
    let waiting = status_of(&at);
    assert!(
        waiting["dirty_bytes"].as_u64().unwrap() >= 200 * 4096,
        "hscm status shows what waits: {waiting}"
    );
    assert_eq!(waiting["dirty_max_bytes"].as_u64(), Some(256 << 20));
    assert!(
        closed.0 - before.0 < 20,
        "200 closes made {} device writes",
        closed.0 - before.0
    );
    std::fs::File::open(m.path("f0"))
        .unwrap()
        .sync_all()
        .unwrap();
    let synced = device_writes(&at);
    assert!(
        synced.1 - closed.1 >= 200 * 5000,
        "the fsync wrote {} bytes home",
        synced.1 - closed.1
    );
    m.kill();
    let m = Mounted::new(&v, &at);
    for i in 0..200usize {
        let got = std::fs::read(m.path(&format!("f{i}"))).unwrap();
        assert!(
            got == pattern(i as u8, 5000),
            "f{i} after the fsync and kill -9"
        );
    }
    m.unmount();

    let m = Mounted::with(&v, &at, &["--dirty-max", "256K"]);
    let before = device_writes(&at);
    for i in 0..64usize {
        std::fs::write(m.path(&format!("g{i}")), pattern(i as u8, 64 << 10)).unwrap();
    }
    let closed = device_writes(&at);
    assert!(
        closed.1 - before.1 >= 2 << 20,
        "4 MiB closed under a 256 KiB bound; {} bytes went home",
        closed.1 - before.1
    );
    m.unmount();
}

/// Rounds of the kill loop; `HSCM_MOUNT_KILL_ROUNDS` asks for more.
fn kill_rounds() -> u32 {
    std::env::var("HSCM_MOUNT_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// Many small files, as a build or a package manager leaves them: created,
/// written, renamed over others, unlinked, the directory fsynced, then kill -9 in
/// the middle of the next batch. After each remount every name and byte
/// acknowledged is there: in immediate mode everything done, in on-flush mode
/// everything before the last fsync of the directory.
#[test]
fn many_small_files_survive_kill_9_as_acknowledged() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    for mode in ["on-flush", "immediate"] {
        let dir = tempfile::tempdir().unwrap();
        let v = fs_volume(dir.path(), "128M", mode);
        let at = dir.path().join("mnt");
        // The tree as acknowledged: name → contents.
        let mut acknowledged: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for round in 0..kill_rounds() {
            let m = Mounted::new(&v, &at);
            let mut names: Vec<String> = std::fs::read_dir(m.path(""))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            let expected: Vec<&String> = acknowledged.keys().collect();
            assert_eq!(
                names.iter().collect::<Vec<_>>(),
                expected,
                "{mode} round {round}: names"
            );
            for (name, data) in &acknowledged {
                let got = std::fs::read(m.path(name)).unwrap();
                assert!(&got == data, "{mode} round {round}: {name}'s bytes");
            }
            let mut now = acknowledged.clone();
            for batch in 0..3u32 {
                for i in 0..60u32 {
                    let name = format!("f{}", (round * 7 + batch * 13 + i) % 150);
                    let data = pattern((round + batch + i) as u8, 100 + (i as usize * 611) % 9000);
                    // Written under a temporary name and renamed over, as editors,
                    // compilers and package managers write.
                    let tmp = m.path(&format!("tmp{i}"));
                    let mut f = std::fs::File::create(&tmp).unwrap();
                    f.write_all(&data).unwrap();
                    drop(f);
                    std::fs::rename(&tmp, m.path(&name)).unwrap();
                    now.insert(name, data);
                    if i % 7 == 0 {
                        let gone = format!("f{}", (round * 11 + i * 3) % 150);
                        if now.remove(&gone).is_some() {
                            std::fs::remove_file(m.path(&gone)).unwrap();
                        }
                    }
                }
                std::fs::File::open(m.path("")).unwrap().sync_all().unwrap();
                acknowledged = now.clone();
            }
            // Half a batch more, never synced, then the daemon dies.
            for i in 0..30u32 {
                let name = format!("f{}", (round * 5 + i) % 150);
                let data = pattern(i as u8 ^ 0x55, 3000);
                std::fs::write(m.path(&name), &data).unwrap();
                if mode == "immediate" {
                    acknowledged.insert(name, data);
                }
            }
            // On-flush: the unsynced half batch must not be back at all (the
            // state is the last fsync's, exactly); immediate: all of it is.
            m.kill();
        }
        let m = Mounted::new(&v, &at);
        for (name, data) in &acknowledged {
            let got = std::fs::read(m.path(name)).unwrap();
            assert!(&got == data, "{mode}, last: {name}'s bytes");
        }
        m.unmount();
    }
}
