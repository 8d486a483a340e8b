//! The `hscm` command. Thin: every capability lives in a library crate.

#[macro_use]
extern crate hscm_sweep;

mod bench_cmd;
mod errors;
mod mount_cmd;
mod mount_helper;
mod nbd_cmd;
mod serve_cmd;
mod service_cmd;
mod sim_cmd;
mod volume_cmd;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};

use hscm_lab::{kv, scratch, units};

/// hscm: the DRAM + storage-class-memory + flash hierarchy, real and measurable.
///
/// Start with `hscm volume create`, then `hscm bench volume` to see what it does on
/// this machine, or `hscm reproduce` to run every experiment and write the report.
/// Set HSCM_LOG=info (or debug) for more detail on standard error.
#[derive(Parser)]
#[command(name = "hscm", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create, inspect and check durable hybrid RAM volumes.
    #[command(subcommand)]
    Volume(volume_cmd::VolumeCmd),
    /// Benchmarks: ours against baselines measured in the same run.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCmd),
    /// Serve a volume to local processes over shared-memory queues (submission and
    /// completion rings plus a data buffer per client; docs/ring.md). Rust clients use
    /// the hscm-ring crate, C programs include/hscm_ring.h.
    ///
    /// Example: hscm serve data.hscm --shm data   (clients connect to "data")
    Serve(serve_cmd::ServeArgs),
    /// Serve a volume as an NBD export (qemu, nbdinfo, nbdcopy, nbdfuse, fio's nbd
    /// engine, the kernel's nbd client). Prints the URI it serves on standard output;
    /// stops cleanly on SIGINT/SIGTERM. Started by libnbd tools through systemd socket
    /// activation too: `nbdinfo -- [ hscm nbd data.hscm ]`.
    ///
    /// Example: hscm nbd data.hscm --socket /run/data.sock
    ///
    /// and from another shell: nbdinfo 'nbd+unix:///?socket=/run/data.sock'
    Nbd(nbd_cmd::NbdArgs),
    /// Mount a volume's file system (FUSE): a directory that reads at RAM speed and,
    /// in immediate mode, keeps every write, create and rename it acknowledged across
    /// a power cut. Serves from a background process unless --foreground; usable at
    /// once, while the volume warms. Make the volume with `hscm volume create --fs`.
    ///
    /// Example: hscm volume create logs.hscm --size 2G --fs && hscm mount logs.hscm /var/log/app
    Mount(mount_cmd::MountArgs),
    /// Unmount an `hscm mount` and wait until its process has committed and closed
    /// the volume.
    ///
    /// Example: hscm umount /var/log/app
    Umount(mount_cmd::UmountArgs),
    /// What every running `hscm nbd`, `mount` and `serve` of this user is doing: what
    /// it serves and where, size and use, load, durability, dirty and journal state,
    /// tier hit ratios, device writes, clients, and health (why it refuses writes).
    ///
    /// Example: hscm status /var/log --json
    Status(service_cmd::StatusArgs),
    /// Configuration files of the long-running commands (`--config FILE`).
    #[command(subcommand)]
    Config(service_cmd::ConfigCmd),
    /// Energy-aware key-value store over several devices (after the Sprint-AEP paper): Standard
    /// (every device active) against Sprint (a few primaries absorb the rest).
    #[command(subcommand)]
    Kv(KvCmd),
    /// Simulators for memory nobody can buy (`hscm sim memory compare --help`).
    #[command(subcommand)]
    Sim(sim_cmd::SimCmd),
    /// Convert and generate traces (scripts/capture-traces.sh captures real programs with valgrind).
    #[command(subcommand)]
    Trace(sim_cmd::TraceCmd),
    /// Run a parameter sweep over a simulator: a TOML spec (base parameters, grid or
    /// zipped axes, seeds) run on local processes, Dask or Ray into a Parquet table,
    /// resumed where a killed run stopped. Needs the hscm Python package
    /// (scripts/python-env.sh).
    ///
    /// Example: hscm sweep examples/warm_sweep.toml --executor local --out warm-sweep
    Sweep(hscm_sweep::sweep::SweepArgs),
    Reproduce(hscm_report::ReproduceArgs),
    /// Print a shell completion script: `hscm completions bash > /etc/bash_completion.d/hscm`
    /// (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or with --dir write one page per command there.
    ///
    /// Example: hscm man | man -l -     or     hscm man --dir /usr/local/share/man/man1
    Man {
        /// Write hscm.1 and hscm-COMMAND.1 for every command into this directory.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Helpers for the test suite (not a stable interface).
    #[command(subcommand, hide = true)]
    Debug(hscm_lab::crash_writers::Writer),
}

