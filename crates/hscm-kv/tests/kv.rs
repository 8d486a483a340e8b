//! The key-value store against a BTreeMap model, in every mode, across syncs, cache
//! evictions, prefetches, reopen after a clean close and after a drop without one.

use std::collections::BTreeMap;
use std::path::Path;

use hscm_kv::Error;
use hscm_kv::{KvOptions, KvStore, Mode, Primaries};
use rand::{Rng, SeedableRng};

fn small(mode: Mode) -> KvOptions {
    KvOptions {
        mode,
        buffer_bytes: 16 << 10,
        cache_bytes: 24 << 10,
        // Several synced runs per log sync, so the model checks cover the split.
        sync_piece: 3 << 10,
        primaries: Primaries::Fixed(1),
        ..KvOptions::default()
    }
}

fn value(key: u32, version: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{key}:{version}:").into_bytes();
    v.resize(len.max(v.len()), (key ^ version) as u8);
    v
}

fn verify(store: &KvStore, model: &BTreeMap<u32, Option<Vec<u8>>>) {
    for (k, want) in model {
        let got = store.get(format!("key{k}").as_bytes()).unwrap();
        assert_eq!(got.as_ref(), want.as_ref(), "key{k}");
    }
}

fn exercise(mode: Mode, dir: &Path, seed: u64) {
    KvStore::create(dir, 4, None).unwrap();
    let mut model: BTreeMap<u32, Option<Vec<u8>>> = BTreeMap::new();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for round in 0..3 {
        let store = KvStore::open(dir, small(mode)).unwrap();
        verify(&store, &model);
        for i in 0..1500u32 {
            let k = if rng.gen_bool(0.7) {
                rng.gen_range(0..40)
            } else {
                rng.gen_range(0..400)
            };
            let key = format!("key{k}");
            match rng.gen_range(0..10) {
                0 => {
                    store.delete(key.as_bytes()).unwrap();
                    model.insert(k, None);
                }
                1..=4 => {
                    let v = value(k, i + round * 10_000, rng.gen_range(1..900));
                    store.put(key.as_bytes(), &v).unwrap();
                    model.insert(k, Some(v));
                }
                _ => {
                    let got = store.get(key.as_bytes()).unwrap();
                    assert_eq!(
                        got,
                        model.get(&k).cloned().flatten(),
                        "{mode:?} round {round} op {i} key{k}"
                    );
                }
            }
        }
        let stats = store.stats();
        if mode != Mode::Standard {
            assert!(
                stats.log_syncs > 0,
                "{mode:?}: buffers never synced: {stats:?}"
            );
            assert!(stats.cache_hits > 0, "{mode:?}: cache never hit: {stats:?}");
            assert_eq!(stats.primaries, vec![0]);
        } else {
            assert_eq!(stats.idle_device_reads, 0);
        }
        verify(&store, &model);
        if round == 1 {
            drop(store); // no close: buffer logs stay behind and must be replayed
        } else {
            store.close().unwrap();
        }
    }
    let store = KvStore::open(dir, small(Mode::Standard)).unwrap();
    verify(&store, &model);
}

#[test]
fn standard_matches_the_model() {
    exercise(Mode::Standard, tempfile::tempdir().unwrap().path(), 1);
}

#[test]
fn sprint_matches_the_model() {
    exercise(Mode::Sprint, tempfile::tempdir().unwrap().path(), 2);
}

#[test]
fn sprint_without_prefetch_matches_the_model() {
    exercise(
        Mode::SprintNoPrefetch,
        tempfile::tempdir().unwrap().path(),
        3,
    );
}

#[test]
fn sprint_without_parallelism_matches_the_model() {
    exercise(
        Mode::SprintNoParallel,
        tempfile::tempdir().unwrap().path(),
        4,
    );
}

