//! `hscm nbd`: a volume as an NBD export.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;
use hscm_lab::units::{parse_seconds, parse_size, size_arg};
use hscm_nbd::{Endpoint, ExportOptions, ListenLimits, Listener, Server, Tls, TlsMode};
use hscm_volume::Durability;

use crate::service_cmd;

#[derive(clap::Args)]
pub struct NbdArgs {
    /// The volume file (made by `hscm volume create`), or the NBD URI of its home
    /// (nbd://host/export, nbds://…, nbd+unix:///export?socket=PATH: docs/remote.md).
    pub volume: PathBuf,
    /// Listen on this Unix socket (mode 0600). The default, when neither --socket nor
    /// --listen is given: nbd-VOLUME.sock in the runtime directory
    /// ($XDG_RUNTIME_DIR/hscm, or /run/hscm for root: only its user can write there).
    #[arg(long, conflicts_with = "listen")]
    pub socket: Option<PathBuf>,
    /// Listen on TCP at ADDR:PORT; a bare PORT or :PORT listens on loopback only.
    #[arg(long)]
    pub listen: Option<String>,
    /// The export's name (clients asking for "" get it too).
    #[arg(long, default_value_t = ExportOptions::default().name)]
    pub export: String,
    /// Serve the volume read-only.
    #[arg(long)]
    pub read_only: bool,
    /// `immediate`: every acknowledged write is durable (FUA is native and free);
    /// `on-flush`: writes reach the device before their reply (they survive a crash of
    /// this server), FLUSH or FUA makes them durable; `write-back`: writes are
    /// acknowledged once in RAM, as by a disk with a volatile cache, go home in the
    /// background, and FLUSH or FUA makes everything before it durable (a crash of
    /// this server loses what no FLUSH covered). Default: the volume's own.
    #[arg(long)]
    pub durability: Option<Durability>,
    /// With write-back: the most bytes written and not yet home; a writer waits while
    /// it is reached. Bounds what a FLUSH has to write.
    #[arg(long, value_parser = parse_size, default_value = size_arg(hscm_volume::DEFAULT_DIRTY_MAX))]
    pub dirty_max: u64,
    /// Requests each connection runs at once, at most: threads start as one and grow
    /// while requests wait on the device (replies may complete out of order).
    #[arg(long, default_value_t = ExportOptions::default().workers_per_connection,
          value_parser = clap::value_parser!(u16).range(1..=64).map(usize::from))]
    pub workers: usize,
    /// Connections served at once. At this cap the oldest connection still in its
    /// handshake is cut for the newcomer; with all of them past it, the newcomer
    /// is closed at once.
    #[arg(long, default_value_t = ListenLimits::default().max_connections,
          value_parser = clap::value_parser!(u32).range(1..=65536).map(|n| n as usize))]
    pub max_connections: usize,
    /// Connections from one IP address at once, with the same rule.
    #[arg(long, default_value_t = ListenLimits::default().max_per_peer,
          value_parser = clap::value_parser!(u32).range(1..=65536).map(|n| n as usize))]
    pub max_connections_per_peer: usize,
    /// Seconds a client has to finish the handshake, counted from its connection
    /// (a deadline, not a limit per read: sending a byte now and then does not
    /// extend it).
    #[arg(long, default_value_t = ExportOptions::default().handshake_timeout.as_secs_f64(),
          value_parser = parse_seconds)]
    pub handshake_timeout: f64,
    /// Seconds a client may send nothing before it is dropped; 0 never drops an
    /// idle client, as a block device's client may rightly sit idle. Default: 0,
    /// but 300 on a network address whose clients are not authenticated
    /// (plaintext, or TLS without client certificates or keys), where anyone may
    /// take a connection and keep it.
    #[arg(long, value_parser = parse_seconds)]
    pub idle_timeout: Option<f64>,
    /// Seconds a reply may wait for a client that does not read it; then the
    /// connection ends.
    #[arg(long, default_value_t = ExportOptions::default().send_timeout.as_secs_f64(),
          value_parser = parse_seconds)]
    pub send_timeout: f64,
    /// TLS (NBD_OPT_STARTTLS, as nbdkit and qemu-nbd): `off`; `on`, for clients
    /// that ask; `require`, refusing every client that does not. Needs
    /// --tls-certificates or --tls-psk.
    #[arg(long, default_value = "off", value_parser = clap::value_parser!(TlsMode))]
    pub tls: TlsMode,
    /// A directory with server-cert.pem and server-key.pem (nbdkit's and qemu-nbd's
    /// layout; the CA that signed them, ca-cert.pem, goes to the clients).
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// A PSK file (psktool's `USERNAME:HEXKEY` lines, as nbdkit and qemu-nbd read it)
    /// instead of certificates: clients prove themselves with a username and its key.
    #[arg(long, value_name = "FILE", conflicts_with = "tls_certificates")]
    pub tls_psk: Option<PathBuf>,
    /// With --tls-certificates: let in only clients whose certificate the CA in
    /// DIR/ca-cert.pem signed (libnbd and qemu read theirs from client-cert.pem and
    /// client-key.pem in their --tls-certificates directory). `no` lets any client
    /// in: TLS then encrypts but authenticates nobody, and the warning says so.
    #[arg(long, default_value = "yes", value_name = "yes|no", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub tls_verify_peer: bool,
    /// With client certificates verified: let in only clients whose certificate is
    /// valid for this DNS name (its subject alternative names, matched as a server's
    /// are); repeat for several. As qemu-nbd's --tls-authz lists the clients it
    /// admits. Default: any certificate the CA signed.
    #[arg(long = "tls-client-name", value_name = "NAME")]
    pub tls_client_names: Vec<String>,
    /// Seconds SIGTERM or Ctrl-C waits for requests already read to be answered before
    /// the connections still open are cut; then the volume is flushed and closed.
    #[arg(long, default_value_t = ListenLimits::default().grace.as_secs_f64(),
          value_parser = parse_seconds)]
    pub grace: f64,
    #[command(flatten)]
    pub service: hscm_service::ServiceArgs,
}

