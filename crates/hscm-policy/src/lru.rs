//! A map that remembers recency: O(1) lookup, touch, insert and eviction of the least
//! recently used entry. Nodes live in a slab (no per-entry allocation after warm-up).

use std::hash::Hash;

use rustc_hash::FxHashMap as HashMap;

const NIL: u32 = u32::MAX;

struct Node<K, V> {
    key: K,
    value: V,
    prev: u32,
    next: u32,
}

/// Least-recently-used ordered map. `head` is the most recent entry.
pub struct Lru<K, V> {
    index: HashMap<K, u32>,
    nodes: Vec<Node<K, V>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
}

impl<K: Copy + Eq + Hash, V> Default for Lru<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Copy + Eq + Hash, V> Lru<K, V> {
    pub fn new() -> Self {
        Self {
            index: HashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    /// The value, without changing recency.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.index.get(key).map(|&i| &self.nodes[i as usize].value)
    }

    /// The value, mutable, without changing recency.
    pub fn peek_mut(&mut self, key: &K) -> Option<&mut V> {
        let i = *self.index.get(key)?;
        Some(&mut self.nodes[i as usize].value)
    }

    /// The value, made most recent.
    pub fn touch(&mut self, key: &K) -> Option<&mut V> {
        let i = *self.index.get(key)?;
        self.unlink(i);
        self.push_front(i);
        Some(&mut self.nodes[i as usize].value)
    }

    /// Inserts (or replaces) as most recent; returns the previous value.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(&i) = self.index.get(&key) {
            self.unlink(i);
            self.push_front(i);
            return Some(std::mem::replace(&mut self.nodes[i as usize].value, value));
        }
        let node = Node {
            key,
            value,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).expect("LRU holds at most 2^32-1 entries")
            }
        };
        self.index.insert(key, i);
        self.push_front(i);
        None
    }

    pub fn remove(&mut self, key: &K) -> Option<V>
    where
        V: Default,
    {
        let i = self.index.remove(key)?;
        self.unlink(i);
        self.free.push(i);
        Some(std::mem::take(&mut self.nodes[i as usize].value))
    }

    /// The least recently used entry, without removing it.
    pub fn oldest(&self) -> Option<(&K, &V)> {
        (self.tail != NIL).then(|| {
            let n = &self.nodes[self.tail as usize];
            (&n.key, &n.value)
        })
    }

    pub fn pop_oldest(&mut self) -> Option<(K, V)>
    where
        V: Default,
    {
        if self.tail == NIL {
            return None;
        }
        let key = self.nodes[self.tail as usize].key;
        self.remove(&key).map(|v| (key, v))
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.nodes.clear();
        self.free.clear();
        self.head = NIL;
        self.tail = NIL;
    }

    /// Keys from most to least recent.
    pub fn keys(&self) -> impl Iterator<Item = &K> + '_ {
        let mut at = self.head;
        std::iter::from_fn(move || {
            (at != NIL).then(|| {
                let n = &self.nodes[at as usize];
                at = n.next;
                &n.key
            })
        })
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            self.nodes[old as usize].prev = i;
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u32),
        Touch(u8),
        Remove(u8),
        PopOldest,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k % 16, v)),
            any::<u8>().prop_map(|k| Op::Touch(k % 16)),
            any::<u8>().prop_map(|k| Op::Remove(k % 16)),
            Just(Op::PopOldest),
        ]
    }

    proptest! {
        /// Against a Vec kept in recency order (front = most recent).
        #[test]
        fn behaves_like_a_recency_ordered_list(ops in proptest::collection::vec(op(), 0..300)) {
            let mut lru = Lru::new();
            let mut model: Vec<(u8, u32)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let old = model.iter().position(|e| e.0 == k).map(|p| model.remove(p).1);
                        model.insert(0, (k, v));
                        prop_assert_eq!(lru.insert(k, v), old);
                    }
                    Op::Touch(k) => {
                        let got = lru.touch(&k).map(|v| *v);
                        let want = model.iter().position(|e| e.0 == k).map(|p| {
                            let e = model.remove(p);
                            model.insert(0, e);
                            e.1
                        });
                        prop_assert_eq!(got, want);
                    }
                    Op::Remove(k) => {
                        let want = model.iter().position(|e| e.0 == k).map(|p| model.remove(p).1);
                        prop_assert_eq!(lru.remove(&k), want);
                    }
                    Op::PopOldest => {
                        prop_assert_eq!(lru.pop_oldest(), model.pop());
                    }
                }
                prop_assert_eq!(lru.len(), model.len());
                let keys: Vec<u8> = lru.keys().copied().collect();
                let want: Vec<u8> = model.iter().map(|e| e.0).collect();
                prop_assert_eq!(keys, want);
                prop_assert_eq!(lru.oldest().map(|(k, v)| (*k, *v)), model.last().copied());
            }
        }
    }
}
