//! The service side of the long-running commands: their shared flags (`--metrics`,
//! `--config`), `hscm status`, and `hscm config check`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hscm_lab::units::human_bytes;
use hscm_service::registry::{self, Listed};
use hscm_service::{Clients, Identity, Service, Status};

/// Flags every long-running command takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServiceArgs {
    /// Serve Prometheus metrics (and the status as JSON, at /status) over HTTP on
    /// ADDR:PORT; a bare PORT or :PORT listens on loopback only.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Read this command's flags and arguments from the [nbd], [mount] or [serve]
    /// section of a TOML file (keys are the long flags: `dirty-max = "1G"`); flags on
    /// the command line win. `hscm config check FILE` checks one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ServiceArgs {
    /// Starts the service side for `frontend` serving `volume` at `address`.
    pub fn start(
        &self,
        frontend: &'static str,
        volume: &Path,
        address: String,
        fill: impl Fn(&mut Status) + Send + Sync + 'static,
    ) -> Result<Service> {
        let id = Identity {
            frontend,
            address,
            volume: std::fs::canonicalize(volume).unwrap_or_else(|_| volume.to_path_buf()),
        };
        let service = Service::start(id, fill, self.metrics.as_deref())?;
        if let Some(addr) = service.metrics_addr() {
            note!("metrics at http://{addr}/metrics");
        }
        Ok(service)
    }
}

/// The NBD server's own counters, for a snapshot.
pub fn nbd_counters(s: &mut Status, stats: &hscm_nbd::Stats) {
    use std::sync::atomic::Ordering::Relaxed;
    s.clients = Clients {
        connected: stats.connected.load(Relaxed),
        total: stats.connections.load(Relaxed),
    };
    s.errors
        .insert("request".into(), stats.errors.load(Relaxed));
    s.errors
        .insert("protocol".into(), stats.protocol_errors.load(Relaxed));
}

/// A served target's requests, for a snapshot.
pub fn target_ops(s: &mut Status, ops: &[hscm_block::OpSnapshot]) {
    s.ops = ops.iter().map(hscm_service::Op::from_snapshot).collect();
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// A volume, mount point or socket: show only the instance serving it. Without
    /// one, every instance this user runs on this machine (every user's, for root).
    pub target: Option<PathBuf>,
    /// Print JSON: one object for a TARGET, else an array.
    #[arg(long)]
    pub json: bool,
}

/// Whether `s` serves `target` (its volume, its mount point, or its socket).
fn serves(s: &Status, target: &Path) -> bool {
    let canonical = std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    let c = canonical.to_string_lossy();
    let t = target.to_string_lossy();
    s.volume == c || s.address == c || s.address == t || s.address.contains(&*c)
}

pub fn status(a: &StatusArgs) -> Result<()> {
    let own = hscm_durable::runtime::dir()?;
    let mut dirs = vec![(own.clone(), true)];
    if rustix::process::geteuid().is_root() {
        dirs.extend(
            registry::other_users_dirs()
                .into_iter()
                .filter(|d| *d != own)
                .map(|d| (d, false)),
        );
    }
    let mut running = Vec::new();
    for (dir, own) in &dirs {
        let listed = match registry::list(dir, *own) {
            Ok(l) => l,
            Err(e) if *own => return Err(e).with_context(|| format!("listing {}", dir.display())),
            Err(_) => continue,
        };
        for l in listed {
            match l {
                Listed::Running(s) => running.push(*s),
                Listed::Unreadable { socket, why } => {
                    note!("hscm: warning: {}: {why}", socket.display())
                }
            }
        }
    }
    running.sort_by_key(|s| s.pid);
    if let Some(target) = &a.target {
        let Some(found) = running.into_iter().find(|s| serves(s, target)) else {
            bail!(
                "no running hscm serves {} (`hscm status` lists every instance of this user)",
                target.display()
            );
        };
        return if a.json {
            hscm_lab::out::json(&found)
        } else {
            show(&found)
        };
    }
    if a.json {
        return hscm_lab::out::json(&running);
    }
    if running.is_empty() {
        outln!("no hscm instance is running (for this user)")?;
    }
    for s in &running {
        show(s)?;
    }
    Ok(())
}

