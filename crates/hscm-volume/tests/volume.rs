use std::path::Path;
use std::sync::Arc;

use hscm_volume::testing::FaultyBackend;
use hscm_volume::{Backend, CreateOptions, Durability, Error, OpenOptions, Volume};
use rand::{Rng, SeedableRng};

const MIB: u64 = 1 << 20;

fn small(chunk: u32) -> CreateOptions {
    CreateOptions {
        chunk_size: chunk,
        ..CreateOptions::default()
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

#[test]
fn write_read_reopen_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hscm");
    Volume::create(&p, 4 * MIB, &small(64 << 10)).unwrap();
    let writes: Vec<(u64, Vec<u8>)> = vec![
        (0, pattern(1, 4096)),
        (1000, pattern(2, 1000)),           // unaligned, inside a sector
        (65_536 - 10, pattern(3, 20)),      // straddles a chunk boundary
        (3 * MIB + 17, pattern(4, 70_000)), // unaligned, several chunks
        (4 * MIB - 1, pattern(5, 1)),       // the last byte
    ];
    let mut model = vec![0u8; 4 * MIB as usize];
    {
        let v = Volume::open(&p, &OpenOptions::default()).unwrap();
        for (off, data) in &writes {
            v.write_at(*off, data).unwrap();
            model[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            let mut back = vec![0; data.len()];
            v.read_at(*off, &mut back).unwrap();
            assert_eq!(&back, data, "read after write at {off}");
        }
        v.close().unwrap();
    }
    for background in [true, false] {
        let v = Volume::open(
            &p,
            &OpenOptions {
                background_load: background,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        let mut all = vec![0u8; model.len()];
        v.read_at(0, &mut all).unwrap();
        assert!(
            all == model,
            "reopened contents differ (background load {background})"
        );
        if background {
            let progress = v.wait_loaded(None).unwrap();
            assert_eq!(progress.loaded_chunks, progress.total_chunks);
            v.read_at(0, &mut all).unwrap();
            assert!(all == model, "contents differ after warm-up");
        }
    }
}

#[test]
fn out_of_range_requests_are_refused_without_side_effects() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let mut buf = [0u8; 2];
    for (off, len) in [(MIB - 1, 2usize), (MIB, 1), (u64::MAX, 2)] {
        let err = v.read_at(off, &mut buf[..len]).unwrap_err();
        assert!(matches!(err, Error::OutOfRange { .. }), "{err}");
        let err = v.write_at(off, &buf[..len]).unwrap_err();
        assert!(err.to_string().contains("outside the volume"), "{err}");
    }
    assert!(
        v.failure().is_none(),
        "a refused request must not fail the volume"
    );
    v.write_at(0, b"still fine").unwrap();
}

fn expect_open_error(p: &Path, needle: &str) {
    let err = Volume::open(p, &OpenOptions::default())
        .err()
        .expect("open must fail");
    let msg = err.to_string();
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    assert!(
        msg.contains(&p.display().to_string()),
        "{msg:?} does not name the file"
    );
}

#[test]
fn bad_headers_and_sizes_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    let good = std::fs::read(&p).unwrap();

    let mut bytes = good.clone();
    bytes[0..8].copy_from_slice(b"NOTAVOL!");
    std::fs::write(&p, &bytes).unwrap();
    expect_open_error(&p, "not an hscm volume");

    let mut bytes = good.clone();
    bytes[8] = 99; // format version 99
    std::fs::write(&p, &bytes).unwrap();
    expect_open_error(&p, "newer than this hscm");

    let mut bytes = good.clone();
    bytes[20] ^= 1; // volume size, under the checksum
    std::fs::write(&p, &bytes).unwrap();
    expect_open_error(&p, "checksum");

    std::fs::write(&p, &good[..good.len() - 4096]).unwrap();
    expect_open_error(&p, "truncated");

    let mut bytes = good.clone();
    bytes.extend_from_slice(&[0; 4096]);
    std::fs::write(&p, &bytes).unwrap();
    expect_open_error(&p, "resized");

    std::fs::write(&p, b"tiny").unwrap();
    expect_open_error(&p, "truncated");

    // inspect() (used by `hscm volume check`) agrees.
    std::fs::write(&p, &good).unwrap();
    let found = Volume::inspect(&p).unwrap();
    let (h, len) = (found.header, found.backing_len);
    assert_eq!(
        (h.volume_size, len),
        (MIB, CreateOptions::default().backing_len(MIB))
    );
}

/// Makes `p` unwritable even for root: an immutable file as root, mode 0444 otherwise.
fn make_unwritable(p: &Path) -> bool {
    if rustix::process::geteuid().is_root() {
        std::process::Command::new("chattr")
            .arg("+i")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success())
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o444)).is_ok()
    }
}

