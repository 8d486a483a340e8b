//! What a long-running hscm front-end (`hscm nbd`, `hscm mount`, `hscm serve`) shares
//! as a service:
//! - [`Status`]: one snapshot of the instance, filled by the engines' [`probe`]s and
//!   the front-end's own counters;
//! - `hscm status` ([`registry`]): a private Unix socket per instance that answers
//!   with the snapshot as JSON;
//! - `--metrics ADDR:PORT` ([`http`]): the same snapshot as Prometheus text;
//! - systemd ([`notify`]): readiness, the watchdog, more time while a stop flushes;
//! - `--config FILE` ([`config`]).
//!
//! Engines keep plain counters and know nothing of this crate.

mod args;
pub mod config;
pub mod exposition;
pub mod http;
pub mod notify;
pub mod probe;
pub mod registry;
pub mod show;
mod status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

pub use args::ServiceArgs;
pub use http::{HttpError, MetricsServer};
pub use status::{
    Clients, Device, FsSpace, FuseTransport, Health, Journal, Load, Mirror, MirrorMember, Op,
    Status, Tier,
};

/// A snapshot of the instance, taken when asked.
pub type Probe = Arc<dyn Fn() -> Status + Send + Sync>;

/// What serves, where, and what.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `nbd`, `mount` or `serve`.
    pub frontend: &'static str,
    pub address: String,
    pub volume: PathBuf,
}

/// Why a service cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    #[error(transparent)]
    Metrics(#[from] HttpError),
}

/// A running instance's service side: registered for `hscm status`, its metrics
/// served if asked, the watchdog pinged if systemd asked. Dropping it ends all three;
/// drop it before closing the engine, since its probe holds the engine.
pub struct Service {
    probe: Probe,
    metrics: Option<MetricsServer>,
    _registration: Option<registry::Registration>,
    _watchdog: Option<notify::Watchdog>,
}

impl Service {
    /// Starts the service side of `id`. `fill` adds the engine's and the front-end's
    /// parts to a snapshot; `metrics` is `--metrics`'s address.
    pub fn start(
        id: Identity,
        fill: impl Fn(&mut Status) + Send + Sync + 'static,
        metrics: Option<&str>,
    ) -> Result<Service, ServiceError> {
        let started = Instant::now();
        let base = Status {
            pid: std::process::id(),
            frontend: id.frontend.into(),
            address: id.address.clone(),
            volume: id.volume.display().to_string(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_at: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            ..Status::default()
        };
        let metrics_url = Arc::new(std::sync::OnceLock::<String>::new());
        let probe: Probe = {
            let metrics_url = metrics_url.clone();
            Arc::new(move || {
                let mut s = base.clone();
                s.uptime_s = started.elapsed().as_secs_f64();
                s.metrics_address = metrics_url.get().cloned();
                fill(&mut s);
                s
            })
        };
        let metrics = metrics
            .map(|addr| MetricsServer::start(addr, probe.clone()))
            .transpose()?;
        if let Some(m) = &metrics {
            let _ = metrics_url.set(format!("http://{}/metrics", m.local_addr()));
        }
        let stem = id
            .volume
            .file_stem()
            .map_or("volume".into(), |s| s.to_string_lossy().into_owned());
        // Without a usable runtime directory the instance still serves; only
        // `hscm status` cannot find it.
        let registration = match hscm_durable::runtime::dir() {
            Ok(dir) => registry::Registration::start(&dir, &stem, probe.clone())
                .map_err(|e| tracing::warn!("hscm status will not list this instance: {e}"))
                .ok(),
            Err(e) => {
                tracing::warn!("hscm status will not list this instance: {e}");
                None
            }
        };
        Ok(Service {
            _watchdog: notify::Watchdog::start(probe.clone()),
            probe,
            metrics,
            _registration: registration,
        })
    }

    /// Tells systemd (if it started us) that the volume serves.
    pub fn ready(&self, line: &str) {
        notify::ready(line);
    }

    /// Tells systemd the instance stops, and asks for time while the returned guard
    /// lives (the flush and close).
    pub fn stopping(&self) -> notify::Stopping {
        notify::Stopping::begin()
    }

    pub fn snapshot(&self) -> Status {
        (self.probe)()
    }

    /// Where `--metrics` listens, if it was given.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }
}
