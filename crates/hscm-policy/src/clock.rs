//! CLOCK (second chance) over a fixed set of slots.

/// Second-chance replacement over slots `0..len`. A touched slot survives one sweep of
/// the hand.
pub struct Clock {
    referenced: Vec<u64>,
    len: usize,
    hand: usize,
}

impl Clock {
    pub fn new(len: usize) -> Self {
        Self {
            referenced: vec![0; len.div_ceil(64)],
            len,
            hand: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn touch(&mut self, slot: usize) {
        self.referenced[slot / 64] |= 1 << (slot % 64);
    }

    pub fn is_referenced(&self, slot: usize) -> bool {
        self.referenced[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Advances the hand to the first slot that is unreferenced and `eligible`,
    /// clearing reference bits on the way; None when no slot is eligible.
    pub fn victim(&mut self, mut eligible: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        // Two full sweeps: the first may only clear bits.
        for _ in 0..2 * self.len + 1 {
            let slot = self.hand;
            self.hand = (self.hand + 1) % self.len;
            if !eligible(slot) {
                continue;
            }
            if self.is_referenced(slot) {
                self.referenced[slot / 64] &= !(1 << (slot % 64));
            } else {
                return Some(slot);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_slots_get_a_second_chance() {
        let mut c = Clock::new(4);
        c.touch(0);
        c.touch(1);
        assert_eq!(c.victim(|_| true), Some(2));
        assert_eq!(c.victim(|_| true), Some(3));
        // 0 and 1 lost their bits on the first pass.
        assert_eq!(c.victim(|_| true), Some(0));
        assert!(!c.is_referenced(1));
    }

    #[test]
    fn respects_eligibility_and_reports_none() {
        let mut c = Clock::new(3);
        for s in 0..3 {
            c.touch(s);
        }
        assert_eq!(c.victim(|s| s == 2), Some(2));
        assert_eq!(c.victim(|_| false), None);
        assert_eq!(Clock::new(0).victim(|_| true), None);
    }
}
