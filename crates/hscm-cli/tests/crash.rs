//! kill -9 against a writer process at random moments, many rounds on one volume:
//! after every kill the reopened volume holds every acknowledged write. Each round's
//! writer starts while the volume is still warming up, so the rapid-resilience paths
//! are killed mid-flight too. Run on a volume without a journal and on one with a
//! small journal (1 MiB for 8 MiB: it wraps and checkpoints within a round).

use crate::util;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hscm_volume::testing::check_restarted_block;
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use rand::{Rng, SeedableRng};

const BLOCK: u64 = 1536;

fn run_rounds(durability: Durability, rounds: u64, journal_size: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.hscm");
    let size = 8 << 20;
    Volume::create(
        &path,
        size,
        &CreateOptions {
            chunk_size: 64 << 10,
            durability,
            overwrite: false,
            journal_size,
        },
    )
    .unwrap();
    let blocks = size / BLOCK;
    // Per block: the highest acknowledged version, and the highest attempted one.
    let mut acked = vec![0u64; blocks as usize];
    let mut attempted = vec![0u64; blocks as usize];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(durability as u64 + 11);
    let mut total_acks = 0;
    for round in 1..=rounds {
        let mut child = util::hscm()
            .args(["debug", "crash-writer"])
            .arg(&path)
            .args([
                "--seed",
                &round.to_string(),
                "--block",
                &BLOCK.to_string(),
                "--durability",
                durability.name(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn hscm");
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(rng.gen_range(5..120));
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                }
            }
            lines
        });
        let t0 = Instant::now();
        while t0.elapsed() < kill_after {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("writer exited early with {status}");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        // On-flush and write-back: a write is acknowledged only by a later "F" (flush) line.
        let mut since_flush: Vec<(u64, u64)> = Vec::new();
        for l in &lines {
            let mut it = l.split_whitespace();
            match it.next() {
                Some("W") => {
                    let (b, v): (u64, u64) = (
                        it.next().unwrap().parse().unwrap(),
                        it.next().unwrap().parse().unwrap(),
                    );
                    attempted[b as usize] = attempted[b as usize].max(v);
                }
                Some("A") => {
                    let (b, v): (u64, u64) = (
                        it.next().unwrap().parse().unwrap(),
                        it.next().unwrap().parse().unwrap(),
                    );
                    match durability {
                        Durability::Immediate => acked[b as usize] = acked[b as usize].max(v),
                        Durability::OnFlush | Durability::WriteBack => since_flush.push((b, v)),
                    }
                    total_acks += 1;
                }
                Some("F") => {
                    for (b, v) in since_flush.drain(..) {
                        acked[b as usize] = acked[b as usize].max(v);
                    }
                }
                _ => {}
            }
        }
        verify(&path, &acked, &attempted, round);
    }
    assert!(
        total_acks > rounds,
        "writers made too little progress to test anything ({total_acks} acks)"
    );
}

fn verify(path: &Path, acked: &[u64], attempted: &[u64], round: u64) {
    let v = Volume::open(
        path,
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut buf = vec![0u8; BLOCK as usize];
    for b in 0..acked.len() as u64 {
        v.read_at(b * BLOCK, &mut buf).unwrap();
        if let Err(e) = check_restarted_block(b, &buf, acked[b as usize], attempted[b as usize]) {
            panic!("round {round}: {e}");
        }
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write_immediate() {
    run_rounds(Durability::Immediate, 25, 0);
}

#[test]
fn sigkill_loses_no_acknowledged_write_on_flush() {
    run_rounds(Durability::OnFlush, 25, 0);
}

#[test]
fn sigkill_loses_nothing_flushed_write_back() {
    run_rounds(Durability::WriteBack, 25, 0);
}

#[test]
fn sigkill_loses_no_acknowledged_write_journaled_immediate() {
    run_rounds(Durability::Immediate, 25, 1 << 20);
}

#[test]
fn sigkill_loses_no_acknowledged_write_journaled_on_flush() {
    run_rounds(Durability::OnFlush, 25, 1 << 20);
}
