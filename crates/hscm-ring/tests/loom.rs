//! Model checking of the ring protocol under every interleaving loom explores:
//! `RUSTFLAGS="--cfg loom" cargo test -p hscm-ring --test loom --release`
//! (scripts/test.sh runs it). Without `--cfg loom` this file is empty.
#![cfg(loom)]

use hscm_ring::ring::{
    end_sleep, prepare_sleep, ring_doorbell, Consumer, Producer, SqEntry, SqSlot,
};
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;

fn slots(n: usize) -> Vec<SqSlot> {
    (0..n)
        .map(|_| SqSlot {
            id: AtomicU32::new(0),
            op: AtomicU32::new(0),
            count: AtomicU32::new(0),
            buffer: AtomicU32::new(0),
            start: AtomicU64::new(0),
            reserved: AtomicU32::new(0),
            seq: AtomicU32::new(0),
        })
        .collect()
}

struct Ring {
    head: AtomicU32,
    tail: AtomicU32,
    slots: Vec<SqSlot>,
}

impl Ring {
    fn empty(depth: usize) -> Arc<Ring> {
        Arc::new(Ring {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            slots: slots(depth),
        })
    }
}

/// Entries arrive whole and in order, a slot is never overwritten before the consumer
/// has copied it out, and a mark left from the previous lap is never taken for the
/// current one, with the ring wrapping (depth 2, three entries). The consumer polls
/// slots as client and server do; the tail it may also read is never implausible,
/// though it can lag.
#[test]
fn entries_arrive_whole_and_in_order() {
    loom::model(|| {
        let ring = Ring::empty(2);
        let p = ring.clone();
        let producer = loom::thread::spawn(move || {
            let mut prod = Producer::new(&p.head, &p.tail, 2);
            let mut sent = 0u32;
            while sent < 3 {
                // room_for, as client and server use it: the third entry reuses a
                // slot proven free by a head read before the second was sent.
                if prod.room_for(1).unwrap() == 0 {
                    loom::thread::yield_now();
                    continue;
                }
                let e = SqEntry {
                    id: sent,
                    count: sent * 10,
                    start: u64::from(sent) * 100,
                    ..Default::default()
                };
                p.slots[prod.slot(0)].fill(&e, prod.position());
                prod.publish(1);
                sent += 1;
            }
        });
        let mut cons = Consumer::new(&ring.head, &ring.tail, 2);
        let mut got = 0u32;
        while got < 3 {
            let Some(e) = ring.slots[cons.slot(0)].take(cons.position()) else {
                loom::thread::yield_now();
                continue;
            };
            assert_eq!(
                (e.id, e.count, e.start),
                (got, got * 10, u64::from(got) * 100)
            );
            cons.release(1);
            assert!(
                cons.available().is_ok(),
                "a lagging tail was called implausible"
            );
            got += 1;
        }
        producer.join().unwrap();
    });
}

/// One poll against one publication, every interleaving: a slot the consumer takes is
/// whole (its mark is stored last, with release), and the tail read afterwards, which
/// may not show the entry yet, is plausible.
#[test]
fn a_marked_slot_is_whole_and_a_lagging_tail_is_plausible() {
    loom::model(|| {
        let ring = Ring::empty(2);
        let p = ring.clone();
        let producer = loom::thread::spawn(move || {
            let mut prod = Producer::new(&p.head, &p.tail, 2);
            let e = SqEntry {
                id: 7,
                count: 70,
                start: 700,
                ..Default::default()
            };
            p.slots[prod.slot(0)].fill(&e, prod.position());
            prod.publish(1);
        });
        let mut cons = Consumer::new(&ring.head, &ring.tail, 2);
        if let Some(e) = ring.slots[cons.slot(0)].take(cons.position()) {
            assert_eq!((e.id, e.count, e.start), (7, 70, 700));
            cons.release(1);
        }
        assert!(cons.available().is_ok());
        producer.join().unwrap();
    });
}

/// The doorbell never loses a wake-up: if the sleeper decides to block on value `w`
/// after finding no work, the waker has either made its work visible to it or changed
/// the word away from `w` (so the futex wait returns at once) and seen the sleeping
/// bit (so it issues the wake).
#[test]
fn a_sleeper_never_misses_published_work() {
    loom::model(|| {
        let tail = Arc::new(AtomicU32::new(0));
        let doorbell = Arc::new(AtomicU32::new(0));
        let (t, d) = (tail.clone(), doorbell.clone());
        let waker = loom::thread::spawn(move || {
            t.store(1, Ordering::Release);
            ring_doorbell(&d)
        });
        let w = prepare_sleep(&doorbell);
        let work = tail.load(Ordering::Acquire) != 0;
        let woke = waker.join().unwrap();
        if !work {
            assert_ne!(
                doorbell.load(Ordering::Acquire),
                w,
                "sleeper blocks on {w} with work pending"
            );
            assert!(woke, "waker skipped the wake of a sleeper");
        }
        end_sleep(&doorbell);
    });
}
