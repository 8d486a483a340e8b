//! Where a network benchmark's two sides run on this machine's CPUs.
//!
//! A bench with a server "on the network" runs that server here, on the same cores as
//! the client and hscm. `Shared` leaves every process where the scheduler puts it (the
//! figures the benches have always given). `Split` stands in for two machines: the
//! remote side (the export's server and the delay relay) on the last CPU, the client
//! side (fio and hscm) on the others, so neither side's CPU time slows the other and a
//! point's bound shows as the side whose cores are full.

use anyhow::{bail, Context, Result};
use rustix::process::{sched_getaffinity, sched_setaffinity, CpuSet};
use serde::{Deserialize, Serialize};

/// How the two sides of a networked point share this machine's CPUs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every process anywhere (both sides share every core).
    Shared,
    /// The remote side on the last CPU, the client side on the others.
    Split,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Shared => "shared",
            Placement::Split => "split",
        }
    }
}

/// The CPUs of each side of a split point.
#[derive(Clone)]
pub struct Sides {
    pub client: CpuSet,
    pub remote: CpuSet,
    /// The CPU numbers of the client side (to count its busy time in /proc/stat).
    pub client_cpus: Vec<usize>,
}

impl Sides {
    /// The last CPU this process may run on for the remote side, the rest for the
    /// client; an error where fewer than two are allowed.
    pub fn split() -> Result<Sides> {
        let allowed = sched_getaffinity(None).context("reading this process's CPUs")?;
        let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
            .filter(|&c| allowed.is_set(c))
            .collect();
        let Some((&last, rest)) = cpus.split_last().filter(|(_, rest)| !rest.is_empty()) else {
            bail!(
                "--placement split needs at least two CPUs; this process may use {}",
                cpus.len()
            );
        };
        let mut client = CpuSet::new();
        rest.iter().for_each(|&c| client.set(c));
        let mut remote = CpuSet::new();
        remote.set(last);
        Ok(Sides {
            client,
            remote,
            client_cpus: rest.to_vec(),
        })
    }
}

/// Pins every thread of the running process `pid` to `cpus`; threads it starts later
/// inherit the pinning. (A child must not be spawned from a short-lived pinned thread
/// instead: `--exit-with-parent`'s parent-death signal fires when the spawning
/// *thread* ends.)
pub fn pin_process(pid: u32, cpus: &CpuSet) -> Result<()> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("listing the threads of process {pid}"))?;
    for task in tasks {
        let tid = task?.file_name();
        let tid: i32 = tid
            .to_string_lossy()
            .parse()
            .context("a thread id in /proc")?;
        let Some(tid) = rustix::process::Pid::from_raw(tid) else {
            continue;
        };
        // A thread that ended since the listing is no longer there to pin.
        match sched_setaffinity(Some(tid), cpus) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(e) => return Err(e).with_context(|| format!("pinning thread {tid:?} of {pid}")),
        }
    }
    Ok(())
}

/// Runs `f` on a thread pinned to `cpus`: the threads it starts inherit the pinning.
pub fn on_cpus<T: Send>(cpus: &CpuSet, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            sched_setaffinity(None, cpus).context("pinning a thread to its side's CPUs")?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("a pinned thread panicked"))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_on_its_cpus_only_and_the_caller_is_left_alone() {
        let before = sched_getaffinity(None).unwrap();
        let Ok(sides) = Sides::split() else {
            return; // one CPU: nothing to split (the error is the behaviour)
        };
        let seen = on_cpus(&sides.remote, || Ok(sched_getaffinity(None)?)).unwrap();
        assert_eq!(seen.count(), 1);
        assert!(sides
            .remote
            .is_set((0..CpuSet::MAX_CPU).find(|&c| seen.is_set(c)).unwrap()));
        let child = on_cpus(&sides.client, || {
            Ok(std::thread::spawn(|| sched_getaffinity(None).unwrap())
                .join()
                .unwrap())
        })
        .unwrap();
        assert_eq!(child.count(), sides.client_cpus.len() as u32);
        assert!(!sides.client_cpus.iter().any(|&c| sides.remote.is_set(c)));
        assert_eq!(sched_getaffinity(None).unwrap().count(), before.count());
    }

    #[test]
    fn a_pinned_process_keeps_running_on_its_cpus() {
        let Ok(sides) = Sides::split() else {
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        pin_process(child.id(), &sides.remote).unwrap();
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        let seen = sched_getaffinity(Some(pid)).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(seen.count(), 1);
        assert!(sides.client_cpus.iter().all(|&c| !seen.is_set(c)));
    }
}