#[test]
fn a_drop_without_close_leaves_buffer_logs_that_reopen_replays() {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 4, None).unwrap();
    let store = KvStore::open(
        dir.path(),
        KvOptions {
            mode: Mode::Sprint,
            primaries: Primaries::Fixed(1),
            ..KvOptions::default()
        },
    )
    .unwrap();
    for i in 0..200 {
        store
            .put(format!("k{i}").as_bytes(), &value(i, 1, 100))
            .unwrap();
    }
    assert_eq!(
        store.stats().log_syncs,
        0,
        "a 4 MiB buffer should not have filled"
    );
    drop(store);
    let store = KvStore::open(dir.path(), KvOptions::default()).unwrap();
    let stats = store.stats();
    assert!(stats.replayed_records > 100, "{stats:?}");
    for i in 0..200 {
        assert_eq!(
            store.get(format!("k{i}").as_bytes()).unwrap(),
            Some(value(i, 1, 100))
        );
    }
}

#[test]
fn prefetch_fetches_the_hottest_keys_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 4, None).unwrap();
    let keys: Vec<String> = (0..600).map(|i| format!("p{i}")).collect();
    let v = vec![7u8; 500];
    // History: a standard session where the first 40 keys are hot.
    let store = KvStore::open(dir.path(), KvOptions::default()).unwrap();
    store
        .load(keys.iter().map(|k| (k.as_bytes(), &v[..])))
        .unwrap();
    for _ in 0..8 {
        for k in &keys[..40] {
            store.get(k.as_bytes()).unwrap().unwrap();
        }
    }
    store.close().unwrap();
    let idle_reads = |mode: Mode| {
        let store = KvStore::open(
            dir.path(),
            KvOptions {
                cache_bytes: 400 << 10,
                ..small(mode)
            },
        )
        .unwrap();
        for k in &keys[..40] {
            store.get(k.as_bytes()).unwrap().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let stats = store.stats();
        drop(store); // keep the saved history as it is for the next mode
        stats
    };
    let without = idle_reads(Mode::SprintNoPrefetch);
    let with = idle_reads(Mode::Sprint);
    assert_eq!(without.prefetches, 0);
    assert!(
        with.prefetches > 0 && with.prefetched_values > 0,
        "{with:?}"
    );
    assert!(
        with.idle_device_reads * 3 < without.idle_device_reads,
        "prefetching should save most idle-device reads: {} vs {}",
        with.idle_device_reads,
        without.idle_device_reads
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 2, None).unwrap();
    let store = KvStore::open(
        dir.path(),
        KvOptions {
            max_value: 1000,
            ..KvOptions::default()
        },
    )
    .unwrap();
    assert!(matches!(
        store.put(b"", b"x"),
        Err(Error::BadKey { len: 0, .. })
    ));
    assert!(matches!(
        store.get(&[b'k'; 5000]),
        Err(Error::BadKey { len: 5000, .. })
    ));
    let err = store.put(b"k", &[0; 1001]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ValueTooLarge {
                len: 1001,
                max: 1000
            }
        ),
        "{err}"
    );
    store.put(b"k", b"kept").unwrap();
    store.put(b"k2", b"also kept").unwrap();
    store.close().unwrap();
    assert!(KvStore::create(dir.path(), 2, None)
        .unwrap_err()
        .to_string()
        .contains("already holds"));

    // A bit flip in the middle of a device log, valid records behind it: `check`
    // names file and offset; an open keeps what precedes it (point-in-time recovery:
    // a power cut can leave exactly this when the device wrote a later unsynced write
    // and lost an earlier one) and cuts the rest.
    let dev = (0..2)
        .map(|i| dir.path().join(format!("dev{i}/data.log")))
        .find(|p| std::fs::metadata(p).unwrap().len() > 0)
        .unwrap();
    let mut bytes = std::fs::read(&dev).unwrap();
    let clean = bytes.clone();
    bytes.extend_from_slice(&clean); // two copies, so damage in the first is followed by valid records
    bytes[26] ^= 1; // inside the first record's value
    std::fs::write(&dev, &bytes).unwrap();
    let report = hscm_kv::check(dir.path()).unwrap();
    assert!(
        report.errors.iter().any(|e| e.contains("data.log")
            && e.contains("corrupt record at byte 0")
            && e.contains(&format!("valid records follow from byte {}", clean.len()))),
        "{:?}",
        report.errors
    );
    let store = KvStore::open(dir.path(), KvOptions::default()).unwrap();
    assert_eq!(store.stats().torn_bytes_at_open, bytes.len() as u64);
    store.close().unwrap();
    assert_eq!(
        std::fs::metadata(&dev).unwrap().len(),
        0,
        "the cut is durable"
    );

    // A torn tail is cut and everything before it kept.
    let mut torn = clean.clone();
    torn.extend_from_slice(&clean[..clean.len() / 2]);
    std::fs::write(&dev, &torn).unwrap();
    let store = KvStore::open(dir.path(), KvOptions::default()).unwrap();
    assert!(store.stats().torn_bytes_at_open > 0);
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"kept"[..]));
    assert_eq!(
        store.get(b"k2").unwrap().as_deref(),
        Some(&b"also kept"[..])
    );
    store.close().unwrap();

    // A missing device directory.
    std::fs::remove_dir_all(dir.path().join("dev1")).unwrap();
    let err = KvStore::open(dir.path(), KvOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("dev1") && err.contains("device missing"),
        "{err}"
    );
}

