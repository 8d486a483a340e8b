//! The contract every [`BlockTarget`] keeps, as a check a target's own tests call:
//! ranges are checked, bytes written are read back (through both reads), discarded and
//! zeroed ranges read as zeroes, and a read-only target refuses every change.

use crate::{BlockTarget, Error, WriteFlags, ZeroFlags};

/// Drives `target` (writable, at least 64 KiB, its content free to change) against a
/// byte-array model; panics with the first difference.
pub fn check_writable(target: &dyn BlockTarget) {
    let size = target.size();
    assert!(size >= 64 << 10, "the check needs at least 64 KiB");
    let caps = target.capabilities();
    assert!(!caps.read_only);
    let mut model = vec![0u8; size as usize];
    target
        .read_at(0, &mut model)
        .expect("read the whole target");

    // Requests that reach past the end fail before anything happens.
    for (offset, len) in [(size, 1u64), (size - 1, 2), (u64::MAX, 2)] {
        let err = target
            .write_at(offset, &vec![1; len as usize], WriteFlags::NONE)
            .expect_err("a write past the end");
        assert!(matches!(err, Error::OutOfRange { .. }), "{err}");
        let mut buf = vec![0; len as usize];
        assert!(matches!(
            target.read_at(offset, &mut buf),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            target.discard(offset, len, WriteFlags::NONE),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            target.write_zeroes(offset, len, ZeroFlags::default()),
            Err(Error::OutOfRange { .. })
        ));
    }

    // Unaligned writes, FUA or not, across 4 KiB boundaries; then discard and zeroes.
    let mut x = 0x9e37_79b9_u32;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        u64::from(x) % m
    };
    for round in 0..200u32 {
        let len = 1 + next(20_000);
        let offset = next(size - len);
        let (o, l) = (offset as usize, len as usize);
        match round % 4 {
            0 | 1 => {
                let data: Vec<u8> = (0..l).map(|i| (i as u32 ^ round) as u8 | 1).collect();
                let flags = if round % 4 == 0 {
                    WriteFlags::FUA
                } else {
                    WriteFlags::NONE
                };
                target.write_at(offset, &data, flags).expect("write");
                model[o..o + l].copy_from_slice(&data);
            }
            2 => {
                target
                    .discard(offset, len, WriteFlags::NONE)
                    .expect("discard");
                model[o..o + l].fill(0);
            }
            _ => {
                let flags = ZeroFlags {
                    fua: round % 8 == 3,
                    may_trim: round % 16 == 3,
                    fast_only: false,
                };
                target
                    .write_zeroes(offset, len, flags)
                    .expect("write zeroes");
                model[o..o + l].fill(0);
            }
        }
        // Both reads see the model, around the request too.
        let from = offset.saturating_sub(100);
        let to = (offset + len + 100).min(size);
        let mut buf = vec![0u8; (to - from) as usize];
        target.read_at(from, &mut buf).expect("read back");
        assert!(
            buf == model[from as usize..to as usize],
            "round {round}: read_at differs"
        );
        let mut lent = vec![0u8; buf.len()];
        let mut seen = 0;
        target
            .read_with(from, lent.len(), &mut |at, piece| {
                assert_eq!(at, seen, "pieces come in order");
                lent[at..at + piece.len()].copy_from_slice(piece);
                seen += piece.len();
            })
            .expect("read_with");
        assert_eq!(seen, lent.len(), "round {round}: read_with lent every byte");
        assert!(lent == buf, "round {round}: read_with differs from read_at");
    }
    target.flush().expect("flush");
    let mut all = vec![0u8; size as usize];
    target.read_at(0, &mut all).unwrap();
    assert!(all == model, "the whole target differs from the model");
    check_extents(target, &model);
}

/// `extents` covers each range exactly, in order, and what it calls zero reads as
/// zeroes; with `only_first`, its first run is the full answer's first run or a part
/// of it; past the end it fails.
fn check_extents(target: &dyn BlockTarget, model: &[u8]) {
    let size = target.size();
    for (offset, len) in [(0, size), (1, size - 1), (4095, 8194), (size - 3, 3)] {
        let runs = target.extents(offset, len, false).expect("extents");
        assert_eq!(runs.iter().map(|r| r.len).sum::<u64>(), len, "{runs:?}");
        let mut at = offset as usize;
        for r in &runs {
            assert!(r.len > 0, "an empty run: {runs:?}");
            let end = at + r.len as usize;
            if r.kind == crate::ExtentKind::Zero {
                assert!(
                    model[at..end].iter().all(|&b| b == 0),
                    "zero run {at}..{end} holds data"
                );
            }
            at = end;
        }
        let first = target.extents(offset, len, true).expect("the first extent");
        assert!(!first.is_empty() && first[0].kind == runs[0].kind && first[0].len <= runs[0].len);
    }
    assert!(matches!(
        target.extents(size - 1, 2, false),
        Err(Error::OutOfRange { .. })
    ));
}

/// `target` is read-only: reads work, every change is refused with [`Error::ReadOnly`].
pub fn check_read_only(target: &dyn BlockTarget) {
    assert!(target.capabilities().read_only);
    let mut buf = [0u8; 16];
    target
        .read_at(0, &mut buf)
        .expect("a read-only target reads");
    for r in [
        target.write_at(0, b"x", WriteFlags::NONE),
        target.discard(0, 1, WriteFlags::NONE),
        target.write_zeroes(0, 1, ZeroFlags::default()),
    ] {
        let err = r.expect_err("a change to a read-only target");
        assert!(err.refuses_writes(), "{err}");
    }
}
