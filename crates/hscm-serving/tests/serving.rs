//! The serving layer against every kind of volume: recognised by its header, opened,
//! written, closed, reopened with the data intact; the wrong kind and unsupported
//! options refused with the path named; a close refused while the engine is shared.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hscm_block::{BlockTarget, WriteFlags};
use hscm_serving::{
    detect, open, open_files, open_target, Engine, Error, FilesOptions, Kind, TargetOptions,
};
use hscm_volume::{CreateOptions, Volume};

const SIZE: u64 = 8 << 20;

fn flat(dir: &Path) -> PathBuf {
    let path = dir.join("flat.hscm");
    Volume::create(&path, SIZE, &CreateOptions::default()).unwrap();
    path
}

fn tiered(dir: &Path) -> PathBuf {
    let path = dir.join("tiered.hscm");
    hscm_tier::TieredVolume::create(&path, &hscm_tier::TierConfig::new(SIZE, 1 << 20), false)
        .unwrap();
    path
}

fn with_fs(dir: &Path) -> PathBuf {
    let path = dir.join("fs.hscm");
    Volume::create(&path, SIZE, &CreateOptions::default()).unwrap();
    let volume = Volume::open(&path, &hscm_volume::OpenOptions::default()).unwrap();
    hscm_fs::FileSystem::format(&volume, 0, 0).unwrap();
    volume.close().unwrap();
    path
}

fn write_and_read_back(target: &Arc<dyn BlockTarget>, at: u64, fill: u8) {
    let data = vec![fill; 8192];
    target.write_at(at, &data, WriteFlags::default()).unwrap();
    target.flush().unwrap();
    let mut back = vec![0u8; data.len()];
    target.read_at(at, &mut back).unwrap();
    assert_eq!(back, data);
}

fn read(target: &Arc<dyn BlockTarget>, at: u64, len: usize) -> Vec<u8> {
    let mut back = vec![0u8; len];
    target.read_at(at, &mut back).unwrap();
    back
}

#[test]
fn each_kind_is_recognised_by_its_header() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(detect(&flat(dir.path())).unwrap(), Kind::Flat);
    assert_eq!(detect(&tiered(dir.path())).unwrap(), Kind::Tiered);
    assert_eq!(detect(&with_fs(dir.path())).unwrap(), Kind::FileSystem);
    assert_eq!(
        [Kind::Flat, Kind::Tiered, Kind::FileSystem].map(Kind::name),
        ["flat", "tiered", "fs"]
    );
}

#[test]
fn what_is_not_a_volume_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    for (path, why) in [
        (&empty, "shorter than a volume header"),
        (&garbage, "no hscm magic"),
    ] {
        let e = detect(path).unwrap_err();
        assert!(matches!(e, Error::NotAVolume { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&path.display().to_string()) && text.contains(why),
            "{text}"
        );
    }
    let missing = dir.path().join("missing");
    let e = open_target(&missing, &TargetOptions::default()).unwrap_err();
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("missing"),
        "{e}"
    );
}

#[test]
fn a_flat_and_a_tiered_volume_serve_blocks_and_keep_them_across_a_close() {
    let dir = tempfile::tempdir().unwrap();
    for (path, kind) in [
        (flat(dir.path()), Kind::Flat),
        (tiered(dir.path()), Kind::Tiered),
    ] {
        let opened = open_target(&path, &TargetOptions::default()).unwrap();
        assert_eq!(opened.kind(), kind);
        assert_eq!(opened.size(), SIZE);
        write_and_read_back(&opened.target(), 4096 * 7, 0xa5);
        opened.close().unwrap();
        let again = open_target(&path, &TargetOptions::default()).unwrap();
        assert_eq!(
            read(&again.target(), 4096 * 7, 8192),
            vec![0xa5; 8192],
            "{kind:?}"
        );
        again.close().unwrap();
    }
}

#[test]
fn the_owner_lock_is_held_from_open_to_close() {
    let dir = tempfile::tempdir().unwrap();
    for path in [flat(dir.path()), tiered(dir.path())] {
        let opened = open_target(&path, &TargetOptions::default()).unwrap();
        assert!(open_target(&path, &TargetOptions::default()).is_err());
        opened.close().unwrap();
        open_target(&path, &TargetOptions::default())
            .unwrap()
            .close()
            .unwrap();
    }
}

