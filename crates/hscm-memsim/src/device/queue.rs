//! The waiting requests of one kind (reads or writes) on one channel, kept per bank,
//! each bank's oldest first: a scheduling decision then visits banks, and within a
//! bank only as far as its oldest hit and oldest miss.

use super::Req;

#[derive(Clone, Default)]
pub(super) struct BankQueues {
    /// Indexed by bank within the channel.
    banks: Vec<Vec<Req>>,
    len: usize,
}

impl BankQueues {
    pub(super) fn new(banks: usize) -> Self {
        Self {
            banks: vec![Vec::new(); banks],
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every bank's queue, by bank within the channel.
    pub(super) fn banks(&self) -> &[Vec<Req>] {
        &self.banks
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Req> {
        self.banks.iter().flatten()
    }

    /// Adds a request to bank `local`, in age (id) order.
    pub(super) fn insert(&mut self, local: usize, req: Req) {
        let q = &mut self.banks[local];
        let pos = if q.last().is_none_or(|l| l.id <= req.id) {
            q.len()
        } else {
            q.partition_point(|x| x.id <= req.id)
        };
        q.insert(pos, req);
        self.len += 1;
    }

    pub(super) fn get_mut(&mut self, local: usize, i: usize) -> &mut Req {
        &mut self.banks[local][i]
    }

    pub(super) fn remove(&mut self, local: usize, i: usize) -> Req {
        self.len -= 1;
        self.banks[local].remove(i)
    }

    /// Keeps the requests for which `keep` holds.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Req) -> bool) {
        for q in &mut self.banks {
            q.retain(&mut keep);
        }
        self.len = self.banks.iter().map(Vec::len).sum();
    }
}
