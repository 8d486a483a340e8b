//! The service side of the long-running commands (their shared flags are
//! `hscm_service::ServiceArgs`): starting it, `hscm status`, and `hscm config check`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use hscm_lab::out::emit;
use hscm_service::registry;
use hscm_service::{Service, ServiceArgs, Status};

/// Starts the service side of `frontend` serving `volume` at `address`, and says
/// where its metrics are (a `--metrics :0` port is chosen at bind).
pub fn start(
    args: &ServiceArgs,
    frontend: &'static str,
    volume: &Path,
    address: String,
    fill: impl Fn(&mut Status) + Send + Sync + 'static,
) -> Result<Service> {
    let service = args.start(frontend, volume, address, fill)?;
    if let Some(addr) = service.metrics_addr() {
        note!("metrics at http://{addr}/metrics");
    }
    Ok(service)
}

/// The NBD server's own counters, for a snapshot.
pub fn nbd_counters(s: &mut Status, stats: &hscm_nbd::Stats) {
    use std::sync::atomic::Ordering::Relaxed;
    s.clients = hscm_service::Clients {
        connected: stats.connected.load(Relaxed),
        total: stats.connections.load(Relaxed),
    };
    s.errors
        .insert("request".into(), stats.errors.load(Relaxed));
    s.errors
        .insert("protocol".into(), stats.protocol_errors.load(Relaxed));
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

pub fn status(a: &StatusArgs) -> Result<()> {
    let registry::Running {
        instances: running,
        unreadable,
    } = registry::running()?;
    for (socket, why) in unreadable {
        note!(
            "hscm: warning: {}",
            hscm_service::show::harmless(&format!("{}: {why}", socket.display()))
        );
    }
    if let Some(target) = &a.target {
        let Some(found) = running.into_iter().find(|s| s.serves(target)) else {
            bail!(
                "no running hscm serves {} (`hscm status` lists every instance of this user)",
                target.display()
            );
        };
        return emit(&found, a.json, |s| Ok(outln!("{s}")?));
    }
    if a.json {
        return hscm_lab::out::json(&running);
    }
    if running.is_empty() {
        outln!("no hscm instance is running (for this user)")?;
    }
    for s in &running {
        outln!("{s}")?;
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
    let sections = hscm_service::config::Config::check_file(file, root)?;
    let out = serde_json::json!({ "file": file, "ok": true, "sections": sections });
    emit(&out, *json, |_| {
        Ok(outln!(
            "{}: ok ([{}])",
            file.display(),
            sections.join("], [")
        )?)
    })
}
