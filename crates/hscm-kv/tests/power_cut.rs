//! Power cuts under concurrent writers, over the crash model every engine shares
//! (`hscm_durable::testing::FaultyDisks`: unsynced writes kept, dropped or torn at 512
//! bytes; a created or removed name durable only after a directory sync). Every round:
//! two writers put and delete their own keys (checking reads of them as they go)
//! while buffer logs fill and sync home; the power goes at a random moment; the store
//! reopens on what the devices kept. Every acknowledged write must be there, and every
//! key must hold a value that some write gave it. Every tenth round closes cleanly
//! before the cut instead, which must lose nothing at all. In every mode.
//!
//! `HSCM_KV_POWER_CUT_ROUNDS` sets the rounds per mode (default 1,000).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hscm_durable::testing::FaultyDisks;
use hscm_kv::{KvOptions, KvStore, Mode, Primaries};
use rand::{Rng, SeedableRng};

const DEVICES: usize = 4;
const WRITERS: u32 = 2;
const KEYS_PER_WRITER: u32 = 24;
/// A fresh machine every this many rounds, so logs (replayed at each open) stay short.
const CHAIN: usize = 40;

fn options(mode: Mode) -> KvOptions {
    KvOptions {
        mode,
        // Small buffers and runs: several log syncs (and sealed segments) per round.
        buffer_bytes: 2 << 10,
        sync_piece: 700,
        cache_bytes: 4 << 10,
        primaries: Primaries::Fixed(1),
        ..KvOptions::default()
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

/// A value naming its key and version, padded to a length that varies with both.
fn value(k: u32, version: u64) -> Vec<u8> {
    let mut v = format!("{k}:{version}:").into_bytes();
    let pad = ((k as u64 * 7 + version * 13) % 90) as usize;
    v.resize(v.len() + pad, b'a' + (version % 26) as u8);
    v
}

fn text(v: &Option<Vec<u8>>) -> Option<String> {
    v.as_deref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// What a key may hold after a restart: its last acknowledged state, or any state a
/// write attempted after it (`None`: deleted or never written).
#[derive(Clone, Default)]
struct KeyModel {
    acknowledged: Option<Vec<u8>>,
    attempted: Vec<Option<Vec<u8>>>,
}

impl KeyModel {
    fn allows(&self, found: &Option<Vec<u8>>) -> bool {
        self.acknowledged == *found || self.attempted.contains(found)
    }
}

/// One writer's work until told to stop or a write fails (as writes must once the
/// devices are gone): true if one failed.
fn writer(
    store: &KvStore,
    models: &mut [KeyModel],
    first_key: u32,
    seed: u64,
    ops_done: &AtomicU64,
    stop: &AtomicBool,
) -> Result<bool, String> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut version = seed << 20;
    while !stop.load(Ordering::Relaxed) {
        let slot = rng.gen_range(0..models.len());
        let k = first_key + slot as u32;
        let model = &mut models[slot];
        if rng.gen_bool(0.25) {
            // A read of our own key sees exactly our last acknowledged write (nothing
            // of ours is in flight).
            match store.get(&key(k)) {
                Ok(found) if model.attempted.is_empty() && found != model.acknowledged => {
                    return Err(format!(
                        "key {k}: read {:?}, last written {:?}",
                        text(&found),
                        text(&model.acknowledged)
                    ));
                }
                Ok(_) => {}
                // Reads of values on a device that lost power fail: fine.
                Err(_) => {}
            }
            continue;
        }
        version += 1;
        let new = if rng.gen_bool(0.15) {
            None
        } else {
            Some(value(k, version))
        };
        model.attempted.push(new.clone());
        let result = match &new {
            Some(v) => store.put(&key(k), v),
            None => store.delete(&key(k)),
        };
        ops_done.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(()) => {
                model.acknowledged = new;
                model.attempted.clear();
            }
            // The power is gone (or the store refuses writes since it went).
            Err(_) => return Ok(true),
        }
    }
    Ok(false)
}

fn round(mode: Mode, disks: FaultyDisks, models: &mut [KeyModel], seed: u64) -> FaultyDisks {
    let context = format!("{} round seed {seed}", mode.name());
    let store = KvStore::open_on(disks.media(), options(mode))
        .unwrap_or_else(|e| panic!("{context}: reopening: {e}"));
    // Every key holds what the model allows (restarted from the previous round).
    for (k, model) in models.iter_mut().enumerate() {
        let found = store
            .get(&key(k as u32))
            .unwrap_or_else(|e| panic!("{context}: get: {e}"));
        assert!(
            model.allows(&found),
            "{context}: key {k} holds {:?} after the restart; acknowledged {:?}, attempted since {:?}",
            text(&found),
            text(&model.acknowledged),
            model.attempted.len()
        );
        *model = KeyModel {
            acknowledged: found,
            attempted: Vec::new(),
        };
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let clean = rng.gen_range(0..10) == 0;
    let cut_after = rng.gen_range(0..120u64);
    let ops_done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let survivor = std::thread::scope(|scope| {
        let store = &store;
        let (ops_done, stop) = (&ops_done, &stop);
        let handles: Vec<_> = models
            .chunks_mut(KEYS_PER_WRITER as usize)
            .enumerate()
            .map(|(w, keys)| {
                let first = w as u32 * KEYS_PER_WRITER;
                let seed = seed.wrapping_mul(31).wrapping_add(w as u64);
                scope.spawn(move || writer(store, keys, first, seed, ops_done, stop))
            })
            .collect();
        while ops_done.load(Ordering::Relaxed) < cut_after
            && !handles.iter().all(|h| h.is_finished())
        {
            std::thread::yield_now();
        }
        if clean {
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                let failed = h
                    .join()
                    .unwrap()
                    .unwrap_or_else(|e| panic!("{context}: {e}"));
                assert!(!failed, "{context}: a write failed with the power on");
            }
            None
        } else {
            let survivor = disks.power_cut(seed);
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                h.join()
                    .unwrap()
                    .unwrap_or_else(|e| panic!("{context}: {e}"));
            }
            Some(survivor)
        }
    });
    match survivor {
        Some(survivor) => {
            drop(store);
            survivor
        }
        None => {
            store
                .close()
                .unwrap_or_else(|e| panic!("{context}: clean close: {e}"));
            // A clean close made everything durable: nothing may be lost or undone.
            for m in models.iter_mut() {
                m.attempted.clear();
            }
            disks.power_cut(seed)
        }
    }
}