impl NbdArgs {
    /// The TLS side the flags ask for, its credentials loaded.
    fn tls(&self) -> Result<Tls> {
        let tls = self.tls_credentials()?;
        if self.tls_client_names.is_empty() {
            return Ok(tls);
        }
        if !self.tls_verify_peer || self.tls_certificates.is_none() {
            bail!("--tls-client-name needs --tls-certificates with client certificates verified (not --tls-verify-peer=no)");
        }
        Ok(tls.only_clients_named(self.tls_client_names.clone())?)
    }

    fn tls_credentials(&self) -> Result<Tls> {
        match (self.tls, &self.tls_certificates, &self.tls_psk) {
            (TlsMode::Off, None, None) => Ok(Tls::off()),
            (TlsMode::Off, _, _) => {
                bail!("--tls-certificates and --tls-psk need --tls on or --tls require")
            }
            (mode, Some(dir), None) => Ok(Tls::with_certificates(
                mode,
                dir,
                if self.tls_verify_peer {
                    hscm_nbd::ClientCertificates::Verify
                } else {
                    hscm_nbd::ClientCertificates::Anyone
                },
            )?),
            (mode, None, Some(file)) => Ok(Tls::with_psk(mode, file)?),
            (mode, None, None) => bail!(
                "--tls {} needs --tls-certificates DIR (server-cert.pem and server-key.pem) or --tls-psk FILE",
                mode.name()
            ),
            (_, Some(_), Some(_)) => bail!("--tls-certificates and --tls-psk: one or the other"),
        }
    }

    fn limits(&self) -> ListenLimits {
        ListenLimits {
            max_connections: self.max_connections,
            max_per_peer: self.max_connections_per_peer,
            handshake_deadline: Duration::from_secs_f64(self.handshake_timeout),
            grace: Duration::from_secs_f64(self.grace),
        }
    }
}

/// `--idle-timeout`'s default where clients are not authenticated on a network.
const UNAUTHENTICATED_IDLE_TIMEOUT: f64 = 300.0;