#[test]
fn a_tiered_volume_refuses_options_it_does_not_offer() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiered(dir.path());
    for opts in [
        TargetOptions {
            read_only: true,
            ..Default::default()
        },
        TargetOptions {
            durability: Some(hscm_volume::Durability::OnFlush),
            ..Default::default()
        },
    ] {
        let e = open_target(&path, &opts).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Unsupported {
                    kind: Kind::Tiered,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("tiered volume"), "{e}");
    }
    // Nothing was left open: the volume opens normally afterwards.
    open_target(&path, &TargetOptions::default())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn a_served_tiered_volume_saves_its_counters_and_closes_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiered(dir.path());
    let opened = open_target(
        &path,
        &TargetOptions {
            save_stats_every: Some(Duration::from_millis(100)),
            ..Default::default()
        },
    )
    .unwrap();
    write_and_read_back(&opened.target(), 0, 1);
    let cfg = hscm_tier::TieredVolume::inspect(&path).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let saved = loop {
        if let Some(s) = hscm_tier::snapshot::read_saved(&path, &cfg).unwrap() {
            if s.state == "open" {
                break s;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no counters saved while open"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(saved.pid, std::process::id());
    opened.close().unwrap();
    let closed = hscm_tier::snapshot::read_saved(&path, &cfg)
        .unwrap()
        .unwrap();
    assert_eq!(closed.state, "closed");
}

#[test]
fn a_file_system_mounts_and_its_files_survive_a_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = with_fs(dir.path());
    let mut opened = open_files(&path, &FilesOptions::default()).unwrap();
    assert_eq!(opened.kind(), Kind::FileSystem);
    opened.load_in_background();
    let Engine::Files { fs, .. } = opened.engine() else {
        panic!("a file system opens as files");
    };
    let owner = hscm_fs::Owner { uid: 0, gid: 0 };
    let attr = fs
        .mknod(hscm_fs::ROOT, b"note", hscm_fs::Kind::File, 0o644, 0, owner)
        .unwrap();
    fs.write_whole(attr.ino, 0, b"kept").unwrap();
    opened.close().unwrap();

    // `open` picks the file system for this kind.
    let again = open(&path, true).unwrap();
    let Engine::Files { fs, .. } = again.engine() else {
        panic!("a file system opens as files");
    };
    let attr = fs.lookup(hscm_fs::ROOT, b"note").unwrap();
    assert_eq!(fs.read(attr.ino, 0, 16).unwrap(), b"kept");
    again.close().unwrap();
}

#[test]
fn a_file_system_volume_also_opens_as_its_blocks_and_others_refuse_to_mount() {
    let dir = tempfile::tempdir().unwrap();
    let path = with_fs(dir.path());
    let opened = open_target(&path, &TargetOptions::default()).unwrap();
    assert_eq!(opened.kind(), Kind::FileSystem);
    assert!(matches!(opened.engine(), Engine::Flat(_)));
    // The superblock is what the header check found.
    assert!(hscm_fs::looks_formatted(&read(&opened.target(), 0, 4096)));
    opened.close().unwrap();
    for (path, kind) in [
        (flat(dir.path()), Kind::Flat),
        (tiered(dir.path()), Kind::Tiered),
    ] {
        let e = open_files(&path, &FilesOptions::default()).unwrap_err();
        assert!(
            matches!(e, Error::WrongKind { found, .. } if found == kind),
            "{e}"
        );
        assert!(e.to_string().contains("holds no file system"), "{e}");
    }
}

#[test]
fn close_is_refused_while_a_server_still_holds_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let path = flat(dir.path());
    let opened = open_target(&path, &TargetOptions::default()).unwrap();
    let held = opened.target();
    let e = opened.close().unwrap_err();
    assert!(
        matches!(e, Error::InUse { .. }) && e.to_string().contains("still in use"),
        "{e}"
    );
    // The last holder's drop releases it; the volume then opens again.
    drop(held);
    open_target(&path, &TargetOptions::default())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn read_only_refuses_writes_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = flat(dir.path());
    let opened = open_target(&path, &TargetOptions::default()).unwrap();
    write_and_read_back(&opened.target(), 0, 9);
    opened.close().unwrap();
    let ro = open(&path, true).unwrap();
    assert!(ro.read_only());
    assert!(ro
        .target()
        .write_at(0, &[0; 4096], WriteFlags::default())
        .is_err());
    assert_eq!(read(&ro.target(), 0, 4096), vec![9; 4096]);
    ro.close().unwrap();
}

