//! One connection's byte stream: TCP or a Unix socket, in the clear or inside TLS,
//! where every read and write is held to the deadline of the request it serves
//! (a server that stops reading or answering fails the request when its time is up,
//! however the bytes trickle in).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::uri::{NbdUri, Transport};

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// How far from the deadline a socket call may end: the socket's timeouts are set
/// again only when a call started now would end further than this from it. Setting
/// them costs two system calls, and doing so before every read and write once cost
/// more than the reads and writes themselves.
const DEADLINE_SLACK: Duration = Duration::from_millis(20);
/// Replies are read through a buffer this large: a reply's head, and often many
/// replies, in one system call.
const READ_BUFFER: usize = 64 << 10;

/// A socket whose reads and writes fail with `TimedOut` once the deadline passes
/// (within [`DEADLINE_SLACK`]), read through a buffer.
pub(crate) struct Timed {
    socket: Socket,
    pub(crate) deadline: Instant,
    /// The timeout the socket holds now (None: never set).
    armed: Option<Duration>,
    buffer: Box<[u8]>,
    /// `buffer[at..filled]` was read from the socket and not yet by the caller.
    at: usize,
    filled: usize,
}

impl Timed {
    pub(crate) fn connect(uri: &NbdUri, deadline: Instant) -> io::Result<Timed> {
        let left = remaining(deadline)?;
        let socket = match &uri.transport {
            Transport::Unix { socket } => Socket::Unix(UnixStream::connect(socket)?),
            Transport::Tcp { host, port } => {
                use std::net::ToSocketAddrs;
                let mut last =
                    io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
                let mut found = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, left) {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                let s = found.ok_or(last)?;
                // Requests are small and answered one by one: no Nagle delay.
                s.set_nodelay(true)?;
                // Closed, the connection is reset and what it still held unsent is
                // dropped: a request given up on (its deadline passed while the link
                // was down) must not reach the server once the link is back, after
                // newer writes to the same blocks went by another connection. A
                // mirror's resync depends on it.
                rustix::net::sockopt::set_socket_linger(&s, Some(std::time::Duration::ZERO))?;
                Socket::Tcp(s)
            }
        };
        Ok(Timed {
            socket,
            deadline,
            armed: None,
            buffer: vec![0u8; READ_BUFFER].into_boxed_slice(),
            at: 0,
            filled: 0,
        })
    }

    /// Makes a socket call started now end by the deadline (within the slack).
    fn set_timeouts(&mut self) -> io::Result<()> {
        let left = remaining(self.deadline)?;
        if self
            .armed
            .is_some_and(|armed| armed.abs_diff(left) <= DEADLINE_SLACK)
        {
            return Ok(());
        }
        // Forget the old value first: if setting fails halfway, it is set next time.
        self.armed = None;
        let left = Some(left);
        match &self.socket {
            Socket::Tcp(s) => {
                s.set_read_timeout(left)?;
                s.set_write_timeout(left)?;
            }
            Socket::Unix(s) => {
                s.set_read_timeout(left)?;
                s.set_write_timeout(left)?;
            }
        }
        self.armed = left;
        Ok(())
    }

