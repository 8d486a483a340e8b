//! Where the export listens, and the accept loop.

use std::io;
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Error, Server, Stream};

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket at this path, mode 0600.
    Unix(PathBuf),
    /// A TCP address, `host:port`.
    Tcp(String),
}

impl Endpoint {
    /// A TCP endpoint from what a user typed: a bare PORT or :PORT means loopback
    /// only (exposing a disk to the network is asked for, never a default);
    /// anything else is ADDR:PORT as given.
    pub fn tcp(listen: &str) -> Endpoint {
        Endpoint::Tcp(if let Some(port) = listen.strip_prefix(':') {
            format!("127.0.0.1:{port}")
        } else if listen.chars().all(|c| c.is_ascii_digit()) {
            format!("127.0.0.1:{listen}")
        } else {
            listen.to_string()
        })
    }

    /// Whether clients on other machines can reach it (a TCP address that is not
    /// loopback, or one that does not resolve).
    pub fn reaches_the_network(&self) -> bool {
        use std::net::ToSocketAddrs;
        match self {
            Endpoint::Unix(_) => false,
            Endpoint::Tcp(addr) => match addr.to_socket_addrs() {
                Ok(mut addrs) => addrs.any(|a| !a.ip().is_loopback()),
                Err(_) => true,
            },
        }
    }
}

enum Inner {
    Unix(UnixListener, Option<PathBuf>),
    Tcp(TcpListener),
}

/// A listening socket.
pub struct Listener {
    inner: Inner,
}

/// What the accept loop allows.
#[derive(Debug, Clone)]
pub struct ListenLimits {
    /// Connections served at once; more are closed as they arrive.
    pub max_connections: usize,
    /// How long a stop waits for requests already read to be answered.
    pub grace: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        ListenLimits {
            max_connections: 128,
            grace: Duration::from_secs(5),
        }
    }
}

/// How often the accept loop looks at the stop flag.
const POLL: Duration = Duration::from_millis(5);

impl Listener {
    pub fn bind(endpoint: &Endpoint) -> Result<Listener, Error> {
        let setup = |what: String| move |source| Error::Setup { what, source };
        let inner = match endpoint {
            Endpoint::Unix(path) => {
                remove_stale_socket(path)
                    .map_err(setup(format!("cannot replace {}", path.display())))?;
                let l = UnixListener::bind(path)
                    .map_err(setup(format!("cannot listen on {}", path.display())))?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                    .map_err(setup(format!("cannot restrict {}", path.display())))?;
                Inner::Unix(l, Some(path.clone()))
            }
            Endpoint::Tcp(addr) => Inner::Tcp(
                TcpListener::bind(addr).map_err(setup(format!("cannot listen on {addr}")))?,
            ),
        };
        Ok(Listener { inner })
    }

    /// A socket someone else bound and passed on (systemd socket activation): a Unix
    /// or a TCP listener, whichever it is.
    pub fn from_fd(fd: OwnedFd) -> Result<Listener, Error> {
        let unix = UnixListener::from(fd);
        if unix.local_addr().is_ok() {
            return Ok(Listener {
                inner: Inner::Unix(unix, None),
            });
        }
        let tcp = TcpListener::from(OwnedFd::from(unix));
        tcp.local_addr().map_err(|source| Error::Setup {
            what: "the inherited socket is neither a Unix nor a TCP listener".into(),
            source,
        })?;
        Ok(Listener {
            inner: Inner::Tcp(tcp),
        })
    }

    /// The socket systemd (or libnbd's `[ command ]` syntax) passed this process by
    /// socket activation, if any: LISTEN_PID names this process and LISTEN_FDS is 1.
    /// The variables are removed, so children do not take the socket for theirs.
    pub fn inherited() -> Result<Option<Listener>, Error> {
        let (Ok(pid), Ok(fds)) = (std::env::var("LISTEN_PID"), std::env::var("LISTEN_FDS")) else {
            return Ok(None);
        };
        if pid.trim() != std::process::id().to_string() {
            return Ok(None);
        }
        let refused = |why: String| Error::Setup {
            what: "socket activation".into(),
            source: io::Error::new(io::ErrorKind::InvalidInput, why),
        };
        match fds.trim().parse::<u32>() {
            Ok(1) => {}
            Ok(n) => return Err(refused(format!("LISTEN_FDS={n}: one socket is served"))),
            Err(_) => return Err(refused(format!("LISTEN_FDS={fds:?} is not a number"))),
        }
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        // SAFETY: the socket-activation protocol hands the first socket over as
        // descriptor 3, open and owned by nobody else in this process; LISTEN_PID named
        // this process, and the variables are removed above, so the descriptor is
        // taken exactly once.
        let fd = unsafe { OwnedFd::from_raw_fd(3) };
        Listener::from_fd(fd).map(Some)
    }

    /// The NBD URI a client connects to (libnbd's syntax).
    pub fn uri(&self, export: &str) -> String {
        match &self.inner {
            Inner::Unix(l, path) => {
                let path = path.clone().or_else(|| {
                    l.local_addr()
                        .ok()
                        .and_then(|a| a.as_pathname().map(Path::to_path_buf))
                });
                match path {
                    Some(p) => format!("nbd+unix:///{export}?socket={}", p.display()),
                    None => "nbd+unix:/// (an unnamed socket)".into(),
                }
            }
            Inner::Tcp(l) => match l.local_addr() {
                Ok(a) => format!("nbd://{a}/{export}"),
                Err(_) => "nbd:// (unknown address)".into(),
            },
        }
    }

