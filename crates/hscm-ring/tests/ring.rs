//! The transport end to end: a server over a real volume, clients in this process.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{pattern, serve};
use hscm_ring::proto::{OP_READ, OP_WRITE};
use hscm_ring::ring::SqEntry;
use hscm_ring::{Client, ClientOptions, Error, Op, ServerOptions, Status, WaitMode, WriteFlags};

const MIB: u64 = 1 << 20;

#[test]
fn reads_see_writes_of_every_size_and_mode() {
    let f = serve(8 * MIB, ServerOptions::default());
    for (i, wait) in [WaitMode::Interrupt, WaitMode::Poll, WaitMode::adaptive()]
        .into_iter()
        .enumerate()
    {
        let opts = ClientOptions {
            db_len: 256 * 1024,
            chunk: 64 * 1024,
            wait,
            ..Default::default()
        };
        let client = Client::connect(&f.socket, &opts).unwrap();
        let mut q = client.queue().unwrap();
        for (k, len) in [512usize, 4096, 65536, 200 * 1024, 1 << 20]
            .into_iter()
            .enumerate()
        {
            let data = pattern((i * 10 + k) as u64, len);
            let sector = (k as u64 * 3000 + i as u64) % 10000;
            q.write(sector, &data, WriteFlags { fua: k % 2 == 0 })
                .unwrap();
            let mut back = vec![0u8; len];
            q.read(sector, &mut back).unwrap();
            assert_eq!(back, data, "len {len} mode {}", wait.name());
            // The volume itself agrees.
            let mut direct = vec![0u8; len];
            f.volume.read_at(sector * 512, &mut direct).unwrap();
            assert_eq!(direct, data);
        }
    }
}

#[test]
fn byte_ranges_flush_and_discard() {
    let f = serve(4 * MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            chunk: 4096,
            ..Default::default()
        },
    )
    .unwrap();
    let mut q = client.queue().unwrap();
    let data = pattern(5, 10_001);
    q.write_bytes(12_345, &data, WriteFlags::NONE).unwrap();
    q.flush().unwrap();
    let mut back = vec![0u8; 9_000];
    q.read_bytes(12_346, &mut back).unwrap();
    assert_eq!(back, data[1..9_001]);
    q.discard(24, 8, WriteFlags::FUA).unwrap(); // bytes 12288..16384
    let mut z = vec![1u8; 4096];
    q.read(24, &mut z).unwrap();
    assert!(z.iter().all(|&b| b == 0));
    q.read_bytes(16_384, &mut back[..100]).unwrap();
    assert_eq!(back[..100], data[16_384 - 12_345..16_384 - 12_345 + 100]);
    // Unaligned sector I/O is refused before it reaches the server.
    assert!(matches!(q.read(0, &mut [0u8; 100]), Err(Error::Invalid(_))));
}

#[test]
fn many_clients_and_queues_at_once() {
    let f = serve(16 * MIB, ServerOptions::default());
    let opts = ClientOptions {
        queues: 4,
        db_len: 128 * 1024,
        chunk: 32 * 1024,
        ..Default::default()
    };
    std::thread::scope(|s| {
        for c in 0..3u64 {
            let client = Client::connect(&f.socket, &opts).unwrap();
            for t in 0..4u64 {
                let client = client.clone();
                s.spawn(move || {
                    let mut q = client.queue().unwrap();
                    let region = (c * 4 + t) * 2048; // 1 MiB apart, in sectors
                    for i in 0..50u64 {
                        let len = 4096 * (1 + (i % 24) as usize);
                        let data = pattern(c * 1000 + t * 100 + i, len);
                        q.write(region + (i % 8) * 8, &data, WriteFlags::NONE)
                            .unwrap();
                        let mut back = vec![0u8; len];
                        q.read(region + (i % 8) * 8, &mut back).unwrap();
                        assert_eq!(back, data);
                    }
                });
            }
        }
    });
    assert!(
        f.server
            .as_ref()
            .unwrap()
            .stats()
            .commands
            .load(std::sync::atomic::Ordering::Relaxed)
            > 1000
    );
}

#[test]
fn queue_pairs_are_exclusive_and_reusable() {
    let f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            queues: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let a = client.queue().unwrap();
    let b = client.queue().unwrap();
    assert_ne!(a.index(), b.index());
    assert!(client.queue().is_err());
    drop(a);
    let mut c = client.queue().unwrap();
    c.write(0, &[1u8; 512], WriteFlags::NONE).unwrap();
}

