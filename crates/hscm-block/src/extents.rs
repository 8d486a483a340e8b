//! What a range holds, as a client maps an export (NBD's `base:allocation`): runs of
//! data and of zeroes. A target that knows (one that keeps holes, or one whose bytes
//! are costly to read) answers itself; the default reads the range.

use crate::{BlockTarget, Result};

/// Whether a run reads as zeroes. `Data` is always a true answer; `Zero` is a promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtentKind {
    Data,
    Zero,
}

/// One run of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    pub kind: ExtentKind,
}

/// The unit the default looks at: runs start and end on these, aligned to the target.
pub const EXTENT_UNIT: u64 = 4096;

/// [`BlockTarget::extents`]'s default: reads `[offset, offset + len)` in
/// [`EXTENT_UNIT`]s aligned to the target and merges them into runs; with
/// `only_first`, stops once the first run has ended.
pub fn scan_extents<T: BlockTarget + ?Sized>(
    target: &T,
    offset: u64,
    len: u64,
    only_first: bool,
) -> Result<Vec<Extent>> {
    crate::check_range(target.size(), offset, len)?;
    let mut runs: Vec<Extent> = Vec::new();
    let (mut at, end) = (offset, offset + len);
    while at < end {
        let unit_end = (at / EXTENT_UNIT + 1) * EXTENT_UNIT;
        let piece = unit_end.min(end) - at;
        let mut zero = true;
        target.read_with(at, piece as usize, &mut |_, bytes| {
            zero &= bytes.iter().all(|&b| b == 0);
        })?;
        let kind = if zero {
            ExtentKind::Zero
        } else {
            ExtentKind::Data
        };
        match runs.last_mut() {
            Some(run) if run.kind == kind => run.len += piece,
            _ => {
                if only_first && !runs.is_empty() {
                    break;
                }
                runs.push(Extent { len: piece, kind });
            }
        }
        at += piece;
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemTarget, WriteFlags};

    #[test]
    fn runs_of_data_and_zeroes_in_aligned_units() {
        let t = MemTarget::new(64 << 10);
        t.write_at(8192, &[1u8; 10], WriteFlags::default()).unwrap();
        t.write_at(12288, &[2u8; 4096], WriteFlags::default())
            .unwrap();
        let e = |len, kind| Extent { len, kind };
        assert_eq!(
            t.extents(0, 64 << 10, false).unwrap(),
            vec![
                e(8192, ExtentKind::Zero),
                e(8192, ExtentKind::Data),
                e(48 << 10, ExtentKind::Zero)
            ]
        );
        // Unaligned start: the first unit is cut at the boundary.
        assert_eq!(
            t.extents(100, 8192, true).unwrap(),
            vec![e(8092, ExtentKind::Zero)]
        );
        assert!(t.extents(60 << 10, 8192, false).is_err(), "out of range");
    }
}
