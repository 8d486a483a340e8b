//! The server's parsing of submission entries: any 32 bytes a client can put in an SQ
//! slot either parse to a request inside the data buffer and the volume, or get a
//! status. Never a panic.
#![no_main]

use hscm_ring::proto::{parse, Request};
use hscm_ring::ring::SqEntry;
use hscm_ring::Geometry;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let g = Geometry { queues: 1, depth: 64, db_len: 1 << 20, volume_size: 1 << 30 };
    for raw in data.chunks_exact(32) {
        let u32_at = |i: usize| u32::from_le_bytes(raw[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().unwrap());
        let op = u32_at(4);
        let e = SqEntry {
            id: u32_at(0),
            opcode: op as u8,
            flags: (op >> 8) as u8,
            reserved16: (op >> 16) as u16,
            count: u32_at(8),
            buffer: u32_at(12),
            start: u64_at(16),
            reserved32: u32_at(24),
        };
        if let Ok(r) = parse(&e, &g) {
            if let Some(b) = r.buffer_range() {
                assert!(b.start < b.end && b.end <= g.db_len);
            }
            if let Request::Read { offset, len, .. } | Request::Write { offset, len, .. } | Request::Discard { offset, len, .. } = r {
                assert!(len > 0 && offset + len <= g.volume_size);
            }
        }
    }
});