/// The spec of a tiered volume of `size` with `ram` of DRAM.
fn tiered_spec(size: u64, ram: u64) -> hscm_serving::CreateSpec {
    hscm_serving::CreateSpec {
        size,
        durability: hscm_durable::Durability::Immediate,
        layout: hscm_serving::Layout::Tiered {
            config: hscm_tier::TierConfig::new(size, ram),
            fast_path: None,
        },
        overwrite: false,
        larger_than_ram: false,
        mirror: None,
    }
}

#[test]
fn every_kind_is_created_described_and_detected_as_made() {
    let dir = tempfile::tempdir().unwrap();
    let (uid, gid) = (0, 0);
    let flat = dir.path().join("flat.hscm");
    let fs = dir.path().join("fs.hscm");
    let tiered = dir.path().join("tiered.hscm");
    let spec = |layout| hscm_serving::CreateSpec {
        size: SIZE,
        durability: hscm_durable::Durability::OnFlush,
        layout,
        overwrite: false,
        larger_than_ram: false,
        mirror: None,
    };
    let made = hscm_serving::create(
        &flat,
        &spec(hscm_serving::Layout::Flat {
            chunk_size: 1 << 20,
            journal_size: 0,
        }),
    )
    .unwrap();
    assert!(made.to_string().starts_with("created "), "{made}");
    let made = hscm_serving::create(
        &fs,
        &spec(hscm_serving::Layout::FileSystem {
            chunk_size: 1 << 20,
            journal_size: 0,
            owner: (uid, gid),
            ram_budget: Some(1 << 20),
        }),
    )
    .unwrap();
    assert!(made.to_string().contains("keep at most 1 MiB"), "{made}");
    hscm_serving::create(&tiered, &tiered_spec(SIZE, 1 << 20)).unwrap();
    assert_eq!(detect(&flat).unwrap(), Kind::Flat);
    assert_eq!(detect(&fs).unwrap(), Kind::FileSystem);
    assert_eq!(detect(&tiered).unwrap(), Kind::Tiered);
    let d = hscm_serving::describe(&fs).unwrap();
    assert_eq!(d.to_json()["file_system"], true);
    assert_eq!(d.to_json()["durability"], "on-flush");
    let d = hscm_serving::describe(&tiered).unwrap();
    assert_eq!(d.to_json()["kind"], "tiered");
    assert!(
        d.check_line().contains(": ok (tiered volume"),
        "{}",
        d.check_line()
    );
    // The recorded budget is what a mount without one takes.
    let opened = open_files(
        &fs,
        &FilesOptions {
            read_only: false,
            durability: None,
            ram: None,
            ram_policy: hscm_policy::cache::PolicySpec::parse("lru").unwrap(),
            ..FilesOptions::default()
        },
    )
    .unwrap();
    let Engine::Files { fs: files, .. } = opened.engine() else {
        panic!("a file-system volume opens as its files");
    };
    assert_eq!(files.ram_usage().budget, Some(1 << 20));
    opened.close().unwrap();
    // Only a tiered volume has saved counters.
    assert!(matches!(
        hscm_serving::saved_counters(&flat),
        Err(Error::NotTiered { .. })
    ));
}

#[test]
fn a_volume_that_cannot_be_made_as_asked_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.hscm");
    // A DRAM tier larger than the volume.
    let e = hscm_serving::create(&path, &tiered_spec(SIZE, 2 * SIZE)).unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e}");
    assert!(e.to_string().contains("larger than the volume"), "{e}");
    assert!(!path.exists(), "nothing created");
    // A flat volume far beyond any machine's memory could never open here.
    let spec = hscm_serving::CreateSpec {
        size: 64 << 40,
        durability: hscm_durable::Durability::Immediate,
        layout: hscm_serving::Layout::Flat {
            chunk_size: 1 << 20,
            journal_size: 0,
        },
        overwrite: false,
        larger_than_ram: false,
        mirror: None,
    };
    let e = hscm_serving::create(&path, &spec).unwrap_err();
    assert!(matches!(e, Error::WouldNotOpenHere { .. }), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(!path.exists(), "nothing created");
    // An existing volume is not overwritten unless asked.
    let kept = flat(dir.path());
    let before = std::fs::read(&kept).unwrap();
    let e = hscm_serving::create(&kept, &tiered_spec(SIZE, 1 << 20)).unwrap_err();
    assert!(e.to_string().contains(&kept.display().to_string()), "{e}");
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        before,
        "the volume is untouched"
    );
    // Garbage is described as what it is not.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![7u8; 8192]).unwrap();
    assert!(hscm_serving::describe(&junk).is_err());
}
