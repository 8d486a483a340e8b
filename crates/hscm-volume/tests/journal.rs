//! The write-ahead journal: power cuts while it wraps and checkpoints run, replay on
//! open (writable and read-only), stale batches of an earlier incarnation, and
//! failures during a checkpoint.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hscm_volume::testing::{check_restarted_block, stamped_block, FaultyBackend};
use hscm_volume::{CreateOptions, Durability, Error, OpenOptions, Volume, MIN_JOURNAL};
use rand::{Rng, SeedableRng};

const MIB: u64 = 1 << 20;

fn journaled(size: u64, chunk: u32, durability: Durability) -> (FaultyBackend, CreateOptions) {
    let opts = CreateOptions {
        chunk_size: chunk,
        durability,
        overwrite: false,
        journal_size: MIN_JOURNAL,
    };
    let dev = FaultyBackend::new(opts.backing_len(size) as usize, "journal-dev");
    Volume::format(&dev, size, &opts).unwrap();
    (dev, opts)
}

fn open(dev: &FaultyBackend) -> Volume {
    Volume::open_backend(Box::new(dev.clone()), &OpenOptions::default()).unwrap()
}

/// Many writers over a small journal, so it wraps many times and checkpoints run
/// concurrently with writes; a power cut at a random moment; every acknowledged write
/// survives the restart.
fn wrap_round(durability: Durability, seed: u64) {
    const BLOCK: usize = 4096 + 512; // two sectors, one partial: records of varying shape
    const BLOCKS: u64 = 96;
    let size = (BLOCKS * BLOCK as u64).next_multiple_of(4096);
    let (dev, _) = journaled(size, 16 << 10, durability);
    let v = Arc::new(open(&dev));
    v.wait_loaded(None).unwrap();
    let ledger = common::Ledger::new(BLOCKS);
    let stop = Arc::new(AtomicBool::new(false));
    // Each writer owns every fourth block.
    let writers = common::Writers {
        count: 4,
        durability,
        block_len: BLOCK,
        seed,
        flush_one_in: 6,
        pick: |w, rng| rng.gen_range(0..BLOCKS / 4) * 4 + w,
    }
    .spawn(&v, &ledger, &stop);
    // Cut only after two checkpoints (3/4 of the journal each, so it has wrapped), then
    // a random moment later: coverage does not depend on how fast this machine is.
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while v.journal_stats().checkpoints < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: no two checkpoints within 60 s ({:?})",
            v.journal_stats()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(Duration::from_micros(rng.gen_range(0..10_000)));
    let stats = v.journal_stats();
    let after = dev.power_cut(seed);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let (acked, attempted) = ledger.bounds();
    // Read-only first (replay into an overlay, nothing written), then writable (replay
    // home): both must show every acknowledged write.
    for read_only in [true, false] {
        let v2 = Volume::open_backend(
            Box::new(after.clone()),
            &OpenOptions {
                read_only,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        for block in 0..BLOCKS {
            let mut b = vec![0u8; BLOCK];
            v2.read_at(block * BLOCK as u64, &mut b).unwrap();
            if let Err(e) =
                check_restarted_block(block, &b, acked[block as usize], attempted[block as usize])
            {
                panic!("{durability} seed {seed} (read-only open: {read_only}): {e}");
            }
        }
    }
    assert!(stats.checkpoints >= 2, "{stats:?}");
}

#[test]
fn power_cuts_while_the_journal_wraps_and_checkpoints_immediate() {
    for seed in 1..=30 {
        wrap_round(Durability::Immediate, seed);
    }
}

#[test]
fn power_cuts_while_the_journal_wraps_and_checkpoints_on_flush() {
    for seed in 1..=30 {
        wrap_round(Durability::OnFlush, seed);
    }
}

/// A crash leaves the newest writes only in the journal: a read-only open shows them
/// without writing anything, a writable open replays them home.
#[test]
fn replay_after_a_crash_read_only_then_writable() {
    let size = 4 * MIB;
    let (dev, _) = journaled(size, 64 << 10, Durability::Immediate);
    let v = open(&dev);
    v.wait_loaded(None).unwrap();
    v.write_at(5000, b"journaled").unwrap();
    v.write_at(3 * MIB - 3, b"across a chunk").unwrap();
    // No checkpoint ran (the idle one waits a second): home still holds zeros.
    let data_offset = v.header().data_offset() as usize;
    assert_eq!(v.journal_stats().checkpoints, 0);
    assert!(dev.live_image()[data_offset + 5000..data_offset + 5009]
        .iter()
        .all(|&b| b == 0));
    let after = dev.power_cut(1);
    drop(v);

    let ro = Volume::open_backend(
        Box::new(after.clone()),
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert!(ro.journal_stats().replayed_batches >= 2);
    let mut b = [0u8; 9];
    ro.read_at(5000, &mut b).unwrap(); // served from the backend + overlay, or RAM
    assert_eq!(&b, b"journaled");
    ro.wait_loaded(None).unwrap();
    let mut c = [0u8; 14];
    ro.read_at(3 * MIB - 3, &mut c).unwrap(); // from RAM, loaded with the overlay
    assert_eq!(&c, b"across a chunk");
    drop(ro);
    assert!(
        after.live_image()[data_offset + 5000..data_offset + 5009]
            .iter()
            .all(|&b| b == 0),
        "a read-only open wrote to the device"
    );

    let rw = Volume::open_backend(Box::new(after.clone()), &OpenOptions::default()).unwrap();
    assert_eq!(
        &after.live_image()[data_offset + 5000..data_offset + 5009],
        b"journaled",
        "a writable open replays home before serving"
    );
    rw.close().unwrap();
    // A clean close leaves nothing to replay.
    let again = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    assert_eq!(again.journal_stats().replayed_batches, 0);
    let mut b = [0u8; 9];
    again.read_at(5000, &mut b).unwrap();
    assert_eq!(&b, b"journaled");
}

/// A device may keep a later batch and lose an earlier one when power fails before a
/// sync. Recovery stops at the lost one; the next incarnation then writes its own
/// batches at the same positions with the same sequence numbers. After another crash,
/// the stale survivor of the first incarnation must not be replayed over what the
/// second one acknowledged (the incarnation nonce in every batch guards this).
#[test]
fn stale_batches_of_an_earlier_incarnation_are_never_replayed() {
    let size = MIB;
    let (dev, _) = journaled(size, 64 << 10, Durability::OnFlush);
    let v = open(&dev);
    v.wait_loaded(None).unwrap();
    // Incarnation 1, one batch each, 8 KiB apiece (descriptor + one sector), starting
    // at log position 0: X (durable) at 0, Y at 8 KiB, Z at 16 KiB (Z to offset 4096).
    v.write_at_with(0, &[b'X'; 4096], Durability::Immediate)
        .unwrap();
    v.write_at(65536, &[b'Y'; 4096]).unwrap();
    v.write_at(4096, &[b'Z'; 4096]).unwrap();
    assert_eq!(v.journal_stats().batches, 3);
    let mut image = dev.live_image();
    drop(dev.power_cut(1));
    std::mem::forget(v); // a crash: no close, no checkpoint
                         // The device lost Y's batch but kept Z's.
    let y = (hscm_volume::JOURNAL_OFFSET + 8192) as usize;
    image[y..y + 4096].fill(0);
    let dev2 = FaultyBackend::new(image.len(), "stale-dev");
    hscm_volume::Backend::write_at(&dev2, 0, &image).unwrap();
    hscm_volume::Backend::sync(&dev2).unwrap();

    // Incarnation 2 replays X only, then acknowledges V at offset 4096: its batch
    // lands where Y was, with Y's number, so the chain continues exactly where the
    // stale Z batch lies.
    let v2 = open(&dev2);
    assert_eq!(v2.journal_stats().replayed_batches, 1);
    v2.wait_loaded(None).unwrap();
    v2.write_at_with(4096, &[b'V'; 4096], Durability::Immediate)
        .unwrap();
    let dev3 = dev2.power_cut(2);
    std::mem::forget(v2);

    let v3 = Volume::open_backend(Box::new(dev3), &OpenOptions::default()).unwrap();
    let mut b = [0u8; 1];
    v3.read_at(4096, &mut b).unwrap();
    assert_eq!(b[0], b'V', "a stale batch overwrote an acknowledged write");
    v3.read_at(0, &mut b).unwrap();
    assert_eq!(b[0], b'X');
}

/// A failed checkpoint (the device refuses the home writes) turns the volume read-only;
/// what was acknowledged is still recovered from the journal.
#[test]
fn a_failed_checkpoint_turns_the_volume_read_only_and_loses_nothing() {
    let size = MIB;
    let (dev, _) = journaled(size, 64 << 10, Durability::Immediate);
    let v = open(&dev);
    v.wait_loaded(None).unwrap();
    for i in 0..8u64 {
        v.write_at(i * 8192, &stamped_block(i, 1, 4096)).unwrap();
    }
    dev.fail_write_after(0, rustix::io::Errno::IO.raw_os_error());
    let err = v.checkpoint().unwrap_err();
    assert!(err.to_string().contains("checkpoint"), "{err}");
    let err = v.write_at(0, b"no").unwrap_err();
    assert!(matches!(err, Error::Failed { errno: Some(5), .. }), "{err}");
    let after = dev.power_cut(4);
    let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    for i in 0..8u64 {
        let mut b = vec![0u8; 4096];
        v2.read_at(i * 8192, &mut b).unwrap();
        check_restarted_block(i, &b, 1, 1).unwrap();
    }
}

/// Writes that span loaded and unloaded chunks split between the journal (loaded) and
/// home (unloaded, paper case 3); both halves survive a power cut once acknowledged.
#[test]
fn writes_spanning_loaded_and_unloaded_chunks() {
    let size = 16 * MIB; // twice what one load step takes (8 MiB)
    let (dev, _) = journaled(size, MIB as u32, Durability::Immediate);
    let v = Volume::open_backend(
        Box::new(dev.clone()),
        &OpenOptions {
            background_load: false,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    v.load_step().unwrap(); // loads the first batch of chunks only
    let loaded = v.load_progress().loaded_chunks as u64;
    assert!(loaded > 0 && loaded < 16, "{loaded} chunks loaded");
    let boundary = loaded * MIB;
    let data: Vec<u8> = (0..3 * 4096).map(|i| (i % 253) as u8).collect();
    v.write_at(boundary - 4096, &data).unwrap();
    let after = dev.power_cut(5);
    let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    let mut back = vec![0u8; data.len()];
    v2.read_at(boundary - 4096, &mut back).unwrap();
    assert_eq!(back, data);
}

/// A journal append the device refuses (a full disk) fails that write with the reason,
/// turns the volume read-only, and loses nothing acknowledged before it.
#[test]
fn a_refused_journal_write_fails_clearly_and_loses_nothing() {
    let (dev, _) = journaled(MIB, 64 << 10, Durability::Immediate);
    let v = open(&dev);
    v.wait_loaded(None).unwrap();
    v.write_at(0, &stamped_block(0, 1, 4096)).unwrap();
    dev.fail_write_after(0, rustix::io::Errno::NOSPC.raw_os_error());
    let err = v.write_at(8192, &stamped_block(2, 1, 4096)).unwrap_err();
    assert!(
        err.to_string().contains("journal write") && err.to_string().contains("No space"),
        "{err}"
    );
    assert!(matches!(
        v.write_at(0, b"x").unwrap_err(),
        Error::Failed {
            errno: Some(28),
            ..
        }
    ));
    let v2 = Volume::open_backend(Box::new(dev.power_cut(6)), &OpenOptions::default()).unwrap();
    let mut b = vec![0u8; 4096];
    v2.read_at(0, &mut b).unwrap();
    check_restarted_block(0, &b, 1, 1).unwrap();
}

/// Both checkpoint records damaged: the error says so (not "invalid geometry"), for
/// inspection and for a writable open alike, and nothing is written.
#[test]
fn damaged_checkpoint_slots_are_named_as_such() {
    use hscm_volume::Backend;
    let (dev, _) = journaled(MIB, 64 << 10, Durability::Immediate);
    let junk = hscm_volume::AlignedBuf::zeroed(4096);
    for slot in [4096, 8192] {
        dev.write_at(slot, &junk).unwrap();
    }
    let err = Volume::open_backend(Box::new(dev.clone()), &OpenOptions::default())
        .err()
        .expect("an open without a checkpoint");
    assert!(matches!(err, Error::CorruptCheckpoint { .. }), "{err}");
    assert!(
        err.to_string().contains("checkpoint area is corrupt"),
        "{err}"
    );
}

/// A background thread that dies (a panic in the checkpoint thread, injected in its
/// sync) poisons the volume: writers get an error naming it instead of waiting forever
/// for journal space that no checkpoint will free.
#[test]
fn a_panicking_checkpoint_thread_poisons_the_volume() {
    let (dev, _) = journaled(MIB, 64 << 10, Durability::OnFlush);
    let v = open(&dev);
    // Writes to chunks not loaded yet go home directly: warm up, so they are journaled.
    v.wait_loaded(None).unwrap();
    dev.panic_on_next_sync();
    // On-flush writes never sync: only the checkpoint thread does, once the journal
    // fills. Far more than one journal's worth, so without the poison this would hang.
    // In a thread, so that a writer left waiting fails the test instead of hanging it.
    let v = Arc::new(v);
    let writer = Arc::clone(&v);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let block = vec![7u8; 4096];
        let mut refused = None;
        for i in 0..(8 * MIN_JOURNAL / 4096) {
            if let Err(e) = writer.write_at((i % 200) * 4096, &block) {
                refused = Some(e);
                break;
            }
        }
        let _ = tx.send(refused);
    });
    let refused = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a writer is still waiting a minute after the checkpoint thread died");
    let err = refused.expect("writes went on after the checkpoint thread died");
    assert!(
        matches!(&err, Error::Failed { reason, .. } if reason.contains("checkpoint thread panicked")),
        "{err}"
    );
    assert!(v.failure().unwrap().contains("injected panic"));
    // Reads still work.
    let mut b = [0u8; 16];
    v.read_at(0, &mut b).unwrap();
}