#[test]
fn a_read_only_file_is_named_and_left_intact() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ro.hscm");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    let before = std::fs::read(&p).unwrap();
    assert!(
        make_unwritable(&p),
        "could not make the file unwritable (chattr missing?)"
    );
    let result = Volume::open(&p, &OpenOptions::default());
    if rustix::process::geteuid().is_root() {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&p)
            .status();
    }
    let msg = result
        .err()
        .expect("open for writing must fail")
        .to_string();
    assert!(
        msg.contains("ro.hscm") && msg.contains("open for writing"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn read_only_volume_refuses_writes_and_serves_reads() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    {
        let v = Volume::open(&p, &OpenOptions::default()).unwrap();
        v.write_at(10, b"kept").unwrap();
    }
    let v = Volume::open(
        &p,
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let err = v.write_at(0, b"x").unwrap_err();
    assert!(
        matches!(err, Error::ReadOnly { .. }) && err.to_string().contains("read-only"),
        "{err}"
    );
    let mut b = [0u8; 4];
    v.read_at(10, &mut b).unwrap();
    assert_eq!(&b, b"kept");
}

fn faulty_volume(size: u64, chunk: u32, durability: Durability) -> (FaultyBackend, Volume) {
    let dev = FaultyBackend::new(
        CreateOptions::default().backing_len(size) as usize,
        "faulty-dev",
    );
    Volume::format(
        &dev,
        size,
        &CreateOptions {
            chunk_size: chunk,
            durability,
            overwrite: false,
            journal_size: 0,
        },
    )
    .unwrap();
    let v = Volume::open_backend(Box::new(dev.clone()), &OpenOptions::default()).unwrap();
    (dev, v)
}

#[test]
fn full_disk_fails_the_write_and_turns_the_volume_read_only() {
    let (dev, v) = faulty_volume(MIB, 64 << 10, Durability::Immediate);
    v.write_at(0, &pattern(1, 8192)).unwrap();
    dev.fail_write_after(0, rustix::io::Errno::NOSPC.raw_os_error());
    let err = v.write_at(100_000, &pattern(2, 4096)).unwrap_err();
    assert!(err.to_string().contains("No space left"), "{err}");
    let err = v.write_at(0, b"again").unwrap_err();
    // Failed, not ReadOnly (it was opened read-write), with the errno kept.
    assert!(
        matches!(
            err,
            Error::Failed {
                errno: Some(28),
                ..
            }
        ),
        "{err}"
    );
    assert!(v.failure().unwrap().contains("No space left"));
    // What was durable before is untouched.
    let after = dev.power_cut(7);
    let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    let mut b = vec![0; 8192];
    v2.read_at(0, &mut b).unwrap();
    assert_eq!(b, pattern(1, 8192));
}

#[test]
fn failed_sync_is_never_acknowledged() {
    for durability in [Durability::Immediate, Durability::OnFlush] {
        let (dev, v) = faulty_volume(MIB, 64 << 10, durability);
        dev.fail_sync_after(0);
        let r = v.write_at(0, b"data");
        let flushed = r.and_then(|()| v.flush());
        assert!(
            flushed.is_err(),
            "{durability}: a failed sync was acknowledged"
        );
        let err = v.write_at(0, b"more").unwrap_err();
        assert!(matches!(err, Error::Failed { .. }), "{durability}: {err}");
        assert!(
            v.flush().is_err(),
            "{durability}: flush after failure must not claim success"
        );
    }
}

#[test]
fn group_commit_shares_syncs_between_writers() {
    let (dev, v) = faulty_volume(16 * MIB, MIB as u32, Durability::Immediate);
    v.wait_loaded(None).unwrap();
    dev.set_sync_latency(std::time::Duration::from_micros(300));
    let v = Arc::new(v);
    let before = dev.sync_count();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let v = Arc::clone(&v);
            std::thread::spawn(move || {
                for i in 0..200u64 {
                    v.write_at((t * 200 + i) * 4096, &pattern(i, 4096)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let syncs = dev.sync_count() - before;
    // Without sharing there would be one sync per write.
    assert!((1..800).contains(&syncs), "{syncs} syncs for 1600 writes");
    let mut b = vec![0; 4096];
    v.read_at((3 * 200 + 5) * 4096, &mut b).unwrap();
    assert_eq!(b, pattern(5, 4096));
}

/// Writers of one chunk on a home with round trips (FUA writes that take 2 ms): their
/// home writes overlap, unless they share sectors; overlapping ones (unaligned, two
/// writers in one sector too) land in one order, the same at home and in RAM.
#[test]
fn writers_of_one_chunk_overlap_their_round_trips_and_keep_ram_and_home_equal() {
    let (dev, v) = faulty_volume(4 * MIB, MIB as u32, Durability::Immediate);
    v.wait_loaded(None).unwrap();
    dev.prefer_write_through();
    dev.set_write_latency(std::time::Duration::from_millis(2));
    let v = Arc::new(v);
    // 8 writers over 64 KiB of chunk 1, 3,000-byte writes at random byte offsets: many
    // overlap, and many share a sector without overlapping.
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let v = &v;
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                for i in 0..40 {
                    let at = MIB + rng.gen_range(0..(64 << 10) - 3000);
                    v.write_at(at, &pattern(t * 1000 + i, 3000)).unwrap();
                }
            });
        }
    });
    assert!(
        dev.most_writes_in_flight() > 1,
        "writers of one chunk waited for each other's round trips"
    );
    let mut ram = vec![0u8; 64 << 10];
    v.read_at(MIB, &mut ram).unwrap();
    let at = (v.header().data_offset() + MIB) as usize;
    let home = dev.live_image()[at..at + ram.len()].to_vec();
    let first_difference = ram.iter().zip(&home).position(|(a, b)| a != b);
    assert_eq!(first_difference, None, "RAM and home disagree");
}

#[test]
fn per_write_durability_override() {
    let (dev, v) = faulty_volume(MIB, 64 << 10, Durability::OnFlush);
    let before = dev.sync_count();
    v.write_at(0, b"lazy").unwrap();
    assert_eq!(dev.sync_count(), before, "on-flush write must not sync");
    v.write_at_with(4096, b"now", Durability::Immediate)
        .unwrap();
    assert!(dev.sync_count() > before, "immediate write must sync");
    // Both are durable now: the sync covered the earlier completed write too.
    let after = dev.power_cut(3);
    let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    let mut b = [0u8; 4];
    v2.read_at(0, &mut b).unwrap();
    assert_eq!(&b, b"lazy");
}

#[test]
fn geometry_is_validated_at_create() {
    let dir = tempfile::tempdir().unwrap();
    let err = Volume::create(&dir.path().join("a"), 1000, &CreateOptions::default()).unwrap_err();
    assert!(err.to_string().contains("multiple of 4096"), "{err}");
    let err = Volume::create(&dir.path().join("b"), MIB, &small(1000)).unwrap_err();
    assert!(err.to_string().contains("chunk size"), "{err}");
    assert!(!dir.path().join("a").exists());
    let dev = FaultyBackend::new(4096, "small");
    let err = Volume::format(&dev, MIB, &CreateOptions::default()).unwrap_err();
    assert!(err.to_string().contains("fewer than"), "{err}");
    assert_eq!(dev.len(), 4096);
}

/// Loaders, writers and readers all at once during warm-up: every read sees a whole
/// block version no older than the last one acknowledged before the read began.
#[test]
fn concurrent_io_during_warm_up_sees_whole_current_blocks() {
    use hscm_volume::testing::{stamped_block, stamped_version};
    use std::sync::atomic::{AtomicU64, Ordering};
    const BLOCK: u64 = 2048; // half a sector: every write completes a sector from RAM
    const SIZE: u64 = 8 * MIB;
    let blocks = SIZE / BLOCK;
    for round in 0..4u64 {
        // Odd rounds with a journal (writes to loaded chunks go through it, to unloaded
        // ones straight home), even rounds in place.
        let opts = CreateOptions {
            journal_size: if round % 2 == 1 { 1 << 20 } else { 0 },
            ..small(16 << 10)
        };
        let dev = FaultyBackend::new(opts.backing_len(SIZE) as usize, "warm-dev");
        Volume::format(&dev, SIZE, &opts).unwrap();
        {
            let v = Volume::open_backend(
                Box::new(dev.clone()),
                &OpenOptions {
                    background_load: false,
                    ..OpenOptions::default()
                },
            )
            .unwrap();
            for b in 0..blocks {
                v.write_at_with(
                    b * BLOCK,
                    &stamped_block(b, 1, BLOCK as usize),
                    Durability::OnFlush,
                )
                .unwrap();
            }
            v.flush().unwrap();
        }
        let v = Arc::new(Volume::open_backend(Box::new(dev), &OpenOptions::default()).unwrap());
        let acked: Arc<Vec<AtomicU64>> = Arc::new((0..blocks).map(|_| AtomicU64::new(1)).collect());
        let mut threads = Vec::new();
        for w in 0..2u64 {
            let (v, acked) = (v.clone(), acked.clone());
            threads.push(std::thread::spawn(move || {
                let mut x = round * 7 + w + 1;
                for version in 2..400u64 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // Writer w owns the blocks with b % 2 == w.
                    let b = ((x >> 33) % (blocks / 2)) * 2 + w;
                    v.write_at_with(
                        b * BLOCK,
                        &stamped_block(b, version, BLOCK as usize),
                        Durability::OnFlush,
                    )
                    .unwrap();
                    acked[b as usize].fetch_max(version, Ordering::SeqCst);
                }
            }));
        }
        for r in 0..2u64 {
            let (v, acked) = (v.clone(), acked.clone());
            threads.push(std::thread::spawn(move || {
                let mut x = round * 13 + r + 5;
                let mut buf = vec![0u8; BLOCK as usize];
                for _ in 0..2000 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let b = (x >> 33) % blocks;
                    let floor = acked[b as usize].load(Ordering::SeqCst);
                    v.read_at(b * BLOCK, &mut buf).unwrap();
                    let got = stamped_version(b, &buf);
                    assert!(
                        got.is_some_and(|g| g >= floor),
                        "block {b}: read {got:?}, acknowledged {floor}"
                    );
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        v.wait_loaded(None).unwrap();
        let mut buf = vec![0u8; BLOCK as usize];
        for b in 0..blocks {
            v.read_at(b * BLOCK, &mut buf).unwrap();
            assert_eq!(
                stamped_version(b, &buf),
                Some(acked[b as usize].load(Ordering::SeqCst)),
                "block {b} after warm-up"
            );
        }
    }
}

/// tmpfs took O_DIRECT only from Linux 6.6 on: the volume works there either way.
#[test]
fn a_volume_on_tmpfs_works() {
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "/dev/shm (tmpfs) is needed for this test");
    let dir = tempfile::tempdir_in(shm).unwrap();
    let p = dir.path().join("v.hscm");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    v.write_at(123, b"on tmpfs").unwrap();
    v.close().unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let mut b = [0u8; 8];
    v.read_at(123, &mut b).unwrap();
    assert_eq!(&b, b"on tmpfs");
}

#[test]
fn a_regular_file_on_disk_uses_o_direct() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("v.hscm");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    // ext4/xfs/btrfs all take O_DIRECT; if this fails, the target dir is on tmpfs.
    assert!(v.backend_is_direct());
}

/// One owner per volume: a second read-write open, a read-only open beside a writer,
/// and formatting over a volume in use are refused, naming the path and this process
/// (the holder); readers share; closing releases.
#[test]
fn a_volume_has_one_read_write_owner() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("owned.hscm");
    Volume::create(&p, MIB, &small(64 << 10)).unwrap();
    let owner = Volume::open(&p, &OpenOptions::default()).unwrap();
    owner.write_at(0, b"mine").unwrap();
    let read_only = OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    };
    for (opts, what) in [
        (OpenOptions::default(), "a second writer"),
        (read_only.clone(), "a reader beside the writer"),
    ] {
        let err = Volume::open(&p, &opts).err().expect(what);
        let msg = err.to_string();
        assert!(matches!(err, Error::Locked { .. }), "{what}: {msg}");
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!(
                "process {} has it open read-write",
                std::process::id()
            )),
            "{msg}"
        );
    }
    let over = CreateOptions {
        overwrite: true,
        ..small(64 << 10)
    };
    assert!(matches!(
        Volume::create(&p, MIB, &over),
        Err(Error::Locked { .. })
    ));
    // Inspection reads the header without taking the volume.
    assert_eq!(Volume::inspect(&p).unwrap().header.volume_size, MIB);
    owner.close().unwrap();
    let r1 = Volume::open(&p, &read_only).unwrap();
    let r2 = Volume::open(&p, &read_only).unwrap();
    let mut back = [0u8; 4];
    r2.read_at(0, &mut back).unwrap();
    assert_eq!(&back, b"mine");
    assert!(matches!(
        Volume::open(&p, &OpenOptions::default()),
        Err(Error::Locked { .. })
    ));
    drop((r1, r2));
    Volume::open(&p, &OpenOptions::default()).unwrap();
}

