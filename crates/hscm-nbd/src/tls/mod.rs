//! TLS as the NBD protocol defines it: the client asks with NBD_OPT_STARTTLS during
//! the handshake, the server acknowledges, and everything after (the rest of the
//! handshake and the transmission phase) runs inside TLS (the NBD project's
//! `doc/proto.md`, "TLS support"). X.509 certificates in nbdkit's and qemu-nbd's
//! layout (`server-cert.pem`, `server-key.pem` in one directory), on rustls; or
//! pre-shared keys, on OpenSSL (`psk`: rustls has none).
//!
//! The server reads and writes a connection from several threads at once (one reads
//! requests while others write replies), which a TLS session, one state for both
//! directions, does not allow. So once TLS is up, a pump thread owns the session and
//! the socket, and the server goes on over one end of a local socket pair whose other
//! end the pump encrypts and decrypts: the server's code is the same with or without
//! TLS. The pump is non-blocking on both sides, so a deep client that reads its
//! replies never stalls it, and a client that stops reading is cut after the send
//! timeout.

#[cfg(feature = "psk")]
mod psk;

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

use crate::{Error, Stream};

/// Whether clients may, or must, use TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// No TLS: NBD_OPT_STARTTLS is refused as unsupported.
    #[default]
    Off,
    /// TLS for clients that ask; plaintext for the others.
    On,
    /// Only TLS: every option but STARTTLS and ABORT is refused with
    /// NBD_REP_ERR_TLS_REQD until the client has started TLS.
    Require,
}

impl TlsMode {
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Off => "off",
            TlsMode::On => "on",
            TlsMode::Require => "require",
        }
    }
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            other => Err(format!("unknown TLS mode {other:?}: off, on or require")),
        }
    }
}

/// Which X.509 clients get in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientCertificates {
    /// Only clients with a certificate signed by the CA in `ca-cert.pem` of the
    /// certificates directory (qemu-nbd's default, `verify-peer=on`).
    #[default]
    Verify,
    /// Any client: TLS then encrypts but authenticates nobody.
    Anyone,
}

/// The TLS side of an export: its mode and, unless off, the server's credentials.
#[derive(Clone, Default)]
pub struct Tls {
    pub mode: TlsMode,
    credentials: Option<Credentials>,
    /// The credentials prove who each client is (a CA-signed certificate, or a
    /// pre-shared key), not only who the server is.
    authenticates_clients: bool,
    /// With X.509 clients verified: the names (DNS names in the certificate's
    /// subject alternative names) one of which a client's certificate must carry;
    /// empty, any certificate the CA signed.
    client_names: Vec<String>,
}

/// Refuses a secret file others may read (`hscm_durable::nbd::psk::check_private`,
/// which the client side shares).
fn private_to_owner(path: &Path) -> Result<(), Error> {
    hscm_durable::nbd::psk::check_private(path).map_err(|source| Error::Setup {
        what: source.to_string(),
        source: io::Error::from(source.kind()),
    })
}

/// What the server proves itself with.
#[derive(Clone)]
enum Credentials {
    X509(Arc<ServerConfig>),
    #[cfg(feature = "psk")]
    Psk(psk::PskServer),
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({})", self.mode.name())
    }
}