/// Every kind of garbage entry gets its own status, the queue keeps working, and the
/// volume is untouched by the rejected ones.
#[test]
fn garbage_entries_get_statuses() {
    let f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            db_len: 64 * 1024,
            ..Default::default()
        },
    )
    .unwrap();
    let mut q = client.queue().unwrap();
    let before = {
        let mut v = vec![0u8; MIB as usize];
        f.volume.read_at(0, &mut v).unwrap();
        v
    };
    let w = |start: u64, count: u32, buffer: u32| SqEntry {
        opcode: OP_WRITE,
        start,
        count,
        buffer,
        ..Default::default()
    };
    let cases = [
        (
            SqEntry {
                opcode: 0x7f,
                ..w(0, 1, 0)
            },
            Status::BadOpcode,
        ),
        (w(0, 0, 0), Status::BadCount),
        (w(0, u32::MAX, 0), Status::BadCount),
        (w(0, 8, 127), Status::BadBuffer),
        (w(0, 8, u32::MAX), Status::BadBuffer),
        (w(2047, 2, 0), Status::OutOfRange),
        (w(u64::MAX - 1, 4, 0), Status::OutOfRange),
        (
            SqEntry {
                flags: 0x80,
                ..w(0, 1, 0)
            },
            Status::BadField,
        ),
        (
            SqEntry {
                reserved16: 1,
                ..w(0, 1, 0)
            },
            Status::BadField,
        ),
    ];
    for (entry, want) in cases {
        q.submit_raw(entry).unwrap();
        let c = q.complete().unwrap();
        assert_eq!(c.result, Err(want), "{entry:?}");
    }
    // Two commands in one batch whose buffers overlap: the second is refused.
    let r = |buffer| SqEntry {
        opcode: OP_READ,
        start: 0,
        count: 8,
        buffer,
        ..Default::default()
    };
    q.set_wait(WaitMode::Interrupt);
    let mut statuses = Vec::new();
    for _ in 0..20 {
        q.submit_raw(r(0)).unwrap();
        q.submit_raw(r(4)).unwrap();
        let a = q.complete().unwrap().result;
        let b = q.complete().unwrap().result;
        statuses.push((a, b));
    }
    assert!(statuses.iter().all(|(a, _)| *a == Ok(4096)));
    assert!(statuses
        .iter()
        .all(|(_, b)| *b == Ok(4096) || *b == Err(Status::BufferBusy)));
    let mut after = vec![0u8; MIB as usize];
    f.volume.read_at(0, &mut after).unwrap();
    assert!(before == after, "a rejected write changed the volume");
    // The queue still works.
    q.write(0, &[9u8; 4096], WriteFlags::NONE).unwrap();
}

#[test]
fn a_full_queue_refuses_more_until_reaped() {
    let f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            depth: 4,
            ..Default::default()
        },
    )
    .unwrap();
    let mut q = client.queue().unwrap();
    for _ in 0..4 {
        q.submit(Op::Flush, None).unwrap();
    }
    assert!(
        matches!(q.submit(Op::Flush, None), Err(Error::Invalid(m)) if m.contains("queue full"))
    );
    for _ in 0..4 {
        assert_eq!(q.complete().unwrap().result, Ok(0));
    }
    q.submit(Op::Flush, None).unwrap();
    q.complete().unwrap();
}

#[test]
fn data_buffer_is_shared_and_recovered() {
    let f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            db_len: 8192,
            ..Default::default()
        },
    )
    .unwrap();
    let a = client.lease(4096).unwrap();
    let b = client.lease(4096).unwrap();
    assert!(client.lease(512).is_none());
    drop(a);
    drop(b);
    assert!(client.lease(8192).is_some());
}

#[test]
fn a_server_shutdown_wakes_waiting_clients() {
    let mut f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            wait: WaitMode::Interrupt,
            ..Default::default()
        },
    )
    .unwrap();
    let mut q = client.queue().unwrap();
    q.write(0, &[1u8; 512], WriteFlags::NONE).unwrap();
    f.server.take().unwrap().shutdown();
    let e = q.write(0, &[1u8; 512], WriteFlags::NONE).unwrap_err();
    assert!(matches!(e, Error::Disconnected), "{e}");
    // Reconnecting to a stopped server fails clearly.
    let e = Client::connect(&f.socket, &ClientOptions::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("connecting"), "{e}");
}