/// A volume opened as its home only (`ram_copy: false`) loads nothing and answers
/// every read from the device, unaligned writes included (their partial sectors are
/// completed from home), and what it wrote is there for a normal open.
#[test]
fn home_only_reads_and_writes_go_to_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hscm");
    Volume::create(&p, 4 * MIB, &small(64 << 10)).unwrap();
    let mut model = vec![0u8; 4 * MIB as usize];
    let writes: Vec<(u64, Vec<u8>)> = vec![
        (0, pattern(1, 4096)),
        (1000, pattern(2, 1000)),
        (65_536 - 10, pattern(3, 20)),
        (3 * MIB + 17, pattern(4, 70_000)),
        (4 * MIB - 1, pattern(5, 1)),
        (1003, pattern(6, 5)), // over the earlier unaligned write
    ];
    {
        let home_only = OpenOptions {
            ram_copy: false,
            ..OpenOptions::default()
        };
        let v = Volume::open(&p, &home_only).unwrap();
        for (off, data) in &writes {
            v.write_at(*off, data).unwrap();
            model[*off as usize..*off as usize + data.len()].copy_from_slice(data);
        }
        let mut all = vec![0u8; model.len()];
        v.read_at(0, &mut all).unwrap();
        assert!(all == model, "home-only reads differ from what was written");
        assert_eq!(v.load_progress().loaded_bytes, 0, "nothing is loaded");
        v.close().unwrap();
    }
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let mut all = vec![0u8; model.len()];
    v.read_at(0, &mut all).unwrap();
    assert!(all == model, "a normal open reads what home-only wrote");
}