pub fn serve(a: &NbdArgs) -> Result<()> {
    // Handlers first: a SIGTERM once clients can connect must stop the server cleanly.
    let stop = hscm_serving::stop_on_signals()?;
    let tls = a.tls()?;
    let inherited = Listener::inherited()?;
    let activated = inherited.is_some();
    // Clients anyone on a network may be (for a socket systemd passed: unknown,
    // so not assumed).
    let mut unauthenticated_network = false;
    let listener = match inherited {
        Some(l) => l,
        None => {
            let endpoint = match (&a.socket, &a.listen) {
                (_, Some(addr)) => Endpoint::tcp(addr),
                (Some(path), None) => Endpoint::Unix(path.clone()),
                (None, None) => {
                    let stem = hscm_durable::runtime::stem_of(&a.volume);
                    Endpoint::Unix(hscm_durable::runtime::dir()?.join(format!("nbd-{stem}.sock")))
                }
            };
            let exposed =
                endpoint.reaches_the_network() && !tls.admits_only_authenticated_clients();
            unauthenticated_network = exposed;
            if let (true, Endpoint::Tcp(addr)) = (exposed, &endpoint) {
                note!(
                    "hscm: warning: serving {} {} on {addr} {}, without authenticating clients: anyone who can reach this address can {} it (--tls require with --tls-certificates, whose ca-cert.pem signs the clients' certificates, or --tls-psk, lets in only clients that prove who they are)",
                    a.volume.display(),
                    if a.read_only { "read-only" } else { "read-write" },
                    if a.tls == TlsMode::Require { "over TLS" } else { "in plaintext" },
                    if a.read_only { "read" } else { "read and overwrite" }
                );
            }
            Listener::bind(&endpoint)?
        }
    };
    let export = ExportOptions {
        name: a.export.clone(),
        read_only: a.read_only,
        workers_per_connection: a.workers,
        handshake_timeout: Duration::from_secs_f64(a.handshake_timeout),
        idle_timeout: {
            let idle = a.idle_timeout.unwrap_or(if unauthenticated_network {
                UNAUTHENTICATED_IDLE_TIMEOUT
            } else {
                0.0
            });
            (idle > 0.0).then(|| Duration::from_secs_f64(idle))
        },
        send_timeout: Duration::from_secs_f64(a.send_timeout),
        tls,
        ..ExportOptions::default()
    };
    let opened = open_for_serving(
        &a.volume,
        hscm_serving::TargetOptions {
            read_only: a.read_only,
            durability: a.durability,
            dirty_max: Some(a.dirty_max),
            ..hscm_serving::TargetOptions::default()
        },
    )?;
    let engine = opened.engine().clone();
    let target = opened.counted_target();
    let server = Arc::new(Server::new(target.clone(), export));
    let stats = server.stats();
    let uri = client_uri(listener.uri(&a.export), a.tls);
    let service = {
        let (target, stats) = (target.clone(), stats.clone());
        service_cmd::start(&a.service, "nbd", &a.volume, uri.clone(), move |s| {
            hscm_service::probe::engine(s, &engine);
            hscm_service::probe::target_ops(s, &target.ops());
            service_cmd::nbd_counters(s, &stats);
        })?
    };
    note!(
        "serving {} ({}) at {}; Ctrl-C to stop",
        a.volume.display(),
        opened.describe(),
        uri
    );
    // Scripts read the URI from standard output; a server its client started shares
    // that client's standard output, which is not ours to write on.
    if !activated {
        outln!("{uri}")?;
    }
    service.ready(&format!("serving {uri}"));
    listener.serve_with(server.clone(), stop, &a.limits())?;
    drop(listener);
    let _stopping = service.stopping();
    // Its snapshots hold the engine, which closes next.
    drop(service);
    use std::sync::atomic::Ordering::Relaxed;
    note!(
        "stopping: {} connections, {} commands, {} answered with an error, {} dropped for protocol errors",
        stats.connections.load(Relaxed),
        stats.commands.load(Relaxed),
        stats.errors.load(Relaxed),
        stats.protocol_errors.load(Relaxed)
    );
    drop(server);
    drop(target);
    opened.close().context("closing the volume at shutdown")?;
    Ok(())
}

/// Opens any volume as a block target through the serving layer, its counters saved
/// every few seconds while it is a tiered volume (`hscm volume stats`).
pub fn open_for_serving(
    path: &std::path::Path,
    opts: hscm_serving::TargetOptions,
) -> Result<hscm_serving::Opened> {
    let opts = hscm_serving::TargetOptions {
        save_stats_every: Some(hscm_serving::SERVED_STATS_EVERY),
        ..opts
    };
    hscm_serving::open_target(path, &opts).with_context(|| format!("opening {}", path.display()))
}

/// The URI a client uses: with `--tls require`, the TLS scheme (libnbd's `nbds://`,
/// `nbds+unix://`), since a client that connects by the plain one is refused.
fn client_uri(uri: String, tls: TlsMode) -> String {
    match (tls, uri.strip_prefix("nbd")) {
        (TlsMode::Require, Some(rest)) if rest.starts_with("://") || rest.starts_with("+unix") => {
            format!("nbds{rest}")
        }
        _ => uri,
    }
}

#[cfg(test)]
mod uri_tests {
    use super::*;

    #[test]
    fn a_required_tls_names_its_scheme() {
        let tcp = "nbd://127.0.0.1:10809/e".to_string();
        let unix = "nbd+unix:///e?socket=/run/s".to_string();
        assert_eq!(
            client_uri(tcp.clone(), TlsMode::Require),
            "nbds://127.0.0.1:10809/e"
        );
        assert_eq!(
            client_uri(unix.clone(), TlsMode::Require),
            "nbds+unix:///e?socket=/run/s"
        );
        // Plaintext is still let in with `on`: the plain URI works.
        assert_eq!(client_uri(tcp.clone(), TlsMode::On), tcp);
        assert_eq!(client_uri(unix.clone(), TlsMode::Off), unix);
    }
}
