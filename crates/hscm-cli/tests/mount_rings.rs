//! FUSE over io_uring (`hscm mount --io-uring`): the rings serve what /dev/fuse
//! serves, the same way, under several writers at once, in both durability modes.
//! Root only (the kernel's switch and FUSE passthrough); elsewhere the test says so
//! and passes. Every other mount test runs by the rings too wherever the kernel's
//! switch is on (`--io-uring auto`, the default).

use crate::mount_passthrough::{pattern, Mounted};
use crate::mount_truth::root_and_memory;
use crate::mount_work::status_of;
use crate::util::fs_volume;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// One writer's work in its own directory: files made under a temporary name,
/// renamed over others, some unlinked, the directory fsynced; returns the tree it
/// left, name → bytes.
fn writer(dir: &Path, seed: u32) -> BTreeMap<String, Vec<u8>> {
    std::fs::create_dir(dir).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..150u32 {
        let name = format!("f{}", (i * 7 + seed) % 40);
        let data = pattern(
            (seed * 31 + i) as u8,
            50 + ((i * 997 + seed) as usize % 6000),
        );
        let tmp = dir.join(format!("tmp{i}"));
        let mut f = std::fs::File::create(&tmp).unwrap();
        f.write_all(&data).unwrap();
        drop(f);
        std::fs::rename(&tmp, dir.join(&name)).unwrap();
        model.insert(name, data);
        if i % 9 == 4 {
            let gone = format!("f{}", (i * 3 + seed) % 40);
            if model.remove(&gone).is_some() {
                std::fs::remove_file(dir.join(&gone)).unwrap();
            }
        }
    }
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
    model
}

#[test]
fn io_uring_and_dev_fuse_serve_many_writers_alike() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    let rings_here = hscm_fuse::uring::kernel_switch().is_some();
    // `--io-uring on` turns the kernel's switch on; it goes back as it was, so that
    // the test run leaves the machine's setting alone.
    let _switch = SwitchRestored::now();
    if !rings_here {
        eprintln!(
            "the rings are not tested: this kernel has no {}",
            hscm_fuse::uring::KERNEL_SWITCH
        );
    }
    for mode in ["on-flush", "immediate"] {
        for transport in ["on", "off"] {
            if transport == "on" && !rings_here {
                continue;
            }
            let what = format!("{mode}, --io-uring {transport}");
            let dir = tempfile::tempdir().unwrap();
            let v = fs_volume(dir.path(), "256M", mode);
            let at = dir.path().join("mnt");
            let m = Mounted::with(&v, &at, &["--io-uring", transport]);
            let trees: Vec<BTreeMap<String, Vec<u8>>> = std::thread::scope(|s| {
                let writers: Vec<_> = (0..4u32)
                    .map(|w| {
                        let dir = m.path(&format!("w{w}"));
                        s.spawn(move || writer(&dir, w))
                    })
                    .collect();
                writers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let check = |m: &Mounted, when: &str| {
                for (w, model) in trees.iter().enumerate() {
                    let dir = m.path(&format!("w{w}"));
                    let mut names: Vec<String> = std::fs::read_dir(&dir)
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    assert_eq!(
                        names,
                        model.keys().cloned().collect::<Vec<_>>(),
                        "{what} {when}: writer {w}'s names"
                    );
                    for (name, data) in model {
                        let got = std::fs::read(dir.join(name)).unwrap();
                        assert!(&got == data, "{what} {when}: writer {w}'s {name}");
                    }
                }
            };
            check(&m, "while mounted");
            // A name that is not there is an answer, not an error.
            assert!(std::fs::metadata(m.path("not-there")).is_err());
            let status = status_of(&m.at);
            assert_eq!(
                status["errors"]["request"], 0,
                "{what}: {}",
                status["errors"]
            );
            let lookups = status["ops"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["op"] == "lookup")
                .unwrap()["count"]
                .as_u64()
                .unwrap();
            assert!(lookups >= 1, "{what}: the absent name was looked up");
            let requests = status["fuse"]["ring_requests"].as_u64().unwrap();
            if transport == "on" {
                assert_eq!(status["fuse"]["kind"], "io_uring", "{what}: {status}");
                // 600 files made, renamed and closed: thousands of requests.
                assert!(requests >= 600, "{what}: the rings carried {requests}");
            } else {
                assert_eq!(status["fuse"]["kind"], "dev-fuse", "{what}");
                assert_eq!(requests, 0, "{what}: nothing by the rings");
            }
            m.unmount();
            let m = Mounted::with(&v, &at, &["--io-uring", "off"]);
            check(&m, "after a remount");
            m.unmount();
        }
    }
}

/// SIGTERM right after the mount said "mounted", while the queues' threads have just
/// registered: every round ends cleanly. A queue used to free the word its eventfd
/// read lands in while the read was still with the kernel; the stop's wake-up then
/// wrote into freed heap, and glibc aborted the daemon at a thread's exit (found 1 in
/// 2-15 rounds with the CPUs busy). Each round is a fresh daemon, so the test holds
/// the rounds' count, not their timing.
#[test]
fn a_signal_right_after_mounting_by_the_rings_stops_cleanly() {
    let Some(_memory) = root_and_memory() else {
        return;
    };
    if hscm_fuse::uring::kernel_switch().is_none() {
        eprintln!(
            "the rings are not tested: this kernel has no {}",
            hscm_fuse::uring::KERNEL_SWITCH
        );
        return;
    }
    let _switch = SwitchRestored::now();
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "64M", "immediate");
    let at = dir.path().join("mnt");
    std::fs::create_dir_all(&at).unwrap();
    let log = dir.path().join("daemon.log");
    let mut by_the_rings = 0;
    for round in 0..12 {
        let mut cmd = crate::util::hscm();
        cmd.arg("mount")
            .arg(&v)
            .arg(&at)
            .args(["--foreground", "--io-uring", "on"])
            .env("HSCM_LOG", "info")
            .stderr(std::fs::File::create(&log).unwrap());
        let (mut daemon, _) = crate::util::spawn_until_line(&mut cmd, "mounted");
        // Odd rounds give the queues a request first, so that some stop from a wait
        // with completions just served.
        if round % 2 == 1 {
            let _ = std::fs::metadata(at.join("not-there"));
        }
        crate::util::signal(daemon.id(), 15);
        let status = daemon.wait().unwrap();
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(status.success(), "round {round}: {status}: {said}");
        // "mounted" comes before the queues register, so a signal may find them
        // registering, or not yet started: both are rounds this test wants.
        if said.contains("FUSE over io_uring:") {
            by_the_rings += 1;
        }
    }
    eprintln!("{by_the_rings} of 12 rounds stopped with the rings up");
}

/// Held by each test here that may turn the kernel's switch on: two at once would
/// each save what the other set, and the later restore would leave the switch on.
static SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The kernel's FUSE-over-io_uring switch as it was when this was made (by one test
/// at a time, [`SWITCH`]), written back on drop.
struct SwitchRestored {
    was: Option<String>,
    _alone: std::sync::MutexGuard<'static, ()>,
}

impl SwitchRestored {
    fn now() -> SwitchRestored {
        let alone = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        SwitchRestored {
            was: std::fs::read_to_string(hscm_fuse::uring::KERNEL_SWITCH).ok(),
            _alone: alone,
        }
    }
}

impl Drop for SwitchRestored {
    fn drop(&mut self) {
        if let Some(was) = &self.was {
            let _ = std::fs::write(hscm_fuse::uring::KERNEL_SWITCH, was.trim());
        }
    }
}
