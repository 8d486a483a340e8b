//! How a connection's threads share its requests: a request that waits on the device
//! never holds up the ones behind it, a deep client gets as many requests running as
//! the export allows and no more, and stopping the server answers what it accepted.

mod client;

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hscm_block::{BlockTarget, Capabilities, MemTarget, WriteFlags, ZeroFlags};
use hscm_nbd::ExportOptions;

use client::*;

/// A memory target whose writes and flushes wait at a gate until the test opens it,
/// counting how many wait at once: a device that is slow exactly when told to be.
struct Gated {
    inner: MemTarget,
    gate: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    open: bool,
    waiting: usize,
    most_waiting: usize,
}

impl Gated {
    fn new() -> Arc<Gated> {
        Arc::new(Gated {
            inner: MemTarget::new(SIZE as usize),
            gate: Mutex::new(GateState::default()),
            changed: Condvar::new(),
        })
    }

    fn pass(&self) {
        let mut g = self.gate.lock().unwrap();
        g.waiting += 1;
        g.most_waiting = g.most_waiting.max(g.waiting);
        self.changed.notify_all();
        while !g.open {
            g = self.changed.wait(g).unwrap();
        }
        g.waiting -= 1;
    }

    fn open(&self) {
        self.gate.lock().unwrap().open = true;
        self.changed.notify_all();
    }

    /// Waits until `n` requests wait at the gate at once; false after 10 s.
    fn until_waiting(&self, n: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut g = self.gate.lock().unwrap();
        while g.waiting < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self.changed.wait_timeout(g, left).unwrap().0;
        }
        true
    }

    fn most_waiting(&self) -> usize {
        self.gate.lock().unwrap().most_waiting
    }
}

impl BlockTarget for Gated {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Writes are volatile until a flush, as the volume's in on-flush mode.
            flush: true,
            ..self.inner.capabilities()
        }
    }
    fn read_with(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> hscm_block::Result<()> {
        self.inner.read_with(offset, len, sink)
    }
    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> hscm_block::Result<()> {
        self.pass();
        self.inner.write_at(offset, data, flags)
    }
    fn flush(&self) -> hscm_block::Result<()> {
        self.pass();
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> hscm_block::Result<()> {
        self.inner.discard(offset, len, flags)
    }
    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> hscm_block::Result<()> {
        self.inner.write_zeroes(offset, len, flags)
    }
}

/// Opens the gate when dropped, so that a failing test unwinds instead of waiting
/// forever for the requests held at it (declare it after the server: it goes first).
struct OpenOnDrop(Arc<Gated>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

fn serve(target: Arc<Gated>, workers: usize) -> Running {
    start_with(
        target,
        ExportOptions {
            name: "disk".into(),
            workers_per_connection: workers,
            ..ExportOptions::default()
        },
    )
}

/// The request header and payload of a FUA write of `block` at `cookie`'s 4 KiB.
fn fua_write(cookie: u64, block: u8) -> Vec<u8> {
    let mut v = REQUEST_MAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&CMD_FLAG_FUA.to_be_bytes());
    v.extend_from_slice(&CMD_WRITE.to_be_bytes());
    v.extend_from_slice(&cookie.to_be_bytes());
    v.extend_from_slice(&(cookie * 4096).to_be_bytes());
    v.extend_from_slice(&4096u32.to_be_bytes());
    v.extend_from_slice(&[block; 4096]);
    v
}

#[test]
fn a_flush_waiting_on_the_device_does_not_hold_up_reads_sent_after_it() {
    let target = Gated::new();
    let r = serve(target.clone(), 16);
    let _open = OpenOnDrop(target.clone());
    let mut s = connect(&r.path);
    go(&mut s, "disk");
    request(&mut s, CMD_FLUSH, 0, 1, 0, 0);
    assert!(target.until_waiting(1), "the flush reached the device");
    // The flush holds its thread; the read behind it is answered anyway.
    request(&mut s, CMD_READ, 0, 2, 0, 4096);
    let (err, cookie) = simple_reply(&mut s);
    assert_eq!((err, cookie), (0, 2), "the read is answered first");
    let mut data = vec![1u8; 4096];
    s.read_exact(&mut data).unwrap();
    assert!(data.iter().all(|&b| b == 0));
    target.open();
    assert_eq!(simple_reply(&mut s), (0, 1), "then the flush");
}

#[test]
fn a_deep_client_gets_as_many_requests_running_as_the_export_allows() {
    for workers in [3, 16] {
        let target = Gated::new();
        let r = serve(target.clone(), workers);
        let _open = OpenOnDrop(target.clone());
        let mut s = connect(&r.path);
        go(&mut s, "disk");
        let burst: Vec<u8> = (0..8u64).flat_map(|i| fua_write(i, i as u8 + 1)).collect();
        s.write_all(&burst).unwrap();
        let running = workers.min(8);
        assert!(
            target.until_waiting(running),
            "{running} of 8 writes run at once with {workers} workers"
        );
        // No more than the limit start, however long they wait.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(target.most_waiting(), running, "{workers} workers");
        target.open();
        let mut answered: Vec<u64> = (0..8)
            .map(|_| simple_reply(&mut s))
            .map(|(e, c)| {
                assert_eq!(e, 0);
                c
            })
            .collect();
        answered.sort_unstable();
        assert_eq!(answered, (0..8).collect::<Vec<_>>());
        for i in 0..8u64 {
            assert_eq!(
                read(&mut s, 100 + i, i * 4096, 4096).unwrap(),
                vec![i as u8 + 1; 4096]
            );
        }
    }
}

#[test]
fn stopping_the_server_answers_the_requests_it_already_read() {
    let target = Gated::new();
    let r = serve(target.clone(), 16);
    let _open = OpenOnDrop(target.clone());
    let mut s = connect(&r.path);
    go(&mut s, "disk");
    let burst: Vec<u8> = (0..4u64).flat_map(|i| fua_write(i, 7)).collect();
    s.write_all(&burst).unwrap();
    assert!(target.until_waiting(4));
    r.stop.store(true, Ordering::Relaxed);
    target.open();
    let mut answered: Vec<u64> = (0..4).map(|_| simple_reply(&mut s).1).collect();
    answered.sort_unstable();
    assert_eq!(answered, vec![0, 1, 2, 3]);
    drop(r);
    let mut kept = vec![0u8; 4 * 4096];
    target.inner.read_at(0, &mut kept).unwrap();
    assert_eq!(
        kept,
        vec![7u8; 4 * 4096],
        "every answered write is in the target"
    );
}