fn show(s: &Status) -> Result<()> {
    outln!(
        "{} {} (pid {}): {} volume {}",
        s.frontend,
        s.address,
        s.pid,
        s.kind,
        s.volume
    )?;
    let used = s
        .used_bytes
        .map_or(String::new(), |u| format!(", {} used", human_bytes(u)));
    outln!(
        "  size {}{used}; {}; up {:.0} s",
        human_bytes(s.size_bytes),
        s.durability,
        s.uptime_s
    )?;
    if s.load.total_bytes > 0 {
        outln!(
            "  loaded {} of {} ({})",
            human_bytes(s.load.loaded_bytes),
            human_bytes(s.load.total_bytes),
            s.load.state
        )?;
    }
    match s.dirty_max_bytes {
        Some(max) => outln!(
            "  dirty {} of at most {}",
            human_bytes(s.dirty_bytes),
            human_bytes(max)
        )?,
        None if s.dirty_bytes > 0 => outln!("  dirty {}", human_bytes(s.dirty_bytes))?,
        None => {}
    }
    if let Some(j) = &s.journal {
        outln!(
            "  journal {} of {} in use, {} checkpoints",
            human_bytes(j.in_use_bytes),
            human_bytes(j.size_bytes),
            j.checkpoints
        )?;
    }
    outln!(
        "  device: {} writes ({}), {} syncs, {} reads",
        s.device.writes,
        human_bytes(s.device.written_bytes),
        s.device.syncs,
        s.device.reads
    )?;
    for t in &s.tiers {
        outln!(
            "  tier {}: {} hit ratio, {} of {} held, {} dirty",
            t.tier,
            t.hit_ratio()
                .map_or("no lookups yet".into(), |r| format!("{:.1}%", r * 100.0)),
            human_bytes(t.occupancy_bytes),
            human_bytes(t.capacity_bytes),
            human_bytes(t.dirty_bytes)
        )?;
    }
    if let Some(fs) = &s.fs {
        outln!(
            "  file system: {} free of {}, {} of {} inodes free, {} of file data in RAM",
            human_bytes(fs.free_bytes),
            human_bytes(fs.size_bytes),
            fs.free_files,
            fs.files,
            human_bytes(fs.ram_bytes)
        )?;
    }
    if s.frontend != "mount" {
        outln!(
            "  clients: {} connected, {} since start",
            s.clients.connected,
            s.clients.total
        )?;
    }
    let requests: u64 = s.ops.iter().map(|o| o.count).sum();
    let errors: u64 = s.errors.values().sum();
    outln!("  requests: {requests} served, {errors} errors")?;
    match (&s.health.ok, &s.health.reason) {
        (true, _) => outln!("  health: ok")?,
        (false, Some(why)) => outln!("  health: FAILED, refusing writes: {why}")?,
        (false, None) => outln!("  health: FAILED")?,
    }
    if let Some(m) = &s.metrics_address {
        outln!("  metrics: {m}")?;
    }
    Ok(())
}

#[derive(clap::Subcommand)]
pub enum ConfigCmd {
    /// Check a configuration file: every section, key and value, as the commands
    /// would read them. Errors name the file, line and key.
    Check {
        /// The TOML file, with [nbd], [mount] and [serve] sections.
        file: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn config(cmd: &ConfigCmd, root: &clap::Command) -> Result<()> {
    let ConfigCmd::Check { file, json } = cmd;
    let checked = hscm_service::config::Config::load(file).and_then(|c| {
        for section in c.sections() {
            if let Some(command) = root.find_subcommand(section) {
                c.check(section, command)?;
            }
        }
        Ok(c.sections().map(str::to_string).collect::<Vec<_>>())
    });
    match checked {
        Ok(sections) if *json => hscm_lab::out::json(&serde_json::json!({
            "file": file,
            "ok": true,
            "sections": sections,
        })),
        Ok(sections) => {
            outln!("{}: ok ([{}])", file.display(), sections.join("], ["))?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
