//! The volume as a block target: the contract every target keeps, on a file and on the
//! fault-injecting backend, with and without a journal; and discards and zeroes that
//! survive a power cut exactly as writes do.

use hscm_block::{conformance, BlockTarget, FuaSupport, WriteFlags, ZeroFlags};
use hscm_volume::testing::FaultyBackend;
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume, MIN_JOURNAL};

const SIZE: u64 = 1 << 20;

fn faulty(durability: Durability, journal_size: u64) -> (FaultyBackend, Volume) {
    let opts = CreateOptions {
        chunk_size: 64 << 10,
        durability,
        journal_size,
        ..CreateOptions::default()
    };
    let dev = FaultyBackend::new(opts.backing_len(SIZE) as usize, "target-dev");
    Volume::format(&dev, SIZE, &opts).unwrap();
    let v = Volume::open_backend(Box::new(dev.clone()), &OpenOptions::default()).unwrap();
    (dev, v)
}

#[test]
fn the_volume_keeps_the_block_target_contract() {
    for durability in Durability::ALL {
        for journal in [0, MIN_JOURNAL] {
            if durability == Durability::WriteBack && journal > 0 {
                continue;
            }
            let (_, v) = faulty(durability, journal);
            conformance::check_writable(&v);
            let caps = v.capabilities();
            assert_eq!(caps.fua, FuaSupport::Native);
            assert_eq!(caps.flush, durability != Durability::Immediate);
            assert!(caps.multi_conn && caps.trim && caps.zero && !caps.read_only);
        }
    }
    // On a real file (O_DIRECT), and read-only.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.hscm");
    Volume::create(&p, SIZE, &CreateOptions::default()).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    conformance::check_writable(&v);
    v.close().unwrap();
    let ro = Volume::open(
        &p,
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    conformance::check_read_only(&ro);
    let err = BlockTarget::write_at(&ro, 0, b"x", WriteFlags::NONE).unwrap_err();
    assert!(matches!(err, hscm_block::Error::ReadOnly), "{err}");
}

/// On an Immediate volume an acknowledged discard or zeroing is durable, as an
/// acknowledged write is; on an OnFlush or WriteBack volume, after FUA or a flush.
#[test]
fn acknowledged_zeroes_survive_a_power_cut() {
    let data = vec![0xa5u8; 200_000];
    for (durability, fua) in [
        (Durability::Immediate, false),
        (Durability::OnFlush, true),
        (Durability::WriteBack, true),
    ] {
        for (seed, zero_with_discard) in [(1, true), (2, false)] {
            let (dev, v) = faulty(durability, 0);
            BlockTarget::write_at(&v, 0, &data, WriteFlags::FUA).unwrap();
            if zero_with_discard {
                v.discard(1000, 150_000, WriteFlags { fua }).unwrap();
            } else {
                let flags = ZeroFlags {
                    fua,
                    ..ZeroFlags::default()
                };
                BlockTarget::write_zeroes(&v, 1000, 150_000, flags).unwrap();
            }
            let after = dev.power_cut(seed);
            drop(v);
            let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
            let mut back = vec![0u8; data.len()];
            hscm_volume::Volume::read_at(&v2, 0, &mut back).unwrap();
            assert!(back[..1000].iter().all(|&b| b == 0xa5), "{durability}");
            assert!(
                back[1000..151_000].iter().all(|&b| b == 0),
                "{durability}: zeroes lost"
            );
            assert!(back[151_000..].iter().all(|&b| b == 0xa5), "{durability}");
        }
    }
}

#[test]
fn fast_zeroes_are_refused_not_faked() {
    let (_, v) = faulty(Durability::Immediate, 0);
    let flags = ZeroFlags {
        fast_only: true,
        ..ZeroFlags::default()
    };
    let err = BlockTarget::write_zeroes(&v, 0, 4096, flags).unwrap_err();
    assert!(matches!(err, hscm_block::Error::Unsupported(_)), "{err}");
    assert_eq!(err.errno(), 95);
}

/// Write-back and a journal do not mix: refused at create and at open, by name.
#[test]
fn write_back_refuses_a_journal() {
    let opts = CreateOptions {
        durability: Durability::WriteBack,
        journal_size: MIN_JOURNAL,
        ..CreateOptions::default()
    };
    let dev = FaultyBackend::new(opts.backing_len(SIZE) as usize, "wb-dev");
    let err = Volume::format(&dev, SIZE, &opts).unwrap_err().to_string();
    assert!(
        err.contains("write-back needs a volume without a journal"),
        "{err}"
    );
    let (dev, v) = faulty(Durability::Immediate, MIN_JOURNAL);
    v.close().unwrap();
    let open = OpenOptions {
        durability: Some(Durability::WriteBack),
        ..OpenOptions::default()
    };
    let err = Volume::open_backend(Box::new(dev), &open)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("without a journal") && err.contains("target-dev"),
        "{err}"
    );
}
