//! `hscm serve`: a volume of any kind (flat, tiered, or a file-system volume's blocks)
//! over the shared-memory queue transport.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use hscm_ring::{Server, ServerOptions};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The volume file (made by `hscm volume create`).
    pub volume: PathBuf,
    /// Endpoint name: a NAME without a slash listens on /dev/shm/hscm-NAME.sock
    /// (mode 0600); a path is used as given. Clients connect to the same name.
    #[arg(long)]
    pub shm: String,
    /// Largest data buffer a client may ask for.
    #[arg(long, default_value = "64M", value_parser = hscm_lab::units::parse_size)]
    pub max_db: u64,
    /// Largest number of queue pairs per client.
    #[arg(long, default_value_t = 16)]
    pub max_queues: u32,
    /// Microseconds a worker polls an idle client before sleeping on its doorbell.
    #[arg(long, default_value_t = 50)]
    pub idle_spin_us: u64,
    /// Clients served at once; more are refused with a message.
    #[arg(long, default_value_t = 64)]
    pub max_clients: usize,
    /// Serve the volume read-only.
    #[arg(long)]
    pub read_only: bool,
    #[command(flatten)]
    pub service: hscm_service::ServiceArgs,
}

pub fn serve(a: &ServeArgs) -> Result<()> {
    // Handlers first: a SIGTERM that arrives once clients can connect (or while the
    // volume opens) must stop the server cleanly, not kill it mid-way.
    let stop = hscm_serving::stop_on_signals()?;
    let opened = crate::nbd_cmd::open_for_serving(
        &a.volume,
        hscm_serving::TargetOptions {
            read_only: a.read_only,
            ..Default::default()
        },
    )?;
    let path = hscm_ring::endpoint_path(&a.shm);
    let opts = ServerOptions {
        max_db: a.max_db,
        max_queues: a.max_queues,
        idle_spin: Duration::from_micros(a.idle_spin_us),
        max_clients: a.max_clients,
        ..Default::default()
    };
    let target = opened.counted_target();
    let server = Server::bind(&path, target.clone(), opts)?;
    let stats = server.stats();
    let service = {
        let (engine, target, stats) = (opened.engine().clone(), target.clone(), stats.clone());
        crate::service_cmd::start(
            &a.service,
            "serve",
            &a.volume,
            path.display().to_string(),
            move |s| {
                hscm_service::probe::engine(s, &engine);
                hscm_service::probe::target_ops(s, &target.ops());
                s.clients = hscm_service::Clients {
                    connected: stats.connected.load(Ordering::Relaxed),
                    total: stats.clients.load(Ordering::Relaxed),
                };
                s.errors
                    .insert("request".into(), stats.errors.load(Ordering::Relaxed));
                s.errors.insert(
                    "broken_queue".into(),
                    stats.broken_queues.load(Ordering::Relaxed),
                );
            },
        )?
    };
    note!(
        "serving {} ({}) on {}; Ctrl-C to stop",
        a.volume.display(),
        opened.describe(),
        path.display()
    );
    let handle = server.spawn()?;
    service.ready(&format!("serving on {}", path.display()));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _stopping = service.stopping();
    drop(service);
    note!(
        "stopping: {} clients served, {} commands, {} answered with an error",
        stats.clients.load(Ordering::Relaxed),
        stats.commands.load(Ordering::Relaxed),
        stats.errors.load(Ordering::Relaxed)
    );
    handle.shutdown();
    drop(target);
    opened.close().context("closing the volume at shutdown")?;
    Ok(())
}
