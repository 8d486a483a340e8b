//! The flags every long-running command (`hscm nbd`, `mount`, `serve`) takes for its
//! service side.

use std::path::{Path, PathBuf};

use crate::{Identity, Service, ServiceError, Status};

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
    ) -> Result<Service, ServiceError> {
        let id = Identity {
            frontend,
            address,
            volume: std::fs::canonicalize(volume).unwrap_or_else(|_| volume.to_path_buf()),
        };
        Service::start(id, fill, self.metrics.as_deref())
    }
}
