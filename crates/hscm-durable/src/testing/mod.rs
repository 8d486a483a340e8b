//! The crash model every engine's tests share: an image with a live copy (what reads
//! see) and a durable one (what a sync covered), torn by a power cut; and media made
//! of such images, with a namespace that is durable only after a directory sync.

mod countdown;
mod disks;
mod image;

pub use countdown::Countdown;
pub use disks::FaultyDisks;
pub use image::CrashImage;

/// xorshift64: a crash model needs no more randomness than this, and no dependency.
pub(crate) struct XorShift(u64);

impl XorShift {
    /// Seeds through a splitmix64 step, so small neighbouring seeds diverge at once.
    pub(crate) fn new(seed: u64) -> XorShift {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        XorShift((z ^ (z >> 31)) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
