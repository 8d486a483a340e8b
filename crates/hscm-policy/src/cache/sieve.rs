//! SIEVE.

use super::{CacheOutcome, CachePolicy};

/// SIEVE: one FIFO queue with a visited bit per object and a hand that moves from the
/// oldest object towards newer ones, clearing visited bits, evicting the first object
/// without one; new objects go in at the head.
pub struct SieveCache {
    capacity: u64,
    used: u64,
    index: rustc_hash::FxHashMap<u64, u32>,
    nodes: Vec<SieveNode>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    hand: u32,
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct SieveNode {
    key: u64,
    size: u64,
    visited: bool,
    /// Towards the head (newer).
    newer: u32,
    /// Towards the tail (older).
    older: u32,
}

impl SieveCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            index: Default::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            hand: NIL,
        }
    }

    fn unlink(&mut self, i: u32) {
        let SieveNode { newer, older, .. } = self.nodes[i as usize];
        if newer == NIL {
            self.head = older;
        } else {
            self.nodes[newer as usize].older = older;
        }
        if older == NIL {
            self.tail = newer;
        } else {
            self.nodes[older as usize].newer = newer;
        }
    }

    fn evict(&mut self, evicted: &mut impl FnMut(u64)) {
        let mut i = if self.hand == NIL {
            self.tail
        } else {
            self.hand
        };
        while self.nodes[i as usize].visited {
            self.nodes[i as usize].visited = false;
            i = self.nodes[i as usize].newer;
            if i == NIL {
                i = self.tail;
            }
        }
        self.hand = self.nodes[i as usize].newer;
        self.unlink(i);
        let n = self.nodes[i as usize];
        self.index.remove(&n.key);
        self.used -= n.size;
        self.free.push(i);
        evicted(n.key);
    }
}

impl SieveCache {
    fn insert_with(&mut self, key: u64, size: u64, evicted: &mut impl FnMut(u64)) -> CacheOutcome {
        if size > self.capacity {
            return CacheOutcome::Bypassed;
        }
        while self.used + size > self.capacity {
            self.evict(evicted);
        }
        let node = SieveNode {
            key,
            size,
            visited: false,
            newer: NIL,
            older: self.head,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if self.head == NIL {
            self.tail = i;
        } else {
            self.nodes[self.head as usize].newer = i;
        }
        self.head = i;
        self.index.insert(key, i);
        self.used += size;
        CacheOutcome::Inserted
    }
}

impl CachePolicy for SieveCache {
    fn lookup(&mut self, key: u64) -> bool {
        match self.index.get(&key) {
            Some(&i) => {
                self.nodes[i as usize].visited = true;
                true
            }
            None => false,
        }
    }
    inserts_through_insert_with!();
    fn used(&self) -> u64 {
        self.used
    }
}