#[derive(Subcommand)]
enum KvCmd {
    /// Create an empty store in DIR: a manifest and one directory per device.
    ///
    /// Example: hscm kv create /srv/kv --devices 4
    Create {
        /// Directory of the new store (created if absent).
        dir: PathBuf,
        /// Devices: one directory each, holding that device's logs.
        #[arg(long, default_value_t = 4)]
        devices: usize,
    },
    /// Read every log of a store (home logs and buffer logs) without changing it;
    /// exits non-zero naming file and byte of any damaged record.
    Check {
        /// The store's directory.
        dir: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Load a YCSB dataset on scratch devices, warm up, then measure one mode on one
    /// workload: throughput, read/write p99, modelled energy, EDP, idle-device reads.
    ///
    /// Example: hscm kv bench --mode sprint --workload a-t --json
    Bench(kv::KvBenchArgs),
    /// Every mode on every workload, equal-time energy over the slowest run, printed
    /// beside the paper's figures.
    ///
    /// Example: hscm kv compare --workloads a-t,a --records 10000 --ops 20000
    Compare(kv::KvCompareArgs),
}

/// A page's SYNOPSIS line with each option's value (`[--durability <DURABILITY>]`):
/// clap_mangen's own names options alone (`[--durability]`), which reads as if they
/// took none.
fn synopsis(cmd: &clap::Command, name: &str) -> String {
    let mut line = vec![name.to_string()];
    let value = |arg: &clap::Arg| -> Option<String> {
        arg.get_action().takes_values().then(|| {
            let names = arg.get_value_names().map(|v| v.join(" "));
            format!(
                "<{}>",
                names.unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
            )
        })
    };
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let mut part = match (arg.get_long(), arg.get_short()) {
            _ if arg.is_positional() => value(arg).unwrap_or_default(),
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => continue,
        };
        if let (false, Some(v)) = (arg.is_positional(), value(arg)) {
            part = format!("{part} {v}");
        }
        if matches!(
            arg.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        ) {
            part.push_str("...");
        }
        line.push(if arg.is_required_set() {
            part
        } else {
            format!("[{part}]")
        });
    }
    if cmd.has_subcommands() {
        line.push("<COMMAND>".into());
    }
    line.join(" ")
}