    /// Closes both directions at once, so a thread blocked on the socket returns.
    pub(crate) fn shutdown(&self) {
        let _ = match &self.socket {
            Socket::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Socket::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

/// Time left before `deadline`, or `TimedOut`.
pub(crate) fn remaining(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"));
    }
    Ok(left)
}

/// A socket read or write that timed out says so as `TimedOut` (the socket layer
/// reports `WouldBlock` for an expired timeout).
fn timed_out(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::Error::new(io::ErrorKind::TimedOut, "no answer in time")
    } else {
        e
    }
}

impl Timed {
    fn read_socket(&mut self, into_buffer: bool, buf: &mut [u8]) -> io::Result<usize> {
        self.set_timeouts()?;
        let into = if into_buffer {
            &mut self.buffer[..]
        } else {
            buf
        };
        match &mut self.socket {
            Socket::Tcp(s) => s.read(into),
            Socket::Unix(s) => s.read(into),
        }
        .map_err(timed_out)
    }
}

impl Timed {
    /// Bytes read from the socket that the caller has not taken yet.
    pub(crate) fn buffered(&self) -> usize {
        self.filled - self.at
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.filled {
            if buf.len() >= self.buffer.len() {
                return self.read_socket(false, buf);
            }
            self.filled = self.read_socket(true, &mut [])?;
            self.at = 0;
        }
        let n = buf.len().min(self.filled - self.at);
        buf[..n].copy_from_slice(&self.buffer[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.set_timeouts()?;
        match &mut self.socket {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
        .map_err(timed_out)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How a client starts TLS: X.509 certificates (rustls), or pre-shared keys
/// (OpenSSL, with the `psk` feature).
#[derive(Clone)]
pub(crate) enum TlsClient {
    X509(Arc<ClientConfig>),
    #[cfg(feature = "psk")]
    Psk(Arc<super::psk::PskClient>),
}

impl TlsClient {
    /// What the URI's TLS parameters ask for.
    pub(crate) fn for_uri(uri: &NbdUri) -> Result<TlsClient, String> {
        match &uri.tls_psk_file {
            #[cfg(feature = "psk")]
            Some(file) => super::psk::PskClient::from_file(file, uri.tls_username.as_deref())
                .map(|c| TlsClient::Psk(Arc::new(c))),
            #[cfg(not(feature = "psk"))]
            Some(_) => Err(format!(
                "{uri}: this build has no pre-shared-key TLS (hscm-durable's `psk` feature; the hscm binary has it)"
            )),
            None => client_config(uri).map(TlsClient::X509),
        }
    }
}

/// A connection's stream, in the clear or inside TLS.
pub(crate) enum Stream {
    Plain(Timed),
    Tls(Box<StreamOwned<ClientConnection, Timed>>),
    #[cfg(feature = "psk")]
    Psk(Box<openssl::ssl::SslStream<Timed>>),
    /// Only for the moment TLS takes the plain stream over.
    Taken,
}

fn taken() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the stream was handed to TLS")
}

impl Stream {
    pub(crate) fn timed(&mut self) -> Option<&mut Timed> {
        match self {
            Stream::Plain(t) => Some(t),
            Stream::Tls(s) => Some(&mut s.sock),
            #[cfg(feature = "psk")]
            Stream::Psk(s) => Some(s.get_mut()),
            Stream::Taken => None,
        }
    }

    /// Whether a reply has already been read from the socket, in the clear (inside
    /// TLS, false: the bytes there are not yet the reply's).
    pub(crate) fn has_buffered(&self) -> bool {
        matches!(self, Stream::Plain(t) if t.buffered() > 0)
    }

    /// Wraps the plain stream in TLS (after the server agreed to NBD_OPT_STARTTLS)
    /// and completes the TLS handshake before the deadline.
    pub(crate) fn start_tls(self, tls: &TlsClient, name: &str) -> io::Result<Stream> {
        let Stream::Plain(timed) = self else {
            return Err(io::Error::other("TLS is already on"));
        };
        let config = match tls {
            TlsClient::X509(config) => config.clone(),
            #[cfg(feature = "psk")]
            TlsClient::Psk(client) => return Ok(Stream::Psk(Box::new(client.connect(timed)?))),
        };
        let server = ServerName::try_from(name.to_string()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a name a certificate can carry (set tls-hostname=)"),
            )
        })?;
        let conn = ClientConnection::new(config, server).map_err(io::Error::other)?;
        let mut s = StreamOwned::new(conn, timed);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(Stream::Tls(Box::new(s)))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(t) => t.read(buf),
            Stream::Tls(s) => s.read(buf),
            #[cfg(feature = "psk")]
            Stream::Psk(s) => s.read(buf),
            Stream::Taken => Err(taken()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(t) => t.write(buf),
            Stream::Tls(s) => s.write(buf),
            #[cfg(feature = "psk")]
            Stream::Psk(s) => s.write(buf),
            Stream::Taken => Err(taken()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(t) => t.flush(),
            Stream::Tls(s) => s.flush(),
            #[cfg(feature = "psk")]
            Stream::Psk(s) => s.flush(),
            Stream::Taken => Err(taken()),
        }
    }
}

/// The TLS client configuration of a URI's `tls-certificates` directory: the server
/// must present a certificate signed by `ca-cert.pem`; `client-cert.pem` and
/// `client-key.pem`, where present, prove who we are to a server that asks.
pub(crate) fn client_config(uri: &NbdUri) -> Result<Arc<ClientConfig>, String> {
    let dir = uri.tls_certificates.as_deref().ok_or_else(|| {
        format!(
            "{uri}: TLS needs the directory of the CA's certificate: add ?tls-certificates=DIR (holding ca-cert.pem, and client-cert.pem and client-key.pem if the server checks its clients)"
        )
    })?;
    let read = |name: &str| -> Result<Option<Vec<u8>>, String> {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    };
    let ca =
        read("ca-cert.pem")?.ok_or_else(|| format!("{}: no ca-cert.pem there", dir.display()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca) {
        let cert = cert.map_err(|e| pem_error(dir, "ca-cert.pem", e))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", dir.join("ca-cert.pem").display()))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "{}: holds no certificate",
            dir.join("ca-cert.pem").display()
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match (read("client-cert.pem")?, read("client-key.pem")?) {
        (Some(cert), Some(key)) => {
            super::psk::check_private(&dir.join("client-key.pem")).map_err(|e| e.to_string())?;
            let chain = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| pem_error(dir, "client-cert.pem", e))?;
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| pem_error(dir, "client-key.pem", e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("{}: {e}", dir.display()))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(format!(
                "{}: client-cert.pem and client-key.pem come together (one is missing)",
                dir.display()
            ))
        }
    };
    Ok(Arc::new(config))
}

fn pem_error(dir: &Path, file: &str, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", dir.join(file).display())
}
