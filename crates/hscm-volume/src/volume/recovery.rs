//! Opening: the header, the backing store's size, and recovery of what the journal holds.

use super::*;

/// Brings the home locations up to date with what the journal holds, then starts a
/// new incarnation (a fresh nonce) whose chain begins where the old one ended.
pub(super) fn recover(
    backend: &dyn Backend,
    header: &Header,
    replay: journal::Replay,
) -> Result<Journal> {
    let name = backend.describe();
    let fail = |what: &str, e| Error::io(format!("journal recovery of {name}: {what}"), e);
    if !replay.sectors.is_empty() {
        let runs = journal::runs_of(&replay.sectors);
        let writes: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|(o, b)| (header.data_offset() + o, &b[..]))
            .collect();
        backend
            .write_many(&writes)
            .map_err(|e| fail("writing replayed sectors home", e))?;
        backend.sync().map_err(|e| fail("sync after replay", e))?;
    }
    let ck = Checkpoint {
        generation: replay.checkpoint.generation + 1,
        next_seq: replay.next_seq,
        log_pos: replay.end_pos,
        nonce: journal::new_nonce(),
    };
    ck.persist(backend, &header.uuid)
        .map_err(|e| fail("writing the checkpoint record", e))?;
    let sectors = header.volume_size / IO_ALIGN;
    Ok(Journal {
        len: header.journal_len,
        state: Mutex::new(CommitState {
            queue: VecDeque::new(),
            next_id: 0,
            finished_id: 0,
            writing: false,
            next_seq: ck.next_seq,
            head: ck.log_pos,
            tail: ck.log_pos,
            nonce: ck.nonce,
            generation: ck.generation,
            checkpoint_wanted: false,
            stop: false,
            last_batch: 0,
            recent_peak: 0,
            window_peak: 0,
            window_batches: 0,
        }),
        cv: Condvar::new(),
        checkpoint_cv: Condvar::new(),
        checkpoint_lock: Mutex::new(Vec::new()),
        dirty: (0..sectors.div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect(),
        checkpoints: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        records: AtomicU64::new(0),
        home_runs: AtomicU64::new(0),
    })
}

pub(super) fn read_header(backend: &dyn Backend) -> Result<Header> {
    let name = backend.describe();
    if backend.len() < HEADER_LEN {
        return Err(Error::SizeMismatch {
            path: name,
            expected: HEADER_LEN,
            actual: backend.len(),
            volume_size: 0,
            kind: "truncated (not even a header)",
        });
    }
    let mut block = AlignedBuf::zeroed(HEADER_LEN as usize);
    backend
        .read_at(0, &mut block)
        .map_err(|e| Error::io(format!("cannot read the header of {name}"), e))?;
    Header::decode(&block, &name)
}

pub(super) fn check_backing_len(backend: &dyn Backend, header: &Header) -> Result<()> {
    let expected = header.backing_len();
    let actual = backend.len();
    let kind = if actual < expected {
        "truncated"
    } else if actual > expected && backend.exact_len() {
        "resized (grown)"
    } else {
        return Ok(());
    };
    Err(Error::SizeMismatch {
        path: backend.describe(),
        expected,
        actual,
        volume_size: header.volume_size,
        kind,
    })
}