#[test]
fn concurrent_writers_in_sprint_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 4, None).unwrap();
    let store = KvStore::open(dir.path(), small(Mode::Sprint)).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let store = &store;
            s.spawn(move || {
                for i in 0..300u32 {
                    let k = format!("t{t}-{}", i % 50);
                    store
                        .put(k.as_bytes(), &value(t * 1000 + i % 50, i, 300))
                        .unwrap();
                    let got = store.get(k.as_bytes()).unwrap().unwrap();
                    assert_eq!(
                        got,
                        value(t * 1000 + i % 50, i, 300),
                        "read after own write"
                    );
                }
            });
        }
    });
    store.close().unwrap();
    let store = KvStore::open(dir.path(), KvOptions::default()).unwrap();
    for t in 0..4u32 {
        for j in 0..50u32 {
            let last = (0..300).filter(|i| i % 50 == j).max().unwrap();
            let got = store.get(format!("t{t}-{j}").as_bytes()).unwrap().unwrap();
            assert_eq!(got, value(t * 1000 + j, last, 300));
        }
    }
}

#[test]
fn a_failed_sync_turns_the_store_read_only() {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 4, None).unwrap();
    let store = KvStore::open(dir.path(), small(Mode::Sprint)).unwrap();
    store.put(b"before", b"kept").unwrap();
    // The primary's directory vanishes: the next log sync cannot start a new segment.
    std::fs::remove_dir_all(dir.path().join("dev0")).unwrap();
    let mut refused = None;
    for i in 0..2000u32 {
        match store.put(format!("k{i}").as_bytes(), &[1; 500]) {
            Ok(()) => std::thread::sleep(std::time::Duration::from_micros(200)),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let err = refused.expect("writes went on after a failed sync");
    assert!(
        matches!(err, Error::Failed { .. }) || err.to_string().contains("dev0"),
        "{err}"
    );
    // Once refused, always refused, with the first failure as the reason.
    let again = store.put(b"after", b"x").unwrap_err();
    assert!(matches!(again, Error::Failed { .. }), "{again}");
    let again = again.to_string();
    assert!(
        again.contains("refused") && again.contains("dev0"),
        "{again}"
    );
    assert!(store.delete(b"before").is_err());
}

/// One owner per store: a second open while the first is alive is refused, naming
/// the manifest and this process; dropping the first releases it.
#[test]
fn a_store_has_one_owner() {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 2, None).unwrap();
    let first = KvStore::open(dir.path(), small(Mode::Standard)).unwrap();
    let err = KvStore::open(dir.path(), small(Mode::Standard))
        .err()
        .expect("a second owner");
    let msg = err.to_string();
    assert!(matches!(err, Error::Locked { .. }), "{msg}");
    assert!(msg.contains("store.json"), "{msg}");
    assert!(
        msg.contains(&format!("process {}", std::process::id())),
        "{msg}"
    );
    drop(first);
    KvStore::open(dir.path(), small(Mode::Standard)).unwrap();
}