#[test]
fn geometry_requests_are_clamped_to_server_limits() {
    let f = serve(
        MIB,
        ServerOptions {
            max_queues: 2,
            max_depth: 16,
            max_db: 64 * 1024,
            ..Default::default()
        },
    );
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            queues: 100,
            depth: 1000,
            db_len: 1 << 30,
            ..Default::default()
        },
    )
    .unwrap();
    let g = client.geometry();
    assert_eq!(
        (g.queues, g.depth, g.db_len, g.volume_size),
        (2, 16, 64 * 1024, MIB)
    );
    std::thread::sleep(Duration::from_millis(1));
}

#[test]
fn the_socket_baseline_serves_the_same_bytes() {
    let f = serve(MIB, ServerOptions::default());
    let path = f.dir.path().join("uds.sock");
    hscm_ring::uds::spawn_server(&path, f.volume.clone()).unwrap();
    let mut c = hscm_ring::uds::UdsClient::connect(&path).unwrap();
    let data = pattern(3, 8192);
    c.write(16, &data, WriteFlags::FUA).unwrap();
    let mut back = vec![0u8; 8192];
    c.read(16, &mut back).unwrap();
    assert_eq!(back, data);
    assert!(matches!(
        c.read(4096, &mut back),
        Err(Error::Command(Status::OutOfRange))
    ));
}

/// Queues competing for a buffer that holds two requests at a time all make progress,
/// even while some of them sit idle (a queue keeping its last lease for reuse must not
/// starve the others).
#[test]
fn queues_sharing_a_small_buffer_all_progress() {
    let f = serve(4 * MIB, ServerOptions::default());
    let opts = ClientOptions {
        queues: 4,
        db_len: 128 * 1024,
        chunk: 64 * 1024,
        ..Default::default()
    };
    let client = Client::connect(&f.socket, &opts).unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..4u64 {
        let (client, tx, barrier) = (client.clone(), tx.clone(), barrier.clone());
        std::thread::spawn(move || {
            let mut q = client.queue().unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            for round in 0..2u64 {
                for i in 0..100u64 {
                    q.read(((t * 200 + round * 100 + i) % 60) * 128, &mut buf)
                        .unwrap();
                }
                // Idle while holding whatever the queue kept.
                barrier.wait();
            }
            tx.send(t).unwrap();
        });
    }
    for _ in 0..4 {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a queue starved for buffer space");
    }
}

/// A client that publishes an impossible SQ index loses that queue pair, with a clear
/// error, and nothing else: its other queue and other clients go on.
#[test]
fn an_impossible_ring_index_breaks_only_its_queue() {
    let f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            queues: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let other = Client::connect(&f.socket, &ClientOptions::default()).unwrap();
    let mut bad = client.queue().unwrap();
    let mut good = client.queue().unwrap();
    bad.publish_raw_sq_tail(1_000_000);
    let t0 = std::time::Instant::now();
    let err = loop {
        match bad.try_complete() {
            Err(e) => break e,
            Ok(_) if t0.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Ok(_) => panic!("server never reported the broken queue"),
        }
    };
    assert!(matches!(err, Error::QueueBroken { .. }), "{err}");
    assert_eq!(
        f.server
            .as_ref()
            .unwrap()
            .stats()
            .broken_queues
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    good.write(0, &[3u8; 512], WriteFlags::NONE).unwrap();
    other.queue().unwrap().read(0, &mut [0u8; 512]).unwrap();
}

#[test]
fn clients_beyond_the_limit_are_refused_with_a_reason() {
    let f = serve(
        MIB,
        ServerOptions {
            max_clients: 2,
            ..Default::default()
        },
    );
    let a = Client::connect(&f.socket, &ClientOptions::default()).unwrap();
    let b = Client::connect(&f.socket, &ClientOptions::default()).unwrap();
    let e = Client::connect(&f.socket, &ClientOptions::default())
        .err()
        .unwrap();
    assert!(matches!(&e, Error::Refused(m) if m.contains("busy")), "{e}");
    drop((a, b));
    // Workers notice the closed sockets within their liveness period.
    let t0 = std::time::Instant::now();
    while Client::connect(&f.socket, &ClientOptions::default()).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "slots never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn writes_to_a_read_only_volume_get_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.hscm");
    hscm_volume::Volume::create(&path, MIB, &hscm_volume::CreateOptions::default()).unwrap();
    let ro = hscm_volume::OpenOptions {
        read_only: true,
        ..Default::default()
    };
    let volume = std::sync::Arc::new(hscm_volume::Volume::open(&path, &ro).unwrap());
    let socket = dir.path().join("ro.sock");
    let _server = hscm_ring::Server::bind(&socket, volume, ServerOptions::default())
        .unwrap()
        .spawn()
        .unwrap();
    let client = Client::connect(&socket, &ClientOptions::default()).unwrap();
    let mut q = client.queue().unwrap();
    let e = q.write(0, &[1u8; 4096], WriteFlags::FUA).unwrap_err();
    assert!(matches!(e, Error::Command(Status::ReadOnly)), "{e}");
    let mut buf = [9u8; 4096];
    q.read(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
}

/// A server over a small volume and one client queue of depth 4 on it (for the
/// worker-sleep tests).
fn served_queue_of_depth_4() -> (common::Fixture, hscm_ring::Queue) {
    let f = serve(MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            depth: 4,
            ..Default::default()
        },
    )
    .unwrap();
    let q = client.queue().unwrap();
    (f, q)
}

