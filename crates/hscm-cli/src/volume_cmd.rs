//! `hscm volume …`: create, inspect, check and warm volumes.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Subcommand;
use hscm_serving::{CreateSpec, Description, Layout};
use hscm_volume::Durability;

use hscm_lab::units;
use hscm_lab::volume::time_load;

#[derive(Subcommand)]
pub enum VolumeCmd {
    /// Create a volume: a 4 KiB header, two checkpoint slots, a write-ahead journal and
    /// the data area, in a new file (space is reserved up front) or on a block device.
    /// With --ram, a tiered volume instead: larger than RAM, every block on the file
    /// (its home), the hot ones also in that much DRAM, every write durable on home
    /// before it is acknowledged.
    ///
    /// Example: hscm volume create /var/lib/app.hscm --size 4G --chunk 1M
    ///
    /// Example: hscm volume create /srv/big.hscm --size 64G --ram 4G --policy s3fifo
    ///
    /// Example: hscm volume create nbd://storage1/vol0 --size 8G
    ///
    /// Example: hscm volume create /srv/a.hscm --size 8G --mirror nbd://b/a --mirror nbd://c/a
    Create {
        /// File to create (or, with --force, a block device to format), or the URI of
        /// an NBD export to be its home: nbd://host[:port]/export, nbds://… (TLS),
        /// nbd+unix:///export?socket=PATH (docs/remote.md).
        path: PathBuf,
        /// Data area size (e.g. 512M, 4G); a multiple of 4 KiB.
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true)]
        size: u64,
        /// Unit of warm-up and locking after a restart (e.g. 256k, 1M, 4M).
        #[arg(long, default_value = "1M", value_parser = units::parse_size, allow_hyphen_values = true)]
        chunk: u64,
        /// Default durability: `immediate` (a write returns once it survives power
        /// loss) or `on-flush` (block-device semantics: durable after a flush).
        #[arg(long, default_value = "immediate")]
        durability: Durability,
        /// Write-ahead journal size (0: none, every write goes straight home, as the
        /// paper's design). With a journal, concurrent writers share one sequential
        /// write and one sync per batch, and a background checkpoint writes changes
        /// home in large sequential spans. It pays off for random writes when it is
        /// about as large as the data they touch (the hot set); smaller, it costs more
        /// than it saves (docs/design.md). At least 256K. After a crash, opening
        /// replays at most one journal's worth.
        #[arg(long, default_value = "0", value_parser = units::parse_size, allow_hyphen_values = true)]
        journal: u64,
        /// Overwrite an existing file at PATH (never one another process has open).
        #[arg(long)]
        force: bool,
        /// Create it even though it is larger than this machine's memory and swap (for
        /// another machine: the whole volume lives in RAM, so it cannot open here).
        #[arg(long)]
        larger_than_ram: bool,
        /// Format it with hscm's file system, for `hscm mount` (root directory owned by
        /// the caller).
        #[arg(long)]
        fs: bool,
        /// Mirror the home on an NBD export on another machine (repeat for up to
        /// four): a write is acknowledged only once this file and every member in
        /// sync hold it durably (DRBD's protocol C). Each export must hold the
        /// volume plus 1 MiB of mirror metadata and 4 KiB; its first block must be
        /// zero (docs/mirror.md).
        #[arg(long = "mirror", value_name = "URI")]
        mirror: Vec<String>,
        /// Members (this file included) that must be in sync for a write to be
        /// acknowledged; 0, the default, is a majority, which keeps a cut-off primary
        /// from going on alone. 1 keeps writing with every remote away, at the cost
        /// that a promoted replica may lack what was written meanwhile.
        #[arg(long, default_value = "0", requires = "mirror")]
        quorum: u8,
        /// Without quorum: `io-error` fails writes at once (ETIMEDOUT; reads go on),
        /// `suspend-io` holds them until enough members are back (at most a minute).
        #[arg(long, default_value = "io-error", value_parser = hscm_durable::mirror::OnNoQuorum::parse, requires = "mirror")]
        on_no_quorum: hscm_durable::mirror::OnNoQuorum,
        #[command(flatten)]
        tier: hscm_sweep::tier_flags::TierFlags,
    },
    /// Make a mirror member the primary (after the primary's machine died, or to move
    /// it): its generation rises, every member named is claimed (an old primary still
    /// running finds out at its next write and turns read-only) and gets a full copy
    /// once this member is opened (`hscm nbd PATH`, `hscm mount PATH`). Refused,
    /// unless --force, when the file is open in another process (stop the server that
    /// exported it first), when this copy is behind, when a member was promoted since,
    /// or when fewer than a majority of the members can be reached: with two members
    /// that is always so, and only the operator can vouch that the other is dead.
    ///
    /// Example: hscm volume promote /srv/b.hscm --mirror nbd://c/b --force
    Promote {
        /// The member's local file or device.
        path: PathBuf,
        /// The other members as this machine reaches them (NBD URIs, repeatable).
        #[arg(long = "mirror", value_name = "URI")]
        mirror: Vec<String>,
        /// Promote although a check failed.
        #[arg(long)]
        force: bool,
        /// Print JSON (a stable contract) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A mirror member's header: the generation, the primary, each member and its
    /// state as last recorded (a running primary's `hscm status` shows them live).
    ///
    /// Example: hscm volume mirror /srv/a.hscm --json
    Mirror {
        /// The member's local file or device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A tiered volume's counters, as it saved them: while a server runs it (every few
    /// seconds, `state: open`) and at every clean close (`closed`). Hits, partial hits
    /// and misses per tier and operation, bypasses by reason, promotions, evictions,
    /// occupancy, device reads, writes and syncs; this session's and the volume's
    /// lifetime. Reads the file without opening the volume, so it works while the volume
    /// is served.
    ///
    /// Example: hscm volume stats /srv/big.hscm --json
    Stats {
        /// The tiered volume's file or device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    Replay(hscm_sweep::replay::ReplayArgs),
    /// Show a volume's header and geometry; with --load, open it and time the warm-up.
    Info {
        /// The volume's file or block device.
        path: PathBuf,
        /// Open the volume read-only and warm it into RAM, with a progress bar.
        #[arg(long)]
        load: bool,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Validate header (magic, version, checksum) and geometry against the backing
    /// store. Exits non-zero with the reason on any problem.
    Check {
        /// The volume's file or block device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `hscm volume` command.
pub fn run(cmd: VolumeCmd) -> Result<()> {
    match cmd {
        VolumeCmd::Create {
            path,
            size,
            chunk,
            durability,
            journal,
            force,
            larger_than_ram,
            fs,
            mirror,
            quorum,
            on_no_quorum,
            tier,
        } => {
            let chunk_size = u32::try_from(chunk).context("--chunk must be below 4 GiB")?;
            let layout = match (fs, tier.ram) {
                (true, ram_budget) => Layout::FileSystem {
                    chunk_size,
                    journal_size: journal,
                    owner: (
                        rustix::process::getuid().as_raw(),
                        rustix::process::getgid().as_raw(),
                    ),
                    ram_budget,
                },
                (false, Some(ram)) => Layout::Tiered {
                    config: tier.config(size, ram)?,
                    fast_path: tier.fast_tier.clone(),
                },
                (false, None) => Layout::Flat {
                    chunk_size,
                    journal_size: journal,
                },
            };
            let spec = CreateSpec {
                size,
                durability,
                layout,
                overwrite: force,
                larger_than_ram,
                mirror: (!mirror.is_empty()).then_some(hscm_serving::MirrorSpec {
                    members: mirror,
                    quorum,
                    on_no_quorum,
                }),
            };
            let created = hscm_serving::create(&path, &spec)?;
            outln!("{created}")?;
            Ok(())
        }
        VolumeCmd::Info { path, load, json } => info(&path, json, load),
        VolumeCmd::Promote {
            path,
            mirror,
            force,
            json,
        } => promote(&path, mirror, force, json),
        VolumeCmd::Mirror { path, json } => mirror_header(&path, json),
        VolumeCmd::Check { path, json } => {
            let found = hscm_serving::describe(&path)
                .with_context(|| format!("check of {} failed", path.display()))?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&found.to_json())?)?;
            } else {
                outln!("{}", found.check_line())?;
            }
            Ok(())
        }
        VolumeCmd::Stats { path, json } => stats(&path, json),
        VolumeCmd::Replay(a) => hscm_sweep::experiment::run_and_print(&a),
    }
}

/// Header and geometry; with `load`, also opens a flat volume and warms it, showing
/// progress.
pub fn info(path: &Path, json_out: bool, load: bool) -> Result<()> {
    let found = hscm_serving::describe(path)?;
    let mut out = found.to_json();
    if !json_out {
        outln!("{found}")?;
    }
    if let (true, Description::Flat { .. }) = (load, &found) {
        let timing = time_load(path, !json_out && std::io::stderr().is_terminal())?;
        out["load"] = serde_json::to_value(&timing)?;
        if !json_out {
            outln!("{timing}")?;
        }
    }
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    }
    Ok(())
}

/// `hscm volume stats`: the counters the volume saved.
pub fn stats(path: &Path, json: bool) -> Result<()> {
    let (config, saved) = hscm_serving::saved_counters(path)?;
    if json {
        let v = serde_json::json!({"path": path.display().to_string(), "config": config, "saved": saved});
        outln!("{v}")?;
        return Ok(());
    }
    match saved {
        Some(s) => outln!("{s}")?,
        None => outln!(
            "{}: no counters saved yet (they are saved while it is served and when it closes)",
            path.display()
        )?,
    }
    Ok(())
}

fn promote(path: &Path, members: Vec<String>, force: bool, json: bool) -> Result<()> {
    let done = hscm_durable::mirror::promote(
        path,
        &hscm_durable::mirror::PromoteOptions { members, force },
    )
    .with_context(|| format!("promoting {}", path.display()))?;
    if json {
        let members: Vec<_> = done
            .members
            .iter()
            .map(|(name, what)| serde_json::json!({"name": name, "result": what}))
            .collect();
        let out = serde_json::json!({
            "ok": true,
            "path": path.display().to_string(),
            "generation": done.generation,
            "members": members,
            "overridden": done.overridden,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        outln!(
            "promoted {} to primary at generation {}",
            path.display(),
            done.generation
        )?;
        for (name, what) in &done.members {
            outln!("  {name}: {what}")?;
        }
        for why in &done.overridden {
            outln!("  overridden (--force): {why}")?;
        }
    }
    Ok(())
}

fn mirror_header(path: &Path, json: bool) -> Result<()> {
    let h = hscm_durable::mirror::MirrorBackend::header_at(path)
        .with_context(|| format!("reading the mirror header of {}", path.display()))?;
    let role = if h.self_id == h.primary_id() {
        "primary"
    } else {
        "replica"
    };
    let me = |id: u64| id == h.self_id;
    if json {
        let members: Vec<_> = h
            .members
            .iter()
            .map(|m| serde_json::json!({"name": m.name, "state": m.state.name(), "this": me(m.id)}))
            .collect();
        let out = serde_json::json!({
            "ok": true,
            "path": path.display().to_string(),
            "role": role,
            "generation": h.generation,
            "epoch": h.epoch,
            "primary": h.primary,
            "clean": h.clean,
            "activity_log": h.activity_log,
            "quorum": h.needed(),
            "on_no_quorum": h.on_no_quorum.name(),
            "data_bytes": h.data_len,
            "chunk_bytes": h.chunk,
            "members": members,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        outln!(
            "{}: the {role}'s copy of a {} mirror, generation {}, epoch {}, primary {}, {} stop",
            path.display(),
            hscm_durable::units::human_bytes(h.data_len),
            h.generation,
            h.epoch,
            h.primary,
            if h.clean { "clean" } else { "no clean" }
        )?;
        if h.activity_log && h.self_id == h.primary_id() {
            outln!("  activity log kept: after a crash, only the extents written last are copied")?;
        }
        outln!(
            "  quorum {} of {} (on-no-quorum {})",
            h.needed(),
            h.members.len(),
            h.on_no_quorum.name()
        )?;
        for m in &h.members {
            outln!(
                "  {}{}: {}",
                m.name,
                if me(m.id) { " (this copy)" } else { "" },
                m.state.name()
            )?;
        }
    }
    Ok(())
}