fn run_mode(mode: Mode) {
    let rounds: usize = std::env::var("HSCM_KV_POWER_CUT_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let mut disks = FaultyDisks::new(DEVICES);
    let mut models = vec![KeyModel::default(); (WRITERS * KEYS_PER_WRITER) as usize];
    for r in 0..rounds {
        if r % CHAIN == 0 {
            disks = FaultyDisks::new(DEVICES);
            KvStore::create_on(&disks.media()).unwrap();
            models.iter_mut().for_each(|m| *m = KeyModel::default());
        }
        disks = round(mode, disks, &mut models, 0x6b76_0000 + r as u64);
    }
    // The last round's cut is checked too.
    let store = KvStore::open_on(disks.media(), options(mode)).unwrap();
    for (k, model) in models.iter().enumerate() {
        let found = store.get(&key(k as u32)).unwrap();
        assert!(
            model.allows(&found),
            "{}: key {k} after the last cut",
            mode.name()
        );
    }
}

#[test]
fn standard_mode_loses_no_acknowledged_write_to_a_power_cut() {
    run_mode(Mode::Standard);
}

#[test]
fn sprint_loses_no_acknowledged_write_to_a_power_cut() {
    run_mode(Mode::Sprint);
}

#[test]
fn sprint_without_prefetch_loses_no_acknowledged_write_to_a_power_cut() {
    run_mode(Mode::SprintNoPrefetch);
}

#[test]
fn sprint_without_parallel_sync_loses_no_acknowledged_write_to_a_power_cut() {
    run_mode(Mode::SprintNoParallel);
}