/// Waits for the worker to settle, then asserts it slept repeatedly over 400 ms rather
/// than spinning.
fn assert_worker_sleeps(stats: &hscm_ring::ServerStats) {
    use std::sync::atomic::Ordering::Relaxed;
    std::thread::sleep(Duration::from_millis(100));
    let before = stats.sleeps.load(Relaxed);
    std::thread::sleep(Duration::from_millis(400));
    let slept = stats.sleeps.load(Relaxed) - before;
    assert!(
        slept >= 2,
        "worker slept {slept} times in 400 ms: it is spinning"
    );
}

/// A client that never reaps its completions and keeps publishing entries gets no
/// more service, and does not keep the server's worker spinning either.
#[test]
fn a_client_that_never_reaps_lets_the_worker_sleep() {
    use std::sync::atomic::Ordering::Relaxed;
    let (f, mut q) = served_queue_of_depth_4();
    let stats = f.server.as_ref().unwrap().stats();
    for _ in 0..4 {
        q.submit(Op::Flush, None).unwrap();
    }
    let t0 = std::time::Instant::now();
    while stats.commands.load(Relaxed) < 4 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1));
    }
    // The CQ is full; two more entries wait in the SQ (a plausible tail).
    q.publish_raw_sq_tail(6);
    assert_worker_sleeps(stats);
    assert_eq!(
        stats.commands.load(Relaxed),
        4,
        "served entries it had no completion room for"
    );
}

/// A tail that announces entries whose slots were never marked (a client that skips
/// the seq word, or writes garbage there) gets nothing served, and the worker still
/// sleeps instead of spinning on the promise.
#[test]
fn a_tail_without_marked_slots_serves_nothing_and_lets_the_worker_sleep() {
    use std::sync::atomic::Ordering::Relaxed;
    let (f, mut q) = served_queue_of_depth_4();
    let stats = f.server.as_ref().unwrap().stats();
    q.publish_raw_sq_tail(2);
    assert_worker_sleeps(stats);
    assert_eq!(stats.commands.load(Relaxed), 0, "served unmarked slots");
    assert_eq!(
        stats.broken_queues.load(Relaxed),
        0,
        "a plausible tail broke the queue"
    );
}

#[test]
fn in_place_reads_see_the_volume_and_give_their_buffer_back() {
    let f = serve(4 * MIB, ServerOptions::default());
    let db_len = 64 * 1024;
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            db_len,
            // Smaller than most reads below: an in-place read is one command anyway.
            chunk: 4096,
            ..Default::default()
        },
    )
    .unwrap();
    let model = pattern(77, (MIB + 123_457) as usize);
    f.volume.write_at(1000, &model).unwrap();
    let mut q = client.queue().unwrap();
    let mut x = 12345u64;
    for len in [0usize, 1, 511, 512, 4097, 40_000, 65_536] {
        for _ in 0..20 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = (x >> 33) as usize % (model.len() - len);
            let got = q
                .read_in_place(1000 + at as u64, len, |bytes| bytes.to_vec())
                .unwrap();
            assert_eq!(got, model[at..at + len], "len {len} at {at}");
        }
    }
    // Larger than the whole data buffer: refused before anything is sent.
    assert!(matches!(
        q.read_in_place(0, db_len as usize + 1, |_| ()),
        Err(Error::Invalid(_))
    ));
    // Past the volume's end: the server's status, and the queue goes on.
    assert!(matches!(
        q.read_in_place(4 * MIB - 10, 20, |_| ()),
        Err(Error::Command(Status::OutOfRange))
    ));
    // Not while another command of this queue is in flight.
    q.submit(Op::Flush, None).unwrap();
    assert!(matches!(
        q.read_in_place(1000, 10, |_| ()),
        Err(Error::Invalid(_))
    ));
    assert_eq!(q.complete().unwrap().result, Ok(0));
    assert_eq!(
        q.read_in_place(1000, 10, |b| b.to_vec()).unwrap(),
        model[..10]
    );
    // Every byte of the buffer comes back.
    drop(q);
    assert!(client.lease(db_len).is_some());
}