/// The manual: one page to standard output, or every command's page into `dir`.
fn man_pages(dir: Option<&std::path::Path>) -> Result<()> {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        let usage = synopsis(&cmd, "hscm");
        clap_mangen::Man::new(cmd.override_usage(usage)).render(&mut page)?;
        out!("{}", String::from_utf8_lossy(&page))?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fn write_all(cmd: clap::Command, name: String, dir: &std::path::Path) -> Result<usize> {
        let mut page = Vec::new();
        let usage = synopsis(&cmd, &name);
        clap_mangen::Man::new(cmd.clone().name(name.clone()).override_usage(usage))
            .render(&mut page)?;
        scratch::write_output(&dir.join(format!("{name}.1")), &page)?;
        let mut n = 1;
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            n += write_all(sub.clone(), format!("{name}-{}", sub.get_name()), dir)?;
        }
        Ok(n)
    }
    let n = write_all(cmd, "hscm".into(), dir)?;
    outln!("{n} manual pages in {}", dir.display())?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // fuser's own unmount at the end of a session is expected to find nothing
            // (hscm_fuse::mount), and says so at warn.
            tracing_subscriber::EnvFilter::try_from_env("HSCM_LOG")
                .unwrap_or_else(|_| "warn,fuser=error".into()),
        )
        .with_writer(std::io::stderr)
        // No colour codes in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Read before parsing: a command given --json answers in JSON even when it fails.
    let json_wanted = std::env::args_os().any(|a| a == "--json");
    // `--config FILE` of a long-running command supplies the flags the command line
    // leaves out.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // mount(8) and fstab (`-t fuse.hscm`) call with a helper's convention.
    let command = Cli::command();
    if mount_helper::is_helper_call(&argv, |a| {
        a.to_str()
            .is_some_and(|a| command.find_subcommand(a).is_some())
    }) {
        match mount_helper::to_mount_argv(&argv) {
            Ok(Some(mount)) => {
                mount_helper::remember(&mount);
                argv = mount;
            }
            Ok(None) => return std::process::ExitCode::SUCCESS,
            Err(e) => {
                note!("hscm: error: {}", errors::render_error(&e));
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let argv = match hscm_service::config::merge(argv, &Cli::command()) {
        Ok(argv) => argv,
        Err(e) => {
            let e = anyhow::Error::from(e);
            if json_wanted {
                let _ = hscm_lab::out::json(&errors::error_json(&e));
            }
            note!("hscm: error: {}", errors::render_error(&e));
            return std::process::ExitCode::FAILURE;
        }
    };
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        // Help and version are answers, not failures: clap prints them as asked.
        Err(e) if !e.use_stderr() || !json_wanted => e.exit(),
        Err(e) => {
            let _ = hscm_lab::out::json(&errors::usage_error_json(&e));
            e.exit()
        }
    };
    let ran = run(cli);
    hscm_lab::scratch::let_a_signal_end_the_process();
    match ran {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`hscm … | head -1`): what it wanted, it has.
        Err(e) if errors::is_closed_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if json_wanted {
                // Best effort: standard output may be what failed.
                let _ = hscm_lab::out::json(&errors::error_json(&e));
            }
            note!("hscm: error: {}", errors::render_error(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Volume(cmd) => volume_cmd::run(cmd),
        Command::Serve(a) => serve_cmd::serve(&a),
        Command::Nbd(a) => nbd_cmd::serve(&a),
        Command::Mount(a) => mount_cmd::mount(&a),
        Command::Umount(a) => mount_cmd::umount(&a),
        Command::Status(a) => service_cmd::status(&a),
        Command::Config(c) => service_cmd::config(&c, &Cli::command()),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "hscm", &mut buf);
            out!("{}", String::from_utf8_lossy(&buf))?;
            Ok(())
        }
        Command::Man { dir } => man_pages(dir.as_deref()),
        Command::Kv(KvCmd::Create { dir, devices }) => {
            hscm_kv::KvStore::create(&dir, devices, None)?;
            outln!("created a {devices}-device store in {}", dir.display())?;
            Ok(())
        }
        Command::Kv(KvCmd::Check { dir, json }) => {
            let report = hscm_kv::check(&dir)?;
            hscm_lab::out::emit(&report, json, |r| {
                if !r.files.is_empty() {
                    outln!("{r}")?;
                }
                Ok(())
            })?;
            match report.errors.first() {
                Some(e) => anyhow::bail!("{} problem(s); first: {e}", report.errors.len()),
                None => Ok(()),
            }
        }
        Command::Kv(KvCmd::Bench(a)) => hscm_sweep::experiment::run_and_print(&a),
        Command::Kv(KvCmd::Compare(a)) => hscm_sweep::experiment::run_and_print(&a),
        Command::Sweep(a) => a.run(),
        Command::Reproduce(a) => a.run(),
        Command::Debug(writer) => writer.run(),
        Command::Bench(cmd) => bench_cmd::run(cmd),
        Command::Sim(cmd) => sim_cmd::run_sim(cmd),
        Command::Trace(cmd) => sim_cmd::run_trace(cmd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag and argument of every command, hidden ones aside, says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "hscm", &mut missing);
        assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
    }

    /// Help speaks of papers by name, not by our tracker's or seed files' numbers.
    #[test]
    fn help_names_papers_not_our_tracker() {
        fn walk(cmd: &mut clap::Command, bad: &mut Vec<String>) {
            let help = cmd.render_long_help().to_string();
            for word in [
                "seed 0",
                "seed paper",
                "issue tracker",
                "(issue ",
                "issue 1",
                "issue 2",
            ] {
                if help.contains(word) {
                    bad.push(format!("{}: {word:?}", cmd.get_name()));
                }
            }
            for sub in cmd.get_subcommands_mut() {
                walk(sub, bad);
            }
        }
        let mut bad = Vec::new();
        walk(&mut Cli::command(), &mut bad);
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}
