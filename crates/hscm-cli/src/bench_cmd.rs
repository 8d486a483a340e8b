//! `hscm bench …`: which benchmark. Each is an experiment beside its code (flags, a
//! run returning data, a text renderer); this file only names them.

use anyhow::Result;
use clap::Subcommand;

use hscm_lab::experiments::{RestartArgs, TierBenchArgs, VolumeBenchArgs};
use hscm_lab::{fs, mirror, nbd, nbd_strangers, remote, ring};
use hscm_sweep::commands::{CacheBenchArgs, MemsimBenchArgs, MemsimValidateArgs};
use hscm_sweep::experiment::run_and_print;

#[derive(Subcommand)]
pub enum BenchCmd {
    Tier(TierBenchArgs),
    MemsimValidate(MemsimValidateArgs),
    Memsim(MemsimBenchArgs),
    Cache(CacheBenchArgs),
    Volume(VolumeBenchArgs),
    Ring(ring::RingBenchArgs),
    Nbd(nbd::NbdBenchArgs),
    NbdStrangers(nbd_strangers::StrangersArgs),
    Fs(fs::FsBenchArgs),
    FsWork(fs::FsWorkArgs),
    Remote(remote::RemoteBenchArgs),
    Mirror(mirror::MirrorBenchArgs),
    Restart(RestartArgs),
}

/// Runs one benchmark.
pub fn run(cmd: BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Tier(a) => run_and_print(&a),
        BenchCmd::MemsimValidate(a) => run_and_print(&a),
        BenchCmd::Memsim(a) => run_and_print(&a),
        BenchCmd::Cache(a) => run_and_print(&a),
        BenchCmd::Volume(a) => run_and_print(&a),
        BenchCmd::Ring(a) => run_and_print(&a),
        BenchCmd::Nbd(a) => run_and_print(&a),
        BenchCmd::NbdStrangers(a) => run_and_print(&a),
        BenchCmd::Fs(a) => run_and_print(&a),
        BenchCmd::FsWork(a) => run_and_print(&a),
        BenchCmd::Remote(a) => run_and_print(&a),
        BenchCmd::Mirror(a) => run_and_print(&a),
        BenchCmd::Restart(a) => run_and_print(&a),
    }
}