/// The server serves any block target: here a volatile in-memory one, with no volume
/// anywhere. Reads, writes, FUA, flush and discard reach it as they reach a volume.
#[test]
fn any_block_target_can_be_served() {
    use hscm_block::{BlockTarget, Counted, MemTarget};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mem.sock");
    let target = Arc::new(Counted::new(MemTarget::new(4 * MIB as usize)));
    let _server = hscm_ring::Server::bind(&socket, target.clone(), ServerOptions::default())
        .unwrap()
        .spawn()
        .unwrap();
    let client = Client::connect(&socket, &ClientOptions::default()).unwrap();
    assert_eq!(client.geometry().volume_size, 4 * MIB);
    let mut q = client.queue().unwrap();
    let data = pattern(7, 128 * 1024);
    q.write(8, &data, WriteFlags::FUA).unwrap();
    q.write_bytes(3, b"bytes", WriteFlags::NONE).unwrap();
    q.flush().unwrap();
    let mut back = vec![0u8; data.len()];
    q.read(8, &mut back).unwrap();
    assert_eq!(back, data);
    let mut direct = [0u8; 5];
    target.read_at(3, &mut direct).unwrap();
    assert_eq!(&direct, b"bytes");
    q.discard(8, 16, WriteFlags::NONE).unwrap();
    q.read(8, &mut back[..8192]).unwrap();
    assert!(back[..8192].iter().all(|&b| b == 0));
    let counted = target.snapshot();
    assert_eq!(
        (counted.writes, counted.flushes, counted.discards),
        (2, 1, 1)
    );
    assert_eq!(counted.write_bytes, data.len() as u64 + 5);
}

/// A client that changes its buffer while the server writes from it (a protocol
/// violation) can garble only its own data: RAM gets exactly the bytes that went
/// home, so reads now and after a restart agree.
#[test]
fn a_buffer_changed_during_its_write_leaves_ram_and_disk_the_same() {
    let mut f = serve(8 * MIB, ServerOptions::default());
    let client = Client::connect(
        &f.socket,
        &ClientOptions {
            db_len: 2 * MIB,
            ..Default::default()
        },
    )
    .unwrap();
    let mut q = client.queue().unwrap();
    let len = MIB as usize;
    let mut lease = client.lease(MIB).unwrap();
    let mut served = Vec::new();
    for round in 0..5u64 {
        lease.write(0, &pattern(round, len));
        q.submit_raw(SqEntry {
            opcode: OP_WRITE,
            start: round * 2048,
            count: (MIB / 512) as u32,
            buffer: lease.index(),
            flags: hscm_ring::proto::FLAG_FUA,
            ..Default::default()
        })
        .unwrap();
        let mut scribble = 0u64;
        let done = loop {
            if let Some(c) = q.try_complete().unwrap() {
                break c;
            }
            scribble += 1;
            lease.write((scribble * 4096) % MIB, &pattern(100 + scribble, 4096));
        };
        assert_eq!(done.result, Ok(len as u32));
        let mut now = vec![0u8; len];
        q.read_bytes(round * MIB, &mut now).unwrap();
        served.push(now);
    }
    drop(lease);
    drop(q);
    drop(client);
    f.server.take().unwrap().shutdown();
    let volume = std::mem::replace(
        &mut f.volume,
        common::volume_at(&f.dir.path().join("other.hscm"), MIB),
    );
    Arc::try_unwrap(volume).ok().unwrap().close().unwrap();
    let reopened = common::volume_at(&f.volume_path, 8 * MIB);
    for (round, now) in served.iter().enumerate() {
        let mut home = vec![0u8; len];
        reopened.read_at(round as u64 * MIB, &mut home).unwrap();
        assert!(
            home == *now,
            "round {round}: what was read from RAM is what the device holds"
        );
    }
}
