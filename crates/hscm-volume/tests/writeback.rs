//! Write-back sessions: writes land in RAM and are acknowledged without the device,
//! the dirty amount stays bounded, reads and writes go on while a pass syncs, and a
//! flush writes dirty sectors home in sorted runs with one sync. (Power cuts:
//! `tests/power_cut.rs`; every request mix: the `volume_ops` fuzz layouts.)

use std::sync::Arc;
use std::time::Duration;

use hscm_volume::testing::FaultyBackend;
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};

const SIZE: u64 = 4 << 20;

fn write_back_volume(dirty_max: u64) -> (FaultyBackend, Volume) {
    let opts = CreateOptions {
        chunk_size: 256 << 10,
        durability: Durability::WriteBack,
        ..CreateOptions::default()
    };
    let dev = FaultyBackend::new(opts.backing_len(SIZE) as usize, "wb-dev");
    Volume::format(&dev, SIZE, &opts).unwrap();
    let v = Volume::open_backend(
        Box::new(dev.clone()),
        &OpenOptions {
            dirty_max: Some(dirty_max),
            ..OpenOptions::default()
        },
    )
    .unwrap();
    v.wait_loaded(None).unwrap();
    (dev, v)
}

#[test]
fn writes_to_loaded_chunks_reach_ram_not_the_device() {
    let (dev, v) = write_back_volume(1 << 20);
    let (writes, syncs) = (dev.write_count(), dev.sync_count());
    for i in 0..16u64 {
        v.write_at(i * 65536 + 100, &[i as u8 + 1; 3000]).unwrap();
    }
    assert_eq!(
        dev.write_count(),
        writes,
        "a write-back write went to the device"
    );
    assert_eq!(dev.sync_count(), syncs);
    let stats = v.writeback_stats().unwrap();
    // 16 writes of 3000 bytes at offset 100 of a 64 KiB stride: one sector each.
    assert_eq!(stats.dirty_bytes, 16 * 4096);
    let mut back = [0u8; 3000];
    v.read_at(5 * 65536 + 100, &mut back).unwrap();
    assert_eq!(back, [6u8; 3000]);
    v.flush().unwrap();
    let stats = v.writeback_stats().unwrap();
    assert_eq!(stats.dirty_bytes, 0);
    assert_eq!(stats.passes, 1);
    assert_eq!(stats.written_bytes, 16 * 4096);
    assert_eq!(dev.sync_count(), syncs + 1, "one pass, one sync");
    // Sectors 16 apart are too far to merge: one run each, and no clean sector written.
    assert_eq!(stats.home_runs, 16);
    let image = dev.power_cut(7).live_image();
    let data_offset = v.header().data_offset() as usize;
    assert_eq!(
        &image[data_offset + 5 * 65536 + 100..][..3000],
        &[6u8; 3000]
    );
}

#[test]
fn the_dirty_amount_never_exceeds_its_bound() {
    let bound = 64 << 10;
    let (_, v) = write_back_volume(bound);
    for i in 0..400u64 {
        let at = (i * 7919 * 4096) % (SIZE - 8192);
        v.write_at(at, &[i as u8; 5000]).unwrap();
        let dirty = v.writeback_stats().unwrap().dirty_bytes;
        assert!(
            dirty <= bound,
            "{dirty} dirty bytes over the {bound}-byte bound"
        );
    }
    let stats = v.writeback_stats().unwrap();
    assert!(stats.writer_waits > 0, "no writer ever waited: {stats:?}");
    assert!(stats.passes > 0);
    v.close().unwrap();
}

/// While a flush's pass waits for a slow sync, reads and writes complete: the pass holds
/// no lock a request needs once its copy is taken.
#[test]
fn requests_go_on_while_a_pass_syncs() {
    let (dev, v) = write_back_volume(8 << 20);
    let v = Arc::new(v);
    v.write_at(0, &[1u8; 65536]).unwrap();
    dev.set_sync_latency(Duration::from_millis(800));
    let flusher = {
        let v = v.clone();
        std::thread::spawn(move || v.flush())
    };
    // Until the pass has copied the dirty sectors out, there is nothing to show.
    while v.writeback_stats().unwrap().dirty_bytes > 0 {
        std::thread::yield_now();
    }
    let mut back = [0u8; 4096];
    v.read_at(0, &mut back).unwrap();
    v.write_at(1 << 20, &[2u8; 4096]).unwrap();
    assert!(
        !flusher.is_finished(),
        "the request waited for the pass's 800 ms sync"
    );
    assert_eq!(back, [1u8; 4096]);
    flusher.join().unwrap().unwrap();
    dev.set_sync_latency(Duration::ZERO);
}

#[test]
fn a_fua_write_makes_everything_before_it_durable() {
    let (dev, v) = write_back_volume(8 << 20);
    v.write_at(0, &[3u8; 8192]).unwrap();
    hscm_block::BlockTarget::write_at(&v, 1 << 20, &[4u8; 4096], hscm_block::WriteFlags::FUA)
        .unwrap();
    let after = dev.power_cut(3);
    drop(v);
    let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    let mut a = [0u8; 8192];
    v2.read_at(0, &mut a).unwrap();
    assert_eq!(a, [3u8; 8192], "a write before the FUA write was lost");
    let mut b = [0u8; 4096];
    v2.read_at(1 << 20, &mut b).unwrap();
    assert_eq!(b, [4u8; 4096]);
}

/// A write larger than the bound goes ahead once nothing is dirty, and a write that
/// does not fit beside what is dirty waits for a pass even when little is dirty.
#[test]
fn writes_larger_than_the_bound_or_than_the_room_left_do_not_stall() {
    let (_, v) = write_back_volume(16 << 10);
    v.write_at(0, &[9u8; 1 << 20]).unwrap();
    let s = v.writeback_stats().unwrap();
    // Dirty, or already taken home by the background pass it set off.
    assert_eq!(s.dirty_bytes + s.written_bytes, 1 << 20, "{s:?}");
    v.write_at(2 << 20, &[8u8; 4096]).unwrap();
    // 4 KiB dirty, then 14 KiB more does not fit under 16 KiB: the flusher runs for it
    // although less than half the bound is dirty.
    let (_, v) = write_back_volume(16 << 10);
    v.write_at(0, &[1u8; 4096]).unwrap();
    // 14 KiB at 1 MiB covers 16 KiB of sectors.
    v.write_at(1 << 20, &[2u8; 14 << 10]).unwrap();
    v.flush().unwrap();
    let s = v.writeback_stats().unwrap();
    assert!(s.writer_waits > 0, "{s:?}");
    assert_eq!(s.written_bytes, (4 + 16) << 10, "{s:?}");
}
