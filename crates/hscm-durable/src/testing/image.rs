//! One device's or one file's bytes, as a power cut sees them.

use super::XorShift;

/// A live image and a durable one, and the changes in between, oldest first.
#[derive(Debug, Clone)]
pub struct CrashImage {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Change>,
}

#[derive(Debug, Clone)]
enum Change {
    Write(usize, Vec<u8>),
    /// A write that was durable when it returned (FUA): a power cut keeps it whole,
    /// after whatever older changes it keeps.
    DurableWrite(usize, Vec<u8>),
    SetLen(usize),
}

impl CrashImage {
    /// An image whose every byte is durable.
    pub fn new(image: Vec<u8>) -> CrashImage {
        CrashImage {
            durable: image.clone(),
            live: image,
            pending: Vec::new(),
        }
    }

    /// What reads see.
    pub fn live(&self) -> &[u8] {
        &self.live
    }

    /// Writes `data` at `offset`, growing the image if it ends past it.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        let end = offset + data.len();
        if self.live.len() < end {
            self.live.resize(end, 0);
        }
        self.live[offset..end].copy_from_slice(data);
        self.pending.push(Change::Write(offset, data.to_vec()));
    }

    /// Writes `data` at `offset` durably (FUA): it survives a power cut, though older
    /// unsynced changes need not.
    pub fn write_durable(&mut self, offset: usize, data: &[u8]) {
        self.write(offset, data);
        if let Some(Change::Write(at, bytes)) = self.pending.pop() {
            self.pending.push(Change::DurableWrite(at, bytes));
        }
    }

    pub fn set_len(&mut self, len: usize) {
        self.live.resize(len, 0);
        self.pending.push(Change::SetLen(len));
    }

    /// Makes everything durable (a successful sync).
    pub fn sync(&mut self) {
        for change in self.pending.drain(..) {
            apply(&mut self.durable, &change, usize::MAX);
        }
    }

    /// Whether anything is not yet durable.
    pub fn is_dirty(&self) -> bool {
        !self.pending.is_empty()
    }

    /// What a restart finds after a power cut: the durable image plus, in order, a
    /// random subset of the changes since: each write kept whole, dropped, or torn at
    /// a 512-byte boundary (a prefix survives), each length change kept or dropped.
    pub fn after_power_cut(&self, seed: u64) -> Vec<u8> {
        let mut rng = XorShift::new(seed);
        let mut image = self.durable.clone();
        for change in &self.pending {
            let keep = match change {
                Change::Write(_, data) => match rng.next() % 3 {
                    0 => 0,
                    1 => data.len(),
                    _ => (rng.next() as usize % (data.len() / 512 + 1)) * 512,
                },
                Change::DurableWrite(..) => usize::MAX,
                Change::SetLen(_) => usize::from(rng.next() % 2 == 0) * usize::MAX,
            };
            if keep > 0 {
                apply(&mut image, change, keep);
            }
        }
        image
    }
}

/// Applies `change`, a write only up to its first `keep` bytes.
fn apply(image: &mut Vec<u8>, change: &Change, keep: usize) {
    match change {
        Change::Write(offset, data) | Change::DurableWrite(offset, data) => {
            let data = &data[..keep.min(data.len())];
            let end = offset + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[*offset..end].copy_from_slice(data);
        }
        Change::SetLen(len) => image.resize(*len, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_write_survives_every_cut_and_older_unsynced_ones_need_not() {
        let mut img = CrashImage::new(vec![0; 4096]);
        img.write(0, &[1; 4096]);
        img.write_durable(1024, &[2; 1024]);
        let mut seen_lost = false;
        for seed in 1..200 {
            let after = img.after_power_cut(seed);
            assert!(after[1024..2048].iter().all(|&b| b == 2), "seed {seed}");
            seen_lost |= after[0] == 0;
        }
        assert!(seen_lost, "the older unsynced write always survived");
    }

    #[test]
    fn synced_bytes_survive_and_unsynced_ones_may_tear_at_512() {
        let mut img = CrashImage::new(vec![0; 4096]);
        img.write(0, &[1; 1024]);
        img.sync();
        img.write(1024, &[2; 2048]);
        assert!(img.is_dirty());
        let mut seen_torn = false;
        for seed in 0..64 {
            let after = img.after_power_cut(seed);
            assert_eq!(&after[..1024], &[1; 1024][..], "synced bytes lost");
            let kept = after[1024..3072].iter().take_while(|&&b| b == 2).count();
            assert_eq!(kept % 512, 0, "torn inside a 512-byte block");
            assert!(after[1024 + kept..3072].iter().all(|&b| b == 0));
            seen_torn |= kept > 0 && kept < 2048;
        }
        assert!(seen_torn, "no seed tore the write");
    }

    #[test]
    fn a_length_change_is_durable_only_after_a_sync() {
        let mut img = CrashImage::new(vec![7; 100]);
        img.set_len(10);
        assert_eq!(img.live().len(), 10);
        let lengths: std::collections::BTreeSet<usize> =
            (0..32).map(|s| img.after_power_cut(s).len()).collect();
        assert_eq!(lengths.into_iter().collect::<Vec<_>>(), vec![10, 100]);
        img.sync();
        assert_eq!(img.after_power_cut(3).len(), 10);
    }
}