    fn accept(&self) -> io::Result<Option<Stream>> {
        let accepted = match &self.inner {
            Inner::Unix(l, _) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Inner::Tcp(l) => l.accept().map(|(s, _)| {
                // Requests and replies are small: send them at once.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        };
        match accepted {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match &self.inner {
            Inner::Unix(l, _) => l.set_nonblocking(true),
            Inner::Tcp(l) => l.set_nonblocking(true),
        }
    }

    /// [`Self::serve_with`] with the default limits.
    pub fn serve(&self, server: Arc<Server>, stop: Arc<AtomicBool>) -> Result<(), Error> {
        self.serve_with(server, stop, &ListenLimits::default())
    }

    /// Accepts and serves clients, a thread each, at most `limits.max_connections`
    /// at once (more are closed at once), until `stop` is set; then stops reading
    /// from every client and lets the requests already read finish and reply for up
    /// to `limits.grace`, after which the connections still open are cut (a client
    /// that does not read its replies cannot hold the stop up), and returns. The
    /// caller flushes and closes the target.
    pub fn serve_with(
        &self,
        server: Arc<Server>,
        stop: Arc<AtomicBool>,
        limits: &ListenLimits,
    ) -> Result<(), Error> {
        self.set_nonblocking().map_err(|source| Error::Setup {
            what: "cannot make the listener non-blocking".into(),
            source,
        })?;
        let mut clients: Vec<(std::thread::JoinHandle<()>, Stream)> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            clients.retain(|(h, _)| !h.is_finished());
            match self.accept() {
                Ok(Some(stream)) if clients.len() >= limits.max_connections => {
                    tracing::warn!(
                        "refusing a connection: {} are open, the most allowed",
                        limits.max_connections
                    );
                    stream.shutdown();
                }
                Ok(Some(stream)) => {
                    let watch = match stream.try_clone() {
                        Ok(w) => w,
                        Err(e) => {
                            tracing::warn!("dropping a client: {e}");
                            continue;
                        }
                    };
                    let (server, stop) = (server.clone(), stop.clone());
                    let spawned =
                        std::thread::Builder::new()
                            .name("nbd-client".into())
                            .spawn(move || {
                                if let Err(e) = set_blocking(&stream)
                                    .map_err(Error::from)
                                    .and_then(|()| server.serve(stream, &stop))
                                {
                                    tracing::info!("client dropped: {e}");
                                }
                            });
                    match spawned {
                        Ok(handle) => clients.push((handle, watch)),
                        Err(e) => tracing::warn!("cannot start a thread for a client: {e}"),
                    }
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => {
                    // A failed accept (out of descriptors, say) must not end the
                    // service for everyone else.
                    tracing::warn!("accept failed: {e}");
                    std::thread::sleep(POLL * 20);
                }
            }
        }
        for (_, stream) in &clients {
            stream.shutdown_read();
        }
        let deadline = Instant::now() + limits.grace;
        while Instant::now() < deadline && clients.iter().any(|(h, _)| !h.is_finished()) {
            std::thread::sleep(POLL);
        }
        for (handle, stream) in &clients {
            if !handle.is_finished() {
                tracing::warn!("cutting a connection still busy after the grace period");
                stream.shutdown();
            }
        }
        for (handle, _) in clients {
            let _ = handle.join();
        }
        Ok(())
    }
}

fn set_blocking(s: &Stream) -> io::Result<()> {
    match s {
        Stream::Unix(s) => s.set_nonblocking(false),
        Stream::Tcp(s) => s.set_nonblocking(false),
    }
}

/// Removes a socket file nobody listens on (a server that died); refuses anything
/// else at that path.
fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if !m.file_type().is_socket() => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a file that is not a socket is in the way",
        )),
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another server is listening there",
            )),
            Err(_) => std::fs::remove_file(path),
        },
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Inner::Unix(_, Some(path)) = &self.inner {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    #[test]
    fn a_bare_port_listens_on_loopback_only() {
        assert_eq!(
            Endpoint::tcp("10809"),
            Endpoint::Tcp("127.0.0.1:10809".into())
        );
        assert_eq!(
            Endpoint::tcp(":10809"),
            Endpoint::Tcp("127.0.0.1:10809".into())
        );
        assert_eq!(
            Endpoint::tcp("0.0.0.0:10809"),
            Endpoint::Tcp("0.0.0.0:10809".into())
        );
        assert!(!Endpoint::tcp("10809").reaches_the_network());
        assert!(Endpoint::tcp("0.0.0.0:10809").reaches_the_network());
        assert!(!Endpoint::Unix("/run/x.sock".into()).reaches_the_network());
    }

    #[test]
    fn no_activation_without_the_variables_naming_this_process() {
        // LISTEN_PID is never this test process's (the harness does not set it).
        if std::env::var("LISTEN_PID").is_err() {
            assert!(super::Listener::inherited().unwrap().is_none());
        }
    }
}
