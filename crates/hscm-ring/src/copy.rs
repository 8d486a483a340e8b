//! Copying into the shared data buffer without pulling its lines into the writer's
//! cache first.

/// Copies `src` to `dst` with non-temporal stores where the CPU has them (x86-64 SSE2),
/// a plain copy elsewhere. Ends with a store fence so the bytes are visible before a
/// later release store (the completion) is.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes and not overlap `src`.
pub unsafe fn stream_copy(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let len = src.len();
        // Align the destination to 16 bytes with a plain head copy.
        let head = (dst.align_offset(16)).min(len);
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
        let body = (len - head) / 64 * 64;
        let mut i = head;
        while i < head + body {
            // SAFETY (of the intrinsics): SSE2 is part of x86-64; dst+i is 16-aligned
            // (head aligned it and i advances by 64), and both ranges are in bounds.
            let s = src.as_ptr().add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let (a, b, c, e) = (
                _mm_loadu_si128(s),
                _mm_loadu_si128(s.add(1)),
                _mm_loadu_si128(s.add(2)),
                _mm_loadu_si128(s.add(3)),
            );
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += 64;
        }
        std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), len - i);
        _mm_sfence();
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
}

#[cfg(test)]
mod tests {
    #[test]
    fn copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; 1100];
        for off in 0..20 {
            for len in [0usize, 1, 15, 16, 63, 64, 65, 200, 977] {
                dst.fill(0xee);
                // SAFETY: dst has room for off + len <= 1100 bytes; no overlap.
                unsafe { super::stream_copy(dst.as_mut_ptr().add(off), &src[..len]) };
                assert_eq!(&dst[off..off + len], &src[..len]);
                assert!(dst[..off].iter().all(|&b| b == 0xee));
                assert!(dst[off + len..].iter().all(|&b| b == 0xee));
            }
        }
    }
}
