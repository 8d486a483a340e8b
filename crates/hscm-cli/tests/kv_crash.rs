//! kill -9 against a key-value writer in every mode, several rounds on one store:
//! after every kill the reopened store holds every acknowledged put and delete.

use crate::util;
use std::collections::HashMap;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use hscm_kv::{KvOptions, KvStore};
use rand::{Rng, SeedableRng};

/// What a key may hold: `Some(version)` for a put, `None` for deleted / never written.
type State = Option<u64>;

fn value(key: u64, version: u64) -> Vec<u8> {
    // Mirrors `hscm debug kv-writer` (crates/hscm-cli/src/crash.rs).
    let mut v = format!("{key}/{version}/").into_bytes();
    let len = 64 + (key * 37 + version) as usize % 900;
    while v.len() < len {
        v.push((version as u8).wrapping_add(v.len() as u8));
    }
    v
}

fn rounds(mode: &str, rounds: u64) {
    let dir = tempfile::tempdir().unwrap();
    KvStore::create(dir.path(), 4, None).unwrap();
    let mut acked: HashMap<u64, State> = HashMap::new();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(rounds + mode.len() as u64);
    let (mut total_acks, mut replayed) = (0, 0);
    for round in 1..=rounds {
        let mut child = util::hscm()
            .args(["debug", "kv-writer"])
            .arg(dir.path())
            .args(["--seed", &round.to_string(), "--mode", mode])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn hscm");
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        });
        let kill_after = Duration::from_millis(rng.gen_range(100..400));
        let t0 = Instant::now();
        while t0.elapsed() < kill_after {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("writer exited early with {status}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Per key: the op in flight when killed, if any.
        let mut pending: HashMap<u64, State> = HashMap::new();
        for l in reader.join().unwrap() {
            let mut it = l.split_whitespace();
            let (op, key, version) = (
                it.next().unwrap(),
                it.next().unwrap().parse::<u64>().unwrap(),
                it.next().unwrap().parse::<u64>().unwrap(),
            );
            match op {
                "W" => {
                    pending.insert(key, Some(version));
                }
                "D" => {
                    pending.insert(key, None);
                }
                "A" => {
                    let state = pending.remove(&key).expect("ack of an announced op");
                    assert_eq!(state.map_or(version, |v| v), version);
                    acked.insert(key, state);
                    total_acks += 1;
                }
                _ => panic!("unexpected line {l:?}"),
            }
        }
        let store = KvStore::open(dir.path(), KvOptions::default()).unwrap();
        replayed += store.stats().replayed_records;
        for key in 0..400u64 {
            let got = store.get(format!("key{key}").as_bytes()).unwrap();
            let allowed: Vec<State> = [acked.get(&key).copied().flatten()]
                .into_iter()
                .chain(pending.get(&key).copied())
                .collect();
            let found = allowed.iter().find(|s| match s {
                Some(v) => got.as_deref() == Some(&value(key, *v)[..]),
                None => got.is_none(),
            });
            // What reopening found is durable: later rounds start from it (an
            // unacknowledged write that made it stays, until overwritten).
            if let Some(&state) = found {
                acked.insert(key, state);
            }
            assert!(
                found.is_some(),
                "{mode} round {round}: key{key} holds {:?}, allowed {allowed:?}",
                got.map(|g| String::from_utf8_lossy(&g[..g.len().min(24)]).into_owned())
            );
        }
        drop(store); // a drop without close: the next writer starts from this state
    }
    assert!(
        total_acks > rounds * 20,
        "{mode}: too little progress ({total_acks} acks)"
    );
    if mode != "standard" {
        assert!(
            replayed > 0,
            "{mode}: no buffer log was ever left to replay"
        );
    }
}

#[test]
fn sigkill_loses_nothing_standard() {
    rounds("standard", 5);
}

#[test]
fn sigkill_loses_nothing_sprint() {
    rounds("sprint", 6);
}

#[test]
fn sigkill_loses_nothing_sprint_nopre() {
    rounds("sprint-nopre", 5);
}

#[test]
fn sigkill_loses_nothing_sprint_noparallel() {
    rounds("sprint-noparallel", 5);
}
