//! The operations a run replays: generated YCSB phases or recorded operation traces.

use std::path::Path;

use anyhow::Result;
use hscm_trace::KvOp;

use super::*;

/// The operations a run replays, read before anything is created so a bad trace
/// leaves nothing behind.
pub(super) struct Replay {
    /// Label of the run: the trace's file name.
    pub(super) label: String,
    pub(super) path: String,
    pub(super) load: Vec<KvOp>,
    /// The trace's first --warmup-ops operations, replayed unmeasured.
    pub(super) warmup: Vec<KvOp>,
    pub(super) run: Vec<KvOp>,
    pub(super) keys_never_loaded: u64,
    /// Distinct keys the load trace writes.
    pub(super) load_inserts: u64,
}

fn read_trace(path: &Path, value_len: usize) -> Result<Vec<KvOp>> {
    let ops = hscm_trace::read_op_trace(path, value_len)?;
    anyhow::ensure!(
        !ops.is_empty(),
        "{} holds no operations (only blank lines and comments)",
        path.display()
    );
    Ok(ops)
}

fn op_key(op: &KvOp) -> &str {
    match op {
        KvOp::Read(k) | KvOp::Update(k, _) | KvOp::Insert(k, _) | KvOp::Delete(k) => k,
    }
}

impl Replay {
    pub(super) fn read(a: &KvRunArgs, path: &Path) -> Result<Replay> {
        let load = match &a.load_trace {
            Some(p) => read_trace(p, a.value_len)?,
            None => Vec::new(),
        };
        let mut run = read_trace(path, a.value_len)?;
        let warm_len = usize::try_from(a.warmup_ops.unwrap_or(0)).unwrap_or(usize::MAX);
        anyhow::ensure!(
            warm_len < run.len(),
            "{} holds {} operations, none left to measure after --warmup-ops {warm_len}",
            path.display(),
            run.len()
        );
        let warmup: Vec<KvOp> = run.drain(..warm_len).collect();
        if let Some(n) = a.ops {
            run.truncate(usize::try_from(n).unwrap_or(usize::MAX));
        }
        // Which keys the store holds when each operation comes, in trace order.
        let mut held: std::collections::HashSet<&str> = load
            .iter()
            .filter(|op| matches!(op, KvOp::Insert(..) | KvOp::Update(..)))
            .map(op_key)
            .collect();
        let load_inserts = held.len() as u64;
        let loaded: Vec<String> = (0..a.records).map(ycsb_key).collect();
        held.extend(loaded.iter().map(String::as_str));
        let mut never = std::collections::HashSet::new();
        for op in warmup.iter().chain(&run) {
            match op {
                KvOp::Insert(k, _) => {
                    held.insert(k);
                }
                other if !held.contains(op_key(other)) => {
                    never.insert(op_key(other));
                }
                _ => {}
            }
        }
        let keys_never_loaded = never.len() as u64;
        let label = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(Replay {
            label,
            path: path.display().to_string(),
            load,
            warmup,
            run,
            keys_never_loaded,
            load_inserts,
        })
    }

    pub(super) fn largest_value(&self) -> usize {
        self.load
            .iter()
            .chain(&self.run)
            .map(|op| match op {
                KvOp::Update(_, n) | KvOp::Insert(_, n) => *n,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }
}
