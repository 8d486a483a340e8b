//! A volume on a network home (nbdkit's file plugin, started here) whose server dies
//! and comes back: the write in flight fails at the deadline, writes are refused
//! meanwhile while reads go on from RAM, and once the server answers again the volume
//! takes writes by itself, with every acknowledged byte on the home and the failed
//! write's range back to what RAM holds.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};

const SIZE: u64 = 8 << 20;
const BLOCK: usize = 4096;

struct Nbdkit(Child);

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nbdkit(socket: &Path, file: &Path) -> Nbdkit {
    let _ = std::fs::remove_file(socket);
    let mut child = Command::new("nbdkit")
        .args(["-f", "--exit-with-parent", "--unix"])
        .arg(socket)
        .arg("file")
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdkit (scripts/setup.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        assert!(child.try_wait().unwrap().is_none(), "nbdkit ended");
        assert!(Instant::now() < deadline, "nbdkit made no socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    Nbdkit(child)
}

#[test]
fn a_home_that_dies_and_returns_is_waited_for_and_taken_back() {
    for durability in [Durability::Immediate, Durability::OnFlush] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk");
        std::fs::write(&file, vec![0u8; (SIZE + (1 << 20)) as usize]).unwrap();
        let sock = dir.path().join("s");
        let home = PathBuf::from(format!("nbd+unix:///?socket={}&timeout=1", sock.display()));
        let mut server = nbdkit(&sock, &file);
        Volume::create(
            &home,
            SIZE,
            &CreateOptions {
                durability,
                ..CreateOptions::default()
            },
        )
        .unwrap();
        let v = Volume::open(&home, &OpenOptions::default()).unwrap();
        v.wait_loaded(None).unwrap();
        v.write_at(0, &[1u8; BLOCK]).unwrap();
        v.flush().unwrap();

        drop(server);
        let started = Instant::now();
        let failed = v
            .write_at(BLOCK as u64, &[2u8; BLOCK])
            .and_then(|()| v.flush());
        assert!(
            failed.is_err(),
            "{durability}: a write or flush succeeded with the home gone"
        );
        assert!(started.elapsed() < Duration::from_secs(15));
        let refused = v.write_at(2 * BLOCK as u64, &[3u8; BLOCK]).unwrap_err();
        assert!(
            refused.to_string().contains("not answering"),
            "{durability}: {refused}"
        );
        assert!(v.home_away().is_some());
        assert!(v.failure().is_none(), "the volume failed for good");
        let mut back = vec![0u8; BLOCK];
        v.read_at(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 1), "a read from RAM failed");

        server = nbdkit(&sock, &file);
        let deadline = Instant::now() + Duration::from_secs(20);
        while v.write_at(3 * BLOCK as u64, &[4u8; BLOCK]).is_err() {
            assert!(
                Instant::now() < deadline,
                "{durability}: the volume did not take writes again"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(v.home_away().is_none());
        v.flush().unwrap();
        // The failed write's block: what RAM holds (the write never acknowledged).
        let mut ram = vec![0u8; BLOCK];
        v.read_at(BLOCK as u64, &mut ram).unwrap();
        drop(v);
        let v = Volume::open(&home, &OpenOptions::default()).unwrap();
        v.wait_loaded(None).unwrap();
        for (at, want) in [(0u64, &[1u8; BLOCK][..]), (3, &[4u8; BLOCK][..])] {
            v.read_at(at * BLOCK as u64, &mut back).unwrap();
            assert!(
                back == want,
                "{durability}: block {at} lost after the return"
            );
        }
        v.read_at(BLOCK as u64, &mut back).unwrap();
        assert!(
            back == ram,
            "{durability}: the home and RAM disagreed on the failed write's block"
        );
        drop(v);
        drop(server);
    }
}
