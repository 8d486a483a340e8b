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
///
/// A connection that has not finished its handshake has proved nothing (with TLS
/// required, not even that it holds a certificate or a key), so it must not hold a
/// slot for long: it is cut `handshake_deadline` after it was accepted, whatever it
/// sends meanwhile, and at either cap (all connections, or one peer's) the oldest
/// connection still in its handshake gives way to the newcomer. Connections past
/// their handshake are never cut for a newcomer; with every slot held by them, a
/// newcomer is closed at once.
#[derive(Debug, Clone)]
pub struct ListenLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections from one IP address at once (Unix sockets: no per-peer cap).
    pub max_per_peer: usize,
    /// From accept to the end of the handshake, at most.
    pub handshake_deadline: Duration,
    /// How long a stop waits for requests already read to be answered.
    pub grace: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        ListenLimits {
            max_connections: 128,
            max_per_peer: 32,
            handshake_deadline: Duration::from_secs(10),
            grace: Duration::from_secs(5),
        }
    }
}

/// One connection being served.
struct Client {
    thread: std::thread::JoinHandle<()>,
    /// A clone of its socket, to cut it.
    socket: Stream,
    peer: Option<std::net::IpAddr>,
    accepted: Instant,
    /// Cleared by the server once the handshake is done.
    in_handshake: Arc<AtomicBool>,
    cut: bool,
}

impl Client {
    fn handshaking(&self) -> bool {
        !self.cut && self.in_handshake.load(Ordering::Acquire)
    }

    fn cut(&mut self, why: &str) {
        if !self.cut {
            tracing::info!("cutting a connection still in its handshake: {why}");
            self.socket.shutdown();
            self.cut = true;
        }
    }
}

/// Makes room for a newcomer from `peer` under the caps: cuts the oldest
/// connection still in its handshake where a cap is reached (its thread ends at
/// once; its slot is counted free from now). False if a cap is reached and every
/// connection under it is past its handshake.
fn make_room(
    clients: &mut [Client],
    peer: Option<std::net::IpAddr>,
    limits: &ListenLimits,
) -> bool {
    let live = |c: &&mut Client| !c.cut;
    let total = clients.iter_mut().filter(live).count();
    if total >= limits.max_connections {
        let oldest = clients
            .iter_mut()
            .filter(|c| c.handshaking())
            .min_by_key(|c| c.accepted);
        match oldest {
            Some(c) => c.cut("every connection slot is taken"),
            None => return false,
        }
    }
    if let Some(ip) = peer {
        let same = clients
            .iter_mut()
            .filter(|c| !c.cut && c.peer == Some(ip))
            .count();
        if same >= limits.max_per_peer {
            let oldest = clients
                .iter_mut()
                .filter(|c| c.peer == Some(ip) && c.handshaking())
                .min_by_key(|c| c.accepted);
            match oldest {
                Some(c) => c.cut("its peer holds as many connections as one may"),
                None => return false,
            }
        }
    }
    true
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
                let l = bind_private(path)
                    .map_err(setup(format!("cannot listen on {}", path.display())))?;
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

    /// A new connection, and its peer's IP address (None for a Unix socket).
    fn accept(&self) -> io::Result<Option<(Stream, Option<std::net::IpAddr>)>> {
        let accepted = match &self.inner {
            Inner::Unix(l, _) => l.accept().map(|(s, _)| (Stream::Unix(s), None)),
            Inner::Tcp(l) => l.accept().map(|(s, addr)| {
                // Requests and replies are small: send them at once.
                let _ = s.set_nodelay(true);
                (Stream::Tcp(s), Some(addr.ip()))
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
        let mut clients: Vec<Client> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            clients.retain(|c| !c.thread.is_finished());
            for c in clients.iter_mut() {
                let late = !limits.handshake_deadline.is_zero()
                    && c.accepted.elapsed() > limits.handshake_deadline;
                if late && c.handshaking() {
                    c.cut("its handshake took longer than the deadline");
                }
            }
            match self.accept() {
                Ok(Some((stream, peer))) if !make_room(&mut clients, peer, limits) => {
                    tracing::warn!(
                        "refusing a connection: {} are open past their handshake ({} at most, {} per peer)",
                        clients.len(),
                        limits.max_connections,
                        limits.max_per_peer
                    );
                    stream.shutdown();
                }
                Ok(Some((stream, peer))) => {
                    let socket = match stream.try_clone() {
                        Ok(w) => w,
                        Err(e) => {
                            tracing::warn!("dropping a client: {e}");
                            continue;
                        }
                    };
                    let in_handshake = Arc::new(AtomicBool::new(true));
                    let (server, stop, flag) = (server.clone(), stop.clone(), in_handshake.clone());
                    let spawned =
                        std::thread::Builder::new()
                            .name("nbd-client".into())
                            .spawn(move || {
                                if let Err(e) = set_blocking(&stream)
                                    .map_err(Error::from)
                                    .and_then(|()| server.serve_telling(stream, &stop, &flag))
                                {
                                    tracing::info!("client dropped: {e}");
                                }
                            });
                    match spawned {
                        Ok(thread) => clients.push(Client {
                            thread,
                            socket,
                            peer,
                            accepted: Instant::now(),
                            in_handshake,
                            cut: false,
                        }),
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
        for c in &clients {
            c.socket.shutdown_read();
        }
        let deadline = Instant::now() + limits.grace;
        while Instant::now() < deadline && clients.iter().any(|c| !c.thread.is_finished()) {
            std::thread::sleep(POLL);
        }
        for c in &clients {
            if !c.thread.is_finished() {
                tracing::warn!("cutting a connection still busy after the grace period");
                c.socket.shutdown();
            }
        }
        for c in clients {
            let _ = c.thread.join();
        }
        Ok(())
    }
}

/// A Unix socket at `path` that only this user can connect to from its first
/// moment: bound in a fresh directory of this process's own (mode 0700) beside
/// `path`, made 0600 there, then renamed into place. (Bound at `path` and chmod'ed
/// after, it would be open to anyone the umask lets in until the chmod, and the
/// chmod by path could follow whatever someone put there meanwhile.)
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut n = 0u32;
    let staging = loop {
        let dir = parent.join(format!(".hscm-bind-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 64 => n += 1,
            Err(e) => return Err(e),
        }
    };
    let staged = staging.join(name);
    let bound = UnixListener::bind(&staged).and_then(|l| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, path)?;
        Ok(l)
    });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&staging);
    bound
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