impl Tls {
    /// TLS in `mode` with the certificate chain and key in `dir`
    /// (`server-cert.pem`, `server-key.pem`, as nbdkit and qemu-nbd lay them out;
    /// the key readable by its owner alone), and, unless `clients` is
    /// [`ClientCertificates::Anyone`], the CA whose signature a client's certificate
    /// must carry (`ca-cert.pem`).
    pub fn with_certificates(
        mode: TlsMode,
        dir: &Path,
        clients: ClientCertificates,
    ) -> Result<Tls, Error> {
        let setup = |what: String| move |e: io::Error| Error::Setup { what, source: e };
        let cert_path = dir.join("server-cert.pem");
        let key_path = dir.join("server-key.pem");
        let cert_pem =
            std::fs::read(&cert_path).map_err(setup(format!("reading {}", cert_path.display())))?;
        let key_pem =
            std::fs::read(&key_path).map_err(setup(format!("reading {}", key_path.display())))?;
        private_to_owner(&key_path)?;
        let bad = |path: &Path, why: String| Error::Setup {
            what: format!("{}: {why}", path.display()),
            source: io::Error::from(io::ErrorKind::InvalidData),
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| bad(&cert_path, format!("not a PEM certificate chain ({e})")))?;
        if certs.is_empty() {
            return Err(bad(&cert_path, "holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| bad(&key_path, format!("not a PEM private key ({e})")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(dir, e.to_string()))?;
        let builder = match clients {
            ClientCertificates::Anyone => builder.with_no_client_auth(),
            ClientCertificates::Verify => {
                let ca_path = dir.join("ca-cert.pem");
                let ca_pem = std::fs::read(&ca_path).map_err(setup(format!(
                    "reading {} (the CA that signs the clients' certificates; without one, \
                     --tls-verify-peer=no lets any client in)",
                    ca_path.display()
                )))?;
                let mut roots = rustls::RootCertStore::empty();
                for ca in CertificateDer::pem_slice_iter(&ca_pem) {
                    let ca =
                        ca.map_err(|e| bad(&ca_path, format!("not a PEM certificate ({e})")))?;
                    roots
                        .add(ca)
                        .map_err(|e| bad(&ca_path, format!("not a CA certificate ({e})")))?;
                }
                if roots.is_empty() {
                    return Err(bad(&ca_path, "holds no certificate".into()));
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| bad(&ca_path, e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| bad(&cert_path, format!("certificate and key do not fit ({e})")))?;
        Ok(Tls {
            mode,
            credentials: Some(Credentials::X509(Arc::new(config))),
            authenticates_clients: clients == ClientCertificates::Verify,
            client_names: Vec::new(),
        })
    }

    /// TLS in `mode` with the pre-shared keys in `file` (psktool's `USERNAME:HEXKEY`
    /// lines, as nbdkit and qemu-nbd read them), on OpenSSL (see `psk`).
    pub fn with_psk(mode: TlsMode, file: &Path) -> Result<Tls, Error> {
        private_to_owner(file)?;
        #[cfg(feature = "psk")]
        {
            let server = psk::PskServer::from_file(file)?;
            tracing::info!(
                "TLS with {} pre-shared keys from {}",
                server.users(),
                file.display()
            );
            Ok(Tls {
                mode,
                credentials: Some(Credentials::Psk(server)),
                authenticates_clients: true,
                client_names: Vec::new(),
            })
        }
        #[cfg(not(feature = "psk"))]
        {
            let _ = mode;
            Err(Error::Setup {
                what: format!(
                    "{}: this build of hscm-nbd has no PSK support (feature `psk`)",
                    file.display()
                ),
                source: io::Error::from(io::ErrorKind::Unsupported),
            })
        }
    }

    pub fn off() -> Tls {
        Tls::default()
    }

    /// Lets in only clients whose certificate (signed by the CA) is valid for one of
    /// `names` (DNS names, matched against its subject alternative names as a server
    /// name is), as qemu's `--tls-authz` lists the clients it admits. Only for X.509
    /// with client certificates verified.
    pub fn only_clients_named(mut self, names: Vec<String>) -> Result<Tls, Error> {
        let bad = |what: String| Error::Setup {
            what,
            source: io::Error::from(io::ErrorKind::InvalidInput),
        };
        if !(matches!(self.credentials, Some(Credentials::X509(_))) && self.authenticates_clients) {
            return Err(bad(
                "client names need X.509 certificates with client certificates verified".into(),
            ));
        }
        for name in &names {
            rustls::pki_types::ServerName::try_from(name.as_str())
                .map_err(|e| bad(format!("{name:?} is not a DNS name to match ({e})")))?;
        }
        self.client_names = names;
        Ok(self)
    }

    /// Whether the verified client certificate of `conn` carries an allowed name.
    fn client_named(&self, conn: &ServerConnection) -> Result<(), Error> {
        if self.client_names.is_empty() {
            return Ok(());
        }
        let refused = |why: String| Error::Protocol(format!("TLS client refused: {why}"));
        let cert = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| refused("no certificate".into()))?;
        let cert = webpki::EndEntityCert::try_from(cert)
            .map_err(|e| refused(format!("unreadable certificate ({e})")))?;
        let named = self.client_names.iter().any(|n| {
            rustls::pki_types::ServerName::try_from(n.as_str())
                .is_ok_and(|name| cert.verify_is_valid_for_subject_name(&name).is_ok())
        });
        if named {
            Ok(())
        } else {
            Err(refused(format!(
                "its certificate is valid for none of {}",
                self.client_names.join(", ")
            )))
        }
    }

    /// Only clients that proved who they are get in: TLS required, with client
    /// certificates verified or pre-shared keys.
    pub fn admits_only_authenticated_clients(&self) -> bool {
        self.mode == TlsMode::Require && self.authenticates_clients
    }

    /// Runs the TLS handshake on `socket` (whose timeouts bound it) and returns the
    /// plaintext end the server goes on with; a pump thread carries the bytes.
    pub(crate) fn start(&self, socket: Stream, send_timeout: Duration) -> Result<Stream, Error> {
        let config = match &self.credentials {
            Some(Credentials::X509(config)) => config.clone(),
            #[cfg(feature = "psk")]
            Some(Credentials::Psk(psk)) => return psk.start(socket, send_timeout),
            None => {
                return Err(Error::Protocol(
                    "TLS asked of a server without credentials".into(),
                ))
            }
        };
        let mut conn =
            ServerConnection::new(config).map_err(|e| Error::Protocol(format!("TLS: {e}")))?;
        let mut socket = socket;
        while conn.is_handshaking() {
            conn.complete_io(&mut socket)
                .map_err(|e| Error::Protocol(format!("TLS handshake: {e}")))?;
        }
        self.client_named(&conn)?;
        let (plain, pumped) = UnixStream::pair()?;
        std::thread::Builder::new()
            .name("nbd-tls".into())
            .spawn(move || {
                if let Err(e) = pump(conn, socket, pumped, send_timeout) {
                    tracing::debug!("TLS connection ended: {e}");
                }
            })?;
        Ok(Stream::Unix(plain))
    }
}

/// Plaintext waiting for the server beyond this is not read from the client.
const PLAIN_BACKLOG: usize = 1 << 20;
/// Ciphertext waiting for the client beyond this is not taken from the server.
const TLS_BACKLOG: usize = 1 << 20;

/// Carries bytes between the TLS session on `socket` and the server's plaintext
/// `local` end until either side closes or the client stops taking what is sent.
fn pump(
    mut conn: ServerConnection,
    socket: Stream,
    mut local: UnixStream,
    send_timeout: Duration,
) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    set_nonblocking(&socket, true)?;
    local.set_nonblocking(true)?;
    conn.set_buffer_limit(Some(TLS_BACKLOG));
    let mut socket = socket;
    let mut to_local: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut stalled_since: Option<Instant> = None;
    // What came in with the handshake's last flight is decrypted already.
    let mut client_open = take_plaintext(&mut conn, &mut buf, &mut to_local)?;
    loop {
        let wants_write = conn.wants_write();
        if !client_open && !wants_write && to_local.is_empty() {
            return Ok(());
        }
        let mut socket_flags = PollFlags::empty();
        if client_open && to_local.len() < PLAIN_BACKLOG {
            socket_flags |= PollFlags::IN;
        }
        if wants_write {
            socket_flags |= PollFlags::OUT;
        }
        // Taken from the server only once the client has what came before: the
        // session's ciphertext is the one place replies wait.
        let mut local_flags = PollFlags::empty();
        if !wants_write {
            local_flags |= PollFlags::IN;
        }
        if !to_local.is_empty() {
            local_flags |= PollFlags::OUT;
        }
        let (sfd, lfd) = (socket_fd(&socket), local.as_fd());
        let mut fds = [
            PollFd::from_borrowed_fd(sfd, socket_flags),
            PollFd::from_borrowed_fd(lfd, local_flags),
        ];
        let _ = poll(&mut fds, 1000);
        let (s_ready, l_ready) = (fds[0].revents(), fds[1].revents());
        if wants_write {
            match conn.write_tls(&mut socket) {
                Ok(_) => stalled_since = None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let since = *stalled_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > send_timeout {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client stopped taking replies",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if s_ready.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) && client_open {
            match conn.read_tls(&mut socket) {
                Ok(0) => client_open = false,
                Ok(_) => {
                    let state = conn
                        .process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    if !take_plaintext(&mut conn, &mut buf, &mut to_local)?
                        || state.peer_has_closed()
                    {
                        client_open = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if !client_open && to_local.is_empty() {
                // The server sees the end of the stream.
                let _ = local.shutdown(std::net::Shutdown::Write);
            }
        }
        if !to_local.is_empty() {
            match local.write(&to_local) {
                Ok(n) => {
                    to_local.drain(..n);
                    if !client_open && to_local.is_empty() {
                        let _ = local.shutdown(std::net::Shutdown::Write);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if l_ready.intersects(PollFlags::IN | PollFlags::HUP) {
            match local.read(&mut buf) {
                Ok(0) => {
                    // The server ended the connection: say so to the client and go.
                    conn.send_close_notify();
                    set_nonblocking(&socket, false)?;
                    while conn.wants_write() {
                        if conn.write_tls(&mut socket).is_err() {
                            break;
                        }
                    }
                    return Ok(());
                }
                Ok(n) => conn.writer().write_all(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Moves the plaintext the session has decrypted to `out`; false once the client has
/// closed its side.
fn take_plaintext(
    conn: &mut ServerConnection,
    buf: &mut [u8],
    out: &mut Vec<u8>,
) -> io::Result<bool> {
    let mut reader = conn.reader();
    loop {
        match reader.read(buf) {
            Ok(0) => return Ok(false),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn socket_fd(s: &Stream) -> std::os::fd::BorrowedFd<'_> {
    match s {
        Stream::Unix(s) => s.as_fd(),
        Stream::Tcp(s) => s.as_fd(),
    }
}

pub(crate) fn set_nonblocking(s: &Stream, on: bool) -> io::Result<()> {
    match s {
        Stream::Unix(s) => s.set_nonblocking(on),
        Stream::Tcp(s) => s.set_nonblocking(on),
    }
}
